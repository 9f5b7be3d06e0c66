"""MaxEnt from aggregates: gradients and Gibbs statistics against enumeration, the fixed point, Naive
Bayes, the xor counter-example, reproducibility and warm starts, noisy targets."""

import itertools

import numpy as np
import pytest

from ppgm import Domain
from ppgm.learners.aggregates import aggregate_records, hash_buckets, release_aggregates, table_scopes
from ppgm.learners.maxent import MaxEntLayout, MaxEntModel, _Gibbs, _sigmoid, fit_maxent
from ppgm.models.measurement import Measurement
from ppgm.learners.aggregates import xor_aggregates
from ppgm.privacy.mechanisms import LaplaceMechanism


def _tiny(seed=0, cards=(2, 3, 2), n=3000):
    rng = np.random.default_rng(seed)
    dom = Domain(tuple("abc"[: len(cards)]), cards)
    x = np.stack([rng.integers(0, k, n) for k in cards], axis=1)
    x[:, 1] = np.where(rng.random(n) < 0.5, x[:, 0] % cards[1], x[:, 1])  # some dependence
    y = (rng.random(n) < _sigmoid(-1 + 1.5 * x[:, 0] - 0.7 * (x[:, 1] == 2) + x[:, 0] * x[:, 2])).astype(int)
    tables = aggregate_records(x, y, dom, table_scopes(dom.variables, "all"))
    return dom, x, y, tables


def _exact_expectations(model):
    """E[D], E[C] per slot (per record) by enumerating every (x, y)."""
    J = model.joint_log_table()
    P = np.exp(J - np.logaddexp.reduce(J.ravel()))
    dom = model.layout.domain
    X = np.array(list(itertools.product(*[range(k) for k in dom.cards])))
    px = P.reshape(-1, 2)
    slots = model.layout.slots(X)
    d = np.zeros(model.layout.n_slots)
    c = np.zeros(model.layout.n_slots)
    for t in range(slots.shape[1]):
        np.add.at(d, slots[:, t], px.sum(axis=1))
        np.add.at(c, slots[:, t], px[:, 1])
    return d, c, float(np.logaddexp.reduce(J.ravel()))


def _loglik(model, tables, n):
    """Exact log-likelihood of the aggregates (= of any data set with those aggregates)."""
    lay = model.layout
    d, c = lay.stack(tables, "values"), lay.stack(tables, "label_sums")
    C = tables[0].label_sums.sum()
    _, _, logz = _exact_expectations(model)
    return float(d @ model.mu + c @ model.theta + C * model.theta0 - n * logz)


def test_gradient_is_data_minus_expectation_by_finite_differences():
    dom, x, y, tables = _tiny()
    lay = MaxEntLayout.from_tables(dom, tables)
    rng = np.random.default_rng(1)
    model = MaxEntModel(lay, rng.normal(0, 0.3, lay.n_slots), rng.normal(0, 0.3, lay.n_slots), 0.2)
    n = len(x)
    Ed, Ec, _ = _exact_expectations(model)
    grad_mu = lay.stack(tables, "values") - n * Ed
    grad_th = lay.stack(tables, "label_sums") - n * Ec
    h = 1e-5
    for k in rng.choice(lay.n_slots, 6, replace=False):
        for vec, grad in ((model.mu, grad_mu), (model.theta, grad_th)):
            vec[k] += h
            up = _loglik(model, tables, n)
            vec[k] -= 2 * h
            down = _loglik(model, tables, n)
            vec[k] += h
            assert (up - down) / (2 * h) == pytest.approx(grad[k], rel=1e-4, abs=1e-3)
    # and the exact conditional is the logistic of the model
    X = np.array(list(itertools.product(*[range(k) for k in dom.cards])))
    J = model.joint_log_table().reshape(-1, 2)
    np.testing.assert_allclose(model.predict_proba(X), np.exp(J[:, 1] - np.logaddexp(J[:, 0], J[:, 1])), atol=1e-12)


