"""Learning a Markov network from noisy clique tables: naive MLE and EM for collective graphical
models (Bernstein, McKenna, Sun, Sheldon, Hay, Miklau, ICML 2017).

E-step. The approximate MAP problem (Problem 6 of the paper)

    max_{n in M_N}  theta . n + H(n) + sum_C log p(y_C | n_C)

is solved on the junction tree (exact entropy and marginal polytope; loopy BP and Bethe when the
tree is too large). Two solvers share it:

* ``estep="dual"`` (default): for Gaussian noise -r^2 / (2 s^2) = min_l (l r + s^2 l^2 / 2) and for
  Laplace noise -|r| / b = min_{|l| <= 1/b} l r, so Problem 6 equals the smooth convex problem
  min_l  l . y + sum s^2 |l|^2 / 2 + N log Z(theta - l)  (box |l| <= 1/b for Laplace), solved by
  L-BFGS-B with one calibration per evaluation. The Laplace kink is handled exactly by the box;
  its solution n = N mu(theta - l*) is the fixed point of non-linear BP.
* ``estep="nlbp"``: Algorithm 1 as printed, theta' = theta + grad_n log p(y | n), n' = N mu(theta'),
  n <- (1 - alpha) n + alpha n', with the Laplace kink smoothed (pseudo-Huber, ``smoothing``).

M-step: the maximum-likelihood fit to the expected counts (``ppgm.learners.mle.fit_marginals``), warm-started
at theta - lambda (whose marginals are the E-step's exactly) and improved by a few truncated Newton
steps on the gauge-free parameters (``ppgm.learners.gauge``): with an L2 weight of order 1 / N, the penalty is
the only curvature along the gauge directions, where L-BFGS spent its iterations.

Start and stop (the defaults): the naive MLE's L2 weight, CGM-EM's start, and the number of EM
iterations are chosen from the release by simulating releases like it (``ppgm.learners.release_rule``,
:func:`release_l2`, :func:`ppgm.learners.em_rules.release_iterations`): EM's MAP E-step converges to a point that overfits
the noise, or on sparse tables to one worse than its start, so the stopping time is a regulariser.
The E-step runs with Laplace noise moment-matched to a Gaussian. ``docs/explain/cgm-em.md`` says what these
defaults are, why, and what they were measured against.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Callable, Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, minimize

from ..core import checks
from ..core.blas_threads import one_blas_thread
from ..core.progress import ConvergenceWarning, progress_bar
from ..core.rng import as_generator
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..inference.junction_tree import Calibration
from ..models.markov import MarkovNetwork
from ..models.measurement import Measurement
from ..models.tying import Tying
from .em_rules import MSTEP_MAX_ITER, MSTEP_RTOL, _em_loop, release_iterations, release_mstep_l2
from .krylov import pcg
from .mle import FitResult, MarginalOracle, _armijo, fit_marginals, forcing, newton_applies
from .projection import project_rows
from .release_rule import N_BOOT, STEP, Choice, UndecidedWarning, choose_l2, criterion_score, extrapolate, simulated_release

ESTEP_REL, ESTEP_CAP = 1e-2, 1e-5  # adaptive E-step tolerance: min(cap, rel * last change)
# EM's start, the calibrated naive fit, to a gradient of 1e-4 (its own default is 1e-7): EM moves every
# marginal by more in its first iteration; tuning seeds 0-2 of the grid (chain N = 1e4 / 1e5 / 1e6,
# Erdos-Renyi N = 1e5 / 1e6): the same KL to 4-5 digits, 5-10% fewer calibrations in all
INIT_TOL = 1e-4
TIED_MSTEP_ITER = 20  # Newton steps a tied M-step may take (it meets mstep_tol in 5-15 when warm-started)
PILOT = 1.0  # the release-based rule's pilot: the paper's naive fit, l2 = PILOT / N ...
PILOT_TOL = 1e-9  # ... solved to this gradient (the same pilot, and the same simulated releases, from any start)


def _check_measurements(domain: Domain, measurements: Sequence[Measurement]) -> list[Measurement]:
    ms = list(measurements)
    if not ms:
        raise ValueError("measurements: expected at least one noisy table")
    seen = set()
    for i, m in enumerate(ms):
        if not isinstance(m, Measurement):
            raise TypeError(f"measurements[{i}]: expected a ppgm Measurement, got {type(m).__name__}")
        for c in m.cliques:
            domain.check(c, f"measurements[{i}].variables")
            if m.shape != domain.shape(c):
                raise ValueError(f"measurements[{i}]: clique {c} needs shape {domain.shape(c)}, got {m.shape}")
            key = frozenset(c)
            if key in seen:
                raise ValueError(f"measurements[{i}]: clique {c} is measured twice; combine the tables first")
            seen.add(key)
    return ms


PLAUSIBLE_SD = 50.0  # a noisy cell farther than this many noise sd from [0, N] cannot come from the release


def _check_plausible(ms: Sequence[Measurement], N: float | None) -> None:
    """Refuse a release whose cells no noise law could produce: beyond [-50 sd, k N + 50 sd] (k: cliques
    pooled in the table), with N the given or released count, else the median of the tables' totals
    (the mean would follow the corrupted cell). Laplace and Gaussian noise exceed 50 sd with
    probability below 1e-21."""
    known = [m.n for m in ms if m.n is not None]
    ref = N if N is not None else (known[0] if known else float(np.median([m.values.sum() / len(m.cliques) for m in ms])))
    for i, m in enumerate(ms):
        sd = float(np.sqrt(m.variance)) if m.noise != "none" else 0.0
        k = len(m.cliques)
        lo, hi = -PLAUSIBLE_SD * sd - 1e-9, k * max(float(ref), 0.0) + PLAUSIBLE_SD * sd + 1e-9 * max(1.0, k * float(ref))
        worst = m.values[(m.values < lo) | (m.values > hi)]
        if worst.size:
            raise ValueError(f"measurements[{i}]: a cell of {float(worst[np.argmax(np.abs(worst))]):.4g} in the table over "
                             f"{m.variables} is implausible for N = {float(ref):,.0f} records and noise sd {sd:.3g} (outside "
                             f"-{PLAUSIBLE_SD:g} sd .. {k} N + {PLAUSIBLE_SD:g} sd); the release is corrupted, or N is wrong")


def _scopes(ms: Sequence[Measurement]) -> list[tuple]:
    """The model's cliques: every measurement's (a pooled table's members, as written)."""
    return [c for m in ms for c in m.cliques]


def _observation(ms: Sequence[Measurement]) -> sparse.csr_matrix | None:
    """P with clique cells = P @ measurement cells' duals: the 0/1 map that copies each measured cell
    to the same cell of every clique it counts (None when no table pools several cliques)."""
    if all(m.members is None for m in ms):
        return None
    rows, cols = [], []
    row0 = col0 = 0
    for m in ms:
        cells = m.values.size
        for _ in m.cliques:
            rows.append(row0 + np.arange(cells))
            cols.append(col0 + np.arange(cells))
            row0 += cells
        col0 += cells
    r, c = np.concatenate(rows), np.concatenate(cols)
    return sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(row0, col0))


def population_size(measurements: Sequence[Measurement]) -> float:
    """N from the measurements: the released record count if any carries it, otherwise the
    inverse-variance weighted mean of the tables' totals (each total is N plus noise).

    Parameters
    ----------
    measurements : sequence of Measurement

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Totals that do not give a positive count.

    Examples
    --------
    >>> ys = [Measurement(("A",), np.array([40.0, 61.0]), "laplace", 1.0),
    ...       Measurement(("B",), np.array([70.0, 29.0]), "laplace", 1.0)]
    >>> population_size(ys)
    100.0
    """
    known = [m.n for m in measurements if m.n is not None]
    if known:
        return float(known[0])
    k = np.array([len(m.cliques) for m in measurements], dtype=float)  # a pooled table counts every record k times
    totals = np.array([m.values.sum() for m in measurements]) / k
    var = np.array([max(m.variance, 1e-12) * m.values.size for m in measurements]) / k**2
    N = float(np.sum(totals / var) / np.sum(1 / var))
    if N <= 0:
        raise ValueError("measurements: the tables' totals do not give a positive record count; pass N")
    return N


