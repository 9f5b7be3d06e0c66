"""ppgm.factors.cell_map: the planned axis sums against brute-force marginal sums, and the oracle that uses them
against the sparse map it replaces on large cliques."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ppgm.factors.cell_map as cell_map
import ppgm.learners.mle as mle
from ppgm.factors.cell_map import CliqueReduction
from ppgm.factors.domain import Domain
from ppgm.learners.mle import MarginalOracle, fit_marginals
from ppgm.models.random_models import pairwise_dirichlet


def _reference(shape, scopes, y, x):
    """Scope sums of the cells y, and the cells of the parameters x, by brute force."""
    t = y.reshape(shape)
    out = np.zeros(x.size)
    cells = np.zeros(shape)
    for axes, a, b in scopes:
        others = tuple(i for i in range(len(shape)) if i not in axes)
        marg = np.asarray(t.sum(axis=others))  # axes left in ascending order
        out[a:b] += marg.transpose([sorted(axes).index(i) for i in axes]).ravel()
        table = x[a:b].reshape([shape[i] for i in axes])
        order = np.argsort(axes)  # the scope's axes in ascending clique order
        cells += np.expand_dims(table.transpose(order), others) if others else table.transpose(order)
    return out, cells.ravel()


@st.composite
def _clique_and_scopes(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    scopes, top = [], 0
    for _ in range(draw(st.integers(1, 6))):
        axes = draw(st.permutations(range(len(shape))))[:draw(st.integers(0, len(shape)))]
        size = int(np.prod([shape[i] for i in axes])) if axes else 1
        scopes.append((tuple(axes), top, top + size))
        top += size
    return shape, scopes, top


@settings(max_examples=150, deadline=None)
@given(_clique_and_scopes(), st.sampled_from([0, 10**9]), st.integers(0, 2**31 - 1))
def test_reduction_matches_brute_force(case, collapse, seed):
    shape, scopes, n_params = case
    old = cell_map.COLLAPSE_ENTRIES
    cell_map.COLLAPSE_ENTRIES = collapse  # 0: every step as axis sums; 10**9: one sparse product
    try:
        red = CliqueReduction(shape, scopes)
    finally:
        cell_map.COLLAPSE_ENTRIES = old
    rng = np.random.default_rng(seed)
    y, x = rng.normal(size=int(np.prod(shape))), rng.normal(size=n_params)
    want_params, want_cells = _reference(shape, scopes, y, x)
    got = np.zeros(n_params)
    red.add_to_params(y, got)
    np.testing.assert_allclose(got, want_params, atol=1e-12)
    np.testing.assert_allclose(red.to_cells(x), want_cells, atol=1e-12)
    out = np.full(y.size, np.nan)
    red.to_cells(x, out)
    np.testing.assert_allclose(out, want_cells, atol=1e-12)
    # the two maps are each other's transpose
    assert np.isclose(red.to_cells(x) @ y, x @ got)


def test_short_inner_axes_take_every_path():
    # a trailing axis of 2 (the matrix-product path), a long inner block (einsum) and an outermost axis
    shape = (3, 4, 20, 2)
    scopes = [((2,), 0, 20), ((1, 3), 20, 28), ((0,), 28, 31), ((3, 0), 31, 37), ((), 37, 38)]
    old = cell_map.COLLAPSE_ENTRIES
    cell_map.COLLAPSE_ENTRIES = 0
    try:
        red = CliqueReduction(shape, scopes)
    finally:
        cell_map.COLLAPSE_ENTRIES = old
    rng = np.random.default_rng(1)
    y, x = rng.normal(size=480), rng.normal(size=38)
    want_params, want_cells = _reference(shape, scopes, y, x)
    got = np.zeros(38)
    red.add_to_params(y, got)
    np.testing.assert_allclose(got, want_params, atol=1e-12)
    np.testing.assert_allclose(red.to_cells(x), want_cells, atol=1e-12)
    out = np.full(480, np.nan)  # written in place: the root's first term spread into it, the others added
    assert red.to_cells(x, out) is out
    np.testing.assert_allclose(out, want_cells, atol=1e-12)
    assert abs(got[37] - y.sum()) < 1e-9  # the empty scope sums every cell


def _triangle_model():
    # a cycle A-B-C-D-A with its one-way tables: triangulation makes 3-way cliques that home several scopes
    edges = [(0, 1), (1, 2), (2, 3), (0, 3)]
    return pairwise_dirichlet(edges, 4, 6, alpha=0.7, seed=3)


@pytest.mark.parametrize("seed", [0, 1])
def test_oracle_with_planned_cliques_matches_the_sparse_map(monkeypatch, seed):
    truth = _triangle_model()
    d = truth.domain
    scopes = list(truth.scopes) + [(v,) for v in d.variables]
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(mle, "PLAN_CELLS", 10**12)
    plain = MarginalOracle(d, scopes)
    monkeypatch.setattr(mle, "PLAN_CELLS", 1)
    planned = MarginalOracle(d, scopes)
    assert planned._planned and not plain._planned
    x = rng.normal(size=plain.params.size)
    lz0, mu0 = plain.flat(x)
    lz1, mu1 = planned.flat(x)
    assert abs(lz0 - lz1) < 1e-10
    np.testing.assert_allclose(mu1, mu0, atol=1e-12)
    v = rng.normal(size=x.size)
    np.testing.assert_allclose(planned.fisher(x, mu1)(v), plain.fisher(x, mu0)(v), atol=1e-12)
    # the marginals are the model's: brute-force enumeration of the four variables
    logp = np.zeros(d.shape(d.variables))
    for s, t in zip(plain.params.scopes, plain.params.split(x)):
        axes = [d.variables.index(u) for u in s]
        logp = logp + np.expand_dims(t.transpose(np.argsort(axes)), tuple(i for i in range(4) if i not in axes))
    p = np.exp(logp - logp.max())
    p /= p.sum()
    for s, m in zip(planned.params.scopes, planned.params.split(mu1)):
        axes = [d.variables.index(u) for u in s]
        want = p.sum(axis=tuple(i for i in range(4) if i not in axes)).transpose(np.argsort(np.argsort(axes)))
        np.testing.assert_allclose(m, want, atol=1e-12)


def test_fit_with_planned_cliques_is_the_same_fit(monkeypatch):
    truth = _triangle_model()
    d = truth.domain
    from ppgm.inference.marginals import infer
    cal = infer(truth)
    targets = cal.factor_marginals() + [cal.marginal([v]) for v in d.variables]
    monkeypatch.setattr(mle, "PLAN_CELLS", 10**12)
    a = fit_marginals(d, targets, l2=1e-3)
    monkeypatch.setattr(mle, "PLAN_CELLS", 1)
    b = fit_marginals(d, targets, l2=1e-3)
    assert a.converged and b.converged
    assert abs(a.objective - b.objective) < 1e-10
    for fa, fb in zip(a.model.factors, b.model.factors):
        np.testing.assert_allclose(fa.values, fb.values, atol=1e-8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6).flatmap(
    lambda shape: st.tuples(st.just(tuple(shape)), st.permutations(range(len(shape))), st.integers(0, len(shape)))))
def test_sum_plan_matches_numpy_sum(case):
    """The planned sum (runs of summed axes as one product with ones, then the order asked for) against
    numpy's sum and transpose, for any shape and any kept axes in any order (none and all included)."""
    shape, perm, k = case
    keep = tuple(perm[:k])
    t = np.random.default_rng(k).random(shape)
    ref = t.sum(axis=tuple(i for i in range(len(shape)) if i not in keep))
    ref = np.transpose(ref, [sorted(keep).index(i) for i in keep]) if keep else ref
    got = cell_map.sum_plan(shape, keep)(t)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=0)
