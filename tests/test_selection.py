"""Private selection (MST's rounds): the noisy max's law and cost against OpenDP's own map, the
scores' sensitivity to one record, the spanning tree against networkx's, and an empirical audit."""

from __future__ import annotations

import math
from itertools import combinations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm import Domain, Measurement
from ppgm.models.noise import opendp
from ppgm.synthesis.selection import gumbel_scale, independent_marginals, mst_select, pair_errors, report_noisy_max
from ppgm.inference.tables import contingency_tables

from test_privacy import _clopper_pearson


def _softmax(v):
    e = np.exp(v - v.max())
    return e / e.sum()


@pytest.mark.parametrize("rho,w", [(0.5, 1.0), (0.01, 1.0), (0.2, 3.0)])
def test_the_gumbel_scale_costs_rho_by_opendps_own_privacy_map(rho, w):
    dp = opendp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=False)
    meas = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=gumbel_scale(rho, w))
    assert meas.map(w) == pytest.approx(rho, rel=1e-9)


def test_seeded_and_private_noisy_max_draw_the_exponential_mechanism():
    scores = np.array([0.0, 1.0, 2.5, 2.0])
    rho = 0.3
    p = _softmax(scores / gumbel_scale(rho))
    rng = np.random.default_rng(0)
    seeded = np.bincount([report_noisy_max(scores, rho, rng=rng) for _ in range(20_000)], minlength=4) / 20_000
    private = np.bincount([report_noisy_max(scores, rho) for _ in range(3_000)], minlength=4) / 3_000
    assert np.abs(seeded - p).max() < 0.015
    assert np.abs(private - p).max() < 0.04


def test_pair_errors_against_a_loop_over_cells():
    rng = np.random.default_rng(1)
    dom = Domain(("A", "B", "C"), (2, 3, 4))
    x = np.stack([rng.integers(0, k, 500) for k in dom.shape(dom.variables)], axis=1)
    ones = [Measurement((v,), t.values + rng.normal(0, 3, t.values.shape), "gaussian", 3.0)
            for v, t in zip(dom.variables, contingency_tables(x, dom, [(v,) for v in dom.variables]))]
    probs, n = independent_marginals(ones)
    pairs = contingency_tables(x, dom, list(combinations(dom.variables, 2)))
    want = []
    for t in pairs:
        a, b = t.variables
        want.append(sum(abs(t.values[i, j] - n * probs[a][i] * probs[b][j]) for i in range(t.values.shape[0])
                        for j in range(t.values.shape[1])))
    assert pair_errors(pairs, probs, n) == pytest.approx(want, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_one_individual_moves_every_score_by_at_most_its_contribution(seed, k):
    rng = np.random.default_rng(seed)
    dom = Domain(("A", "B", "C"), (2, 3, 2))
    x = np.stack([rng.integers(0, c, 60) for c in dom.shape(dom.variables)], axis=1)
    extra = np.stack([rng.integers(0, c, k) for c in dom.shape(dom.variables)], axis=1)  # one individual's k records
    ones = [Measurement((v,), rng.normal(20, 5, c), "gaussian", 1.0) for v, c in zip(dom.variables, dom.shape(dom.variables))]
    probs, n = independent_marginals(ones)  # released, so the same on both data sets
    cliques = list(combinations(dom.variables, 2))
    s0 = pair_errors(contingency_tables(x, dom, cliques), probs, n)
    s1 = pair_errors(contingency_tables(np.vstack([x, extra]), dom, cliques), probs, n)
    assert np.abs(s1 - s0).max() <= k + 1e-9


def _chain_records(n, d, rng, flip=0.05):
    x = np.zeros((n, d), dtype=np.int64)
    x[:, 0] = rng.integers(0, 2, n)
    for j in range(1, d):
        x[:, j] = (x[:, j - 1] + (rng.random(n) < flip)) % 2
    return x


def test_with_a_large_budget_the_selection_is_the_maximum_spanning_tree_of_the_scores():
    rng = np.random.default_rng(3)
    d = 6
    dom = Domain(tuple(f"X{i}" for i in range(d)), (2,) * d)
    x = _chain_records(5_000, d, rng, flip=0.2)
    x[:, 4] = rng.integers(0, 2, len(x))  # an independent column breaks the chain's order
    ones = [Measurement((v,), t.values.astype(float), "gaussian", 1.0)
            for v, t in zip(dom.variables, contingency_tables(x, dom, [(v,) for v in dom.variables]))]
    pairs = contingency_tables(x, dom, list(combinations(dom.variables, 2)))
    chosen = mst_select(dom, pairs, ones, rho=1e8, rng=np.random.default_rng(0))
    probs, n = independent_marginals(ones)
    g = nx.Graph()
    for t, s in zip(pairs, pair_errors(pairs, probs, n)):
        g.add_edge(*t.variables, weight=s)
    want = {frozenset(e) for e in nx.maximum_spanning_tree(g).edges()}
    assert {frozenset(s.clique) for s in chosen} == want
    assert [s.candidates for s in chosen][0] == d * (d - 1) // 2
    assert sum(s.rho for s in chosen) == pytest.approx(1e8)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(1e-4, 10.0))