def test_gibbs_chains_estimate_the_exact_expectations():
    dom, x, y, tables = _tiny(cards=(3, 2, 3))
    lay = MaxEntLayout.from_tables(dom, tables)
    rng = np.random.default_rng(2)
    model = MaxEntModel(lay, rng.normal(0, 0.6, lay.n_slots), rng.normal(0, 0.6, lay.n_slots), -0.3)
    Ed, Ec, _ = _exact_expectations(model)
    gibbs = _Gibbs(lay)
    chains = np.stack([rng.integers(0, k, 100_000) for k in dom.cards], axis=1)
    Wmu, Wth = gibbs.interaction(model.mu), gibbs.interaction(model.theta)
    for _ in range(10):
        s = lay.slots(chains)
        yy = rng.random(len(chains)) < _sigmoid(model.theta0 + model.theta[s].sum(axis=1))
        gibbs.sweep(chains, yy, Wmu, Wth, rng)
    s = lay.slots(chains)
    sig = _sigmoid(model.theta0 + model.theta[s].sum(axis=1))
    d_hat = np.bincount(s.ravel(), minlength=lay.n_slots) / len(chains)
    c_hat = np.bincount(s.ravel(), weights=np.repeat(sig, s.shape[1]), minlength=lay.n_slots) / len(chains)
    assert np.abs(d_hat - Ed).max() < 0.01
    assert np.abs(c_hat - Ec).max() < 0.01


def test_fixed_point_reproduces_the_aggregates():
    dom, x, y, tables = _tiny(n=20_000)
    fit = fit_maxent(tables, dom, n_chains=20_000, max_iter=300, l2_mu=0.0, l2_theta=0.0, seed=0, progress=False, method="pcd")
    Ed, Ec, _ = _exact_expectations(fit.model)
    lay = fit.model.layout
    n = len(x)
    assert np.abs(n * Ed - lay.stack(tables, "values")).max() / n < 0.01
    assert np.abs(n * Ec - lay.stack(tables, "label_sums")).max() / n < 0.01
    assert fit.history["d_error"][-1] < 0.05 and len(fit.history["step"]) == 300


def test_single_tables_give_naive_bayes():
    rng = np.random.default_rng(3)
    dom = Domain(("a", "b"), (3, 2))
    x = np.stack([rng.integers(0, 3, 8000), rng.integers(0, 2, 8000)], axis=1)
    y = (rng.random(8000) < 0.2 + 0.2 * x[:, 0]).astype(int)
    tables = aggregate_records(x, y, dom, [("a",), ("b",)])
    X = np.array(list(itertools.product(range(3), range(2))))
    # Naive Bayes computed here from the raw rows (pseudo-count 0.5, as the closed form)
    prior = np.log((y.sum() + 0.5) / (len(y) - y.sum() + 0.5))
    lo = np.full(len(X), prior)
    for j, k in enumerate(dom.cards):
        for cls, sign in ((1, 1), (0, -1)):
            counts = np.bincount(x[y == cls, j], minlength=k) + 0.5
            lo += sign * np.log(counts / counts.sum())[X[:, j]]
    nb = MaxEntModel.naive_bayes(MaxEntLayout.from_tables(dom, tables), tables)
    np.testing.assert_allclose(nb.predict_proba(X), _sigmoid(lo), atol=1e-12)
    fit = fit_maxent(tables, dom, n_chains=20_000, max_iter=150, l2_theta=0.0, l2_mu=0.0, seed=0, progress=False)
    np.testing.assert_allclose(fit.model.predict_proba(X), _sigmoid(lo), atol=0.01)


def test_xor_counter_example_gives_the_predicted_0_9_and_0_1():
    """Sec. 4.2: X1, X2 fair coins, X3 = X1 xor X2, P(y = 1 | x) = 0.25 + 0.5 x3. Pairwise tables
    cannot see the xor; the maximum-entropy model predicts 0.9 / 0.1 (exact aggregates, N = 1e6)."""
    dom, tables = xor_aggregates(1e6)
    X = np.array([[a, b, a ^ b] for a in (0, 1) for b in (0, 1)])
    fit = fit_maxent(tables, dom, n_chains=20_000, max_iter=300, l2_mu=0.0, l2_theta=0.0, seed=0, progress=False)
    pred = fit.model.predict_proba(X)
    np.testing.assert_allclose(pred, np.where(X[:, 2] == 1, 0.9, 0.1), atol=0.02)


