"""Records with missing cells (ppgm.learners.missing): the E-step against enumeration, EM against closed forms,
and the missing-at-random assumption's limit."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm import ConvergenceWarning, Factor, MarkovNetwork, infer
from ppgm.models.bayes import BayesianNetwork
from ppgm.factors.domain import Domain
from ppgm.inference.evidence import seen_counts
from ppgm.inference.junction_tree import JunctionTree
from ppgm.learners.missing import (MISSING, _Grouped, check_partial_records, em_bayesian, em_markov, expected_tables,
                                   fit_markov_records)
from ppgm.models.random_models import random_bayesian_network, third_order_chain
from ppgm.inference.sampling import sample_bayes, sample_markov


def _holes(x, frac, rng):
    x = x.astype(float)
    x[rng.random(x.shape) < frac] = np.nan
    return x


def _brute_expected(model, rec, scope):
    """Posterior of each record's missing cells by enumerating the joint: the independent reference."""
    dom = model.domain
    t = model.joint_log_table()
    joint = np.exp(t - t.max())
    joint /= joint.sum()
    out = np.zeros(dom.shape(scope))
    ll = 0.0
    for row in rec:
        mask = np.ones(dom.cards, bool)
        for j, v in enumerate(row):
            if v >= 0:
                sl = [slice(None)] * len(dom)
                keep = np.zeros(dom.cards[j], bool)
                keep[int(v)] = True
                shape = [1] * len(dom)
                shape[j] = dom.cards[j]
                mask &= keep.reshape(shape)
        post = np.where(mask, joint, 0.0)
        ll += np.log(post.sum())
        post /= post.sum()
        axes = tuple(i for i, v in enumerate(dom.variables) if v not in scope)
        marg = post.sum(axis=axes)
        kept = [v for v in dom.variables if v in scope]
        out += np.transpose(marg, [kept.index(v) for v in scope])
    return out, ll


def test_expected_tables_match_enumeration_including_an_out_of_factor_scope():
    mn = third_order_chain(5, 3, seed=2)
    rng = np.random.default_rng(0)
    x = _holes(sample_markov(mn, 60, seed=1), 0.3, rng)
    x[5] = np.nan  # a record with nothing observed
    scopes = [("X0", "X1", "X2"), ("X4",), ("X2", "X0")]
    e = expected_tables(mn, x, scopes, chunk_cells=50)  # several chunks
    rec = check_partial_records(x, mn.domain)
    for s, t in zip(scopes, e.tables):
        ref, ll = _brute_expected(mn, rec, s)
        np.testing.assert_allclose(t, ref, rtol=1e-9, atol=1e-9)
        assert e.log_likelihood == pytest.approx(ll, rel=1e-10)
    assert e.n_records == 60 and e.n_complete == int((rec >= 0).all(axis=1).sum())
    assert np.isclose(sum(t.sum() for t in e.tables[:1]), 60)


def test_partial_records_are_checked_and_never_modified():
    d = Domain(("A", "B"), (2, 3))
    x = np.array([[0.0, np.nan], [1.0, 2.0]])
    before = x.copy()
    assert check_partial_records(x, d).tolist() == [[0, MISSING], [1, 2]]
    np.testing.assert_array_equal(x, before)
    with pytest.raises(ValueError, match="records: column 'B'"):
        check_partial_records([[0, 3]], d)
    with pytest.raises(ValueError, match="inf"):
        check_partial_records([[0.0, np.inf]], d)
    with pytest.raises(ValueError, match="non-integral"):
        check_partial_records([[0.5, 1.0]], d)


def _two_node(p_a, p_b_given_a):
    d = Domain(("A", "B"), (2, 3))
    return BayesianNetwork(d, {"A": (), "B": ("A",)}, {"A": np.array(p_a), "B": np.array(p_b_given_a)})


