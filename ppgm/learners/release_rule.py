"""Regularisation chosen from the release itself, by a parametric bootstrap.

A learner fitted to one noisy table per clique must be regularised, and how much depends on the noise,
N and the model: no constant is right everywhere (``docs/explain/cgm-em.md``, "Regularisation chosen from the release"). The
release carries what is needed to choose: the mechanism and its noise law are public and N is public or
noised. So we simulate releases like the real one from a fit of it (the *pilot*), refit them at
candidate settings and keep the setting that recovers the pilot best:

1. pilot: a lightly regularised fit of the release (the paper's naive MLE, L2 weight 1 / N);
2. ``n_boot`` times: draw the tables of N records from the pilot (exact, without the records), tabulate
   the released cliques (pooled tables summed as released), add noise of the same law and scale;
3. refit each simulated release at every candidate and score it by KL(pilot || refit) (or, for users
   scored on workload error, the mean total variation over the released cliques: ``criterion="tv"``);
4. keep the candidate with the smallest mean score, refined by a parabola in log weight through it
   and its neighbours (learners whose simulated releases are few and noisy may ask instead for the
   most regularised candidate within one standard error of the best, ``one_se=True``).

The choice uses the release only (no records, no truth): it is post-processing, and costs no privacy
budget. Its randomness comes from ``seed`` (simulated noise is never released).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from ..core import checks
from ..core.blas_threads import thread_map
from ..core.rng import as_generator
from ..factors.factor import Factor
from ..inference.junction_tree import Calibration, JunctionTree
from ..inference.metrics import kl_divergence
from ..inference.sampling import sample_clique_tables
from ..models.markov import MarkovNetwork
from ..models.measurement import Measurement
from ..models.noise import add_noise
from .mle import MarginalOracle

N_BOOT = 3  # simulated releases per choice (tuning families: 2 left the choice noisy at low noise)
STEP = np.sqrt(10.0)  # the candidate grid: half-decades of the weight
PATIENCE = 1  # the descent stops at the first candidate past the minimum (two: the same tuning choices at 1.2x the time)


class UndecidedWarning(UserWarning):
    """The release-based rule could not place the best setting inside its candidate range."""


@dataclass(frozen=True)
class Choice:
    """What the release-based rule chose, and the criterion behind it.

    Attributes
    ----------
    value : float
        The chosen setting (an L2 weight per record, or an iteration count).
    candidates : numpy.ndarray
        The settings tried, in the order they were tried.
    scores : numpy.ndarray
        The criterion (KL(pilot || refit) in nats by default), one row per simulated release, one column
        per candidate.
    decided : bool
        False when the best candidate lay at the edge of the range tried (the value is that edge).
    reason : str
        How the value was picked.
    extrapolation : dict, optional
        For a bias-corrected choice (:func:`extrapolate`): the first-level weight, the second-level
        one and the corrected value before clipping.
    criterion : str
        What the scores measure: ``"kl"`` (KL(pilot || refit)) or ``"tv"`` (mean total variation over
        the released cliques).
    """

    value: float
    candidates: np.ndarray
    scores: np.ndarray
    decided: bool = True
    reason: str = ""
    extrapolation: dict | None = None
    criterion: str = "kl"

    def as_record(self) -> dict:
        """The choice as a plain dict for a result's history."""
        out = {"value": float(self.value), "candidates": [float(c) for c in self.candidates],
               "mean_scores": [float(s) for s in self.scores.mean(axis=0)], "decided": self.decided,
               "reason": self.reason, "criterion": self.criterion}
        if self.extrapolation is not None:
            out["extrapolation"] = dict(self.extrapolation)
        return out