MAX_RECORDS = 2.0**53  # counts above this are not exact in floating point (and no data set has them)


def _resolve_n(ms: Sequence[Measurement], N: float | None) -> float:
    """N given (checked) or estimated from the tables, after checking the release is plausible for it."""
    N = None if N is None else checks.positive(N, "N")
    _check_plausible(ms, N)
    n = population_size(ms) if N is None else N
    if n > MAX_RECORDS:
        where = "" if N is not None else " (estimated from the tables' totals)"
        raise ValueError(f"N: {n:.4g} records{where} is implausible (more than 2**53); the release is corrupted, or give N")
    return n


L2_RULES = ("release", "paper", "calibrated")


def _check_l2(l2, allow_rules: bool) -> float | str | None:
    if l2 is None or (allow_rules and isinstance(l2, str) and l2 in L2_RULES):
        return l2
    if isinstance(l2, str):
        options = f"a number, None or one of {L2_RULES}" if allow_rules else "a number or None"
        raise ValueError(f"l2: expected {options}, got {l2!r}")
    return checks.non_negative(l2, "l2")


def _naive_targets(ms: Sequence[Measurement], N: float, project: bool) -> list[Factor]:
    """y / (k N) per clique (a pooled table gives each of its k cliques that share), projected onto the
    simplex (tables of one size together) or raw."""
    raw = [m.values / (N * len(m.cliques)) for m in ms]
    if project:
        by_size: dict = {}
        for i, v in enumerate(raw):
            by_size.setdefault(v.size, []).append(i)
        for idx in by_size.values():
            rows = project_rows(np.stack([raw[i].ravel() for i in idx]))
            for i, row in zip(idx, rows):
                raw[i] = row.reshape(raw[i].shape)
    return [Factor(c, v) for m, v in zip(ms, raw) for c in m.cliques]


def _checked_start(model: MarkovNetwork | None, ms: Sequence[Measurement], name: str) -> MarkovNetwork | None:
    """A warm start checked against the measurements' cliques (one factor per clique, in order)."""
    if model is None:
        return None
    if not isinstance(model, MarkovNetwork) or [tuple(f.variables) for f in model.factors] != [tuple(c) for c in _scopes(ms)]:
        raise ValueError(f"{name}: expected a MarkovNetwork with one factor per measured clique, in the measurements' order")
    return model


@one_blas_thread
def naive_refit(domain: Domain, ms: Sequence[Measurement], N: float, tie: Tying | None = None, project: bool = True,
                tol: float = 1e-4, oracle: MarginalOracle | None = None) -> Callable[[list, float, MarkovNetwork | None], MarkovNetwork]:
    """The naive MLE as ``refit(measurements, l2, init)`` for :func:`ppgm.learners.release_rule.choose_l2`: one
    oracle for the structure of ``ms``, fits to gradient ``tol``, warm-started at ``init``.

    Parameters
    ----------
    domain : Domain
    ms : sequence of Measurement
        Any release of the structure (fixes the cliques).
    N : float
    tie : Tying, optional
    project : bool
    tol : float
    oracle : MarginalOracle, optional
        A prebuilt oracle for the structure of ``ms``.

    Returns
    -------
    callable

    Examples
    --------
    >>> ys = [Measurement(("A", "B"), np.array([[40.0, 10.0], [10.0, 40.0]]), "laplace", 1.0)]
    >>> d = Domain(("A", "B"), (2, 2))
    >>> naive_refit(d, ys, 100.0)(ys, 0.01, None).scopes
    [('A', 'B')]
    """
    oracle = oracle or MarginalOracle(domain, _scopes(ms))

    def refit(ys: list, l2: float, init: MarkovNetwork | None) -> MarkovNetwork:
        return fit_marginals(domain, _naive_targets(ys, N, project), l2=l2, init=init, oracle=oracle, tol=tol, tied=tie,
                             warn=False, check_targets=project).model
    return refit


@one_blas_thread
def naive_mle(
    domain: Domain,
    measurements: Sequence[Measurement],
    N: float | None = None,
    l2: float | str | None = None,
    project: bool = True,
    max_iter: int = 1000,
    tol: float = 1e-7,
    tied: Sequence | Tying | None = None,
    seed=0,
    n_boot: int = N_BOOT,
    criterion: str = "kl",
    oracle: MarginalOracle | None = None,
    warm_start: MarkovNetwork | None = None,
) -> FitResult:
    """The paper's baseline: treat y_C / N as marginals (projected onto the simplex) and fit them.

    Parameters
    ----------
    l2 : float, "release", "paper" or "calibrated", optional
        Weight of ``l2 ||theta||^2`` (per record; with ``tied``, on the shared tables, each once).
        Default (None or ``"release"``): chosen from the release by a parametric bootstrap
        (:func:`release_l2`: simulated releases from the ``"paper"`` fit, refitted at candidate
        weights); ``"paper"``: ``1 / N``, the paper's baseline; ``"calibrated"``:
        :func:`noise_calibrated_l2`, which grows with the noise.
    project : bool
        Project each y_C / N onto the probability simplex first (Duchi et al. 2008). Without it the
        raw, possibly negative and inconsistent, pseudo-marginals enter the likelihood (``l2 > 0``
        is then required for the fit to exist).
    tied : list of groups of cliques, optional
        Cliques that share one log-potential (``ppgm.models.tying``): the fit pools each group's tables.
    seed : int or numpy.random.Generator
        Randomness of the release-based rule's simulated releases (same seed, same weight).
    n_boot : int
        Simulated releases of that rule.
    criterion : {"kl", "tv"}
        The rule's score of a refit against its simulated truth: KL (default) or, for users scored on
        workload error (as AIM is), the mean total variation over the released cliques
        (:func:`ppgm.learners.release_rule.tv_from`).
    oracle : MarginalOracle, optional
        A prebuilt oracle for the measurements' cliques (:class:`ppgm.learners.mle.MarginalOracle`), for callers that
        fit the same structure again (CGM-EM's start): its junction tree and gauge are built once.
    warm_start : MarkovNetwork, optional
        A network with the measurements' cliques (in order) near their naive fit, such as AIM's last
        round: the rule's pilot, its refits and the fit start from it (and the pilot) instead of
        cold. A cold fit at a small weight follows the path of weights from 1e-2 down, which on a
        model of millions of junction-tree cells costs as much as several warm refits.

    Returns
    -------
    FitResult
        The fitted network, the optimiser's trace, the weight used (``l2``) and, for the release-based
        rule, its criterion (``selection``); a fit that stops at ``max_iter`` raises a
        ``ppgm.ConvergenceWarning``.

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.inference.marginals import infer
    >>> truth = third_order_chain(4, 2, seed=0)
    >>> ys = [Measurement(f.variables, 1000 * f.values, "laplace", 1.0) for f in infer(truth).factor_marginals()]
    >>> fit = naive_mle(truth.domain, ys, l2="paper")
    >>> len(fit.model.factors), fit.l2   # one per measured clique; 1 / N
    (6, 0.001)
    """
    ms = _check_measurements(domain, measurements)
    N = _resolve_n(ms, N)
    l2 = _check_l2(l2, allow_rules=True)
    tie = tied if isinstance(tied, Tying) or tied is None else Tying.build(domain, _scopes(ms), tied)
    max_iter, tol = checks.count(max_iter, "max_iter"), checks.positive(tol, "tol")
    project = checks.flag(project, "project")
    criterion_score(criterion)  # checks the name before any work
    selection = None
    oracle = oracle or MarginalOracle(domain, _scopes(ms))  # one junction tree and gauge for the rule and the fit
    init = _checked_start(warm_start, ms, "warm_start")
    if l2 is None or l2 == "release":
        pilot = Pilot.of(domain, ms, N, tie, project, oracle, criterion, init=init) if init is not None and oracle.exact else None
        choice = release_l2(domain, ms, N, tie, project, seed, n_boot, oracle=oracle, criterion=criterion, pilot=pilot)
        l2, selection = choice.value, choice.as_record()
        init = pilot.model if pilot is not None else init
    elif l2 == "calibrated":
        l2 = noise_calibrated_l2(ms, N, tie)
    elif l2 == "paper":
        l2 = 1.0 / N
    l2 = float(l2)
    if not project and l2 <= 0:
        raise ValueError("l2: the unprojected naive MLE needs l2 > 0 (raw pseudo-marginals need not sum to one)")
    fit = fit_marginals(domain, _naive_targets(ms, N, project), l2=l2, max_iter=max_iter, tol=tol, check_targets=project,
                        tied=tie, warn=False, oracle=oracle, init=init)
    if not fit.converged:
        warnings.warn(f"naive MLE: the optimiser stopped after {len(fit.history)} iterations before its tolerance was met "
                      f"(max_iter={max_iter}); the fit is approximate", ConvergenceWarning, stacklevel=2)
    return FitResult(fit.model, fit.objective, fit.converged, fit.history, l2, selection)


