import numpy as np
import pytest

from ppgm import Domain, Factor, MarkovNetwork, entropy, kl_divergence, log_likelihood, nllh, total_variation
from ppgm.models.random_models import pairwise_dirichlet, random_bayesian_network, third_order_chain


def _brute_probs(m):
    J = m.joint_log_table()
    return np.exp(J - np.logaddexp.reduce(J.ravel()))


def test_kl_matches_enumeration_with_different_cliques():
    p = third_order_chain(6, 3, seed=0)
    # q has a clique p lacks (X0, X5) and misses some of p's
    q = pairwise_dirichlet([(0, 5), (1, 2), (2, 4), (3, 4)], 6, 3, seed=1)
    P, Q = _brute_probs(p), _brute_probs(q)
    ref = float(np.sum(P * (np.log(P) - np.log(Q))))
    assert kl_divergence(p, q) == pytest.approx(ref, rel=1e-9)
    assert kl_divergence(p, p) == pytest.approx(0.0, abs=1e-10)


def test_kl_infinite_when_q_forbids_what_p_allows():
    d = Domain(("A",), (2,))
    p = MarkovNetwork(d, [Factor(("A",), np.zeros(2))])
    q = MarkovNetwork(d, [Factor(("A",), np.array([0.0, -np.inf]))])
    assert kl_divergence(p, q) == np.inf
    assert kl_divergence(q, p) == pytest.approx(np.log(2))


def test_entropy_and_log_likelihood_match_enumeration():
    m = third_order_chain(5, 3, seed=2)
    P = _brute_probs(m)
    assert entropy(m) == pytest.approx(-np.sum(P * np.log(P)), rel=1e-10)
    rec = np.array([[0, 1, 2, 0, 1], [2, 2, 2, 2, 2]])
    assert log_likelihood(m, rec) == pytest.approx(np.mean(np.log(P[tuple(rec.T)])), rel=1e-10)
    bn = random_bayesian_network(4, 3, seed=1)
    Pb = np.exp(bn.joint_log_table())
    assert log_likelihood(bn, rec[:, :4]) == pytest.approx(np.mean(np.log(Pb[tuple(rec[:, :4].T)])), rel=1e-10)
    assert entropy(bn) == pytest.approx(-np.sum(Pb * np.log(Pb)), rel=1e-10)


def test_total_variation_exact_and_sampled():
    p = random_bayesian_network(6, 2, seed=0)
    q = random_bayesian_network(6, 2, seed=0).with_cpts({"V0": np.array([0.9, 0.1])})
    P, Q = np.exp(p.joint_log_table()), np.exp(q.joint_log_table())
    ref = 0.5 * np.abs(P - Q).sum()
    assert total_variation(p, q) == pytest.approx(ref, rel=1e-12)
    est = total_variation(p, q, method="sample", n_samples=200_000, seed=1)
    assert abs(est - ref) < 0.01
    assert total_variation(p, q, method="sample", seed=5) == total_variation(p, q, method="sample", seed=5)
    with pytest.raises(ValueError, match="same domain"):
        total_variation(p, random_bayesian_network(5, 2, seed=0))


def test_nllh_closed_form():
    y = np.array([1, 0, 0, 1, 1])
    p = np.array([0.9, 0.2, 0.1, 0.7, 0.6])
    base = y.mean()
    h = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    ll = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert nllh(y, p) == pytest.approx(1 - ll / h)
    assert nllh(y, np.full(5, base)) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="p_pred"):
        nllh(y, p[:3])
    with pytest.raises(ValueError, match="all labels are equal"):
        nllh([1, 1], [0.5, 0.5])
    with pytest.raises(ValueError, match="0 or 1"):
        nllh([2, 0], [0.5, 0.5])
