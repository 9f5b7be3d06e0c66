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
previous round's (the measured table at its proportional-fitting update); all of it is
post-processing of released tables.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Sequence

import numpy as np

from ..core import checks
from ..core.blas_threads import stop_helper
from ..core.progress import ConvergenceWarning, progress_bar
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..inference.junction_tree import DEFAULT_MAX_CELLS, JunctionTree, JunctionTreeTooLarge, _elimination_cliques
from ..learners.cgm import _naive_targets
from ..learners.mle import MarginalOracle, fit_marginals
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
        ``ConvergenceWarning`` names the rounds whose refit stopped short), ``seconds`` (wall time of
        the round's ``sizes`` check, its ``scores`` and choice, and its ``refit``).
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


class _Sizes:
    """:func:`jt_cells` of the model's graph with one candidate added, remembered while the graph's
    edges stay the same (the elimination sees nothing else): candidates that add the same edges (a
    triple two of whose pairs are edges, and its third pair) are triangulated once, and a round that
    adds no edge triangulates nothing again."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self.pos = {v: i for i, v in enumerate(domain.variables)}
        self.graph: frozenset = frozenset()
        self.seen: dict = {}

    def edges(self, scope: Sequence) -> frozenset:
        return frozenset(combinations(sorted(self.pos[v] for v in scope), 2))

    def graph_of(self, scopes: list) -> frozenset:
        """The model's edges, as position pairs."""
        return frozenset().union(*(self.edges(c) for c in scopes))

    def model(self, scopes: list) -> None:
        """The model's scopes this round."""
        self.scopes = list(scopes)
        graph = self.graph_of(scopes)
        if graph != self.graph:
            self.graph, self.seen = graph, {}

    def cells(self, r: tuple) -> int:
        """Cells of the junction tree of the model's scopes and ``r``."""
        new = self.edges(r) - self.graph
        got = self.seen.get(new)
        if got is None:
            got = self.seen[new] = jt_cells(self.domain, self.scopes + [r])
        return got


def _sizes_of(variables: tuple, cards: tuple, scopes: list, candidates: list) -> list:
    """:meth:`_Sizes.cells` of each candidate on the model ``scopes`` (run in a worker process)."""
    sizes = _Sizes(Domain(variables, cards))
    sizes.model(scopes)
    return [sizes.cells(r) for r in candidates]


class _SizesAhead:
    """The next round's size checks, shared with a worker process: the elimination is pure Python (it
    holds the interpreter), so a second core needs a second process. The checks are submitted in chunks
    before the refit (whose array passes leave a core free) and collected at the next round's start,
    where the round takes the chunks the worker has not reached, from the back, while the worker
    finishes from the front. CHILD's 3-way workload: 51,280 eliminations, 24 s of a release's rounds. The
    worker runs the same function on the same scopes, so the sizes, and the rounds, are the same; with
    one core, off Linux, or with no worker (a daemonic process), the round checks its candidates itself."""

    CHUNKS = 16  # pieces of a round's checks (the round and the worker meet in the middle)

    def __init__(self, domain: Domain, candidates: Sequence[tuple]):
        self.domain, self.candidates = domain, list(candidates)
        # a forked worker only (Linux): a spawned one would import the caller's script again, and fork is
        # unsafe with macOS's system libraries
        self.enabled = (os.cpu_count() or 1) > 1 and sys.platform.startswith("linux")
        self.pool: ProcessPoolExecutor | None = None
        self.pending: tuple | None = None

    def submit(self, scopes: list, sizes: _Sizes) -> None:
        """Start the checks of the model ``scopes`` for the candidates that no clique of it holds (one per
        set of edges the candidate adds: :class:`_Sizes` answers the others from it)."""
        self.pending = None
        graph = sizes.graph_of(scopes)
        if not self.enabled or graph == sizes.graph:
            return  # (the same graph: the round's own cache holds them)
        cliques = [frozenset(c) for c in _elimination_cliques(self.domain, scopes)]
        firsts: dict = {}
        for r in self.candidates:
            if not any(c.issuperset(r) for c in cliques):
                firsts.setdefault(sizes.edges(r) - graph, r)
        todo = list(firsts.values())
        if not todo:
            return
        size = -(-len(todo) // self.CHUNKS)
        chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
        try:
            if self.pool is None:
                stop_helper()  # the worker is forked at the first submission: from a process of one thread
                self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            args = (tuple(self.domain.variables), tuple(self.domain.cards), list(scopes))
            futures = [(chunk, self.pool.submit(_sizes_of, *args, chunk)) for chunk in chunks]
        except Exception:  # no worker here (a daemonic process, no process support): the rounds check themselves
            self.enabled = False
            return
        self.pending = (list(scopes), futures)

    def collect(self, scopes: list, sizes: _Sizes) -> None:
        """Fill ``sizes``' cache for the model ``scopes`` (after :meth:`_Sizes.model` of them): the chunks the
        worker has not started are checked here, from the back, the others read from the worker."""
        pending, self.pending = self.pending, None
        if pending is None or pending[0] != list(scopes):
            return
        futures = list(pending[1])
        while futures and futures[-1][1].cancel():  # not started by the worker: this round checks it
            for r in futures.pop()[0]:
                sizes.cells(r)
        for chunk, future in futures:
            try:
                values = future.result()
            except Exception:  # a lost worker: the round checks its candidates itself
                self.enabled = False
                return
            for r, v in zip(chunk, values):
                sizes.seen.setdefault(sizes.edges(r) - sizes.graph, v)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


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


class _Refit:
    """The naive fit between rounds (l2 = 1 / N), warm from the previous round's model (the measured
    table at its proportional-fitting update, ``known`` below), on one oracle while the measured
    cliques stay the same (a clique measured again).

    A refit between rounds stops when the scores that choose the next round are settled: every
    measured table's gradient, the distance of its marginal from where the fit will put it, within
    ``SETTLE`` times the smallest noise scale in L1 (counts). One record moves the next round's
    Gumbel noise by 3 sigma / w_r in the L1 units of candidate r (epsilon = 0.67 / sigma), so that
    is a third of the noise at sigma and two thirds after annealing (half that tolerance took 12-20% more
    Fisher products and chose the same marginals on most seeded releases). The last round's refit, the model
    ``estimator="rounds"`` returns, converges: every cell within a twentieth of the smallest noise
    scale (gradient 0.05 sigma / N)."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self.oracle: MarginalOracle | None = None

    def __call__(self, ms: Sequence[Measurement], n: float, previous: MarkovNetwork | None, final: bool = False,
                 known: dict | None = None) -> tuple:
        """The fit of ``ms``, its calibration, and the junction tree of the model's scopes (the model's
        size and which candidates lie inside its cliques). The fit and the calibration run on the
        previous round's tree while its cliques hold the new table and it is no larger: its plans are
        made once (on a tree of millions of cells they cost several calibrations).

        ``known``: the previous model's marginals of the tables whose targets changed (the round's
        measurement, already computed for its score). Each such table starts at its previous potential
        (zero when new) plus ``log((target + 1 / n) / (marginal + 1 / n))``, the iterative proportional
        fitting update of that table: it brings the model's marginal there to the target (up to one
        pseudo-record) before any calibration, where a zero start left Newton to find it (Adult, rho
        0.5, 2-way: 3,582 -> 3,327 Fisher products and 825 -> 690 calibrations over the rounds)."""
        domain = self.domain
        targets = _naive_targets(ms, n, project=True)
        scopes = [tuple(t.variables) for t in targets]
        struct = JunctionTree.build(domain, scopes, max_cells=None)
        if self.oracle is None or [tuple(s) for s in self.oracle.params.scopes] != scopes:
            old = self.oracle.tree if self.oracle is not None and self.oracle.exact else None
            keep = old is not None and old.cells <= struct.cells and all(old.find_home(c) is not None for c in scopes)
            tree = old if keep else struct if struct.cells <= DEFAULT_MAX_CELLS else None
            self.oracle = MarginalOracle(domain, scopes, tree=tree)
            self.oracle.remember = True  # the scores read the fit's last calibration
        init = None
        if previous is not None:
            have = {tuple(f.variables): f for f in previous.factors}
            moved = known or {}

            def start(c: tuple, t: Factor) -> np.ndarray:
                """The previous potential (zero when new), plus the IPF update where the target moved."""
                psi = have[c].values if c in have else np.zeros(t.values.shape)
                return psi + np.log((t.values + 1.0 / n) / (np.clip(moved[c], 0, None) + 1.0 / n)) if c in moved else psi

            init = MarkovNetwork(domain, [Factor(c, start(c, t)) for c, t in zip(scopes, targets)])
        sigma = min(m.scale for m in ms)
        tol = max(1e-9, 0.05 * sigma / n)
        settle = None if final or init is None else SETTLE * sigma / n
        fit = fit_marginals(domain, targets, l2=1.0 / n, init=init, oracle=self.oracle, warn=False, tol=tol, table_tol=settle)
        if not self.oracle.exact:
            return fit, struct.calibrate(fit.model), struct
        return fit, self.oracle.calibration(self.oracle.params.join([f.values for f in fit.model.factors])), struct


SETTLE = 1.0  # a refit between rounds stops with every table's L1 gradient within this many smallest noise scales


def _marginals(cal, model: MarkovNetwork, rs: Sequence[tuple]) -> dict:
    """The model's marginals over the candidates ``rs`` from one calibration, batched
    (:meth:`ppgm.inference.calibration.Calibration.marginals`: each clique summed once per set of
    variables the candidates need from it, the messages between cliques shared by the candidates
    that carry the same variables through them)."""
    return {r: f.values for r, f in zip(rs, cal.marginals(rs))}


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
    refit = _Refit(domain)
    t0 = time.perf_counter()
    fit, cal, struct = refit(ms, n, None)
    model = fit.model
    history[0]["refit_converged"] = bool(fit.converged)
    history[0]["seconds"] = {"sizes": 0.0, "scores": 0.0, "refit": time.perf_counter() - t0}
    selected: list[Selected] = []
    sizes = _Sizes(domain)
    bar = progress_bar(total=None, desc="AIM rounds", enabled=progress)
    last = final = False
    ahead = _SizesAhead(domain, list(cand))
    try:
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
            t0 = time.perf_counter()
            sizes.model(scopes)
            ahead.collect(scopes, sizes)
            offered = [r for r in cand if struct.find_home(r) is not None or sizes.cells(r) <= cap]
            t1 = time.perf_counter()
            before = _marginals(cal, model, offered)
            noise_l1 = math.sqrt(2 / math.pi) * sigma
            scores = aim_scores([exact(r).values for r in offered], [before[r] for r in offered], n,
                                [cand[r] for r in offered], sigma)
            pick = offered[report_noisy_max(scores, eps**2 / 8, delta_w, rng)]
            t2 = time.perf_counter()
            measure(pick, sigma)
            ms = _measurements(released)
            n = _records(ms)
            if not last:  # the next round's size checks, in a worker while this refit runs
                ahead.submit([tuple(m.variables) for m in ms], sizes)
            fit, cal, struct = refit(ms, n, model, final=last, known={pick: before[pick]})
            final = last
            seconds = {"sizes": t1 - t0, "scores": t2 - t1, "refit": time.perf_counter() - t2}
            model = fit.model
            cells = struct.cells
            after = _marginal(cal, model, pick)
            annealed = n * np.abs(after - before[pick]).sum() <= noise_l1 * after.size
            selected.append(Selected(pick, len(selected), len(offered), step,
                                     f"round {len(selected) + 1}: report-noisy-max (epsilon = {eps:.4g}) over the weighted L1 errors of the "
                                     f"{len(offered)} workload marginals whose model fits {int(cap):,} cells; measured at sigma = {sigma:.4g}"))
            history.append({"clique": pick, "sigma": sigma, "epsilon": eps, "rho_round": step, "rho_spent": spent,
                            "candidates": len(offered), "annealed": bool(annealed), "cells": cells,
                            "refit_converged": bool(fit.converged), "seconds": seconds})
            if annealed and not last:
                sigma, eps = sigma / 2, eps * 2
            bar.update(1)
    finally:
        ahead.close()
    bar.close()
    if selected and not final:  # the budget ran out at a round's start: the settled model converges
        t0 = time.perf_counter()
        fit, cal, struct = refit(ms, n, model, final=True)
        model = fit.model
        history[-1]["refit_converged"] = bool(fit.converged)
        history[-1]["seconds"]["refit"] += time.perf_counter() - t0
    stuck = [i for i, h in enumerate(history) if not h["refit_converged"]]
    if stuck:
        warnings.warn(f"the naive refits after rounds {stuck} stopped before their tolerance (history[i]['refit_converged']); "
                      "those rounds scored candidates against a model short of the fit", ConvergenceWarning, stacklevel=2)
    return AIMRun(ms, selected, history, model, released, fit)
