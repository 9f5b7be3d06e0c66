"""Malformed inputs for every public entry point of ``ppgm.adapters`` (MER's own inputs excepted:
they belong to the MER issue), and how each call ends.

Each entry point has a builder of valid arguments and, per argument, values that are wrong for it
(wrong type, non-finite, out of range, unknown or duplicate variables, ambiguous forms). A call with
one argument replaced ends in one of three ways:

* ``clear``: a ``ValueError`` or ``TypeError`` (or ppgm's documented ``JunctionTreeTooLarge``, raised
  when a size budget such as ``max_cells`` is too small for the model) raised by a ``raise`` of ppgm's
  own code (not Python's or a library's error passing through) whose message names the argument as
  a word;
* ``warned``: no error, but a ``UserWarning`` naming the argument (for inputs that are legal but
  almost surely a mistake);
* ``obscure``: any other exception, or one that does not name the argument;
* ``silent``: no error at all (a result computed from a wrong input).

Besides the values listed per argument, every entry point that reads a DataFrame meets the
*classes* of doubtful data in ``CLASSES`` (a column mixing kinds of values, a missing value, a
single row, a constant column, a continuous column): each must end ``clear`` or ``warned`` unless
the entry point lists the class in ``accepts`` with the reason it is legal there. Per-record
arguments (weights, ids, labels) given as a pandas Series are aligned by index (``ALIGNMENT``). A
class added here reaches every entry point at once.

Whatever the outcome, the caller's objects must be unchanged. ``tests/test_fuzz.py`` runs every
listed value, every class and hypothesis-drawn numbers; ``python tests/fuzz_cases.py`` prints the
counts per entry point.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import traceback
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np
import pandas as pd

NAN, INF = float("nan"), float("inf")
# values wrong for a positive real (epsilon, a scale, a weight); None is added where it is not a default
BAD_POSITIVE = [0, 0.0, -1.0, NAN, INF, -INF, "1", True, [1.0]]
BAD_COUNT = [0, -2, 2.5, NAN, INF, "3", True, [3]]  # wrong for a positive whole number
BAD_SEED = ["seed", -1, 2.5, NAN, [0.5], {"a": 1}]
BAD_FLAG = ["yes", 2, None, [True]]


class Unhashable:
    __hash__ = None  # type: ignore[assignment]


@lru_cache(maxsize=None)
def world() -> dict:
    """Small valid objects every entry point is built from (made once; tests never change them)."""
    import ppgm.adapters as pa
    from pgmpy.factors.discrete import DiscreteFactor
    from pgmpy.models import DiscreteMarkovNetwork

    warnings.simplefilter("ignore")
    asia = pa.load_bif_example("asia")
    chain = pa.dirichlet_chain_network(4, 3, seed=0)
    onetwothree = DiscreteMarkovNetwork([("A", "B")])
    onetwothree.add_factors(DiscreteFactor(["A", "B"], [3, 2], np.arange(1.0, 7.0), state_names={"A": [1, 2, 3], "B": ["x", "y"]}))
    df_chain = pa.sample(chain, 400, seed=0)
    df_asia = pa.sample(asia, 400, seed=0)
    rng = np.random.default_rng(0)
    df_agg = pd.DataFrame({"a": rng.choice(["p", "q", "r"], 300), "x": rng.normal(size=300), "y": rng.integers(0, 2, 300)})
    release = pa.release_tables(df_chain, chain, pa.LaplaceMechanism(1.0), seed=0, publish_n="public")
    agg = pa.aggregate(df_agg, label="y")
    z = rng.multivariate_normal([0, 0, 0], [[1, 0.5, 0.2], [0.5, 1, 0.5], [0.2, 0.5, 1]], 300)
    gauss = pd.DataFrame(z, columns=["a", "b", "c"])
    sets = [gauss[["a", "b"]].iloc[:150], gauss[["b", "c"]].iloc[150:]]  # two sample sets sharing b (MER's input)
    disc = pd.DataFrame((z > 0).astype(int) + (z > 1).astype(int), columns=["a", "b", "c"])
    discrete_sets = [disc[["a", "b"]].iloc[:150], disc[["b", "c"]].iloc[150:]]
    tmp = tempfile.mkdtemp(prefix="ppgm_fuzz_")
    release.save(os.path.join(tmp, "release.npz"))
    agg.save(os.path.join(tmp, "agg.npz"))
    with open(os.path.join(tmp, "records.csv"), "w") as f:
        f.write("flag,code,note\nTRUE,01,None\nFALSE,1,NA\n")
    with open(os.path.join(tmp, "twice.csv"), "w") as f:
        f.write("a,b,a\n1,2,3\n")
    return dict(asia=asia, chain=chain, onetwothree=onetwothree, df_chain=df_chain, df_asia=df_asia, df_agg=df_agg,
                release=release, agg=agg, tmp=tmp, engine_chain=pa.to_engine(chain), engine_asia=pa.to_engine(asia), sets=sets,
                discrete_sets=discrete_sets, long=agg.to_table())


def _frames(df: pd.DataFrame, column: str, empty: bool = True, dropped: bool = True, missing: bool = True) -> list:
    """Wrong data for an entry point that reads ``column`` of ``df``: not a DataFrame, the column
    dropped, a missing value in it, no rows (each where that is wrong for the entry point)."""
    nan = df.copy()
    nan[column] = nan[column].astype(object)
    nan.iloc[0, nan.columns.get_loc(column)] = None
    return ([None, "data.csv", df.to_dict("list"), df.to_numpy()] + ([df.drop(columns=[column])] if dropped else [])
            + ([nan] if missing else []) + ([df.iloc[:0]] if empty else []))


@dataclass
class Entry:
    """One entry point: ``call(**kwargs)`` with ``valid()`` arguments, and per argument the wrong values."""

    name: str
    call: Callable[..., Any]
    valid: Callable[[], dict]
    bad: dict = field(default_factory=dict)
    also: dict = field(default_factory=dict)  # argument -> other names a clear message may use instead
    columns: dict = field(default_factory=dict)  # DataFrame argument -> the columns it reads as states (default: all)
    accepts: dict = field(default_factory=dict)  # class (or (class, column)) of doubtful data -> why it is legal here
    per_record: dict = field(default_factory=dict)  # per-record argument -> (the DataFrame argument, a valid value[, other arguments])

    def frames(self) -> dict:
        """The DataFrame arguments of the valid call (a list of DataFrames: its first), with the
        columns each reads as states."""
        out = {}
        for arg, value in self.valid().items():
            frame = value[0] if isinstance(value, list) and value and isinstance(value[0], pd.DataFrame) else value
            if isinstance(frame, pd.DataFrame):
                out[arg] = list(self.columns.get(arg, frame.columns))
        return out

    def accepted(self, klass: str, column=None) -> bool:
        return klass in self.accepts or (klass, column) in self.accepts


def entries() -> list[Entry]:
    import ppgm.adapters as pa
    from pgmpy.factors.discrete import TabularCPD
    from pgmpy.models import DiscreteBayesianNetwork

    w = world()
    mech = pa.LaplaceMechanism(1.0)
    chain_states = {v: [0, 1, 2] for v in w["chain"].nodes()}

    def release(**kw):
        return pa.release_tables(**kw)

    def synth(**kw):
        return pa.mst_release(**kw)

    def aim(**kw):
        return pa.aim_release(**kw)

    def robust_fit(data, epsilon=0.1, mode="calibrated", max_rounds=10, rounds=4, seed=0, state_names=None, encoding="native"):
        bn = DiscreteBayesianNetwork(w["asia"].edges())
        est = pa.RobustFilter(epsilon=epsilon, mode=mode, max_rounds=max_rounds, rounds=rounds, seed=seed, progress=False,
                              state_names=state_names, encoding=encoding)
        bn.fit(data, estimator=est)
        return bn

    def missing_em_fit(data, pseudo_count=1.0, max_iter=5, tol=1e-8, seed=0, state_names=None):
        bn = DiscreteBayesianNetwork(w["asia"].edges())
        est = pa.MissingValuesEM(pseudo_count=pseudo_count, max_iter=max_iter, tol=tol, seed=seed, progress=False,
                                 state_names=state_names)
        bn.fit(data, estimator=est)
        return bn

    def markov_estimate(data, l2=0.0, pseudo_count=1.0, max_iter=5, tol=1e-8, seed=0, state_names=None):
        return pa.MarkovNetworkEstimator(w["chain"]).estimate(data, l2=l2, pseudo_count=pseudo_count, max_iter=max_iter, tol=tol,
                                                              seed=seed, progress=False, state_names=state_names)

    def markov_from_tables(tables, l2=0.0, pseudo_count=1.0):
        return pa.MarkovNetworkEstimator(w["chain"]).estimate_from_tables(tables, l2=l2, pseudo_count=pseudo_count)

    def maxent_fit(X, n_chains=200, max_iter=5, l2_mu=1.0, l2_theta=30.0, step_mu=None, step_theta=None, average=0.3,
                   n_shards=1, seed=0):
        return pa.MaxEntClassifier(n_chains=n_chains, max_iter=max_iter, l2_mu=l2_mu, l2_theta=l2_theta, step_mu=step_mu,
                                   step_theta=step_theta, average=average, n_shards=n_shards, seed=seed, progress=False).fit(X)

    def maxent_fit_rows(X, y):
        return pa.MaxEntClassifier(n_chains=100, max_iter=3, seed=0, progress=False).fit(X, y)

    def maxent_predict(X):
        return _fitted_maxent().predict_proba(X)

    def bp_query(variables, evidence=None, virtual_evidence=None, model=None):
        return pa.LogBeliefPropagation(model if model is not None else w["asia"]).query(variables, evidence=evidence,
                                                                                         virtual_evidence=virtual_evidence)

    def bp_map(variables=None, evidence=None, virtual_evidence=None):
        return pa.LogBeliefPropagation(w["asia"]).map_query(variables, evidence=evidence, virtual_evidence=virtual_evidence)

    soft = lambda var, values: TabularCPD(var, len(values), [[v] for v in values])  # noqa: E731
    bad_soft = ["x", [1.0], soft("xray", [0.5, 0.5]), [soft("zz", [0.5, 0.5])], [soft("xray", [1.5, 0.2])], [soft("xray", [0.5, 0.5, 0.1])],
                [soft("xray", [0.0, 0.0])], [soft("xray", [0.5, 0.5]), soft("xray", [0.2, 0.5])], [soft("xray", [NAN, 0.5])]]

    def bp_log_z(evidence):
        return pa.LogBeliefPropagation(w["onetwothree"]).log_partition_function(evidence)

    def naive(noisy_tables, N=None, l2=None):
        return pa.NaiveMLEEstimator(w["chain"]).estimate(noisy_tables, N=N, l2=l2)

    def cgm(noisy_tables, N=None, l2=None, max_iter=2, tol=1e-6, rtol=1e-4, estep="dual"):
        return pa.CGMEstimator(w["chain"]).estimate(noisy_tables, N=N, l2=l2, max_iter=max_iter, tol=tol, rtol=rtol, estep=estep, progress=False)

    def spend(epsilon=None, rho=None, budget=None):
        acc = pa.PrivacyAccountant(**(budget or {"epsilon": 1.0}))
        acc.spend(epsilon=epsilon, rho=rho)
        return acc

    def filter_dask(records, epsilon=0.1, rounds=2, mode="single_pass"):
        return pa.filter_dask(records, w["engine_asia"].domain, w["engine_asia"].parents, epsilon, mode=mode, rounds=rounds, seed=0,
                              progress=False)

    def dask_records():
        import dask.array as da

        return da.from_array(pa.encode(w["df_asia"], w["engine_asia"].domain), chunks=(200, -1))

    frames_chain = _frames(w["df_chain"], "X1")
    n_agg = len(w["df_agg"])
    counting = {"single row": "a count, not a fit: one record is a data set like any other",
                "constant column": "a count, not a fit: a column may hold one value"}
    private = {"single row": "a private release: no warning may depend on the data's size",
               "constant column": "a private release over a declared domain: no warning may depend on the data's values"}
    n_rows = len(w["df_chain"])
    frames_release = _frames(w["df_chain"], "X1", empty=False)  # no records is a data set like any other
    frames_asia = _frames(w["df_asia"], "smoke")
    bad_cliques = [("X0", "X1"), [("X0", "Z")], [("X0", "X0")], [], [()], "X0X1", [["X0"], 3]]
    return [
        Entry("contingency_tables", pa.contingency_tables, lambda: dict(data=w["df_chain"], cliques=[("X0", "X1")]),
              {"data": frames_chain, "cliques": bad_cliques, "state_names": [{"X0": []}, {"X0": [0, 0, 1]}, {"X0": "ab"}, ["X0"], {"X0": [0, 1]}],
               "weights": [np.ones(3), -np.ones(400), np.full(400, NAN), "w", np.ones((400, 2))]},
              {"state_names": ("data",)}, columns={"data": ["X0", "X1"]}, accepts=counting,
              per_record={"weights": ("data", np.linspace(0.1, 1.0, n_rows))}),
        Entry("release_tables", release,
              lambda: dict(data=w["df_chain"], cliques_or_model=w["chain"], mechanism=mech, seed=0),
              {"data": frames_release, "cliques_or_model": bad_cliques + [None, w["asia"]], "mechanism": [None, 1.0, "laplace", pa.LaplaceMechanism],
               "state_names": [{"X0": []}, {"X0": [0, 0, 1]}, {"X0": "ab"}, ["X0"], {"X0": [0, 1]}],
               "individuals": ["nobody", np.arange(3)], "publish_n": ["yes", 3, mech.epsilon],
               "seed": BAD_SEED, "accountant": ["acc", 1.0], "on_unknown": ["ignore", None, 1],
               "weights": [np.ones(3), -np.ones(400), np.full(400, NAN), "w"],
               "tied": ["X0", 3, [("X0", "X1")], [[("X0", "X1")]], [[("X0", "X1"), ("X0", "Z")]],
                        [[("X0", "X1"), ("X1", "X0")]], [[("X0", "X1"), 5]]]},
              {"state_names": ("data",)}, accepts=private, per_record={"weights": ("data", np.linspace(0.0, 1.0, n_rows))}),
        Entry("aim_release", aim,
              lambda: dict(data=w["df_chain"], state_names=chain_states, rho=1.0, workload=2, seed=0, progress=False,
                           estimator="rounds"),
              {"data": _frames(w["df_chain"], "X0", empty=False), "state_names": [None, {"X0": [0, 1, 2]}, {"X0": []}, ["X0", "X1"],
                                                                     {**chain_states, "nope": [0, 1]}],
               "rho": BAD_POSITIVE, "accountant": ["acc", 1.0, pa.PrivacyAccountant(epsilon=1.0)],
               "workload": [None, 0, 99, "X0", [], [("X0", "nope")], [("X0", "X0")], 2.5], "weights": [[1.0], "w", [-1.0] * 3],
               "max_cells": BAD_COUNT, "estimator": ["mle", None, 3], "n_synthetic": BAD_COUNT, "synthetic": ["rounded", None, 1],
               "seed": BAD_SEED, "fit_seed": BAD_SEED, "on_unknown": ["ignore", None]}, accepts=private,
              per_record={"individuals": ("data", np.arange(n_rows) % 50, {"max_contributions": 2})}),
        Entry("mst_release", synth,
              lambda: dict(data=w["df_chain"], state_names=chain_states, rho=1.0, seed=0, progress=False, estimator="naive"),
              {"data": _frames(w["df_chain"], "X0", empty=False), "state_names": [None, {"X0": [0, 1, 2]}, {"X0": []}, ["X0", "X1"],
                                                                     {**chain_states, "nope": [0, 1]}],
               "rho": BAD_POSITIVE, "accountant": ["acc", 1.0, pa.PrivacyAccountant(epsilon=1.0)],
               "split": [None, 1.0, (1, 1), (1, 0, 1), (1, NAN, 1), ("a", 1, 1)], "estimator": ["mle", None, 3],
               "n_synthetic": BAD_COUNT, "synthetic": ["rounded", None, 1], "seed": BAD_SEED, "fit_seed": BAD_SEED, "on_unknown": ["ignore", None]},
              accepts=private, per_record={"individuals": ("data", np.arange(n_rows) % 50, {"max_contributions": 2})}),
        Entry("release_tables(individuals)", release,
              lambda: dict(data=w["df_chain"].assign(who=np.arange(400) % 50), cliques_or_model=w["chain"], mechanism=mech, seed=0,
                           individuals="who", max_contributions=2),
              {"max_contributions": BAD_COUNT + [None], "reweight": ["yes", 2]}, {"data": ("individuals",)},
              columns={"data": ["X0", "X1", "X2", "X3"]}, accepts=private,  # 'who' holds ids, not states
              per_record={"individuals": ("data", np.arange(n_rows) % 50)}),
        Entry("bounded_tables", pa.bounded_tables, lambda: dict(data=w["df_chain"], cliques_or_model=w["chain"]),
              {"data": frames_release, "cliques_or_model": bad_cliques + [None], "seed": BAD_SEED,
               "weights": [np.ones(3), np.full(n_rows, 2.0), "w"]}, accepts=private,
              per_record={"weights": ("data", np.linspace(0.0, 1.0, n_rows)),
                          "individuals": ("data", np.arange(n_rows) % 50, {"max_contributions": 2, "seed": 0})}),
        Entry("LaplaceMechanism", pa.LaplaceMechanism, lambda: dict(epsilon=1.0), {"epsilon": BAD_POSITIVE + [None]}),
        Entry("GaussianMechanism", pa.GaussianMechanism, lambda: dict(rho=0.5),
              {"rho": BAD_POSITIVE, "epsilon": [1.0], "delta": [1e-6, 0.0, 1.5]}),
        Entry("PrivacyAccountant", pa.PrivacyAccountant, lambda: dict(epsilon=1.0),
              {"epsilon": BAD_POSITIVE, "delta": [0.0, 1.0, -0.1, NAN, "1e-6"], "rho": [0.5, NAN, -1.0]}),
        Entry("PrivacyAccountant.spend", spend, lambda: dict(epsilon=0.5),
              {"epsilon": BAD_POSITIVE, "rho": [0.1, NAN]}),
        Entry("PrivacyAccountant.charge", lambda parts: pa.PrivacyAccountant(epsilon=1.0).charge(parts),
              lambda: dict(parts=[{"what": "tables", "epsilon": 0.5}]),
              {"parts": ["text", None, 3, {"what": "tables", "epsilon": 0.5}, [3], [["what", "tables"]], [{"what": "tables"}]]},
              {"parts": ("epsilon", "rho", "spend")}),
        Entry("NoisyTables.from_factors", pa.NoisyTables.from_factors,
              lambda: dict(factors=pa.contingency_tables(w["df_chain"], [("X0", "X1")]), noise="laplace", scale=1.0),
              {"factors": [None, [1, 2], "f"], "noise": ["poisson", None, 1], "scale": [v for v in BAD_POSITIVE if v != [1.0]] + [[1.0, 2.0], [0.0]], "n": [NAN, INF, -3.0, 0]}),
        Entry("NoisyTables.load", pa.NoisyTables.load, lambda: dict(path=os.path.join(w["tmp"], "release.npz")),
              {"path": [os.path.join(w["tmp"], "missing.npz"), os.path.join(w["tmp"], "agg.npz"), None, 3, _bomb(os.path.join(w["tmp"], "release.npz"), "t0")]}),
        Entry("NaiveMLEEstimator.estimate", naive, lambda: dict(noisy_tables=w["release"]),
              {"noisy_tables": [None, "tables", w["agg"], [1]], "N": BAD_POSITIVE, "l2": [-1.0, NAN, INF, "big", [1.0]]}),
        Entry("CGMEstimator.estimate", cgm, lambda: dict(noisy_tables=w["release"]),
              {"noisy_tables": [None, "tables", w["agg"]], "N": BAD_POSITIVE, "l2": [-1.0, NAN, INF, "big"],
               "max_iter": BAD_COUNT, "tol": BAD_POSITIVE, "rtol": [-1.0, NAN, "x"], "estep": ["exact", None, 1]}),
        Entry("RobustFilter + bn.fit", robust_fit, lambda: dict(data=w["df_asia"]),
              {"data": frames_asia, "epsilon": BAD_POSITIVE + [0.5, 0.7], "mode": ["fast", None, 1], "max_rounds": BAD_COUNT,
               "rounds": BAD_COUNT, "seed": BAD_SEED, "encoding": ["ascii", None], "state_names": [{"smoke": []}, {"smoke": "ab"}, ["smoke"]]}),
        Entry("MissingValuesEM + bn.fit", missing_em_fit, lambda: dict(data=w["df_asia"]),  # holes are its input
              {"data": _frames(w["df_asia"], "smoke", dropped=False, missing=False) + [w["df_asia"].assign(zz=1)],
               "pseudo_count": [-1.0, NAN, INF, "1"], "max_iter": BAD_COUNT, "tol": BAD_POSITIVE, "seed": BAD_SEED,
               "state_names": [{"smoke": []}, {"smoke": "ab"}, ["smoke"], {"smoke": ["no"]}]},
              accepts={"missing value": "missing cells are its input"}),
        Entry("MarkovNetworkEstimator.estimate", markov_estimate, lambda: dict(data=w["df_chain"]),
              {"data": _frames(w["df_chain"], "X1", dropped=False, missing=False) + [w["df_chain"].assign(zz=1)],
               "l2": [-1.0, NAN, INF, "1"], "pseudo_count": [-1.0, NAN, INF, "1"], "max_iter": BAD_COUNT, "tol": BAD_POSITIVE,
               "seed": BAD_SEED, "state_names": [{"X1": []}, {"X1": "ab"}, ["X1"], {"X1": [0]}]},
              accepts={"missing value": "missing cells are its input (EM)",
                       "constant column": "the model declares every state: a column holding one of them is data like any other"}),
        Entry("MarkovNetworkEstimator.estimate_from_tables", markov_from_tables,
              lambda: dict(tables=pa.contingency_tables(w["df_chain"], [tuple(f.variables) for f in w["chain"].get_factors()])),
              {"tables": [None, "tables", [], [np.ones((3, 3))],
                          pa.contingency_tables(w["df_chain"], [tuple(f.variables) for f in w["chain"].get_factors()])[:1]],
               "l2": [-1.0, NAN, INF, "1"], "pseudo_count": [-1.0, NAN, INF, "1"]}),
        Entry("filter_dask", filter_dask, lambda: dict(records=dask_records()),
              {"records": [None, "codes", np.zeros((3, 8), dtype=int)], "epsilon": BAD_POSITIVE, "rounds": BAD_COUNT,
               "mode": ["fast", None]}),
        Entry("aggregate", pa.aggregate, lambda: dict(df=w["df_agg"], label="y"),
              {"df": _frames(w["df_agg"], "a", dropped=False, missing=False),  # missing values get a state of their own
               "label": ["z", None, 3, "a"], "features": [["zz"], ["a", "a"], "a", [], ["y"]],
               "positive": [5, "yes", True], "negative": [5, 1, "no"], "missing": ["a", 3, ["zz"]],
               "pairs": ["some", [("a", "zz")], 3], "bins": BAD_COUNT + [1], "hash_size": BAD_COUNT,
               "mechanism": ["laplace", 1.0], "categories": [{"a": []}, {"a": "pq"}, ["a"]],
               "bounds": [{"x": (1.0, 0.0)}, {"x": (NAN, 1.0)}, {"x": 3}], "bin_edges": [{"x": [1.0, 0.0]}, {"x": [0.0]}, {"x": "e"}],
               "seed": BAD_SEED, "on_unknown": ["ignore", None]}, {"df": ("label",)},
              accepts={"missing value": "a missing value gets a state of its own (missing=None)", **{("constant column", c): "a constant feature: its table is one cell, legal" for c in ("a", "x")},
                       **{("continuous column", c): "numeric columns are binned" for c in ("a", "x")}}),
        Entry("aggregate(missing=False)", pa.aggregate, lambda: dict(df=w["df_agg"], label="y", missing=False),
              {"df": _frames(w["df_agg"], "a", dropped=False)}, {"df": ("label",)},
              accepts={k: v for k, v in {"missing value": "a missing value gets a state of its own (missing=None)", **{("constant column", c): "a constant feature: its table is one cell, legal" for c in ("a", "x")},
                       **{("continuous column", c): "numeric columns are binned" for c in ("a", "x")}}.items() if k != "missing value"}),
        Entry("Aggregates.load", pa.Aggregates.load, lambda: dict(path=os.path.join(w["tmp"], "agg.npz")),
              {"path": [os.path.join(w["tmp"], "missing.npz"), os.path.join(w["tmp"], "release.npz"), None, _bomb(os.path.join(w["tmp"], "agg.npz"), "d0")]}),
        Entry("MaxEntClassifier.fit", maxent_fit, lambda: dict(X=w["agg"]),
              {"X": [None, w["df_agg"], "agg", w["release"]], "n_chains": BAD_COUNT, "max_iter": BAD_COUNT,
               "l2_mu": [-1.0, NAN, INF, "1"], "l2_theta": [-1.0, NAN, INF, "1"], "step_mu": BAD_POSITIVE, "step_theta": BAD_POSITIVE,
               "average": [-0.1, 1.5, NAN, "x"], "n_shards": BAD_COUNT, "seed": BAD_SEED}),
        Entry("MaxEntClassifier.fit(X, y)", maxent_fit_rows, lambda: dict(X=w["df_agg"][["a", "x"]], y=w["df_agg"]["y"]),
              {"X": [None, "X", w["df_agg"][["a"]].iloc[:10]], "y": [np.zeros(n_agg), np.arange(n_agg) % 3, "y", np.ones(3),
                                                                   w["df_agg"]["y"].astype(object).where(w["df_agg"]["y"] > 0, "0")]},
              accepts={"missing value": "a missing value gets a state of its own",
                       "constant column": "a constant feature: its table is one cell, legal", ("continuous column", "a"): "numeric: binned",
                       ("continuous column", "x"): "numeric: binned"},
              also={"X": ("y",)}, per_record={"y": ("X", w["df_agg"]["y"].to_numpy())}),
        Entry("Aggregates.from_table", pa.Aggregates.from_table, lambda: dict(table=w["long"], label="y"),
              {"table": [None, w["long"].drop(columns="clicks"), w["long"].assign(count=-1.0), w["long"].assign(clicks=w["long"]["count"] + 1),
                         w["long"].assign(feature_b=w["long"]["feature_a"]), w["long"].assign(value_a=None)],
               "label_sums": ["zz", 3], "count": ["zz", None], "label": [3, "a"], "positive": [0, None], "features": [["zz"], "a", ["a"]],
               "categories": [{"a": []}, {"zz": [1]}, {"a": ["p"]}], "n": [-1.0, NAN, "x"], "noise": ["x", None],
               "scale": [-1.0, NAN, "1"], "columns": ["abcd", ("a", "b"), ("f", "v", "f", "v")]},
              {"table": ("label_sums", "count", "value_a", "value_b", "categories"), "positive": ("negative",),
               "label_sums": ("table",), "count": ("table",)},
              columns={"table": ["count", "clicks"]},
              accepts={"constant column": "counts may be equal", "single row": "refused as a table with features missing or legal"}),
        Entry("MaxEntClassifier.predict_proba", maxent_predict, lambda: dict(X=w["df_agg"]),  # unseen values are by design
              {"X": _frames(w["df_agg"], "a", empty=False, missing=False)},
              columns={"X": ["a", "x"]},  # the label column is not read
              accepts={"missing value": "a missing value is its own state, or unseen (warned)", "single row": "one prediction",
                       "constant column": "predictions for rows alike", ("continuous column", "x"): "a numeric column: binned"}),
        Entry("LogBeliefPropagation", pa.LogBeliefPropagation, lambda: dict(model=w["asia"]),
              {"model": [None, "asia", w["df_asia"], DiscreteBayesianNetwork([("a", "b")])], "max_cells": [0, -5, NAN, "big"],
               "cache_size": [0, -1, 2.5, "x"]}),
        Entry("LogBeliefPropagation.query", bp_query, lambda: dict(variables=["asia"]),
              {"variables": [[], ["zz"], ["asia", "asia"], None, [Unhashable()]],
               "evidence": [{"zz": "yes"}, {"tub": "maybe"}, {"tub": 5}, ["tub"], {"asia": "yes"}], "virtual_evidence": bad_soft}),
        Entry("LogBeliefPropagation.map_query", bp_map, lambda: dict(variables=["lung"], evidence={"xray": "yes"}),
              {"variables": [[], ["zz"], ["lung", "lung"], ["xray"], [Unhashable()]], "evidence": [{"zz": "yes"}, {"tub": 3}, "tub"],
               "virtual_evidence": bad_soft}),
        Entry("LogBeliefPropagation.log_partition_function", bp_log_z, lambda: dict(evidence={"A": 1}),
              {"evidence": [{"A": 0}, {"A": 4}, {"Z": 1}, "A", {"B": 0}]}),
        Entry("sample", pa.sample, lambda: dict(model=w["chain"], n=10, seed=0),
              {"model": [None, "chain", w["df_chain"]], "n": [-1, 2.5, NAN, INF, "10", True, None], "seed": BAD_SEED}),
        Entry("sample_partitions", pa.sample_partitions, lambda: dict(model=w["chain"], n=100, npartitions=2, seed=0),
              {"model": [None, "chain"], "n": [-1, 2.5, NAN, "10", True], "npartitions": [0, -1, 2.5, NAN, "2", 1000], "seed": BAD_SEED}),
        Entry("dirichlet_chain_network", pa.dirichlet_chain_network, lambda: dict(n_vars=4, k=3, seed=0),
              {"n_vars": BAD_COUNT, "k": BAD_COUNT, "alpha": BAD_POSITIVE, "seed": BAD_SEED}),
        Entry("mobility_study", pa.mobility_study, lambda: dict(n_people=20, max_days=2, locations=3, hours=4, seed=0),
              {"n_people": BAD_COUNT, "max_days": BAD_COUNT, "locations": BAD_COUNT + [1], "hours": BAD_COUNT + [1],
               "seed": BAD_SEED}),
        Entry("load_bif_example", pa.load_bif_example, lambda: dict(name="asia"), {"name": ["nonexistent", None, 3, "../asia"]}),
        Entry("kl_divergence", pa.kl_divergence, lambda: dict(p=w["chain"], q=w["chain"]),
              {"p": [None, "p", w["df_chain"]], "q": [None, w["asia"], w["onetwothree"]]}),
        Entry("total_variation", pa.total_variation, lambda: dict(p=w["asia"], q=w["asia"]),
              {"p": [None, "p"], "q": [None, w["chain"]], "n_samples": BAD_COUNT, "seed": BAD_SEED,
               "method": ["approx", None], "exact_max_cells": [-1, NAN, "x"]}),
        Entry("infer_domain", pa.infer_domain, lambda: dict(data=w["df_chain"], columns=["X0"]),
              columns={"data": ["X0"]}, accepts={**counting, "missing value": "a domain: missing values are no state"},
              bad=
              {"data": [None, "d", w["df_chain"].iloc[:0]], "columns": [["zz"], "X0", ["X0", "X0"], []],
               "state_names": [{"X0": []}, {"X0": [0, 0]}, {"X0": "ab"}]}),
        Entry("encode", pa.encode, lambda: dict(data=w["df_chain"], domain=w["engine_chain"].domain), accepts=counting, bad=
              {"data": _frames(w["df_chain"], "X1", empty=False), "domain": [None, "domain", {"X0": [0, 1, 2]}], "dtype": [np.float64, np.uint8, "str"]}),
        Entry("decode", pa.decode, lambda: dict(records=np.zeros((3, 4), dtype=int), domain=w["engine_chain"].domain),
              {"records": [np.zeros((3, 2), int), np.full((3, 4), 7), np.full((3, 4), -1), np.zeros((3, 4)) + 0.5, "r", None, np.zeros(4, int)],
               "domain": [None, "domain"]}),
        Entry("to_engine", pa.to_engine, lambda: dict(model=w["chain"]),
              {"model": [None, "m", w["df_chain"], DiscreteBayesianNetwork([("a", "b")])]}),
        Entry("markov_to_pgmpy", pa.markov_to_pgmpy, lambda: dict(model=w["engine_chain"]),
              {"model": [None, w["chain"], w["engine_asia"], "m"]}),
        Entry("bayes_to_pgmpy", pa.bayes_to_pgmpy, lambda: dict(model=w["engine_asia"]),
              {"model": [None, w["asia"], w["engine_chain"], "m"]}),
        Entry("tabular_cpds", pa.tabular_cpds, lambda: dict(model=w["engine_asia"]),
              {"model": [None, w["asia"], w["engine_chain"]], "cpts": [{"zz": np.ones(2)}, {"asia": np.ones(3)}, {"asia": np.array([0.5, NAN])},
                                                                     {"asia": np.array([2.0, -1.0])}, "cpts"]}),
        Entry("declared_states", pa.declared_states, lambda: dict(model=w["chain"]), {"model": [None, "m", w["df_chain"]]}),
        Entry("FeatureEncoder.numeric", pa.FeatureEncoder.numeric, lambda: dict(name="x", edges=[0.0, 1.0, 2.0]),
              {"edges": [[1.0], [2.0, 1.0], [0.0, NAN], "0 1", None, [0.0, "1"], [True, 2.0]]},
              {"edges": ("bin_edges",)}),  # the message speaks aggregate's argument, which calls it
        Entry("FeatureEncoder.categorical", pa.FeatureEncoder.categorical, lambda: dict(name="a", categories=["p", "q"]),
              {"categories": [[], "pq", None, ["p", "p"], [["p"]]]}),
        Entry("mer", pa.mer, lambda: dict(samples=w["sets"]),
              {"samples": [None, "x", [], [w["sets"][0].assign(a=NAN)], [w["sets"][0].assign(a=INF)], [w["sets"][0].iloc[:0], w["sets"][1]],
                           [w["sets"][0].set_axis(["a", "a"], axis=1), w["sets"][1]], [w["sets"][0].assign(a="x")]],
               "kind": ["x", None, 3], "gamma": [-1.0, NAN, "1", [1.0]], "p": [0, 2.0, NAN, "0.5"], "edges": [[("a", "zz")], "ab"],
               "solver": ["nonexistent", 3], "gamma_ratio": [-1.0, 0.5, "2"], "pseudo_count": ["x"], "graph_tol": ["x", -1.0]},
              accepts={"continuous column": "a Gaussian program: real numbers are its input"}),
        Entry("mer(kind='discrete')", pa.mer, lambda: dict(samples=w["discrete_sets"], kind="discrete"),
              {"samples": [[w["discrete_sets"][0].assign(b=w["discrete_sets"][0]["b"].astype(str)), w["discrete_sets"][1]]],
               "state_names": [{"a": [0, 1]}, {"a": [0, "1", 2]}, {"a": "ab"}], "p": ["x", 0, 1.5], "pseudo_count": ["x", -1.0, NAN],
               "graph_tol": ["x", -1.0], "variables": [["a", "a", "b", "c"], "abc"]},
              {"state_names": ("samples",)}),
        Entry("ini", pa.ini, lambda: dict(samples=w["sets"]),
              {"samples": [None, [], [w["sets"][0].assign(b=NAN), w["sets"][1]]], "kind": ["x", 3], "p": [0, -1.0],
               "solver": ["nonexistent"]}, accepts={"continuous column": "a Gaussian program: real numbers are its input"}),
        Entry("markov_from_pgmpy", pa.markov_from_pgmpy, lambda: dict(model=w["chain"]), {"model": [None, "m", w["df_chain"], 3]}),
        Entry("bayes_from_pgmpy", pa.bayes_from_pgmpy, lambda: dict(model=w["asia"]), {"model": [None, "m", w["chain"], w["df_asia"]]}),
        Entry("dask_executor", pa.dask_executor, lambda: dict(client=None), {"client": ["x", 3, w["asia"]]}),
        Entry("set_progress", pa.set_progress, lambda: dict(enabled=None), {"enabled": ["yes", 1, 0.5, [True]]}),
        Entry("read_records", pa.read_records, lambda: dict(path=os.path.join(w["tmp"], "records.csv")),
              {"path": [None, 3, os.path.join(w["tmp"], "none.csv"), w["tmp"], os.path.join(w["tmp"], "twice.csv")],
               "missing": [3, [None], {"NA": 1}, b"NA"], "columns": [["zz"], "flag", ["flag", "flag"]], "sep": ["", ";;", 3],
               "encoding": ["no-such-codec", 3]}),
        Entry("markov_network", pa.markov_network, lambda: dict(cliques=[("A", "B")], state_names={"A": [0, 1], "B": ["x", "y"]}),
              {"cliques": [("A", "B"), [("A", "B"), ("B", "A")], [("A", "C")], "AB", [()]],
               "state_names": [{"A": [0, 1]}, {"A": [0, 1], "B": ["x"], "C": [0]}, {"A": [0, "1"], "B": ["x", "y"]}, {"A": [], "B": [1]},
                               ["A", "B"], None]}),
        Entry("to_frame", pa.to_frame, lambda: dict(tables=w["chain"].get_factors()[0]),
              {"tables": [None, "f", [], [3], {"a": 3}, w["df_chain"]], "domain": ["d", 3], "value": [3, "X0", None]}),
    ]


@lru_cache(maxsize=None)
def _fitted_maxent():
    import ppgm.adapters as pa

    return pa.MaxEntClassifier(n_chains=200, max_iter=5, seed=0, progress=False).fit(world()["agg"])


def _bomb(source: str, member: str) -> str:
    """A copy of the archive ``source`` whose ``member`` claims a 400 MB array of zeros: the file is
    under 1 MB (zeros compress well), what a careless loader unpacks is not."""
    import zipfile

    path = source.replace(".npz", f"_bomb_{member}.npz")
    if not os.path.exists(path):
        header = {"descr": "<f8", "fortran_order": False, "shape": (50_000_000,)}
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for info in src.infolist():
                if info.filename != f"{member}.npy":
                    z.writestr(info.filename, src.read(info.filename))
                    continue
                with z.open(info.filename, "w", force_zip64=True) as f:
                    np.lib.format.write_array_header_1_0(f, header)
                    chunk = bytes(1 << 22)
                    for _ in range(50_000_000 * 8 // len(chunk)):
                        f.write(chunk)
                    f.write(bytes(50_000_000 * 8 % len(chunk)))
    return path


# --------------------------------------------------------------------------------------------------
# running one malformed call


# attributes (and dict keys, such as a history's per-round times) that differ between two identical calls:
# wall times, a sampler's live state
VOLATILE = {"seconds", "state_"}


def fingerprint(x, depth: int = 0) -> Any:
    """A comparable picture of an object's content (frames, arrays, pgmpy models, containers and
    the attributes of other objects, a few levels deep)."""
    from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork

    if hasattr(x, "__dask_graph__"):  # a Dask collection: its name is its content's
        return ("dask", x.name if hasattr(x, "name") else repr(x))
    if isinstance(x, pd.DataFrame):
        return ("frame", tuple(map(str, x.columns)), tuple(map(str, x.dtypes)), x.to_json(orient="values"), tuple(map(str, x.index)))
    if isinstance(x, pd.Series):  # by content: pandas caches internals on a Series it reads
        return ("series", str(x.name), str(x.dtype), x.to_json(orient="values"), tuple(map(str, x.index)))
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, DiscreteMarkovNetwork):
        return ("mn", sorted(map(sorted, x.edges())), [(tuple(f.variables), f.values.tobytes(), repr(f.state_names)) for f in x.get_factors()])
    if isinstance(x, DiscreteBayesianNetwork):
        return ("bn", sorted(x.edges()), [(c.variable, c.values.tobytes(), repr(c.state_names)) for c in x.get_cpds()])
    if isinstance(x, dict):
        return ("dict", [(repr(k), fingerprint(v, depth + 1)) for k, v in x.items() if k not in VOLATILE])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [fingerprint(v, depth + 1) for v in x])
    if isinstance(x, float) and math.isnan(x):
        return ("nan",)
    if hasattr(x, "__dict__") and not isinstance(x, type) and depth < 4:
        return ("object", type(x).__name__, fingerprint({k: v for k, v in vars(x).items() if k not in VOLATILE}, depth + 1))
    return ("repr", repr(x))


@dataclass
class Outcome:
    entry: str
    argument: str
    value: str
    kind: str  # clear / warned / obscure / silent
    message: str
    mutated: bool


PROJECT = tuple(os.path.dirname(os.path.abspath(m)) for m in (__import__("ppgm").__file__, __import__("ppgm.adapters").adapters.__file__))


def names_argument(message: str, names) -> bool:
    """The message names one of ``names`` as a word (``p`` in ``"p: expected..."``, not in ``"unsupported"``)."""
    return any(re.search(rf"(?<![\w.]){re.escape(str(a))}(?![\w])", message) for a in names)


def raised_by_ppgm(err: BaseException) -> bool:
    """The exception comes from a ``raise`` statement of ppgm's own code: not Python's TypeError of an
    operator, nor a library's error passing through."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    return os.path.abspath(last.filename).startswith(PROJECT) and (last.line or "").lstrip().startswith("raise ")


