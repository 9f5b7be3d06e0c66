"""Privacy end to end: bounded contributions, the sensitivity a release assumes against neighbouring
data sets, and an empirical audit of the epsilon a release actually gives."""

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta, chi2

from ppgm import Factor, keep_at_most, reweight_by_individual
from ppgm.adapters import LaplaceMechanism, bounded_tables

CLIQUES = [("A", "B"), ("B", "C"), ("A",)]
STATES = {"A": [0, 1, 2], "B": ["x", "y"], "C": [0, 1]}


def _people(seed=0, n_people=300, heavy=10_000):
    """Records of many people with 1-8 records each, then one person with ``heavy`` records, last."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, n_people)
    who = np.repeat([f"p{i}" for i in range(n_people)], sizes)
    who = np.r_[who, np.full(heavy, "heavy")]
    n = len(who)
    return pd.DataFrame({"A": rng.integers(0, 3, n), "B": rng.choice(["x", "y"], n), "C": rng.integers(0, 2, n), "who": who})


def _l1(a, b):
    return float(sum(np.abs(np.asarray(x.values, float) - np.asarray(y.values, float)).sum() for x, y in zip(a.tables, b.tables)))


def _l2(a, b):
    return math.sqrt(sum(float(((np.asarray(x.values, float) - np.asarray(y.values, float)) ** 2).sum()) for x, y in zip(a.tables, b.tables)))


def test_keep_at_most_bounds_every_individual_and_picks_uniform_subsets():
    ids = np.repeat(np.arange(6), [1, 2, 5, 9, 3, 40])
    mask = keep_at_most(ids, 3, np.random.default_rng(0))
    kept = np.bincount(ids[mask], minlength=6)
    assert kept.tolist() == [1, 2, 3, 3, 3, 3]
    # which 2 of a person's 5 records are kept: all 10 pairs equally likely
    counts = dict.fromkeys(combinations(range(5), 2), 0)
    rng = np.random.default_rng(1)
    for _ in range(4000):
        m = keep_at_most(np.zeros(5, int), 2, rng)
        counts[tuple(np.flatnonzero(m))] += 1
    obs = np.array(list(counts.values()))
    assert chi2.sf(((obs - 400) ** 2 / 400).sum(), 9) > 1e-3
    with pytest.raises(ValueError, match="max_contributions"):
        keep_at_most(ids, 0, rng)


def test_reweighting_gives_every_individual_weight_one():
    ids = np.array(["a", "b", "a", "c", "a", "b"])
    w = reweight_by_individual(ids)
    assert pd.Series(w).groupby(ids).sum().tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_one_record_moves_the_tables_by_at_most_the_assumed_sensitivity():
    df = _people(heavy=0)
    full = bounded_tables(df, CLIQUES, state_names=STATES)
    for i in (0, len(df) // 2, len(df) - 1):
        less = bounded_tables(df.drop(index=df.index[i]), CLIQUES, state_names=STATES)
        assert full.contribution == 1.0
        assert _l1(full, less) == len(CLIQUES)  # one cell in each table, by exactly one
        assert _l2(full, less) <= full.contribution * math.sqrt(len(CLIQUES)) + 1e-12


@pytest.mark.parametrize("k", [1, 3])
def test_one_person_moves_the_bounded_tables_by_at_most_k_per_table(k):
    df = _people()
    kw = dict(state_names=STATES, individuals="who", max_contributions=k, seed=5)
    full = bounded_tables(df, CLIQUES, **kw)
    without_heavy = bounded_tables(df[df["who"] != "heavy"], CLIQUES, **kw)  # the last person: the others' draws are unchanged
    assert full.contribution == k
    assert _l1(full, without_heavy) <= k * len(CLIQUES)
    assert _l2(full, without_heavy) <= k * math.sqrt(len(CLIQUES)) + 1e-12
    # a person with 10,000 records weighs no more than k of them (without the bound: 30,000 in L1)
    assert _l1(full, without_heavy) < 0.01 * 10_000 * len(CLIQUES)
    # every person's kept records add at most k to each table, whatever the others' choices
    who = np.asarray(df["who"])
    for person in ["p0", "p7", "heavy"]:
        mine = bounded_tables(df[who == person], CLIQUES, **kw)
        assert all(float(np.abs(t.values).sum()) <= k for t in mine.tables)


def test_one_person_moves_reweighted_tables_by_at_most_one_per_table():
    df = _people(heavy=500)
    kw = dict(state_names=STATES, individuals="who", reweight=True)
    full = bounded_tables(df, CLIQUES, **kw)
    assert full.contribution == 1.0 and full.weighted
    for person in ("p0", "p150", "heavy"):  # any position: the weights of the others do not change
        less = bounded_tables(df[df["who"] != person], CLIQUES, **kw)
        assert _l1(full, less) <= len(CLIQUES) + 1e-9
        assert _l2(full, less) <= math.sqrt(len(CLIQUES)) + 1e-9


def _clopper_pearson(k: int, n: int, conf: float) -> tuple[float, float]:
    a = (1 - conf) / 2
    lo = beta.ppf(a, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return lo, hi


def _audit_epsilon(y0: np.ndarray, y1: np.ndarray, conf: float = 1 - 1e-6) -> float:
    """Lower confidence bound on epsilon from releases y0 (data set D) and y1 (its neighbour D'):
    the threshold event {Y >= t} (or {Y <= t}) with the best bound on the first half of the draws
    is evaluated on the second half, where the Clopper-Pearson bounds of its probability under D and
    D' give epsilon >= log(P_D'[E] / P_D[E]). At confidence 1 - 1e-6 per bound, a correct mechanism
    fails the audit with probability below 2e-6."""

    def bound(a, b, t, sign):
        k1, k0 = int(np.sum(sign * b >= sign * t)), int(np.sum(sign * a >= sign * t))
        lo1, _ = _clopper_pearson(k1, b.size, conf)
        _, hi0 = _clopper_pearson(k0, a.size, conf)
        return math.log(lo1 / hi0) if lo1 > 0 else -np.inf

    h = y0.size // 2
    candidates = [(t, s) for t in np.unique(np.r_[y0[:h], y1[:h]]) for s in (1, -1)]
    t, sign = max(candidates, key=lambda c: bound(y0[:h], y1[:h], *c))
    return bound(y0[h:], y1[h:], t, sign)


def _releases(count: int, scale_factor: float, n: int) -> np.ndarray:
    """n independent private releases of one cell holding ``count`` (one table, epsilon = 1), drawn
    together as one table of n cells: the same sampler, n times."""
    mech = LaplaceMechanism(1.0 / scale_factor)
    return mech.measure([Factor(("cell",), np.full(n, count, dtype=np.int64))])[0].values


def test_empirical_privacy_audit_stays_below_the_claimed_epsilon():
    n = 100_000
    y0, y1 = _releases(3, 1.0, n), _releases(4, 1.0, n)  # neighbouring data sets: one record more
    eps_lb = _audit_epsilon(y0, y1)
    assert eps_lb <= 1.0
    assert eps_lb > 0.9  # and nearly tight: the discrete Laplace's tails are exactly e^1 apart
    # the same audit catches a mechanism with half the noise it claims (true epsilon 2)
    z0, z1 = _releases(3, 0.5, n), _releases(4, 0.5, n)
    assert _audit_epsilon(z0, z1) > 1.3
