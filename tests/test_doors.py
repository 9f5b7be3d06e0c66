"""The classes of input that independent audits found answered silently, or with an error a user
cannot act on; one test per class (flags are in ``test_flags.py``; every entry point meets the
classes in ``fuzz_cases.py``). Each failed before its fix."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import pytest

import ppgm
import ppgm.adapters as pa
from ppgm.models.measurement import Measurement
from ppgm.models.random_models import third_order_chain
from ppgm.learners.release_rule import simulated_release


@pytest.fixture(scope="module")
def chain():
    model = pa.dirichlet_chain_network(4, 3, seed=0)
    return model, pa.sample(model, 400, seed=0)


@pytest.fixture(scope="module")
def asia():
    model = pa.load_bif_example("asia")
    return model, pa.sample(model, 300, seed=0)


def test_arguments_that_cannot_both_hold_or_do_nothing_are_refused(asia):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(200, 2)), columns=["a", "b"])
    with pytest.raises(ValueError, match="gamma, gamma_ratio: give one of them, not both"):
        pa.mer([df.iloc[:100], df.iloc[100:]], gamma=1.0, gamma_ratio=10.0)
    agg = pa.aggregate(asia[1], label="lung")
    with pytest.raises(ValueError, match="bins"):  # only fit(X, y) bins, but a wrong value is refused at every fit
        pa.MaxEntClassifier(bins=0, n_chains=20, max_iter=2, progress=False).fit(agg)
    with pytest.raises(ValueError, match="strategy"):
        pa.MaxEntClassifier(strategy="median", n_chains=20, max_iter=2, progress=False).fit(agg)


def test_missing_individual_ids_are_not_counted_as_one_person(chain):
    model, df = chain
    ids = np.where(np.arange(len(df)) % 7 == 0, np.nan, np.arange(len(df)) % 50)
    for fn in (lambda d: pa.bounded_tables(d, model, individuals="p", max_contributions=1),
               lambda d: pa.release_tables(d, model, pa.LaplaceMechanism(1.0), individuals="p", reweight=True, seed=0)):
        with pytest.raises(ValueError, match=r"individuals: 58 records have no id"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(df.assign(p=ids))


def test_infinite_values_are_named_at_fit_and_warned_at_predict():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=300), "b": rng.integers(0, 3, 300), "y": rng.integers(0, 2, 300)})
    bad = df.copy()
    bad.loc[3, "a"] = np.inf
    with pytest.raises(ValueError, match="column 'a' has 1 infinite values"):
        pa.aggregate(bad, label="y")
    clf = pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(pa.aggregate(df, label="y"))
    with pytest.warns(UserWarning, match="1 values in columns \\['a'\\] were not seen"):
        p = clf.predict_proba(bad.drop(columns="y"))
    finite = clf.predict_proba(bad.drop(columns="y").assign(a=np.where(np.isinf(bad["a"]), np.nan, bad["a"])))
    np.testing.assert_allclose(p[3], finite[3])  # an infinite value counts as unseen, like a missing one, not as the last bin


def test_duplicated_column_names_are_named_at_every_door(chain, asia):
    from pgmpy.models import DiscreteBayesianNetwork

    model, df = chain
    dd = pd.concat([df, df[["X1"]]], axis=1)
    amodel, da = asia
    dda = pd.concat([da, da[["smoke"]]], axis=1)
    clf = pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(pa.aggregate(da, label="lung"))
    calls = {
        "contingency_tables": lambda: pa.contingency_tables(dd, [("X0", "X1")]),
        "release_tables": lambda: pa.release_tables(dd, model, pa.LaplaceMechanism(1.0), seed=0),
        "bounded_tables": lambda: pa.bounded_tables(dd, model),
        "encode": lambda: pa.encode(dd, pa.to_engine(model).domain),
        "aggregate": lambda: pa.aggregate(dda, label="lung"),
        "RobustFilter": lambda: DiscreteBayesianNetwork(amodel.edges()).fit(dda, estimator=pa.RobustFilter(epsilon=0.1, progress=False)),
        "MaxEntClassifier.fit": lambda: pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(dda.drop(columns="lung"), da["lung"]),
        "MaxEntClassifier.predict_proba": lambda: clf.predict_proba(dda.drop(columns="lung")),
    }
    for name, call in calls.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError, match=r"(data|df|X): duplicated column names \['(X1|smoke)'\]"):
                call()


def test_paths_are_checked_before_writing_and_loading(chain, tmp_path):
    model, df = chain
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = pa.release_tables(df, model, pa.LaplaceMechanism(1.0), seed=0, publish_n="public")
    agg = pa.aggregate(df.assign(y=np.arange(len(df)) % 2), label="y")
    for obj in (rel, agg):
        with pytest.raises(ValueError, match="is a directory"):
            obj.save(tmp_path)
        with pytest.raises(TypeError, match="path: expected a file path"):
            obj.save(None)
        with pytest.raises(ValueError, match="does not end in .npz"):
            obj.save(tmp_path / "release")
        with pytest.raises(ValueError, match="does not exist"):
            obj.save(tmp_path / "nowhere" / "x.npz")
    assert sorted(os.listdir(tmp_path)) == [] and not os.path.exists(str(tmp_path) + ".npz")  # nothing written
    rel.save(tmp_path / "r.npz")
    with pytest.raises(TypeError, match="max_bytes: expected a positive whole number"):
        pa.NoisyTables.load(tmp_path / "r.npz", max_bytes="x")
    assert pa.NoisyTables.load(tmp_path / "r.npz").factors[0].values.shape == rel.factors[0].values.shape


def test_an_archive_that_compresses_like_no_noisy_table_is_refused_before_unpacking(tmp_path):
    forged = tmp_path / "forged.npz"
    np.savez_compressed(forged, meta=np.array("{}"), t0=np.zeros((4000, 4000)))  # 128 MB of zeros in ~130 kB
    assert os.path.getsize(forged) < 200_000
    with pytest.raises(ValueError, match=r"more than 100:1; noisy tables do not compress like that"):
        pa.NoisyTables.load(forged)


def test_sizes_have_bounds():
    with pytest.raises(ValueError, match="n: .* cells, more than one call draws"):
        ppgm.sample(third_order_chain(5, 3, seed=0), 10**30)
    with pytest.raises(ValueError, match="hours, locations: expected at most 1,000 hours"):
        pa.mobility_study(10, hours=10**9)
    with pytest.raises(ValueError, match="n_people, max_days, hours"):
        pa.mobility_study(10**7, max_days=7)


def test_messages_speak_the_users_names():
    truth = third_order_chain(4, 2, seed=0)
    ms = simulated_release(truth, [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 2.0) for f in truth.factors], 500,
                           np.random.default_rng(0))
    one_bad = [Measurement(ms[0].variables, np.where(np.arange(ms[0].values.size).reshape(ms[0].shape) == 0, 1e300, ms[0].values), "laplace", 2.0)] + ms[1:]
    for fit in (ppgm.naive_mle, lambda d, m: ppgm.cgm_em(d, m, progress=False)):
        with pytest.raises(ValueError, match=r"measurements\[0\]: a cell of 1e\+300 .* is implausible"):
            fit(truth.domain, one_bad)
    all_bad = [Measurement(m.variables, m.values + 1e300, "laplace", 2.0) for m in ms]
    with pytest.raises(ValueError, match="N: [0-9.]+e\\+300 records \\(estimated from the tables' totals\\) is implausible"):
        ppgm.cgm_em(truth.domain, all_bad, progress=False)
    # a callback that cannot be called is refused before any work, by the engine and by the estimator
    with pytest.raises(TypeError, match="callback: expected a callable"):
        ppgm.cgm_em(truth.domain, ms, callback=3, progress=False)
    chain = pa.dirichlet_chain_network(4, 3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = pa.release_tables(pa.sample(chain, 300, seed=0), chain, pa.LaplaceMechanism(1.0), seed=0, publish_n="public")
    with pytest.raises(TypeError, match="callback: expected a callable"):
        pa.CGMEstimator(chain).estimate(rel, callback="print", progress=False)


def test_the_robust_filter_on_two_identical_rows_finds_nothing_to_remove(asia):
    from pgmpy.models import DiscreteBayesianNetwork

    model, df = asia
    two = pd.concat([df.iloc[:1]] * 2, ignore_index=True)
    est = pa.RobustFilter(epsilon=0.1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DiscreteBayesianNetwork(model.edges()).fit(two, estimator=est)
    assert est.inlier_mask_.all() and len(est.parameters_) == 8


def test_loading_holds_at_most_one_copy_beyond_what_it_returns(tmp_path):
    """An unpacked array is released as soon as its table holds it: the peak while loading stays below
    twice what is returned (a table in flight), for a release and for aggregates."""
    import tracemalloc

    from pgmpy.factors.discrete import DiscreteFactor

    rng = np.random.default_rng(0)
    facs = [DiscreteFactor([f"A{i}", f"B{i}"], [400, 400], rng.integers(0, 100, 160_000).astype(float)) for i in range(4)]
    pa.NoisyTables.from_factors(facs, noise="laplace", scale=1.0).save(tmp_path / "rel.npz")
    df = pd.DataFrame({"a": rng.integers(0, 600, 5000).astype(str), "b": rng.integers(0, 600, 5000).astype(str),
                       "y": rng.integers(0, 2, 5000)})
    pa.aggregate(df, label="y").save(tmp_path / "agg.npz")
    for load, path in ((pa.NoisyTables.load, "rel.npz"), (pa.Aggregates.load, "agg.npz")):
        tracemalloc.start()
        try:
            out = load(tmp_path / path)
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 2 * held, (path, peak, held)
        assert out is not None


# --- labels, alignment, kinds of values, missing values, data too thin for a fit, errors from inside -------


def test_a_label_value_that_is_not_among_the_labels_is_refused():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 200), "y": rng.integers(0, 2, 200)})
    with pytest.raises(ValueError, match=r"positive: 5 is not a value of label 'y' \(its values are \[0, 1\]\)"):
        pa.aggregate(df, label="y", positive=5)
    with pytest.raises(ValueError, match=r"positive: True is not a value of label 'y'"):
        pa.aggregate(df, label="y", positive=True)  # True and 1 are two kinds of value
    with pytest.raises(ValueError, match=r"negative: 7 is not a value of label 'y'"):
        pa.aggregate(df, label="y", negative=7)
    with pytest.raises(ValueError, match="negative: 1 is the positive value too"):
        pa.aggregate(df, label="y", positive=1, negative=1)
    # private: the values are not read, the column's type is
    with pytest.raises(ValueError, match="positive: 'yes' is a text value and label 'y' holds number values"):
        pa.aggregate(df, label="y", mechanism=pa.LaplaceMechanism(1.0), categories={"a": [0, 1, 2]}, positive="yes")
    agg = pa.aggregate(df, label="y", positive=0)
    assert agg.positive == 0 and agg.tables[0].label_sums.sum() == (df["y"] == 0).sum()


def _weighted_counts(df, column, states, w):
    """Brute force: the weight of every state, record by record."""
    return [sum(wi for v, wi in zip(df[column], w) if v == s) for s in states]


def test_weights_and_ids_given_as_a_series_are_aligned_by_index(chain):
    model, df = chain
    rng = np.random.default_rng(1)
    w = rng.random(len(df))
    shuffled = pd.Series(w, index=df.index).sample(frac=1.0, random_state=2)
    expected = _weighted_counts(df, "X0", [0, 1, 2], w)
    np.testing.assert_allclose(pa.contingency_tables(df, [("X0",)], weights=shuffled)[0].values, expected)
    b = pa.bounded_tables(df, [("X0",)], state_names={"X0": [0, 1, 2]}, weights=shuffled)
    np.testing.assert_allclose(b.tables[0].values, expected)
    # the data's own index out of order too: alignment is by label, not by position
    perm = df.sample(frac=1.0, random_state=3)
    np.testing.assert_allclose(pa.contingency_tables(perm, [("X0",)], weights=shuffled)[0].values, expected)
    with pytest.raises(ValueError, match="weights: a Series is aligned to the data by index, and its index does not match"):
        pa.contingency_tables(df, [("X0",)], weights=pd.Series(w, index=df.index + 1))
    with pytest.raises(ValueError, match="weights: a Series is aligned to the data by index, and its index does not match"):
        pa.bounded_tables(df, [("X0",)], state_names={"X0": [0, 1, 2]}, weights=pd.Series(w).iloc[:-1])
    ids = pd.Series(np.arange(len(df)) % 40, index=df.index)
    kept = [pa.bounded_tables(df, [("X0",)], state_names={"X0": [0, 1, 2]}, individuals=i, max_contributions=1, seed=5).tables[0].values
            for i in (ids.sample(frac=1.0, random_state=4), ids.to_numpy())]
    np.testing.assert_array_equal(kept[0], kept[1])
    assert kept[0].sum() == 40  # one record per individual
    # labels of rows: y aligned to X
    X = pd.DataFrame({"a": rng.integers(0, 3, 400)})
    y = pd.Series((rng.random(400) < 0.2 + 0.2 * X["a"]).astype(int))
    fits = [pa.MaxEntClassifier(n_chains=50, max_iter=3, seed=0, progress=False).fit(X, labels).aggregates_.tables[0].label_sums
            for labels in (y.sample(frac=1.0, random_state=5), y.to_numpy())]
    np.testing.assert_array_equal(fits[0], fits[1])


def test_one_rule_for_the_states_of_every_entry_point(asia):
    """1 and 1.0 are one state everywhere, 1, True and "1" three kinds a column may not mix, named
    with the column at every door (RobustFilter used to fail inside pgmpy)."""
    from pgmpy.models import DiscreteBayesianNetwork

    rng = np.random.default_rng(0)
    n = 300
    ab = pd.DataFrame({"A": rng.integers(0, 2, n), "B": rng.integers(0, 2, n)})
    ab["y"] = (ab["A"] ^ (rng.random(n) < 0.1)).astype(int)
    same = ab.astype({"A": object})
    same.loc[::2, "A"] = same.loc[::2, "A"].astype(float)  # 1 and 1.0 in one column
    dag = DiscreteBayesianNetwork([("A", "B")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robust = pa.RobustFilter(epsilon=0.1, progress=False).fit(dag, same[["A", "B"]])
        em = pa.MissingValuesEM(progress=False, max_iter=3).fit(dag, same[["A", "B"]])
    read = {
        "contingency_tables": pa.contingency_tables(same, [("A",)])[0].state_names["A"],
        "infer_domain": list(pa.infer_domain(same, ["A"]).state_names["A"]),
        "RobustFilter": robust.state_names_["A"],
        "MissingValuesEM": em.state_names_["A"],
        "mer": list(pa.ini([same[["A", "B"]]], kind="discrete").domain.state_names["A"]),
    }
    assert all(states == [0, 1] for states in read.values()), read
    assert pa.aggregate(same, label="y").encoders["A"].states == ["0", "1"] == pa.aggregate(ab, label="y").encoders["A"].states
    for kind, odd in (("text", "1"), ("bool", True)):
        mixed = ab.astype({"A": object})
        mixed.loc[3, "A"] = odd
        calls = {
            "contingency_tables": lambda: pa.contingency_tables(mixed, [("A", "B")]),
            "infer_domain": lambda: pa.infer_domain(mixed, ["A"]),
            "release_tables": lambda: pa.release_tables(mixed, [("A", "B")], pa.LaplaceMechanism(1.0), state_names={"A": [0, 1], "B": [0, 1]}),
            "encode": lambda: pa.encode(mixed, ppgm.Domain(("A",), (2,), {"A": [0, 1]})),
            "aggregate": lambda: pa.aggregate(mixed, label="y"),
            "MaxEntClassifier.fit": lambda: pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(mixed[["A", "B"]], mixed["y"]),
            "RobustFilter": lambda: DiscreteBayesianNetwork([("A", "B")]).fit(mixed[["A", "B"]], estimator=pa.RobustFilter(epsilon=0.1, progress=False)),
            "MissingValuesEM": lambda: DiscreteBayesianNetwork([("A", "B")]).fit(mixed[["A", "B"]], estimator=pa.MissingValuesEM(progress=False)),
            "MarkovNetworkEstimator": lambda: pa.MarkovNetworkEstimator(pa.markov_network([("A", "B")], {"A": [0, 1], "B": [0, 1]})).estimate(
                mixed[["A", "B"]], progress=False),
            "mer": lambda: pa.mer([mixed[["A", "B"]]], kind="discrete"),
        }
        for name, call in calls.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(ValueError, match=rf"(data|df|X|samples\[0\]): column 'A' mixes kinds of values \(.*{kind} such as"):
                    call()
    clf = pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(pa.aggregate(ab, label="y"))
    with pytest.raises(ValueError, match="X: column 'A' mixes kinds of values"):
        clf.predict_proba(ab.astype({"A": object}).assign(A=[True] + [0] * (n - 1)))
    # a column of another kind than the declared states: named, never matched (True is not state 1)
    flags = ab.assign(A=ab["A"].astype(bool).astype(object))
    with pytest.raises(ValueError, match=r"data: column 'A' holds bool values such as \[.*\], its states \[0, 1\] are number values"):
        pa.release_tables(flags, [("A",)], pa.LaplaceMechanism(1.0), state_names={"A": [0, 1]})


def test_missing_values_where_the_caller_said_there_are_none_are_refused():
    df = pd.DataFrame({"a": ["p", None, "q", "p", np.nan, "q"], "b": [1, 2, 1, 2, 1, 2], "y": [0, 1, 0, 1, 1, 0]})
    with pytest.raises(ValueError, match=r"df: column 'a' has 2 missing values \(None / NaN\) and its encoding no state for them"):
        pa.aggregate(df, label="y", missing=False)
    with pytest.raises(ValueError, match="df: column 'a' has 2 missing values"):
        pa.aggregate(df, label="y", missing=["b"])
    dropped = pa.aggregate(df, label="y", missing=False, on_unknown="drop")
    assert dropped.n == 4 and dropped.encoders["a"].states == ["p", "q"]
    kept = pa.aggregate(df, label="y")  # the default: a state of their own
    assert kept.encoders["a"].states == ["p", "q", "<missing>"] and kept.tables[0].values.tolist() == [2.0, 2.0, 2.0]
    assert pa.aggregate(df, label="y", missing=True).encoders["b"].states == ["1", "2", "<missing>"]
    with pytest.raises(TypeError, match="missing: expected True, False or a list of feature columns"):
        pa.aggregate(df, label="y", missing="a")
    with pytest.raises(ValueError, match=r"missing: \['zz'\] are not feature columns"):
        pa.aggregate(df, label="y", missing=["zz"])


def test_data_that_cannot_support_the_fit_is_warned_or_refused(asia):
    from pgmpy.models import DiscreteBayesianNetwork

    model, df = asia
    rng = np.random.default_rng(0)
    rows = pd.DataFrame({"a": rng.integers(0, 3, 300), "y": np.zeros(300, dtype=int)})
    with pytest.warns(UserWarning, match=r"label: column 'y' holds a single value \(0\): every label sum is 0"):
        agg = pa.aggregate(rows, label="y")
    with pytest.warns(UserWarning, match="X: every label sum of the aggregates is 0: no record is positive"):
        pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(agg)
    with pytest.raises(ValueError, match=r"y: only one class \(0\) in the labels"):
        pa.MaxEntClassifier(n_chains=20, max_iter=2, progress=False).fit(rows[["a"]], rows["y"])
    # a single row: warned for the fits that take it, refused by the filter (it compares records)
    dag = DiscreteBayesianNetwork(model.edges())
    with pytest.warns(UserWarning, match="data: a single row; every column holds one value"):
        pa.MissingValuesEM(progress=False, max_iter=3).fit(dag, df.iloc[:1])
    with pytest.raises(ValueError, match="data: 1 row; expected at least 2"):
        pa.RobustFilter(epsilon=0.1, progress=False).fit(dag, df.iloc[:1])
    # a constant column whose states are read from the data
    with pytest.warns(UserWarning, match=r"data: columns \['asia'\] hold a single value each"):
        pa.MissingValuesEM(progress=False, max_iter=3).fit(dag, df.assign(asia="no"))
    # a continuous column read as states
    cont = df.assign(smoke=rng.normal(size=len(df)))
    for call in (lambda: pa.contingency_tables(cont, [("smoke", "lung")]),
                 lambda: pa.RobustFilter(epsilon=0.1, progress=False).fit(dag, cont),
                 lambda: pa.infer_domain(cont, ["smoke"])):
        with pytest.warns(UserWarning, match=r"data: column 'smoke' holds 300 distinct non-integer numbers"):
            call()


def test_errors_from_inside_name_the_argument():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    sets = [df[["a", "b"]].iloc[:100], df[["b", "c"]].iloc[100:]]
    with pytest.raises(TypeError, match="p: expected a number, got 'x'"):
        pa.mer(sets, p="x")
    with pytest.raises(ValueError, match="p: expected an exponent in"):
        pa.mer(sets, p=0)
    with pytest.raises(TypeError, match="pseudo_count: expected a number"):
        pa.mer([d.round().clip(-1, 1) for d in sets], kind="discrete", pseudo_count="x")
    with pytest.raises(TypeError, match="graph_tol: expected a number"):
        pa.mer(sets, graph_tol="x")
    with pytest.raises(TypeError, match="parts: expected a list of dicts"):
        pa.PrivacyAccountant(epsilon=1.0).charge("text")
    with pytest.raises(TypeError, match=r"parts\[0\]: expected a dict"):
        pa.PrivacyAccountant(epsilon=1.0).charge([3])
    dup = pd.concat([sets[0], sets[0][["a"]]], axis=1)
    for call in (lambda: pa.mer([dup, sets[1]]), lambda: pa.ini([dup, sets[1]]), lambda: pa.mer(dup)):
        with pytest.raises(ValueError, match=r"samples\[0\]: duplicated column names \['a'\]"):
            call()
