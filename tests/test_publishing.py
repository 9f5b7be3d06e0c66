"""What users publish and read back: a publisher's long table of noisy counts, models compared by
state name, marginals and privacy reports written out, the warning on states read from the data, short
reprs, and the attributes the guide pages name."""

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pgmpy.factors.discrete import DiscreteFactor, TabularCPD
from pgmpy.inference import VariableElimination
from pgmpy.models import DiscreteBayesianNetwork

import ppgm
import ppgm.adapters as pa
from ppgm.adapters.private import warn_if_states_from_data
from ppgm.privacy.mechanisms import StatesFromDataWarning

GUIDES = Path(__file__).resolve().parents[1] / "docs" / "guide"


def _chain_release(noise="laplace"):
    mn = pa.dirichlet_chain_network(4, 3, seed=0)
    df = pa.sample(mn, 3000, seed=1)
    mech = pa.LaplaceMechanism(1.0) if noise == "laplace" else pa.GaussianMechanism(rho=0.5)
    return mn, df, pa.release_tables(df, mn, mech, seed=2, publish_n="public")


# -- the publisher's long table -------------------------------------------------------------------

def test_long_table_round_trips_a_release_through_a_csv_read_as_text(tmp_path):
    mn, _, rel = _chain_release()
    path = tmp_path / "published.csv"
    rel.to_table().to_csv(path, index=False)
    back = pa.read_records(path)  # every cell as text, the counts too
    assert back["val1"].map(type).eq(str).all()
    states = {v: [str(s) for s in rel.domain.state_names[v]] for v in rel.domain.variables}
    got = pa.NoisyTables.from_table(back, noise="laplace", scale=rel.factors[0].scale, n=rel.n, spent=rel.spent,
                                    state_names=states, integer=True)
    assert [f.variables for f in got] == [f.variables for f in rel]
    for a, b in zip(got, rel):
        np.testing.assert_array_equal(a.values, b.values)
        assert a.noise == b.noise and a.scale == b.scale and a.integer == b.integer
    assert got.domain.state_names == {v: tuple(s) for v, s in states.items()} and got.n == rel.n
    assert got.spent == rel.spent and not got.private
    # without state_names: the values as written, in the order they first appear (here the release's order)
    plain = pa.NoisyTables.from_table(back, noise="laplace", scale=rel.factors[0].scale)
    assert plain.domain.state_names == got.domain.state_names


def test_long_table_fits_the_same_network_as_the_release():
    mn, _, rel = _chain_release()
    long = rel.to_table()  # states as the release wrote them (integers)
    got = pa.NoisyTables.from_table(long, noise="laplace", scale=rel.factors[0].scale, n=rel.n, integer=True)
    a = pa.NaiveMLEEstimator(mn).estimate(rel, l2="paper")
    b = pa.NaiveMLEEstimator(mn).estimate(got, l2="paper")
    assert pa.kl_divergence(a, b) < 1e-10


def test_long_table_layout_one_way_rows_leave_var2_empty():
    f1 = DiscreteFactor(["A"], [2], [4.5, 6.0], state_names={"A": ["no", "yes"]})
    f2 = DiscreteFactor(["A", "B"], [2, 3], np.arange(6.0), state_names={"A": ["no", "yes"], "B": ["x", "y", "z"]})
    t = pa.NoisyTables.from_factors([f1, f2], noise="gaussian", scale=2.0).to_table()
    assert t.columns.tolist() == ["table", "var1", "val1", "var2", "val2", "noisy_count"]
    assert t.iloc[:2].values.tolist() == [[0, "A", "no", "", "", 4.5], [0, "A", "yes", "", "", 6.0]]
    assert t.iloc[2:5].values.tolist() == [[1, "A", "no", "B", "x", 0.0], [1, "A", "no", "B", "y", 1.0], [1, "A", "no", "B", "z", 2.0]]