@dataclass(frozen=True)
class Pilot:
    """The release-based rules' simulated truth and the naive refit they share (built once per fit):
    the naive fit of the release at ``PILOT / N``, its refit callable, the criterion against the pilot
    on the same oracle (KL, :func:`ppgm.learners.release_rule.kl_from`, or mean TV over the released cliques,
    :func:`ppgm.learners.release_rule.tv_from`), and the pilot's calibration (every simulated release is drawn
    from it)."""

    refit: Callable
    model: MarkovNetwork
    score: Callable
    calibration: Calibration
    oracle: MarginalOracle
    criterion: str = "kl"
    warm: bool = False

    @classmethod
    def of(cls, domain: Domain, ms: Sequence[Measurement], N: float, tie: Tying | None = None, project: bool = True,
           oracle: MarginalOracle | None = None, criterion: str = "kl", init: MarkovNetwork | None = None) -> "Pilot":
        """The pilot of release ``ms`` (the oracle must be exact). ``init``: a network with the release's
        scopes near its naive fit to start the pilot from (then ``warm``: the rules' refits start from the
        pilot, not cold). The pilot is solved to ``PILOT_TOL``, far below the refits' tolerance: every
        simulated release is sampled from it, so a pilot that stopped anywhere within the refits' ``1e-4``
        drew other records from another start, and the rules' choices moved with it."""
        factory = criterion_score(criterion)
        oracle = oracle or MarginalOracle(domain, _scopes(ms))
        refit = naive_refit(domain, ms, N, tie, project, oracle=oracle)
        model = naive_refit(domain, ms, N, tie, project, tol=PILOT_TOL, oracle=oracle)(list(ms), PILOT / N, init)
        return cls(refit, model, factory(model, oracle), oracle.tree.calibrate(model), oracle, criterion,  # type: ignore[union-attr]  # exact
                   init is not None)

    @property
    def start(self) -> MarkovNetwork | None:
        """Where the rules' refits of a release start: the pilot when it was warm-started, else cold (None)."""
        return self.model if self.warm else None


@one_blas_thread
def release_l2(domain: Domain, ms: Sequence[Measurement], N: float, tie: Tying | None = None, project: bool = True,
               seed=0, n_boot: int = N_BOOT, pilot: Pilot | None = None, oracle: MarginalOracle | None = None,
               correct: bool = False, criterion: str = "kl") -> Choice:
    """The naive MLE's L2 weight chosen from the release (:func:`ppgm.learners.release_rule.choose_l2`): the
    pilot is the paper's fit (``1 / N``), candidates run from ``sqrt(10)`` times
    :func:`noise_calibrated_l2` down in half-decades. Where the junction tree is too large to sample
    and score exactly, the calibrated weight is returned with an ``UndecidedWarning``.

    ``correct=True`` adds a second level that removes the pilot's own noise by extrapolation
    (:func:`ppgm.learners.release_rule.extrapolate`): ``n_boot`` releases simulated from the pilot give
    second-level pilots (their ``1 / N`` fits), one release simulated from each is refitted on the
    same lattice of weights and scored against its own pilot. It fixes the dense families' worst
    cells but is noisier than the first level and lost elsewhere (a tied chain, trees at large N), so
    it is not the default (``docs/explain/cgm-em.md``, "The naive weight: a parametric bootstrap").

    Parameters
    ----------
    domain : Domain
    ms : sequence of Measurement
    N : float
    tie : Tying, optional
    project : bool
    seed : int or numpy.random.Generator
    n_boot : int
    pilot : Pilot, optional
        A pilot already built for this release (CGM-EM shares one between its two rules).
    oracle : MarginalOracle, optional
        One built for the release's cliques (the caller's final fit reuses it).
    correct : bool
        Apply the second-level correction (2-4x the cost of the first level).
    criterion : {"kl", "tv"}
        What a refit is scored by against its pilot: KL(pilot || refit) (default) or the mean total
        variation over the released cliques, for users scored on workload error. A given ``pilot``
        brings its own.

    Returns
    -------
    Choice
        With ``extrapolation`` (the two levels' weights) when corrected.

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.learners.release_rule import simulated_release
    >>> truth = third_order_chain(4, 3, seed=0)
    >>> ms = simulated_release(truth, [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 6.0)
    ...                                for f in truth.factors], 2000, np.random.default_rng(1))
    >>> ch = release_l2(truth.domain, ms, 2000.0)
    >>> ch.decided, ch.scores.shape[0]
    (True, 3)
    >>> two = release_l2(truth.domain, ms, 2000.0, correct=True)
    >>> two.extrapolation is None or set(two.extrapolation) == {"first", "second", "raw"}   # None at the floor
    True
    """
    checks.flag(correct, "correct")
    criterion_score(criterion)  # checks the name
    calibrated = noise_calibrated_l2(ms, N, tie)
    if pilot is None:
        oracle = oracle or MarginalOracle(domain, _scopes(ms))
        if not oracle.exact:
            warnings.warn("L2 weight chosen from the release: the junction tree is too large to simulate the release "
                          "exactly; using the noise-calibrated weight instead", UndecidedWarning, stacklevel=3)
            return Choice(calibrated, np.array([calibrated]), np.zeros((1, 1)), False, "junction tree too large: calibrated weight",
                          criterion=criterion)
        pilot = Pilot.of(domain, ms, N, tie, project, oracle, criterion)
    rng = as_generator(seed)
    first = choose_l2(ms, N, pilot.refit, pilot.model, upper=STEP * calibrated, lower=1.0 / N, n_boot=n_boot, seed=rng,
                      score=pilot.score, simulate=lambda r: simulated_release(pilot.model, ms, N, r, pilot.calibration),
                      start=pilot.start, threads=True)
    first = replace(first, criterion=pilot.criterion)
    if not correct or not first.decided or first.value <= (1 + 1e-9) / N:
        return first  # at the floor the correction cannot move it: the second level's weight is at least the floor
    # second level: pilots of releases simulated from the pilot, one release from each. The pilots are cold
    # fits (Pilot.of): at the tiny weight 1 / N a cold fit follows its path of weights, while a start at the
    # first pilot is a rough point in the wrong place (3-5x slower on the third-order chain at epsilon 0.1)
    seconds = [Pilot.of(domain, simulated_release(pilot.model, ms, N, rng, pilot.calibration), N, tie, project, pilot.oracle,
                        pilot.criterion)
               for _ in range(n_boot)]
    draws = iter(seconds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndecidedWarning)  # the first level has decided; the second is a correction
        # it starts a half-decade above the first level's weight, on the same lattice of weights (the range grows
        # upwards, cold, while the largest weight tried scores best)
        second = choose_l2(ms, N, pilot.refit, pilot.model, upper=first.value * STEP, lower=1.0 / N,
                           n_boot=n_boot, seed=rng,
                           score=[p.score for p in seconds],
                           simulate=lambda r: simulated_release((p := next(draws)).model, ms, N, r, p.calibration), threads=True)
    return extrapolate(first, second, lower=1.0 / N)


