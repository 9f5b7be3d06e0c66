"""mst_release and aim_release: every published part charged, nothing released over budget, the chain it should
find, synthetic records that match the data, seeded runs reproducible and marked not private."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from ppgm.adapters import BudgetExceeded, NotPrivateWarning, PrivacyAccountant, aim_release, mst_release


def _chain_frame(n=20_000, d=5, flip=0.1, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, d), dtype=np.int64)
    x[:, 0] = rng.integers(0, 3, n)
    for j in range(1, d):
        x[:, j] = np.where(rng.random(n) < flip, rng.integers(0, 3, n), x[:, j - 1])
    cols = [f"C{j}" for j in range(d)]
    return pd.DataFrame(x, columns=cols), {c: [0, 1, 2] for c in cols}


def _quiet(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mst_release(progress=False, **kw)


def test_the_release_charges_its_three_parts_and_nothing_else():
    df, states = _chain_frame(2_000)
    acc = PrivacyAccountant(rho=2.0)
    rel = _quiet(data=df, state_names=states, rho=0.5, accountant=acc, seed=0, estimator="naive")
    assert [e["what"].split(" ")[0] for e in acc.ledger] == ["one-way", "selection", "selected"]
    assert acc.spent == pytest.approx(0.5) and acc.remaining == pytest.approx(1.5)
    assert rel.report()["rho"] == pytest.approx(0.5)
    # the tables' noise is what the shares buy: d one-way tables at rho / 3, d - 1 pairs at rho / 3
    sig1 = np.sqrt(5) / np.sqrt(2 * 0.5 / 3)
    sig2 = np.sqrt(4) / np.sqrt(2 * 0.5 / 3)
    scales = [f.scale for f in rel.tables]
    assert scales[:5] == pytest.approx([sig1] * 5) and scales[5:] == pytest.approx([sig2] * 4)
    assert all(f.integer for f in rel.tables)
    assert rel.fit.selection["criterion"] == "tv"  # a synthetic release's naive weight is chosen for its marginals


def test_an_over_budget_release_raises_and_spends_nothing():
    df, states = _chain_frame(500)
    acc = PrivacyAccountant(rho=0.1)
    acc.spend(rho=0.08, what="earlier")
    with pytest.raises(BudgetExceeded):
        _quiet(data=df, state_names=states, rho=0.05, accountant=acc, seed=0)
    assert len(acc.ledger) == 1
    # without rho it spends what is left
    rel = _quiet(data=df, state_names=states, accountant=acc, seed=0, estimator="naive")
    assert acc.remaining == pytest.approx(0.0, abs=1e-12) and rel.report()["rho"] == pytest.approx(0.02)


def test_a_chain_is_found_and_the_synthetic_records_match_the_data():
    df, states = _chain_frame(20_000)
    rel = _quiet(data=df, state_names=states, rho=5.0, seed=1)
    assert {frozenset(s.clique) for s in rel.selected} == {frozenset((f"C{j}", f"C{j + 1}")) for j in range(4)}
    syn = rel.synthetic
    assert list(syn.columns) == list(df.columns) and abs(len(syn) - len(df)) < 100
    for a, b in [("C0", "C1"), ("C1", "C3"), ("C0", "C4")]:
        p = pd.crosstab(df[a], df[b], normalize=True).to_numpy()
        q = pd.crosstab(syn[a], syn[b], normalize=True).reindex(index=[0, 1, 2], columns=[0, 1, 2], fill_value=0).to_numpy()
        assert 0.5 * np.abs(p - q).sum() < 0.03
    assert set(rel.model.nodes()) == set(df.columns)
    # rounded records reproduce the model's measured tables; i.i.d. draws add sampling noise
    drawn = _quiet(data=df, state_names=states, rho=5.0, seed=1, synthetic="sample").synthetic
    from ppgm import infer
    from ppgm.adapters import markov_from_pgmpy

    f = infer(markov_from_pgmpy(rel.model)).marginal(["C1", "C2"])
    p = np.transpose(f.values, [f.variables.index("C1"), f.variables.index("C2")])
    off = [np.abs(pd.crosstab(x["C1"], x["C2"]).reindex(index=[0, 1, 2], columns=[0, 1, 2], fill_value=0).to_numpy()
                  - len(x) * p).max() for x in (syn, drawn)]
    assert off[0] <= 3 < off[1]
    assert all(s.candidates >= 1 and "report-noisy-max" in s.reason for s in rel.selected)


def test_seeded_releases_are_reproducible_and_marked_not_private():
    df, states = _chain_frame(1_000)
    with pytest.warns(NotPrivateWarning):
        a = mst_release(df, states, rho=1.0, seed=3, progress=False, estimator="naive")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = mst_release(df, states, rho=1.0, seed=3, progress=False, estimator="naive")
    assert not a.private and not a.report()["private"]
    assert [s.clique for s in a.selected] == [s.clique for s in b.selected]
    assert all(np.array_equal(x.values, y.values) for x, y in zip(a.tables, b.tables))
    pd.testing.assert_frame_equal(a.synthetic, b.synthetic)


def test_an_unseeded_release_is_private_and_leaves_the_data_alone():
    df, states = _chain_frame(1_000)
    before = df.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        rel = mst_release(df, states, rho=1.0, progress=False, estimator="naive")
    assert rel.private and rel.tables.private
    pd.testing.assert_frame_equal(df, before)


def test_contributions_are_bounded_by_the_public_rule():
    df, states = _chain_frame(1_000)
    df["who"] = np.arange(len(df)) % 100
    rel = _quiet(data=df, state_names=states, rho=1.0, seed=0, individuals="who", max_contributions=2, estimator="naive")
    # sensitivity 2 per table: every noise scale doubles against one record per person
    one = _quiet(data=df.drop(columns="who"), state_names=states, rho=1.0, seed=0, estimator="naive")
    assert [f.scale for f in rel.tables] == pytest.approx([2 * f.scale for f in one.tables])
    with pytest.raises(ValueError, match="individuals"):
        _quiet(data=df, state_names=states, rho=1.0, seed=0, individuals="who")


def test_bad_arguments_are_named():
    df, states = _chain_frame(200)
    with pytest.raises(ValueError, match="rho"):
        _quiet(data=df, state_names=states, seed=0)
    with pytest.raises(ValueError, match="accountant"):
        _quiet(data=df, state_names=states, accountant=PrivacyAccountant(epsilon=1.0), seed=0)
    with pytest.raises(ValueError, match="split"):
        _quiet(data=df, state_names=states, rho=1.0, split=(1, 0, 1), seed=0)
    with pytest.raises(ValueError, match="state_names"):
        _quiet(data=df, state_names={"C0": [0, 1, 2]}, rho=1.0, seed=0)


def _aim(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return aim_release(progress=False, **kw)


def test_aim_release_charges_what_its_rounds_spend_before_any_noise():
    df, states = _chain_frame(2_000, d=4)
    acc = PrivacyAccountant(rho=1.0)
    rel = _aim(data=df, state_names=states, rho=0.4, accountant=acc, workload=2, seed=0, estimator="naive")
    assert [e["what"].split(" ")[0] for e in acc.ledger] == ["one-way", "adaptive"]
    assert acc.spent == pytest.approx(0.4) and rel.report()["rho"] == pytest.approx(0.4)
    # the ledger's parts are what the rounds spent: the one-way tables, then every round's select + measure
    assert acc.ledger[0]["cost"] == pytest.approx(rel.history[0]["rho_round"])
    assert sum(h["rho_round"] for h in rel.history[1:]) == pytest.approx(acc.ledger[1]["cost"])
    # every published table is in the release, at its noise scale, in order
    assert len(rel.tables) == 4 + len(rel.selected)
    assert [tuple(f.variables) for f in rel.tables][4:] == [s.clique for s in rel.selected]
    assert [f.scale for f in rel.tables][4:] == pytest.approx([h["sigma"] for h in rel.history[1:]])
    with pytest.raises(BudgetExceeded):
        _aim(data=df, state_names=states, rho=0.7, accountant=acc, workload=2, seed=0)
    assert acc.spent == pytest.approx(0.4)


def test_aim_release_finds_the_chain_and_its_records_match_the_data():
    df, states = _chain_frame(20_000, d=5, flip=0.05)
    rel = _aim(data=df, state_names=states, rho=5.0, workload=2, seed=2)
    assert {frozenset(s.clique) for s in rel.selected[:4]} == {frozenset((f"C{j}", f"C{j + 1}")) for j in range(4)}
    syn = rel.synthetic
    for a, b in combinations(df.columns, 2):
        p = pd.crosstab(df[a], df[b], normalize=True).to_numpy()
        q = pd.crosstab(syn[a], syn[b], normalize=True).reindex(index=[0, 1, 2], columns=[0, 1, 2], fill_value=0).to_numpy()
        assert 0.5 * np.abs(p - q).sum() < 0.03


def test_aim_release_can_return_the_rounds_own_fit():
    """estimator="rounds" returns the last round's naive fit (l2 = 1 / N) unchanged: its marginals
    on the measured cliques match what a fresh naive fit at that weight gives."""
    from ppgm import infer
    from ppgm.adapters import markov_from_pgmpy
    from ppgm.synthesis.aim import _measurements
    from ppgm.learners.cgm import population_size
    from ppgm.learners.cgm import naive_mle

    df, states = _chain_frame(5_000, d=4)
    rel = _aim(data=df, state_names=states, rho=1.0, workload=2, seed=5, estimator="rounds")
    ms = _measurements(rel.tables.measurements())
    assert {tuple(f.variables) for f in rel.fit.model.factors} == {tuple(m.variables) for m in ms}
    ref = naive_mle(rel.tables.domain, ms, N=population_size(ms), l2=1.0 / population_size(ms)).model
    got, want = infer(markov_from_pgmpy(rel.model)), infer(ref)
    for m in ms:
        v = list(m.variables)
        np.testing.assert_allclose(got.marginal(v).transpose(v).values, want.marginal(v).transpose(v).values, atol=2e-4)


def test_aim_release_is_private_unseeded_and_reproducible_seeded():
    df, states = _chain_frame(1_000, d=3)
    before = df.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        rel = aim_release(df, states, rho=0.5, workload=2, progress=False, estimator="naive")
    assert rel.private and rel.tables.private and rel.report()["rho"] == pytest.approx(0.5)
    pd.testing.assert_frame_equal(df, before)
    a = _aim(data=df, state_names=states, rho=0.5, workload=2, seed=4, estimator="naive")
    b = _aim(data=df, state_names=states, rho=0.5, workload=2, seed=4, estimator="naive")
    assert not a.private and [s.clique for s in a.selected] == [s.clique for s in b.selected]
    pd.testing.assert_frame_equal(a.synthetic, b.synthetic)


def test_aim_release_bad_arguments_are_named():
    df, states = _chain_frame(200, d=3)
    for bad, match in [(dict(workload=0), "workload"), (dict(workload=[("C0", "Z")]), "workload"),
                       (dict(workload=[]), "workload"), (dict(workload=2, weights=[1.0]), "weights"),
                       (dict(max_cells=0), "max_cells"), (dict(estimator="mirror"), "estimator")]:
        with pytest.raises(ValueError, match=match):
            _aim(data=df, state_names=states, rho=1.0, seed=0, **bad)
    with pytest.raises(TypeError, match="workload"):
        _aim(data=df, state_names=states, rho=1.0, seed=0, workload=None)