def test_same_seed_same_result_and_warm_start_continues_exactly():
    dom, x, y, tables = _tiny()
    kw = dict(n_chains=2000, seed=5, progress=False, average=0.0, l2_theta=30.0, method="pcd")  # a fixed penalty: PCD alone
    a = fit_maxent(tables, dom, max_iter=40, **kw)
    b = fit_maxent(tables, dom, max_iter=40, **kw)
    np.testing.assert_array_equal(a.model.theta, b.model.theta)
    first = fit_maxent(tables, dom, max_iter=20, **kw)
    resumed = fit_maxent(tables, dom, max_iter=20, model=first.model, state=first.state, **kw)
    np.testing.assert_allclose(resumed.model.theta, a.model.theta, atol=1e-12)
    assert resumed.state.step == 40


def test_noisy_warm_start_carries_mu_momentum_exactly():
    """On noisy tables mu's default step carries momentum; a resumed run continues it (the state keeps mu's
    last move), and the momentum is off in the averaging window."""
    dom, x, y, tables = _tiny(n=2000)
    noisy = release_aggregates(tables, LaplaceMechanism(1.0), seed=0)
    kw = dict(n_chains=1000, seed=2, progress=False, average=0.0, l2_theta=30.0)
    whole = fit_maxent(noisy, dom, max_iter=30, **kw)
    first = fit_maxent(noisy, dom, max_iter=15, **kw)
    assert first.state.mu_velocity is not None and np.abs(first.state.mu_velocity).max() > 0
    resumed = fit_maxent(noisy, dom, max_iter=15, model=first.model, state=first.state, **kw)
    np.testing.assert_allclose(resumed.model.mu, whole.model.mu, atol=1e-12)
    fresh = fit_maxent(noisy, dom, max_iter=15, model=first.model, state=first.state.copy(), **kw)
    first.state.mu_velocity = None  # without the carried move the continuation differs
    other = fit_maxent(noisy, dom, max_iter=15, model=first.model, state=first.state, **kw)
    assert np.abs(other.model.mu - fresh.model.mu).max() > 1e-6
    averaged = fit_maxent(noisy, dom, max_iter=20, **{**kw, "average": 0.5})
    assert averaged.state.mu_velocity is None  # plain steps in the window


def test_noisy_default_budget_is_half_the_chains_twice_the_steps():
    """Exact tables: 8,000 chains x 300 steps. Noisy ones: the same budget as 4,000 x 600, the noisy cells' prior
    keeping 8,000 chains' Monte Carlo variance (the estimator the penalty rule and the tuning used); chains given
    explicitly set the prior too, which changes the fit."""
    from ppgm.learners.maxent import EXACT_CHAINS, EXACT_STEPS, NOISY_CHAINS, NOISY_STEPS

    assert (EXACT_CHAINS, EXACT_STEPS, NOISY_CHAINS, NOISY_STEPS) == (8000, 300, 4000, 600)
    dom, x, y, tables = _tiny(n=2000)
    exact = fit_maxent(tables, dom, seed=1, progress=False, method="pcd")
    assert len(exact.state.chains) == 8000 and exact.state.step == 300
    noisy = release_aggregates(tables, LaplaceMechanism(1.0), seed=0)
    kw = dict(seed=1, progress=False, l2_theta=30.0)
    default = fit_maxent(noisy, dom, **kw)
    assert len(default.state.chains) == 4000 and default.state.step == 600
    spelled = fit_maxent(noisy, dom, n_chains=4000, max_iter=600, prior_chains=8000, **kw)
    np.testing.assert_array_equal(default.model.theta, spelled.model.theta)
    own = fit_maxent(noisy, dom, n_chains=4000, max_iter=600, **kw)  # prior at its own 4,000 chains
    assert np.abs(own.model.theta - default.model.theta).max() > 1e-6
    # a resumed default run keeps the default's prior, so two halves are the whole
    half = fit_maxent(noisy, dom, max_iter=300, average=0.0, **kw)
    rest = fit_maxent(noisy, dom, max_iter=300, average=0.0, model=half.model, state=half.state, **kw)
    whole = fit_maxent(noisy, dom, max_iter=600, average=0.0, **kw)
    np.testing.assert_allclose(rest.model.theta, whole.model.theta, atol=1e-12)
    # the release path with chains given, fresh or warm-started: pilot, refits and final fit all take their prior
    # from those chains
    kw = dict(seed=1, progress=False, n_chains=1000, max_iter=60)
    start = fit_maxent(noisy, dom, l2_theta=30.0, seed=1, progress=False, n_chains=1000, max_iter=10)
    for warm in ({}, dict(model=start.model, state=start.state)):  # fit_maxent copies the state it is given
        own = fit_maxent(noisy, dom, **kw, **warm)
        assert own.selection is not None
        spelled = fit_maxent(noisy, dom, prior_chains=1000, **kw, **warm)
        np.testing.assert_array_equal(own.model.theta, spelled.model.theta)


