"""The truncated-Newton fit (``fit_marginals(method="newton")``) against L-BFGS and brute force."""
import warnings

import numpy as np
import pytest
from conftest import brute_log_z, indicator_moments, small_markov_networks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppgm import ConvergenceWarning, Domain, Factor
from ppgm.learners.mle import MarginalOracle, _Parameters, fit_marginals
from ppgm import MarkovNetwork
from ppgm.learners import mle
from ppgm.models.random_models import pairwise_dirichlet, third_order_chain


def objective(domain, targets, l2, model):
    """The per-record objective of a model, by enumeration."""
    P = _Parameters(domain, [t.variables for t in targets])
    x = P.join([f.values for f in model.factors])
    J = model.joint_log_table()
    return float(x @ P.join([t.values for t in targets]) - np.logaddexp.reduce(J.ravel()) - l2 * x @ x)


def inconsistent_targets(model, rng):
    """Each scope's own random table: the tables disagree on shared margins."""
    out = []
    for f in model.factors:
        t = rng.dirichlet(np.full(f.values.size, 0.7)).reshape(f.values.shape)
        out.append(Factor(f.variables, t))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=5, allow_zeros=False))
def test_newton_reaches_the_lbfgs_optimum_on_inconsistent_targets(model):
    rng = np.random.default_rng(1)
    targets = inconsistent_targets(model, rng)
    l2 = 1e-3
    newton = fit_marginals(model.domain, targets, l2=l2, tol=1e-10, max_iter=200, method="newton")
    lbfgs = fit_marginals(model.domain, targets, l2=l2, tol=1e-10, max_iter=20_000, method="lbfgs", warn=False)
    assert newton.converged
    # the objective is strictly concave: one optimum, reached by both, checked by enumeration
    assert objective(model.domain, targets, l2, newton.model) == pytest.approx(newton.objective, abs=1e-9)
    assert newton.objective >= lbfgs.objective - 1e-9
    for a, b in zip(newton.model.factors, lbfgs.model.factors):
        np.testing.assert_allclose(a.values, b.values, atol=1e-4)


@pytest.mark.parametrize("recycle", [False, True])
def test_newton_on_a_loopy_tree_reaches_the_lbfgs_optimum_with_recycled_directions(recycle, monkeypatch):
    """A cycle of eight with two chords fitted to inconsistent tables: its junction tree's cliques are not the
    scopes, so Newton is preconditioned by the scopes' spanning tree, corrected (``recycle``) by its earlier steps'
    conjugate directions as on trees of ``RECYCLE_CELLS`` or more. The same optimum as L-BFGS either way."""
    if recycle:
        monkeypatch.setattr(mle, "RECYCLE_CELLS", 0)
    edges = [(i, (i + 1) % 8) for i in range(8)] + [(0, 4), (2, 6)]
    truth = pairwise_dirichlet(edges, 8, 3, alpha=1.0, seed=4)
    targets = inconsistent_targets(truth, np.random.default_rng(2))
    oracle = MarginalOracle(truth.domain, [t.variables for t in targets])
    assert oracle.exact and not oracle.tree_inverse and (oracle.recycler() is not None) == recycle
    l2 = 1e-3
    newton = fit_marginals(truth.domain, targets, l2=l2, oracle=oracle, tol=1e-10, max_iter=200, method="newton")
    lbfgs = fit_marginals(truth.domain, targets, l2=l2, oracle=oracle, tol=1e-10, max_iter=20_000, method="lbfgs", warn=False)
    assert newton.converged
    assert newton.objective >= lbfgs.objective - 1e-9
    for a, b in zip(newton.model.factors, lbfgs.model.factors):
        np.testing.assert_allclose(a.values, b.values, atol=1e-4)