@dataclass(frozen=True)
class CGMResult:
    """Outcome of :func:`cgm_em`.

    Attributes
    ----------
    model : MarkovNetwork
        The learned network.
    counts : list of numpy.ndarray
        The last E-step's expected clique counts n_C, one per clique in measurement order (a pooled
        table's members in the order written).
    N : float
    history : list of dict
        Per EM iteration: ``objective`` (the approximate log marginal likelihood of the noisy tables
        under the parameters entering that iteration, Proposition 5 maximised over n, minus the
        penalty N l2 ||theta||^2, under the E-step's noise model: the quantity EM increases),
        ``change`` (largest change of a clique marginal), ``estep_evals``, ``estep_converged`` (the
        E-step solver's own test passed; a last E-step that did not raises a ``ConvergenceWarning``),
        ``mstep_iters``; the last record also has ``stopped``, why EM stopped (``max_iter`` is the
        intended stop at the defaults: EM's path regularises, see :func:`cgm_em`).
    selection : dict
        What the release-based rules chose (``"l2"``: the naive start's weight, ``"iterations"``: the EM
        iteration count), each with its candidates and mean bootstrap scores.
    l2 : float, optional
        The M-step's L2 weight per record (the noise-aware default, the given number, or the release's
        choice with ``l2="release"``).
    """

    model: MarkovNetwork
    counts: list
    N: float
    history: list = field(default_factory=list)
    selection: dict = field(default_factory=dict)
    l2: float | None = None


def _pooled(ms: Sequence[Measurement], tie: "Tying | None") -> np.ndarray:
    """How many cliques each measurement's parameters pool: its tied group's size (``tie`` indexes the
    cliques of :func:`_scopes`), or the cliques it sums when released pooled; 1 when free."""
    per_clique = np.ones(sum(len(m.cliques) for m in ms))
    for group in (tie.groups if tie is not None else ()):
        per_clique[list(group)] = len(group)
    first = np.cumsum([0] + [len(m.cliques) for m in ms])[:-1]
    return np.maximum(per_clique[first], [len(m.cliques) for m in ms])


def _member_variance(m: Measurement) -> float:
    """The noise variance per cell that one clique's share of the table carries, as if each of its k
    cliques had been released alone: a pooled table's variance over k (the sum of k separate tables
    would have k times that)."""
    return m.variance / len(m.cliques)


def noise_aware_l2(ms: Sequence[Measurement], N: float, tie: "Tying | None" = None) -> float:
    """CGM-EM's default L2 weight: ``clip(3 rho, 0.1, 1) / N`` with rho the median, over tables, of the
    noise's standard deviation per cell relative to the mean count per cell (N / cells).

    A fixed 1 / N is right when noise dominates and too strong when it does not. With tied
    potentials (``tie``) a table's noise sd is divided by the square root of its group's size. On the paper's
    10 x 10 third-order chain (KL(true || learned), one draw, 30 EM iterations started from the naive
    MLE with l2 = 1 / N, before the calibrated start): N = 1e4, eps = 1 (rho = 0.34): l2 N = 1
    gives 1.18, 0.1 gives 1.64; N = 1e5, eps = 1 (rho = 0.034): 0.106 vs 0.093; N = 1e6, eps = 1
    (rho = 0.0034): 0.0048 vs 0.0040 (naive MLE: 3.60, 0.113, 0.0047).

    Examples
    --------
    >>> ys = [Measurement(("A",), np.array([500.0, 500.0]), "laplace", 10.0)]
    >>> round(noise_aware_l2(ys, 1000.0) * 1000, 4)   # sd 14.1 per cell of mean 500: rho = 0.028
    0.1
    """
    rho = []
    for m, pooled in zip(ms, _pooled(ms, tie)):
        cells = m.values.size
        # a tied table's noise averages over its group; a pooled table stands for each clique it sums
        rho += [np.sqrt(_member_variance(m) / pooled) / (N / cells)] * len(m.cliques)
    return float(np.clip(3 * np.median(rho), 0.1, 1.0)) / N


def noise_calibrated_l2(ms: Sequence[Measurement], N: float, tie: "Tying | None" = None) -> float:
    """L2 weight for fitting noisy tables as if they were exact: the paper's ``1 / N`` inflated by
    the noise, ``(1 + r) / N`` with r the median, over tables, of the noise variance of a cell
    relative to the sampling (multinomial) variance of an average cell, ``variance * cells / N``.

    Fitting y / N by maximum likelihood weighs the tables like N exact records; with noise, each
    cell carries the information of about N / (1 + r) records, so the prior's relative weight grows
    by 1 + r. With tied potentials (``tie``) a table's noise is averaged over its group of m tables,
    so its r is divided by m. CGM-EM starts from the naive MLE with this weight. On the paper's 10 x 10 chain (one
    draw; KL of the naive MLE with l2 = 1 / N -> with this weight): N = 1e4, eps = 0.1 (r = 1150):
    370 -> 7.2; N = 1e5, eps = 0.1 (r = 115): 20 -> 1.2; N = 1e6, eps = 1 (r = 0.12): 0.0051 -> 0.0037.

    Examples
    --------
    >>> ys = [Measurement(("A",), np.array([500.0, 500.0]), "laplace", 10.0)]
    >>> round(noise_calibrated_l2(ys, 1000.0) * 1000, 4)   # r = 2 * 10^2 * 2 / 1000 = 0.4
    1.4
    """
    r = float(np.median([_member_variance(m) * m.values.size / N / pooled  # the median over cliques: a pooled table
                         for m, pooled in zip(ms, _pooled(ms, tie)) for _ in m.cliques]))  # counts for each it sums
    return (1.0 + r) / N


def _moment_matched(ms: Sequence[Measurement]) -> list[Measurement]:
    """Laplace tables as Gaussian tables of the same variance (for the E-step only)."""
    return [Measurement(m.variables, m.values, "gaussian", float(np.sqrt(m.variance)), n=m.n, members=m.members)
            if m.noise == "laplace" else m for m in ms]


@dataclass(frozen=True)
class _DualData:
    """What the E-step's dual reads of a release, the same at every EM iteration: the pooled tables' map,
    the released cells, their Gaussian variances (0 for Laplace), the Laplace box and the noise laws'
    log-normalising constants."""

    obs: sparse.csr_matrix | None
    y: np.ndarray
    s2: np.ndarray
    box: np.ndarray
    constants: float

    @classmethod
    def of(cls, ms: Sequence[Measurement]) -> "_DualData":
        return cls(_observation(ms), np.concatenate([m.values.ravel() for m in ms]),
                   np.concatenate([np.full(m.values.size, m.scale**2 if m.noise == "gaussian" else 0.0) for m in ms]),
                   np.concatenate([np.full(m.values.size, 1.0 / m.scale if m.noise == "laplace" else np.inf) for m in ms]),
                   _noise_constants(ms))


def _noise_constants(ms: Sequence[Measurement]) -> float:
    c = 0.0
    for m in ms:
        if m.noise == "laplace":
            c -= m.values.size * np.log(2 * m.scale)
        elif m.noise == "gaussian":
            c -= m.values.size * np.log(m.scale * np.sqrt(2 * np.pi))
    return c


