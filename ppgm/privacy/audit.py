"""Statistical audit of a private mechanism: run it many times on two neighbouring inputs and bound
from below, at a stated confidence, the epsilon its outputs imply.

A proof of privacy covers the mechanism as written down; an audit checks the code. The mechanism
runs ``runs`` times on a data set D and as many on a neighbour D' (one individual added or
removed, chosen to be hard: the worst-case row, a rare state, a person at the contribution bound).
For every event E of a family fixed before the runs (thresholds on released cells, the choice made,
the count published) the frequencies give one-sided Clopper-Pearson bounds, and

    epsilon_lb = max over E and both directions of log((p_lo(E | D) - delta) / p_hi(E | D')),

a lower confidence bound on the epsilon of (epsilon, delta)-DP (delta = 0 for pure DP; a zCDP
claim rho is tested at the (epsilon, delta) it implies, :func:`ppgm.privacy.mechanisms.zcdp_epsilon`).
All bounds hold together with probability at least 1 - ``alpha`` (Bonferroni over the events, both
data sets and both sides), so a mechanism that keeps its claim fails the audit with probability at
most ``alpha``; a leak larger than the bound's slack shows as ``epsilon_lb > claimed``. This is the
stochastic tester of Ding et al. (CCS 2018) with exact binomial bounds in place of a hypothesis
test, as in the auditing work that followed (Jagielski et al. 2020, Nasr et al. 2021).

Randomness: ``seeded=False`` audits the private path (the mechanism draws its own noise, from
OpenDP and the operating system, as a release does; not replayable). ``seeded=True`` draws a seed
from the operating system (or takes ``seed``), records it in the result and hands the mechanism a
numpy Generator: the reproducible, non-private path with the same noise law, for mechanisms whose
private path is too slow to run many times.

May import: ``ppgm.core``, ``ppgm.factors``, ``ppgm.models``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy.stats import beta

#: Default confidence: a mechanism that keeps its claim fails an audit with probability at most this.
ALPHA = 1e-6


def clopper_pearson(hits, runs: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds of a binomial probability: ``lo`` with P(p < lo) <= alpha
    and ``hi`` with P(p > hi) <= alpha, each on its own.

    Parameters
    ----------
    hits : array-like of int
        Times each event was seen.
    runs : int
        Trials.
    alpha : float
        Error probability of each bound.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Lower and upper bounds, one per event.

    Examples
    --------
    >>> lo, hi = clopper_pearson([0, 50, 100], 100, 0.025)
    >>> lo.round(4).tolist(), hi.round(4).tolist()
    ([0.0, 0.3983, 0.9638], [0.0362, 0.6017, 1.0])
    """
    k = np.asarray(hits, dtype=float)
    n = float(runs)
    with np.errstate(invalid="ignore"):
        lo = np.where(k > 0, beta.ppf(alpha, k, n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - alpha, k + 1, n - k), 1.0)
    return np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=1.0)


def epsilon_lower_bound(hits_d, hits_d2, runs: int, delta: float = 0.0, alpha: float = ALPHA) -> tuple[float, int, int]:
    """The largest log((p_lo(E | D) - delta) / p_hi(E | D')) over the events, in both directions
    (D against D' and D' against D), with every bound at ``alpha / (4 m)`` for m events so that
    all hold together with probability at least 1 - ``alpha``.

    Parameters
    ----------
    hits_d, hits_d2 : array-like of int
        Per event, how often it happened in the ``runs`` runs on D and on D'.
    runs : int
        Runs on each data set.
    delta : float
        The delta of the (epsilon, delta) claim tested (0: pure DP).
    alpha : float
        Probability that a mechanism keeping its claim gets a bound above it.

    Returns
    -------
    (float, int, int)
        The bound (0 when no event separates the data sets at this confidence), the event that
        gives it and its direction (0: D over D', 1: D' over D).

    Examples
    --------
    >>> eps, event, way = epsilon_lower_bound([5000, 100], [1840, 100], runs=10_000)
    >>> round(eps, 3), event, way
    (0.841, 0, 0)
    """
    a, b = np.asarray(hits_d, dtype=float), np.asarray(hits_d2, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"hits_d, hits_d2: expected two vectors of event counts of one length, got {a.shape} and {b.shape}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta: expected a number in [0, 1), got {delta!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a probability in (0, 1), got {alpha!r}")
    each = alpha / (4 * a.size)
    lo_a, hi_a = clopper_pearson(a, runs, each)
    lo_b, hi_b = clopper_pearson(b, runs, each)
    with np.errstate(divide="ignore", invalid="ignore"):
        ways = np.stack([np.log(np.clip(lo_a - delta, 0, None) / hi_b), np.log(np.clip(lo_b - delta, 0, None) / hi_a)])
    ways = np.where(np.isfinite(ways), ways, -np.inf)
    way, event = np.unravel_index(int(np.argmax(ways)), ways.shape)
    return max(float(ways[way, event]), 0.0), int(event), int(way)


