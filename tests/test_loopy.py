import numpy as np
import pytest

from ppgm import Domain, Factor, MarkovNetwork, infer, loopy_belief_propagation
from ppgm.models.random_models import grid, pairwise_dirichlet


def _random_tree(n=12, k=3, seed=0):
    rng = np.random.default_rng(seed)
    edges = [(int(rng.integers(i)), i) for i in range(1, n)]
    return pairwise_dirichlet(edges, n, k, seed=rng)


def test_bp_is_exact_on_a_tree_including_bethe_log_z():
    m = _random_tree()
    exact = infer(m)
    res = loopy_belief_propagation(m, damping=0.0, tol=1e-12)
    assert res.converged
    assert res.log_z == pytest.approx(exact.log_z, abs=1e-9)
    for f, b in zip(m.factors, res.factor_log_beliefs):
        np.testing.assert_allclose(np.exp(b.values), exact.marginal(f.variables).values, atol=1e-9)


def test_loopy_grid_close_to_exact_and_scale_free():
    g = grid(6, 6, coupling=0.4, seed=2)
    exact = infer(g)
    lbp = infer(g, method="loopy")
    assert lbp.loopy.converged
    err = max(np.abs(exact.marginal([v]).values - lbp.marginal([v]).values).max() for v in g.domain.variables)
    assert err < 0.02
    assert abs(lbp.log_z - exact.log_z) / abs(exact.log_z) < 0.01
    # the same model with every potential scaled down by e^-400 converges in the same number of steps
    tiny = MarkovNetwork(g.domain, [Factor(f.variables, f.values - 400.0) for f in g.factors])
    res_tiny = loopy_belief_propagation(tiny)
    assert res_tiny.iterations == lbp.loopy.iterations
    assert res_tiny.log_z == pytest.approx(lbp.log_z - 400.0 * len(g.factors), rel=1e-10)


def test_loopy_handles_hard_zeros_and_mixed_cardinalities():
    d = Domain(("A", "B", "C"), (2, 3, 4))
    rng = np.random.default_rng(1)
    f1 = rng.normal(size=(2, 3))
    f1[0, 0] = -np.inf
    m = MarkovNetwork(d, [Factor(("A", "B"), f1), Factor(("B", "C"), rng.normal(size=(3, 4))), Factor(("C",), rng.normal(size=4))])
    exact, res = infer(m), infer(m, method="loopy")  # a tree: BP is exact
    for v in d.variables:
        np.testing.assert_allclose(res.marginal([v]).values, exact.marginal([v]).values, atol=1e-7)
    assert res.log_z == pytest.approx(exact.log_z, abs=1e-7)


def test_loopy_argument_checks():
    g = grid(2, 2, seed=0)
    with pytest.raises(ValueError, match="damping"):
        loopy_belief_propagation(g, damping=1.0)
    with pytest.raises(ValueError, match="tol"):
        loopy_belief_propagation(g, tol=0)
    with pytest.raises(ValueError, match="method"):
        infer(g, method="magic")
    res = infer(g, method="loopy")
    with pytest.raises(ValueError, match="no belief covering"):
        res.marginal(("G0_0", "G1_1"))