@one_blas_thread
def estep_dual(oracle: MarginalOracle, theta: np.ndarray, ms: Sequence[Measurement], N: float,
               lam0: np.ndarray | None = None, max_iter: int = 500, tol: float = 1e-9, info: dict | None = None,
               at_start: tuple | None = None, method: str = "auto", data: _DualData | None = None):
    """Solve Problem 6 through its dual; returns (lambda, marginals, primal value, evaluations).
    ``info``, when given, receives ``converged`` (the solver's own test passed), its ``message``, and
    ``log_z`` and flat ``mu`` at the answer. ``at_start``: ``(log_z, mu)`` at theta - lam0 when the
    caller has them (CGM-EM: the previous E-step's answer, unchanged by its M-step). ``method``:
    ``"newton"`` (truncated Newton, taken by ``"auto"`` when the dual is smooth: every table Gaussian or
    moment-matched, none pooled, an exact oracle) or ``"lbfgs"`` (L-BFGS-B, which also takes the Laplace
    tables' box). ``data``: ``_DualData.of(ms)`` when the caller keeps it across E-steps.
    lambda has one entry per measured cell; a pooled table's enters every clique it sums
    (theta - P lambda, :func:`_observation`)."""
    data = _DualData.of(ms) if data is None else data
    obs, y, s2, box = data.obs, data.y, data.s2, data.box
    expand = (lambda v: v) if obs is None else (lambda v: obs @ v)
    pool = (lambda v: v) if obs is None else (lambda v: obs.T @ v)
    evals = [0]
    last: dict = {}  # the latest calibration: L-BFGS-B's first point and its final one are calibrated once

    def calibrated(lam):
        if "lam" not in last or not np.array_equal(last["lam"], lam):
            evals[0] += 1
            last["lam"] = lam.copy()
            last["log_z"], last["mu"] = oracle.flat(theta - expand(lam))
        return last["log_z"], last["mu"]

    def D(lam):
        log_z, mu = calibrated(lam)
        val = lam @ y + 0.5 * (s2 * lam) @ lam + N * log_z
        return val, y + s2 * lam - N * pool(mu)

    smooth = obs is None and oracle.exact and not np.isfinite(box).any() and bool((s2 > 0).all())
    if method not in ("auto", "newton", "lbfgs") or (method == "newton" and not smooth):
        raise ValueError(f"method: expected 'auto', 'lbfgs', or 'newton' on a smooth dual, got {method!r}")
    if smooth and method != "lbfgs":
        # a smooth, strictly convex dual (Gaussian or moment-matched tables): truncated Newton
        return _estep_newton(oracle, theta, data.constants, y, s2, N, lam0, max_iter, tol, info, at_start, evals)
    x0 = np.zeros(y.size) if lam0 is None else np.clip(lam0, -box, box)
    # Diagonal preconditioning: the Hessian of N log Z(theta - l) has diagonal N mu (1 - mu) per cell;
    # optimising over z = h l with h = sqrt(that diagonal) makes L-BFGS-B see a far better conditioned problem.
    if at_start is not None and lam0 is not None and np.array_equal(x0, lam0):
        last.update(lam=x0.copy(), log_z=float(at_start[0]), mu=np.asarray(at_start[1]))
    mu0 = calibrated(x0)[1]
    h = np.sqrt(N * pool(mu0 * (1 - mu0)) + s2 + 1e-9 * N)
    scale = max(N, 1.0)  # the dual value is O(N): scale so that tolerances are relative
    # the box |l| <= 1/b in z = h l; unbounded (moment-matched or Gaussian tables): no bounds for scipy to convert
    bounds = Bounds(-box * h, box * h) if np.isfinite(box).any() else None
    if lam0 is None:  # a cold start: one diagonal Newton step from 0 (the gradient over the diagonal h^2)
        x0 = np.clip(-(y + s2 * x0 - N * pool(mu0)) / h**2, -box, box)
    z0 = x0 * h
    if lam0 is not None:
        last["lam"] = z0 / h  # the same point as x0 up to rounding: L-BFGS-B's first evaluation reuses mu0

    def Dz(z):
        val, grad = D(z / h)
        return val / scale, grad / h / scale

    res = minimize(Dz, z0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-14, "maxcor": 20})
    lam, converged, message = res.x / h, bool(res.success), str(res.message)
    log_z, mu = calibrated(lam)  # L-BFGS-B's answer is normally its last evaluation: no new calibration
    mus = oracle.params.split(mu)
    if info is not None:
        info.update(converged=converged, message=message, log_z=log_z, mu=mu)
    value = float(lam @ y + 0.5 * (s2 * lam) @ lam + N * log_z) + data.constants
    return lam, mus, value, evals[0]


ESTEP_MAX_STEP = 30.0  # the largest change of a dual variable (a log-potential shift) in one Newton step


def _estep_newton(oracle: MarginalOracle, theta: np.ndarray, constants: float, y: np.ndarray, s2: np.ndarray,
                  N: float, lam0: np.ndarray | None, max_iter: int, tol: float, info: dict | None, at_start: tuple | None,
                  evals: list) -> tuple:
    """:func:`estep_dual` by truncated Newton when the dual is smooth (no box: every table Gaussian,
    or moment-matched) and unpooled on an exact oracle. The dual's Hessian is ``N F(theta - lambda) +
    s2``: its products are exact (:meth:`MarginalOracle.fisher`), and it is preconditioned by the tree's
    inverse of ``F + s2 / N`` (:meth:`MarginalOracle.inverse_hessian`, good whether the noise or the
    counts dominate a cell) on the gauge's complement (``1 / s2`` along the gauge, where F vanishes);
    without a tree inverse, by its diagonal plus ``1 / s2`` along the gauge (between projections).
    The stopping test is L-BFGS-B's in its scaled variables: the
    gradient over ``N sqrt(N mu (1 - mu) + s2)`` at the start, at most ``tol``."""
    lam = np.zeros(y.size) if lam0 is None else np.array(lam0, dtype=float)

    def calibrate(lam_: np.ndarray) -> tuple:
        evals[0] += 1
        return oracle.flat(theta - lam_)

    if at_start is not None and lam0 is not None:
        log_z, mu = float(at_start[0]), np.asarray(at_start[1])
    else:
        log_z, mu = calibrate(lam)
    h = np.sqrt(N * mu * (1 - mu) + s2 + 1e-9 * N)

    def value(lam_: np.ndarray, log_z_: float) -> float:
        return float(lam_ @ y + 0.5 * (s2 * lam_) @ lam_ + N * log_z_)

    def negated(lam_: np.ndarray) -> tuple:  # the line search ascends
        log_z_, mu_ = calibrate(lam_)
        return -value(lam_, log_z_), log_z_, mu_

    gauge = oracle.gauge
    # With one noise variance for every cell the dual splits like the M-step: along the gauge G, log Z is
    # affine (it moves by <g, mu>, the same for every mu), so D's G-part is a quadratic in lambda_G whose
    # minimum is closed-form, -G(y - N mu) / s2, and Newton only works on G's complement (one projection
    # per product instead of two). Otherwise the whole space, the gauge preconditioned by 1 / s2.
    split = bool(np.ptp(s2) == 0) and oracle.tree_inverse
    if split:
        new_g = -gauge.gauge(y - N * mu) / s2[0]
        delta = new_g - gauge.gauge(lam)
        lam = lam + delta
        log_z = log_z - float(delta @ mu)  # log Z(x - delta) = log Z(x) - <delta, mu> for delta in G
    f = value(lam, log_z)
    converged, message = False, f"{max_iter} Newton steps without meeting the tolerance"
    g0 = None
    memory = oracle.recycler()  # the diagonal preconditions (no tree inverse): corrected step by step
    for _ in range(max_iter + 1):
        grad = y + s2 * lam - N * mu
        if float(np.abs(grad / h).max()) / N <= tol:
            converged, message = True, "the scaled gradient is within tol"
            break
        if _ == max_iter:
            break
        if split:
            grad = gauge.project(grad)  # its G-part is zero up to rounding
        g_norm = float(np.sqrt(grad @ grad))
        g0 = g0 or g_norm
        F = oracle.fisher(theta - lam, mu)
        J = oracle.inverse_hessian(mu, s2 / N)
        if J is None:
            # no tree inverse (AIM's grown trees, families inside larger cliques): the diagonal, plus 1 / s2 on the
            # gauge (between projections), where F vanishes and the Hessian is s2 alone: the diagonal alone overstates
            # the gauge's curvature by N mu / s2. Adult 2-way, AIM at rho 0.5: 587 Fisher products in the E-steps
            # against the diagonal's 1,277 (the diagonal only off the gauge: 645, but 1,423 against 1,035 at rho 0.05)
            d = N * mu * (1 - mu) + s2

            def precondition(r, d=d):
                return r / d + gauge.gauge(gauge.gauge(r) / s2)
        elif split:
            def precondition(r, J=J):
                return gauge.project(J(r)) / N
        else:
            def precondition(r, J=J):
                on = gauge.project(r)
                return gauge.project(J(on)) / N + (r - on) / s2
        step, _k = pcg(lambda v: N * F(v) + s2 * v, -grad, precondition, 100,
                       rtol=forcing(g_norm, g0), recycle=memory)
        slope = float(grad @ step)
        if slope >= 0:  # not a descent direction (the products' rounding near the optimum): stop here
            message = "no descent direction left"
            break
        t = min(1.0, ESTEP_MAX_STEP / float(np.abs(step).max()))
        noise = 1e-13 * max(1.0, abs(f))
        # the dual is minimised: the search ascends its negative
        t, trial, neg, log_z_t, mu_t, _ = _armijo(lam, step, t, -f, -slope, negated)
        f_t = -neg
        if f_t > f + noise:
            message = "no decrease along the Newton direction"
            break
        lam, f, log_z, mu = trial, f_t, log_z_t, mu_t
    mus = oracle.params.split(mu)
    if info is not None:
        info.update(converged=converged, message=message, log_z=log_z, mu=mu)
    return lam, mus, f + constants, evals[0]