def test_newton_solves_a_hard_m_step_far_better_than_lbfgs_at_the_same_cost():
    """A third-order chain's M-step from a gauge-heavy start (the shape of CGM-EM's): Newton meets the
    tolerance; L-BFGS with as many marginal evaluations as Newton used does not come close."""
    truth = third_order_chain(6, 4, seed=3)
    oracle = MarginalOracle(truth.domain, truth.scopes)
    P = oracle.params
    targets = [Factor(s, m) for s, m in zip(P.scopes, oracle(P.join([f.values for f in truth.factors]))[1])]
    rng = np.random.default_rng(0)
    start = P.model(P.join([f.values for f in truth.factors]) + 5 * rng.normal(size=P.size))
    calls = {"n": 0}
    flat = oracle.flat

    def counted(x):
        calls["n"] += 1
        return flat(x)

    oracle.flat = counted
    l2 = 1e-5
    newton = fit_marginals(truth.domain, targets, l2=l2, init=start, oracle=oracle, tol=1e-9, max_iter=50, method="newton")
    used = calls["n"]
    lbfgs = fit_marginals(truth.domain, targets, l2=l2, init=start, oracle=oracle, tol=1e-9, max_iter=used,
                          method="lbfgs", warn=False)
    best = fit_marginals(truth.domain, targets, l2=l2, init=newton.model, oracle=oracle, tol=1e-12, max_iter=50,
                         method="newton", warn=False)
    assert newton.converged and not lbfgs.converged
    assert best.objective - newton.objective < 1e-10
    assert best.objective - lbfgs.objective > 100 * (best.objective - newton.objective)


def test_method_choice_and_fallbacks():
    d = Domain(("A", "B", "C"), (2, 2, 2))
    targets = [Factor(("A", "B"), np.full((2, 2), 0.25)), Factor(("B", "C"), np.full((2, 2), 0.25))]
    with pytest.raises(ValueError, match="method: expected 'auto', 'newton' or 'lbfgs'"):
        fit_marginals(d, targets, l2=1e-3, method="bfgs")
    with pytest.raises(ValueError, match="method: 'newton' needs l2 > 0"):
        fit_marginals(d, targets, l2=0.0, method="newton")
    tied = fit_marginals(d, targets, l2=1e-3, tied=[[("A", "B"), ("B", "C")]])
    assert tied.converged
    np.testing.assert_allclose(tied.model.factors[0].values, tied.model.factors[1].values)


@pytest.mark.parametrize("l2", [1e-4, 1e-2])
def test_tied_newton_reaches_the_lbfgs_optimum_in_fewer_calibrations(l2):
    """Tied tables are fitted by Newton on the shared tables; L-BFGS on the same problem is the
    independent reference: the same optimum (objective and tables), in fewer calibrations. The
    targets are inconsistent (a different random table per clique), so the shared optimum is a
    compromise no single clique's table gives."""
    d = Domain(tuple("ABCDEF"), (3,) * 6)
    pairs = [tuple("AB"), tuple("BC"), tuple("CD"), tuple("DE"), tuple("EF")]
    rng = np.random.default_rng(4)
    targets = [Factor(("A",), rng.dirichlet(np.ones(3)))] + [Factor(p, rng.dirichlet(np.ones(9)).reshape(3, 3)) for p in pairs]
    tied = [pairs]
    oracle = MarginalOracle(d, [t.variables for t in targets])
    flat, calls = oracle.flat, {"n": 0}

    def counted(x):
        calls["n"] += 1
        return flat(x)

    oracle.flat = counted
    newton = fit_marginals(d, targets, l2=l2, oracle=oracle, tied=tied, tol=1e-10, method="newton")
    used, calls["n"] = calls["n"], 0
    lbfgs = fit_marginals(d, targets, l2=l2, oracle=oracle, tied=tied, tol=1e-10, method="lbfgs", max_iter=5000)
    assert newton.converged and lbfgs.converged
    assert newton.objective == pytest.approx(lbfgs.objective, abs=1e-9)
    for a, b in zip(newton.model.factors, lbfgs.model.factors):
        np.testing.assert_allclose(a.values - a.values.mean(), b.values - b.values.mean(), atol=1e-5)
    for f in newton.model.factors[2:]:
        np.testing.assert_array_equal(f.values, newton.model.factors[1].values)
    assert used < calls["n"]


