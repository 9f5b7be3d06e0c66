"""MER / INI engine: the junction-tree programs against dense / full-joint programs written
independently here, sparsity (Theorem 1), s~, errors."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from ppgm import Domain, Factor, MarkovNetwork
from ppgm.mer.program import choose_gamma, precision_recall, solve
from ppgm.mer.discrete import DiscreteMER
from ppgm.mer.gaussian import GaussianMER
from ppgm.models.random_models import gaussian_cycle, overlapping_sample_sets
from ppgm.mer.sample_sets import SampleSet, pooled_counts, pooled_moments
from ppgm.inference.sampling import sample


def _gaussian_program(n=7, seed=0, extra=1, **kw):
    J, edges = gaussian_cycle(n, seed=seed)
    sets = overlapping_sample_sets(np.linalg.inv(J), extra=extra, seed=seed + 1)
    names = [f"x{i}" for i in range(n)]
    ss = [SampleSet([names[i] for i in ix], rows) for ix, rows in sets]
    means, nodes, eds = pooled_moments(ss, names)
    return GaussianMER(names, nodes, eds, means=means, **kw), nodes, eds, edges


def _dense_gaussian(names, nodes, eds, p, gamma=None, extra=None):
    """The same program with one dense n x n covariance and log_det (the form we avoid at scale)."""
    n = len(names)
    pos = {v: i for i, v in enumerate(names)}
    P = cp.Variable((n, n), PSD=True)
    s = cp.Variable(nonneg=True)
    cons = []
    for m in nodes:
        i = pos[m.variables[0]]
        q = m.covariance[0, 0]
        d = 0.5 * (P[i, i] / q - cp.log(P[i, i]) + np.log(q) - 1)
        cons.append(d <= (gamma if gamma is not None else s) * (1 / m.n) ** p)
    for m in eds:
        ix = [pos[v] for v in m.variables]
        Pe = P[np.ix_(ix, ix)] if False else cp.bmat([[P[ix[0], ix[0]], P[ix[0], ix[1]]], [P[ix[1], ix[0]], P[ix[1], ix[1]]]])
        Qi = np.linalg.inv(m.covariance)
        d = 0.5 * (cp.trace(Qi @ Pe) - cp.log_det((Pe + Pe.T) / 2) + np.linalg.slogdet(m.covariance)[1] - 2)
        cons.append(d <= (gamma if gamma is not None else s) * (3 / m.n) ** p)
    cons += extra(P) if extra is not None else []
    if gamma is None:
        prob = cp.Problem(cp.Minimize(s), cons)
    else:
        prob = cp.Problem(cp.Maximize(cp.log_det(P)), cons)
    prob.solve(solver="CLARABEL")
    return prob, P.value, s.value


def test_programs_are_dcp_and_dpp():
    prog, *_ = _gaussian_program()
    assert prog.mer_problem.is_dcp() and prog.mer_problem.is_dpp() and prog.ini_problem.is_dcp()
    dprog, *_ = _discrete_program()
    assert dprog.mer_problem.is_dcp() and dprog.mer_problem.is_dpp() and dprog.ini_problem.is_dcp()


def test_gaussian_junction_tree_form_matches_dense_form():
    prog, nodes, eds, _ = _gaussian_program()
    ini = prog.ini()
    _, _, s_dense = _dense_gaussian(prog.variables, nodes, eds, prog.p)
    assert ini.s_tilde == pytest.approx(s_dense, rel=1e-4)
    res = prog.mer(gamma_ratio=3)
    prob, P, _ = _dense_gaussian(prog.variables, nodes, eds, prog.p, gamma=res.gamma)
    assert prob.status == "optimal"
    n = len(prog.variables)
    assert res.entropy == pytest.approx(0.5 * (np.linalg.slogdet(P)[1] + n * np.log(2 * np.pi * np.e)), abs=1e-5)
    np.testing.assert_allclose(res.covariance, P, atol=2e-4)


def test_gaussian_solution_is_markov_on_the_constraint_graph():
    prog, nodes, eds, _ = _gaussian_program(n=9, extra=0)
    res = prog.mer(gamma_ratio=2)
    J = res.precision
    allowed = {frozenset(m.variables) for m in eds}
    scale = np.sqrt(np.outer(np.diag(J), np.diag(J)))
    for i, j in itertools.combinations(range(len(prog.variables)), 2):
        if frozenset((prog.variables[i], prog.variables[j])) not in allowed:
            assert abs(J[i, j]) / scale[i, j] < 1e-6
    # and on the active constraints alone (Theorem 1)
    active = {frozenset(e) for e in res.active_edges}
    for i, j in itertools.combinations(range(len(prog.variables)), 2):
        if frozenset((prog.variables[i], prog.variables[j])) not in active:
            assert abs(J[i, j]) / scale[i, j] < 1e-4


def test_consistent_statistics_give_zero_s_tilde_and_mer_keeps_the_graph():
    J, edges = gaussian_cycle(6, seed=3)
    rows = np.random.default_rng(0).multivariate_normal(np.zeros(6), np.linalg.inv(J), size=4000)
    names = [f"x{i}" for i in range(6)]
    means, nodes, eds = pooled_moments([SampleSet(names, rows)], names)
    prog = GaussianMER(names, nodes, eds, means=means)
    assert prog.ini().s_tilde < 1e-6
    res = prog.mer()  # default rule for consistent statistics
    assert "consistent" in res.notes[0]
    assert precision_recall(res.edges(), [(names[i], names[j]) for i, j in edges]) == (1.0, 1.0)


def test_infeasible_gamma_names_s_tilde():
    prog, *_ = _gaussian_program()
    s = prog.s_tilde()
    with pytest.raises(ValueError, match="s~"):
        prog.mer(gamma=0.5 * s)
    with pytest.raises(ValueError, match="gamma_ratio"):
        prog.mer(gamma_ratio=0.5)
    with pytest.raises(ValueError, match="p"):
        _gaussian_program(p=1.5)


def test_choose_gamma_rule():
    assert choose_gamma(0.1, None, None)[0] == pytest.approx(1.0)
    assert choose_gamma(0.1, 0.3, None) == (0.3, choose_gamma(0.1, 0.3, None)[1])
    with pytest.raises(ValueError, match="consistent_gamma"):
        choose_gamma(0.0, None, None)
    assert choose_gamma(0.0, None, None, 0.2)[0] == 0.2


def test_feasibility_gamma_covers_the_truth():
    """The chi-square rule's promise, by simulation: at gamma = feasibility_gamma(0.05) the true
    covariance meets every tolerance (node and edge KL divergences from the sample moments) in at
    least 95% of data sets; and at a tenth of it, it fails often (the rule is not vacuous)."""
    rng = np.random.default_rng(5)
    names = ("a", "b", "c")
    cov = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.4], [0.2, 0.4, 1.0]])
    inside, tight = 0, 0
    for rep in range(300):
        x = rng.multivariate_normal(np.zeros(3), cov, size=200)
        means, nodes, edges = pooled_moments([SampleSet(names, x)], names)
        prog = GaussianMER(names, nodes, edges, means=means)
        g = prog.feasibility_gamma(0.05)
        kls = []
        for m in list(nodes) + list(edges):
            ix = [names.index(v) for v in m.variables]
            P, Q = cov[np.ix_(ix, ix)], m.covariance
            kls.append(0.5 * (np.trace(np.linalg.solve(Q, P)) - np.linalg.slogdet(P)[1] + np.linalg.slogdet(Q)[1] - len(ix)))
        tol = g * prog.weights
        inside += bool(np.all(np.array(kls) <= tol))
        tight += bool(np.all(np.array(kls) <= 0.1 * tol))
    assert inside / 300 >= 0.95
    assert tight / 300 < 0.5


def test_solver_fallback_is_reported():
    x = cp.Variable(3)
    prob = cp.Problem(cp.Maximize(cp.sum(cp.entr(x))), [cp.sum(x) == 1, x[0] >= 0.5])
    report = solve(prob, max_iter=2)
    assert report.status == "optimal" and "CLARABEL -> user_limit" in report.notes[0]
    np.testing.assert_allclose(x.value, [0.5, 0.25, 0.25], atol=1e-4)
    report = solve(prob, solver="SCS")
    assert report.solver == "SCS" and len(report.attempts) == 1


# --------------------------------------------------------------------------------------------------
def _discrete_program(seed=0, n=5, windows=((0, 1, 2), (2, 3, 4), (4, 0), (1, 3)), **kw):
    rng = np.random.default_rng(seed)
    names = tuple(f"v{i}" for i in range(n))
    dom = Domain(names, (2,) * n)
    fs = [Factor((names[i], names[(i + 1) % n]), np.array([[0.8, -0.8], [-0.8, 0.8]]) * rng.choice([-1, 1])) for i in range(n)]
    mn = MarkovNetwork(dom, fs)
    sets = [SampleSet([names[i] for i in w], sample(mn, int(rng.integers(200, 600)), seed=seed + t)[:, list(w)]) for t, w in enumerate(windows)]
    nodes, eds = pooled_counts(sets, dom)
    return DiscreteMER(dom, nodes, eds, **kw), nodes, eds


def _full_joint(prog, nodes, eds, gamma=None, extra=None):
    """MER / INI over the full joint table (2^n cells): the brute-force reference."""
    dom = prog.domain
    X = np.array(list(itertools.product(*[range(c) for c in dom.cards])))
    p = cp.Variable(len(X), nonneg=True)
    s = cp.Variable(nonneg=True)
    cons = [cp.sum(p) == 1]
    for m in list(nodes) + list(eds):
        idx = [dom.index(v) for v in m.variables]
        cells = np.ravel_multi_index(tuple(X[:, idx].T), m.shape)
        A = np.zeros((int(np.prod(m.shape)), len(X)))
        A[cells, np.arange(len(X))] = 1
        q = (m.values.ravel() + prog.pseudo_count) / (m.values.sum() + prog.pseudo_count * m.values.size)
        w = ((m.values.size - 1) / m.n) ** prog.p
        cons.append(cp.sum(cp.rel_entr(A @ p, q)) <= (gamma if gamma is not None else s) * w)
    cons += extra(p, X) if extra is not None else []
    prob = cp.Problem(cp.Minimize(s) if gamma is None else cp.Maximize(cp.sum(cp.entr(p))), cons)
    prob.solve(solver="CLARABEL")
    return prob, p.value, X


def test_discrete_junction_tree_form_matches_full_joint_by_brute_force():
    prog, nodes, eds = _discrete_program()
    ini = prog.ini()
    _, _, _ = _full_joint(prog, nodes, eds)
    prob_ini, _, _ = _full_joint(prog, nodes, eds)
    assert ini.s_tilde == pytest.approx(prob_ini.value, rel=1e-4)
    res = prog.mer(gamma_ratio=3)
    prob, pj, X = _full_joint(prog, nodes, eds, gamma=res.gamma)
    assert res.entropy == pytest.approx(prob.value, abs=1e-5)
    for scope, table in res.marginals.items():
        idx = [prog.domain.index(v) for v in scope]
        ref = np.zeros(table.size)
        np.add.at(ref, np.ravel_multi_index(tuple(X[:, idx].T), table.shape), pj)
        np.testing.assert_allclose(table.ravel(), ref, atol=2e-5)
    # the pairwise model read from the duals is the fitted joint
    logp = np.zeros(len(X))
    for scope, pot in res.log_potentials.items():
        logp += pot[tuple(X[:, [prog.domain.index(v) for v in scope]].T)]
    logp -= np.logaddexp.reduce(logp)
    np.testing.assert_allclose(np.exp(logp), pj, atol=1e-4)


def test_discrete_graph_and_errors():
    prog, nodes, eds = _discrete_program(seed=1, n=6, windows=((0, 1, 2, 3), (3, 4, 5, 0)))
    res = prog.mer(gamma_ratio=20)
    truth = [(f"v{i}", f"v{(i + 1) % 6}") for i in range(6)]
    assert precision_recall(res.edges(), truth)[1] == 1.0
    with pytest.raises(ValueError, match="pseudo_count"):
        DiscreteMER(prog.domain, nodes, eds, pseudo_count=0)


def test_sample_set_errors():
    rng = np.random.default_rng(0)
    a = SampleSet(("a", "b"), rng.normal(size=(50, 2)))
    with pytest.raises(ValueError, match="unknown variables"):
        pooled_moments([a], ("a",))
    with pytest.raises(ValueError, match="not observed"):
        pooled_moments([a], ("a", "b", "c"))
    with pytest.raises(ValueError, match="never observed jointly"):
        pooled_moments([a, SampleSet(("c",), rng.normal(size=(5, 1)))], ("a", "b", "c"), edges=[("a", "c")])
    with pytest.raises(ValueError, match="constant column"):
        pooled_moments([SampleSet(("a", "b"), np.c_[np.ones(10), rng.normal(size=10)])], ("a", "b"))
    with pytest.raises(ValueError, match="at least 2"):
        pooled_moments([SampleSet(("a", "b"), rng.normal(size=(1, 2)))], ("a", "b"))
    with pytest.raises(ValueError, match="shape"):
        SampleSet(("a", "b"), np.zeros((3, 3)))


def test_gaussian_program_is_unit_free():
    """The KL tolerances do not depend on units, and since the program is standardised neither does
    the solve: columns rescaled by 1e-3 .. 1e3 (mixed inside one set) give the same s~, the same
    graph, and the same model in the new units (covariance D S D); a truly constant column is
    still refused."""
    import pandas as pd

    from ppgm.adapters import mer
    from ppgm.models.random_models import gaussian_cycle, overlapping_sample_sets

    J, _ = gaussian_cycle(10, seed=3)
    names = [f"X{i}" for i in range(10)]
    frames = [pd.DataFrame(rows, columns=[names[i] for i in ix]) for ix, rows in overlapping_sample_sets(np.linalg.inv(J), seed=4)]
    factor = dict(zip(names, [300.0, 1000.0, 1e-3, 1.0, 1e3, 1e-3, 0.01, 5.0, 1e3, 1e-3]))
    scaled = [f * pd.Series({c: factor[c] for c in f.columns}) for f in frames]
    base, other = mer(frames), mer(scaled)
    assert other.status == base.status == "optimal"
    assert other.s_tilde == pytest.approx(base.s_tilde, rel=1e-3)
    assert sorted(other.graph.edges()) == sorted(base.graph.edges())
    d = np.array([factor[v] for v in base.variables])
    np.testing.assert_allclose(other.covariance, base.covariance * np.outer(d, d), rtol=2e-3)
    const = [f.assign(X0=7.0) if "X0" in f.columns else f for f in frames]  # X0 constant wherever it is seen
    with pytest.raises(ValueError, match="constant"):
        mer(const)


def test_a_gamma_sweep_compiles_once(monkeypatch):
    prog, *_ = _gaussian_program(n=8)
    built = []
    original = cp.Problem._construct_chain

    def counting(self, *args, **kwargs):
        built.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cp.Problem, "_construct_chain", counting)
    prog.ini()
    first = prog.mer(gamma_ratio=2)
    second = prog.mer(gamma_ratio=8)
    third = prog.mer(gamma_ratio=3)
    prog.ini()
    assert len(built) == 2  # INI once, MER once, whatever the gammas
    assert first.problem is second.problem is third.problem is prog.mer_problem
    assert first.entropy < third.entropy < second.entropy and prog.s_tilde() == pytest.approx(first.s_tilde, rel=1e-6)


def test_gaussian_resolve_with_a_user_constraint_matches_the_dense_program():
    prog, nodes, eds, _ = _gaussian_program(n=7, seed=2)
    free = prog.mer(gamma_ratio=3)
    a, b = prog.variables[0], prog.variables[1]
    cap = free.covariance[0, 1] - 0.1  # a cap that binds
    res = prog.resolve([prog.covariance(a, b) <= cap], gamma=free.gamma)
    prob, P, _ = _dense_gaussian(prog.variables, nodes, eds, prog.p, gamma=free.gamma, extra=lambda P: [P[0, 1] <= cap])
    assert prob.status == "optimal" and res.status == "optimal"
    np.testing.assert_allclose(res.covariance, P, atol=2e-4)
    assert res.covariance[0, 1] == pytest.approx(cap, abs=1e-5)
    assert res.entropy < free.entropy and res.problem is not prog.mer_problem
    assert any("constraint(s) of your own" in note for note in res.notes)
    again = prog.mer(gamma=free.gamma)  # the program itself is unchanged
    np.testing.assert_allclose(again.covariance, free.covariance, atol=1e-6)


def test_discrete_resolve_with_a_user_constraint_matches_the_full_joint():
    prog, nodes, eds = _discrete_program()
    free = prog.mer(gamma_ratio=3)
    scope = eds[0].variables
    target = free.marginals[scope].ravel()[0] + 0.05
    res = prog.resolve([prog.marginal(scope)[0] >= target], gamma=free.gamma)
    idx = [prog.domain.index(v) for v in scope]

    def extra(p, X):
        return [cp.sum(p[np.flatnonzero((X[:, idx] == 0).all(axis=1))]) >= target]

    prob, pj, X = _full_joint(prog, nodes, eds, gamma=free.gamma, extra=extra)
    assert res.entropy == pytest.approx(prob.value, abs=1e-5)
    assert res.marginals[scope].ravel()[0] == pytest.approx(target, abs=1e-6)


def test_resolve_errors_name_the_argument():
    prog, *_ = _gaussian_program(n=6)
    other, *_ = _gaussian_program(n=6, seed=3)
    a, b = prog.variables[:2]
    with pytest.raises(TypeError, match="constraints: expected a list"):
        prog.resolve(prog.covariance(a, b) <= 1, gamma=1.0)
    with pytest.raises(TypeError, match=r"constraints\[0\]"):
        prog.resolve([1.0], gamma=1.0)
    with pytest.raises(ValueError, match=r"constraints\[0\]: uses variables that are not this program's"):
        prog.resolve([other.covariance(a, b) <= 1], gamma=1.0)
    with pytest.raises(RuntimeError, match="infeasible"):
        prog.resolve([prog.covariance(a, b) >= 50], gamma=prog.s_tilde() * 1.5)
    with pytest.raises(KeyError, match="not a variable"):
        prog.covariance(a, "nope")


def test_a_loose_solve_is_reported_inaccurate_never_optimal():
    prog, *_ = _gaussian_program(n=8)
    tight = prog.mer(gamma_ratio=2)
    assert tight.status == "optimal" and not any("exceeds" in n for n in tight.notes)
    loose = prog.mer(gamma_ratio=2, solver="SCS", eps_abs=1e-2, eps_rel=1e-2)  # SCS itself says "optimal"
    assert loose.status == "optimal_inaccurate"
    assert any("exceeds" in n and "tolerance constraint" in n for n in loose.notes)
    over = [c for c in loose.constraints if c["divergence"] > c["tolerance"] * 1.001]
    assert over  # the note is about real violations, computed from the returned point


def test_large_cones_are_solved_first_order_and_agree_with_the_interior_point(monkeypatch):
    """A program whose PSD cones cost more than FIRST_ORDER_COST is solved by SCS first (the
    threshold lowered here so that a small program takes that path); its s~ (read from the returned
    point, so attained), entropy, covariance and graph agree with Clarabel's."""
    import ppgm.mer.gaussian as mg

    assert not _gaussian_program(n=12, seed=4, extra=2)[0].first_order
    monkeypatch.setattr(mg, "FIRST_ORDER_COST", 0.0)
    prog, nodes, eds, _ = _gaussian_program(n=12, seed=4, extra=2)
    assert prog.first_order
    first = prog.mer(gamma_ratio=3)
    assert first.solver == "SCS" and first.status == "optimal"
    s_first = first.s_tilde
    monkeypatch.setattr(mg, "FIRST_ORDER_COST", np.inf)
    other, *_ = _gaussian_program(n=12, seed=4, extra=2)
    ref = other.mer(gamma=first.gamma)
    assert ref.solver == "CLARABEL"
    s_ref = other.s_tilde()
    assert s_ref <= s_first * (1 + 1e-6) and s_first == pytest.approx(s_ref, rel=3e-3)
    assert first.entropy == pytest.approx(ref.entropy, abs=1e-4)
    np.testing.assert_allclose(first.covariance, ref.covariance, atol=1e-3)
    assert first.edges() == ref.edges()


