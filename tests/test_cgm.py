import cvxpy as cp
import numpy as np
import pytest

from ppgm import Domain, Factor, MarkovNetwork, contingency_tables, infer, kl_divergence, sample
from ppgm.learners.cgm import MarginalOracle, cgm_em, estep_dual, estep_nlbp, naive_mle, noise_calibrated_l2, population_size
from ppgm.models.measurement import Measurement
from ppgm.learners.mle import fit_marginals
from ppgm.models.random_models import pairwise_dirichlet, third_order_chain


def _chain3(seed=0):
    """A - B - C with cards 2, 3, 2: decomposable, cliques AB and BC, separator B."""
    rng = np.random.default_rng(seed)
    d = Domain(("A", "B", "C"), (2, 3, 2))
    return MarkovNetwork(d, [Factor(("A", "B"), rng.normal(size=(2, 3))), Factor(("B", "C"), rng.normal(size=(3, 2)))])


def _problem6_cvxpy(theta, ys, N):
    """Problem (6) on the tree A - B - C, written with clique marginals, entropy H(AB) + H(C | B)."""
    mab, mbc = cp.Variable((2, 3), nonneg=True), cp.Variable((3, 2), nonneg=True)
    mb = cp.sum(mab, axis=0)
    cons = [cp.sum(mab) == 1, cp.sum(mbc, axis=1) == mb]
    ent = cp.sum(cp.entr(mab)) - cp.sum(cp.rel_entr(mbc, cp.reshape(mb, (3, 1), order="C") @ np.ones((1, 2))))
    lin = cp.sum(cp.multiply(theta[0], mab)) + cp.sum(cp.multiply(theta[1], mbc))
    lik = 0
    for y, m in zip(ys, (mab, mbc)):
        r = y.values - N * m
        lik += -cp.sum(cp.abs(r)) / y.scale if y.noise == "laplace" else -cp.sum_squares(r) / (2 * y.scale**2)
    prob = cp.Problem(cp.Maximize(N * (lin + ent) + lik), cons)
    prob.solve(solver=cp.CLARABEL)
    return [mab.value, mbc.value]


@pytest.mark.parametrize("noise,scale,method", [("gaussian", 4.0, "newton"), ("gaussian", 4.0, "lbfgs"), ("laplace", 3.0, "auto")])
def test_estep_solves_problem_6_like_a_generic_convex_solver(noise, scale, method):
    model = _chain3(1)
    truth = _chain3(2)
    N = 200.0
    rng = np.random.default_rng(3)
    ys = [Measurement(f.variables, N * f.values + rng.normal(0, 5, f.shape), noise, scale)
          for f in infer(truth).factor_marginals()]
    oracle = MarginalOracle(model.domain, [y.variables for y in ys])
    theta = oracle.params.join([f.values for f in model.factors])
    lam, mus, _, _ = estep_dual(oracle, theta, ys, N, method=method)
    ref = _problem6_cvxpy([f.values for f in model.factors], ys, N)
    for got, want in zip(mus, ref):
        np.testing.assert_allclose(got, want, atol=2e-5)
    if noise == "gaussian":  # Algorithm 1 as printed reaches the same point
        counts, _, converged = estep_nlbp(oracle, theta, ys, N, damping=0.05, tol=1e-10, max_iter=20000)
        assert converged
        for got, want in zip(counts, ref):
            np.testing.assert_allclose(got / N, want, atol=1e-5)


def _assert_newton_agrees_with_lbfgs(oracle, theta, ys, N):
    """The smooth dual by truncated Newton and by L-BFGS-B: one optimum (strictly convex), so the same expected
    counts and value; Newton from a warm start takes a few calibrations."""
    info_n, info_l = {}, {}
    lam_n, mus_n, val_n, _ = estep_dual(oracle, theta, ys, N, tol=1e-10, method="newton", info=info_n)
    lam_l, mus_l, val_l, _ = estep_dual(oracle, theta, ys, N, tol=1e-10, method="lbfgs", max_iter=5000, info=info_l)
    assert info_n["converged"]
    np.testing.assert_allclose(np.concatenate([m.ravel() for m in mus_n]), np.concatenate([m.ravel() for m in mus_l]), atol=1e-6)
    assert val_n == pytest.approx(val_l, rel=1e-9)
    _, _, _, evals = estep_dual(oracle, theta + 0.01, ys, N, lam0=lam_n, tol=1e-8, method="newton")
    assert evals <= 8


