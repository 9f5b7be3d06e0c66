"""ppgm.adapters.aggregate / MaxEntClassifier on DataFrames, the pgmpy export checked with pgmpy."""

import warnings

import numpy as np
import pandas as pd
import pytest
from pgmpy.inference import VariableElimination

from ppgm.adapters import Aggregates, LaplaceMechanism, MaxEntClassifier, PrivacyAccountant, aggregate, load_adult


def _frame(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "age": rng.normal(40, 12, n).round(),
        "job": rng.choice(["clerk", "nurse", "smith"], n),
        "city": rng.choice(["A", "B", None], n, p=[0.5, 0.4, 0.1]),
    })
    logit = -1 + 0.04 * (df["age"] - 40) + 1.2 * (df["job"] == "nurse") - 0.8 * (df["city"] == "B")
    df["y"] = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return df


def test_aggregate_encodes_bins_categories_and_missing(tmp_path):
    df = _frame()
    agg = aggregate(df, label="y", bins=5, positive="yes")
    assert agg.features == ("age", "job", "city")
    assert agg.encoders["city"].states == ["A", "B", "<missing>"] and len(agg.encoders["age"].states) == 5
    assert len(agg) == 3 + 3
    yes = (df["y"] == "yes").sum()
    for t in agg:
        assert t.values.sum() == len(df) and t.label_sums.sum() == yes
    path = tmp_path / "agg.npz"
    agg.save(path)
    back = Aggregates.load(path)
    assert back.features == agg.features and back.encoders["age"].edges == agg.encoders["age"].edges
    for a, b in zip(agg, back):
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.label_sums, b.label_sums)
    np.testing.assert_array_equal(back.encode(df), agg.encode(df))


def test_classifier_round_trip_through_pgmpy_and_sklearn_conventions():
    df = _frame()
    agg = aggregate(df, label="y", bins=4, positive="yes")
    clf = MaxEntClassifier(n_chains=3000, max_iter=120, progress=False)
    assert clf.get_params()["n_chains"] == 3000
    clf.set_params(max_iter=100)
    with pytest.raises(ValueError, match="unknown parameter"):
        clf.set_params(nonsense=1)
    clf.fit(agg, eval_set=df.iloc[:1000], eval_every=50)
    assert [s for s, _ in clf.history_["nllh"]] == [50, 100] and clf.score(df) > 0.05
    p = clf.predict_proba(df.iloc[:20])[:, 1]
    assert set(clf.predict(df.iloc[:20])) <= set(clf.classes_)
    mn = clf.to_markov_network()
    ve = VariableElimination(mn)
    codes_df = df.iloc[:20]
    for i in range(5):
        row = codes_df.iloc[i]
        ev = {f: agg.encoders[f].states[int(agg.encode(codes_df.iloc[[i]])[0, j])] for j, f in enumerate(agg.features)}
        q = ve.query(["y"], evidence=ev, show_progress=False)
        q.normalize()
        assert q.get_value(y=1) == pytest.approx(p[i], abs=1e-9)


def test_unseen_values_fall_back_with_a_warning_and_missing_columns_fail():
    df = _frame(2000)
    clf = MaxEntClassifier(n_chains=1000, max_iter=20, progress=False).fit(aggregate(df, label="y", positive="yes"))
    new = df.iloc[:3].copy()
    new.loc[new.index[0], "job"] = "astronaut"
    with pytest.warns(UserWarning, match="not seen"):
        p = clf.predict_proba(new)
    base = new.copy()
    base.loc[base.index[0], "job"] = None  # not a category of job either: same fallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert clf.predict_proba(base)[0, 1] == pytest.approx(p[0, 1])
    with pytest.raises(ValueError, match="missing"):
        clf.predict_proba(df[["age", "job"]])
    with pytest.raises(ValueError, match="binary"):
        aggregate(df.assign(y=np.arange(len(df)) % 3), label="y")
    with pytest.raises(ValueError, match="label"):
        aggregate(df, label="income")
    with pytest.raises(TypeError, match="Aggregates"):
        MaxEntClassifier().fit(df)


def test_noisy_aggregates_charge_the_accountant_and_train():
    df = _frame(3000)
    acc = PrivacyAccountant(epsilon=2.0)
    agg = aggregate(df, label="y", positive="yes", mechanism=LaplaceMechanism(1.0), seed=0, accountant=acc)
    assert agg.n is None and acc.remaining == pytest.approx(1.0)
    assert all(t.noise == "laplace" and t.scale == pytest.approx(2 * len(agg)) for t in agg)
    with_model = MaxEntClassifier(n_chains=2000, max_iter=60, progress=False).fit(agg)
    ignored = MaxEntClassifier(n_chains=2000, max_iter=60, progress=False, noise_model=False).fit(agg)
    for clf in (with_model, ignored):
        p = clf.predict_proba(df)[:, 1]
        assert np.isfinite(p).all()


def test_adult_is_bundled_and_aggregates():
    train, test = load_adult()
    agg = aggregate(train, label="income")
    assert agg.positive == ">50K" and len(agg) == 14 + 91
    assert agg.tables[0].label_sums.sum() == (train["income"] == ">50K").sum()
