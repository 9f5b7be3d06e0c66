"""AIM's adaptive selection (McKenna, Mullins, Sheldon and Miklau, VLDB 2022): measure, fit, and
choose the next marginal where the current model is worst, under a model-size cap that grows with
the budget spent.

The loop (Algorithm 1 of the paper): all one-way tables first at Gaussian scale sigma; then rounds
that each spend 1 / (2 sigma^2) on measuring and eps^2 / 8 on choosing (zCDP), choosing among the
workload's downward closure the marginal r that maximises w_r (||n_r - N mu_r||_1 - sqrt(2 / pi)
sigma |r|) by the exponential mechanism (``ppgm.synthesis.selection.report_noisy_max``, sensitivity max w_r),
among the candidates whose junction tree with the cliques so far stays under
``max_cells * spent / rho``. When a new measurement barely moves the model (less than the noise's
expected L1 size) sigma halves and eps doubles. The last round spends exactly what is left, so the
whole run costs ``rho``. Between rounds the model is the naive fit of the measurements so far (a
clique measured twice is one table: the inverse-variance weighted mean), warm-started from the
previous round's; all of it is post-processing of released tables.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Sequence

import numpy as np

from ..core import checks
from ..core.progress import ConvergenceWarning, progress_bar
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..inference.junction_tree import JunctionTree, JunctionTreeTooLarge, _elimination_cliques
from ..learners.cgm import _naive_targets
from ..learners.mle import fit_marginals
from ..models.markov import MarkovNetwork
from ..models.measurement import Measurement
from ..models.noise import add_noise
from .selection import Selected, report_noisy_max

ALPHA = 0.9  # the paper's share of each round's budget spent on measuring
ROUNDS_PER_VARIABLE = 16  # the paper's T = 16 d: the initial per-round budget is rho / T


@dataclass
class AIMRun:
    """What :func:`aim_select` returns: the released tables, the choices and the last naive fit.

    Parameters
    ----------
    measurements : list of Measurement
        One per measured clique (repeated measurements combined), ready for the learners.
    selected : list of Selected
        The marginals chosen, in order, with how each was chosen.
    history : list of dict
        Per round: ``clique``, ``sigma``, ``epsilon``, ``rho_spent`` (cumulative), ``candidates``,
        ``annealed``, ``cells`` (the model's junction tree), ``refit_converged`` (a
        ``ConvergenceWarning`` names the rounds whose refit stopped short).
    model : MarkovNetwork
        The naive fit after the last round (the learners refit the measurements).
    released : list of Measurement
        Every measurement as released, in order (one-way tables first).
    fit : FitResult, optional
        The last round's naive fit (l2 = 1 / N): ``model`` and its history.

    Examples
    --------
    >>> AIMRun([], [], [], None, []).history
    []
    """

    measurements: list
    selected: list
    history: list
    model: MarkovNetwork | None
    released: list = field(default_factory=list)
    fit: object = None


def closure(workload: Sequence[tuple], weights: Sequence[float] | None = None) -> dict:
    """The workload's downward closure with AIM's weights: w_r = sum over workload marginals s of
    weight_s |r intersect s|, for every non-empty subset r of a workload marginal.

    Examples
    --------
    >>> w = closure([("A", "B"), ("B", "C")])
    >>> w[("B",)], w[("A", "B")], w[("A",)]
    (2.0, 3.0, 1.0)
    """
    weights = [1.0] * len(workload) if weights is None else [float(x) for x in weights]
    subsets = {tuple(r) for s in workload for k in range(1, len(s) + 1) for r in combinations(s, k)}
    return {r: float(sum(ws * len(set(r) & set(s)) for s, ws in zip(workload, weights))) for r in sorted(subsets, key=lambda r: (len(r), r))}


def jt_cells(domain: Domain, scopes: Sequence[tuple]) -> int:
    """Cells of the junction tree of ``scopes`` (the tables a fit holds), without building it.

    Examples
    --------
    >>> jt_cells(Domain(("A", "B", "C"), (2, 3, 4)), [("A", "B"), ("B", "C")])
    18
    """
    return int(sum(domain.size(c) for c in _elimination_cliques(domain, [tuple(s) for s in scopes])))


def aim_scores(counts: Sequence[np.ndarray], marginals: Sequence[np.ndarray], n: float, weights: Sequence[float],
               sigma: float) -> np.ndarray:
    """AIM's quality scores: w_r (||n_r - n mu_r||_1 - sqrt(2 / pi) sigma |r|) per candidate r.

    The first term is how badly the model's marginal ``mu_r`` (scaled by the released record count
    ``n``) answers the exact counts; the second is the L1 size the next measurement's Gaussian noise
    would add to a table of that many cells, so large tables are not chosen for their size alone.
    Only ``counts`` depends on the data: one record moves a score by at most ``w_r``.

    Parameters
    ----------
    counts : sequence of numpy.ndarray
        Exact count table of each candidate (never published).
    marginals : sequence of numpy.ndarray
        The current model's probability table of each candidate, axes as ``counts``.
    n : float
        The record count the model is scaled to (from released tables).
    weights : sequence of float
        w_r of each candidate (:func:`closure`).
    sigma : float
        Gaussian scale of the next measurement.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> aim_scores([np.array([60, 40])], [np.array([0.5, 0.5])], 100.0, [2.0], 1.0).round(3).tolist()
    [36.808]
    """
    penalty = math.sqrt(2 / math.pi) * float(sigma)
    return np.array([float(w) * (np.abs(np.asarray(c, dtype=float) - n * np.asarray(mu)).sum() - penalty * np.size(mu))
                     for c, mu, w in zip(counts, marginals, weights)])


def _combined(ms: Sequence[Measurement]) -> Measurement:
    """Repeated Gaussian measurements of one clique as one: the inverse-variance weighted mean."""
    if len(ms) == 1:
        return ms[0]
    w = np.array([1.0 / m.scale**2 for m in ms])
    values = sum(wi * np.asarray(m.values, dtype=float) for wi, m in zip(w, ms)) / w.sum()
    return Measurement(ms[0].variables, values, "gaussian", float(1.0 / math.sqrt(w.sum())))


def _measurements(released: Sequence[Measurement]) -> list[Measurement]:
    groups: dict = {}
    for m in released:
        groups.setdefault(tuple(m.variables), []).append(m)
    return [_combined(g) for g in groups.values()]


def _records(ms: Sequence[Measurement]) -> float:
    """N as the mean total of the one-way tables (released, so post-processing)."""
    return max(float(np.mean([m.values.sum() for m in ms if len(m.variables) == 1])), 1.0)


def _naive_fit(domain: Domain, ms: Sequence[Measurement], n: float, previous: MarkovNetwork | None) -> tuple:
    """The naive fit of ``ms`` (warm from ``previous``, new cliques at zero) and its calibration.

    It is fitted until every marginal cell is within a twentieth of the smallest noise scale of the
    released counts (gradient tolerance 0.05 sigma / n): the scores and the annealing test compare
    L1 errors with 0.8 sigma per cell, and a tight tolerance doubles the Newton steps on large
    models."""
    targets = _naive_targets(ms, n, project=True)
    init = None
    if previous is not None:
        have = {tuple(f.variables): f for f in previous.factors}
        init = MarkovNetwork(domain, [have.get(tuple(t.variables), Factor(t.variables, np.zeros(t.values.shape))) for t in targets])
    tol = max(1e-9, 0.05 * min(m.scale for m in ms) / n)
    fit = fit_marginals(domain, targets, l2=1.0 / n, init=init, warn=False, tol=tol)
    return fit, JunctionTree.build(domain, fit.model.scopes, max_cells=None).calibrate(fit.model)


def _marginal(cal, model: MarkovNetwork, r: tuple) -> np.ndarray:
    """The model's marginal over ``r`` (axes in ``r``'s order): from the calibration, or, when the
    out-of-clique query would need too large a table, from a junction tree that holds ``r`` as a
    clique (the size cap has already admitted it)."""
    try:
        return cal.marginal(list(r)).transpose(r).values
    except JunctionTreeTooLarge:
        zero = Factor(r, np.zeros(model.domain.shape(r)))
        grown = MarkovNetwork(model.domain, list(model.factors) + [zero])
        return JunctionTree.build(model.domain, grown.scopes, max_cells=None).calibrate(grown).marginal(list(r)).transpose(r).values


def aim_select(
    domain: Domain,
    tables: Callable[[tuple], Factor],
    workload: Sequence[tuple],
    rho: float,
    *,
    weights: Sequence[float] | None = None,
    max_cells: int = 10_000_000,
    sensitivity: float = 1.0,
    rng: np.random.Generator | None = None,
    progress: bool = True,
) -> AIMRun:
    """Run AIM's select-measure loop on exact count tables and return what it released.

    Parameters
    ----------
    domain : Domain
    tables : callable
        ``tables(clique)``: the exact count table of a clique (never published; called for the one-way
        tables and for every candidate of the workload's closure).
    workload : sequence of tuple
        The marginals the release should answer well (AIM's W).
    rho : float
        zCDP budget of the whole loop, one-way tables included (the caller charges it).
    weights : sequence of float, optional
        Per workload marginal (default 1).
    max_cells : int
        The model-size cap: junction-tree cells allowed once the whole budget is spent (80 MB of
        float64 is 10 million cells, the paper's default).
    sensitivity : float
        Public bound of one individual's weight per table.
    rng : numpy.random.Generator, optional
        None: private noise and choices (OpenDP). A Generator: reproducible, not private.
    progress : bool

    Returns
    -------
    AIMRun

    Examples
    --------
    >>> from ppgm.inference.tables import contingency_tables
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 2, 3000); x = np.stack([a, a ^ (rng.random(3000) < 0.1), rng.integers(0, 2, 3000)], 1)
    >>> dom = Domain(("A", "B", "C"), (2, 2, 2))
    >>> run = aim_select(dom, lambda c: contingency_tables(x, dom, [c])[0], [("A", "B"), ("B", "C"), ("A", "C")], 1.0,
    ...                  rng=np.random.default_rng(1), progress=False)
    >>> run.selected[0].clique, round(sum(h["rho_round"] for h in run.history), 9)
    (('A', 'B'), 1.0)
    """
    rho = checks.positive(rho, "rho")
    w = checks.positive(sensitivity, "sensitivity")
    max_cells = checks.count(max_cells, "max_cells", maximum=10**12)
    for s in workload:
        domain.check(s, "workload")
    cand = closure([tuple(s) for s in workload], weights)
    delta_w = max(cand.values()) * w  # one individual moves a score by at most w_r * w
    d = len(domain)
    T = ROUNDS_PER_VARIABLE * d
    sigma = w * math.sqrt(T / (2 * ALPHA * rho))
    eps = math.sqrt(8 * (1 - ALPHA) * rho / T)
    released: list[Measurement] = []
    counts: dict = {}

    def exact(c) -> Factor:
        if c not in counts:
            counts[c] = tables(c)
        return counts[c]

    def measure(c, s):
        table = np.asarray(exact(c).values)
        noisy = add_noise(table, "gaussian", s, rng)
        released.append(Measurement(c, np.asarray(noisy, dtype=float), "gaussian", s, integer=table.dtype.kind in "iub"))

    for v in domain.variables:
        measure((v,), sigma)
    spent = d * w * w / (2 * sigma**2)
    ms = _measurements(released)
    cells = jt_cells(domain, [tuple(m.variables) for m in ms])
    history: list = [{"clique": None, "sigma": sigma, "epsilon": 0.0, "rho_round": spent, "rho_spent": spent, "candidates": 0,
                      "annealed": False, "cells": cells}]
    n = _records(ms)
    fit, cal = _naive_fit(domain, ms, n, None)
    model = fit.model
    history[0]["refit_converged"] = bool(fit.converged)
    selected: list[Selected] = []
    bar = progress_bar(total=None, desc="AIM rounds", enabled=progress)
    last = False
    while not last:
        left = rho - spent
        step = w * w / (2 * sigma**2) + eps**2 / 8
        if left <= 1e-12 * rho:
            break
        if left < 2 * step:  # the last round spends exactly what is left
            sigma = w * math.sqrt(1 / (2 * ALPHA * left))
            eps = math.sqrt(8 * (1 - ALPHA) * left)
            step, last = left, True
        spent += step
        scopes = [tuple(m.variables) for m in ms]
        cap = max(max_cells * spent / rho, cells)  # a marginal inside the model's cliques always fits
        # inside a clique of the model the graph does not change
        offered = [r for r in cand if cal.tree.find_home(r) is not None or jt_cells(domain, scopes + [r]) <= cap]
        before = {r: _marginal(cal, model, r) for r in offered}
        noise_l1 = math.sqrt(2 / math.pi) * sigma
        scores = aim_scores([exact(r).values for r in offered], [before[r] for r in offered], n,
                            [cand[r] for r in offered], sigma)
        pick = offered[report_noisy_max(scores, eps**2 / 8, delta_w, rng)]
        measure(pick, sigma)
        ms = _measurements(released)
        n = _records(ms)
        fit, cal = _naive_fit(domain, ms, n, model)
        model = fit.model
        cells = jt_cells(domain, model.scopes)
        after = _marginal(cal, model, pick)
        annealed = n * np.abs(after - before[pick]).sum() <= noise_l1 * after.size
        selected.append(Selected(pick, len(selected), len(offered), step,
                                 f"round {len(selected) + 1}: report-noisy-max (epsilon = {eps:.4g}) over the weighted L1 errors of the "
                                 f"{len(offered)} workload marginals whose model fits {int(cap):,} cells; measured at sigma = {sigma:.4g}"))
        history.append({"clique": pick, "sigma": sigma, "epsilon": eps, "rho_round": step, "rho_spent": spent,
                        "candidates": len(offered), "annealed": bool(annealed), "cells": cells,
                        "refit_converged": bool(fit.converged)})
        if annealed and not last:
            sigma, eps = sigma / 2, eps * 2
        bar.update(1)
    bar.close()
    stuck = [i for i, h in enumerate(history) if not h["refit_converged"]]
    if stuck:
        warnings.warn(f"the naive refits after rounds {stuck} stopped before their tolerance (history[i]['refit_converged']); "
                      "those rounds scored candidates against a model short of the fit", ConvergenceWarning, stacklevel=2)
    return AIMRun(ms, selected, history, model, released, fit)
