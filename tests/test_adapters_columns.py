"""The column layer (ppgm.adapters.columns): schemas as users write them, records read once and coded, numbers
decoded inside their bins; and the private entry points that take numeric columns (release_tables, mst_release,
aim_release, ppgm synthesize) with the bins' cost on the ledger and their sensitivity checked."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import ppgm.adapters as pa
from ppgm.adapters.columns import Categorical, Numeric, Schema, column_spec
from ppgm.adapters.private import _private_bins, read_release
from ppgm.privacy.mechanisms import GaussianMechanism

SCHEMA = {"sex": ["F", "M"], "age": {"min": 17, "max": 90, "integer": True}, "income": {"min": 0, "max": 200_000}}


def mixed(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    age = np.clip(np.round(rng.normal(40, 12, n)), 17, 90).astype(int)
    income = np.clip(rng.lognormal(10 + 0.01 * (age - 40) + 0.2 * (sex == "M"), 0.6), 0, 200_000)
    return pd.DataFrame({"sex": sex, "age": age, "income": income})


def test_specs_as_written_and_errors_that_name_the_column():
    assert column_spec("a", ["x", "y"]) == Categorical(("x", "y"))
    assert column_spec("a", {"states": ["x"], "missing": True}).names == ["x", "<missing>"]
    n = column_spec("h", {"edges": [0, 40, 99], "integer": True})
    assert (n.min, n.max, n.edges, n.integer) == (0.0, 99.0, (0.0, 40.0, 99.0), True)
    with pytest.raises(ValueError, match=r"state_names\['h'\]: unknown keys \['maxx'\]"):
        column_spec("h", {"min": 0, "maxx": 3})
    with pytest.raises(ValueError, match=r"state_names\['h'\]: expected min < max"):
        column_spec("h", {"min": 3, "max": 3})
    with pytest.raises(TypeError, match=r"state_names\['h'\]\['max'\]"):
        column_spec("h", {"min": 0, "max": "9"})
    with pytest.raises(ValueError, match=r"'bins' or 'edges', not both"):
        column_spec("h", {"min": 0, "max": 9, "bins": 3, "edges": [0, 5, 9]})
    with pytest.raises(ValueError, match="integer column needs whole-number"):
        column_spec("h", {"min": 0.5, "max": 9, "integer": True})


def test_read_encode_decode_round_trip_keeps_kinds_and_bins():
    s = Schema.parse({"sex": ["F", "M"], "age": {"min": 0, "max": 99, "integer": True, "edges": [0, 18, 65, 99]},
                      "w": {"min": 0.0, "max": 1.0, "bins": 4, "missing": True}}).public_bins()
    df = pd.DataFrame({"sex": ["M", "F", "F"], "age": ["17", "18", "120"], "w": [0.3, None, -1.0]}, index=[5, 6, 7])
    r = s.read(df)
    assert not r.unknown.any()
    codes = s.encode(r)
    assert codes.tolist() == [[1, 0, 1], [0, 1, 4], [0, 2, 0]]  # 120 clipped to 99; -1 to 0; None the missing state
    assert s.domain.state_names["age"] == ("0-17", "18-64", "65-99")
    out = s.decode(codes, np.random.default_rng(0))
    assert out["sex"].tolist() == ["M", "F", "F"] and out["age"].dtype == np.int64
    assert 0 <= out["age"][0] <= 17 and 18 <= out["age"][1] <= 64 and 65 <= out["age"][2] <= 99
    assert 0.25 <= out["w"][0] < 0.5 and np.isnan(out["w"][1]) and 0 <= out["w"][2] < 0.25
    assert df["age"].tolist() == ["17", "18", "120"]  # the caller's frame is untouched


def test_unknown_cells_are_named():
    s = Schema.parse({"sex": ["F", "M"], "age": {"min": 0, "max": 99, "bins": 2}}).public_bins()
    with pytest.raises(ValueError, match=r"numeric column 'age' has values that are not numbers, e.g. \['old'\]"):
        s.read(pd.DataFrame({"sex": ["F"], "age": ["old"]})).check()
    with pytest.raises(ValueError, match=r"column 'age' has missing values"):
        s.read(pd.DataFrame({"sex": ["F"], "age": [None]})).check()
    with pytest.raises(ValueError, match=r"column 'sex' has values \['X'\]"):
        s.read(pd.DataFrame({"sex": ["X"], "age": [3]})).check()
    with pytest.raises(ValueError, match="not numbers"):  # booleans are not numbers
        s.read(pd.DataFrame({"sex": ["F"], "age": [True]})).check()


def test_release_tables_with_public_numeric_bins_counts_by_bin():
    df = mixed(500)
    spec = {"sex": ["F", "M"], "age": {"min": 17, "max": 90, "integer": True, "edges": [17, 30, 50, 90]}}
    b = pa.bounded_tables(df, [("sex", "age")], state_names=spec)
    ref = pd.crosstab(df["sex"], pd.cut(df["age"], [16, 29, 49, 90])).to_numpy()
    assert np.array_equal(np.asarray(b.tables[0].values), ref)
    assert b.domain.state_names["age"] == ("17-29", "30-49", "50-90")


def test_auto_bins_need_a_budget_and_the_ledger_names_it():
    df = mixed(800)
    with pytest.raises(ValueError, match=r"numeric columns \['age', 'income'\] have bins 'auto'"):
        pa.release_tables(df, [("sex", "age"), ("age", "income")], pa.LaplaceMechanism(1.0), state_names=SCHEMA)
    acc = pa.PrivacyAccountant(epsilon=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = pa.release_tables(df, [("sex", "age"), ("age", "income")], pa.LaplaceMechanism(1.0), state_names=SCHEMA,
                                bins_mechanism=pa.LaplaceMechanism(0.5), accountant=acc, seed=0)
    assert [p["what"] for p in rel.spent] == ["numeric columns' fine histograms (2)", "tables"]
    assert acc.spent == pytest.approx(1.5)
    assert rel.domain.cards[rel.domain.index("income")] >= 4


def test_private_bins_move_by_one_record_as_the_ledger_says():
    """Neighbouring data sets: one record removed changes each numeric column's fine histogram in one
    cell by one (L1 sensitivity 1 per table, as the mechanism is charged), and nothing else reaches the bins."""
    df = mixed(400, seed=2)
    seen = []

    class Capture(GaussianMechanism):
        def measure(self, tables, rng=None, contribution=1.0, n=None, members=None):
            seen.append([np.asarray(t.values, dtype=float) for t in tables])
            return super().measure(tables, np.random.default_rng(0), contribution, n, members)

    def bins_of(frame):
        r = read_release(frame, [("sex", "age", "income")], SCHEMA)
        keep = r.known()
        schema, _ = _private_bins(r.schema, r, keep, None, 1.0, Capture(rho=1.0), None)
        return schema

    full = bins_of(df)
    for i in (0, 17, 399):
        bins_of(df.drop(index=df.index[i]))
        diffs = [a - b for a, b in zip(seen[0], seen[-1])]
        assert all(np.abs(d).sum() == 1 and d.max() == 1 for d in diffs)
    # the same noise on the same histograms gives the same bins: the bins read nothing but the noisy counts
    again = bins_of(df)
    assert all(np.array_equal(full.bins[c].edges, again.bins[c].edges) for c in ("age", "income"))


def test_bounded_contributions_bound_the_fine_histograms_too():
    df = mixed(300, seed=4)
    df["who"] = np.repeat(np.arange(100), 3)
    r = read_release(df, [("sex", "age")], SCHEMA)
    seen = []

    class Capture(GaussianMechanism):
        def measure(self, tables, rng=None, contribution=1.0, n=None, members=None):
            seen.append(contribution)
            return super().measure(tables, np.random.default_rng(0), contribution, n, members)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = pa.bounded_tables(r, [("sex", "age")], individuals="who", max_contributions=2, seed=0,
                              bins_mechanism=Capture(rho=1.0), noise_seed=np.random.default_rng(0))
    assert seen == [2.0] and b.n_records == 200
    assert sum(m.values.sum() for m in b.bins[:1]) == pytest.approx(200, abs=200)  # noisy, but over the kept records


@pytest.mark.parametrize("release", ["mst", "aim"])
def test_synthetic_copies_keep_numbers_as_numbers_inside_the_public_range(release):
    df = mixed(3000)
    kw = dict(rho=1.0, seed=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = (pa.mst_release(df, SCHEMA, estimator="naive", **kw) if release == "mst"
               else pa.aim_release(df, SCHEMA, workload=2, estimator="rounds", **kw))
    syn = rel.synthetic
    assert syn["age"].dtype == np.int64 and syn["income"].dtype == float and set(syn["sex"]) <= {"F", "M"}
    assert syn["age"].between(17, 90).all() and syn["income"].between(0, 200_000).all()
    parts = rel.report()["parts"]
    assert parts[0]["what"] == "numeric columns' fine histograms (2)" and parts[0]["rho"] == pytest.approx(0.1)
    assert sum(p["rho"] for p in parts) == pytest.approx(1.0)
    assert rel.report()["numeric"]["income"]["edges"][0] == 0.0
    # the copy is close: medians and the sex-income association (log income gap of 0.2)
    assert abs(syn["age"].median() - df["age"].median()) <= 2
    assert abs(np.log(syn["income"]).median() - np.log(df["income"]).median()) < 0.1
    gap = np.log(syn.groupby("sex")["income"].median()).diff().iloc[-1]
    assert 0.05 < gap < 0.35


def test_synthesize_command_writes_numbers_as_numbers(tmp_path):
    from ppgm.adapters.cli import main

    df = mixed(1500)
    df.to_csv(tmp_path / "records.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps(SCHEMA))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["synthesize", str(tmp_path / "records.csv"), "--domain", str(tmp_path / "domain.json"), "--rho", "1",
                     "--estimator", "naive", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    out = pd.read_csv(tmp_path / "out" / "synthetic.csv")
    assert out["age"].dtype == np.int64 and out["income"].dtype == float
    assert out["age"].between(17, 90).all()
    report = json.loads((tmp_path / "out" / "privacy_report.json").read_text())
    assert report["parts"][0]["what"].startswith("numeric columns") and "income" in report["numeric"]


def test_feature_encoder_lives_in_the_column_layer():
    from ppgm.adapters import aggregated, columns

    assert aggregated.FeatureEncoder is columns.FeatureEncoder is pa.FeatureEncoder
    assert isinstance(Numeric(0, 1), Numeric)