@pytest.mark.parametrize("scales", ["one", "mixed"])
def test_newton_and_lbfgs_e_steps_agree_on_a_tree_of_fifty_tables(scales):
    """The smooth dual (moment-matched tables) solved by truncated Newton and by L-BFGS-B: one
    optimum (strictly convex), so the same expected counts and value; Newton from a warm start takes
    a few calibrations. One noise scale for every table takes the gauge split (the dual's gauge part in
    closed form); mixed scales the whole space."""
    from ppgm.learners.cgm import _moment_matched
    from ppgm.learners.release_rule import simulated_release

    rng = np.random.default_rng(0)
    truth = pairwise_dirichlet([(int(rng.integers(0, i)), i) for i in range(1, 50)], 50, 4, alpha=1.0, seed=0)
    N = 20_000.0
    tpl = [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 20.0 if scales == "one" else 10.0 + 5 * (i % 4))
           for i, f in enumerate(truth.factors)]
    ys = _moment_matched(simulated_release(truth, tpl, N, np.random.default_rng(1)))
    oracle = MarginalOracle(truth.domain, [y.variables for y in ys])
    theta = oracle.params.join([np.zeros(f.values.shape) for f in truth.factors])
    _assert_newton_agrees_with_lbfgs(oracle, theta, ys, N)
    with pytest.raises(ValueError, match="method"):
        estep_dual(oracle, theta, [Measurement(y.variables, y.values, "laplace", 3.0) for y in ys], N, method="newton")



@pytest.mark.parametrize("recycle", [False, True])
def test_newton_e_step_on_a_grown_tree_with_nested_tables_agrees_with_lbfgs(recycle, monkeypatch):
    """A loopy pairwise model (a cycle of eight with two chords) with every single table measured too, each table
    with its own noise: the junction tree's cliques are not the measured scopes (no tree inverse), and the tables
    nest, so the dual has a gauge that the Fisher information does not see. Truncated Newton, preconditioned by the
    diagonal off the gauge and the noise on it, reaches L-BFGS-B's optimum; from a warm start, in a few steps.
    ``recycle``: the preconditioner corrected by the earlier steps' conjugate directions, as on large trees."""
    from ppgm.learners import mle
    from ppgm.learners.cgm import _moment_matched

    if recycle:
        monkeypatch.setattr(mle, "RECYCLE_CELLS", 0)
    from ppgm.learners.release_rule import simulated_release

    edges = [(i, (i + 1) % 8) for i in range(8)] + [(0, 4), (2, 6)]
    truth = pairwise_dirichlet(edges, 8, 3, alpha=1.0, seed=4)
    N = 5_000.0
    scopes = [f.variables for f in truth.factors] + [(v,) for v in truth.domain.variables]
    tpl = [Measurement(s, np.zeros(truth.domain.shape(s)), "gaussian", 5.0 + 3 * (i % 5)) for i, s in enumerate(scopes)]
    ys = _moment_matched(simulated_release(truth, tpl, N, np.random.default_rng(5)))
    oracle = MarginalOracle(truth.domain, [y.variables for y in ys])
    assert oracle.exact and not oracle.tree_inverse and (oracle.recycler() is not None) == recycle
    theta = np.zeros(oracle.params.size)
    _assert_newton_agrees_with_lbfgs(oracle, theta, ys, N)

