import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm

from ppgm import Factor
from ppgm.models.measurement import Measurement
from ppgm.privacy.mechanisms import (
    BudgetExceeded,
    GaussianMechanism,
    LaplaceMechanism,
    NotPrivateWarning,
    PrivacyAccountant,
    rho_from_epsilon_delta,
    zcdp_epsilon,
)
from ppgm.models.noise import discrete_laplace_variance, opendp, opendp_cost
from ppgm.learners.projection import project_rows, project_simplex


def _tables(n_tables=4, cells=5000, value=10):
    return [Factor((f"T{i}",), np.full(cells, value, dtype=np.int64)) for i in range(n_tables)]


@pytest.mark.parametrize("contribution", [1, 3])
def test_laplace_release_is_integer_with_the_right_scale(contribution):
    with pytest.warns(NotPrivateWarning):
        ys = LaplaceMechanism(0.5).release(_tables(), seed=0, contribution=contribution)
    b = contribution * 4 / 0.5  # L1 sensitivity = contribution x number of tables
    assert all(y.scale == b and y.noise == "laplace" and y.integer for y in ys)
    r = np.concatenate([y.values - 10.0 for y in ys])
    assert np.all(r == np.round(r))
    assert r.var() == pytest.approx(discrete_laplace_variance(b), rel=0.05)
    assert abs(np.mean(r)) < 0.05 * b
    assert ys[0].variance == pytest.approx(discrete_laplace_variance(b))


def test_gaussian_release_has_the_right_scale():
    mech = GaussianMechanism(rho=0.1)
    with pytest.warns(NotPrivateWarning):
        ys = mech.release(_tables(), seed=1)
    sigma = math.sqrt(4) / math.sqrt(2 * 0.1)
    r = np.concatenate([y.values - 10.0 for y in ys])
    assert ys[0].scale == pytest.approx(sigma) and ys[0].integer
    assert abs(r.std() - sigma) < 0.03 * sigma


def test_private_release_draws_from_opendp_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        ys = LaplaceMechanism(1.0).release(_tables(2, 1000))
    assert all(y.integer for y in ys)
    # two private releases of the same tables differ (no hidden seed)
    again = LaplaceMechanism(1.0).release(_tables(2, 1000))
    assert not np.array_equal(ys[0].values, again[0].values)


def test_weighted_tables_get_real_noise():
    t = [Factor(("A",), np.array([0.5, 1.25, 3.0]))]
    y = LaplaceMechanism(1.0).release(t)[0]
    assert not y.integer and y.values.dtype == float


def test_accounting_agrees_with_opendp():
    for T, w in [(1, 1), (7, 1), (5, 3)]:
        lap = LaplaceMechanism(0.8)
        assert opendp_cost("laplace", lap.scale(T, w), w * T, integer=True) == pytest.approx(0.8, rel=1e-9)
        gau = GaussianMechanism(rho=0.3)
        assert opendp_cost("gaussian", gau.scale(T, w), w * math.sqrt(T), integer=True) == pytest.approx(0.3, rel=1e-9)


def test_tight_zcdp_conversion_matches_opendp_and_beats_the_simple_bound():
    dp = opendp()
    for rho in (0.005, 0.05, 0.5, 3.0):
        sigma = 1 / math.sqrt(2 * rho)
        meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=sigma)
        profile = dp.c.make_zCDP_to_approxDP(meas).map(1.0)
        for delta in (1e-5, 1e-9):
            assert zcdp_epsilon(rho, delta) == pytest.approx(profile.epsilon(delta), rel=1e-6)
            assert zcdp_epsilon(rho, delta) < rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_epsilon_delta_gaussian_is_close_to_the_analytic_gaussian():
    """(epsilon, delta) -> rho by the tight conversion: the noise is within 9% of the analytic
    Gaussian mechanism's (Balle and Wang 2018, exact for the continuous Gaussian); the simple
    conversion was 27% above it at epsilon = 1."""

    def analytic_sigma(eps, delta):
        f = lambda s: norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * norm.cdf(-1 / (2 * s) - eps * s) - delta
        return brentq(f, 1e-3, 1e4)

    for eps, delta in [(0.1, 1e-6), (1.0, 1e-6), (1.0, 1e-9), (4.0, 1e-6)]:
        sigma = GaussianMechanism(epsilon=eps, delta=delta).scale(1)
        ratio = sigma / analytic_sigma(eps, delta)
        assert 1.0 < ratio < 1.09
        assert zcdp_epsilon(rho_from_epsilon_delta(eps, delta), delta) == pytest.approx(eps, rel=1e-8)