def test_long_table_reads_wider_tables_rows_in_any_order_and_variables_in_any_column_order():
    rng = np.random.default_rng(0)
    vals = rng.normal(10, 2, (2, 3, 2))
    f = DiscreteFactor(["A", "B", "C"], [2, 3, 2], vals, state_names={"A": ["a0", "a1"], "B": ["b0", "b1", "b2"], "C": ["c0", "c1"]})
    long = pa.NoisyTables.from_factors([f], noise="laplace", scale=1.0).to_table()
    assert long.columns.tolist()[:7] == ["table", "var1", "val1", "var2", "val2", "var3", "val3"]
    shuffled = long.sample(frac=1.0, random_state=0)
    swap = shuffled.index[::2]  # half the rows name C first and A last
    shuffled.loc[swap, ["var1", "val1", "var3", "val3"]] = shuffled.loc[swap, ["var3", "val3", "var1", "val1"]].to_numpy()
    got = pa.NoisyTables.from_table(shuffled, noise="laplace", scale=1.0, columns=["var1", "val1", "var2", "val2", "var3", "val3"],
                                    state_names=f.state_names)
    (g,) = list(got)
    order = [g.variables.index(v) for v in ("A", "B", "C")]
    np.testing.assert_allclose(np.transpose(g.values, order), vals)


