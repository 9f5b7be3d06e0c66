"""AIM's loop: it spends exactly its budget round by round as the paper prescribes, keeps the
model under the size cap, combines repeated measurements by inverse variance, weights the workload's
closure as the paper does, and finds the structure of data with a strong chain."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from ppgm import Domain, Measurement
import ppgm.synthesis.aim as aim_module
from hypothesis import given, settings, strategies as st
from ppgm.synthesis.aim import ALPHA, ROUNDS_PER_VARIABLE, _combined, aim_scores, aim_select, closure, jt_cells
from ppgm.inference.junction_tree import JunctionTree
from ppgm.inference.tables import contingency_tables


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


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3))
def test_one_individual_moves_every_aim_score_by_at_most_its_weight(seed, k):
    """Neighbouring data sets (one individual's k records added) under the same released model:
    every candidate's score moves by at most w_r * k, the sensitivity the selection is charged for."""
    rng = np.random.default_rng(seed)
    dom = Domain(("A", "B", "C", "D"), (2, 3, 4, 2))
    x = rng.integers(0, dom.cards, size=(int(rng.integers(5, 200)), 4))
    extra = np.repeat(rng.integers(0, dom.cards, size=(1, 4)), k, axis=0) if rng.random() < 0.5 else rng.integers(0, dom.cards, size=(k, 4))
    y = np.vstack([x, extra])
    cand = closure([("A", "B", "C"), ("B", "D"), ("A", "C", "D")], rng.uniform(0.5, 2, 3))
    rs = list(cand)
    mus = [rng.dirichlet(np.ones(dom.size(r))).reshape(dom.shape(r)) for r in rs]
    n, sigma = float(rng.uniform(1, 300)), float(rng.uniform(0.1, 20))
    w = [cand[r] for r in rs]
    a = aim_scores([contingency_tables(x, dom, [r])[0].values for r in rs], mus, n, w, sigma)
    b = aim_scores([contingency_tables(y, dom, [r])[0].values for r in rs], mus, n, w, sigma)
    assert np.all(np.abs(a - b) <= k * np.array(w) + 1e-9)
    assert np.abs(a - b).max() <= k * max(w) + 1e-9


def test_each_round_selects_with_the_charged_budget_and_sensitivity(monkeypatch):
    """The selection primitive (audited in test_selection) receives the round's eps^2 / 8 and the
    closure's largest weight times the contribution bound, and the released model (never the exact
    counts) is what the scores compare with."""
    calls = []
    real = aim_module.report_noisy_max

    def spy(scores, rho, sensitivity, rng):
        calls.append((len(scores), rho, sensitivity))
        return real(scores, rho, sensitivity, rng)

    monkeypatch.setattr(aim_module, "report_noisy_max", spy)
    rng = np.random.default_rng(3)
    dom = Domain(tuple(f"X{i}" for i in range(4)), (3,) * 4)
    x = _chain(2000, 4, rng)
    work = list(combinations(dom.variables, 3))
    run = _run(x, dom, work, 0.5, sensitivity=2.0)
    w_max = max(closure(work).values())
    assert len(calls) == len(run.selected) >= 1
    for (m, rho_sel, sens), h in zip(calls, run.history[1:]):
        assert rho_sel == pytest.approx(h["epsilon"] ** 2 / 8) and sens == pytest.approx(2.0 * w_max)
        assert m == h["candidates"]
        assert h["sigma"] >= 2.0 * math.sqrt(1 / (2 * ALPHA * 0.5)) - 1e-9  # sigma scales with the contribution bound


def test_a_refit_that_stops_short_is_flagged_and_warned(monkeypatch):
    """The between-round refits are iterative: one that stops before its tolerance is recorded in the
    round's history and named in a ConvergenceWarning, not passed off as converged."""
    from ppgm.core.progress import ConvergenceWarning

    real = aim_module.fit_marginals
    monkeypatch.setattr(aim_module, "fit_marginals", lambda *a, **k: real(*a, **{**k, "max_iter": 1, "tol": 1e-14}))
    rng = np.random.default_rng(4)
    dom = Domain(tuple(f"X{i}" for i in range(3)), (3,) * 3)
    x = _chain(3000, 3, rng)
    with pytest.warns(ConvergenceWarning, match="refits after rounds"):
        run = _run(x, dom, list(combinations(dom.variables, 2)), 1.0)
    assert not any(h["refit_converged"] for h in run.history)
    monkeypatch.setattr(aim_module, "fit_marginals", real)
    assert all(h["refit_converged"] for h in _run(x, dom, list(combinations(dom.variables, 2)), 1.0).history)


def test_rounds_are_the_same_with_large_clique_paths_forced(monkeypatch):
    """AIM's rounds with every clique mapped by axis sums and every parent, separator sum and message product
    read as arrays (the paths Adult's million-cell cliques take) choose the same marginals and reach the same
    model as the index-array paths: the refits see the same numbers to rounding."""
    import ppgm.inference.junction_tree as jtm
    import ppgm.learners.mle as mle

    rng = np.random.default_rng(4)
    d = 5
    dom = Domain(tuple(f"X{i}" for i in range(d)), (3,) * d)
    x = _chain(4000, d, rng)
    workload = list(combinations(dom.variables, 2))
    plain = _run(x, dom, workload, 0.5, seed=3)
    monkeypatch.setattr(mle, "PLAN_CELLS", 1)
    monkeypatch.setattr(jtm, "DENSE_PARENT", 1)
    forced = _run(x, dom, workload, 0.5, seed=3)
    assert [s.clique for s in forced.selected] == [s.clique for s in plain.selected]
    assert len(plain.selected) > d and max(h["cells"] for h in plain.history) > 27  # cliques beyond pairs were built
    for a, b in zip(forced.model.factors, plain.model.factors):
        np.testing.assert_allclose(a.values, b.values, atol=1e-6)


def test_settled_refits_choose_what_converged_refits_choose(monkeypatch):
    """The refits between rounds stop once every table's L1 gradient is within SETTLE smallest noise scales:
    on seeded releases the rounds select the same marginals as rounds whose refits converge (SETTLE 0), and
    the last round's model (converged either way, from different starts) is the same fit up to its tolerance."""
    rng = np.random.default_rng(7)
    d = 6
    dom = Domain(tuple(f"X{i}" for i in range(d)), (3,) * d)
    x = _chain(5000, d, rng, flip=0.3)
    workload = list(combinations(dom.variables, 3))
    for seed in (0, 1):
        settled = _run(x, dom, workload, 0.5, seed=seed)
        monkeypatch.setattr(aim_module, "SETTLE", 0.0)
        converged = _run(x, dom, workload, 0.5, seed=seed)
        monkeypatch.undo()
        assert [s.clique for s in settled.selected] == [s.clique for s in converged.selected]
        assert len(settled.selected) > d
        for a, b in zip(settled.model.factors, converged.model.factors):
            np.testing.assert_allclose(a.values, b.values, atol=1e-3)


def test_remembered_size_checks_are_the_junction_trees_sizes():
    """_Sizes answers jt_cells of the model's scopes plus a candidate from what it remembered while the
    model's graph is unchanged, and forgets when an edge is added: the same numbers as computing each."""
    rng = np.random.default_rng(3)
    d = 8
    dom = Domain(tuple(f"X{i}" for i in range(d)), tuple(int(c) for c in rng.integers(2, 5, d)))
    cand = list(combinations(dom.variables, 3)) + list(combinations(dom.variables, 2))
    sizes = aim_module._Sizes(dom)
    scopes = [(v,) for v in dom.variables]
    for _ in range(6):
        sizes.model(scopes)
        for r in cand:
            assert sizes.cells(r) == jt_cells(dom, scopes + [r])
        scopes = scopes + [cand[int(rng.integers(len(cand)))]]


def test_the_measured_table_starts_at_its_proportional_fitting_update():
    """A round's refit starts the measured table at log((target + 1/n) / (marginal + 1/n)) on top of its
    previous potential. On a model of independent one-way tables a new pair is fitted by that update alone
    (the model's pair marginal is the product of its one-ways, so the start reproduces the target up to the
    pseudo-record): the refit starts within a fraction of a record of the converged fit, takes fewer
    calibrations than from zero, and both reach the same model (within the final refit's gradient tolerance)."""
    from ppgm.learners.mle import fit_marginals

    rng = np.random.default_rng(5)
    dom = Domain(("A", "B", "C"), (3, 4, 2))
    x = _chain(3000, 3, rng, flip=0.4)
    x[:, 1] = np.where(rng.random(3000) < 0.5, x[:, 1], 3)
    x[:, 2] %= 2
    tables = {c: contingency_tables(x, dom, [c])[0].values.astype(float) for c in [("A",), ("B",), ("C",), ("A", "B")]}
    ones = [Measurement(c, tables[c] + rng.normal(0, 3.0, tables[c].shape), "gaussian", 3.0) for c in [("A",), ("B",), ("C",)]]
    n = aim_module._records(ones)
    first = aim_module._Refit(dom)
    fit, cal, _ = first(ones, n, None, final=True)
    pair = Measurement(("A", "B"), tables[("A", "B")] + rng.normal(0, 3.0, (3, 4)), "gaussian", 3.0)
    known = {("A", "B"): cal.marginal(["A", "B"]).transpose(("A", "B")).values}
    np.testing.assert_allclose(known[("A", "B")], np.outer(known[("A", "B")].sum(1), known[("A", "B")].sum(0)), atol=1e-12)
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs["init"])
        return fit_marginals(*args, **kwargs)

    real_flat = aim_module.MarginalOracle.flat
    evals = []

    def counted_flat(self, z):
        evals.append(1)
        return real_flat(self, z)

    results = []
    for hint in (known, None):
        refit = aim_module._Refit(dom)
        refit(ones, n, None, final=True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(aim_module, "fit_marginals", counting)
            mp.setattr(aim_module.MarginalOracle, "flat", counted_flat)
            evals.clear()
            got, _, _ = refit(ones + [pair], n, fit.model, final=True, known=hint)
        results.append((got, len(evals)))

    def calibrated(model):
        return JunctionTree.build(dom, model.scopes).calibrate(model)

    target = aim_module._naive_targets(ones + [pair], n, project=True)[-1].values
    start_pair = calibrated(calls[0]).marginal(["A", "B"]).transpose(("A", "B")).values
    assert n * np.abs(start_pair - target).sum() < 2 * target.size  # within a pseudo-record per cell
    assert n * np.abs(start_pair - known[("A", "B")]).sum() > 20  # where the zero start begins
    (ipf, ipf_evals), (zero, zero_evals) = results
    assert ipf.converged and zero.converged and ipf_evals < zero_evals
    cal_ipf, cal_zero = calibrated(ipf.model), calibrated(zero.model)
    for scope in ipf.model.scopes:
        np.testing.assert_allclose(cal_ipf.marginal(list(scope)).values, cal_zero.marginal(list(scope)).values,
                                   atol=2 * 0.05 * 3.0 / n)  # both within the final refit's tolerance


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="the worker is forked on Linux only")
def test_size_checks_made_in_a_worker_process_leave_the_rounds_unchanged(monkeypatch):
    """The next round's size checks, made in a worker process during the refit, give the rounds the same
    offered candidates, picks and models as the checks made in the round (one core: no worker); the
    worker's sizes were really read, and the size cap bound some rounds."""
    rng = np.random.default_rng(5)
    d = 8
    dom = Domain(tuple(f"X{i}" for i in range(d)), tuple(int(c) for c in rng.integers(2, 5, d)))
    x = np.stack([rng.integers(0, c, 3000) for c in dom.cards], 1)
    x[:, 1] = np.where(rng.random(3000) < 0.7, x[:, 0] % dom.cards[1], x[:, 1])
    workload = list(combinations(dom.variables, 3))
    used = []
    collect = aim_module._SizesAhead.collect

    def spy(self, scopes, sizes):
        before = len(sizes.seen)
        collect(self, scopes, sizes)
        used.append(len(sizes.seen) - before)
    monkeypatch.setattr(aim_module._SizesAhead, "collect", spy)
    runs = []
    for cores in (1, 2):
        monkeypatch.setattr(aim_module.os, "cpu_count", lambda cores=cores: cores)
        used.clear()
        runs.append(_run(x, dom, workload, 1.0, seed=2, max_cells=3000))
        assert (sum(used) > 0) == (cores > 1)
    one, two = runs
    assert [s.clique for s in one.selected] == [s.clique for s in two.selected]
    assert [h["candidates"] for h in one.history] == [h["candidates"] for h in two.history]
    assert any(h["candidates"] < len(closure(workload)) for h in one.history[1:])  # the cap left candidates out
    for a, b in zip(one.model.factors, two.model.factors):
        np.testing.assert_array_equal(a.values, b.values)