def test_accountant_composes_charges_atomically_and_refuses_overspending():
    acc = PrivacyAccountant(epsilon=1.0)
    LaplaceMechanism(0.6).release(_tables(1, 3), accountant=acc)
    with pytest.raises(BudgetExceeded, match="only 0.4"):
        LaplaceMechanism(0.5).release(_tables(1, 3), accountant=acc)
    assert len(acc.ledger) == 1  # the refused release was not recorded
    with pytest.raises(BudgetExceeded):  # tables fit, tables + N do not: nothing is charged
        acc.charge([{"what": "tables", "epsilon": 0.3}, {"what": "N", "epsilon": 0.2}])
    assert len(acc.ledger) == 1
    acc.charge([{"what": "tables", "epsilon": 0.3}, {"what": "N", "public": True}])
    assert [e["what"] for e in acc.ledger] == ["tables", "tables", "N"] and acc.ledger[-1]["cost"] == 0
    with pytest.raises(BudgetExceeded, match="pure epsilon-DP"):
        GaussianMechanism(rho=0.01).release(_tables(1, 3), accountant=acc)
    z = PrivacyAccountant(rho=0.5)
    LaplaceMechanism(0.6).release(_tables(1, 3), accountant=z)  # costs 0.6^2 / 2 = 0.18
    GaussianMechanism(rho=0.3).release(_tables(1, 3), accountant=z)
    assert z.spent == pytest.approx(0.48)
    assert z.epsilon_delta(1e-6) == pytest.approx(zcdp_epsilon(0.48, 1e-6))
    with pytest.raises(BudgetExceeded):
        GaussianMechanism(rho=0.05).release(_tables(1, 3), accountant=z)
    ed = PrivacyAccountant(epsilon=1.0, delta=1e-6)
    assert ed.kind == "rho" and ed.budget == pytest.approx(rho_from_epsilon_delta(1.0, 1e-6))
    with pytest.raises(ValueError, match="exactly one"):
        z.spend(epsilon=0.01, rho=0.01)
    with pytest.raises(ValueError, match="exactly one"):
        z.spend()


def test_bad_mechanism_arguments():
    for eps in (0, -1, float("nan"), "1"):
        with pytest.raises(ValueError, match="epsilon"):
            LaplaceMechanism(eps)
    with pytest.raises(ValueError, match="rho or"):
        GaussianMechanism()
    with pytest.raises(ValueError, match="delta"):
        GaussianMechanism(epsilon=1.0, delta=1.5)
    with pytest.raises(ValueError, match="non-negative"):
        LaplaceMechanism(1.0).release([Factor(("A",), np.array([1.0, -2.0]))])
    with pytest.raises(ValueError, match="nothing"):
        LaplaceMechanism(1.0).release([])
    with pytest.raises(ValueError, match="contribution"):
        LaplaceMechanism(1.0).release(_tables(1, 2), contribution=0)
    with pytest.raises(ValueError, match="delta"):
        PrivacyAccountant(delta=1e-6)


def test_measurement_noise_model():
    with pytest.raises(ValueError, match="NaN"):
        Measurement(("A",), np.array([np.nan, 1.0]), "laplace", 1.0)
    with pytest.raises(ValueError, match="scale"):
        Measurement(("A",), np.array([1.0, 2.0]), "gaussian", 0.0)
    with pytest.raises(ValueError, match="axes"):
        Measurement(("A", "B"), np.array([1.0, 2.0]), "gaussian", 1.0)
    with pytest.raises(ValueError, match="noise"):
        Measurement(("A",), np.array([1.0, 2.0]), "poisson", 1.0)
    with pytest.raises(ValueError, match="integer"):
        Measurement(("A",), np.array([1.5, 2.0]), "laplace", 1.0, integer=True)
    y = Measurement(("A",), np.array([3.0, 7.0]), "gaussian", 2.0)
    n = np.array([4.0, 5.0])
    expect = -0.5 * (1 + 4) / 4 - 2 * math.log(2 * math.sqrt(2 * math.pi))
    assert y.log_likelihood(n) == pytest.approx(expect)
    assert np.allclose(y.gradient(n), (y.values - n) / 4)
    # integer noise: the log-likelihood is the discrete law's, a constant per cell away from the density's
    yi = Measurement(("A",), np.array([3.0, 7.0]), "laplace", 2.0, integer=True)
    yc = Measurement(("A",), np.array([3.0, 7.0]), "laplace", 2.0)
    c = 2 * (math.log(math.tanh(0.25)) + math.log(4.0))
    assert yi.log_likelihood(n) - yc.log_likelihood(n) == pytest.approx(c)
    assert yi.log_likelihood(np.array([2.0, 7.0])) - yi.log_likelihood(n) == pytest.approx(
        yc.log_likelihood(np.array([2.0, 7.0])) - yc.log_likelihood(n))