def estep_nlbp(oracle: MarginalOracle, theta: np.ndarray, ms: Sequence[Measurement], N: float,
               damping: float = 0.1, smoothing: float = 1e-2, max_iter: int = 2000, tol: float = 1e-8,
               counts0: list | None = None):
    """Algorithm 1 (non-linear BP) as printed; returns (expected counts, iterations, converged)."""
    P = oracle.params
    first = np.cumsum([0] + [len(m.cliques) for m in ms])
    n = counts0 if counts0 is not None else [N * mu for mu in oracle(theta)[1]]
    for it in range(1, max_iter + 1):
        # a pooled table's gradient in its sum of counts, copied to every clique it sums
        g = P.join([m.gradient(np.sum(n[first[k]:first[k + 1]], axis=0), smoothing=smoothing)
                    for k, m in enumerate(ms) for _ in m.cliques])
        new = [N * mu for mu in oracle(theta + g)[1]]
        change = max(float(np.abs(a - b).max()) for a, b in zip(new, n)) / N
        n = [(1 - damping) * a + damping * b for a, b in zip(n, new)]
        if change < tol:
            return n, it, True
    return n, max_iter, False


@one_blas_thread
def cgm_em(
    domain: Domain,
    measurements: Sequence[Measurement],
    N: float | None = None,
    l2: float | str | None = None,
    estep: str = "dual",
    max_iter: int | None = None,
    tol: float = 1e-6,
    rtol: float | None = None,
    damping: float = 0.1,
    smoothing: float = 1e-2,
    init: MarkovNetwork | None = None,
    progress: bool = True,
    mstep_iter: int | None = None,
    estep_iter: int | None = None,
    estep_tol: float = 1e-9,
    adaptive_estep: bool = True,
    mstep_tol: float = 1e-8,
    init_l2: float | None = None,
    moment_match: bool = True,
    callback: Callable[[int, MarkovNetwork, dict], None] | None = None,
    tied: Sequence | Tying | None = None,
    mstep: str = "auto",
    seed=0,
    stop: str = "release",
    accelerate: bool | None = None,
    warm_start: MarkovNetwork | None = None,
) -> CGMResult:
    """EM for collective graphical models (Algorithm 2): learn a Markov network whose cliques are the
    measured ones from noisy clique tables alone.

    Parameters
    ----------
    domain : Domain
    measurements : sequence of Measurement
        One noisy table per clique (Laplace or Gaussian noise, or exact counts).
    N : float, optional
        Number of records; taken from the measurements when not given (see :func:`population_size`).
    l2 : float or "release", optional
        Weight of ``l2 ||theta||^2`` (per record; with ``tied``, on the shared tables, each once) in
        the M-step; default :func:`noise_aware_l2`
        (between 0.1 / N and 1 / N, growing with the noise). Without it the learned network drifts
        towards vanishing probabilities on cells whose expected counts come out near zero.
        ``"release"`` (with ``stop="converged"``): the weight is chosen from the release for EM run to
        convergence (:func:`ppgm.learners.em_rules.release_mstep_l2`; candidates from the noise-aware weight down), recorded in
        ``selection["mstep_l2"]``. EM's fixed point then carries the regularisation instead of its
        stopping time (``docs/explain/cgm-em.md``, "Opt-in: EM to convergence at a release-chosen M-step
        weight"); it costs several converged EM runs on simulated releases.
    estep : {"dual", "nlbp"}
        E-step solver (see the module docstring).
    max_iter, tol, rtol
        EM stops after ``max_iter`` iterations (default 30; ``MSTEP_MAX_ITER`` = 200 with
        ``l2="release"``, which warns if EM has not converged by then), or earlier when the largest
        change of a clique marginal falls below ``tol`` or the objective grows by less than ``rtol``
        (relative) in an iteration (default 1e-4, also ``MSTEP_RTOL`` with ``l2="release"``: at 1e-5
        the rule's choices moved on one tuning cell but scored worse on the tuning and report cells,
        ``docs/explain/cgm-em.md``, "Tried and not kept"). The iteration count matters for accuracy, not only for
        time: EM's path improves on its start, its end point overfits the noise (module docstring).
    damping, smoothing
        Settings of the ``"nlbp"`` E-step.
    init : MarkovNetwork, optional
        Starting parameters (default: the naive MLE with L2 weight ``init_l2``).
    init_l2 : float or str, optional
        L2 weight of that starting naive MLE (any ``l2`` of :func:`naive_mle`); default: chosen from
        the release (``"release"``). The start is fitted to a gradient of 1e-4 (``INIT_TOL``), not to
        the naive MLE's 1e-7: EM moves it further at once.
    moment_match : bool
        Run the E-step with Laplace tables replaced by Gaussian ones of the same variance (closer to
        the posterior mean that exact EM would use). ``False`` keeps the exact Laplace likelihood
        (Problem 6 as printed).
    progress : bool
        Show a progress bar (drawn only in a terminal or a notebook; see ``ppgm.core.progress``).
    estep_iter, estep_tol : int, float
        Iteration limit of each E-step (default 500 L-BFGS-B iterations for ``"dual"``, 2000 fixed-point
        iterations for ``"nlbp"``) and the dual's gradient tolerance (relative to N); the dual E-step
        is warm-started from the previous one, so a loose E-step still converges over EM iterations.
    adaptive_estep : bool
        Solve each E-step only to ``max(estep_tol, min(1e-5, 1e-2 * change))``, where ``change`` is the
        previous EM iteration's largest marginal change: inexact E-steps while EM still moves.
    mstep_tol : float
        Gradient tolerance of each M-step (per record).
    callback : callable, optional
        Called after every EM iteration as ``callback(iteration, model, record)`` with the current
        network and that iteration's history record: to track a held-out score, or to stop early by
        raising ``StopIteration`` (the last completed iteration is then returned).
    mstep : {"auto", "newton", "lbfgs"}
        M-step solver (``ppgm.learners.mle.fit_marginals``' ``method``): truncated Newton on the gauge-free
        parameters (on the shared tables when tied), or L-BFGS; ``"auto"`` takes Newton unless the
        model needs loopy inference or ``l2`` is 0.
    mstep_iter : int, optional
        Iteration cap of each M-step, warm-started from the previous parameters: Newton steps
        (default 1 untied, ``TIED_MSTEP_ITER`` = 20 tied) or L-BFGS iterations (default 100). A capped
        M-step is a generalised EM step: it improves the M-step objective without solving it to the
        end. Tied M-steps are solved: one tied Newton step per EM iteration was 3-6x faster but moved
        the release-chosen iteration count and lost up to 0.6 nats per person-day on held-out mobility
        data (``docs/explain/cgm-em.md``, "Tried and not kept").

    tied : list of groups of cliques, optional
        Cliques that share one log-potential (``ppgm.models.tying``): the E-step is unchanged (it sees the
        expanded factors) and the M-step matches each group's summed expected counts; the start is
        the tied naive MLE.
    seed : int or numpy.random.Generator
        Randomness of the release-based rules' simulated releases (same seed, same result).
    accelerate : bool, optional
        Extrapolate EM's path (SQUAREM, :func:`ppgm.learners.em_rules._em_loop`) when it runs to convergence
        (default off: the release-chosen weight's figures in ``docs/explain/cgm-em.md`` are without it;
        at rtol 1e-5 it halved the rule's time on a tuning cell). Each cycle of two EM iterations proposes a jump along
        their differences, kept when the objective has not fallen below the cycle's start.
    warm_start : MarkovNetwork, optional
        A network with the measurements' cliques (in order) near their naive fit at ``1 / N``, such as
        AIM's last round (:func:`ppgm.synthesis.aim.aim_select`): the pilot is fitted from it, and the
        rules' naive refits and EM's naive start from the pilot, instead of cold along the path of
        weights (on a model of millions of junction-tree cells a cold fit costs several warm ones).
        What the rules choose is unchanged up to the fits' tolerance.
    stop : {"release", "converged"}
        ``"release"`` (default): the number of EM iterations, at most ``max_iter``, is chosen from the
        release (:func:`ppgm.learners.em_rules.release_iterations`: EM run on a release simulated from the paper's naive
        fit, scored against it after every iteration, the count at the smallest score; 0 returns the start).
        ``"converged"``: EM runs until ``tol`` / ``rtol`` or ``max_iter`` (the earlier default). EM's MAP
        E-step does not converge to a better model than its path: on sparse tables its fixed point is worse
        than its start at every M-step weight measured (``docs/explain/cgm-em.md``, "The iteration count"), so
        the stopping time is a regulariser, and the release chooses it.

    Returns
    -------
    CGMResult
        The network, the last expected counts, N, the per-iteration history (the last record
        says why EM stopped) and ``selection``: what the release-based rules chose and their
        criterion (``"l2"``: the start's weight, ``"iterations"``: the iteration count).

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.inference.marginals import infer
    >>> truth = third_order_chain(4, 2, seed=0)
    >>> ys = [Measurement(f.variables, 5000 * f.values, "laplace", 5.0) for f in infer(truth).factor_marginals()]
    >>> res = cgm_em(truth.domain, ys, progress=False)
    >>> res.N
    5000.0
    """
    ms, mstep_rule, max_iter, tol, rtol, estep_iter, estep_tol, mstep_tol, accelerate = _check_em_arguments(
        domain, measurements, l2, estep, max_iter, tol, rtol, damping, smoothing, progress, estep_iter, estep_tol,
        adaptive_estep, mstep_tol, moment_match, callback, mstep, stop, accelerate)
    N = _resolve_n(ms, N)
    oracle = MarginalOracle(domain, _scopes(ms))
    P = oracle.params
    tie = tied if isinstance(tied, Tying) or tied is None else Tying.build(domain, P.scopes, tied)
    weight_l2: float = noise_aware_l2(ms, N, tie) if l2 is None or mstep_rule else checks.non_negative(l2, "l2")
    if mstep == "auto":
        mstep = "newton" if newton_applies(oracle, weight_l2, tie) else "lbfgs"
    if mstep_iter is None:  # untied: one Newton step (a generalised EM step); tied: solved (as L-BFGS's 100 did)
        mstep_iter = (1 if tie is None else TIED_MSTEP_ITER) if mstep == "newton" else 100
    mstep_iter = checks.count(mstep_iter, "mstep_iter")
    if init_l2 is not None:
        init_l2 = _check_l2(init_l2, allow_rules=True)  # type: ignore[assignment]  # a number or 'calibrated'
    mstep_rule, stop = _rules_on_exact_trees(oracle, mstep_rule, stop)

    # the start: the naive fit at the release-chosen weight, unless given
    selection: dict = {}
    needs_pilot = stop == "release" or mstep_rule or (init is None and init_l2 in (None, "release"))
    warm = _checked_start(warm_start, ms, "warm_start")
    pilot = Pilot.of(domain, ms, N, tie, oracle=oracle, init=warm) if needs_pilot and oracle.exact else None
    start_l2 = None
    if init is None:
        init, start_l2 = _naive_start(domain, ms, N, tie, oracle, init_l2, pilot, seed, selection)
    observed = _moment_matched if moment_match else list

    def new_em(tables: Sequence[Measurement], weight: float | None = None) -> _EM:
        return _EM(domain, oracle, observed(tables), N, weight_l2 if weight is None else weight, estep, estep_iter, estep_tol,
                   adaptive_estep, damping, smoothing, mstep_tol, mstep_iter, tie, mstep)

    # what the release chooses: the M-step weight (opt-in) and the number of iterations
    if mstep_rule or stop == "release":
        assert pilot is not None  # built above for the rules
        if start_l2 is None:  # a given init: the simulated starts take the release-chosen naive weight
            start_l2 = release_l2(domain, ms, N, tie, seed=seed, pilot=pilot).value
        assert start_l2 is not None
    if mstep_rule:
        weight_l2 = _release_mstep_weight(ms, N, new_em, pilot, start_l2, weight_l2, max_iter, tol, rtol, seed, accelerate,
                                          selection)
    if stop == "release":
        assert pilot is not None and start_l2 is not None
        iterations = release_iterations(ms, N, new_em, pilot, start_l2, max_iter, tol, rtol, seed)
        selection["iterations"] = iterations.as_record()
        max_iter = int(iterations.value)

    # the loop, and why it stopped
    em = new_em(ms)
    bar = progress_bar(total=max_iter, desc="CGM-EM", enabled=progress)
    theta, history, stopped = _em_loop(em, P.join([f.values for f in init.factors]), max_iter, tol, rtol, callback, bar.update,
                                       accelerate=accelerate)
    bar.close()
    _record_stop(history, stopped, stop, max_iter, mstep_rule, estep)
    return CGMResult(P.model(theta), em.counts or [], N, history, selection, float(weight_l2))