def test_interaction_se_matches_simulation_and_the_delta_method_matrix():
    """interaction_se against the explicit delta-method covariance (kron of centring matrices) and
    against the spread of doubly centred log-tables of multinomial samples under independence."""
    from ppgm.mer.discrete import interaction_se

    rng = np.random.default_rng(0)
    p, q = np.array([0.2, 0.3, 0.5]), np.array([0.4, 0.6])
    n = 4000
    A = np.kron(np.eye(3) - 1 / 3, np.eye(2) - 1 / 2)
    explicit = np.sqrt(np.diag(A @ np.diag(1 / (n * np.outer(p, q)).ravel()) @ A.T)).reshape(3, 2)
    np.testing.assert_allclose(interaction_se(np.outer(p, q), n), explicit, rtol=1e-12)
    draws = rng.multinomial(n, np.outer(p, q).ravel(), size=4000).reshape(-1, 3, 2).astype(float)
    lt = np.log(draws)
    inter = lt - lt.mean(axis=2, keepdims=True) - lt.mean(axis=1, keepdims=True) + lt.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(inter.std(axis=0), explicit, rtol=0.06)
    for bad, kw in (([0.5, 0.5], {}), ([[1.0, -1.0], [1.0, 1.0]], {}), ([[0.0, 0.0], [1.0, 1.0]], {}), (np.ones((2, 2)), {"n": 0.0})):
        with pytest.raises(ValueError, match="table|n:"):
            interaction_se(np.asarray(bad), kw.get("n", 10.0))


def test_discrete_edge_rows_carry_interaction_and_z():
    prog, *_ = _discrete_program()
    res = prog.mer(gamma_ratio=3)
    from ppgm.mer.discrete import interaction_se

    for row, d, q in zip(res.constraints, prog.divergences, prog.targets):
        if d.kind != "edge":
            assert "z" not in row
            continue
        pot = res.log_potentials.get(d.scope)
        if pot is None:
            assert row["interaction"] == 0.0 and row["z"] == 0.0
        else:
            assert row["interaction"] == pytest.approx(np.abs(pot).max())
            assert row["z"] == pytest.approx(np.max(np.abs(pot) / interaction_se(q, d.n)))
    assert any(r.get("z", 0) > 0 for r in res.constraints)
