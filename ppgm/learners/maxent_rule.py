"""The theta penalty of a MaxEnt fit, chosen from its aggregated tables.

Once PCD converges (Fisher-scaled steps on noisy tables, ``ppgm.learners.maxent``), the L2 penalty on theta is the
regulariser, and no constant suits every data set: the quadratic logistic's validated penalty runs from 1 (a rare
label) to 64 (a weak one) on pgmpy's bundled networks, and on noisy releases the noise moves it further
(``docs/explain/maxent.md``, "The penalty chosen from the tables"). As for the naive MLE
(``ppgm.learners.release_rule``), the tables choose:

1. pilot: the fit at :data:`PILOT_L2`;
2. simulated tables: N records drawn from the pilot (its PCD chains, resampled, and labels from its
   conditional), tabulated into the given tables and, where they carry noise, noised with each table's law
   and scale;
3. each refitted at candidate penalties, half-decades from :data:`UPPER` down to :data:`LOWER` (noisy tables)
   or :data:`LOWER_EXACT` (exact ones) (fewer chains, warm-started from the pilot and from the previous
   candidate, with the final fit's prior variance on noisy cells), scored by the conditional KL from the pilot
   over its chains;
4. the candidate of :func:`ppgm.learners.release_rule.choose_l2` (one-standard-error rule), then the final fit
   continues the pilot's chains at that penalty.

Post-processing of the tables only: no privacy budget is spent; randomness from ``seed``.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from ..core.progress import ConvergenceWarning
from ..models.measurement import Measurement
from ..models.noise import add_noise
from .release_rule import Choice, choose_l2

PILOT_L2 = 30.0  # the pilot's penalty (the best of 10, 20, 30, 60 on a validation split of Adult's train rows)
UPPER, LOWER = 1000.0, 10.0  # candidates: half-decades from UPPER down to LOWER (grown upwards when the top is best)
LOWER_EXACT = 1.0  # ... down to this on exact tables, whose only noise is sampling
BOOT_CHAINS, BOOT_STEPS = 2000, 100  # a candidate refit: chains and PCD steps (with mu's momentum, far enough)
PATIENCE = 1  # stop the descent at the first candidate past the minimum (a refit costs a tenth of a fit)
SCORE_CHAINS = 4000  # pilot chain states the conditional KL averages over


def simulated_aggregates(model, chains: np.ndarray, tables: Sequence[Measurement], n: float,
                         rng: np.random.Generator) -> list[Measurement]:
    """Aggregated tables like ``tables`` drawn from a MaxEnt ``model``: ``n`` feature rows resampled from
    its chain states, labels from its conditional, counts and label sums per released table (hashed
    tables in their buckets), and noise of each table's law and scale (seeded: a simulation).

    Parameters
    ----------
    model : ppgm.learners.maxent.MaxEntModel
    chains : numpy.ndarray
        Feature states drawn from ``model`` (a PCD state's chains), shape (chains, features).
    tables : sequence of Measurement
        The release to imitate (its scopes, buckets, noise laws and scales).
    n : float
        Records to draw.
    rng : numpy.random.Generator

    Returns
    -------
    list of Measurement

    Examples
    --------
    >>> from ppgm import Domain
    >>> from ppgm.learners.aggregates import aggregate_records
    >>> from ppgm.learners.maxent import MaxEntLayout, MaxEntModel
    >>> d = Domain(("a", "b"), (2, 3))
    >>> t = aggregate_records([[0, 1], [1, 2]] * 50, [1, 0] * 50, d, [("a",), ("a", "b")])
    >>> m = MaxEntModel.naive_bayes(MaxEntLayout.from_tables(d, t), t)
    >>> sim = simulated_aggregates(m, np.array([[0, 1], [1, 2]]), t, 100, np.random.default_rng(0))
    >>> float(sim[1].values.sum()), sim[1].noise
    (100.0, 'none')
    """
    layout = model.layout
    rows = chains[rng.integers(0, len(chains), size=int(round(n)))]
    labels = rng.random(len(rows)) < model.predict_proba(rows)
    slots = layout.slots_by_table(rows)
    flat = slots.ravel()
    d = np.bincount(flat, minlength=layout.n_slots)
    c = np.bincount(flat, weights=np.tile(labels, slots.shape[0]), minlength=layout.n_slots)
    out = []
    for t, off, size in zip(tables, layout.offsets, layout.sizes):
        dt = d[off:off + size].reshape(t.shape)
        ct = np.rint(c[off:off + size]).astype(np.int64).reshape(t.shape)
        if t.noise != "none":
            dt, ct = add_noise(dt, t.noise, t.scale, rng), add_noise(ct, t.noise, t.scale, rng)
        out.append(Measurement(t.variables, np.asarray(dt, float), t.noise, t.scale, n=t.n,
                               label_sums=np.asarray(ct, float), buckets=t.buckets, integer=t.noise != "none"))
    return out


def conditional_kl(pilot, states: np.ndarray):
    """``score(fit)``: the mean over ``states`` of KL(P_pilot(y | x) || P_fit(y | x)), in nats.

    Examples
    --------
    >>> from ppgm import Domain
    >>> from ppgm.learners.aggregates import aggregate_records
    >>> from ppgm.learners.maxent import MaxEntLayout, MaxEntModel
    >>> d = Domain(("a",), (2,))
    >>> t = aggregate_records([[0], [1]] * 50, [1, 0] * 50, d, [("a",)])
    >>> m = MaxEntModel.naive_bayes(MaxEntLayout.from_tables(d, t), t)
    >>> conditional_kl(m, np.array([[0], [1]]))(m)
    0.0
    """
    p = np.clip(pilot.predict_proba(states), 1e-12, 1 - 1e-12)

    def score(fit) -> float:
        model = getattr(fit, "model", fit)
        q = np.clip(model.predict_proba(states), 1e-12, 1 - 1e-12)
        return max(float(np.mean(p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q)))), 0.0)
    return score


def release_l2_theta(tables: Sequence[Measurement], pilot, n: float, fit, seed=0, n_boot: int = 2,
                     lower: float = LOWER) -> Choice:
    """The theta penalty (in records) chosen from aggregated tables by a parametric bootstrap of them.

    Parameters
    ----------
    tables : sequence of Measurement
        The aggregated tables, exact or released with noise.
    pilot : ppgm.learners.maxent.PCDResult
        The fit of ``tables`` at :data:`PILOT_L2` (its model and chains are the simulations' truth).
    n : float
        Record count.
    fit : callable
        ``fit(tables, l2_theta=, n_chains=, max_iter=, model=, state=, seed=)`` -> PCDResult: the learner
        (``fit_maxent`` with the caller's other settings bound).
    seed : int or numpy.random.Generator
    n_boot : int
        Simulated releases.
    lower : float
        The smallest candidate (:data:`LOWER` for noisy tables, :data:`LOWER_EXACT` for exact ones, whose only
        noise is sampling).

    Returns
    -------
    Choice

    Examples
    --------
    >>> import functools
    >>> from ppgm import Domain
    >>> from ppgm.learners.aggregates import aggregate_records, noisy_aggregates
    >>> from ppgm.learners.maxent import fit_maxent
    >>> from ppgm.privacy.mechanisms import LaplaceMechanism
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 2, size=(3000, 2)); y = (rng.random(3000) < 0.3 + 0.4 * x[:, 0]).astype(int)
    >>> d = Domain(("a", "b"), (2, 2))
    >>> ys = noisy_aggregates(aggregate_records(x, y, d, [("a",), ("b",), ("a", "b")]), LaplaceMechanism(1.0), rng)
    >>> f = functools.partial(fit_maxent, domain=d, n=3000, progress=False)
    >>> pilot = f(ys, l2_theta=PILOT_L2, n_chains=1000, max_iter=100, seed=0)
    >>> bool(LOWER <= release_l2_theta(ys, pilot, 3000, f).value <= UPPER * 10**1.5)
    True
    """
    rng = np.random.default_rng(seed) if not isinstance(seed, np.random.Generator) else seed
    chains = pilot.state.chains
    score = conditional_kl(pilot.model, chains[:SCORE_CHAINS])
    k = min(BOOT_CHAINS, len(chains))

    def refit(ys: list, l2: float, init):
        if init is None:
            model, state = pilot.model, pilot.state.head(k, np.random.default_rng(rng.integers(2**63)))
        else:
            model, state = init.model, init.state
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return fit(ys, l2_theta=l2, n_chains=k, max_iter=BOOT_STEPS, model=model, state=state, seed=None)

    return choose_l2(tables, n, refit, pilot.model, upper=UPPER, lower=lower, n_boot=n_boot, seed=rng, score=score,
                     simulate=lambda r: simulated_aggregates(pilot.model, chains, tables, n, r), patience=PATIENCE,
                     one_se=True)  # two simulated releases give noisy scores: the most regularised within one SE
