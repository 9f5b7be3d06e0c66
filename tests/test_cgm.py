import cvxpy as cp
import numpy as np
import pytest

from ppgm import Domain, Factor, MarkovNetwork, contingency_tables, infer, kl_divergence, sample
from ppgm.cgm import MarginalOracle, cgm_em, estep_dual, estep_nlbp, naive_mle, population_size
from ppgm.measurement import Measurement
from ppgm.mle import fit_marginals
from ppgm.random_models import pairwise_dirichlet, third_order_chain


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


@pytest.mark.parametrize("noise,scale", [("gaussian", 4.0), ("laplace", 3.0)])
def test_estep_solves_problem_6_like_a_generic_convex_solver(noise, scale):
    model = _chain3(1)
    truth = _chain3(2)
    N = 200.0
    rng = np.random.default_rng(3)
    ys = [Measurement(f.variables, N * f.values + rng.normal(0, 5, f.shape), noise, scale)
          for f in infer(truth).factor_marginals()]
    oracle = MarginalOracle(model.domain, [y.variables for y in ys])
    theta = oracle.params.join([f.values for f in model.factors])
    lam, mus, _, _ = estep_dual(oracle, theta, ys, N)
    ref = _problem6_cvxpy([f.values for f in model.factors], ys, N)
    for got, want in zip(mus, ref):
        np.testing.assert_allclose(got, want, atol=2e-5)
    if noise == "gaussian":  # Algorithm 1 as printed reaches the same point
        counts, _, converged = estep_nlbp(oracle, theta, ys, N, damping=0.05, tol=1e-10, max_iter=20000)
        assert converged
        for got, want in zip(counts, ref):
            np.testing.assert_allclose(got / N, want, atol=1e-5)


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


def test_naive_mle_and_cgm_on_a_small_private_release():
    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3), (0, 3)], 4, 3, alpha=2.0, seed=5)
    N = 20_000
    x = sample(truth, N, seed=6)
    tabs = contingency_tables(x, truth.domain, truth.scopes)
    rng = np.random.default_rng(7)
    ys = [Measurement(t.variables, t.values + rng.laplace(0, 40.0, t.shape), "laplace", 40.0) for t in tabs]
    assert abs(population_size(ys) - N) < 200
    naive = naive_mle(truth.domain, ys, N=N)
    em = cgm_em(truth.domain, ys, N=N, progress=False, max_iter=40)
    kl_naive, kl_em = kl_divergence(truth, naive.model), kl_divergence(truth, em.model)
    assert kl_em < kl_naive
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
    em = cgm_em(truth.domain, ys, N=N, l2=0.0, progress=False, max_iter=20)
    for a, b in zip(infer(em.model).factor_marginals(), infer(mle.model).factor_marginals()):
        np.testing.assert_allclose(a.values, b.values, atol=1e-4)


def test_cgm_bad_input():
    truth = third_order_chain(4, 2, seed=0)
    good = [Measurement(f.variables, 100 * f.values, "laplace", 1.0) for f in infer(truth).factor_marginals()]
    with pytest.raises(ValueError, match="measured twice"):
        cgm_em(truth.domain, good + good[:1], progress=False)
    with pytest.raises(ValueError, match="needs shape"):
        cgm_em(truth.domain, [Measurement(("X0", "X1"), np.zeros((2, 3)), "laplace", 1.0)], progress=False)
    with pytest.raises(ValueError, match="unknown variables"):
        naive_mle(truth.domain, [Measurement(("X0", "Z"), np.zeros((2, 2)), "laplace", 1.0)])
    with pytest.raises(ValueError, match="estep"):
        cgm_em(truth.domain, good, estep="magic", progress=False)
    with pytest.raises(ValueError, match="N:"):
        cgm_em(truth.domain, good, N=-5, progress=False)
    with pytest.raises(ValueError, match="l2"):
        naive_mle(truth.domain, good, project=False, l2=0.0)


def test_projection_helps_the_naive_mle():
    """The CGM paper's Fig. 1b: projecting the noisy pseudo-marginals onto the simplex beats fitting them raw."""
    truth = third_order_chain(4, 3, seed=0)
    rng = np.random.default_rng(0)
    ys = [Measurement(f.variables, 1000 * f.values + rng.laplace(0, 20, f.shape), "laplace", 20.0)
          for f in infer(truth).factor_marginals()]
    raw = naive_mle(truth.domain, ys, N=1000, project=False, l2=1e-3).model
    projected = naive_mle(truth.domain, ys, N=1000).model
    assert kl_divergence(truth, projected) < kl_divergence(truth, raw)