def test_long_table_without_a_table_column_groups_by_variables_and_takes_per_table_scales():
    long = pd.DataFrame({"var1": ["A", "A", "B", "B"], "val1": ["0", "1", "0", "1"], "var2": ["", "", "", ""], "val2": ["", "", "", ""],
                         "noisy_count": ["10.5", "20", "7", "23.25"], "b": [1.0, 1.0, 3.0, 3.0]})
    t = pa.NoisyTables.from_table(long, noise="laplace", scale="b", table_column=None)
    assert [(f.variables, f.scale, f.values.tolist()) for f in t] == [(("A",), 1.0, [10.5, 20.0]), (("B",), 3.0, [7.0, 23.25])]
    t2 = pa.NoisyTables.from_table(long, noise="laplace", scale={frozenset({"A"}): 2.0, frozenset({"B"}): 4.0}, table_column=None)
    assert [f.scale for f in t2] == [2.0, 4.0]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.drop(index=1), "no row for 1 of its 2 cells"),
    (lambda d: pd.concat([d, d.iloc[[0]]]), "two rows for the cell"),
    (lambda d: d.assign(noisy_count=["1", "x", "3", "4"]), "'noisy_count' must hold a finite number"),
    (lambda d: d.drop(columns="val2"), "columns ['val2'] are missing"),
    (lambda d: d.assign(var1=["A", "A", "", ""], var2=["", "", "", ""]), "names no variable"),
])
def test_long_table_refuses_what_it_cannot_read(change, message):
    long = pd.DataFrame({"table": ["t1", "t1", "t2", "t2"], "var1": ["A", "A", "A", "A"], "val1": ["0", "1", "0", "1"],
                         "var2": ["", "", "", ""], "val2": ["", "", "", ""], "noisy_count": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match=re.escape(message)):
        pa.NoisyTables.from_table(change(long), noise="laplace", scale=1.0)


def test_long_table_names_a_value_outside_the_declared_states():
    long = pd.DataFrame({"table": [0, 0], "var1": ["A", "A"], "val1": ["0", "1"], "var2": ["", ""], "val2": ["", ""],
                         "noisy_count": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"variable 'A' has the value '0', not among its declared states \[0, 1\]"):
        pa.NoisyTables.from_table(long, noise="laplace", scale=1.0, state_names={"A": [0, 1]})
    t = pa.NoisyTables.from_table(long, noise="laplace", scale=1.0, state_names={"A": ["1", "0"]})  # the declared order
    assert t.factors[0].values.tolist() == [2.0, 1.0] and t.domain.state_names["A"] == ("1", "0")
    with pytest.raises(ValueError, match=re.escape("no row for 1 of its 3 cells, e.g. {'A': '2'}")):
        pa.NoisyTables.from_table(long, noise="laplace", scale=1.0, state_names={"A": ["1", "0", "2"]})


# -- comparing models by state name ---------------------------------------------------------------

def _bn(states_a, states_b, pa_, pb_given_a):
    bn = DiscreteBayesianNetwork([("A", "B")])
    bn.add_cpds(TabularCPD("A", len(states_a), [[p] for p in pa_], state_names={"A": states_a}),
                TabularCPD("B", len(states_b), pb_given_a, ["A"], [len(states_a)], state_names={"B": states_b, "A": states_a}))
    return bn


def test_metrics_align_states_by_name_a_permuted_copy_is_at_distance_zero():
    p = _bn(["lo", "mid", "hi"], ["n", "y"], [0.2, 0.3, 0.5], [[0.9, 0.4, 0.1], [0.1, 0.6, 0.9]])
    # the same distribution, every state listed in another order (the CPT columns and rows permuted to match)
    q = _bn(["hi", "lo", "mid"], ["y", "n"], [0.5, 0.2, 0.3], [[0.9, 0.1, 0.6], [0.1, 0.9, 0.4]])
    assert pa.kl_divergence(p, q) == pytest.approx(0.0, abs=1e-12)
    assert pa.total_variation(p, q) == pytest.approx(0.0, abs=1e-12)
    r = _bn(["hi", "lo", "mid"], ["y", "n"], [0.2, 0.3, 0.5], [[0.9, 0.4, 0.1], [0.1, 0.6, 0.9]])  # positions kept: another model
    assert pa.total_variation(p, r) > 0.1
    assert "aligned by name" in pa.kl_divergence.__doc__ and "aligned by name" in pa.total_variation.__doc__


def test_metrics_refusal_names_the_variable_and_both_state_sets():
    p = _bn(["lo", "mid", "hi"], ["n", "y"], [0.2, 0.3, 0.5], [[0.9, 0.4, 0.1], [0.1, 0.6, 0.9]])
    q = _bn(["lo", "mid", "high"], ["n", "y"], [0.2, 0.3, 0.5], [[0.9, 0.4, 0.1], [0.1, 0.6, 0.9]])
    for metric in (pa.kl_divergence, pa.total_variation):
        with pytest.raises(ValueError, match=re.escape("variable 'A' has the states ['lo', 'mid', 'hi'] in p and ['lo', 'mid', 'high'] in q")):
            metric(p, q)


def test_kl_infinite_warns_which_cells_and_points_to_a_pseudo_count():
    p = _bn(["lo", "mid", "hi"], ["n", "y"], [0.2, 0.3, 0.5], [[0.9, 0.4, 0.1], [0.1, 0.6, 0.9]])
    q = _bn(["lo", "mid", "hi"], ["n", "y"], [0.2, 0.3, 0.5], [[1.0, 0.4, 0.1], [0.0, 0.6, 0.9]])  # B=y impossible given A=lo
    with pytest.warns(UserWarning, match=r"A=lo, B=y \(p = 0.02\).*pseudo-count") as caught:
        assert pa.kl_divergence(p, q) == np.inf
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(pa.kl_divergence(q, p))  # finite: no warning


# -- results out ----------------------------------------------------------------------------------

def test_marginals_are_one_long_table_equal_to_pgmpy_variable_elimination():
    bn = pa.load_bif_example("asia")
    m = pa.marginals(bn)
    names = list(bn.nodes())
    assert m.columns.tolist() == ["var1", "val1", "var2", "val2", "prob"]
    assert len(m) == 4 * len(names) * (len(names) - 1) // 2
    ve = VariableElimination(bn)
    for (a, b), rows in m.groupby(["var1", "var2"], sort=False):
        ref = ve.query([a, b], show_progress=False)
        for _, r in rows.iterrows():
            assert r["prob"] == pytest.approx(ref.get_value(**{a: r["val1"], b: r["val2"]}), abs=1e-12)
    one = pa.marginals(bn, 1, value="p")
    assert one.columns.tolist() == ["var1", "val1", "p"] and len(one) == 16
    chosen = pa.marginals(bn, [("lung", "smoke"), ("dysp",)])
    assert chosen[["var1", "var2"]].drop_duplicates().values.tolist() == [["lung", "smoke"], ["dysp", ""]]
    with pytest.raises(ValueError, match="sets: expected a size between 1 and 8"):
        pa.marginals(bn, 9)


def test_synthetic_release_save_writes_what_the_command_line_writes(tmp_path, monkeypatch):
    df = pd.DataFrame({"A": ["0", "1"] * 150, "B": ["0", "1", "1"] * 100, "C": ["x", "y", "z"] * 100})
    states = {"A": ["0", "1"], "B": ["0", "1"], "C": ["x", "y", "z", "w"]}
    rel = pa.mst_release(df, states, rho=1.0, seed=0, estimator="naive", progress=False)
    out = rel.save(tmp_path / "out", delta=1e-6)
    assert json.loads((out / "privacy_report.json").read_text()) == json.loads(json.dumps(rel.report(delta=1e-6)))
    pd.testing.assert_frame_equal(pa.read_records(out / "synthetic.csv"), rel.synthetic.astype(str))
    back = pa.NoisyTables.load(out / "release.npz")
    assert [f.values.tolist() for f in back] == [f.values.tolist() for f in rel.tables]
    # the command line writes through the same method
    csv, dom = tmp_path / "r.csv", tmp_path / "d.json"
    df.to_csv(csv, index=False)
    dom.write_text(json.dumps(states))
    called = []
    original = pa.SyntheticRelease.save
    monkeypatch.setattr(pa.SyntheticRelease, "save", lambda self, folder, delta=1e-9: called.append(delta) or original(self, folder, delta))
    from ppgm.adapters.cli import main
    assert main(["synthesize", str(csv), "--domain", str(dom), "--rho", "1", "--out", str(tmp_path / "cli"), "--estimator", "naive",
                 "--no-progress"]) == 0
    assert called == [1e-9] and sorted(p.name for p in (tmp_path / "cli").iterdir()) == ["privacy_report.json", "release.npz", "synthetic.csv"]


def test_noisy_tables_report_totals_the_parts_as_the_accountant_does(tmp_path):
    _, _, lap = _chain_release("laplace")
    r = lap.report()
    assert (r["epsilon"], r["delta"], r["rho"], r["n"]) == (1.0, 0.0, None, 3000.0)
    assert [t["variables"] for t in r["tables"]] == [list(f.variables) for f in lap]
    _, _, gau = _chain_release("gaussian")
    acc = pa.PrivacyAccountant(rho=0.5)
    acc.charge(list(gau.spent))
    r = gau.report(delta=1e-6)
    assert r["rho"] == pytest.approx(0.5) and r["epsilon"] == pytest.approx(acc.epsilon_delta(1e-6))
    unknown = pa.NoisyTables.from_factors([DiscreteFactor(["A"], [2], [3.0, 4.0])], noise="laplace", scale=1.0)
    assert (unknown.report()["epsilon"], unknown.report()["delta"]) == (None, None)  # no stated cost: not 0
    gau.save_report(tmp_path / "privacy_report.json", delta=1e-6)
    assert json.loads((tmp_path / "privacy_report.json").read_text()) == json.loads(json.dumps(r))


# -- states read from the data --------------------------------------------------------------------

def _records():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.choice(["20-29", "30-39", "40-49"], 500), "sex": rng.choice(["f", "m"], 500),
                         "region": rng.choice(["n", "s", "e", "w"], 500)})


