"""Flags are real booleans and numbers are finite numbers at every door that takes them (an audit found
``project="yes"``, ``moment_match="no"``, ``progress="x"``, ``joint="no"`` taken by truthiness, so
"no" meant yes, and ``tol=nan`` or ``damping=inf`` running).

The parameters are not listed by hand: each door's flags are read off its signature (every parameter
whose default is True or False), and its real parameters likewise (default a float), so a parameter
added later is tested without editing this file. Flags get "no", "yes", 1, None and [True]; real
parameters NaN, +-inf and "1"; each must raise a TypeError or ValueError naming it.
"""

from __future__ import annotations

import inspect
import warnings
from functools import lru_cache

import numpy as np
import pytest

BAD_FLAGS = ["no", "yes", 1, None, [True]]
# bool-default parameters that are not flags of the door (sklearn's plumbing, or a mode that also takes
# other values)
NOT_FLAGS = {"deep", "raise_error", "publish_n", "missing"}


@lru_cache(maxsize=None)
def world() -> dict:
    import ppgm
    import ppgm.adapters as pa
    from ppgm.learners.aggregates import aggregate_records, table_scopes
    from ppgm.models.measurement import Measurement
    from ppgm.models.random_models import random_bayesian_network, third_order_chain
    from ppgm.learners.release_rule import simulated_release

    truth = third_order_chain(4, 2, seed=0)
    ms = simulated_release(truth, [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 2.0) for f in truth.factors], 500,
                           np.random.default_rng(0))
    bn = random_bayesian_network(4, 2, seed=1)
    records = ppgm.sample(bn, 300, seed=2)
    dom = ppgm.Domain(("a", "b"), (2, 2))
    rng = np.random.default_rng(3)
    agg_tables = aggregate_records(rng.integers(0, 2, (200, 2)), rng.integers(0, 2, 200), dom, table_scopes(dom.variables, "all"))
    chain = pa.dirichlet_chain_network(4, 2, seed=0)
    df_chain = pa.sample(chain, 300, seed=0)
    release = pa.release_tables(df_chain, chain, pa.LaplaceMechanism(1.0), seed=0, publish_n="public")
    asia = pa.load_bif_example("asia")
    df_agg = pa.sample(asia, 300, seed=0)
    return dict(truth=truth, ms=ms, bn=bn, records=records, dom=dom, agg_tables=agg_tables, chain=chain, df_chain=df_chain,
                release=release, asia=asia, agg=pa.aggregate(df_agg, label="lung"), df_asia=df_agg)


