import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm import Factor
from ppgm.measurement import Measurement
from ppgm.mechanisms import (
    BudgetExceeded,
    GaussianMechanism,
    LaplaceMechanism,
    PrivacyAccountant,
    rho_from_epsilon_delta,
)
from ppgm.projection import project_simplex


def _tables(n_tables=4, cells=5000):
    return [Factor((f"T{i}",), np.full(cells, 10.0)) for i in range(n_tables)]


@pytest.mark.parametrize("contribution", [1.0, 0.25])
def test_laplace_noise_has_the_right_scale(contribution):
    ys = LaplaceMechanism(0.5).release(_tables(), seed=0, contribution=contribution)
    b = contribution * 4 / 0.5  # L1 sensitivity = contribution x number of tables
    assert all(y.scale == b and y.noise == "laplace" for y in ys)
    r = np.concatenate([y.values - 10.0 for y in ys])
    mad = np.mean(np.abs(r))  # E|Laplace(b)| = b; its std error here is b / sqrt(20000)
    assert abs(mad - b) < 0.03 * b
    assert abs(np.mean(r)) < 0.05 * b
    # the check would fail at half or twice the scale
    assert abs(mad - b / 2) > 0.3 * b and abs(mad - 2 * b) > 0.3 * b


def test_gaussian_noise_has_the_right_scale():
    mech = GaussianMechanism(rho=0.1)
    ys = mech.release(_tables(), seed=1)
    sigma = math.sqrt(4) / math.sqrt(2 * 0.1)
    r = np.concatenate([y.values - 10.0 for y in ys])
    assert ys[0].scale == pytest.approx(sigma)
    assert abs(r.std() - sigma) < 0.03 * sigma
    e = GaussianMechanism(epsilon=1.0, delta=1e-6)
    assert e.rho == pytest.approx(rho_from_epsilon_delta(1.0, 1e-6))


def test_accountant_composes_and_refuses_overspending():
    acc = PrivacyAccountant(epsilon=1.0)
    LaplaceMechanism(0.6).release(_tables(1, 3), seed=0, accountant=acc)
    with pytest.raises(BudgetExceeded, match="only 0.4"):
        LaplaceMechanism(0.5).release(_tables(1, 3), seed=0, accountant=acc)
    assert len(acc.ledger) == 1  # the refused release was not recorded
    with pytest.raises(BudgetExceeded, match="pure epsilon-DP"):
        GaussianMechanism(rho=0.01).release(_tables(1, 3), accountant=acc)
    z = PrivacyAccountant(rho=0.5)
    LaplaceMechanism(0.6).release(_tables(1, 3), accountant=z)  # costs 0.6^2 / 2 = 0.18
    GaussianMechanism(rho=0.3).release(_tables(1, 3), accountant=z)
    assert z.spent == pytest.approx(0.48)
    with pytest.raises(BudgetExceeded):
        GaussianMechanism(rho=0.05).release(_tables(1, 3), accountant=z)
    ed = PrivacyAccountant(epsilon=1.0, delta=1e-6)
    assert ed.kind == "rho" and ed.budget == pytest.approx(rho_from_epsilon_delta(1.0, 1e-6))


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
    with pytest.raises(ValueError, match="NaN"):
        Measurement(("A",), np.array([1.0, np.nan]), "laplace", 1.0)
    with pytest.raises(ValueError, match="scale"):
        Measurement(("A",), np.array([1.0, 2.0]), "gaussian", 0.0)
    with pytest.raises(ValueError, match="noise"):
        Measurement(("A",), np.array([1.0, 2.0]), "poisson", 1.0)


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
