"""Tied potentials: the map itself, the tied naive MLE against a brute-force optimum over the shared
tables of a tiny chain, exact recovery of a time-homogeneous chain, and CGM-EM with tying."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from ppgm import Domain, Factor, MarkovNetwork
from ppgm.learners.cgm import cgm_em, naive_mle
from ppgm.inference.marginals import infer
from ppgm.models.measurement import Measurement
from ppgm.inference.metrics import kl_divergence
from ppgm.learners.mle import fit_marginals
from ppgm.core.progress import ConvergenceWarning
from ppgm.models.tying import Tying

NAMES = ("x0", "x1", "x2", "x3")
EDGES = [("x0", "x1"), ("x1", "x2"), ("x2", "x3")]


def _homogeneous_chain(k=3, seed=0):
    rng = np.random.default_rng(seed)
    dom = Domain(NAMES, (k,) * 4)
    pair = rng.normal(size=(k, k))
    first = rng.normal(size=k)
    return MarkovNetwork(dom, [Factor(("x0",), first)] + [Factor(e, pair) for e in EDGES])


def _joint(model):
    dom = model.domain
    X = np.array(list(itertools.product(*[range(c) for c in dom.cards])))
    logp = np.zeros(len(X))
    for f in model.factors:
        logp += f.values[tuple(X[:, [dom.index(v) for v in f.variables]].T)]
    return np.exp(logp - np.logaddexp.reduce(logp)), X


def test_tying_map_aligns_members_in_the_order_written():
    dom = Domain(("a", "b", "c"), (2, 3, 2))
    # ("b", "a") is the model's ("a", "b") transposed: cell (a=i, b=j) of the model is (j, i) of the group
    t = Tying.build(dom, [("a", "b"), ("c", "b"), ("a",)], [[("b", "a"), ("b", "c")]])
    shared = np.arange(6.0) + 10  # the shared 3 x 2 table over (b; a or c)
    z = np.concatenate([[1.0, 2.0], shared])  # free cliques' cells come first, then each group's
    theta = t.expand(z)
    ab, cb, a = theta[:6].reshape(2, 3), theta[6:12].reshape(2, 3), theta[12:]
    np.testing.assert_array_equal(ab, shared.reshape(3, 2).T)
    np.testing.assert_array_equal(cb, shared.reshape(3, 2).T)
    np.testing.assert_array_equal(a, [1.0, 2.0])
    assert t.size == 8 and t.groups == ((0, 1),)
    np.testing.assert_allclose(t.restrict(theta), z)


@pytest.mark.parametrize("tied, message", [
    ([[("x0", "x1")]], r"tied\[0\]: expected a list of at least two cliques"),
    ([[("x0", "x1"), ("x0", "x2")]], r"tied\[0\]\[1\]: \('x0', 'x2'\) is not a clique of the model"),
    ([[("x0", "x1"), ("x1", "x2")], [("x1", "x2"), ("x2", "x3")]], r"tied\[1\]\[0\]: .* already tied in tied\[0\]"),
    ("x0", "tied: expected a list of groups"),
])
def test_tying_errors_name_the_group(tied, message):
    dom = Domain(NAMES, (2,) * 4)
    with pytest.raises((ValueError, TypeError), match=message):
        Tying.build(dom, EDGES, tied)


def test_tying_refuses_members_with_different_state_spaces():
    dom = Domain(NAMES, (2, 2, 3, 3))
    with pytest.raises(ValueError, match=r"tied\[0\]: its cliques have different state spaces"):
        Tying.build(dom, EDGES, [[("x0", "x1"), ("x1", "x2")]])


def test_tied_naive_mle_is_the_brute_force_optimum_over_shared_tables():
    truth = _homogeneous_chain(k=2, seed=1)
    dom = truth.domain
    rng = np.random.default_rng(2)
    N, l2 = 2000.0, 1e-3
    # noisy, different tables per edge: pooling matters
    ms = [Measurement(f.variables, np.clip(N * f.values + rng.normal(0, 40, f.shape), 1, None), "gaussian", 40.0, n=N)
          for f in infer(truth).factor_marginals() if len(f.variables) == 2]
    group = [[m.variables for m in ms]]
    fit = naive_mle(dom, ms, N=N, l2=l2, tied=group)
    tables = [f.values for f in fit.model.factors]
    np.testing.assert_allclose(tables[0], tables[1], atol=1e-12)
    np.testing.assert_allclose(tables[1], tables[2], atol=1e-12)
    # brute force: maximise sum_C theta . mu_hat_C - log Z - l2 ||z||^2 over the one shared 2 x 2
    # table, with log Z by enumerating all 16 states
    from ppgm.learners.projection import project_simplex

    targets = [project_simplex(m.values / N) for m in ms]
    X = np.array(list(itertools.product(range(2), repeat=4)))

    def negative(z):
        T = z.reshape(2, 2)
        score = sum(T[X[:, i], X[:, i + 1]] for i in range(3))
        log_z = np.logaddexp.reduce(score)
        return -(sum((T * t).sum() for t in targets) - log_z - l2 * (z @ z))

    ref = minimize(negative, np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    ref_model = MarkovNetwork(dom, [Factor(e, ref.x.reshape(2, 2)) for e in EDGES])
    p_fit, _ = _joint(fit.model)
    p_ref, _ = _joint(ref_model)
    np.testing.assert_allclose(p_fit, p_ref, atol=1e-6)


def test_tied_fit_recovers_a_homogeneous_chain_from_its_exact_marginals():
    truth = _homogeneous_chain(k=3, seed=3)
    marg = infer(truth).factor_marginals()
    with warnings.catch_warnings():
        # L-BFGS's line search fails here at the limit of floating point (gradient within 10 tol): converged,
        # not a warning (it warned once the solvers ran BLAS on one thread, which changes the sums' rounding)
        warnings.simplefilter("error", ConvergenceWarning)
        fit = fit_marginals(truth.domain, marg, tied=[EDGES])
    assert fit.converged and kl_divergence(truth, fit.model) < 1e-9


def _laplace_tables(truth, N=3000.0, b=30.0, seed=5):
    """Every clique table of ``truth`` at N records with Laplace noise of scale b."""
    rng = np.random.default_rng(seed)
    return [Measurement(f.variables, N * f.values + rng.laplace(0, b, f.shape), "laplace", b, n=N)
            for f in infer(truth).factor_marginals()]


def test_tied_cgm_em_keeps_the_groups_tied_and_beats_untied_on_a_homogeneous_chain():
    truth = _homogeneous_chain(k=3, seed=4)
    dom, N = truth.domain, 3000.0
    ms = _laplace_tables(truth, N)
    tied = [[("x0", "x1"), ("x1", "x2"), ("x2", "x3")]]
    res_tied = cgm_em(dom, ms, N=N, tied=tied, max_iter=8, progress=False, stop="converged", init_l2="calibrated")
    res_free = cgm_em(dom, ms, N=N, max_iter=8, progress=False, stop="converged", init_l2="calibrated")
    pairs = [f.values for f in res_tied.model.factors if len(f.variables) == 2]
    assert all(np.array_equal(pairs[0], p) for p in pairs[1:])
    assert kl_divergence(truth, res_tied.model) < kl_divergence(truth, res_free.model)


def test_tied_penalty_counts_a_shared_table_once():
    """l2 ||z||^2: the M-step's optimum and EM's objective penalise the shared table once, not once
    per clique that copies it."""
    truth = _homogeneous_chain(k=3, seed=4)
    dom, N = truth.domain, 3000.0
    ms = _laplace_tables(truth, N)
    tied = [EDGES]
    # the first record's objective is taken at the entering parameters (here the truth), before any
    # M-step: two L2 weights differ by exactly N (a - b) ||z||^2 there
    runs = [cgm_em(dom, ms, N=N, tied=tied, init=truth, l2=w, max_iter=1, progress=False, stop="converged", init_l2="calibrated") for w in (1e-3, 2e-3)]
    z2 = float(np.sum(truth.factors[0].values ** 2) + np.sum(truth.factors[1].values ** 2))
    gap = runs[0].history[0]["objective"] - runs[1].history[0]["objective"]
    assert gap == pytest.approx(N * 1e-3 * z2, rel=1e-6)


def test_estimators_take_tied_groups_and_export_an_ordinary_network():
    import ppgm.adapters as pa
    from ppgm.adapters import CGMEstimator, LaplaceMechanism, NaiveMLEEstimator, release_tables
    from ppgm.adapters.models import markov_to_pgmpy

    truth = _homogeneous_chain(k=2, seed=6)
    mn = markov_to_pgmpy(truth)
    rel = release_tables(pa.sample(mn, 5000, seed=7), mn, LaplaceMechanism(2.0), seed=8)
    groups = [[("x0", "x1"), ("x1", "x2"), ("x2", "x3")]]
    for est in (NaiveMLEEstimator(mn, tied=groups), CGMEstimator(mn, tied=groups)):
        kwargs = {} if isinstance(est, NaiveMLEEstimator) else {"progress": False, "max_iter": 5}
        fitted = est.estimate(rel, **kwargs)
        assert fitted.check_model()
        pairs = {tuple(f.variables): f.values for f in fitted.get_factors() if len(f.variables) == 2}
        tables = [pairs[e] if e in pairs else pairs[e[::-1]].T for e in EDGES]
        assert all(np.allclose(tables[0], t, atol=1e-9) for t in tables[1:])
    with pytest.raises(ValueError, match=r"tied\[0\]\[1\]: \('x0', 'x2'\) is not a clique of the model"):
        NaiveMLEEstimator(mn, tied=[[("x0", "x1"), ("x0", "x2")]])


def test_mobility_study_is_people_over_days_from_one_homogeneous_chain():
    from ppgm.adapters import mobility_study

    df, truth, tied = mobility_study(3000, max_days=4, locations=3, hours=6, seed=11)
    days = df.groupby("person").size()
    assert days.min() >= 1 and days.max() <= 4 and len(days) == 3000
    hours = [c for c in df.columns if c != "person"]
    assert tied == [[(hours[t], hours[t + 1]) for t in range(len(hours) - 1)]]
    # every pair factor is the same transition matrix (rows sum to one: P(h_t+1 | h_t)) ...
    pair = {tuple(f.variables): f for f in truth.get_factors() if len(f.variables) == 2}
    states = ["off", "loc1", "loc2", "loc3"]
    T = np.array([[pair[(hours[0], hours[1])].get_value(**{hours[0]: a, hours[1]: b}) for b in states] for a in states])
    T = T / T.sum(axis=1, keepdims=True)
    for t in range(1, len(hours) - 1):
        f = pair[(hours[t], hours[t + 1])]
        U = np.array([[f.get_value(**{hours[t]: a, hours[t + 1]: b}) for b in states] for a in states])
        np.testing.assert_allclose(U / U.sum(axis=1, keepdims=True), T, atol=1e-12)
    # ... and the traces follow it: transition frequencies pooled over all hours
    counts = np.zeros((4, 4))
    idx = {s: i for i, s in enumerate(states)}
    for t in range(len(hours) - 1):
        a = df[hours[t]].map(idx).to_numpy()
        b = df[hours[t + 1]].map(idx).to_numpy()
        np.add.at(counts, (a, b), 1)
    freq = counts / counts.sum(axis=1, keepdims=True)
    se = np.sqrt(T * (1 - T) / counts.sum(axis=1, keepdims=True))
    assert np.all(np.abs(freq - T) <= 5 * se + 1e-9)


def test_noise_calibrated_weights_see_a_tied_group_pool_its_noise():
    from ppgm.learners.cgm import noise_aware_l2, noise_calibrated_l2

    dom = Domain(NAMES, (2,) * 4)
    ms = [Measurement(e, np.full((2, 2), 250.0), "laplace", 10.0, n=1000) for e in EDGES]
    tie = Tying.build(dom, EDGES, [EDGES])
    r = 2 * 10.0**2 * 4 / 1000  # Laplace variance 2 b^2, 4 cells, N = 1000
    assert noise_calibrated_l2(ms, 1000.0) == pytest.approx((1 + r) / 1000)
    assert noise_calibrated_l2(ms, 1000.0, tie) == pytest.approx((1 + r / 3) / 1000)
    rho = np.sqrt(2 * 10.0**2) / 250.0
    assert noise_aware_l2(ms, 1000.0) == pytest.approx(np.clip(3 * rho, 0.1, 1) / 1000)
    assert noise_aware_l2(ms, 1000.0, tie) == pytest.approx(np.clip(3 * rho / np.sqrt(3), 0.1, 1) / 1000)


def test_pooled_release_sums_the_group_with_one_noise_draw_and_feeds_both_estimators(tmp_path):
    """release_tables(..., tied=) pools each group's tables (aligned as written) into one noisy table whose
    noise scale counts the group's size; it round-trips through save / load, and the estimators take
    it, tied or not. A bad group is refused before the accountant is charged."""
    import ppgm.adapters as pa
    from ppgm.adapters import (CGMEstimator, GaussianMechanism, LaplaceMechanism, NaiveMLEEstimator, NoisyTables,
                               PrivacyAccountant, bounded_tables, kl_divergence, release_tables)

    df, truth, tied = pa.mobility_study(2000, max_days=2, locations=3, hours=6, seed=3)
    people = df.pop("person")
    exact = bounded_tables(df, truth, individuals=people, reweight=True)
    rel = release_tables(df, truth, LaplaceMechanism(1e6), individuals=people, reweight=True, tied=tied, seed=4)
    n_cliques = len(truth.get_factors())
    assert len(rel) == n_cliques - len(tied[0]) + 1
    pooled = next(f for f in rel if f.members is not None)
    assert pooled.members == tuple(tied[0]) and pooled.scale == pytest.approx(n_cliques / 1e6)
    by_scope = {tuple(t.variables): t.values for t in exact.tables}
    want = sum(by_scope[c] if c in by_scope else by_scope[c[::-1]].T for c in tied[0])
    np.testing.assert_allclose(pooled.values, want, atol=1e-3)  # noise of scale 2e-5
    # Gaussian: a record may put all k of its counts in one cell, so sigma grows with k, not sqrt(k)
    k = len(tied[0])
    g = release_tables(df, truth, GaussianMechanism(rho=1.0), individuals=people, reweight=True, tied=tied, seed=4)
    assert next(iter(g)).scale == pytest.approx(np.sqrt(n_cliques - k + k**2) / np.sqrt(2.0))
    path = tmp_path / "pooled.npz"
    rel.save(path)
    back = NoisyTables.load(path)
    assert [f.members for f in back] == [f.members for f in rel]
    private = release_tables(df, truth, LaplaceMechanism(1.0), individuals=people, reweight=True, tied=tied, seed=5)
    for est, kw in ((NaiveMLEEstimator(truth, tied=tied), {}), (CGMEstimator(truth, tied=tied), {"progress": False}),
                    (CGMEstimator(truth), {"progress": False, "max_iter": 5})):
        fitted = est.estimate(private, **kw)
        assert fitted.check_model() and np.isfinite(kl_divergence(truth, fitted))
    acc = PrivacyAccountant(epsilon=1.0)
    with pytest.raises(ValueError, match=r"tied\[0\]"):
        release_tables(df, truth, LaplaceMechanism(0.5), individuals=people, reweight=True, tied=[[tied[0][0]]], accountant=acc)
    assert acc.spent == 0
