import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ppgm import Domain, Factor, align, logsumexp


@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 4)), elements=st.floats(-700, 700)))
def test_logsumexp_matches_scipy(a):
    from scipy.special import logsumexp as ref

    np.testing.assert_allclose(logsumexp(a, axis=1), ref(a, axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(logsumexp(a), ref(a), rtol=1e-12, atol=1e-12)


def test_logsumexp_all_minus_inf_is_minus_inf_without_nan():
    a = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    out = logsumexp(a, axis=1)
    assert out[0] == -np.inf and out[1] == 0.0
    assert logsumexp(np.array([1e308, 1e308])) == pytest.approx(1e308 + np.log(2))


def test_align_broadcasts_into_target_order():
    v = np.arange(6).reshape(2, 3)  # axes A, B
    out = align(v, ("A", "B"), ("B", "C", "A"))
    assert out.shape == (3, 1, 2)
    assert out[2, 0, 1] == v[1, 2]
    with pytest.raises(ValueError, match="missing"):
        align(v, ("A", "D"), ("A", "B"))


def test_factor_marginals_and_product():
    rng = np.random.default_rng(0)
    a = Factor(("A", "B"), rng.normal(size=(2, 3)))
    b = Factor(("B", "C"), rng.normal(size=(3, 4)))
    s = a + b
    assert s.variables == ("A", "B", "C")
    np.testing.assert_allclose(s.values[1, 2, 3], a.values[1, 2] + b.values[2, 3])
    m = s.logsumexp_to(("C", "A"))
    ref = np.log(np.exp(s.values).sum(axis=1)).T
    np.testing.assert_allclose(m.values, ref)
    np.testing.assert_allclose(Factor(("A", "B"), np.ones((2, 3))).sum_to(("B",)).values, [2, 2, 2])
    with pytest.raises(ValueError, match="not in the factor"):
        s.sum_to(("Z",))
    with pytest.raises(ValueError, match="axes"):
        Factor(("A",), np.zeros((2, 2)))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_sum_to_matches_numpy_sum_above_and_below_the_einsum_size(shape, rnd):
    """sum_to takes one einsum from EINSUM_MIN_CELLS cells: the same table as numpy's sum over the dropped
    axes, transposed into keep's order, whatever the shape and the order of keep."""
    import ppgm.factors.factor as factor_module

    names = tuple(f"V{i}" for i in range(len(shape)))
    values = np.random.default_rng(rnd.randrange(2**32)).random(shape)
    keep = rnd.sample(names, rnd.randrange(len(names) + 1))
    dropped = tuple(i for i, v in enumerate(names) if v not in keep)
    kept = [v for v in names if v in keep]
    ref = np.transpose(values.sum(axis=dropped), [kept.index(v) for v in keep])
    for threshold in (1, 10**9):  # einsum always / never
        factor_module.EINSUM_MIN_CELLS, saved = threshold, factor_module.EINSUM_MIN_CELLS
        try:
            out = Factor(names, values).sum_to(keep)
        finally:
            factor_module.EINSUM_MIN_CELLS = saved
        assert out.variables == tuple(keep)
        np.testing.assert_allclose(out.values, ref, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="not in the factor"):
        Factor(names, values).sum_to(("Z",))


def test_domain_validation():
    d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
    assert d.state_names["B"] == (0, 1, 2)
    assert d.shape(("B", "A")) == (3, 2)
    with pytest.raises(ValueError, match="cards"):
        Domain(("A",), (0,))
    with pytest.raises(ValueError, match="state_names"):
        Domain(("A",), (2,), {"A": ["x"]})
    with pytest.raises(ValueError, match="unknown variables"):
        d.check(["C"])
    with pytest.raises(KeyError, match="unknown variable"):
        d.index("C")
    with pytest.raises(ValueError, match="states in one domain"):
        d.merge(Domain(("A",), (3,)))