def test_tied_newton_from_an_untied_start_ignores_its_marginals():
    """A start that is not tied is averaged over each group first, so the marginals passed for it
    (``init_marginals``) belong to another model and must not be used. Here they are forged so that
    the gradient would vanish at the averaged start: used, the fit would stop at once and report a
    wrong objective."""
    from ppgm.models.tying import Tying

    d = Domain(("A", "B", "C"), (3, 3, 3))
    rng = np.random.default_rng(0)
    targets = [Factor(("A", "B"), rng.dirichlet(np.ones(9)).reshape(3, 3)), Factor(("B", "C"), rng.dirichlet(np.ones(9)).reshape(3, 3))]
    init = MarkovNetwork(d, [Factor(("A", "B"), rng.normal(size=(3, 3))), Factor(("B", "C"), rng.normal(size=(3, 3)))])
    oracle = MarginalOracle(d, [("A", "B"), ("B", "C")])
    groups = [[("A", "B"), ("B", "C")]]
    tie = Tying.build(d, oracle.params.scopes, groups)
    l2 = 1e-2
    mu_hat = oracle.params.join([t.values for t in targets])
    z0 = tie.restrict(oracle.params.join([f.values for f in init.factors]))
    size = tie.pool(np.ones(oracle.params.size))
    forged = (0.0, mu_hat - tie.expand(2 * l2 * z0 / size))  # pool(mu_hat - forged) = 2 l2 z0: a zero gradient
    a = fit_marginals(d, targets, l2=l2, init=init, oracle=oracle, tied=groups, tol=1e-10, method="newton",
                      init_marginals=forged)
    b = fit_marginals(d, targets, l2=l2, oracle=oracle, tied=groups, tol=1e-10, method="newton")
    theta = oracle.params.join([f.values for f in a.model.factors])
    log_z, _ = oracle.flat(theta)
    assert a.objective == pytest.approx(float(theta @ mu_hat - log_z - l2 * tie.restrict(theta) @ tie.restrict(theta)), abs=1e-12)
    assert a.objective == pytest.approx(b.objective, abs=1e-10)


def test_newton_warns_when_stopped_early():
    truth = third_order_chain(5, 3, seed=0)
    oracle = MarginalOracle(truth.domain, truth.scopes)
    rng = np.random.default_rng(2)
    targets = [Factor(s, rng.dirichlet(np.ones(int(np.prod(sh)))).reshape(sh))
               for s, sh in zip(oracle.params.scopes, oracle.params.shapes)]
    with pytest.warns(ConvergenceWarning, match="1 Newton steps did not meet tol"):
        short = fit_marginals(truth.domain, targets, l2=1e-4, tol=1e-12, max_iter=1, method="newton")
    assert not short.converged and len(short.history) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_marginals(truth.domain, targets, l2=1e-4, tol=1e-12, max_iter=1, method="newton", warn=False)


def _layouts():
    """Parameter layouts: every scope a clique (a tree), cliques with their sub-tables (node and edge
    tables, as MST-style releases), and pairs inside larger cliques (the third-order chain)."""
    tree = pairwise_dirichlet([(0, 1), (1, 2), (1, 3), (3, 4)], 5, 3, alpha=0.5, seed=0)
    nodes = MarkovNetwork(tree.domain, list(tree.factors) + [Factor((v,), np.zeros(3)) for v in tree.domain.variables])
    return {"tree": tree, "tree with node tables": nodes, "third-order chain": third_order_chain(5, 2, seed=1)}