def test_noise_factor_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    y = rng.normal(50, 10, 6)
    n = y + rng.normal(0, 5, 6)
    for noise, smoothing in (("gaussian", 0.0), ("laplace", 0.0), ("laplace", 0.5)):
        m = Measurement(("A",), y, noise, 3.0)
        g = m.gradient(n, smoothing=smoothing)
        if noise == "laplace" and smoothing == 0:
            np.testing.assert_allclose(g, np.sign(y - n) / 3.0)
            continue
        h = 1e-6
        if smoothing:
            f = lambda c: -np.sum(np.sqrt((y - c) ** 2 + (smoothing * 3.0) ** 2)) / 3.0  # noqa: E731
        else:
            f = m.log_likelihood
        fd = np.array([(f(n + h * e) - f(n - h * e)) / (2 * h) for e in np.eye(6)])
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 50), st.floats(1.0, 400), st.floats(-12, 12), st.floats(0.02, 4))
def test_laplace_posterior_mean_matches_numerical_integration(b, sd, offset, ratio):
    """Laplace noise of scale b on a Gaussian prior N(m, sd^2) (the noisy MaxEnt targets): E[n | y] against a
    quadrature of the unnormalised posterior, y = m + offset * b, from the prior's centre to deep in the
    exponential tail (where the posterior is the prior shifted by sd^2 / b)."""
    m, y = 1000.0, 1000.0 + offset * b
    sd = sd * ratio
    meas = Measurement(("A",), np.array([y]), "laplace", b)
    mean = meas.posterior_mean(np.array([m]), np.array([sd**2]))
    grid = np.linspace(min(m, y) - 12 * sd - 40 * b, max(m, y) + 12 * sd + 40 * b, 400_001)
    logp = -0.5 * ((grid - m) / sd) ** 2 - np.abs(y - grid) / b
    p = np.exp(logp - logp.max())
    assert mean[0] == pytest.approx(float(p @ grid / p.sum()), abs=1e-4 * sd + 1e-9 * m)
    # Gaussian noise: the conjugate update; exact counts: the count itself
    g = Measurement(("A",), np.array([y]), "gaussian", b)
    assert g.posterior_mean(np.array([m]), np.array([sd**2]))[0] == pytest.approx(m + sd**2 / (sd**2 + b**2) * (y - m))
    assert Measurement(("A",), np.array([max(y, 0.0)])).posterior_mean(np.array([m]), np.array([sd**2]))[0] == max(y, 0.0)


def _brute_projection(v):
    best, best_d = None, np.inf
    n = len(v)
    for mask in range(1, 2**n):
        S = [i for i in range(n) if mask >> i & 1]
        w = np.zeros(n)
        w[S] = v[S] - (v[S].sum() - 1) / len(S)
        if (w >= -1e-12).all():
            d = np.sum((w - v) ** 2)
            if d < best_d:
                best, best_d = w, d
    return best


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=7))
def test_simplex_projection_is_exact(values):
    v = np.array(values)
    np.testing.assert_allclose(project_simplex(v), _brute_projection(v), atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.lists(st.floats(-5, 5), min_size=1, max_size=30))
def test_row_projection_is_the_exact_projection_of_each_row(width, values):
    """The batched projection (all tables of one size at once) is every row's brute-force projection."""
    rows = np.resize(np.array(values), (max(1, len(values) // width), width))
    np.testing.assert_allclose(project_rows(rows), np.array([_brute_projection(r) for r in rows]), atol=1e-9)