def test_marginal_oracle_matches_brute_force_enumeration():
    """log Z and every scope's marginal, for scopes listed against the domain order, single variables,
    and several scopes sharing one junction-tree clique (a triangle with a pendant variable)."""
    d = Domain(("A", "B", "C", "D"), (2, 3, 2, 4))
    scopes = [("C", "A"), ("B", "A"), ("B", "C"), ("D", "B"), ("D",), ("A", "B", "C")]
    oracle = MarginalOracle(d, scopes)
    x = np.random.default_rng(0).normal(scale=2.0, size=oracle.params.size)
    joint = np.zeros(d.cards)
    for s, t in zip(scopes, oracle.params.split(x)):
        axes = [d.variables.index(v) for v in s]
        shape = [d.card(v) if v in s else 1 for v in d.variables]
        joint = joint + np.transpose(t, np.argsort(axes)).reshape(shape)
    log_z = np.log(np.exp(joint).sum())
    p = np.exp(joint - log_z)
    got_log_z, got = oracle(x)
    assert abs(got_log_z - log_z) < 1e-10
    for s, m in zip(scopes, got):
        keep = [d.variables.index(v) for v in s]
        want = p.sum(axis=tuple(i for i in range(4) if i not in keep))
        want = np.transpose(want, np.argsort(np.argsort(keep)))
        np.testing.assert_allclose(m, want, atol=1e-12)
    np.testing.assert_allclose(oracle.flat(x)[1], oracle.params.join(got), atol=0)


def test_fit_marginals_matches_the_decomposable_closed_form():
    truth = _chain3(4)
    d = truth.domain
    x = sample(truth, 5000, seed=0)
    tabs = contingency_tables(x, d, [("A", "B"), ("B", "C")])
    targets = [Factor(t.variables, t.values / 5000) for t in tabs]
    fit = fit_marginals(d, targets, tol=1e-10)
    J = fit.model.joint_log_table()
    P = np.exp(J - np.logaddexp.reduce(J.ravel()))
    mab, mbc = targets[0].values, targets[1].values
    closed = mab[:, :, None] * mbc[None, :, :] / mbc.sum(axis=1)[None, :, None]
    np.testing.assert_allclose(P, closed, atol=1e-7)
    # stopped early, the fit says so (and stays quiet for callers that stop on purpose)
    from ppgm import ConvergenceWarning
    import warnings
    with pytest.warns(ConvergenceWarning, match="fit_marginals: L-BFGS stopped after 2 iterations"):
        short = fit_marginals(d, targets, tol=1e-10, max_iter=2)
    assert not short.converged and fit.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_marginals(d, targets, tol=1e-10, max_iter=2, warn=False)


def test_naive_mle_and_cgm_on_a_small_private_release():
    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3), (0, 3)], 4, 3, alpha=2.0, seed=5)
    N = 20_000
    x = sample(truth, N, seed=6)
    tabs = contingency_tables(x, truth.domain, truth.scopes)
    rng = np.random.default_rng(7)
    ys = [Measurement(t.variables, t.values + rng.laplace(0, 40.0, t.shape), "laplace", 40.0) for t in tabs]
    assert abs(population_size(ys) - N) < 200
    naive = naive_mle(truth.domain, ys, N=N, l2="paper")  # the paper's baseline, and EM run to its stopping rule
    em = cgm_em(truth.domain, ys, N=N, progress=False, max_iter=40, stop="converged")
    kl_naive, kl_em = kl_divergence(truth, naive.model), kl_divergence(truth, em.model)
    assert kl_em < kl_naive
    # the defaults (weights and iteration count chosen from the release) beat the paper's baseline too
    assert kl_divergence(truth, cgm_em(truth.domain, ys, N=N, progress=False, stop="converged", init_l2="calibrated").model) < kl_naive
    assert kl_divergence(truth, naive_mle(truth.domain, ys, N=N).model) < kl_naive
    assert len(em.history) >= 2 and {"objective", "change"} <= set(em.history[0])
    # EM never decreases its objective (the approximate marginal likelihood of the noisy tables)
    obj = [h["objective"] for h in em.history]
    assert all(b >= a - 1e-6 * abs(a) for a, b in zip(obj, obj[1:]))


def test_tiny_noise_gives_the_non_private_mle():
    truth = third_order_chain(5, 3, seed=8)
    N = 10_000
    x = sample(truth, N, seed=9)
    tabs = contingency_tables(x, truth.domain, truth.scopes)
    ys = [Measurement(t.variables, t.values.astype(float), "gaussian", 1e-4) for t in tabs]
    mle = fit_marginals(truth.domain, [Factor(t.variables, t.values / N) for t in tabs], tol=1e-10)
    em = cgm_em(truth.domain, ys, N=N, l2=0.0, progress=False, max_iter=20, stop="converged")
    for a, b in zip(infer(em.model).factor_marginals(), infer(mle.model).factor_marginals()):
        np.testing.assert_allclose(a.values, b.values, atol=1e-4)