@pytest.mark.parametrize("how", ["sorted", "appearance"])
def test_states_read_from_the_data_warn_once(how):
    df = _records()
    states = {c: sorted(df[c].unique()) if how == "sorted" else list(df[c].unique()) for c in df.columns}
    with pytest.warns(StatesFromDataWarning, match=r"\['age', 'region'\] are exactly the values present") as caught:
        pa.release_tables(df, [("age", "sex"), ("sex", "region")], pa.LaplaceMechanism(1.0), state_names=states)
    assert len([w for w in caught if w.category is StatesFromDataWarning]) == 1
    with pytest.warns(StatesFromDataWarning):
        pa.mst_release(df, states, rho=1.0, estimator="naive", progress=False)


def test_declared_states_do_not_warn():
    df = _records()
    declared = {"age": ["20-29", "30-39", "40-49", "50+"], "sex": ["f", "m"], "region": ["n", "s", "e", "w"]}  # a codebook: 50+ unseen
    two = {"age": ["40-49", "20-29", "30-39"], "sex": ["m", "f"], "region": ["w", "e", "n", "s"]}  # neither sorted nor as they appear
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatesFromDataWarning)
        for states in (declared, two):
            pa.bounded_tables(df, [("age", "sex"), ("region",)], state_names=states)
        pa.bounded_tables(df[["sex"]], [("sex",)], state_names={"sex": ["f", "m"]})  # two states say too little
        mn = pa.dirichlet_chain_network(3, 3, seed=0)
        pa.bounded_tables(pa.sample(mn, 500, seed=0), mn)  # a model's declared states are taken as declared
    assert warn_if_states_from_data(df, pa.bounded_tables(df, [("age",)], state_names=declared).domain, declared) is False


