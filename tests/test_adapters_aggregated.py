"""ppgm.adapters.aggregate / MaxEntClassifier on DataFrames, the pgmpy export checked with pgmpy."""

import warnings

import numpy as np
import pandas as pd
import pytest
from pgmpy.inference import VariableElimination

from ppgm.adapters import (
    Aggregates,
    BudgetExceeded,
    LaplaceMechanism,
    MaxEntClassifier,
    NotPrivateWarning,
    PrivacyAccountant,
    adult_schema,
    aggregate,
    load_adult,
)


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
    clf = MaxEntClassifier(n_chains=3000, max_iter=120, progress=False, method="pcd")
    assert clf.get_params()["n_chains"] == 3000
    clf.set_params(max_iter=100)
    with pytest.raises(ValueError, match="Invalid parameter"):
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


PUBLIC = dict(bounds={"age": (0, 100)}, categories={"job": ["clerk", "nurse", "smith", "pilot"], "city": ["A", "B"]},
              missing=["city"], positive="yes")


def test_noisy_aggregates_are_private_end_to_end_and_train():
    df = _frame(3000)
    acc = PrivacyAccountant(epsilon=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        agg = aggregate(df, label="y", mechanism=LaplaceMechanism(1.0), accountant=acc, bins=5, **PUBLIC)
    assert agg.private and agg.n is None and acc.remaining == pytest.approx(1.0)
    assert agg.spent == ({"what": "aggregates", "epsilon": 1.0},)
    # the encodings are the public ones, not the data's: a category the data never shows is kept
    assert agg.encoders["job"].states == ["clerk", "nurse", "smith", "pilot"]
    assert agg.encoders["age"].edges == [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    assert agg.encoders["city"].states == ["A", "B", "<missing>"]
    assert all(t.noise == "laplace" and t.integer and t.scale == pytest.approx(2 * len(agg)) for t in agg)
    with_model = MaxEntClassifier(n_chains=2000, max_iter=60, progress=False).fit(agg)
    ignored = MaxEntClassifier(n_chains=2000, max_iter=60, progress=False, noise_model=False).fit(agg)
    for clf in (with_model, ignored):
        p = clf.predict_proba(df)[:, 1]
        assert np.isfinite(p).all()


def test_private_aggregates_need_public_encodings_and_charge_every_part():
    df = _frame(3000)
    mech = LaplaceMechanism(1.0)
    with pytest.raises(ValueError, match="column 'age' has no public encoding"):
        aggregate(df, label="y", mechanism=mech, positive="yes", categories=PUBLIC["categories"], missing=["city"])
    with pytest.raises(ValueError, match="positive"):
        aggregate(df, label="y", mechanism=mech, **{k: v for k, v in PUBLIC.items() if k != "positive"})
    with pytest.raises(ValueError, match=r"column 'city' has \d+ missing values \(None / NaN\) and its encoding no state for them"):
        aggregate(df, label="y", mechanism=mech, **{**PUBLIC, "missing": False})
    dropped = aggregate(df, label="y", mechanism=mech, on_unknown="drop", publish_n="public", **{**PUBLIC, "missing": False})
    assert dropped.n == df["city"].notna().sum() and dropped.spent[-1] == {"what": "N", "public": True}
    with pytest.raises(ValueError, match="quantile_epsilon"):
        aggregate(df, label="y", quantile_epsilon=0.1)
    acc = PrivacyAccountant(epsilon=1.5)
    q = aggregate(df, label="y", mechanism=mech, quantile_epsilon=0.3, publish_n=LaplaceMechanism(0.2), accountant=acc, bins=4, **PUBLIC)
    assert [p["what"].split(" ")[0] for p in q.spent] == ["quantile", "aggregates", "N"]
    assert acc.spent == pytest.approx(1.5)
    edges = q.encoders["age"].edges
    assert edges[0] == 0 and edges[-1] == 100 and 25 < edges[2] < 55  # private median of N(40, 12)
    with pytest.raises(BudgetExceeded):
        aggregate(df, label="y", mechanism=LaplaceMechanism(0.1), accountant=acc, **PUBLIC)


def test_adult_schema_gives_a_private_release():
    train, _ = load_adult()
    agg = aggregate(train.iloc[:3000], label="income", mechanism=LaplaceMechanism(1.0), **adult_schema())
    assert agg.private and agg.positive == ">50K" and len(agg) == 14 + 91
    assert agg.domain.cards[list(agg.features).index("native-country")] == 42


def test_adult_is_bundled_and_aggregates():
    train, test = load_adult()
    agg = aggregate(train, label="income")
    assert agg.positive == ">50K" and len(agg) == 14 + 91
    assert agg.tables[0].label_sums.sum() == (train["income"] == ">50K").sum()


def test_classes_follow_the_labels_whatever_their_values():
    """classes_ are the label values sorted as scikit-learn sorts them, predict_proba's columns follow
    them, predict returns label values; the same model whatever the labels are called."""
    from ppgm.adapters import Aggregates, MaxEntClassifier, aggregate

    rng = np.random.default_rng(0)
    a = rng.choice(["p", "q", "r"], 3000)
    y = rng.random(3000) < np.where(a == "p", 0.8, 0.2)
    kw = dict(n_chains=1000, max_iter=60, seed=0, progress=False)
    fits = {}
    for name, labels in {"01": y.astype(int), "words": np.where(y, "yes", "no"), "bool": y}.items():
        df = pd.DataFrame({"a": a, "y": labels})
        clf = MaxEntClassifier(**kw).fit(aggregate(df, label="y"))
        fits[name] = clf
        assert sorted(clf.classes_.tolist(), key=str) == sorted(set(labels.tolist()), key=str)
        assert (clf.predict(df) == labels).mean() > 0.75  # the Bayes rate is 0.8
    np.testing.assert_allclose(fits["01"].predict_proba(df), fits["words"].predict_proba(df))
    assert fits["words"].classes_.tolist() == ["no", "yes"]
    # positive declared as the smaller value: the columns still follow classes_
    df = pd.DataFrame({"a": a, "y": y.astype(int)})
    flipped = MaxEntClassifier(**kw).fit(aggregate(df, label="y", positive=0))
    assert flipped.classes_.tolist() == [0, 1]
    np.testing.assert_allclose(flipped.predict_proba(df), fits["01"].predict_proba(df), atol=0.03)


def test_save_and_load_keep_the_label_values_and_their_types(tmp_path):
    from ppgm.adapters import Aggregates, aggregate

    for labels in (np.array([0, 1, 1, 0]), np.array(["0", "1", "1", "0"]), np.array([True, False, True, True])):
        agg = aggregate(pd.DataFrame({"a": ["x", "y", "x", "y"], "y": labels}), label="y")
        agg.save(tmp_path / "agg.npz")
        back = Aggregates.load(tmp_path / "agg.npz")
        assert back.classes == agg.classes and [type(c) for c in back.classes] == [type(c) for c in agg.classes]
        assert back.positive == agg.positive and type(back.positive) is type(agg.positive)


def test_maxent_is_a_scikit_learn_classifier():
    """fit(X, y) on rows (aggregated inside: the model sees only the tables) gives the model that
    fit(aggregates) gives on the same rows; clone, Pipeline, cross_val_score and GridSearchCV work."""
    from sklearn.base import clone, is_classifier
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from ppgm.adapters import MaxEntClassifier, aggregate

    rng = np.random.default_rng(3)
    X = pd.DataFrame({"a": rng.choice(["p", "q", "r"], 2000), "b": rng.integers(0, 3, 2000)})
    y = pd.Series(np.where(rng.random(2000) < np.where(X["a"] == "p", 0.8, 0.2), "yes", "no"), name="y")
    clf = MaxEntClassifier(n_chains=500, max_iter=40, seed=0, progress=False)
    assert is_classifier(clf) and clone(clf).get_params() == clf.get_params()
    rows = clone(clf).fit(X, y)
    tables = clone(clf).fit(aggregate(X.assign(y=y), label="y"))
    np.testing.assert_array_equal(rows.predict_proba(X), tables.predict_proba(X))
    assert rows.classes_.tolist() == ["no", "yes"] and set(rows.predict(X)) <= {"no", "yes"}
    np.testing.assert_allclose(rows.predict_proba(X.to_numpy()), rows.predict_proba(X))  # arrays too, columns by position
    assert rows.score(X, y) == pytest.approx(rows.score(X.assign(y=y)))
    scores = cross_val_score(make_pipeline(FunctionTransformer(), clone(clf)), X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores)) and scores.mean() > 0.1
    grid = GridSearchCV(clf, {"l2_theta": [1.0, 30.0]}, cv=2).fit(X, y)
    assert grid.best_params_["l2_theta"] in (1.0, 30.0)
    with pytest.raises(ValueError, match="y: expected a binary label"):
        clone(clf).fit(X, np.arange(2000) % 3)
    with pytest.raises(ValueError, match="requires y"):
        clone(clf).fit(X)


def test_check_estimator_passes():
    """scikit-learn's own conformance suite, every check (none declared as an expected failure)."""
    from sklearn.utils.estimator_checks import check_estimator

    from ppgm.adapters import MaxEntClassifier

    results = check_estimator(MaxEntClassifier(n_chains=200, max_iter=20, progress=False), on_fail=None)
    failed = [f"{r['check_name']}: {r['exception']}" for r in results if r["status"] == "failed"]
    assert not failed, "\n".join(failed)
    assert sum(r["status"] == "passed" for r in results) >= 50


def test_quantile_and_kmeans_bins_spread_a_skewed_column():
    """A log-normal column: equal widths put almost every row in one bin, quantiles put a tenth in
    each, k-means lies between; the encoders are the fitted edges (and save / load them)."""
    from ppgm.adapters import FeatureEncoder, aggregate

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.lognormal(0, 1.5, 20_000), "y": rng.integers(0, 2, 20_000)})
    share = {}
    for strategy in ("uniform", "quantile", "kmeans"):
        agg = aggregate(df, label="y", bins=10, strategy=strategy)
        counts = agg.tables[0].values
        share[strategy] = counts.max() / counts.sum()
        edges = np.asarray(agg.encoders["x"].edges)
        np.testing.assert_array_equal(counts, np.bincount(agg.encode(df)[:, 0], minlength=counts.size))
    assert share["uniform"] > 0.9 and share["quantile"] == pytest.approx(0.1, abs=0.01) and share["quantile"] < share["kmeans"] < share["uniform"]
    q = FeatureEncoder.fit(df["x"], bins=10, strategy="quantile")
    np.testing.assert_allclose(q.edges, np.quantile(df["x"], np.linspace(0, 1, 11)))
    with pytest.raises(ValueError, match="strategy"):
        aggregate(df, label="y", strategy="equal")
