"""Noise for private releases: the discrete Laplace and discrete Gaussian distributions.

Counts are integers, so a private release adds integer noise: the discrete Laplace (two-sided
geometric) law for pure epsilon-DP, P(k) proportional to exp(-|k| / b), and the discrete Gaussian for
zCDP, P(k) proportional to exp(-k^2 / (2 sigma^2)) (Canonne, Kamath and Steinke, NeurIPS 2020). A
textbook floating-point sampler leaks the input through the low-order bits of its output (Mironov,
CCS 2012); integer noise on integer counts has no such bits.

Two samplers, one law:

* **private** (``rng=None``): OpenDP's exact samplers, fed by the operating system's cryptographic
  random source. Integer inputs get integer noise; real inputs (weighted counts) go through
  OpenDP's floating-point mechanisms, which sample on an exact lattice and account for rounding.
* **seeded** (``rng`` a ``numpy.random.Generator``): vectorised numpy samplers of the same laws,
  reproducible for tests and tutorials. A seed makes a release non-private (whoever knows or guesses
  the seed subtracts the noise), and the releases that use it say so.
"""

from __future__ import annotations

import math

import numpy as np

KINDS = ("laplace", "gaussian")


def _check_scale(scale, name: str = "scale") -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) or not (
        math.isfinite(scale) and scale > 0
    ):
        raise ValueError(f"{name}: expected a positive finite noise scale, got {scale!r}")
    return float(scale)


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    return kind


def discrete_laplace_logpmf(k, scale: float) -> np.ndarray:
    """log P(k) of the discrete Laplace law with scale b: (1 - q) / (1 + q) q^|k|, q = exp(-1 / b).

    Examples
    --------
    >>> ks = np.arange(-200, 201)
    >>> round(float(np.exp(discrete_laplace_logpmf(ks, 2.0)).sum()), 12)
    1.0
    """
    b = _check_scale(scale)
    k = np.asarray(k, dtype=float)
    # log((1 - q) / (1 + q)) = log(tanh(1 / (2 b)))
    return math.log(math.tanh(0.5 / b)) - np.abs(k) / b


def discrete_gaussian_logpmf(k, sigma: float) -> np.ndarray:
    """log P(k) of the discrete Gaussian with parameter sigma: exp(-k^2 / (2 sigma^2)) / Z, the
    normaliser Z summed over the integers (to double precision).

    Examples
    --------
    >>> round(float(np.exp(discrete_gaussian_logpmf(0, 0.5))), 6)   # exp(0) / sum_k exp(-2 k^2)
    0.786571
    """
    s = _check_scale(sigma, "sigma")
    k = np.asarray(k, dtype=float)
    return -(k**2) / (2 * s * s) - _discrete_gaussian_log_norm(s)


def _discrete_gaussian_log_norm(sigma: float) -> float:
    half = int(math.ceil(40 * sigma)) + 2  # exp(-800) is below double precision
    ks = np.arange(-half, half + 1, dtype=float)
    terms = -(ks**2) / (2 * sigma * sigma)
    return float(np.logaddexp.reduce(terms))


def discrete_laplace_variance(scale: float) -> float:
    """Variance 2 q / (1 - q)^2 of the discrete Laplace law (q = exp(-1 / b)); about 2 b^2 - 1/6.

    Examples
    --------
    >>> round(discrete_laplace_variance(10.0), 4)
    199.8334
    """
    b = _check_scale(scale)
    q = math.exp(-1.0 / b)
    return 2 * q / (-math.expm1(-1.0 / b)) ** 2


def discrete_gaussian_variance(sigma: float) -> float:
    """Variance of the discrete Gaussian (at most sigma^2; equal to it to double precision for
    sigma >= 1).

    Examples
    --------
    >>> round(discrete_gaussian_variance(3.0), 9)
    9.0
    """
    s = _check_scale(sigma, "sigma")
    half = int(math.ceil(40 * s)) + 2
    ks = np.arange(-half, half + 1, dtype=float)
    logp = -(ks**2) / (2 * s * s)
    p = np.exp(logp - np.logaddexp.reduce(logp))
    return float(p @ ks**2)


def noise_variance(kind: str, scale: float, integer: bool) -> float:
    """Variance of one cell's noise: the discrete law's for integer noise, 2 b^2 or sigma^2 otherwise."""
    _check_kind(kind)
    if integer:
        return discrete_laplace_variance(scale) if kind == "laplace" else discrete_gaussian_variance(scale)
    return 2 * scale**2 if kind == "laplace" else scale**2


def noise_logpmf(kind: str, residual, scale: float, integer: bool) -> np.ndarray:
    """Log density (continuous noise) or log mass (integer noise) of ``residual`` = y - n per cell."""
    _check_kind(kind)
    r = np.asarray(residual, dtype=float)
    if integer:
        return discrete_laplace_logpmf(r, scale) if kind == "laplace" else discrete_gaussian_logpmf(r, scale)
    if kind == "laplace":
        return -np.abs(r) / scale - math.log(2 * scale)
    return -0.5 * (r / scale) ** 2 - math.log(scale * math.sqrt(2 * math.pi))


# --- samplers -------------------------------------------------------------------------------------


