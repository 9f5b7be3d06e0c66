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
    return project_rows(v.reshape(1, -1), total)[0].reshape(v.shape)


def project_rows(rows: np.ndarray, total: float = 1.0) -> np.ndarray:
    """:func:`project_simplex` of every row of a 2-d array at once (tables of one size projected in a
    few array operations, not one call each).

    Parameters
    ----------
    rows : numpy.ndarray
        ``(m, n)``, finite.
    total : float

    Returns
    -------
    numpy.ndarray
        ``(m, n)``, each row on the simplex.

    Examples
    --------
    >>> project_rows(np.array([[0.5, 0.8, -0.3], [2.0, 0.0, 0.0]])).round(6).tolist()
    [[0.35, 0.65, 0.0], [1.0, 0.0, 0.0]]
    """
    rows = np.asarray(rows, dtype=float)
    m, n = rows.shape
    u = -np.sort(-rows, axis=1)
    css = np.cumsum(u, axis=1) - total
    above = u - css / np.arange(1, n + 1) > 0  # true on a prefix of each sorted row (its first entry always)
    rho = n - 1 - np.argmax(above[:, ::-1], axis=1)
    tau = css[np.arange(m), rho] / (rho + 1)
    return np.maximum(rows - tau[:, None], 0.0)
