"""AIM's loop: it spends exactly its budget round by round as the paper prescribes, keeps the
model under the size cap, combines repeated measurements by inverse variance, weights the workload's
closure as the paper does, and finds the structure of data with a strong chain."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from ppgm import Domain, Measurement
from ppgm.aim import ALPHA, ROUNDS_PER_VARIABLE, _combined, aim_select, closure, jt_cells
from ppgm.junction_tree import JunctionTree
from ppgm.tables import contingency_tables


def _chain(n, d, rng, flip=0.1):
    x = np.zeros((n, d), dtype=np.int64)
    x[:, 0] = rng.integers(0, 3, n)
    for j in range(1, d):
        x[:, j] = np.where(rng.random(n) < flip, rng.integers(0, 3, n), x[:, j - 1])
    return x


def _run(x, dom, workload, rho, seed=0, **kw):
    return aim_select(dom, lambda c: contingency_tables(x, dom, [c])[0], workload, rho, rng=np.random.default_rng(seed),
                      progress=False, **kw)


def test_closure_weights_against_their_definition():
    work = [("A", "B", "C"), ("B", "C", "D"), ("A", "D")]
    w = closure(work, [1.0, 2.0, 0.5])
    for r, got in w.items():
        want = sum(ws * len(set(r) & set(s)) for s, ws in zip(work, [1.0, 2.0, 0.5]))
        assert got == pytest.approx(want)
    assert set(w) == {r for s in work for k in range(1, len(s) + 1) for r in combinations(s, k)}


def test_repeated_measurements_combine_by_inverse_variance():
    a = Measurement(("A",), np.array([10.0, 20.0]), "gaussian", 1.0)
    b = Measurement(("A",), np.array([14.0, 16.0]), "gaussian", 2.0)
    c = _combined([a, b])
    assert c.values.tolist() == pytest.approx([(10 + 14 / 4) / 1.25, (20 + 16 / 4) / 1.25])
    assert c.scale == pytest.approx(1 / math.sqrt(1.25))


@pytest.mark.parametrize("rho", [0.05, 1.0])
def test_the_rounds_spend_exactly_the_budget_as_the_paper_prescribes(rho):
    rng = np.random.default_rng(0)
    d = 4
    dom = Domain(tuple(f"X{i}" for i in range(d)), (3,) * d)
    x = _chain(2000, d, rng)
    run = _run(x, dom, list(combinations(dom.variables, 2)), rho)
    h = run.history
    assert sum(r["rho_round"] for r in h) == pytest.approx(rho, rel=1e-9)
    T = ROUNDS_PER_VARIABLE * d
    assert h[0]["sigma"] == pytest.approx(math.sqrt(T / (2 * ALPHA * rho)))
    assert h[0]["rho_round"] == pytest.approx(d / (2 * h[0]["sigma"] ** 2))
    for r in h[1:]:  # each round: measuring at sigma plus choosing at epsilon, in zCDP
        assert r["rho_round"] == pytest.approx(1 / (2 * r["sigma"] ** 2) + r["epsilon"] ** 2 / 8)
    for prev, r in zip(h[1:], h[2:]):  # annealing halves sigma (and doubles epsilon) after a small move; the last round takes the rest
        if r is not h[-1]:
            assert r["sigma"] == pytest.approx(prev["sigma"] / (2 if prev["annealed"] else 1))
    assert len(run.released) == d + len(run.selected)
    assert all(m.noise == "gaussian" for m in run.released)


def test_the_model_stays_under_the_size_cap():
    rng = np.random.default_rng(1)
    d = 5
    dom = Domain(tuple(f"X{i}" for i in range(d)), (3,) * d)
    x = _chain(3000, d, rng)
    cap = 120
    run = _run(x, dom, list(combinations(dom.variables, 3)), 1.0, max_cells=cap)
    spent = [r["rho_spent"] for r in run.history]
    cells = [r["cells"] for r in run.history]
    for i in range(1, len(cells)):
        assert cells[i] <= max(cap * spent[i] / 1.0, cells[i - 1]) + 1e-9
    assert jt_cells(dom, [tuple(m.variables) for m in run.measurements]) == cells[-1]
    assert sum(JunctionTree.build(dom, run.model.scopes).domain.size(c) for c in JunctionTree.build(dom, run.model.scopes).cliques) == cells[-1]


def test_a_strong_chain_is_measured_first_and_the_fit_is_close():
    rng = np.random.default_rng(2)
    d = 5
    dom = Domain(tuple(f"X{i}" for i in range(d)), (3,) * d)
    x = _chain(20_000, d, rng, flip=0.05)
    run = _run(x, dom, list(combinations(dom.variables, 2)), 5.0)
    first = {frozenset(s.clique) for s in run.selected[: d - 1]}
    assert first == {frozenset((f"X{j}", f"X{j + 1}")) for j in range(d - 1)}
    from ppgm import infer

    marg = infer(run.model)
    for a, b in combinations(dom.variables, 2):
        f = marg.marginal([a, b])
        p = np.transpose(f.values, [f.variables.index(a), f.variables.index(b)])
        t = contingency_tables(x, dom, [(a, b)])[0].values / len(x)
        assert 0.5 * np.abs(p - t).sum() < 0.03


def test_bad_arguments_are_named():
    dom = Domain(("A", "B"), (2, 2))
    with pytest.raises(ValueError, match="rho"):
        aim_select(dom, lambda c: None, [("A", "B")], -1.0)
    with pytest.raises(ValueError, match="workload"):
        aim_select(dom, lambda c: None, [("A", "Z")], 1.0)