def test_mu_momentum_only_on_noisy_cells_and_travels_sooner(monkeypatch):
    """Exact tables are untouched by the momentum (w = 1 on every cell); on noisy tables, at a fixed penalty,
    200 steps with it end nearer a long plain run's model than 200 plain steps do (measured: 0.027 against
    0.032 in total variation; at 30 / 60 / 100 steps 0.061 / 0.056 / 0.046 against 0.062 / 0.061 / 0.051)."""
    import ppgm.learners.maxent as mx

    dom, x, y, tables = _tiny(n=2000)
    kw = dict(n_chains=2000, seed=4, progress=False, l2_theta=30.0)
    with_m = fit_maxent(tables, dom, max_iter=60, **kw)
    noisy = release_aggregates(tables, LaplaceMechanism(0.5), seed=1)
    fast = fit_maxent(noisy, dom, max_iter=200, **kw)
    monkeypatch.setattr(mx, "MU_MOMENTUM", 0.0)
    without = fit_maxent(tables, dom, max_iter=60, **kw)
    np.testing.assert_array_equal(with_m.model.mu, without.model.mu)
    np.testing.assert_array_equal(with_m.model.theta, without.model.theta)
    slow = fit_maxent(noisy, dom, max_iter=200, **kw)
    far = fit_maxent(noisy, dom, max_iter=3000, **kw)
    # compare the joint distributions (mu itself has a gauge along the tables' shared totals)
    def joint(a):
        j = a.model.joint_log_table()
        return np.exp(j - np.logaddexp.reduce(j.ravel()))

    def dist(a):
        return float(np.abs(joint(a) - joint(far)).sum())
    assert dist(fast) < 0.9 * dist(slow)


def test_noisy_targets_shrink_towards_the_model():
    dom, x, y, tables = _tiny(n=2000)
    noisy = release_aggregates(tables, LaplaceMechanism(2.0), seed=0)
    assert noisy[0].scale == pytest.approx(2 * len(tables) / 2.0)
    fit = fit_maxent(noisy, dom, n_chains=4000, max_iter=100, seed=0, progress=False)
    assert np.isfinite(fit.model.theta).all()
    # the learned conditional stays a probability model and its base rate is near the data's
    assert abs(fit.model.predict_proba(x).mean() - y.mean()) < 0.1