def test_the_warning_is_a_filterable_category_beside_not_private():
    assert issubclass(StatesFromDataWarning, UserWarning) and ppgm.StatesFromDataWarning is StatesFromDataWarning
    assert pa.StatesFromDataWarning is StatesFromDataWarning


# -- the attributes the guides name, and short reprs ----------------------------------------------

def test_both_estimators_set_l2_after_estimate():
    mn, _, rel = _chain_release()
    naive, cgm = pa.NaiveMLEEstimator(mn), pa.CGMEstimator(mn)
    naive.estimate(rel, l2=0.01)
    cgm.estimate(rel, l2=0.02, max_iter=2, stop="converged", progress=False)
    assert naive.l2_ == 0.01 and cgm.l2_ == 0.02
    cgm.estimate(rel, max_iter=2, stop="converged", progress=False)
    from ppgm.learners.cgm import noise_aware_l2
    assert cgm.l2_ == pytest.approx(noise_aware_l2(rel.measurements(), cgm.N_, None))


def _fitted_by_page():
    """Fitted objects of the jobs each guide page covers (small, seconds)."""
    mn, df, rel = _chain_release()
    naive, cgm = pa.NaiveMLEEstimator(mn), pa.CGMEstimator(mn)
    naive.estimate(rel)
    cgm.estimate(rel, max_iter=2, progress=False)
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"a": rng.integers(0, 3, 2000), "b": rng.integers(0, 2, 2000)})
    rows["y"] = (rng.random(2000) < 0.2 + 0.2 * rows["a"]).astype(int)
    clf = pa.MaxEntClassifier(progress=False).fit(pa.aggregate(rows, label="y"))
    asia = pa.load_bif_example("asia")
    data = pa.sample(asia, 1500, seed=0)
    robust = pa.RobustFilter(epsilon=0.1, seed=0, state_names=pa.declared_states(asia))
    robust.fit(DiscreteBayesianNetwork(asia.edges()), data)
    holes = data.mask(np.random.default_rng(1).random(data.shape) < 0.1)
    em = pa.MissingValuesEM(progress=False, state_names=pa.declared_states(asia))
    em.fit(DiscreteBayesianNetwork(asia.edges()), holes)
    studies = [pa.sample(mn, 300, seed=s)[list(c)] for s, c in enumerate([("X0", "X1"), ("X1", "X2"), ("X2", "X3")])]
    fit = pa.mer(studies, kind="discrete", state_names=pa.declared_states(mn))
    numeric = pd.DataFrame({"a": rows["a"], "x": rng.normal(size=2000)})
    binned = pa.MissingValuesEM(progress=False, state_names={"x": {}})  # a numeric column, binned from the data
    binned.fit(DiscreteBayesianNetwork([("a", "x")]), numeric)
    return {"private-tables.md": [naive, cgm], "aggregates.md": [clf], "corrupted-records.md": [robust],
            "missing-values.md": [em], "overlapping-studies.md": [fit], "synthesis.md": [binned]}