IGNORED_WARNINGS = ("NotPrivateWarning", "ConvergenceWarning", "FutureWarning", "DeprecationWarning", "PendingDeprecationWarning")


def run(entry: Entry, argument: str, value) -> Outcome:
    kwargs = entry.valid()
    kwargs[argument] = value
    before = fingerprint(kwargs)
    from ppgm.inference.junction_tree import JunctionTreeTooLarge

    names = (argument, *entry.also.get(argument, ()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            entry.call(**kwargs)
        except (ValueError, TypeError, FileNotFoundError, JunctionTreeTooLarge) as err:
            msg = f"{type(err).__name__}: {err}"
            kind = "clear" if names_argument(str(err), names) and raised_by_ppgm(err) else "obscure"
        except Exception as err:  # noqa: BLE001 - any other error is an obscure one
            msg, kind = f"{type(err).__name__}: {err}", "obscure"
        else:
            said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)
                    and not any(c.__name__ in IGNORED_WARNINGS for c in w.category.__mro__)]
            named = [m for m in said if names_argument(m, names)]
            msg, kind = (f"warning: {named[0]}", "warned") if named else ("", "silent")
    mutated = fingerprint(kwargs) != before
    return Outcome(entry.name, argument, _short(value), kind, msg[:300], mutated)