def test_bad_input():
    dom = Domain(("a",), (2,))
    with pytest.raises(ValueError, match="negative"):
        Measurement(("a",), [-1.0, 3.0], label_sums=[0.0, 1.0])
    with pytest.raises(ValueError, match="c <= d"):
        Measurement(("a",), [1.0, 3.0], label_sums=[2.0, 1.0])
    with pytest.raises(ValueError, match="label_sums"):
        Measurement(("a",), [1.0, 3.0], label_sums=[2.0])
    with pytest.raises(ValueError, match="label sums"):
        fit_maxent([Measurement(("a",), [1.0, 3.0])], dom)
    with pytest.raises(ValueError, match="binary"):
        aggregate_records([[0], [1]], [0, 2], dom, [("a",)])
    with pytest.raises(ValueError, match="pairs"):
        table_scopes(["a", "b"], pairs=[("a", "z")])
    with pytest.raises(ValueError, match="average"):
        fit_maxent(aggregate_records([[0], [1]], [0, 1], dom, [("a",)]), dom, average=1.0)


def test_hashing_is_reproducible_and_keeps_totals():
    rng = np.random.default_rng(0)
    dom = Domain(("a", "b"), (20, 30))
    x = np.stack([rng.integers(0, 20, 5000), rng.integers(0, 30, 5000)], axis=1)
    y = rng.integers(0, 2, 5000)
    t1 = aggregate_records(x, y, dom, [("a",), ("b",), ("a", "b")], hash_size=64, hash_seed=3)
    t2 = aggregate_records(x, y, dom, [("a",), ("b",), ("a", "b")], hash_size=64, hash_seed=3)
    assert t1[2].values.shape == (64,) and t1[2].values.sum() == 5000 and t1[2].label_sums.sum() == y.sum()
    np.testing.assert_array_equal(t1[2].buckets, t2[2].buckets)
    np.testing.assert_array_equal(hash_buckets(600, 64, 3), hash_buckets(600, 64, 3))
    fit = fit_maxent(t1, dom, n_chains=1000, max_iter=10, seed=0, progress=False)
    assert fit.model.layout.n_slots == 20 + 30 + 64


def _xor_rows(n=20_000, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, size=(n, 3))
    y = (rng.random(n) < np.where(x[:, 0] ^ x[:, 1], 0.9, 0.1)).astype(int)
    dom = Domain(("a", "b", "c"), (2, 2, 2))
    return dom, aggregate_records(x, y, dom, [("a",), ("b",), ("c",), ("a", "b"), ("b", "c")])


def test_remaining_gain_matches_a_dense_newton_decrement():
    """The convergence test's conjugate-gradient Newton steps against dense solves on the chains."""
    from ppgm.learners.maxent import _remaining_gain

    dom, tables = _xor_rows()
    fit = fit_maxent(tables, dom, n_chains=500, max_iter=15, seed=0, progress=False)
    rng = np.random.default_rng(0)
    model, chains = fit.model, fit.state.chains
    base = rng.normal(size=model.theta.size) * 50
    grads = [MaxEntModel(model.layout, np.zeros_like(model.mu), base + rng.normal(size=base.size) * 10, 20.0 + k)
             for k in range(2)]
    slots = model.layout.slots_by_table(chains)
    X = np.zeros((len(chains), model.theta.size + 1))
    for t in range(slots.shape[0]):
        X[np.arange(len(chains)), slots[t]] = 1.0
    X[:, -1] = 1.0
    p = model.predict_proba(chains)
    scale, l2 = 3.0, 2.0
    w = p * (1 - p) * scale
    curv = X[:, :-1].T @ w
    ridge = np.append(np.full(model.theta.size, 2 * l2 + 1e-3 * curv[curv > 0].mean()), 1e-3 * w.sum())
    H = X.T @ (X * w[:, None]) + np.diag(ridge)
    f = [X @ np.linalg.solve(H, np.append(np.where(curv > 0, g.theta, 0.0), g.theta0)) for g in grads]
    expected = 0.5 * np.mean(p * (1 - p) * f[0] * f[1])
    assert expected > 0
    assert _remaining_gain(model, grads, chains, scale, l2) == pytest.approx(expected, rel=1e-6)
    # noisy tables: each theta cell's curvature scaled by its share w of the observation, so the gradient
    # enters as g / sqrt(w) (the Hessian D^1/2 H D^1/2 is solved on the rescaled gradient); w = 1 is the above
    share = rng.uniform(0.05, 1.0, size=model.theta.size)
    f = [X @ np.linalg.solve(H, np.append(np.where(curv > 0, g.theta / np.sqrt(share), 0.0), g.theta0)) for g in grads]
    noisy = 0.5 * np.mean(p * (1 - p) * f[0] * f[1])
    assert noisy > expected  # less curvature: more left to gain
    assert _remaining_gain(model, grads, chains, scale, l2, share=share) == pytest.approx(noisy, rel=1e-6)