def test_cgm_bad_input():
    truth = third_order_chain(4, 2, seed=0)
    good = [Measurement(f.variables, 100 * f.values, "laplace", 1.0) for f in infer(truth).factor_marginals()]
    with pytest.raises(ValueError, match="measured twice"):
        cgm_em(truth.domain, good + good[:1], progress=False, stop="converged", init_l2="calibrated")
    with pytest.raises(ValueError, match="needs shape"):
        cgm_em(truth.domain, [Measurement(("X0", "X1"), np.zeros((2, 3)), "laplace", 1.0)], progress=False, stop="converged", init_l2="calibrated")
    with pytest.raises(ValueError, match="unknown variables"):
        naive_mle(truth.domain, [Measurement(("X0", "Z"), np.zeros((2, 2)), "laplace", 1.0)])
    with pytest.raises(ValueError, match="estep"):
        cgm_em(truth.domain, good, estep="magic", progress=False, stop="converged", init_l2="calibrated")
    with pytest.raises(ValueError, match="N:"):
        cgm_em(truth.domain, good, N=-5, progress=False, stop="converged", init_l2="calibrated")
    with pytest.raises(ValueError, match="l2"):
        naive_mle(truth.domain, good, project=False, l2=0.0)
    with pytest.raises(ValueError, match="mstep"):
        cgm_em(truth.domain, good, mstep="adam", progress=False, stop="converged", init_l2="calibrated")
    with pytest.raises(ValueError, match="mstep_iter"):
        cgm_em(truth.domain, good, mstep_iter=0, progress=False, stop="converged", init_l2="calibrated")


def test_newton_and_lbfgs_m_steps_are_the_same_em_when_solved_to_the_end():
    """Exact M-steps make EM one map: the Newton and L-BFGS M-steps, each run to a tight tolerance,
    give the same iterates (measured: 3e-8 apart); partial M-steps come closer with each Newton step
    (measured: 1 step, the default, 5.2e-5 apart; 2 steps 1.3e-5; 3 steps 4e-7)."""
    truth = third_order_chain(5, 3, seed=4)
    N = 5000
    tabs = contingency_tables(sample(truth, N, seed=5), truth.domain, truth.scopes)
    rng = np.random.default_rng(6)
    ys = [Measurement(t.variables, t.values + rng.laplace(0, 8.0, t.shape), "laplace", 8.0) for t in tabs]
    kw = dict(N=N, progress=False, stop="converged", init_l2="calibrated", max_iter=4, rtol=0.0, mstep_tol=1e-11)
    newton = cgm_em(truth.domain, ys, mstep="newton", mstep_iter=50, **kw)
    lbfgs = cgm_em(truth.domain, ys, mstep="lbfgs", mstep_iter=20_000, **kw)
    default = cgm_em(truth.domain, ys, **kw)
    two = cgm_em(truth.domain, ys, mstep_iter=2, **kw)
    for a, b, c, d in zip(infer(newton.model).factor_marginals(), infer(lbfgs.model).factor_marginals(),
                          infer(default.model).factor_marginals(), infer(two.model).factor_marginals()):
        np.testing.assert_allclose(a.values, b.values, atol=2e-7)
        np.testing.assert_allclose(c.values, a.values, atol=1e-4)  # 1 Newton step per M-step: close, not equal
        np.testing.assert_allclose(d.values, a.values, atol=3e-5)  # 2 steps: closer
    np.testing.assert_allclose([h["objective"] for h in newton.history], [h["objective"] for h in lbfgs.history], rtol=1e-8)


def test_projection_helps_the_naive_mle():
    """The CGM paper's Fig. 1b: projecting the noisy pseudo-marginals onto the simplex beats fitting them raw."""
    truth = third_order_chain(4, 3, seed=0)
    rng = np.random.default_rng(0)
    ys = [Measurement(f.variables, 1000 * f.values + rng.laplace(0, 20, f.shape), "laplace", 20.0)
          for f in infer(truth).factor_marginals()]
    raw = naive_mle(truth.domain, ys, N=1000, project=False, l2=1e-3).model
    projected = naive_mle(truth.domain, ys, N=1000, l2="paper").model
    assert kl_divergence(truth, projected) < kl_divergence(truth, raw)


