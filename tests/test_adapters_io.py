"""Inputs as users have them and results out: aggregates from a platform's long table, a Markov
network from its cliques and states, records read from CSV with every cell as written, and tables
as long DataFrames. Each is checked against an independent reference: the same rows through
``aggregate``, a network built by hand in pgmpy's idiom, the file's bytes, pgmpy's ``get_value``."""

from __future__ import annotations

import json
import warnings
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from pgmpy.factors.discrete import DiscreteFactor, TabularCPD
from pgmpy.models import DiscreteMarkovNetwork

import ppgm
import ppgm.adapters as pa

FEATURES = ["site", "hour", "mobile"]


@pytest.fixture(scope="module")
def clicks():
    """Rows of a click log (text, small integers and booleans as features, a 0 / 1 label) and the
    platform's long report of them, built with pandas' groupby (not with ppgm)."""
    rng = np.random.default_rng(0)
    n = 3000
    df = pd.DataFrame({"site": rng.choice(["news", "shop", "blog"], n), "hour": rng.integers(0, 4, n), "mobile": rng.random(n) < 0.4})
    df["y"] = (rng.random(n) < 0.05 + 0.1 * (df.site == "shop") + 0.05 * df.hour * df.mobile).astype(int)
    rows = []
    for f in FEATURES:
        g = df.groupby(f)["y"].agg(["size", "sum"]).reset_index()
        rows.append(pd.DataFrame({"feature_a": f, "value_a": g[f], "feature_b": None, "value_b": None, "count": g["size"], "clicks": g["sum"]}))
    for f, h in combinations(FEATURES, 2):
        g = df.groupby([f, h])["y"].agg(["size", "sum"]).reset_index()
        rows.append(pd.DataFrame({"feature_a": f, "value_a": g[f], "feature_b": h, "value_b": g[h], "count": g["size"], "clicks": g["sum"]}))
    return df, pd.concat(rows, ignore_index=True)


def _same_aggregates(a, b):
    assert (a.features, a.label, a.positive, a.negative, a.n, a.private) == (b.features, b.label, b.positive, b.negative, b.n, b.private)
    assert a.encoders == b.encoders
    assert [t.variables for t in a.tables] == [t.variables for t in b.tables]
    for s, t in zip(a.tables, b.tables):
        assert np.array_equal(s.values, t.values) and np.array_equal(s.label_sums, t.label_sums)
        assert (s.noise, s.scale, s.n) == (t.noise, t.scale, t.n)


