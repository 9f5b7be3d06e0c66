"""Euclidean projection onto the probability simplex (Duchi, Shalev-Shwartz, Singer, Chandra 2008)."""

from __future__ import annotations

import numpy as np


def project_simplex(v, total: float = 1.0) -> np.ndarray:
    """The point of {w >= 0, sum w = total} closest to ``v`` in Euclidean distance.

    Works on an array of any shape (projected as one flat vector) in O(n log n).

    Parameters
    ----------
    v : array-like
    total : float
        The simplex's total (1 for probabilities).

    Returns
    -------
    numpy.ndarray
        The Euclidean projection, same shape.

    Examples
    --------
    >>> project_simplex(np.array([0.5, 0.8, -0.3])).round(6).tolist()
    [0.35, 0.65, 0.0]
    """
    v = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(v)):
        raise ValueError("v: contains NaN or infinite entries")
    if not total > 0:
        raise ValueError(f"total: expected a positive number, got {total}")
    flat = v.ravel()
    u = np.sort(flat)[::-1]
    css = np.cumsum(u) - total
    idx = np.arange(1, u.size + 1)
    rho = np.flatnonzero(u - css / idx > 0)[-1]
    tau = css[rho] / (rho + 1)
    return np.maximum(flat - tau, 0.0).reshape(v.shape)
