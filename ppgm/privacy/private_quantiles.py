"""Differentially private quantiles, for bin edges that adapt to the data without disclosing it.

Equal-width bins over public bounds waste cells on skewed columns (a log-normal income puts almost
every record in the first bin). Quantile edges follow the data; released privately they cost a
stated part of the budget. Each quantile is chosen among public candidates (a grid over the public
bounds) by the exponential mechanism with the score |#{x < c} - alpha n|, which one record moves by
at most 1 (Smith 2011); the q quantiles of a column split the column's budget evenly (sequential
composition).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..models.noise import opendp


def private_quantiles(values, bounds: tuple, alphas: Sequence[float], epsilon: float,
                      rng: np.random.Generator | None = None, n_candidates: int = 1000) -> np.ndarray:
    """The ``alphas``-quantiles of ``values``, epsilon-DP (one record per individual), sorted.

    Parameters
    ----------
    values : array-like of float
        The column (missing values are dropped, values outside ``bounds`` clipped into them).
    bounds : (float, float)
        Public lower and upper bounds; the candidates are ``n_candidates`` evenly spaced points.
    alphas : sequence of float in (0, 1)
    epsilon : float
        Total budget of the column's quantiles.
    rng : numpy.random.Generator, optional
        None: OpenDP's private quantile mechanism. A Generator: a seeded (not private) exponential
        mechanism with the same score, for reproducible runs.

    Returns
    -------
    numpy.ndarray
        The quantiles, sorted.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(50, 10, 10_000)
    >>> q = private_quantiles(x, (0, 100), [0.5], epsilon=1.0, rng=np.random.default_rng(1))
    >>> bool(abs(q[0] - 50) < 1)
    True
    """
    lo, hi = (float(b) for b in bounds)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds: expected finite (low, high) with low < high, got {bounds!r}")
    alphas = [float(a) for a in alphas]
    if not alphas or any(not 0 < a < 1 for a in alphas):
        raise ValueError(f"alphas: expected quantile levels in (0, 1), got {alphas}")
    if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon: expected a positive number, got {epsilon!r}")
    x = np.asarray(values, dtype=float)
    x = np.clip(x[~np.isnan(x)], lo, hi)
    candidates = np.linspace(lo, hi, int(n_candidates))
    eps_each = float(epsilon) / len(alphas)
    if rng is None:
        out = [_opendp_quantile(x, candidates, a, eps_each) for a in alphas]
    else:
        below = np.searchsorted(np.sort(x), candidates, side="left")  # #{x < c}
        out = []
        for a in alphas:
            score = -np.abs(below - a * x.size)
            gumbel = rng.gumbel(size=candidates.size)
            out.append(float(candidates[np.argmax(eps_each * score / 2 + gumbel)]))
    return np.sort(np.asarray(out, dtype=float))


def _opendp_quantile(x: np.ndarray, candidates: np.ndarray, alpha: float, epsilon: float) -> float:
    dp = opendp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()

    def make(scale):
        return dp.m.make_private_quantile(*space, dp.max_divergence(), candidates.tolist(), alpha, scale)

    meas = dp.binary_search_chain(make, d_in=1, d_out=epsilon)
    if meas.map(1) > epsilon * (1 + 1e-9):  # pragma: no cover - OpenDP's search guarantees it
        raise RuntimeError("private quantile: the mechanism found costs more than its budget")
    return float(meas(x.tolist()))