@pytest.mark.parametrize("name", list(_layouts()))
def test_oracle_fisher_and_its_tree_inverse_match_enumeration(name):
    model = _layouts()[name]
    oracle = MarginalOracle(model.domain, model.scopes)
    P = oracle.params
    x = P.join([f.values for f in model.factors])
    mean, cov = indicator_moments(model, P.scopes)
    log_z, mu = oracle.flat(x)
    np.testing.assert_allclose(mu, mean, atol=1e-12)
    v = np.random.default_rng(0).normal(size=P.size)
    np.testing.assert_allclose(oracle.fisher(x, mu)(v), cov @ v, atol=1e-12)
    np.testing.assert_allclose(oracle.fisher(x)(v), cov @ v, atol=1e-12)
    J = oracle.inverse_fisher(mu, 0.0)
    if name == "third-order chain":  # pairs inside 4-cliques: no tree inverse, no canonical start (the scopes' tree: below)
        assert not oracle.tree_inverse and oracle.canonical(mu, 0.0) is None
        return
    # on the gauge-free directions (the range of F), the projected tree inverse undoes F
    g = oracle.gauge
    r = g.project(cov @ v)
    np.testing.assert_allclose(cov @ g.project(J(r)), r, atol=1e-9)


@pytest.mark.parametrize("name", list(_layouts()))
def test_oracle_fisher_on_whole_clique_arrays_and_planned_maps_matches_enumeration(name, monkeypatch):
    """The oracle's product with the tree's clique-by-clique path (uncentred cells, centred on the scopes by
    their marginals) and the scopes mapped by planned axis sums, forced on these small cliques: against the
    enumerated covariance, at the point's marginals and from a calibration of its own."""
    import ppgm.inference.junction_tree as jtm
    import ppgm.learners.mle as mle
    monkeypatch.setattr(jtm, "SCALED_MIN_CELLS", 1)
    monkeypatch.setattr(mle, "PLAN_CELLS", 1)
    model = _layouts()[name]
    oracle = MarginalOracle(model.domain, model.scopes)
    P = oracle.params
    x = P.join([f.values for f in model.factors])
    _, cov = indicator_moments(model, P.scopes)
    v = np.random.default_rng(2).normal(size=P.size)
    _, mu = oracle.flat(x)
    for product in (oracle.fisher(x, mu), oracle.fisher(x)):
        np.testing.assert_allclose(product(v), cov @ v, atol=1e-12)
        np.testing.assert_allclose(product(2 * v), 2 * (cov @ v), atol=1e-12)  # a second call on the kept scratch


@pytest.mark.parametrize("name", list(_layouts()))
def test_oracle_maps_and_passes_in_halves_match_enumeration(name, monkeypatch):
    """Planned cliques mapped in two groups and the tree's passes in halves (forced on these small cliques;
    side by side on trees of millions of cells): the marginals, the Fisher product (twice, on the kept
    scratch, whose unplanned cells are set by the bincount alone) against enumeration; the maps into a
    scratch array the same cells as into a fresh one."""
    import ppgm.inference.junction_tree as jtm
    import ppgm.learners.mle as mle
    monkeypatch.setattr(jtm, "SCALED_MIN_CELLS", 1)
    monkeypatch.setattr(jtm, "SPLIT_CELLS", 1)
    monkeypatch.setattr(mle, "SPLIT_CELLS", 1)
    monkeypatch.setattr(mle, "PLAN_CELLS", 8)  # the chain's 4-cliques (16 cells) planned, the trees' pairs not
    model = _layouts()[name]
    oracle = MarginalOracle(model.domain, model.scopes)
    assert len(oracle._planned_groups) == min(2, len(oracle._planned)) or not oracle._planned
    P = oracle.params
    x = P.join([f.values for f in model.factors])
    mean, cov = indicator_moments(model, P.scopes)
    log_z, mu = oracle.flat(x)
    np.testing.assert_allclose(mu, mean, atol=1e-12)
    assert log_z == pytest.approx(brute_log_z(model), rel=1e-12)
    v = np.random.default_rng(3).normal(size=P.size)
    product = oracle.fisher(x, mu)
    for scale in (1.0, -2.0):
        np.testing.assert_allclose(product(scale * v), scale * (cov @ v), atol=1e-12)
    scratch = np.full(oracle._n_cells, np.nan)
    np.testing.assert_array_equal(oracle._to_cells(v, out=scratch), oracle._to_cells(v))