def simulated_release(model: MarkovNetwork, ms: Sequence[Measurement], N: float, rng: np.random.Generator,
                      calibration: Calibration | None = None) -> list[Measurement]:
    """A release like ``ms`` drawn from ``model``: the tables of N records (drawn as tables,
    :func:`ppgm.inference.sampling.sample_clique_tables`), each measured clique tabulated (a pooled table as the
    sum of its members'), and noise of each table's law and scale added (seeded: a simulation, never a
    release).

    Parameters
    ----------
    model : MarkovNetwork
    ms : sequence of Measurement
    N : float
        Records to draw (rounded).
    rng : numpy.random.Generator
    calibration : Calibration, optional
        ``model``'s calibration on its junction tree, when several releases are drawn from it.

    Returns
    -------
    list of Measurement

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> mn = third_order_chain(4, 2, seed=0)
    >>> ms = [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 2.0) for f in mn.factors]
    >>> ys = simulated_release(mn, ms, 100, np.random.default_rng(0))
    >>> len(ys), ys[0].noise, ys[0].scale
    (6, 'laplace', 2.0)
    """
    cliques = [c for m in ms for c in m.cliques]
    cal = calibration if calibration is not None else JunctionTree.build(model.domain, model.scopes).calibrate(model)
    tree = cal.tree
    drawn = sample_clique_tables(model, int(round(N)), seed=rng, calibration=cal)
    counts = [Factor(tree.cliques[h], drawn[h]).sum_to(c) for h, c in ((tree.home(c), c) for c in cliques)]
    out, k = [], 0
    for m in ms:
        table = np.zeros(m.shape, dtype=np.int64)
        for _ in m.cliques:  # members are aligned axis by axis with the pooled table
            table = table + np.asarray(counts[k].values).astype(np.int64)
            k += 1
        values = add_noise(table, m.noise, m.scale, rng) if m.noise != "none" else table
        out.append(Measurement(m.variables, np.asarray(values, dtype=float), m.noise, m.scale, n=m.n,
                               integer=m.integer, members=m.members))
    return out


def kl_from(pilot: MarkovNetwork, oracle: MarginalOracle) -> Callable[[MarkovNetwork], float]:
    """KL(pilot || q) for networks q with the pilot's scopes (finite log-potentials, an exact
    oracle), in one calibration of q: the pilot's marginals and log Z are computed once.
    KL = <mu_p, theta_p - theta_q> - log Z_p + log Z_q.

    Parameters
    ----------
    pilot : MarkovNetwork
    oracle : MarginalOracle
        Built for the pilot's scopes.

    Returns
    -------
    callable

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> p, q = third_order_chain(4, 3, seed=0), third_order_chain(4, 3, seed=1)
    >>> abs(kl_from(p, MarginalOracle(p.domain, p.scopes))(q) - kl_divergence(p, q)) < 1e-10
    True
    """
    P = oracle.params
    theta_p = P.join([f.values for f in pilot.factors])
    log_zp, mu_p = oracle.flat(theta_p)

    def kl(q: MarkovNetwork) -> float:
        theta_q = P.join([f.values for f in q.factors])
        return max(float(mu_p @ (theta_p - theta_q) - log_zp + oracle.flat(theta_q)[0]), 0.0)
    return kl


def tv_from(pilot: MarkovNetwork, oracle: MarginalOracle) -> Callable[[MarkovNetwork], float]:
    """Mean total variation between the pilot's and q's marginals over the oracle's scopes (the
    released cliques), for networks q with the pilot's scopes: the criterion of users scored on
    workload error (AIM's is the L1 error of the workload's marginals). One calibration of q.

    KL(pilot || q) weighs a cell's error by the pilot's log-ratio, so it punishes a near-empty cell
    that q empties more than a shifted full one; TV counts mass moved. On AIM's releases the two
    disagree on the naive fit's weight (``docs/explain/cgm-em.md``, "The naive weight: a parametric bootstrap").

    Parameters
    ----------
    pilot : MarkovNetwork
    oracle : MarginalOracle
        Built for the pilot's scopes.

    Returns
    -------
    callable

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> p = third_order_chain(4, 3, seed=0)
    >>> tv = tv_from(p, MarginalOracle(p.domain, p.scopes))
    >>> tv(p), 0.0 < tv(third_order_chain(4, 3, seed=1)) < 1.0
    (0.0, True)
    """
    P = oracle.params
    mu_p = oracle.flat(P.join([f.values for f in pilot.factors]))[1]
    starts = P.offsets[:-1]

    def tv(q: MarkovNetwork) -> float:
        mu_q = oracle.flat(P.join([f.values for f in q.factors]))[1]
        return float(0.5 * np.add.reduceat(np.abs(mu_p - mu_q), starts).mean())
    return tv