def _heavy_noise_release(b=400.0):
    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3), (0, 3)], 4, 3, alpha=2.0, seed=5)
    N = 20_000
    tabs = contingency_tables(sample(truth, N, seed=6), truth.domain, truth.scopes)
    rng = np.random.default_rng(8)
    return truth, N, [Measurement(t.variables, t.values + rng.laplace(0, b, t.shape), "laplace", b) for t in tabs]


def test_calibrated_l2_tames_the_naive_mle_under_heavy_noise():
    """The CGM paper's Fig. 1c: with noisy tables a fixed 1/N overfits; (1 + r)/N, r = 2 b^2 cells / N."""
    truth, N = third_order_chain(5, 5, seed=3), 5000
    tabs = contingency_tables(sample(truth, N, seed=6), truth.domain, truth.scopes)
    rng = np.random.default_rng(8)
    ys = [Measurement(t.variables, t.values + rng.laplace(0, 50.0, t.shape), "laplace", 50.0) for t in tabs]
    r = 2 * 50.0**2 * 25 / N
    assert abs(noise_calibrated_l2(ys, N) - (1 + r) / N) < 1e-15
    cal = naive_mle(truth.domain, ys, N=N, l2="calibrated").model
    explicit = naive_mle(truth.domain, ys, N=N, l2=(1 + r) / N).model
    for a, b in zip(cal.factors, explicit.factors):
        np.testing.assert_array_equal(a.values, b.values)
    assert kl_divergence(truth, cal) < 0.25 * kl_divergence(truth, naive_mle(truth.domain, ys, N=N, l2="paper").model)
    with pytest.raises(ValueError, match="l2: expected a number, None or one of"):
        naive_mle(truth.domain, ys, N=N, l2="strong")


def test_moment_matched_estep_is_em_on_gaussian_tables_of_the_same_variance():
    truth, N, ys = _heavy_noise_release(b=40.0)
    gauss = [Measurement(m.variables, m.values, "gaussian", float(np.sqrt(2) * 40.0)) for m in ys]
    a = cgm_em(truth.domain, ys, N=N, progress=False, stop="converged", init_l2="calibrated", max_iter=5)
    b = cgm_em(truth.domain, gauss, N=N, progress=False, stop="converged", init_l2="calibrated", max_iter=5, moment_match=False)
    for fa, fb in zip(a.model.factors, b.model.factors):
        np.testing.assert_allclose(fa.values, fb.values, atol=1e-9)
    exact = cgm_em(truth.domain, ys, N=N, progress=False, stop="converged", init_l2="calibrated", max_iter=5, moment_match=False)
    assert max(np.abs(fa.values - fe.values).max() for fa, fe in zip(a.model.factors, exact.model.factors)) > 1e-3


def test_callback_sees_every_iteration_and_can_stop_em():
    truth, N, ys = _heavy_noise_release(b=40.0)
    seen = []

    def watch(i, model, record):
        seen.append((i, kl_divergence(truth, model), record["objective"]))
        if i == 3:
            raise StopIteration

    res = cgm_em(truth.domain, ys, N=N, progress=False, stop="converged", init_l2="calibrated", max_iter=30, rtol=0.0, callback=watch)
    assert [s[0] for s in seen] == [1, 2, 3] and len(res.history) == 3
    assert abs(seen[-1][1] - kl_divergence(truth, res.model)) < 1e-12
    # rtol stops EM once an iteration gains less than rtol of the objective
    loose = cgm_em(truth.domain, ys, N=N, progress=False, stop="converged", init_l2="calibrated", max_iter=30, rtol=1e-2)
    obj = [h["objective"] for h in loose.history]
    assert len(obj) < 30 and obj[-1] - obj[-2] < 1e-2 * abs(obj[-1])
    assert all(b - a >= 1e-2 * abs(b) for a, b in zip(obj[:-2], obj[1:-1]))


