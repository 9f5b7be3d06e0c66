"""EM's loops and the release-based rules of CGM-EM (:func:`ppgm.learners.cgm.cgm_em`): how long EM runs and at
which M-step weight, chosen by simulating releases like the one at hand from the pilot
(``ppgm.learners.release_rule``). The loops take an object with CGM-EM's steps (:class:`EMSteps`, ``ppgm.learners.cgm``'s
``_EM``); the rules take a factory of them and the pilot (:class:`PilotLike`, ``ppgm.learners.cgm.Pilot``), so this
module imports nothing of CGM-EM. ``docs/explain/cgm-em.md`` says what the rules are and what they were measured against.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..core import checks
from ..core.progress import logger
from ..core.rng import as_generator
from ..inference.junction_tree import Calibration
from ..models.markov import MarkovNetwork
from ..models.measurement import Measurement
from .mle import MarginalOracle
from .release_rule import STEP, Choice, simulated_release, within_one_se


class EMSteps(Protocol):
    """What the loops need of CGM-EM's E- and M-steps: one iteration, the oracle, and the E-step's dual
    state that an extrapolated jump moves (``ppgm.learners.cgm._EM``)."""

    lam: Any
    next_log_z: Any

    @property
    def oracle(self) -> MarginalOracle: ...

    @property
    def observation(self) -> Any: ...

    def iterate(self, theta: np.ndarray) -> tuple[np.ndarray, dict]: ...


class PilotLike(Protocol):
    """What the rules need of the pilot (``ppgm.learners.cgm.Pilot``): the simulated truth, its calibration, the
    naive refit, the score against it and its oracle."""

    @property
    def model(self) -> MarkovNetwork: ...

    @property
    def calibration(self) -> Calibration: ...

    @property
    def oracle(self) -> MarginalOracle: ...

    @property
    def criterion(self) -> str: ...

    @property
    def refit(self) -> Callable: ...

    @property
    def score(self) -> Callable: ...

    @property
    def start(self) -> MarkovNetwork | None: ...


def _em_loop(em: EMSteps, theta: np.ndarray, max_iter: int, tol: float, rtol: float, callback, tick=None,
             accelerate: bool = False) -> tuple:
    """EM iterations from ``theta`` until ``max_iter``, convergence or a callback's StopIteration:
    the parameters, the history and why it stopped.

    ``accelerate`` adds SQUAREM extrapolation (Varadhan and Roland 2008, step length -|r| / |v|): after
    two EM iterations t0 -> t1 -> t2, with r = t1 - t0 and v = t2 - 2 t1 + t0, EM iterates once more from
    t0 - 2 a r + a^2 v (a <= -1); the jump is kept when the objective there is at least the cycle's start,
    otherwise EM's state returns to t2. The E-step's dual moves with the jump (theta - lambda stays where
    the last E-step ended), so its warm start holds. Every EM iteration, kept or not, counts towards
    ``max_iter``; the history keeps the accepted ones. Tuning (chain N = 1e4, eps 1, at rtol 1e-5): the
    release-chosen weight's whole fit 26.5 s -> 14.2 s, the same choice and end points."""
    P = em.oracle.params
    history: list = []
    spent = 0

    def advance(t: np.ndarray) -> tuple[np.ndarray, dict]:  # one EM iteration, counted whether kept or not
        nonlocal spent
        new, record = em.iterate(t)
        spent += 1
        if tick is not None:
            tick(1)
        return new, record

    def keep(new: np.ndarray, record: dict) -> bool:  # an iteration joins the history: converged?
        history.append(record)
        logger.debug("CGM-EM iteration %d: objective %.6g, largest marginal change %.3g", len(history), record["objective"],
                     record["change"])
        if callback is not None:
            callback(len(history), P.model(new), record)
        return _em_converged(history, tol, rtol)

    try:
        while spent < max_iter:
            t0 = theta
            theta, record = advance(t0)
            if keep(theta, record) or spent >= max_iter:
                break
            if not accelerate:
                continue
            t1 = theta
            theta, record = advance(t1)
            if keep(theta, record) or spent >= max_iter:
                break
            r, v = t1 - t0, theta - 2 * t1 + t0
            nv = float(np.sqrt(v @ v))
            a = -float(np.sqrt(r @ r)) / nv if nv > 0 else -1.0
            if a >= -1.0:  # no longer step than EM's own two
                continue
            jump = t0 - 2 * a * r + a * a * v
            saved, start = copy.copy(em.__dict__), history[-2]["objective"]
            if em.lam is not None and em.observation is None:
                em.lam = em.lam + (jump - theta)
            em.next_log_z = None
            new, record = advance(jump)
            if np.isfinite(new).all() and np.isfinite(record["objective"]) and record["objective"] >= start:
                theta = new
                if keep(new, {**record, "extrapolated": True}):
                    break
            else:  # back to t2 and EM's state there
                em.__dict__.update(saved)
    except StopIteration:
        return theta, history, "callback raised StopIteration"
    if history and _em_converged(history, tol, rtol):
        return theta, history, "converged (marginal change below tol, or objective gain below rtol)"
    return theta, history, f"max_iter ({max_iter}) reached"