def test_oracle_fisher_reads_the_last_calibration_at_its_point(monkeypatch):
    """Pairs inside the third-order chain's 4-cliques (the tree's beliefs are not among the scopes'):
    fisher(x) right after flat(x) reuses that calibration, after flat at another point it calibrates
    x again; both against the enumerated covariance."""
    model = _layouts()["third-order chain"]
    oracle = MarginalOracle(model.domain, model.scopes)
    assert oracle._clique_params is None
    P = oracle.params
    x = P.join([f.values for f in model.factors])
    _, cov = indicator_moments(model, P.scopes)
    calls = []
    calibrate = type(oracle.tree).calibrate_flat
    monkeypatch.setattr(type(oracle.tree), "calibrate_flat", lambda self, *a, **k: calls.append(1) or calibrate(self, *a, **k))
    v = np.random.default_rng(0).normal(size=P.size)
    _, mu = oracle.flat(x)
    np.testing.assert_allclose(oracle.fisher(x, mu)(v), cov @ v, atol=1e-12)
    assert len(calls) == 1  # flat's calibration only
    oracle.flat(x + 0.5)
    np.testing.assert_allclose(oracle.fisher(x, mu)(v), cov @ v, atol=1e-12)
    assert len(calls) == 3  # the other point's, and x's again


def _dense(op, n):
    return np.stack([op(e) for e in np.eye(n)], axis=1)


@pytest.mark.parametrize("with_nodes", [False, True])
def test_scope_tree_inverse_is_exact_when_the_scopes_form_a_tree_inside_grown_cliques(with_nodes):
    """A tree's tables fitted on a junction tree whose cliques are larger than the scopes (as AIM's
    rounds keep a grown tree): the junction tree's inverse does not apply, the scopes' own tree's does,
    and on the gauge-free directions it undoes the Fisher information exactly."""
    from ppgm import JunctionTree

    model = _layouts()["tree with node tables" if with_nodes else "tree"]
    big = JunctionTree.build(model.domain, list(model.scopes) + [("X1", "X3", "X4")], max_cells=None)
    oracle = MarginalOracle(model.domain, model.scopes, tree=big)
    assert not oracle.tree_inverse
    P = oracle.params
    _, mu = oracle.flat(P.join([f.values for f in model.factors]))
    _, cov = indicator_moments(model, P.scopes)
    g = oracle.gauge
    r = g.project(cov @ np.random.default_rng(1).normal(size=P.size))
    np.testing.assert_allclose(cov @ g.project(oracle.inverse_fisher(mu, 0.0)(r)), r, atol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=6, allow_zeros=False))
def test_scope_tree_inverses_are_positive_semi_definite_on_loopy_scopes(model):
    """Scopes with loops (no tree of them is exact): the scopes' tree inverse (with a ridge) stays
    positive semi-definite on the gauge-free directions, so conjugate gradients can use it."""
    oracle = MarginalOracle(model.domain, model.scopes)
    P = oracle.params
    _, mu = oracle.flat(P.join([f.values for f in model.factors]))
    Pg = _dense(oracle.gauge.project, P.size)
    M = Pg @ _dense(oracle.inverse_fisher(mu, 1e-3), P.size) @ Pg
    np.testing.assert_allclose(M, M.T, atol=1e-9 * max(1.0, np.abs(M).max()))
    assert np.linalg.eigvalsh((M + M.T) / 2).min() >= -1e-9 * max(1.0, np.abs(M).max())