CRITERIA = {"kl": kl_from, "tv": tv_from}  # the bootstrap's score of a refit against its pilot


def criterion_score(criterion: str) -> Callable[[MarkovNetwork, MarginalOracle], Callable[[MarkovNetwork], float]]:
    """The scorer factory of a criterion name (``"kl"``: :func:`kl_from`, ``"tv"``: :func:`tv_from`).

    Parameters
    ----------
    criterion : {"kl", "tv"}

    Returns
    -------
    callable
        ``factory(pilot, oracle)`` -> ``score(q)``.

    Examples
    --------
    >>> criterion_score("tv") is tv_from
    True
    """
    return CRITERIA[checks.choice(criterion, "criterion", tuple(CRITERIA))]


def within_one_se(scores: np.ndarray, best: int) -> int | None:
    """The first column before ``best`` whose paired differences from it (over the rows: simulated
    releases) have a mean within one standard error; None when there is none. Columns are ordered
    from the most to the least regularised, so this is the one-standard-error rule.

    Parameters
    ----------
    scores : numpy.ndarray
        One row per simulated release, one column per candidate.
    best : int

    Returns
    -------
    int or None
        None also for a single row (no standard error).

    Examples
    --------
    >>> within_one_se(np.array([[0.6, 0.9, 0.5], [0.4, 0.8, 0.5]]), 2)   # column 0 ties the best within noise
    0
    """
    if scores.shape[0] < 2:  # one row has no standard error
        return None
    for j in range(best):
        d = scores[:, j] - scores[:, best]
        if d.mean() <= d.std(ddof=1) / np.sqrt(scores.shape[0]):
            return j
    return None


def extrapolate(first: Choice, second: Choice, lower: float, limit: float = STEP) -> Choice:
    """Correct a bootstrap choice for its pilot's own noise by extrapolating one level further (SIMEX).

    The pilot is a lightly regularised fit of the release, so it carries the release's noise as well
    as its signal; the first-level choice ``first`` (releases simulated from the pilot) is that of a
    problem with the noise added once more than the real one, ``second`` (releases simulated from
    pilots of simulated releases) with it added twice. In a Gaussian sequence model the best ridge
    weight is noise variance over signal energy, and the energy grows linearly with each level of
    added noise, so the inverse weight is linear in the level: ``1 / w = 2 / first - 1 / second``
    (Cook and Stefanski's simulation-extrapolation, here on the weight). The move is clipped to
    ``limit`` either way (a noisy second level must not throw the choice far) and to the floor.

    Parameters
    ----------
    first, second : Choice
        The choices of the first and second levels.
    lower : float
        The floor of the weight.
    limit : float
        The largest factor by which the correction moves the first-level weight.

    Returns
    -------
    Choice
        ``first`` with the corrected value and the ``extrapolation`` record.

    Examples
    --------
    >>> c = lambda v: Choice(v, np.array([v]), np.zeros((3, 1)))
    >>> round(extrapolate(c(0.02), c(0.015), lower=1e-4).value, 6)   # inverse weights 50 and 66.7: 33.3
    0.03
    >>> round(extrapolate(c(0.02), c(0.04), lower=1e-4).value, 6)   # inverse weights 50 and 25: 75
    0.013333
    """
    inv = 2.0 / first.value - 1.0 / second.value
    raw = 1.0 / inv if inv > 0 else float("inf")
    value = float(np.clip(raw, first.value / limit, first.value * limit))
    value = max(value, lower)
    record = {"first": float(first.value), "second": float(second.value), "raw": raw}
    reason = first.reason + "; corrected for the pilot's noise by extrapolation (SIMEX)"
    return replace(first, value=value, reason=reason, extrapolation=record)