def test_the_selection_is_always_a_spanning_tree(seed, rho):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 7))
    dom = Domain(tuple(f"V{i}" for i in range(d)), tuple(int(k) for k in rng.integers(2, 4, d)))
    x = np.stack([rng.integers(0, c, 50) for c in dom.shape(dom.variables)], axis=1)
    ones = [Measurement((v,), t.values.astype(float), "gaussian", 1.0)
            for v, t in zip(dom.variables, contingency_tables(x, dom, [(v,) for v in dom.variables]))]
    chosen = mst_select(dom, contingency_tables(x, dom, list(combinations(dom.variables, 2))), ones, rho, rng=rng)
    g = nx.Graph([s.clique for s in chosen])
    g.add_nodes_from(dom.variables)
    assert len(chosen) == d - 1 and nx.is_tree(g)


def test_empirical_audit_of_one_selection_round_on_neighbouring_data_sets():
    """Neighbouring data sets D and D' (one record more) move every score by at most one. The worst
    case for 'pair 0 chosen': pair 0 gains one while its 50 rivals each lose one. Clopper-Pearson
    bounds on that event's probability under D and D' give a lower bound on the round's epsilon
    (2 w / s, the exponential mechanism's): it stays below the claim and comes close to it, and the
    same audit catches a round that draws half the noise it claims."""
    rho = 0.5
    eps = 2 / gumbel_scale(rho)  # = sqrt(8 rho) = 2
    m = 50
    s0 = np.r_[0.0, np.ones(m)]
    s1 = np.r_[1.0, np.zeros(m)]
    n = 200_000
    rng = np.random.default_rng(5)

    def audit(scale):
        k0 = int(np.sum(np.argmax(s0 + rng.gumbel(0, scale, (n, m + 1)), axis=1) == 0))
        k1 = int(np.sum(np.argmax(s1 + rng.gumbel(0, scale, (n, m + 1)), axis=1) == 0))
        lo1, _ = _clopper_pearson(k1, n, 1 - 1e-6)
        _, hi0 = _clopper_pearson(k0, n, 1 - 1e-6)
        return math.log(lo1 / hi0)

    honest = audit(gumbel_scale(rho))
    assert 0.85 * eps < honest <= eps
    assert audit(gumbel_scale(rho) / 2) > 1.3 * eps
    # the private sampler (OpenDP) draws the same law
    pair = np.array([0.0, 1.0])
    p0 = _softmax(pair / gumbel_scale(rho))[0]
    draws = np.array([report_noisy_max(pair, rho) for _ in range(3_000)])
    assert abs(np.mean(draws == 0) - p0) < 0.03


def test_bad_inputs_name_the_argument():
    dom = Domain(("A", "B"), (2, 2))
    ones = [Measurement(("A",), np.array([5.0, 5.0]), "gaussian", 1.0)]
    with pytest.raises(ValueError, match="one_way"):
        mst_select(dom, [], ones, 1.0)
    with pytest.raises(ValueError, match="scores"):
        report_noisy_max(np.array([np.nan, 1.0]), 1.0)
    with pytest.raises(ValueError, match="rho"):
        gumbel_scale(-1.0)