def test_em_reaches_the_closed_form_mle_under_a_monotone_pattern():
    # B missing at random given A (A always seen): the observed-data MLE has a closed form, P(A) from
    # every row and P(B | A) from the rows where B is seen
    bn = _two_node([0.3, 0.7], [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    rng = np.random.default_rng(3)
    x = sample_bayes(bn, 4000, seed=4).astype(float)
    drop = rng.random(len(x)) < np.where(x[:, 0] == 1, 0.6, 0.1)  # MAR: depends on the observed A
    x[drop, 1] = np.nan
    res = em_bayesian(bn.domain, bn.parents, x, pseudo_count=0.0, progress=False, tol=1e-12, max_iter=500)
    a = x[:, 0].astype(int)
    np.testing.assert_allclose(res.model.cpts["A"], np.bincount(a, minlength=2) / len(a), atol=1e-9)
    seen = ~np.isnan(x[:, 1])
    for k in range(2):
        b = x[seen & (a == k), 1].astype(int)
        np.testing.assert_allclose(res.model.cpts["B"][k], np.bincount(b, minlength=3) / len(b), atol=1e-6)
    objective = [h["objective"] for h in res.history]
    assert np.all(np.diff(objective) >= -1e-9 * abs(objective[0]))  # EM climbs


def test_em_beats_complete_case_under_mar_and_is_biased_under_mnar():
    bn = _two_node([0.5, 0.5], [[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    n = 20000
    x = sample_bayes(bn, n, seed=5).astype(float)
    rng = np.random.default_rng(6)
    true_b = x[:, 1].copy()
    # MAR on A: records with A = 1 lose A 70% of the time when B is seen... here A is missing depending on B
    mar = x.copy()
    mar[rng.random(n) < np.where(mar[:, 1] == 2, 0.7, 0.05), 0] = np.nan
    res = em_bayesian(bn.domain, bn.parents, mar, pseudo_count=0.0, progress=False)
    cc = mar[~np.isnan(mar).any(axis=1)].astype(int)
    complete_case_a = np.bincount(cc[:, 0], minlength=2) / len(cc)
    sd = np.sqrt(0.25 / n)
    assert abs(res.model.cpts["A"][1] - 0.5) < 4 * sd * 2          # EM: unbiased (MAR given the observed B)
    assert abs(complete_case_a[1] - 0.5) > 20 * sd                   # complete cases: far off
    # MNAR: B is missing more often when B itself is 2; no likelihood method that ignores why can see it
    mnar = x.copy()
    mnar[rng.random(n) < np.where(true_b == 2, 0.6, 0.05), 1] = np.nan
    res = em_bayesian(bn.domain, bn.parents, mnar, pseudo_count=0.0, progress=False)
    p_b2 = float(res.model.cpts["A"] @ res.model.cpts["B"][:, 2])
    assert p_b2 < 0.4 - 0.05                                         # truth 0.4: biased down, as theory says


def test_latent_column_same_seed_same_answer_and_warning_at_max_iter():
    bn = random_bayesian_network(4, 2, seed=3)
    x = sample_bayes(bn, 1500, seed=1).astype(float)
    x[:, 0] = np.nan  # V0 never observed: latent
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a latent variable's EM is slow; the same path twice
        a = em_bayesian(bn.domain, bn.parents, x, seed=7, progress=False, max_iter=30, tol=1e-6)
        b = em_bayesian(bn.domain, bn.parents, x, seed=7, progress=False, max_iter=30, tol=1e-6)
    for v in bn.domain.variables:
        np.testing.assert_array_equal(a.model.cpts[v], b.model.cpts[v])
    assert a.history == b.history
    with pytest.warns(ConvergenceWarning, match="max_iter|iterations"):
        r = em_bayesian(bn.domain, bn.parents, x, seed=7, progress=False, max_iter=2)
    assert not r.converged and len(r.history) == 2


def test_markov_fit_from_records_matches_the_data_tables():
    mn = third_order_chain(5, 2, seed=0)
    x = sample_markov(mn, 5000, seed=1)
    fit = fit_markov_records(mn.domain, mn.scopes, x, pseudo_count=0.0)
    assert fit.converged
    marg = infer(fit.model)
    for s in mn.scopes:  # the MLE's moment matching, checked by enumeration-backed inference
        cols = [mn.domain.index(v) for v in s]
        emp = np.bincount(np.ravel_multi_index(x[:, cols].T, mn.domain.shape(s)), minlength=mn.domain.size(s)) / len(x)
        np.testing.assert_allclose(marg.marginal(s).values.ravel(), emp, atol=1e-6)
    with pytest.raises(ValueError, match="em_markov"):
        fit_markov_records(mn.domain, mn.scopes, np.where(np.arange(5) == 0, np.nan, x[:1].astype(float)))


def test_markov_em_with_holes_is_closer_to_the_truth_than_dropping_rows():
    from ppgm.inference.metrics import kl_divergence

    mn = third_order_chain(6, 3, seed=4)
    full = sample_markov(mn, 4000, seed=2)
    rng = np.random.default_rng(9)
    x = _holes(full, 0.15, rng)
    res = em_markov(mn.domain, mn.scopes, x, progress=False)
    cc = x[~np.isnan(x).any(axis=1)].astype(int)
    dropped = fit_markov_records(mn.domain, mn.scopes, cc).model
    assert kl_divergence(mn, res.model) < 0.8 * kl_divergence(mn, dropped)
    objective = [h["objective"] for h in res.history]
    assert np.all(np.diff(objective) >= -1e-6 * abs(objective[0]))


def test_bad_arguments_are_named():
    bn = _two_node([0.5, 0.5], [[0.7, 0.2, 0.1], [0.1, 0.2, 0.7]])
    x = sample_bayes(bn, 10, seed=0)
    with pytest.raises(ValueError, match="pseudo_count"):
        em_bayesian(bn.domain, bn.parents, x, pseudo_count=-1, progress=False)
    with pytest.raises(TypeError, match="progress"):
        em_bayesian(bn.domain, bn.parents, x, progress="no")
    with pytest.raises(ValueError, match="records"):
        em_markov(bn.domain, [("A", "B")], x[:, :1], progress=False)
    with np.errstate(divide="ignore"):
        zero = MarkovNetwork(bn.domain, [Factor(("A", "B"), np.log(np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])))])
    with pytest.raises(ValueError, match="probability zero"):
        expected_tables(zero, [[-1, 2]], [("A", "B")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        em_bayesian(bn.domain, bn.parents, x, progress=False)  # converges quietly


def test_em_iterates_exactly_as_brute_force_em_on_a_tiny_network():
    # EM written out by enumeration of the joint (E-step: each record's posterior over the full joint;
    # M-step: family counts plus the pseudo-count, normalised), from the same start, step for step
    bn = random_bayesian_network(4, (2, 3, 2, 2), seed=11)
    x = _holes(sample_bayes(bn, 400, seed=12), 0.3, np.random.default_rng(13))
    rec = check_partial_records(x, bn.domain)
    start = BayesianNetwork(bn.domain, bn.parents, {v: np.random.default_rng(15).dirichlet(np.ones(bn.domain.card(v)),
                                                                                        size=bn.domain.shape(bn.parents[v]))
                                                     for v in bn.domain.variables})
    dom, pc = bn.domain, 0.5
    model = start
    for _ in range(6):
        joint = np.exp(model.to_markov().joint_log_table())
        post = np.zeros(dom.cards)
        for row in rec:
            m = np.ones(dom.cards, bool)
            for j, v in enumerate(row):
                if v >= 0:
                    shape = [1] * len(dom)
                    shape[j] = dom.cards[j]
                    m &= (np.arange(dom.cards[j]) == v).reshape(shape)
            p = np.where(m, joint, 0.0)
            post += p / p.sum()
        cpts = {}
        for v in dom.variables:
            fam = bn.parents[v] + (v,)
            axes = tuple(i for i, u in enumerate(dom.variables) if u not in fam)
            kept = [u for u in dom.variables if u in fam]
            counts = np.transpose(post.sum(axis=axes), [kept.index(u) for u in fam]) + pc
            cpts[v] = counts / counts.sum(axis=-1, keepdims=True)
        model = model.with_cpts(cpts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = em_bayesian(dom, bn.parents, x, pseudo_count=pc, init=start, max_iter=6, tol=1e-300, progress=False)
    for v in dom.variables:
        np.testing.assert_allclose(ours.model.cpts[v], model.cpts[v], rtol=1e-10, atol=1e-12)


def test_blocks_of_records_give_the_in_memory_answer():
    from ppgm.core.executor import record_blocks

    bn = random_bayesian_network(5, 3, seed=21)
    x = _holes(sample_bayes(bn, 3000, seed=22), 0.2, np.random.default_rng(23))
    x[:, 4] = np.nan  # and a latent column
    codes = check_partial_records(x, bn.domain)
    kw = dict(pseudo_count=1.0, progress=False, seed=3, max_iter=40, tol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        whole = em_bayesian(bn.domain, bn.parents, codes, **kw)
        blocks = em_bayesian(bn.domain, bn.parents, record_blocks(codes, block_rows=700), **kw)
    for v in bn.domain.variables:  # sums in another order: equal to rounding
        np.testing.assert_allclose(blocks.model.cpts[v], whole.model.cpts[v], rtol=1e-7, atol=1e-9)
    assert blocks.log_likelihood == pytest.approx(whole.log_likelihood, rel=1e-9)
    mn = third_order_chain(5, 2, seed=3)
    y = _holes(sample_markov(mn, 2000, seed=4), 0.2, np.random.default_rng(5))
    a = em_markov(mn.domain, mn.scopes, y, progress=False)
    b = em_markov(mn.domain, mn.scopes, record_blocks(check_partial_records(y, mn.domain), block_rows=300), progress=False)
    assert a.log_likelihood == pytest.approx(b.log_likelihood, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n_vars=st.integers(2, 7), card=st.integers(2, 3), max_parents=st.integers(1, 3),
       frac=st.floats(0.0, 0.9), markov=st.booleans())
def test_reduced_rows_give_the_full_trees_expected_counts(seed, n_vars, card, max_parents, frac, markov):
    # the E-step on each row's tree reduced to its missing cells against the full tree under the row's
    # evidence mask (an independent schedule), on random networks, records and holes; a cut-down row
    # range (range budget) sends some rows back to the full tree's log schedule
    rng = np.random.default_rng(seed)
    bn = random_bayesian_network(n_vars, card, max_parents=max_parents, seed=rng)
    model = third_order_chain(n_vars, card, seed=rng) if markov else bn.to_markov()
    x = rng.integers(0, card, size=(60, n_vars))
    x[rng.random(x.shape) < frac] = MISSING
    x[rng.integers(0, 60)] = MISSING  # a record with nothing observed
    tree = JunctionTree.build(model.domain, model.scopes)
    full = _Grouped.of(tree, x, path="tree").counts(model)
    reduced = _Grouped.of(tree, x, path="reduced").counts(model)
    np.testing.assert_allclose(reduced[0], full[0], rtol=1e-9, atol=1e-9)
    assert reduced[1] == pytest.approx(full[1], rel=1e-10)
    assert reduced[2:] == full[2:]


def test_rows_beyond_the_scaled_range_take_the_full_trees_log_schedule():
    # potentials whose log-range is far beyond the scaled schedule's: the reduced rows report it and are
    # calibrated on the full tree's log schedule, with the same answer as enumeration
    mn = third_order_chain(8, 3, seed=2)
    wide = MarkovNetwork(mn.domain, [Factor(f.variables, f.values * 100.0) for f in mn.factors])
    x = _holes(sample_markov(mn, 40, seed=1), 0.3, np.random.default_rng(3))
    rec = check_partial_records(x, mn.domain)
    tree = JunctionTree.build(mn.domain, mn.scopes)
    g = _Grouped.of(tree, rec, path="reduced")
    which, red = g.reduced[0]
    exact = red.calibrate(np.concatenate([p.ravel() for p in tree._potentials(wide)]))[2]
    # some rows leave the scaled range, among them one that sees a clique entirely (counted once only)
    assert not exact.all() and seen_counts(tree, g.rows[which[~exact]], g.weights[which[~exact]]).sum() > 0
    e = g.expected(wide, [("X0", "X1", "X2")])
    ref, ll = _brute_expected(wide, rec, ("X0", "X1", "X2"))
    np.testing.assert_allclose(e.tables[0], ref, rtol=1e-7, atol=1e-7)
    assert e.log_likelihood == pytest.approx(ll, rel=1e-9)