def choose_l2(
    ms: Sequence[Measurement],
    N: float,
    refit: Callable[[list, float, MarkovNetwork | None], MarkovNetwork],
    pilot: MarkovNetwork,
    upper: float,
    lower: float | None = None,
    n_boot: int = N_BOOT,
    seed=0,
    score: Callable[[MarkovNetwork], float] | Sequence[Callable[[MarkovNetwork], float]] | None = None,
    simulate: Callable[[np.random.Generator], list] | None = None,
    patience: int = PATIENCE,
    one_se: bool = False,
    start: MarkovNetwork | None = None,
    threads: bool = False,
) -> Choice:
    """The L2 weight (per record) at which ``refit`` best recovers ``pilot`` from releases like ``ms``.

    Candidates run down from ``upper`` in half-decades to the floor ``lower`` (default ``1 / N``),
    stopping once ``patience`` candidates past the mean score's minimum have been tried; the range
    grows upwards (at most three half-decades) while the best candidate is the largest tried.

    Parameters
    ----------
    ms : sequence of Measurement
        The release.
    N : float
    refit : callable
        ``refit(measurements, l2, init)`` -> MarkovNetwork: the learner whose weight is chosen,
        warm-started at ``init`` (None or the previous candidate's fit on the same simulated release).
    pilot : MarkovNetwork
        The simulated releases' truth: a lightly regularised fit of ``ms``.
    upper, lower : float
        The candidate range (per-record weights). The floor is a floor, not a guess: below the
        paper's 1 / N the lightly regularised pilot is rougher than the truth and the bootstrap
        favours too small a weight (``docs/explain/cgm-em.md``, "The naive weight: a parametric bootstrap").
    n_boot : int
        Simulated releases.
    seed : int or numpy.random.Generator
    score : callable or sequence of callables, optional
        KL(pilot || fit) for a fit (default :func:`ppgm.kl_divergence`; :func:`kl_from` calibrates the
        pilot once); one callable per simulated release when each has its own truth (``simulate``
        then draws release b from truth b).
    simulate : callable, optional
        ``simulate(rng)`` -> a release like ``ms`` drawn from the pilot (default
        :func:`simulated_release`; learners whose pilot is not a MarkovNetwork bring their own).
    patience : int
        Candidates past the minimum of the mean score after which the descent stops.
    one_se : bool
        Take the most regularised candidate whose paired score differences from the best are within
        one standard error, instead of the parabola's minimum. With three simulated releases that
        jump of a half-decade or more was wrong more often than right for the naive MLE
        (``docs/explain/cgm-em.md``, "Tried and not kept"); MaxEnt's rule keeps it.
    start : MarkovNetwork, optional
        Where each simulated release's first refit (and the refits above it, when the range grows)
        starts; default cold (``init`` None). The pilot itself, when it was fitted from a model near it
        (AIM's last round): on models of millions of cells a cold refit costs several warm ones.
    threads : bool
        Refit a weight's simulated releases side by side on threads
        (:func:`ppgm.core.blas_threads.thread_map`): same results, for ``refit`` and ``score`` callables
        that share no mutable state and draw no randomness (the naive MLE's; not PCD's, whose refits
        draw chains from a shared generator). On two cores 1.2-1.4x faster on models of millions of cells.

    Returns
    -------
    Choice
        ``value`` is the chosen weight; ``decided`` is False (and an :class:`UndecidedWarning` is
        raised) when the largest weight tried scored best even after the range grew.

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.learners.cgm import naive_refit
    >>> truth = third_order_chain(4, 3, seed=0)
    >>> rng = np.random.default_rng(1)
    >>> ms = simulated_release(truth, [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 6.0)
    ...                                for f in truth.factors], 2000, rng)
    >>> ch = choose_l2(ms, 2000, naive_refit(truth.domain, ms, 2000), truth, upper=0.05)
    >>> bool(1e-5 < ch.value <= 0.05 * 10**1.5)
    True
    """
    n_boot = checks.count(n_boot, "n_boot", 2)
    patience = checks.count(patience, "patience")
    one_se = checks.flag(one_se, "one_se")
    rng = as_generator(seed)
    lower = 1.0 / N if lower is None else lower
    score = score or (lambda q: kl_divergence(pilot, q))
    scores_of = list(score) if isinstance(score, Sequence) else [score] * n_boot
    if len(scores_of) != n_boot:
        raise ValueError(f"score: expected one callable or {n_boot} (one per simulated release), got {len(scores_of)}")
    if simulate is None:  # the pilot calibrated once for all its releases
        cal = JunctionTree.build(pilot.domain, pilot.scopes).calibrate(pilot)
        simulate = lambda r: simulated_release(pilot, ms, N, r, cal)  # noqa: E731
    releases = [simulate(rng) for _ in range(n_boot)]
    last: list = [start] * n_boot
    cands: list = []
    cols: list = []

    def try_weight(l2: float) -> None:
        def one(b: int) -> tuple:  # release b's refit at l2 (from its previous one) and its score
            fit = refit(releases[b], l2, last[b])
            return fit, scores_of[b](fit)
        done = thread_map(one, range(n_boot), None if threads else 1)
        last[:] = [fit for fit, _ in done]
        cands.append(l2)
        cols.append([score for _, score in done])

    l2 = float(upper)
    while True:  # descend to the floor, or until `patience` candidates past the mean score's minimum are tried
        try_weight(l2)
        means = np.mean(cols, axis=1)
        if len(means) - 1 - int(np.argmin(means)) >= patience or l2 <= lower:
            break
        l2 = max(l2 / STEP, lower)
    grown = 0
    while int(np.argmin(np.mean(cols, axis=1))) == 0 and grown < 3:  # the largest tried is best: go up
        last = [start] * n_boot
        try_weight(cands[0] * STEP)
        cands, cols = cands[-1:] + cands[:-1], cols[-1:] + cols[:-1]  # keep decreasing order
        grown += 1
    c = np.array(cands)
    s = np.array(cols).T  # (n_boot, candidates), candidates in decreasing weight
    means = s.mean(axis=0)
    best = int(np.argmin(means))
    at_floor = best == len(c) - 1 and c[best] <= lower * (1 + 1e-9)
    decided = bool(best > 0 and (best < len(c) - 1 or at_floor))
    value = float(c[best])
    reason = "the floor of the range" if at_floor else "smallest mean score against the pilot"
    j = within_one_se(s, best) if one_se else None  # the most regularised candidate within one SE of the best
    if j is not None:
        value, reason = float(c[j]), "largest weight within one standard error of the best"
    elif 0 < best < len(c) - 1:  # refine the best half-decade by a parabola in log weight
        x = np.log(c[best - 1:best + 2])
        y = means[best - 1:best + 2]
        den = y[0] - 2 * y[1] + y[2]
        if den > 0:
            off = float(np.clip(0.5 * (y[0] - y[2]) / den, -0.5, 0.5))
            value, reason = max(lower, float(np.exp(x[1] + off * (x[1] - x[0])))), "parabola through the best three candidates"
    if not decided:
        reason = "the largest candidate tried was best: the rule could not decide"
        warnings.warn(f"L2 weight chosen from the release: the largest candidate ({c[best]:.3g}) scored best, "
                      "so the best weight may lie above the range tried; pass l2= to override", UndecidedWarning, stacklevel=3)
    return Choice(value, c, s, decided, reason)