def _pooled_problem6_cvxpy(theta, y, N):
    """Problem (6) on A - B - C with one pooled table y ~ n_AB + n_CB (CB aligned with AB) + noise."""
    mab, mbc = cp.Variable((2, 3), nonneg=True), cp.Variable((3, 2), nonneg=True)
    mb = cp.sum(mab, axis=0)
    cons = [cp.sum(mab) == 1, cp.sum(mbc, axis=1) == mb]
    ent = cp.sum(cp.entr(mab)) - cp.sum(cp.rel_entr(mbc, cp.reshape(mb, (3, 1), order="C") @ np.ones((1, 2))))
    lin = cp.sum(cp.multiply(theta[0], mab)) + cp.sum(cp.multiply(theta[1], mbc.T))
    r = y.values - N * (mab + mbc.T)
    lik = -cp.sum(cp.abs(r)) / y.scale if y.noise == "laplace" else -cp.sum_squares(r) / (2 * y.scale**2)
    cp.Problem(cp.Maximize(N * (lin + ent) + lik), cons).solve(solver=cp.CLARABEL)
    return [mab.value, mbc.value.T]


@pytest.mark.parametrize("noise,scale", [("gaussian", 4.0), ("laplace", 3.0)])
def test_pooled_table_estep_solves_problem_6_like_a_generic_convex_solver(noise, scale):
    """A table released pooled (AB and CB summed cell by cell, one noise draw) enters the E-step through
    both cliques: the dual's solution equals cvxpy's on the primal, and so does Algorithm 1's."""
    model, truth = _chain3(1), _chain3(2)
    N = 200.0
    rng = np.random.default_rng(3)
    ab, bc = infer(truth).factor_marginals()
    y = Measurement(("A", "B"), N * (ab.values + bc.values.T) + rng.normal(0, 5, (2, 3)), noise, scale,
                    members=(("A", "B"), ("C", "B")))
    oracle = MarginalOracle(model.domain, [("A", "B"), ("C", "B")])
    theta_tables = [model.factors[0].values, model.factors[1].values.T]
    theta = oracle.params.join(theta_tables)
    lam, mus, _, _ = estep_dual(oracle, theta, [y], N)
    assert lam.shape == (6,)  # one dual per measured cell, shared by the two cliques
    ref = _pooled_problem6_cvxpy(theta_tables, y, N)
    for got, want in zip(mus, ref):
        np.testing.assert_allclose(got, want, atol=2e-5)
    if noise == "gaussian":
        counts, _, converged = estep_nlbp(oracle, theta, [y], N, damping=0.05, tol=1e-10, max_iter=20000)
        assert converged
        for got, want in zip(counts, ref):
            np.testing.assert_allclose(got / N, want, atol=1e-5)


def test_pooled_release_learns_a_tied_chain_better_than_separate_tables():
    """A time-homogeneous chain released as one pooled edge table (sensitivity: the edges a record
    adds to it) against the same budget spent on separate edge tables: with Laplace noise the pooled
    release's noise per shared cell is (edges) times smaller in variance, and both learners gain."""
    from ppgm.privacy.mechanisms import LaplaceMechanism
    from ppgm.models.random_models import mobility_chain

    truth = mobility_chain(locations=3, hours=8, seed=0)
    d = truth.domain
    edges = [s for s in truth.scopes if len(s) == 2]
    first = [s for s in truth.scopes if len(s) == 1]
    x = sample(truth, 3000, seed=1)
    tabs = contingency_tables(x, d, first + edges)
    mech = LaplaceMechanism(0.5)
    rng = np.random.default_rng(2)
    separate = mech.measure(tabs, rng, n=3000.0)
    pooled_table = Factor(edges[0], sum(t.values for t in tabs[len(first):]))
    pooled = mech.measure(tabs[:len(first)] + [pooled_table], rng, n=3000.0, members=[None] * len(first) + [tuple(edges)])
    assert pooled[-1].scale == separate[-1].scale == mech.scale(len(tabs))  # same sensitivity, same noise scale
    tied = [edges]
    kl = {}
    for name, ms in (("separate", separate), ("pooled", pooled)):
        kl[name, "naive"] = kl_divergence(truth, naive_mle(d, ms, l2="calibrated", tied=tied).model)
        kl[name, "cgm"] = kl_divergence(truth, cgm_em(d, ms, tied=tied, progress=False, stop="converged", init_l2="calibrated").model)
    assert kl["pooled", "naive"] < 0.7 * kl["separate", "naive"]
    assert kl["pooled", "cgm"] < 0.7 * kl["separate", "cgm"]
    # a pooled table also works without tying the model (CGM-EM's E-step splits it over the cliques)
    untied = cgm_em(d, pooled, progress=False, stop="converged", init_l2="calibrated")
    assert len(untied.counts) == len(first) + len(edges)
    assert np.isfinite(kl_divergence(truth, untied.model))


