"""Issue 36, the classes an independent audit found answered silently or with an error a user cannot act
on; one test per class (flags are in ``test_flags.py``). Each failed before its fix."""

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