# --------------------------------------------------------------------------------------------------
# classes of doubtful data: each applies to every DataFrame argument of every entry point


def _other_kind(values: pd.Series):
    """A value of another kind than the column's: ``"1"`` for the number 1, ``True`` for text, ``1`` for a boolean."""
    v = values.dropna().iloc[0]
    if isinstance(v, (bool, np.bool_)):
        return 1
    if isinstance(v, (int, float, np.integer, np.floating)):
        return str(v.item() if hasattr(v, "item") else v)
    return 1


def _set_cell(df: pd.DataFrame, column, value, row: int = 0) -> pd.DataFrame:
    out = df.copy()
    out[column] = out[column].astype(object)
    out.iloc[row, out.columns.get_loc(column)] = value
    return out


def _number_and_bool(df, column):
    """A column of numbers with one True (``1`` and ``True`` would merge in pandas' own lookups), or of
    booleans with one 1."""
    v = df[column].dropna().iloc[0]
    return _set_cell(df, column, 1 if isinstance(v, (bool, np.bool_)) else True)


CLASSES = {
    # a column that mixes kinds: 1 and "1" would be two states, 1 and True one
    "mixed kinds": lambda df, c: _set_cell(df, c, _other_kind(df[c])),
    "number and bool": _number_and_bool,
    # a missing value where the entry point takes none
    "missing value": lambda df, c: _set_cell(df, c, None, row=len(df) // 2),
    # data that cannot support a fit
    "single row": lambda df, c: df.iloc[:1],
    "constant column": lambda df, c: df.assign(**{c: [df[c].iloc[0]] * len(df)}),
    "continuous column": lambda df, c: df.assign(**{c: np.random.default_rng(0).normal(size=len(df))}),
}
# the class's test: each listed column, or (one value for the whole frame) its first column
ONE_PER_FRAME = {"single row"}


def class_cases(entry: Entry) -> list[tuple]:
    """``(argument, class, column, value)`` of every class of doubtful data for every DataFrame
    argument of ``entry`` and every column it reads as states, unless the entry accepts it."""
    out = []
    for arg, columns in entry.frames().items():
        valid = entry.valid()[arg]
        frame = valid[0] if isinstance(valid, list) else valid
        for klass, make in CLASSES.items():
            for c in columns[:1] if klass in ONE_PER_FRAME else columns:
                if not entry.accepted(klass, c) and frame[c].notna().any():
                    made = make(frame, c)
                    out.append((arg, klass, c, [made] + valid[1:] if isinstance(valid, list) else made))
    return out


def run_classes(entry: Entry) -> list[tuple]:
    """``(class, column, Outcome)`` of every class case of ``entry``."""
    return [(klass, c, run(entry, arg, value)) for arg, klass, c, value in class_cases(entry)]


def alignment_cases(entry: Entry) -> list[tuple]:
    """For every per-record argument: ``(argument, shuffled Series, the same values as an array in the
    rows' order, a Series whose index is not the data's, other arguments the call needs)``. The
    shuffled Series must give the array's result (aligned by index); the foreign one a clear refusal."""
    out = []
    for arg, (frame_arg, values, *extra) in entry.per_record.items():
        frame = entry.valid()[frame_arg]
        series = pd.Series(np.asarray(values), index=frame.index)
        shuffled = series.sample(frac=1.0, random_state=0)
        foreign = series.set_axis(frame.index + len(frame))
        out.append((arg, shuffled, np.asarray(values), foreign, extra[0] if extra else {}))
    return out


def _short(value) -> str:
    text = f"{type(value).__name__} {value!r}" if not isinstance(value, (pd.DataFrame, np.ndarray)) else (
        f"{type(value).__name__} {getattr(value, 'shape', '')}")
    return text[:80]


def run_all() -> list[Outcome]:
    out = []
    for e in entries():
        for arg, values in e.bad.items():
            for v in values:
                out.append(run(e, arg, v))
    return out


def report(outcomes: list[Outcome]) -> str:
    rows = {}
    kinds = ("clear", "warned", "obscure", "silent")
    for o in outcomes:
        r = rows.setdefault(o.entry, dict.fromkeys(kinds + ("mutated",), 0))
        r[o.kind] += 1
        r["mutated"] += o.mutated
    lines = ["| entry point | inputs | clear | warned | obscure | silent | caller's objects changed |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in rows.items():
        lines.append(f"| {name} | {sum(r[k] for k in kinds)} | " + " | ".join(str(r[k]) for k in kinds + ("mutated",)) + " |")
    tot = {k: sum(r[k] for r in rows.values()) for k in kinds + ("mutated",)}
    lines.append(f"| **all** | {sum(tot[k] for k in kinds)} | " + " | ".join(str(tot[k]) for k in kinds + ("mutated",)) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    results = run_all()
    print("listed malformed inputs\n" + report(results))
    for o in results:
        if o.kind != "clear" or o.mutated:
            print(f"{o.kind:8s} {o.entry} {o.argument}={o.value}: {o.message}{'  [MUTATED]' if o.mutated else ''}")
    classes = [(e.name, klass, c, o) for e in entries() for klass, c, o in run_classes(e)]
    print("\nclasses of doubtful data\n" + report([o for *_, o in classes]))
    for name, klass, c, o in classes:
        if o.kind not in ("clear", "warned") or o.mutated:
            print(f"{o.kind:8s} {name} {o.argument} {klass} in {c!r}: {o.message}{'  [MUTATED]' if o.mutated else ''}")