def add_noise(values, kind: str, scale: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """``values`` plus i.i.d. noise of the given kind and scale on every entry.

    Integer ``values`` get discrete Laplace / discrete Gaussian noise and stay integers (int64).
    Real ``values`` (weighted counts) get Laplace / Gaussian noise.

    Parameters
    ----------
    values : array-like of int or float
    kind : {"laplace", "gaussian"}
    scale : float
        Laplace b or Gaussian sigma.
    rng : numpy.random.Generator, optional
        ``None`` (the default) samples privately: OpenDP's exact samplers and the operating
        system's random source. A Generator samples the same law reproducibly with numpy, which is
        **not private** (the seed reveals the noise).

    Returns
    -------
    numpy.ndarray
        Same shape as ``values``; int64 for integer input, float otherwise.

    Examples
    --------
    >>> y = add_noise(np.array([5, 0, 12]), "laplace", 2.0, rng=np.random.default_rng(0))
    >>> y.dtype, y.shape
    (dtype('int64'), (3,))
    """
    _check_kind(kind)
    b = _check_scale(scale)
    x = np.asarray(values)
    integer = x.dtype.kind in "iub"
    if not integer:
        x = x.astype(float)
        if not np.all(np.isfinite(x)):
            raise ValueError("values: expected finite numbers")
    if x.size == 0:
        return x.astype(np.int64 if integer else float)
    if rng is None:
        return _opendp_noise(x, kind, b, integer)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: expected a numpy.random.Generator or None, got {type(rng).__name__}")
    if integer:
        z = discrete_laplace_sample(b, x.shape, rng) if kind == "laplace" else discrete_gaussian_sample(b, x.shape, rng)
        return x.astype(np.int64) + z
    z = rng.laplace(0.0, b, x.shape) if kind == "laplace" else rng.normal(0.0, b, x.shape)
    return x + z


def discrete_laplace_sample(scale: float, size, rng: np.random.Generator) -> np.ndarray:
    """Seeded (non-private) draws of the discrete Laplace law: the difference of two i.i.d.
    geometric counts of failures with success probability 1 - exp(-1 / b).

    Examples
    --------
    >>> discrete_laplace_sample(1.0, 4, np.random.default_rng(0)).dtype
    dtype('int64')
    """
    b = _check_scale(scale)
    p = -math.expm1(-1.0 / b)
    g1 = rng.geometric(p, size).astype(np.int64)
    g2 = rng.geometric(p, size).astype(np.int64)
    return g1 - g2


def discrete_gaussian_sample(sigma: float, size, rng: np.random.Generator) -> np.ndarray:
    """Seeded (non-private) draws of the discrete Gaussian by rejection from the discrete Laplace
    law with scale t = floor(sigma) + 1 (Canonne, Kamath and Steinke 2020, Algorithm 3), vectorised:
    every round proposes for all pending entries at once.

    Examples
    --------
    >>> discrete_gaussian_sample(2.0, (2, 3), np.random.default_rng(0)).shape
    (2, 3)
    """
    s = _check_scale(sigma, "sigma")
    t = math.floor(s) + 1.0
    n = int(np.prod(size, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        y = discrete_laplace_sample(t, pending.size, rng)
        accept = rng.random(pending.size) < np.exp(-((np.abs(y) - s * s / t) ** 2) / (2 * s * s))
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out.reshape(size)


_OPENDP = None


def opendp():
    """``opendp.prelude`` with its contributed (exact sampler) features enabled, imported once."""
    global _OPENDP
    if _OPENDP is None:
        try:
            import opendp.prelude as dp
        except ImportError as err:  # pragma: no cover - opendp is a required dependency
            raise ImportError("private releases need OpenDP: pip install opendp") from err
        dp.enable_features("contrib")
        _OPENDP = dp
    return _OPENDP


def _opendp_noise(x: np.ndarray, kind: str, scale: float, integer: bool) -> np.ndarray:
    dp = opendp()
    if integer:
        space = dp.vector_domain(dp.atom_domain(T="i64")), (dp.l1_distance if kind == "laplace" else dp.l2_distance)(T="i64")
    else:
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), (dp.l1_distance if kind == "laplace" else dp.l2_distance)(T=float)
    make = dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian
    meas = make(*space, scale=scale)
    flat = x.ravel()
    out = meas([int(v) for v in flat] if integer else flat.tolist())
    return np.asarray(out, dtype=np.int64 if integer else float).reshape(x.shape)


def opendp_cost(kind: str, scale: float, sensitivity: float, integer: bool) -> float:
    """What OpenDP certifies for one release of this noise on inputs that differ by ``sensitivity``
    (L1 for Laplace: epsilon; L2 for Gaussian: rho). The mechanisms check their own accounting
    against it.

    Examples
    --------
    >>> round(opendp_cost("laplace", 2.0, 4, integer=True), 12)
    2.0
    """
    dp = opendp()
    _check_kind(kind)
    if integer and kind == "laplace":
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
        d_in: float = int(math.ceil(sensitivity))
    else:  # OpenDP's integer L2 metric takes whole distances only; the zCDP map is the same formula
        metric = dp.l1_distance if kind == "laplace" else dp.l2_distance
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), metric(T=float)
        d_in = float(sensitivity)
    make = dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian
    return float(make(*space, scale=float(scale)).map(d_in))