def _as_days(long: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The report as a platform sends it: rows shuffled, every cell split over two days, and half of
    the pair rows written the other way round."""
    rng = np.random.default_rng(seed)
    first = long.copy()
    first["count"] = rng.binomial(long["count"], 0.5)
    first["clicks"] = np.minimum(rng.binomial(long["clicks"], 0.5), first["count"])
    second = long.copy()
    second["count"] -= first["count"]
    second["clicks"] -= first["clicks"]
    days = pd.concat([first, second], ignore_index=True)
    flip = days["feature_b"].notna() & (rng.random(len(days)) < 0.5)
    days.loc[flip, ["feature_a", "value_a", "feature_b", "value_b"]] = days.loc[flip, ["feature_b", "value_b", "feature_a", "value_a"]].to_numpy()
    return days.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def test_aggregates_from_a_long_table_are_those_of_the_rows_and_fit_the_same_classifier(clicks):
    df, long = clicks
    direct = pa.aggregate(df, label="y")
    reported = pa.Aggregates.from_table(_as_days(long, 1), label="y", features=FEATURES)
    _same_aggregates(reported, direct)
    # singles derived from the pairs when the report has none
    _same_aggregates(pa.Aggregates.from_table(long[long["feature_b"].notna()], label="y", features=FEATURES), direct)
    # and the aggregates written out as a long table come back as they were
    _same_aggregates(pa.Aggregates.from_table(direct.to_table(), label="y"), direct)
    fits = [pa.MaxEntClassifier(n_chains=300, max_iter=20, seed=3, progress=False, method="pcd").fit(a) for a in (direct, reported)]
    p = [clf.predict_proba(df.drop(columns="y")) for clf in fits]
    assert np.array_equal(p[0], p[1]) and fits[0].history_["d_error"] == fits[1].history_["d_error"]


def test_a_long_table_from_a_csv_of_text_reads_the_same_states(clicks, tmp_path):
    df, long = clicks
    long.to_csv(tmp_path / "report.csv", index=False)
    text = pa.read_records(tmp_path / "report.csv", missing=[""])
    text[["count", "clicks"]] = text[["count", "clicks"]].astype(int)
    from_text = pa.Aggregates.from_table(text, label="y", categories={"hour": [0, 1, 2, 3]})
    _same_aggregates(from_text, pa.aggregate(df, label="y", categories={"hour": [0, 1, 2, 3]}))
    assert from_text.encoders["mobile"].states == ["False", "True"]


def test_a_long_table_that_counts_different_records_is_refused(clicks):
    df, long = clicks
    bad = long.copy()
    bad.loc[(bad["feature_a"] == "site") & bad["feature_b"].isna(), "count"] += 1  # singles of site disagree with its pairs
    with pytest.raises(ValueError, match=r"table: the counts of 'site' summed over the pair \('site', 'hour'\) disagree with its single rows"):
        pa.Aggregates.from_table(bad, label="y")
    over = long.copy()
    over.loc[0, "clicks"] = over.loc[0, "count"] + 1
    with pytest.raises(ValueError, match="label_sums: row 0 has .* a label sum is at most its count"):
        pa.Aggregates.from_table(over)
    with pytest.raises(ValueError, match=r"table: columns \['clicks'\] are missing"):
        pa.Aggregates.from_table(long.drop(columns="clicks"))
    with pytest.raises(ValueError, match="positive, negative: expected two different label values"):
        pa.Aggregates.from_table(long, positive=1, negative=1.0)
    mixed = long.astype({"value_a": object})
    mixed.loc[(mixed["feature_a"] == "hour"), "value_a"] = mixed.loc[(mixed["feature_a"] == "hour"), "value_a"].astype(str)
    with pytest.raises(ValueError, match="table: column 'hour' mixes kinds of values"):
        pa.Aggregates.from_table(mixed)
    self_pair = long.copy()
    self_pair.loc[len(long) - 1, "feature_b"] = self_pair.loc[len(long) - 1, "feature_a"]
    with pytest.raises(ValueError, match="pairs feature .* with itself"):
        pa.Aggregates.from_table(self_pair)
    noisy = long[long["feature_b"].notna()]
    with pytest.raises(ValueError, match="singles derived from noisy pairs"):
        pa.Aggregates.from_table(noisy, noise="laplace", scale=1.0)


def test_rows_whose_label_values_are_not_the_aggregates_are_refused_not_scored_as_negatives(clicks):
    df, long = clicks
    text = df.assign(y=df["y"].map({1: "click", 0: "none"}))
    agg = pa.Aggregates.from_table(long, label="y")          # the report's sums count y == 1
    clf = pa.MaxEntClassifier(n_chains=300, max_iter=20, seed=3, progress=False).fit(agg)
    with pytest.raises(ValueError, match=r"df\['y'\]: label values \['click', 'none'\] are neither positive=1 nor negative=0"):
        clf.score(text)
    with pytest.raises(ValueError, match=r"y: label values \['2'\] are neither"):
        clf.score(df.drop(columns="y"), df["y"].replace({0: 2}))
    # named as the rows have them, the same fit scores the same
    named = pa.Aggregates.from_table(long, label="y", positive="click", negative="none")
    clf_named = pa.MaxEntClassifier(n_chains=300, max_iter=20, seed=3, progress=False).fit(named)
    assert clf_named.score(text) == clf.score(df)
    assert clf.score(df.drop(columns="y"), df["y"]) == clf.score(df)


def test_noisy_long_tables_carry_their_noise_into_the_fit(clicks):
    df, long = clicks
    rng = np.random.default_rng(5)
    noisy = long.assign(count=long["count"] + rng.laplace(0, 2.0, len(long)), clicks=long["clicks"] + rng.laplace(0, 2.0, len(long)))
    agg = pa.Aggregates.from_table(noisy, label="y", noise="laplace", scale=2.0)
    assert agg.n is None and all(t.noise == "laplace" and t.scale == 2.0 for t in agg)
    for t in agg:  # the noisy counts as written, cell by cell
        if len(t.variables) == 1:
            rows = noisy[(noisy["feature_a"] == t.variables[0]) & noisy["feature_b"].isna()]
            assert sorted(t.values.tolist()) == sorted(rows["count"].tolist())


def test_a_network_from_cliques_and_states_is_the_one_users_build_by_hand():
    states = {"A": ["lo", "hi"], "B": [0, 1, 2], "C": [True, False], "D": ["x", "y"]}
    cliques = [("A", "B"), ("B", "C"), ("C", "D")]
    mn = pa.markov_network(cliques, states)
    by_hand = DiscreteMarkovNetwork([("A", "B"), ("B", "C"), ("C", "D")])
    by_hand.add_factors(*(DiscreteFactor(list(c), [len(states[v]) for v in c], np.ones(int(np.prod([len(states[v]) for v in c]))),
                                         state_names={v: states[v] for v in c}) for c in cliques))
    assert list(mn.nodes()) == ["A", "B", "C", "D"] and sorted(map(sorted, mn.edges())) == sorted(map(sorted, by_hand.edges()))
    assert mn.check_model() and pa.declared_states(mn) == states
    truth = pa.dirichlet_chain_network(4, 2, seed=1)  # records with B's state 2 never seen: the declared domain keeps it
    codes = ppgm.sample(pa.to_engine(truth), 4000, seed=2)
    df = pd.DataFrame({v: np.asarray(states[v], dtype=object)[codes[:, j] % len(states[v])] for j, v in enumerate("ABCD")})
    df["C"] = df["C"].astype(bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = [pa.release_tables(df, m, pa.LaplaceMechanism(1.0), seed=4, publish_n="public") for m in (mn, by_hand)]
    assert [f.state_names for f in rel[0]] == [f.state_names for f in rel[1]]
    assert all(np.array_equal(a.values, b.values) for a, b in zip(rel[0], rel[1]))
    for fit in (lambda m, r: pa.NaiveMLEEstimator(m).estimate(r, l2="paper"),
                lambda m, r: pa.CGMEstimator(m).estimate(r, max_iter=3, stop="converged", progress=False),
                lambda m, r: pa.MarkovNetworkEstimator(m).estimate(df, progress=False)):
        a, b = fit(mn, rel[0]), fit(by_hand, rel[1])
        for fa, fb in zip(a.get_factors(), b.get_factors()):
            assert fa.variables == fb.variables and fa.state_names == fb.state_names
            np.testing.assert_array_equal(fa.values, fb.values)


def test_a_network_from_cliques_refuses_what_it_cannot_mean():
    with pytest.raises(TypeError, match="cliques: expected a list of cliques"):
        pa.markov_network(("A", "B"), {"A": [0, 1], "B": [0, 1]})
    with pytest.raises(ValueError, match=r"state_names: the states of \['B'\] are not given"):
        pa.markov_network([("A", "B")], {"A": [0, 1]})
    with pytest.raises(ValueError, match=r"state_names: \['C'\] are in no clique"):
        pa.markov_network([("A", "B")], {"A": [0, 1], "B": [0, 1], "C": [0, 1]})
    with pytest.raises(ValueError, match=r"cliques: \('B', 'A'\) \(cliques\[1\]\) repeats cliques\[0\]"):
        pa.markov_network([("A", "B"), ("B", "A")], {"A": [0, 1], "B": [0, 1]})
    with pytest.raises(ValueError, match=r"state_names\['A'\]: mixes kinds of values"):
        pa.markov_network([("A", "B")], {"A": [0, "1"], "B": [0, 1]})
    with pytest.raises(ValueError, match=r"state_names\['A'\]: expected at least one name"):
        pa.markov_network([("A", "B")], {"A": [], "B": [0, 1]})


CSV = "flag,code,score,note\nTRUE,01,1.0,None\nFALSE,1,1,NA\nTRUE,NA,,n/a\n"


def test_records_are_read_as_written_unless_a_marker_is_named(tmp_path):
    path = tmp_path / "survey.csv"
    path.write_text(CSV)
    plain = pd.read_csv(path)  # what pandas does: booleans, numbers, missing values
    assert plain["flag"].dtype == bool and plain["code"].tolist()[:2] == [1.0, 1.0] and plain["note"].isna().all()
    kept = pa.read_records(path)
    assert kept.values.tolist() == [row.split(",") for row in CSV.strip().split("\n")[1:]]
    assert list(kept.columns) == ["flag", "code", "score", "note"]
    marked = pa.read_records(path, missing=["NA", ""])
    assert marked["code"].tolist() == ["01", "1", None] and marked["score"].tolist() == ["1.0", "1", None]
    assert marked["note"].tolist() == ["None", None, "n/a"]
    assert pa.read_records(path, missing="n/a", columns=["note"])["note"].tolist() == ["None", "NA", None]
    # the states stay distinct through a count: 01 and 1 are two codes, None is a state
    tables = pa.contingency_tables(kept, [("code",), ("note",)])
    assert tables[0].state_names["code"] == ["01", "1", "NA"] and tables[1].state_names["note"] == ["NA", "None", "n/a"]
    (tmp_path / "twice.csv").write_text("a,b,a\n1,2,3\n")
    with pytest.raises(ValueError, match=r"path: the header repeats the column names \['a'\]"):
        pa.read_records(tmp_path / "twice.csv")
    with pytest.raises(TypeError, match="missing: expected a marker"):
        pa.read_records(path, missing=[None])
    with pytest.raises(FileNotFoundError, match="path: no file"):
        pa.read_records(tmp_path / "nowhere.csv")
    with pytest.raises(ValueError, match=r"columns: \['zz'\] are not in the file's header"):
        pa.read_records(path, columns=["zz"])


def test_the_command_line_keeps_the_states_as_written(tmp_path):
    from ppgm.adapters.cli import main

    rng = np.random.default_rng(0)
    n = 2000
    flag = rng.choice(["TRUE", "FALSE"], n)
    code = np.where(rng.random(n) < 0.5, "01", np.where(rng.random(n) < 0.5, "1", "NA"))
    note = np.where(flag == "TRUE", "None", "n/a")
    pd.DataFrame({"flag": flag, "code": code, "note": note}).to_csv(tmp_path / "data.csv", index=False)
    domain = {"flag": ["TRUE", "FALSE"], "code": ["01", "1", "NA"], "note": ["None", "n/a"]}
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    args = ["synthesize", str(tmp_path / "data.csv"), "--domain", str(tmp_path / "domain.json"), "--rho", "1.0",
            "--estimator", "naive", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "kept")]) == 0
    syn = pa.read_records(tmp_path / "kept" / "synthetic.csv")
    assert set(syn["code"]) == {"01", "1", "NA"} and set(syn["note"]) == {"None", "n/a"}
    assert abs((syn["note"] == "None").mean() - (note == "None").mean()) < 0.05
    # NA named as a missing marker: a record without a code stops the release, or is dropped
    with pytest.raises(ValueError, match="data: column 'code' has missing values"):
        main(args + ["--out", str(tmp_path / "stop"), "--missing", "NA"])
    assert main(args + ["--out", str(tmp_path / "drop"), "--missing", "NA", "--drop-unknown"]) == 0
    release = pa.NoisyTables.load(tmp_path / "drop" / "release.npz")
    one_way = {f.variables: f for f in release if len(f.variables) == 1}
    assert abs(one_way[("flag",)].values.sum() - (code != "NA").sum()) < 60  # the dropped records are not counted


def _check_rows(frame, factor, value="value"):
    assert len(frame) == factor.values.size
    for row in frame.to_dict("records"):
        assert row[value] == factor.get_value(**{v: row[v] for v in factor.variables})


def test_a_factor_as_a_long_table_holds_every_cell_with_its_states():
    rng = np.random.default_rng(0)
    names = {"A": ["z", "a", "m"], "B": [10, 2], "C": [True, False]}
    f = DiscreteFactor(["A", "B", "C"], [3, 2, 2], rng.random(12), state_names=names)
    frame = pa.to_frame(f, value="p")
    assert list(frame.columns) == ["A", "B", "C", "p"] and frame["B"].dtype == np.int64 and frame["C"].dtype == bool
    _check_rows(frame, f, "p")
    cpd = TabularCPD("A", 2, [[0.2, 0.7], [0.8, 0.3]], evidence=["B"], evidence_card=[2], state_names={"A": ["x", "y"], "B": [0, 1]})
    _check_rows(pa.to_frame(cpd), cpd)
    # a set of marginals: one long table, the tables told apart by position or key
    asia = pa.load_bif_example("asia")
    marginals = pa.LogBeliefPropagation(asia).query(["xray", "smoke", "lung"], joint=False)
    long = pa.to_frame(marginals, value="probability")
    assert list(long.columns) == ["table", "xray", "smoke", "lung", "probability"] and len(long) == 6
    for key, factor in marginals.items():
        _check_rows(long[long["table"] == key].dropna(axis=1), factor, "probability")
    counts = pa.contingency_tables(pa.sample(asia, 500, seed=0), [("xray", "smoke"), ("lung",)])
    long = pa.to_frame(counts, value="count")
    assert long.groupby("table")["count"].sum().tolist() == [500.0, 500.0]
    _check_rows(long[long["table"] == 0].drop(columns=["table", "lung"]), counts[0], "count")


def test_releases_and_engine_results_as_long_tables():
    chain = pa.dirichlet_chain_network(3, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = pa.release_tables(pa.sample(chain, 300, seed=1), chain, pa.LaplaceMechanism(1.0), seed=2)
    long = pa.to_frame(rel, value="noisy count")
    for k, f in enumerate(rel):
        part = long[long["table"] == k]
        np.testing.assert_array_equal(part["noisy count"].to_numpy(), f.values.ravel())
        factor = DiscreteFactor(list(f.variables), list(f.values.shape), f.values, state_names=f.state_names)
        _check_rows(part.dropna(axis=1).drop(columns="table"), factor, "noisy count")
    engine = pa.to_engine(chain)
    m = ppgm.infer(engine).marginal(("X1", "X0"))
    frame = pa.to_frame(m, domain=engine.domain)
    reference = pa.LogBeliefPropagation(chain).query(["X1", "X0"])
    for row in frame.to_dict("records"):
        assert row["value"] == pytest.approx(reference.get_value(X1=row["X1"], X0=row["X0"]), abs=1e-12)
    assert pa.to_frame(m)["X1"].tolist() == [0, 0, 1, 1]  # no domain: the codes
    with pytest.raises(ValueError, match="value: 'A' is also a variable"):
        pa.to_frame(DiscreteFactor(["A"], [2], [1, 2]), value="A")
    with pytest.raises(TypeError, match="tables: expected a pgmpy DiscreteFactor"):
        pa.to_frame("f")
    with pytest.raises(ValueError, match="tables: expected at least one table"):
        pa.to_frame([])