def _check_em_arguments(domain, measurements, l2, estep, max_iter, tol, rtol, damping, smoothing, progress, estep_iter,
                        estep_tol, adaptive_estep, mstep_tol, moment_match, callback, mstep, stop, accelerate) -> tuple:
    """cgm_em's arguments checked, with the defaults that depend on others resolved: ``(measurements,
    mstep_rule, max_iter, tol, rtol, estep_iter, estep_tol, mstep_tol, accelerate)``."""
    checks.flag(progress, "progress")
    checks.flag(adaptive_estep, "adaptive_estep")
    checks.flag(moment_match, "moment_match")
    checks.callback(callback)
    ms = _check_measurements(domain, measurements)
    checks.choice(estep, "estep", ("dual", "nlbp"))
    estep_iter = (500 if estep == "dual" else 2000) if estep_iter is None else estep_iter
    checks.choice(mstep, "mstep", ("auto", "newton", "lbfgs"))
    checks.choice(stop, "stop", ("release", "converged"))
    mstep_rule = isinstance(l2, str)
    if mstep_rule and (l2 != "release" or stop != "converged"):
        raise ValueError(f"l2: expected a non-negative number, or 'release' with stop='converged' (EM run to convergence at "
                         f"a weight chosen from the release), got {l2!r} with stop={stop!r}")
    max_iter = (MSTEP_MAX_ITER if mstep_rule else 30) if max_iter is None else max_iter
    rtol = (MSTEP_RTOL if mstep_rule else 1e-4) if rtol is None else rtol
    accelerate = False if accelerate is None else checks.flag(accelerate, "accelerate")
    if accelerate and stop != "converged":
        raise ValueError("accelerate: extrapolation is for EM run to convergence (stop='converged'); the release-chosen "
                         "iteration count counts plain EM iterations")
    max_iter, estep_iter = checks.count(max_iter, "max_iter"), checks.count(estep_iter, "estep_iter")
    tol, rtol = checks.positive(tol, "tol"), checks.non_negative(rtol, "rtol")
    estep_tol, mstep_tol = checks.positive(estep_tol, "estep_tol"), checks.positive(mstep_tol, "mstep_tol")
    checks.in_range(damping, "damping", 0.0, 1.0, closed=False)
    checks.non_negative(smoothing, "smoothing")
    return ms, mstep_rule, max_iter, tol, rtol, estep_iter, estep_tol, mstep_tol, accelerate


def _rules_on_exact_trees(oracle: MarginalOracle, mstep_rule: bool, stop: str) -> tuple[bool, str]:
    """The release-based rules simulate releases exactly on the junction tree; without one they step aside,
    with a warning."""
    if mstep_rule and not oracle.exact:
        warnings.warn("CGM-EM: the junction tree is too large to simulate the release exactly; the M-step weight is the "
                      "noise-aware one (noise_aware_l2)", UndecidedWarning, stacklevel=3)
        mstep_rule = False
    if stop == "release" and not oracle.exact:
        warnings.warn("CGM-EM: the junction tree is too large to simulate the release exactly; EM runs to its own "
                      "stopping rule (stop='converged')", UndecidedWarning, stacklevel=3)
        stop = "converged"
    return mstep_rule, stop


