import numpy as np
from conftest import brute_marginal, small_markov_networks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppgm.learners.krylov import Recycler, fisher_product, pcg
from ppgm.learners.mle import MarginalOracle, _Parameters


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_pcg_solves_spd_systems(n, seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, n))
    A = B @ B.T + 0.1 * np.eye(n)
    b = rng.normal(size=n)
    p, k = pcg(lambda v: A @ v, b, lambda r: r / np.diag(A), 10 * n, 1e-12)
    np.testing.assert_allclose(A @ p, b, atol=1e-8 * max(1.0, np.abs(b).max()) * np.linalg.cond(A))
    assert k <= 10 * n


def test_pcg_stops_at_the_relative_residual():
    A = np.diag(np.arange(1.0, 51.0))
    b = np.ones(50)
    p, k = pcg(lambda v: A @ v, b, lambda r: r, 100, 0.5)
    assert np.linalg.norm(A @ p - b) <= 0.5 * np.linalg.norm(b)
    assert k < 50


def test_pcg_stops_at_the_first_residual_the_caller_calls_enough():
    """The caller's test on the residual ends the solve at the first product after which it holds:
    the same iterate as the unstopped run had after that many products."""
    A = np.diag(np.arange(1.0, 51.0))
    b = np.ones(50)
    residuals = []
    full, k_full = pcg(lambda v: A @ v, b, lambda r: r, 100, 1e-12, enough=lambda r: residuals.append(np.abs(r).max()) or False)
    first = next(i for i, m in enumerate(residuals) if m <= 0.05) + 1
    p, k = pcg(lambda v: A @ v, b, lambda r: r, 100, 1e-12, enough=lambda r: np.abs(r).max() <= 0.05)
    assert k == first < k_full
    assert np.abs(A @ p - b).max() <= 0.05
    np.testing.assert_allclose(p, pcg(lambda v: A @ v, b, lambda r: r, first, 1e-12)[0])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=4, max_card=3, max_scope=2, max_factors=4, allow_zeros=False))
def test_fisher_product_is_the_covariance_of_the_indicators(model):
    """F v against the covariance of the cell indicators, by enumeration of the joint."""
    P = _Parameters(model.domain, model.scopes)
    oracle = MarginalOracle(model.domain, model.scopes)
    x = P.join([np.clip(f.values, -5, 5) for f in model.factors])
    m = P.model(x)
    J = m.joint_log_table()
    p = np.exp(J - np.logaddexp.reduce(J.ravel())).ravel()
    # indicator features: one column per parameter cell
    idx = np.indices(model.domain.shape(model.domain.variables)).reshape(len(model.domain), -1)
    feats = []
    for s, sh in zip(P.scopes, P.shapes):
        cell = np.ravel_multi_index([idx[model.domain.index(v)] for v in s], sh) if s else np.zeros(idx.shape[1], int)
        feats.append(np.eye(int(np.prod(sh)))[cell])
    Phi = np.hstack(feats)
    mean = p @ Phi
    cov = (Phi * p[:, None]).T @ Phi - np.outer(mean, mean)
    mu = oracle.flat(x)[1]
    np.testing.assert_allclose(mu, mean, atol=1e-10)
    v = np.random.default_rng(0).normal(size=P.size)
    got = fisher_product(lambda z: oracle.flat(z)[1], x, mu, v)
    np.testing.assert_allclose(got, cov @ v, atol=1e-5 * max(1.0, np.abs(cov @ v).max()))
    assert brute_marginal(m, P.scopes[0]).shape == P.shapes[0]


def _spd(rng, n, spread=3.0):
    """A random symmetric positive definite matrix whose eigenvalues span ``spread`` decades."""
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * np.logspace(0, spread, n)) @ Q.T


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 15), st.integers(1, 20), st.integers(0, 2**31 - 1))
def test_recycled_preconditioner_is_symmetric_positive_semi_definite_from_any_matrix(n, k, seed):
    """Directions and products kept from another matrix (a stale memory): the corrected preconditioner is still a
    symmetric positive semi-definite matrix (built column by column), and conjugate gradients still solve."""
    rng = np.random.default_rng(seed)
    old, A = _spd(rng, n), _spd(rng, n)
    S = rng.normal(size=(k, n))
    memory = Recycler(keep=k)
    memory.add(list(S), list(S @ old), list(np.einsum("ij,ij->i", S, S @ old)))
    jacobi = 1.0 / np.diag(A)
    M = memory.wrap(lambda r: r * jacobi, n)
    P = np.column_stack([M(e) for e in np.eye(n)])
    np.testing.assert_allclose(P, P.T, atol=1e-9 * np.abs(P).max())
    assert np.linalg.eigvalsh((P + P.T) / 2).min() >= -1e-9 * np.abs(P).max()
    b = rng.normal(size=n)
    p, _ = pcg(lambda v: A @ v, b, lambda r: r * jacobi, 20 * n, 1e-12, recycle=memory)
    np.testing.assert_allclose(A @ p, b, atol=1e-7 * np.abs(b).max() * np.linalg.cond(A))


def test_recycled_preconditioner_inverts_the_matrix_on_the_kept_directions():
    """With the matrix unchanged, P A s = s on every kept direction (the limited-memory preconditioner's defining
    property), so a second right-hand side takes fewer products; a system of another size drops the memory."""
    rng = np.random.default_rng(0)
    A = _spd(rng, 40, spread=1.0)
    memory = Recycler()
    _, first = pcg(lambda v: A @ v, rng.normal(size=40), np.copy, 200, 1e-6, recycle=memory)
    assert memory.S is not None and memory.S.shape == (first, 40)
    M = memory.wrap(np.copy, 40)
    for s in memory.S:
        np.testing.assert_allclose(M(A @ s), s, atol=1e-8 * np.abs(s).max())
    b = rng.normal(size=40)
    plain = pcg(lambda v: A @ v, b, np.copy, 200, 1e-6)[1]
    p, again = pcg(lambda v: A @ v, b, np.copy, 200, 1e-6, recycle=memory)
    np.testing.assert_allclose(A @ p, b, atol=1e-5 * np.abs(b).max() * np.linalg.cond(A))
    assert again < plain
    assert memory.S.shape[0] == min(first + again, memory.keep)  # the newest kept, up to ``keep``
    memory.wrap(np.copy, 7)
    assert memory.S is None
