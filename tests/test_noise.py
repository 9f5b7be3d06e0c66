"""The integer noise samplers against the exact probability mass functions (closed forms, summed
by brute force), on both paths: OpenDP's private samplers and the seeded numpy samplers."""

import math

import numpy as np
import pytest
from scipy.stats import chi2

from ppgm.models.noise import (
    add_noise,
    discrete_gaussian_logpmf,
    discrete_gaussian_variance,
    discrete_laplace_logpmf,
    discrete_laplace_variance,
    noise_logpmf,
)

N_DRAWS = 100_000


def _chi_square_p(draws: np.ndarray, logpmf) -> float:
    """p-value of Pearson's chi-square test of integer draws against a pmf, with the tails pooled
    into cells of expected count >= 20."""
    lo, hi = int(draws.min()) - 1, int(draws.max()) + 1
    ks = np.arange(lo, hi + 1)
    p = np.exp(logpmf(ks))
    p_below, p_above = max(0.0, 1 - p.sum()) / 2, max(0.0, 1 - p.sum()) / 2  # mass outside [lo, hi]
    counts = np.bincount(draws - lo, minlength=ks.size)
    expected = p * draws.size
    keep = expected >= 20
    first, last = np.flatnonzero(keep)[[0, -1]]
    obs = np.r_[counts[:first].sum(), counts[first : last + 1], counts[last + 1 :].sum()]
    exp = np.r_[expected[:first].sum() + p_below * draws.size, expected[first : last + 1],
                expected[last + 1 :].sum() + p_above * draws.size]
    mask = exp > 0
    stat = float(((obs[mask] - exp[mask]) ** 2 / exp[mask]).sum())
    return float(chi2.sf(stat, mask.sum() - 1))


def test_pmfs_are_normalised_and_their_variances_match_brute_force():
    ks = np.arange(-2000, 2001)
    for b in (0.3, 1.0, 7.5, 40.0):
        p = np.exp(discrete_laplace_logpmf(ks, b))
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert discrete_laplace_variance(b) == pytest.approx(float(p @ ks**2), rel=1e-10)
        # the closed form of the pmf: (1 - q) / (1 + q) q^|k|
        q = math.exp(-1 / b)
        assert p[2000 + 3] == pytest.approx((1 - q) / (1 + q) * q**3, rel=1e-12)
    for s in (0.2, 1.0, 6.0, 50.0):
        p = np.exp(discrete_gaussian_logpmf(ks, s))
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert discrete_gaussian_variance(s) == pytest.approx(float(p @ ks**2), rel=1e-10)
    assert discrete_gaussian_variance(0.5) < 0.25  # below sigma^2 for small sigma
    # continuous densities for real-valued (weighted) releases
    assert float(noise_logpmf("laplace", 0.0, 2.0, integer=False)) == pytest.approx(-math.log(4.0))
    assert float(noise_logpmf("gaussian", 0.0, 1.0, integer=False)) == pytest.approx(-0.5 * math.log(2 * math.pi))


@pytest.mark.parametrize("kind, scale", [("laplace", 0.7), ("laplace", 6.0), ("gaussian", 0.8), ("gaussian", 5.0)])
@pytest.mark.parametrize("path", ["opendp", "seeded"])
def test_samplers_follow_the_exact_pmf(kind, scale, path):
    rng = None if path == "opendp" else np.random.default_rng([len(kind), int(scale * 10)])
    base = np.zeros(N_DRAWS, dtype=np.int64)
    draws = add_noise(base, kind, scale, rng)
    assert draws.dtype == np.int64 and draws.shape == base.shape
    logpmf = (lambda k: discrete_laplace_logpmf(k, scale)) if kind == "laplace" else (lambda k: discrete_gaussian_logpmf(k, scale))
    var = discrete_laplace_variance(scale) if kind == "laplace" else discrete_gaussian_variance(scale)
    assert _chi_square_p(draws, logpmf) > 1e-4
    assert abs(draws.mean()) < 5 * math.sqrt(var / N_DRAWS)
    assert draws.var() == pytest.approx(var, rel=0.05)
    # the same test rejects a law 15% wider: it has the power to fail
    wrong = (lambda k: discrete_laplace_logpmf(k, 1.15 * scale)) if kind == "laplace" else (lambda k: discrete_gaussian_logpmf(k, 1.15 * scale))
    assert _chi_square_p(draws, wrong) < 1e-6


def test_noise_is_added_to_the_values_and_keeps_integers():
    x = np.array([[3, 0], [10, 7]])
    y = add_noise(x, "laplace", 1.0, np.random.default_rng(0))
    assert y.dtype == np.int64 and y.shape == x.shape
    y0 = add_noise(x, "laplace", 1.0, np.random.default_rng(0))
    np.testing.assert_array_equal(y, y0)  # same seed, same noise
    z = add_noise(np.full(50_000, 7), "gaussian", 2.0)  # private path
    assert z.dtype == np.int64 and abs(z.mean() - 7) < 0.05


@pytest.mark.parametrize("path", ["opendp", "seeded"])
def test_real_valued_counts_get_real_noise_of_the_right_scale(path):
    rng = None if path == "opendp" else np.random.default_rng(3)
    x = np.full(40_000, 2.5)
    y = add_noise(x, "laplace", 3.0, rng)
    assert y.dtype == float
    r = y - 2.5
    assert np.mean(np.abs(r)) == pytest.approx(3.0, rel=0.03)  # E|Laplace(b)| = b
    g = add_noise(x, "gaussian", 3.0, rng) - 2.5
    assert g.std() == pytest.approx(3.0, rel=0.03)


def test_bad_noise_arguments():
    with pytest.raises(ValueError, match="scale"):
        add_noise(np.array([1]), "laplace", 0.0)
    with pytest.raises(ValueError, match="scale"):
        add_noise(np.array([1]), "laplace", float("inf"))
    with pytest.raises(ValueError, match="kind"):
        add_noise(np.array([1]), "cauchy", 1.0)
    with pytest.raises(ValueError, match="finite"):
        add_noise(np.array([np.nan]), "laplace", 1.0)
    with pytest.raises(TypeError, match="Generator"):
        add_noise(np.array([1]), "laplace", 1.0, rng=42)
