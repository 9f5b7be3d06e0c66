import numpy as np
import pytest
from conftest import small_markov_networks
from hypothesis import HealthCheck, given, settings

from ppgm import Domain, MarkovNetwork
from ppgm.learners.gauge import Gauge
from ppgm.learners.mle import _Parameters


def joint_design(domain, scopes):
    """The linear map from flat tables to the joint log-potential over every configuration."""
    P = _Parameters(domain, scopes)
    cols = []
    for j in range(P.size):
        e = np.zeros(P.size)
        e[j] = 1.0
        cols.append(P.model(e).joint_log_table().ravel())
    return np.array(cols).T


def brute_projection(domain, scopes):
    """The orthogonal projection onto the complement of the gauge space, from the null space of
    the centred design (a table change is gauge iff it moves every configuration by one constant)."""
    X = joint_design(domain, scopes)
    Xc = X - X.mean(axis=0)
    _, s, vt = np.linalg.svd(Xc)
    rank = int((s > 1e-9 * s.max()).sum()) if s.size else 0
    basis = vt[:rank]  # the row space of Xc = the complement of its null space
    return basis.T @ basis


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=6, allow_zeros=False))
def test_projection_matches_the_null_space_of_the_joint_design(model):
    dom, scopes = model.domain, model.scopes
    g = Gauge(dom, scopes)
    eye = np.eye(g.size)
    got = np.array([g.project(e) for e in eye]).T
    np.testing.assert_allclose(got, brute_projection(dom, scopes), atol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_markov_networks(max_vars=5, max_card=3, max_scope=3, max_factors=6, allow_zeros=False))
def test_projection_keeps_the_distribution_and_is_idempotent(model):
    P = _Parameters(model.domain, model.scopes)
    g = Gauge(model.domain, model.scopes)
    x = P.join([f.values for f in model.factors])
    y = g.project(x)
    J, K = model.joint_log_table(), P.model(y).joint_log_table()
    np.testing.assert_allclose((J - J.max()) - (K - K.max()), 0, atol=1e-8)  # same distribution
    np.testing.assert_allclose(g.project(y), y, atol=1e-9)
    np.testing.assert_allclose(g.gauge(x) + y, x, atol=1e-12)
    assert np.linalg.norm(y) <= np.linalg.norm(x) + 1e-9  # the minimum-norm member of the class


def test_pool_averages_what_project_sums():
    # two tables that each hold the same A-B interaction: project keeps their sum, pool their mean
    d = Domain(("A", "B"), (2, 3))
    g = Gauge(d, [("A", "B"), ("B", "A")])
    rng = np.random.default_rng(0)
    t = rng.normal(size=(2, 3))
    t = t - t.mean(0) - t.mean(1, keepdims=True) + t.mean()  # a pure interaction
    x = np.concatenate([t.ravel(), t.T.ravel()])
    np.testing.assert_allclose(g.project(x), x, atol=1e-12)  # already minimum-norm: both hold half of 2t
    np.testing.assert_allclose(g.pool(x), x / 2, atol=1e-12)


def test_bad_input_names_the_argument():
    g = Gauge(Domain(("A",), (2,)), [("A",)])
    with pytest.raises(ValueError, match="x: expected a flat vector of 2"):
        g.project(np.zeros(3))
    with pytest.raises(ValueError, match="scopes"):
        Gauge(Domain(("A",), (2,)), [("B",)])