@pytest.mark.parametrize("name", ["tree", "tree with node tables"])
def test_canonical_start_is_the_fit_of_consistent_tree_marginals(name):
    """From a tree model's own marginals the canonical log-potentials (root marginal, conditionals
    along the tree) give back exactly those marginals: the unpenalised maximum-likelihood fit."""
    model = _layouts()[name]
    oracle = MarginalOracle(model.domain, model.scopes)
    P = oracle.params
    _, mu = oracle.flat(P.join([f.values for f in model.factors]))
    x = oracle.canonical(mu, 0.0)
    np.testing.assert_allclose(oracle.flat(x)[1], mu, atol=1e-12)


def test_a_cold_fit_at_a_tiny_weight_follows_the_path_and_converges():
    """Noisy tables of a 40-node tree at l2 = 1 / N: the optimum's potentials are far from any fixed
    start (hundreds of nats), where Newton alone stalls (unconverged after 50 steps); along the path of
    weights it converges, to the optimum L-BFGS approaches from the same point."""
    from ppgm.learners.cgm import _naive_targets
    from ppgm.models.measurement import Measurement
    from ppgm.learners.release_rule import simulated_release

    rng = np.random.default_rng(0)
    truth = pairwise_dirichlet([(int(rng.integers(0, i)), i) for i in range(1, 40)], 40, 8, alpha=1.0, seed=0)
    tpl = [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 2000.0) for f in truth.factors]
    N = 1e5
    targets = _naive_targets(simulated_release(truth, tpl, N, np.random.default_rng(1)), N, True)
    fit = fit_marginals(truth.domain, targets, l2=1 / N, tol=1e-4, max_iter=50, method="newton")
    assert fit.converged
    polish = fit_marginals(truth.domain, targets, l2=1 / N, tol=1e-9, max_iter=5000, init=fit.model, method="lbfgs", warn=False)
    assert polish.objective - fit.objective < 1e-6 * abs(fit.objective)
    saved = mle.PATH_START
    try:
        mle.PATH_START = 1e-300  # no path: Newton from the canonical start alone
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cold = fit_marginals(truth.domain, targets, l2=1 / N, tol=1e-4, max_iter=50, method="newton")
    finally:
        mle.PATH_START = saved
    assert not cold.converged and cold.objective < fit.objective - 1.0


def _preconditioned_condition(oracle, cov, precondition, ridge):
    """Condition number of the projected preconditioner times ``cov + ridge`` on the gauge's
    complement (dense, by eigenvalues)."""
    n = cov.shape[0]
    g = oracle.gauge
    G = np.column_stack([g.project(e) for e in np.eye(n)])
    w, V = np.linalg.eigh((G + G.T) / 2)
    Q = V[:, w > 0.5]
    M = np.column_stack([g.project(precondition(e)) for e in np.eye(n)])
    np.testing.assert_allclose(Q.T @ M @ Q, (Q.T @ M @ Q).T, atol=1e-9 * np.abs(M).max())  # symmetric on the complement
    bw, bv = np.linalg.eigh(Q.T @ (M + M.T) / 2 @ Q)
    assert bw.min() > 0  # positive definite there
    S = bv @ np.diag(np.sqrt(bw)) @ bv.T
    ev = np.linalg.eigvalsh(S @ (Q.T @ (cov + ridge * np.eye(n)) @ Q) @ S)
    return ev.max() / ev.min()