RISE = 3  # a simulated EM run stops once its score has risen this many iterations past its minimum
ITER_BOOT = 1  # simulated releases for the iteration count (one, at its smallest score, against two with the
# one-standard-error rule: as many tuning cells within 1.02 of the better naive fit, median 0.990 against 0.994,
# at 1.34x the naive fit's time against 1.77x; docs/explain/cgm-em.md, "The iteration count")


def release_iterations(ms: Sequence[Measurement], N: float, new_em: Callable[..., EMSteps], pilot: PilotLike,
                       start_l2: float, max_iter: int, tol: float, rtol: float, seed=0, n_boot: int = ITER_BOOT) -> Choice:
    """CGM-EM's iteration count chosen from the release: EM (same settings) run on releases simulated
    from the pilot, each from its naive fit at ``start_l2``, scored after every iteration by the
    pilot's criterion (KL(pilot || model) by default); the count with the smallest mean score. With
    two or more releases, the fewest iterations within one standard error (paired) of it instead
    (0: the start).

    Parameters
    ----------
    ms : sequence of Measurement
        The release.
    N : float
    new_em : callable
        ``new_em(tables)``: CGM-EM's E- and M-steps, with the fit's settings, for a release.
    pilot : PilotLike
    start_l2 : float
        The naive start's weight.
    max_iter, tol, rtol
        EM's stopping rule (the count chosen is at most ``max_iter``).
    seed : int or numpy.random.Generator
    n_boot : int
        Simulated releases (``ITER_BOOT``).

    Returns
    -------
    Choice
        ``value`` is the iteration count; ``scores`` one row per simulated release (column t: after t
        iterations; a run stopped early keeps its last score).

    Examples
    --------
    >>> from ppgm.learners.cgm import cgm_em
    >>> from ppgm.models.random_models import third_order_chain
    >>> truth = third_order_chain(4, 3, seed=0)
    >>> ms = simulated_release(truth, [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 6.0)
    ...                                for f in truth.factors], 2000, np.random.default_rng(1))
    >>> ch = cgm_em(truth.domain, ms, N=2000.0, progress=False).selection["iterations"]  # cgm_em's default rule
    >>> ch["value"] == int(np.argmin(ch["mean_scores"]))                                  # one release: its minimum
    True
    """
    n_boot = checks.count(n_boot, "n_boot")
    rng = as_generator(seed)
    curves = []
    for _ in range(n_boot):
        ys = simulated_release(pilot.model, ms, N, rng, pilot.calibration)
        start = pilot.refit(ys, start_l2, pilot.start)
        curve = [pilot.score(start)]

        def watch(t, model, record, curve=curve):
            curve.append(pilot.score(model))
            if len(curve) - 1 - int(np.argmin(curve)) >= RISE:
                raise StopIteration

        em = new_em(ys)
        _em_loop(em, em.oracle.params.join([f.values for f in start.factors]), max_iter, tol, rtol, watch)
        curves.append(curve)
    width = max(len(c) for c in curves)
    s = np.array([c + [c[-1]] * (width - len(c)) for c in curves])
    best = int(np.argmin(s.mean(axis=0)))
    j = within_one_se(s, best)  # fewer iterations within one standard error (paired); None for one release
    if j is None:
        return Choice(float(best), np.arange(width, dtype=float), s, True, "smallest mean score of the EM iterate against the pilot",
                      criterion=pilot.criterion)
    return Choice(float(j), np.arange(width, dtype=float), s, True, "fewest iterations within one standard error of the best",
                  criterion=pilot.criterion)


MSTEP_CANDIDATES = 3  # M-step weights tried from noise_aware_l2 down in half-decades (more while the lowest is best)
MSTEP_EXTEND = 3  # at most this many more half-decades below them
MSTEP_FLAT = 0.01  # ... and only while the last half-decade lowered the mean score by at least this share of it
MSTEP_BOOT = 1  # simulated releases (report cells, 2 -> 1 with 4 -> 3 candidates: the same counts at 3.4x the naive fit's time, not 6.0x)
MSTEP_MAX_ITER = 200  # EM's iteration cap when it runs to convergence at a release-chosen M-step weight
MSTEP_RTOL = 1e-4  # and its objective tolerance (1e-5 scored worse on tuning and report cells: docs/explain/cgm-em.md)