def _doors() -> list:
    """(name, the function whose signature lists the flags, call(**flags))."""
    import ppgm
    import ppgm.adapters as pa
    from pgmpy.models import DiscreteBayesianNetwork

    from ppgm.learners.maxent import fit_maxent

    w = world()
    t, bn = w["truth"], w["bn"]
    return [
        ("cgm_em", ppgm.cgm_em, lambda **f: ppgm.cgm_em(t.domain, w["ms"], 500.0, max_iter=1, stop="converged", **f)),
        ("naive_mle", ppgm.naive_mle, lambda **f: ppgm.naive_mle(t.domain, w["ms"], 500.0, l2="paper", **f)),
        ("fit_marginals", ppgm.fit_marginals,
         lambda **f: ppgm.fit_marginals(t.domain, ppgm.infer(t).factor_marginals(), l2=0.1, **f)),
        ("infer", ppgm.infer, lambda **f: ppgm.infer(t, **f)),
        ("loopy_belief_propagation", ppgm.loopy_belief_propagation, lambda **f: ppgm.loopy_belief_propagation(t, **f)),
        ("filter_known_topology", ppgm.filter_known_topology,
         lambda **f: ppgm.filter_known_topology(w["records"], bn.domain, bn.parents, 0.1, **f)),
        ("fit_maxent", fit_maxent, lambda **f: fit_maxent(w["agg_tables"], w["dom"], n_chains=20, max_iter=2, **f)),
        ("LogBeliefPropagation.query", pa.LogBeliefPropagation.query,
         lambda **f: pa.LogBeliefPropagation(w["asia"]).query(["xray", "smoke"], **f)),
        ("LogBeliefPropagation.map_query", pa.LogBeliefPropagation.map_query,
         lambda **f: pa.LogBeliefPropagation(w["asia"]).map_query(["xray"], **f)),
        ("bounded_tables", pa.bounded_tables, lambda **f: pa.bounded_tables(w["df_chain"], w["chain"], **f)),
        ("release_tables", pa.release_tables,
         lambda **f: pa.release_tables(w["df_chain"], w["chain"], pa.LaplaceMechanism(1.0), seed=0, **f)),
        ("NaiveMLEEstimator.estimate", pa.NaiveMLEEstimator.estimate,
         lambda **f: pa.NaiveMLEEstimator(w["chain"]).estimate(w["release"], l2="paper", **f)),
        ("CGMEstimator.estimate", pa.CGMEstimator.estimate,
         lambda **f: pa.CGMEstimator(w["chain"]).estimate(w["release"], max_iter=1, stop="converged", **f)),
        ("sample_partitions", pa.sample_partitions, lambda **f: pa.sample_partitions(w["chain"], 20, 2, seed=0, **f)),
        ("MaxEntClassifier", pa.MaxEntClassifier,
         lambda **f: pa.MaxEntClassifier(n_chains=20, max_iter=2, **f).fit(w["agg"])),
        ("RobustFilter", pa.RobustFilter,
         lambda **f: DiscreteBayesianNetwork(w["asia"].edges()).fit(w["df_asia"], estimator=pa.RobustFilter(epsilon=0.1, **f))),
        ("em_bayesian", ppgm.em_bayesian, lambda **f: ppgm.em_bayesian(bn.domain, bn.parents, w["records"], max_iter=2, **f)),
        ("em_markov", ppgm.em_markov, lambda **f: ppgm.em_markov(t.domain, t.scopes, ppgm.sample(t, 200, seed=0), max_iter=2, **f)),
        ("MissingValuesEM", pa.MissingValuesEM,
         lambda **f: DiscreteBayesianNetwork(w["asia"].edges()).fit(w["df_asia"], estimator=pa.MissingValuesEM(max_iter=2, **f))),
        ("MarkovNetworkEstimator.estimate", pa.MarkovNetworkEstimator.estimate,
         lambda **f: pa.MarkovNetworkEstimator(w["chain"]).estimate(w["df_chain"], **f)),
    ]


def _flags(fn) -> list:
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if isinstance(p.default, bool) and p.name not in NOT_FLAGS]


CASES = [(name, flag, bad) for name, fn, _ in _doors() for flag in _flags(fn) for bad in BAD_FLAGS]


def test_every_door_has_flags_to_test():
    assert all(_flags(fn) for _, fn, _ in _doors())
    assert len(CASES) >= 100


@pytest.mark.parametrize("name,flag,bad", CASES, ids=[f"{n}-{f}-{b!r}" for n, f, b in CASES])
def test_a_flag_that_is_not_a_bool_is_refused_by_name(name, flag, bad):
    call = {n: c for n, _, c in _doors()}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match=rf"\b{flag}\b.*True or False"):
            call(**{flag: bad})


ALLOW_INF = {("fit_maxent", "max_step")}  # documented: no cap on a step
BAD_REALS = [float("nan"), float("inf"), -float("inf"), "1"]


def _reals(name, fn) -> list:
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if isinstance(p.default, float) and (name, p.name) not in ALLOW_INF]


REAL_CASES = [(name, p, bad) for name, fn, _ in _doors() for p in _reals(name, fn) for bad in BAD_REALS]


def test_the_doors_have_real_parameters_to_test():
    assert len({(n, p) for n, p, _ in REAL_CASES}) >= 15


@pytest.mark.parametrize("name,param,bad", REAL_CASES, ids=[f"{n}-{p}-{b!r}" for n, p, b in REAL_CASES])
def test_a_real_parameter_refuses_non_finite_values_and_strings_by_name(name, param, bad):
    call = {n: c for n, _, c in _doors()}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((TypeError, ValueError), match=rf"\b{param}\b"):
            call(**{param: bad})


@pytest.mark.parametrize("name", [n for n, _, _ in _doors()])
def test_numpy_booleans_are_flags_too(name):
    fn, call = {n: (f, c) for n, f, c in _doors()}[name]
    flag = _flags(fn)[0]
    default = inspect.signature(fn).parameters[flag].default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call(**{flag: np.bool_(default)})