def threshold_events(outputs, thresholds: Sequence[Sequence[float]], joint: bool = True) -> np.ndarray:
    """Events over numeric outputs fixed in advance: ``y_j >= t`` for every column j and every
    threshold t of ``thresholds[j]``, and with ``joint`` the intersections ``y_j >= t_j`` for all
    j at the i-th threshold of every column (the event that gathers a change spread over cells).

    Parameters
    ----------
    outputs : array-like of shape (runs, columns)
    thresholds : sequence of sequences of float
        Per column, the thresholds (public: never read from the outputs).
    joint : bool
        Add the intersections (columns' threshold lists of one length).

    Returns
    -------
    numpy.ndarray of bool, shape (runs, events)

    Examples
    --------
    >>> threshold_events(np.array([[3, 0], [5, 2]]), [[4], [1]]).tolist()
    [[False, False, False], [True, True, True]]
    """
    y = np.asarray(outputs, dtype=float)
    if y.ndim == 1:
        y = y[:, None]
    ts = [np.asarray(t, dtype=float) for t in thresholds]
    if len(ts) != y.shape[1]:
        raise ValueError(f"thresholds: expected one list per output column ({y.shape[1]}), got {len(ts)}")
    cols = [y[:, [j]] >= t[None, :] for j, t in enumerate(ts)]
    events = list(cols)
    if joint and len(cols) > 1:
        if len({t.size for t in ts}) != 1:
            raise ValueError("thresholds: joint events need as many thresholds for every column")
        events.append(np.logical_and.reduce(cols))
    return np.concatenate(events, axis=1)


def choice_events(choices, n_choices: int) -> np.ndarray:
    """Events ``choice == i`` for each of ``n_choices`` outcomes (a selection's output).

    Parameters
    ----------
    choices : array-like of int, shape (runs,)
    n_choices : int

    Returns
    -------
    numpy.ndarray of bool, shape (runs, n_choices)

    Examples
    --------
    >>> choice_events([0, 2, 2], 3).sum(axis=0).tolist()
    [1, 0, 2]
    """
    c = np.asarray(choices).ravel()
    return c[:, None] == np.arange(int(n_choices))[None, :]


@dataclass(frozen=True)
class AuditResult:
    """What one audit found.

    Parameters
    ----------
    name : str
    runs : int
        Runs on each of the two data sets.
    claimed : float
        The epsilon the mechanism claims (for a zCDP claim, the epsilon it implies at ``delta``).
    delta : float
    epsilon_lb : float
        Lower confidence bound on the epsilon the outputs imply.
    alpha : float
        The bound holds with probability at least 1 - alpha.
    event : int
        Index of the event that gave the bound (in the scenario's event family).
    direction : int
        0: D over D'; 1: D' over D.
    seconds : float
    private : bool
        True: the private path (noise the mechanism drew itself); False: seeded.
    seed : int or None
        The seed of a seeded audit (replay it with ``seed=``).

    Examples
    --------
    >>> r = AuditResult("x", 100, 1.0, 0.0, 0.4, 1e-6, 0, 0, 0.1, True, None)
    >>> r.passed
    True
    """

    name: str
    runs: int
    claimed: float
    delta: float
    epsilon_lb: float
    alpha: float
    event: int
    direction: int
    seconds: float
    private: bool
    seed: int | None

    @property
    def passed(self) -> bool:
        """The outputs do not contradict the claim (``epsilon_lb <= claimed``)."""
        return self.epsilon_lb <= self.claimed


def collect(sample: Callable[[int, int, np.random.Generator | None], np.ndarray], runs: int, *, seeded: bool = False,
            seed: int | None = None, batch: int | None = None) -> tuple[tuple[np.ndarray, np.ndarray], int | None]:
    """``runs`` outputs of a mechanism on each of two neighbouring inputs, and the seed used.

    Parameters
    ----------
    sample : callable
        ``sample(which, runs, rng)``: ``runs`` outputs on D (``which`` 0) or D' (``which`` 1), one
        row per run. ``rng`` is None on the private path, a Generator on the seeded one.
    runs : int
        Runs on each data set.
    seeded : bool
        The seeded path: a seed drawn from the operating system (or ``seed``), returned.
    seed : int, optional
        Replay a seeded audit (implies ``seeded``).
    batch : int, optional
        Runs asked of ``sample`` at a time (default: all at once).

    Returns
    -------
    ((numpy.ndarray, numpy.ndarray), int or None)
        The outputs on D and on D', and the seed (None on the private path).

    Examples
    --------
    >>> (a, b), seed = collect(lambda which, k, rng: rng.random((k, 1)) + which, 5, seed=3)
    >>> a.shape, bool((b >= 1).all()), seed
    ((5, 1), True, 3)
    """
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise ValueError(f"runs: expected a positive whole number, got {runs!r}")
    if seed is not None:
        seeded = True
    if seeded and seed is None:
        seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]  # fresh from the operating system
    rng = np.random.default_rng(seed) if seeded else None
    step = int(batch or runs)
    outs = []
    for which in (0, 1):
        parts, done = [], 0
        while done < runs:
            k = min(step, int(runs) - done)
            y = np.asarray(sample(which, k, rng))
            if y.shape[:1] != (k,):
                raise ValueError(f"sample: expected {k} outputs (one row per run), got shape {y.shape}")
            parts.append(y)
            done += k
        outs.append(np.concatenate(parts))
    return (outs[0], outs[1]), seed