def release_mstep_l2(ms: Sequence[Measurement], N: float, new_em: Callable[..., EMSteps], pilot: PilotLike, start_l2: float,
                     upper: float, max_iter: int, tol: float, rtol: float, seed=0, n_boot: int = MSTEP_BOOT,
                     accelerate: bool = False) -> Choice:
    """CGM-EM's M-step weight chosen from the release, for EM run to convergence: on releases simulated
    from the pilot, EM from the naive fit at ``start_l2`` runs to convergence at each candidate weight
    (``upper`` down in half-decades; each candidate starts where the previous one converged, a path of
    weights), and each end point is scored against the pilot (KL(pilot || model) by default); the weight
    with the smallest mean score. ``MSTEP_CANDIDATES`` weights at least; the lattice grows downwards,
    up to ``MSTEP_EXTEND`` half-decades more, while its lowest weight scores best and the last half-decade
    still lowered the score by ``MSTEP_FLAT`` of it (past that the curve is flat: on the tuning cells,
    stopping there changed the fit's KL to the truth by -4% to +0.1% against running the lattice to its
    end). One simulated release
    by default (``MSTEP_BOOT``): on the tuning and report cells a second changed the counts of cells
    won and lost by none and doubled the cost (``docs/explain/cgm-em.md``, "Tried and not kept").

    Parameters
    ----------
    ms : sequence of Measurement
        The release.
    N : float
    new_em : callable
        ``new_em(tables, l2)``: CGM-EM's E- and M-steps, with the fit's settings, for a release and an
        M-step weight.
    pilot : PilotLike
    start_l2 : float
        The naive start's weight.
    upper : float
        The largest candidate (CGM-EM passes :func:`noise_aware_l2`).
    max_iter, tol, rtol
        EM's stopping rule in each simulated run.
    seed : int or numpy.random.Generator
    n_boot : int
        Simulated releases (``MSTEP_BOOT``).
    accelerate : bool
        Run the simulated EM with SQUAREM (:func:`_em_loop`'s ``accelerate``).

    Returns
    -------
    Choice
        ``value`` is the weight (per record); ``scores`` one row per simulated release, one column per
        candidate; ``decided`` is False when the lowest weight tried still scored best at the lattice's
        end and the curve was not flat there; ``reason`` says so for a flat curve, and how many simulated
        runs stopped at ``max_iter``.

    Examples
    --------
    >>> from ppgm.learners.cgm import cgm_em
    >>> from ppgm.models.random_models import third_order_chain
    >>> truth = third_order_chain(4, 3, seed=0)
    >>> ms = simulated_release(truth, [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 6.0)
    ...                                for f in truth.factors], 2000, np.random.default_rng(1))
    >>> res = cgm_em(truth.domain, ms, N=2000.0, l2="release", stop="converged", progress=False)
    >>> ch = res.selection["mstep_l2"]                       # cgm_em calls release_mstep_l2
    >>> len(ch["candidates"]) >= 3 and ch["value"] in ch["candidates"]
    True
    """
    rng = as_generator(seed)
    sims = [simulated_release(pilot.model, ms, N, rng, pilot.calibration) for _ in range(n_boot)]
    P = pilot.oracle.params
    thetas = [P.join([f.values for f in pilot.refit(ys, start_l2, None).factors]) for ys in sims]
    weights: list = []
    columns: list = []
    capped = 0
    while True:
        w = upper / STEP ** len(weights)
        column = []
        for b, ys in enumerate(sims):
            thetas[b], _, stopped = _em_loop(new_em(ys, w), thetas[b], max_iter, tol, rtol, None, accelerate=accelerate)
            capped += stopped.startswith("max_iter")  # the accelerated loop's history keeps fewer iterations than it ran
            column.append(pilot.score(P.model(thetas[b])))
        weights.append(w)
        columns.append(column)
        means = np.mean(columns, axis=1)
        lowest_best = int(np.argmin(means)) == len(weights) - 1
        flat = bool(lowest_best and len(weights) > 1 and means[-2] - means[-1] < MSTEP_FLAT * abs(means[-1]))
        if len(weights) >= MSTEP_CANDIDATES and (not lowest_best or flat or len(weights) >= MSTEP_CANDIDATES + MSTEP_EXTEND):
            break
    best = int(np.argmin(means))
    decided = not lowest_best or flat
    reason = "smallest mean score of converged EM against the pilot"
    if flat:
        reason += (f" (a flat curve: the lowest weight scored within {MSTEP_FLAT:.0%} of the one above it, so lower "
                   "weights would change little)")
    if capped:
        reason += f" ({capped} of {len(weights) * n_boot} simulated runs stopped at max_iter)"
    return Choice(float(weights[best]), np.array(weights), np.array(columns).T, decided, reason, criterion=pilot.criterion)


def _em_converged(history: list, tol: float, rtol: float) -> bool:
    """Stop when the largest marginal change is below ``tol`` or the objective gains less than
    ``rtol`` (relative) in an iteration."""
    if history[-1]["change"] < tol:
        return True
    if len(history) > 1 and np.isfinite(history[-1]["objective"]):
        gain = history[-1]["objective"] - history[-2]["objective"]
        return bool(gain < rtol * abs(history[-1]["objective"]))
    return False