def test_pcd_reports_an_unconverged_run():
    """A run stopped far from the fixed point (small steps, few of them) warns and says so; the same
    problem run long enough passes; no averaging window means no test."""
    from ppgm import ConvergenceWarning
    from ppgm.learners.maxent import GAIN_TOL

    dom, tables = _xor_rows()
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        short = fit_maxent(tables, dom, n_chains=2000, max_iter=100, step_mu=0.02, step_theta=0.02, seed=0, progress=False, method="pcd")
    assert short.converged is False and short.remaining_gain > GAIN_TOL
    long = fit_maxent(tables, dom, n_chains=2000, max_iter=300, seed=0, progress=False, method="pcd")
    assert long.converged is True and long.remaining_gain < GAIN_TOL / 10
    # the unconverged one is also measurably off: its predictions differ from the converged fit's
    X = np.array([[0, 0, 0], [1, 0, 0]])
    assert np.abs(short.model.predict_proba(X) - long.model.predict_proba(X)).max() > 0.05
    assert fit_maxent(tables, dom, n_chains=2000, max_iter=50, average=0.0, seed=0, progress=False, method="pcd").converged is None


def test_pcd_stops_at_the_first_test_below_tol_and_each_test_pools_exactly_its_window():
    """With a ``tol`` the convergence test runs every ``CHECK_STEPS`` steps on the last ``average`` of the steps so
    far. A run stopped at its first test is the ``CHECK_STEPS``-step run; one that goes on is, test by test, the run
    of that length (its windows pooled from segments); without a ``tol`` every step runs."""
    from ppgm.learners.maxent import CHECK_STEPS

    dom, x, y, tables = _tiny()
    kw = dict(n_chains=1000, seed=3, progress=False, l2_theta=10.0, method="pcd", step_mu=0.01, step_theta=0.01)  # slow
    one = fit_maxent(tables, dom, max_iter=CHECK_STEPS, tol=None, **kw)
    two = fit_maxent(tables, dom, max_iter=2 * CHECK_STEPS, tol=None, **kw)
    assert one.remaining_gain > 1e-6 and two.remaining_gain < one.remaining_gain  # still moving: the test reads it
    stopped = fit_maxent(tables, dom, max_iter=4 * CHECK_STEPS, tol=1.0, **kw)  # any reading passes
    assert stopped.state.step == CHECK_STEPS
    np.testing.assert_allclose(stopped.model.theta, one.model.theta, rtol=1e-12, atol=1e-12)
    on = fit_maxent(tables, dom, max_iter=2 * CHECK_STEPS, tol=1e-9, **kw)
    assert on.state.step == 2 * CHECK_STEPS
    np.testing.assert_allclose([g for _, g in on.history["remaining_gain"]], [one.remaining_gain, two.remaining_gain], rtol=1e-9)
    np.testing.assert_allclose(on.model.theta, two.model.theta, rtol=1e-12, atol=1e-12)
    assert fit_maxent(tables, dom, max_iter=2 * CHECK_STEPS, tol=None, **kw).state.step == 2 * CHECK_STEPS
    with pytest.raises(ValueError, match="tol"):
        fit_maxent(tables, dom, max_iter=10, tol=-1.0, **kw)