def test_every_attribute_a_guide_page_names_exists_on_its_fitted_objects():
    fitted = _fitted_by_page()
    seen = set()
    for page in sorted(GUIDES.glob("*.md")):
        text = page.read_text()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)  # inline code: `l2_`, `est.history_`
        inline = " ".join(re.findall(r"`([^`]+)`", prose))
        names = set(re.findall(r"(?<![\w.])(?:\w+\.)?([a-zA-Z]\w*?[a-zA-Z0-9]?_)(?![\w])", inline))
        names |= set(re.findall(r"\.([a-zA-Z]\w*_)(?![\w])", text))  # obj.attr_ anywhere, code blocks too
        if not names:
            continue
        assert page.name in fitted, f"{page.name} names {sorted(names)}: add its fitted objects to this test"
        for obj in fitted[page.name]:
            missing = sorted(n for n in names if not hasattr(obj, n))
            assert not missing, f"{page.name} names {missing}, which {type(obj).__name__} does not have after fitting"
        seen |= names
    assert {"l2_", "selection_", "N_", "history_", "converged_", "program_"} <= seen


def test_reprs_are_short_and_say_what_how_big_and_which_method_ran():
    mn, df, rel = _chain_release()
    rng = np.random.default_rng(0)
    wide = pd.DataFrame({f"f{i}": rng.integers(0, 4, 3000) for i in range(12)})
    wide["y"] = rng.integers(0, 2, 3000)
    agg = pa.aggregate(wide, label="y")  # 12 single tables and 66 pairs
    naive = pa.NaiveMLEEstimator(mn)
    naive.estimate(rel)
    clf = pa.MaxEntClassifier(progress=False).fit(pa.aggregate(wide[["f0", "f1", "y"]], label="y"))
    pcd = pa.MaxEntClassifier(n_chains=500, max_iter=20, progress=False, method="pcd").fit(pa.aggregate(wide[["f0", "y"]], label="y"))
    syn = pa.mst_release(df, pa.declared_states(mn), rho=1.0, seed=0, estimator="naive", progress=False)
    texts = {"agg": repr(agg), "rel": repr(rel), "bounded": repr(pa.bounded_tables(df, mn)), "naive": repr(naive),
             "fresh": repr(pa.CGMEstimator(mn)), "exact": repr(clf), "pcd": repr(pcd), "syn": repr(syn)}
    for k, t in texts.items():
        assert "\n" not in t and len(t) < 320, (k, t)
    assert "78 tables (12 1-way, 66 2-way)" in texts["agg"] and "12 features" in texts["agg"]
    assert "6 tables (6 2-way) over 4 variables, 54 cells, laplace scale 6" in texts["rel"]
    assert "3,000 records counted" in texts["bounded"] and "not private" in texts["bounded"]
    assert "l2_=" in texts["naive"] and "not estimated yet" in texts["fresh"]
    assert "exact Newton fit" in texts["exact"] and clf.method_ == "exact"
    assert "sampled-chains (PCD) fit, 500 chains" in texts["pcd"] and pcd.method_ == "pcd"
    assert texts["syn"].startswith("SyntheticRelease(MST: 3 marginals chosen, 7 tables")


def test_aim_history_has_the_one_way_round_first():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 2000)
    df = pd.DataFrame({"A": a, "B": (a + (rng.random(2000) < 0.1)) % 2, "C": rng.integers(0, 3, 2000)})
    rel = pa.aim_release(df, {"A": [0, 1], "B": [0, 1], "C": [0, 1, 2]}, rho=1.0, workload=2, seed=1, estimator="rounds", progress=False)
    assert len(rel.history) == len(rel.selected) + 1 and rel.history[0]["clique"] is None
    assert [h["clique"] for h in rel.history[1:]] == [s.clique for s in rel.selected]
    assert "one entry more than ``selected``" in pa.SyntheticRelease.__doc__