@pytest.mark.parametrize("alpha", [1.0, 0.1])
def test_inverse_hessian_preconditions_fisher_plus_any_ridge(alpha):
    """CGM-EM's E-step Hessian is N F + s2: its ridge s2 / N may be far below the cells' marginals
    (little noise) or far above (much noise). The tree inverse of F alone (``inverse_fisher``, the
    ridge added to the cells) loses its grip on the noisy side; ``inverse_hessian`` keeps the
    preconditioned condition number small on both (enumerated Fisher information, node and edge
    tables of a random tree; dense eigenvalues on the gauge's complement)."""
    rng = np.random.default_rng(3)
    tree = pairwise_dirichlet([(int(rng.integers(0, i)), i) for i in range(1, 6)], 6, 3, alpha=alpha, seed=1)
    model = MarkovNetwork(tree.domain, [Factor((v,), np.zeros(3)) for v in tree.domain.variables] + list(tree.factors))
    oracle = MarginalOracle(model.domain, model.scopes)
    x = oracle.params.join([f.values for f in model.factors])
    cov = indicator_moments(model, oracle.params.scopes)[1]
    _, mu = oracle.flat(x)
    r = np.random.default_rng(0).normal(size=mu.size)
    J0r = oracle.inverse_fisher(mu, 0.0)(r)  # no ridge: the tree's inverse Fisher information
    np.testing.assert_allclose(oracle.inverse_hessian(mu, 1e-9 * mu.min())(r), J0r, rtol=1e-6, atol=1e-8 * np.abs(J0r).max())
    new, old = [], []
    for ridge in [1e-5, 1e-3, 1e-2, 1e-1, 1.0, 100.0]:
        new.append(_preconditioned_condition(oracle, cov, oracle.inverse_hessian(mu, ridge), ridge))
        old.append(_preconditioned_condition(oracle, cov, oracle.inverse_fisher(mu, ridge), ridge))
    print(alpha, np.round(new, 1), np.round(old, 1))
    assert max(new) < 8.0
    assert max(new) < max(old) / 2  # the noisy side, where the tree inverse alone degrades