def audit_outputs(out_d: np.ndarray, out_d2: np.ndarray, events: Callable[[np.ndarray], np.ndarray], claimed: float, *,
                  delta: float = 0.0, alpha: float = ALPHA, name: str = "", seconds: float = 0.0,
                  seed: int | None = None) -> AuditResult:
    """The audit of outputs already collected (:func:`collect`): one claim tested on them, so that
    several claims (a release's tables and its count) share one set of runs.

    Parameters
    ----------
    out_d, out_d2 : numpy.ndarray
        The outputs on D and on D', as many rows each.
    events : callable
        ``events(outputs)``: a boolean array (runs, m), the event family, fixed before the runs.
    claimed : float
        The epsilon claimed (pure DP, or at ``delta``).
    delta : float
    alpha : float
    name : str
    seconds : float
        Time the runs took (recorded).
    seed : int, optional
        The seed of a seeded collection (recorded; None: the private path).

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> y = np.r_[np.ones(600, bool), np.zeros(400, bool)][:, None]
    >>> r = audit_outputs(y, ~y, lambda o: o, claimed=1.0)
    >>> r.passed, round(r.epsilon_lb, 3)
    (True, 0.082)
    """
    if len(out_d) != len(out_d2):
        raise ValueError(f"out_d, out_d2: expected as many runs on each data set, got {len(out_d)} and {len(out_d2)}")
    hits = []
    for out in (out_d, out_d2):
        ev = np.asarray(events(out), dtype=bool)
        if ev.ndim != 2 or ev.shape[0] != len(out):
            raise ValueError(f"events: expected a boolean array of shape ({len(out)}, events), got {ev.shape}")
        hits.append(ev.sum(axis=0))
    eps, event, way = epsilon_lower_bound(hits[0], hits[1], len(out_d), delta, alpha)
    return AuditResult(name, len(out_d), float(claimed), float(delta), eps, float(alpha), event, way, float(seconds),
                       seed is None, seed)


def audit(sample: Callable[[int, int, np.random.Generator | None], np.ndarray], events: Callable[[np.ndarray], np.ndarray],
          runs: int, claimed: float, *, delta: float = 0.0, alpha: float = ALPHA, seeded: bool = False,
          seed: int | None = None, name: str = "", batch: int | None = None) -> AuditResult:
    """Run a mechanism ``runs`` times on each of two neighbouring inputs and bound its epsilon from
    below (see the module docstring): :func:`collect` then :func:`audit_outputs`.

    Parameters
    ----------
    sample : callable
        ``sample(which, runs, rng)``: ``runs`` outputs of the mechanism on D (``which`` 0) or D'
        (``which`` 1), as an array with one row per run. ``rng`` is None on the private path, a
        Generator on the seeded one.
    events : callable
        ``events(outputs)``: a boolean array (runs, m), the event family, fixed before the runs.
    runs : int
        Runs on each data set.
    claimed : float
        The epsilon claimed (pure DP, or at ``delta``).
    delta : float
        The delta of the claim (0: pure DP).
    alpha : float
        A mechanism that keeps its claim fails with probability at most ``alpha``.
    seeded : bool
        Audit the seeded path: a seed drawn from the operating system (or ``seed``), recorded.
    seed : int, optional
        Replay a seeded audit.
    name : str
    batch : int, optional
        Runs asked of ``sample`` at a time (default: all at once).

    Returns
    -------
    AuditResult

    Examples
    --------
    A randomised response that keeps its epsilon = log 3 (the true answer with probability 3/4):

    >>> def rr(which, runs, rng):
    ...     return ((rng.random(runs) < 0.75) == bool(which))[:, None]
    >>> r = audit(rr, lambda y: np.concatenate([y, ~y], 1), 20_000, math.log(3), seeded=True, seed=1)
    >>> r.passed, 0.9 < r.epsilon_lb < math.log(3)
    (True, True)
    """
    t0 = time.perf_counter()
    (out_d, out_d2), seed = collect(sample, runs, seeded=seeded, seed=seed, batch=batch)
    return audit_outputs(out_d, out_d2, events, claimed, delta=delta, alpha=alpha, name=name,
                         seconds=time.perf_counter() - t0, seed=seed)
