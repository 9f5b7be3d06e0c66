import numpy as np
import pytest
from scipy import stats

from ppgm import contingency_tables, infer, sample
from ppgm.models.random_models import random_bayesian_network, third_order_chain
from ppgm.inference.sampling import draw_rows


def _chi2_pvalue(counts, probs):
    counts, probs = counts.ravel(), probs.ravel()
    keep = probs > 0
    assert counts[~keep].sum() == 0, "a zero-probability cell was sampled"
    exp = probs[keep] * counts.sum()
    return stats.chisquare(counts[keep], exp * counts[keep].sum() / exp.sum()).pvalue


def test_markov_samples_follow_exact_marginals():
    m = third_order_chain(6, 4, seed=7)
    x = sample(m, 200_000, seed=1)
    exact = infer(m)
    for scope in [("X0", "X1"), ("X2", "X5"), ("X0", "X5")]:
        counts = contingency_tables(x, m.domain, [scope])[0].values
        assert _chi2_pvalue(counts, exact.marginal(scope).values) > 1e-4


def test_sampling_test_detects_a_wrong_model():
    """The statistical check above must fail when the samples come from another model."""
    m, other = third_order_chain(6, 4, seed=7), third_order_chain(6, 4, seed=8)
    x = sample(other, 200_000, seed=1)
    counts = contingency_tables(x, m.domain, [("X0", "X1")])[0].values
    assert _chi2_pvalue(counts, infer(m).marginal(("X0", "X1")).values) < 1e-6


def test_bayes_samples_follow_the_joint():
    bn = random_bayesian_network(5, 3, max_parents=2, seed=3)
    x = sample(bn, 300_000, seed=2)
    joint = np.exp(bn.joint_log_table())
    counts = contingency_tables(x, bn.domain, [bn.domain.variables])[0].values
    assert _chi2_pvalue(counts, joint) > 1e-4


def test_same_seed_same_records_and_generator_accepted():
    m = third_order_chain(5, 3, seed=0)
    np.testing.assert_array_equal(sample(m, 100, seed=3), sample(m, 100, seed=3))
    assert not np.array_equal(sample(m, 100, seed=3), sample(m, 100, seed=4))
    a = sample(m, 50, seed=np.random.default_rng(9))
    assert a.shape == (50, 5)
    with pytest.raises(ValueError, match="n:"):
        sample(m, -1)
    with pytest.raises(TypeError, match="model"):
        sample("not a model", 3)


def test_draw_rows_never_picks_zero_probability_cells():
    probs = np.array([[0.0, 0.5, 0.0, 0.5], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    rows = np.repeat([0, 1, 2], 10_000)
    out = draw_rows(probs, rows, np.random.default_rng(0))
    assert set(out[:10_000]) == {1, 3}
    assert (out[10_000:20_000] == 0).all() and (out[20_000:] == 3).all()
    assert abs((out[:10_000] == 1).mean() - 0.5) < 0.02


def _branching_mixed_tree():
    """Several children per level, of different cardinalities (so a level's separator cells head
    runs of different lengths)."""
    from ppgm import Domain, Factor, MarkovNetwork

    d = Domain(tuple(f"V{i}" for i in range(6)), (2, 3, 4, 2, 3, 2))
    rng = np.random.default_rng(3)
    edges = [(0, 1), (0, 2), (0, 5), (1, 3), (2, 4)]
    return MarkovNetwork(d, [Factor((f"V{a}", f"V{b}"), rng.normal(size=(d.cards[a], d.cards[b]))) for a, b in edges])


@pytest.mark.parametrize("which", ["third-order chain", "branching tree"])
def test_clique_tables_drawn_without_records_follow_the_records_law(which):
    """sample_clique_tables against tabulating sample_markov's records: the same means and covariances
    (2,000 draws of 300 records each) and exactly consistent separators."""
    from ppgm.inference.junction_tree import JunctionTree
    from ppgm.models.random_models import third_order_chain
    from ppgm.inference.sampling import sample_clique_tables, sample_markov
    from ppgm.inference.tables import contingency_tables

    mn = third_order_chain(6, 3, seed=0) if which == "third-order chain" else _branching_mixed_tree()
    jt = JunctionTree.build(mn.domain, mn.scopes)
    cal = jt.calibrate(mn)
    rng = np.random.default_rng(0)
    drawn = [sample_clique_tables(mn, 300, rng, cal) for _ in range(2000)]
    A = np.array([np.concatenate([t.ravel() for t in d]) for d in drawn])
    B = np.array([np.concatenate([f.values.ravel() for f in contingency_tables(sample_markov(mn, 300, rng, cal), mn.domain, jt.cliques)])
                  for _ in range(2000)])
    mu = 300 * cal.flat_beliefs
    se = np.sqrt(np.maximum(mu, 1e-3) / 2000)
    assert np.max(np.abs(A.mean(0) - mu) / se) < 5 and np.max(np.abs(B.mean(0) - mu) / se) < 5
    cov_a, cov_b = np.cov(A.T), np.cov(B.T)
    assert np.abs(cov_a - cov_b).max() < 0.15 * np.abs(cov_b).max()
    for tables in drawn[:20]:  # every child's separator counts are its parent's
        assert all(int(t.sum()) == 300 for t in tables)
        for i in jt.order[1:]:
            sep, c, p = jt.separators[i], jt.cliques[i], jt.cliques[jt.parent[i]]
            from ppgm.factors.factor import Factor
            np.testing.assert_array_equal(Factor(c, tables[i]).sum_to(sep).values, Factor(p, tables[jt.parent[i]]).sum_to(sep).values)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rounded_records_match_every_clique_table_within_the_rounding(seed):
    """round_markov's clique tables against n times the exact clique marginals: a cell is off by at
    most one per clique on its path from the root (each split rounds once and passes on its parent's
    error in proportion)."""
    from ppgm.inference.junction_tree import JunctionTree
    from ppgm.models.random_models import pairwise_dirichlet
    from ppgm.inference.sampling import round_markov

    rng = np.random.default_rng(seed)
    tree = [(i, int(rng.integers(i))) for i in range(1, 9)]
    model = pairwise_dirichlet(tree, 9, 3, seed=rng) if seed else third_order_chain(6, 3, seed=rng)
    n = 12_345
    x = round_markov(model, n, seed=rng)
    cal = JunctionTree.build(model.domain, model.scopes).calibrate(model)
    t = cal.tree
    depth = {t.order[0]: 0}
    for i in t.order[1:]:
        depth[i] = depth[t.parent[i]] + 1
    for i, clique in enumerate(t.cliques):
        got = contingency_tables(x, model.domain, [clique])[0].values
        want = n * np.exp(cal.log_beliefs[i])
        assert np.abs(got - want).max() <= depth[i] + 1 + 1e-9
    # and a sample of the same size is much further off (what rounding buys)
    y = sample(model, n, seed=rng)
    root = t.order[0]
    off = np.abs(contingency_tables(y, model.domain, [t.cliques[root]])[0].values - n * np.exp(cal.log_beliefs[root])).max()
    assert off > 3


def test_rounded_records_are_reproducible_and_shuffled():
    from ppgm.inference.sampling import round_markov

    m = third_order_chain(5, 2, seed=0)
    a, b = round_markov(m, 500, seed=3), round_markov(m, 500, seed=3)
    assert np.array_equal(a, b)
    assert len(np.unique(a, axis=0)) > 2 and not np.array_equal(a, a[np.lexsort(a.T[::-1])])  # records in random order