def _aim_like_targets(seed):
    """Noisy, projected tables of a third-order chain's pairs and triples measured one after another (what
    AIM's rounds fit): the previous round's cliques and the next round's."""
    from ppgm.learners.cgm import _naive_targets
    from ppgm.models.measurement import Measurement

    truth = third_order_chain(6, 3, seed=seed)
    from ppgm.inference.marginals import infer

    marg = infer(truth)
    rng = np.random.default_rng(seed)
    n = 2000.0
    scopes = [("X0",), ("X1",), ("X2",), ("X3",), ("X4",), ("X5",), ("X0", "X1"), ("X1", "X2", "X3"), ("X3", "X4"), ("X2", "X4", "X5")]
    ms = [Measurement(s, n * marg.marginal(s).values + rng.normal(0, 8.0, truth.domain.shape(s)), "gaussian", 8.0) for s in scopes]
    return truth.domain, _naive_targets(ms, n, project=True), n


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_warm_refit_after_a_new_table_reaches_the_cold_fit(seed):
    """AIM's refit: the previous round's model with the new table's potentials at zero, fitted to convergence,
    is the model a cold fit (along its path of weights) reaches: the same objective (by enumeration) and marginals."""
    dom, targets, n = _aim_like_targets(seed)
    before = fit_marginals(dom, targets[:-1], l2=1.0 / n, tol=1e-10)
    warm = MarkovNetwork(dom, list(before.model.factors) + [Factor(targets[-1].variables, np.zeros(targets[-1].values.shape))])
    a = fit_marginals(dom, targets, l2=1.0 / n, init=warm, tol=1e-10)
    b = fit_marginals(dom, targets, l2=1.0 / n, tol=1e-10)
    assert a.converged and b.converged
    assert objective(dom, targets, 1.0 / n, a.model) == pytest.approx(objective(dom, targets, 1.0 / n, b.model), abs=1e-11)
    from ppgm.inference.marginals import infer

    ma, mb = infer(a.model), infer(b.model)
    for t in targets:
        np.testing.assert_allclose(ma.marginal(t.variables).values, mb.marginal(t.variables).values, atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table_tol_stops_once_every_tables_gradient_is_that_small_in_l1(seed):
    """``table_tol`` (AIM's settled refits) stops Newton once every table's penalised mismatch, summed over its
    cells, is within it: checked by enumeration of the returned model; it takes fewer steps than the
    converged fit, and every table's marginal is then within twice ``table_tol`` (L1) of the converged one."""
    dom, targets, n = _aim_like_targets(seed)
    before = fit_marginals(dom, targets[:-1], l2=1.0 / n, tol=1e-10)
    warm = MarkovNetwork(dom, list(before.model.factors) + [Factor(targets[-1].variables, np.zeros(targets[-1].values.shape))])
    full = fit_marginals(dom, targets, l2=1.0 / n, init=warm, tol=1e-10)
    table_tol = 2.0 / n  # two records' worth of any table
    settled = fit_marginals(dom, targets, l2=1.0 / n, init=warm, tol=1e-12, table_tol=table_tol)
    assert settled.converged and len(settled.history) < len(full.history)
    P = _Parameters(dom, [t.variables for t in targets])
    x = P.join([f.values for f in settled.model.factors])
    mu = indicator_moments(settled.model, [t.variables for t in targets])[0]
    grad = P.join([t.values for t in targets]) - mu - 2 / n * x
    assert np.add.reduceat(np.abs(grad), P.offsets[:-1]).max() <= table_tol * (1 + 1e-6)
    mu_full = indicator_moments(full.model, [t.variables for t in targets])[0]
    assert np.add.reduceat(np.abs(mu - mu_full), P.offsets[:-1]).max() <= 2 * table_tol


def test_the_remembered_calibration_is_the_fits_own_and_other_points_are_recalibrated():
    """AIM scores its candidates on the fit's last calibration: the fitted model (its point plus the gauge's step)
    gets the calibration the fit made, with the same marginals and log Z as a fresh one; a point off the gauge gets a new one."""
    from ppgm import JunctionTree

    dom, targets, n = _aim_like_targets(3)
    oracle = MarginalOracle(dom, [t.variables for t in targets])
    oracle.remember = True
    fit = fit_marginals(dom, targets, l2=1.0 / n, oracle=oracle, tol=1e-9)
    x = oracle.params.join([f.values for f in fit.model.factors])
    reused, fresh = oracle.calibration(x), JunctionTree.build(dom, fit.model.scopes).calibrate(fit.model)
    assert reused.tree is oracle.tree and reused.log_z == pytest.approx(fresh.log_z, abs=1e-10)
    for q in [("X0", "X5"), ("X1", "X2", "X3"), ("X4",)]:
        np.testing.assert_allclose(reused.marginal(q).values, fresh.marginal(q).values, atol=1e-12)
    moved = x.copy()
    moved[oracle.params.offsets[-2]] += 0.5  # one cell of the last table: another distribution
    other = oracle.calibration(moved)
    assert other.log_z == pytest.approx(oracle.flat(moved)[0], abs=1e-12) and abs(other.log_z - reused.log_z) > 1e-6


@given(st.floats(1e-12, 1e6), st.floats(1e-12, 1e6), st.floats(1e-12, 1e6))
def test_forcing_term_bounds_and_monotone(g0, a, b):
    """The Newton loops' CG tolerance: CG_RTOL at the first step and whenever the gradient has not fallen (a
    rising gradient never loosens a solve), the square root of the fall below that, never under 1e-4 of
    CG_RTOL (the last steps still stop), and never looser at a smaller gradient."""
    lo, hi = sorted((a, b))
    assert mle.forcing(g0, g0) == pytest.approx(mle.CG_RTOL)
    assert mle.CG_RTOL * 1e-4 <= mle.forcing(lo, g0) <= mle.forcing(hi, g0) <= mle.CG_RTOL
    assert mle.forcing(g0 * 1e-2, g0) == pytest.approx(0.1 * mle.CG_RTOL)
    assert mle.forcing(g0 * 1e-12, g0) == pytest.approx(1e-4 * mle.CG_RTOL)
    assert mle.forcing(g0 * 4, g0) == pytest.approx(mle.CG_RTOL)