def _naive_start(domain, ms, N, tie, oracle, init_l2, pilot, seed, selection: dict) -> tuple[MarkovNetwork, float | None]:
    """EM's start: the naive MLE at ``init_l2``, chosen from the release when None or "release" (recorded in
    ``selection["l2"]``); returns the network and its weight."""
    if init_l2 is None or init_l2 == "release":
        choice = release_l2(domain, ms, N, tie, seed=seed, pilot=pilot)
        selection["l2"] = choice.as_record()
        init_l2 = choice.value
    start = naive_mle(domain, ms, N=N, l2=init_l2, tied=tie, tol=INIT_TOL, seed=seed, oracle=oracle,
                      warm_start=pilot.start if pilot is not None else None)
    return start.model, start.l2


def _release_mstep_weight(ms, N, new_em, pilot, start_l2, weight_l2, max_iter, tol, rtol, seed, accelerate,
                          selection: dict) -> float:
    """The M-step weight for EM run to convergence, chosen from the release (recorded in
    ``selection["mstep_l2"]``; warns when the rule could not decide)."""
    weight = release_mstep_l2(ms, N, new_em, pilot, start_l2, weight_l2, max_iter, tol, rtol, seed, accelerate=accelerate)
    selection["mstep_l2"] = weight.as_record()
    if not weight.decided:
        warnings.warn(f"CGM-EM: the lowest M-step weight tried ({weight.value:.3g} per record) scored best in the simulated "
                      "releases, still falling (not flat); the rule could not decide (selection['mstep_l2'])",
                      UndecidedWarning, stacklevel=3)
    return weight.value


def _record_stop(history: list, stopped: str, stop: str, max_iter: int, mstep_rule: bool, estep: str) -> None:
    """Say in the last history record why EM stopped, and warn when it did not converge where it should."""
    if stop == "release" and len(history) == max_iter:
        stopped = f"the {max_iter} iterations chosen from the release (selection['iterations'])"
    if not history:  # the rule chose the start: no EM iteration improved on it in the simulated releases
        history.append({"objective": float("nan"), "change": 0.0, "estep_evals": 0, "estep_converged": True, "mstep_iters": 0})
        stopped = "the release-based rule chose 0 iterations: EM did not improve on its start in the simulated releases"
    history[-1]["stopped"] = stopped
    if mstep_rule and stop == "converged" and stopped.startswith("max_iter"):
        warnings.warn(f"CGM-EM: EM did not converge within max_iter={max_iter} iterations at the release-chosen M-step "
                      "weight; the model is its last iterate (see history)", ConvergenceWarning, stacklevel=3)
    if not history[-1]["estep_converged"]:
        warnings.warn(f"CGM-EM: the last E-step ({estep}) stopped before its convergence test passed; the expected counts "
                      "are approximate (see history[-1]; for estep='nlbp' try more damping)", ConvergenceWarning, stacklevel=3)


@dataclass
class _EM:
    """The E-step and M-step of CGM-EM with their settings, and what carries over between
    iterations: the dual variables (warm start), the expected counts, the last marginals."""

    domain: Domain
    oracle: MarginalOracle
    ms: list
    N: float
    l2: float
    estep: str
    estep_iter: int
    estep_tol: float
    adaptive_estep: bool
    damping: float
    smoothing: float
    mstep_tol: float
    mstep_iter: int
    tie: Tying | None = None
    mstep: str = "auto"
    lam: np.ndarray | None = None
    counts: list | None = None
    prev_mu: np.ndarray | None = None
    last_change: float = float("inf")
    next_log_z: float | None = None
    start_marginals: tuple | None = None

    def iterate(self, theta: np.ndarray) -> tuple[np.ndarray, dict]:
        """One EM iteration from ``theta``: the new parameters and the iteration's history record."""
        P, N = self.oracle.params, self.N
        # log Z(theta): known from the previous M-step's objective when theta is its answer
        log_z_theta = self.next_log_z if self.next_log_z is not None else self.oracle.flat(theta)[0]
        mus, value, evals, converged = self._expected(theta)
        clipped = np.clip(P.join(mus), 0, None)  # each table normalised, in a few array operations
        clipped /= np.repeat(np.add.reduceat(clipped, P.offsets[:-1]), np.diff(P.offsets))
        targets = [Factor._unchecked(c, t) for c, t in zip(P.scopes, P.split(clipped))]
        # M-step from theta - lambda: its marginals are the E-step's exactly, so it is the optimum
        # without the L2 term and the penalised optimum is close (the M-step then takes a few steps).
        obs = self.observation
        shift = None if self.lam is None else (self.lam if obs is None else obs @ self.lam)
        start = theta - shift if shift is not None else theta
        fit = fit_marginals(self.domain, targets, l2=self.l2, init=P.model(start), oracle=self.oracle,
                            tol=self.mstep_tol, max_iter=self.mstep_iter, tied=self.tie, warn=False,
                            method=self.mstep,
                            init_marginals=self.start_marginals if shift is not None and np.isfinite(start).all() else None)
        new = P.join([f.values for f in fit.model.factors])
        # the M-step's value is <new, targets> - log Z(new) - penalty at the point it returns
        self.next_log_z = float(new @ P.join([t.values for t in targets]) - self._penalty(new) - fit.objective)
        if self.lam is not None and obs is None:  # keep theta' = theta - lambda where the last E-step left it
            self.lam = self.lam + (new - theta)
        mu_flat = P.join(mus)
        change = float(np.abs(mu_flat - self.prev_mu).max()) if self.prev_mu is not None else float("inf")
        self.prev_mu, self.last_change = mu_flat, change
        record = {"objective": value - N * log_z_theta - N * self._penalty(theta) if self.estep == "dual" else float("nan"),
                  "change": change, "estep_evals": int(evals), "estep_converged": bool(converged), "mstep_iters": len(fit.history)}
        return new, record

    @cached_property
    def dual_data(self) -> _DualData:
        """What the E-step's dual reads of the release, built once per fit."""
        return _DualData.of(self.ms)

    @property
    def observation(self) -> sparse.csr_matrix | None:
        """The pooled tables' P (:func:`_observation`), built once per fit."""
        return self.dual_data.obs

    def _penalty(self, theta: np.ndarray) -> float:
        """l2 ||v||^2 (per record) on the free parameters: theta, or the shared tables when tied."""
        free = theta if self.tie is None else self.tie.restrict(theta)
        return self.l2 * float(free @ free)

    def _expected(self, theta: np.ndarray) -> tuple[list, float, int, bool]:
        """The E-step: expected clique marginals of the true counts, the dual value, evaluations, and
        whether the solver's convergence test passed."""
        N = self.N
        if self.estep == "dual":
            # inexact E-steps while EM moves a lot, exact ones as it settles
            tol_t = self.estep_tol if not self.adaptive_estep or not np.isfinite(self.last_change) else max(
                self.estep_tol, min(ESTEP_CAP, ESTEP_REL * self.last_change))
            info: dict = {}
            # after an M-step theta - lambda is where the last E-step ended (lambda moved with theta): reuse it
            again = self.start_marginals if self.lam is not None and self.observation is None else None
            self.lam, mus, value, evals = estep_dual(self.oracle, theta, self.ms, N, lam0=self.lam, max_iter=self.estep_iter, tol=tol_t,
                                                     info=info, at_start=again, data=self.dual_data)
            self.counts = [N * mu for mu in mus]
            self.start_marginals = (info["log_z"], info["mu"])  # at theta - lambda: where the M-step starts
            return mus, value, evals, info["converged"]
        self.counts, evals, converged = estep_nlbp(self.oracle, theta, self.ms, N, self.damping, self.smoothing,
                                                   max_iter=self.estep_iter, counts0=self.counts)
        return [c / N for c in self.counts], float("nan"), evals, converged