def test_naive_mle_on_a_shared_oracle_is_the_same_fit_and_a_wrong_oracle_is_refused():
    """CGM-EM fits its start on its own oracle: the same numbers as a naive fit that builds one, and an
    oracle of another structure is named as the bad argument (not silently used)."""
    truth = third_order_chain(5, 2, seed=3)
    ys = [Measurement(f.variables, 2000 * f.values + np.random.default_rng(i).normal(0, 3, f.values.shape), "gaussian", 3.0)
          for i, f in enumerate(infer(truth).factor_marginals())]
    oracle = MarginalOracle(truth.domain, [m.variables for m in ys])
    own = naive_mle(truth.domain, ys, N=2000.0, l2="calibrated")
    shared = naive_mle(truth.domain, ys, N=2000.0, l2="calibrated", oracle=oracle)
    for a, b in zip(own.model.factors, shared.model.factors):
        np.testing.assert_array_equal(a.values, b.values)
    other = MarginalOracle(truth.domain, [m.variables for m in ys[1:]])
    with pytest.raises(ValueError, match="oracle"):
        naive_mle(truth.domain, ys, N=2000.0, l2="calibrated", oracle=other)


def test_a_warm_start_near_the_naive_fit_gives_the_cold_fits_choice_and_model():
    """naive_mle and cgm_em started from AIM's last round (a model of the measured cliques near their naive
    fit at 1 / N) choose the weights and iteration count a cold start chooses and reach the same model up
    to the fits' tolerance; a start of other cliques is refused, naming the argument."""
    from itertools import combinations

    from ppgm.inference.tables import contingency_tables
    from ppgm.learners.cgm import population_size
    from ppgm.synthesis.aim import _measurements, aim_select

    rng = np.random.default_rng(2)
    d = 5
    x = np.zeros((4000, d), dtype=np.int64)
    x[:, 0] = rng.integers(0, 3, 4000)
    for j in range(1, d):
        x[:, j] = np.where(rng.random(4000) < 0.2, rng.integers(0, 3, 4000), x[:, j - 1])
    dom = Domain(tuple(f"X{i}" for i in range(d)), (3,) * d)
    run = aim_select(dom, lambda c: contingency_tables(x, dom, [c])[0], list(combinations(dom.variables, 2)), 0.2,
                     rng=np.random.default_rng(0), progress=False)
    ms = _measurements(run.released)
    N = population_size(ms)
    cold, warm = naive_mle(dom, ms, N=N, seed=0, criterion="tv"), naive_mle(dom, ms, N=N, seed=0, criterion="tv", warm_start=run.model)
    assert warm.l2 == pytest.approx(cold.l2, rel=1e-6)
    for a, b in zip(warm.model.factors, cold.model.factors):
        np.testing.assert_allclose(a.values - a.values.mean(), b.values - b.values.mean(), atol=1e-3)
    c_cold, c_warm = cgm_em(dom, ms, N=N, seed=0, progress=False), cgm_em(dom, ms, N=N, seed=0, progress=False, warm_start=run.model)
    assert len(c_warm.history) == len(c_cold.history)
    from ppgm.learners.cgm import Pilot
    p_cold, p_warm = Pilot.of(dom, ms, N), Pilot.of(dom, ms, N, init=run.model)
    for a, b in zip(p_warm.model.factors, p_cold.model.factors):
        np.testing.assert_allclose(a.values - a.values.mean(), b.values - b.values.mean(), atol=1e-6)
    # the same pilot (solved to PILOT_TOL from either start), so the same simulated releases; the weight is the
    # vertex of a parabola through the refits' scores, which moves with their 1e-4 tolerance
    assert c_warm.selection["l2"]["value"] == pytest.approx(c_cold.selection["l2"]["value"], rel=0.02)
    with pytest.raises(ValueError, match="warm_start"):
        naive_mle(dom, ms, N=N, seed=0, warm_start=MarkovNetwork(dom, list(run.model.factors)[:-1]))