def test_check_points_after_the_rules_pilot():
    """The rule's final fit continues the pilot's 100 steps: its tests fall on the fit's 300th, 600th, ... step,
    each window the last 30% of the fit's steps so far (at most 90% of the final run's)."""
    from ppgm.learners.maxent import _check_points

    assert _check_points(1100, 2.5e-4, 0.3, 100) == [(110, 155, 200), (320, 410, 500), (530, 665, 800), (740, 920, 1100)]
    assert _check_points(200, None, 0.3, 100) == [(110, 155, 200)]  # no tol: one test, as a fixed budget
    assert _check_points(300, 2.5e-4, 0.3, 0) == [(210, 255, 300)]
    assert _check_points(300, 2.5e-4, 0.0, 0) == [(300, 300, 300)]  # no window, no test


def test_default_pcd_on_a_slow_fit_goes_on_until_settled_and_lands_near_the_exact_fit():
    """A fit whose 300 steps leave it short (small steps) continues at the default ``tol`` until the test reads
    below ``SETTLE_TOL``, and lands closer to the exact fit of the same penalties (Newton on the enumerated
    likelihood) than the 300-step run."""
    from ppgm.learners.maxent import SETTLE_TOL

    dom, x, y, tables = _tiny()
    X = np.array(list(itertools.product(*[range(k) for k in dom.cards])))
    exact = fit_maxent(tables, dom, l2_theta=10.0, method="exact", seed=0, progress=False).model.predict_proba(X)
    kw = dict(n_chains=2000, seed=4, progress=False, l2_theta=10.0, method="pcd", step_mu=0.005, step_theta=0.005)
    short = fit_maxent(tables, dom, max_iter=300, **kw)
    assert short.remaining_gain > SETTLE_TOL
    settled = fit_maxent(tables, dom, **kw)
    assert settled.state.step > 300 and settled.remaining_gain <= SETTLE_TOL
    err_short = np.abs(short.model.predict_proba(X) - exact).max()
    err_settled = np.abs(settled.model.predict_proba(X) - exact).max()
    assert err_settled < 0.7 * err_short  # measured: 0.042 against 0.072 (the default steps: 0.041)


def test_exact_tables_of_a_network_with_near_deterministic_cells_converge_at_the_defaults():
    """INSURANCE's binary VehicleYear (positive: its first, majority state) and its eight nearest nodes:
    many pair cells have a label rate of 0 or 1, held only by the penalty. At its defaults PCD converges,
    and its P(y | x) learned from the tables alone is within 0.01 test NLLH of the quadratic logistic
    trained on the rows (with the penalty's curvature shared among the tables on exact tables, as on noisy
    ones, PCD ran off here: test NLLH -0.98, unconverged)."""
    import warnings

    import networkx as nx
    from sklearn.linear_model import LogisticRegression

    from ppgm import ConvergenceWarning, nllh, sample
    from ppgm.adapters import bayes_from_pgmpy, load_bif_example
    from ppgm.adapters.aggregated import quadratic_one_hot

    truth = bayes_from_pgmpy(load_bif_example("insurance"))
    label = "VehicleYear"
    graph = nx.Graph([(p, v) for v in truth.domain.variables for p in truth.parents[v]])
    dist = nx.single_source_shortest_path_length(graph, label)
    features = sorted((v for v in dist if v != label), key=lambda v: (dist[v], v))[:8]
    rows = sample(truth, 70_000, seed=0)
    x, y = rows[:, [truth.domain.index(f) for f in features]], 1 - rows[:, truth.domain.index(label)]
    dom = Domain(tuple(features), tuple(truth.domain.card(f) for f in features))
    train, test = slice(0, 50_000), slice(50_000, None)
    tables = aggregate_records(x[train], y[train], dom, table_scopes(dom.variables, "all"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = fit_maxent(tables, dom, seed=0, progress=False, method="pcd")  # 11,520 configurations: PCD on request
    assert fit.converged is True
    maxent = nllh(y[test], fit.model.predict_proba(x[test]))
    design = lambda part: quadratic_one_hot(x[part], dom.cards)  # noqa: E731
    logistic = LogisticRegression(C=1 / 60, max_iter=500).fit(design(train), y[train])  # the same penalty, 30 ||w||^2
    skyline = nllh(y[test], logistic.predict_proba(design(test))[:, 1])
    assert skyline > 0.5  # a label the features predict well
    assert maxent >= skyline - 0.01
