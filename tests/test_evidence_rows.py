"""row_marginals (the engine of query_rows) against brute-force enumeration on small random models."""

import itertools

import numpy as np
import pytest

from ppgm.factors.domain import Domain
from ppgm.factors.factor import Factor
from ppgm.inference.evidence import distinct_rows, evidence_mask, row_marginals
from ppgm.inference.junction_tree import JunctionTree
from ppgm.models.markov import MarkovNetwork


def _model(seed, zeros=False):
    rng = np.random.default_rng(seed)
    cards = tuple(int(c) for c in rng.integers(2, 4, size=5))
    dom = Domain(tuple("ABCDE"), cards)
    scopes = [("A", "B"), ("B", "C", "D"), ("C", "E"), ("A", "E")]  # a loop: cliques of three
    factors = []
    for s in scopes:
        v = rng.normal(size=dom.shape(s))
        if zeros:
            v[rng.random(v.shape) < 0.2] = -np.inf
        factors.append(Factor(s, v))
    return dom, MarkovNetwork(dom, factors)


def _joint(dom, model):
    logp = np.zeros(dom.shape(dom.variables))
    for f in model.factors:
        idx = [dom.index(v) for v in f.variables]
        shape = [1] * len(dom)
        for i, n in zip(idx, f.values.shape):
            shape[i] = n
        order = np.argsort(idx)
        logp = logp + np.transpose(f.values, order).reshape(shape)
    return np.exp(logp)


def _rows(dom, n, seed):
    rng = np.random.default_rng(seed)
    rows = np.stack([rng.integers(0, c, size=n) for c in dom.cards], axis=1)
    rows[rng.random(rows.shape) < 0.5] = -1
    return rows


def _brute(dom, joint, row, scope):
    p = joint.copy()
    for j, c in enumerate(row):
        if c >= 0:
            keep = np.zeros(dom.cards[j], bool)
            keep[c] = True
            p = p * keep.reshape([-1 if i == j else 1 for i in range(len(dom))])
    mass = p.sum()
    others = tuple(i for i, v in enumerate(dom.variables) if v not in scope)
    m = p.sum(axis=others)
    m = np.transpose(m, np.argsort(np.argsort([dom.index(v) for v in scope])))
    return mass, (m / mass).ravel() if mass > 0 else np.full(m.size, np.nan)


@pytest.mark.parametrize("path", ["auto", "reduced", "tree"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_row_marginals_equal_brute_force(path, seed):
    dom, model = _model(seed, zeros=seed == 2)
    scopes = [("C",), ("E", "B"), ("D", "C", "B")]  # the last in a clique, in another order
    tree = JunctionTree.build(dom, list(model.scopes) + [("B", "E")])
    psi = np.concatenate([p.ravel() for p in tree._potentials(model)])
    rows = _rows(dom, 60, seed)
    lz, ms = row_marginals(tree, psi, rows, scopes, path=path, reduced_chunk=50, chunk_cells=200)
    joint = _joint(dom, model)
    for r, row in enumerate(rows):
        for s, m in zip(scopes, ms):
            mass, ref = _brute(dom, joint, row, s)
            if mass > 0:
                assert abs(lz[r] - np.log(mass)) < 1e-9
                np.testing.assert_allclose(m[r], ref, atol=1e-12)
            else:
                assert lz[r] == -np.inf and np.isnan(m[r]).all()
    if seed == 2:
        assert np.isinf(lz).any()  # the zeros make some rows impossible: the check above saw NaN rows


def test_observed_scope_is_the_indicator_and_duplicates_are_answered_once():
    dom, model = _model(3)
    tree = JunctionTree.build(dom, model.scopes)
    psi = np.concatenate([p.ravel() for p in tree._potentials(model)])
    rows = np.array([[1, 0, -1, -1, 1]] * 3 + [[-1] * 5])
    _, (m,) = row_marginals(tree, psi, rows, [("A",)])
    assert m[:3].tolist() == [[0.0, 1.0] + [0.0] * (dom.cards[0] - 2)] * 3
    d, counts, inv = distinct_rows(rows, 3, inverse=True)
    assert counts.tolist() == [3, 1][::-1] if d[0, 0] < 0 else [3, 1]
    assert (d[inv] == rows).all()


def test_evidence_mask_keeps_the_cells_that_agree():
    dom = Domain(("A", "B"), (2, 3))
    tree = JunctionTree.build(dom, [("A", "B")])
    keep = evidence_mask(tree, np.array([[1, -1], [-1, 2]]))
    cells = list(itertools.product(range(2), range(3)))
    assert keep[:, 0].tolist() == [a == 1 for a, _ in cells]
    assert keep[:, 1].tolist() == [b == 2 for _, b in cells]
