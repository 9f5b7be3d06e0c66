import warnings

import numpy as np
import pandas as pd
import pytest
from pgmpy.factors.discrete import DiscreteFactor
from pgmpy.models import DiscreteMarkovNetwork

import ppgm.adapters as pa
from ppgm.adapters import (
    BudgetExceeded,
    CGMEstimator,
    GaussianMechanism,
    LaplaceMechanism,
    NaiveMLEEstimator,
    NoisyTables,
    NotPrivateWarning,
    PrivacyAccountant,
    release_tables,
)


def _data():
    mn = pa.dirichlet_chain_network(5, 3, seed=0)
    return mn, pa.sample(mn, 20_000, seed=1)


def test_private_release_is_integer_charged_and_round_trips(tmp_path):
    mn, df = _data()
    acc = PrivacyAccountant(epsilon=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotPrivateWarning)
        rel = release_tables(df, mn, LaplaceMechanism(0.9), publish_n=LaplaceMechanism(0.1), accountant=acc)
    assert rel.private and len(rel) == len(mn.get_factors())
    assert rel.spent == ({"what": "tables", "epsilon": 0.9}, {"what": "N", "epsilon": 0.1})
    assert [e["what"] for e in acc.ledger] == ["tables", "N"] and acc.remaining == pytest.approx(0.0)
    assert abs(rel.n - 20_000) < 200  # discrete Laplace, b = 10
    exact = pa.contingency_tables(df, [f.variables for f in rel])
    for f, t in zip(rel, exact):
        assert f.scale == len(rel) / 0.9 and f.integer  # L1 sensitivity = number of tables
        assert f.state_names == t.state_names
        assert np.all(f.values == np.round(f.values))
        assert np.abs(f.values - t.values).max() < 25 * f.scale
    path = tmp_path / "release.npz"
    rel.save(path)
    back = NoisyTables.load(path)
    assert back.n == rel.n and back.spent == rel.spent and back.private
    for a, b in zip(rel, back):
        assert a.variables == b.variables and a.state_names == b.state_names and a.scale == b.scale and b.integer
        np.testing.assert_array_equal(a.values, b.values)


def test_a_seeded_release_says_it_is_not_private():
    mn, df = _data()
    with pytest.warns(NotPrivateWarning, match="NOT differentially private"):
        a = release_tables(df, mn, LaplaceMechanism(1.0), seed=3)
    with pytest.warns(NotPrivateWarning):
        b = release_tables(df, mn, LaplaceMechanism(1.0), seed=3)
    assert not a.private and not b.private
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.values, y.values)  # reproducible: which is why it is not private


def test_the_domain_is_the_models_never_the_datas():
    # the model declares 3 states of A in its own order; the data never shows "mid"
    mn = DiscreteMarkovNetwork([("A", "B")])
    mn.add_factors(DiscreteFactor(["A", "B"], [3, 2], np.arange(1, 7), state_names={"A": ["lo", "mid", "hi"], "B": ["n", "y"]}))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"A": rng.choice(["lo", "hi"], 4000), "B": rng.choice(["n", "y"], 4000)})
    rel = release_tables(df, mn, LaplaceMechanism(2.0))
    (f,) = list(rel)
    assert f.state_names == {"A": ["lo", "mid", "hi"], "B": ["n", "y"]} and f.values.shape == (3, 2)
    est = NaiveMLEEstimator(mn)
    fit = est.estimate(rel)
    assert fit.get_factors()[0].state_names["A"] == ["lo", "mid", "hi"]
    assert est.selection_["criterion"] == "kl"
    est.estimate(rel, criterion="tv")
    assert est.selection_["criterion"] == "tv" and est.l2_ == pytest.approx(est.selection_["value"])
    # a release listing the states in another order is read in the model's order
    shuffled = NoisyTables.from_factors(
        [DiscreteFactor(["A", "B"], [3, 2], f.values[[2, 0, 1]], state_names={"A": ["hi", "lo", "mid"], "B": ["n", "y"]})],
        noise="laplace", scale=f.scale, integer=True)
    again = NaiveMLEEstimator(mn).estimate(shuffled)
    np.testing.assert_allclose(again.get_factors()[0].values, fit.get_factors()[0].values, rtol=1e-6)
    other = NoisyTables.from_factors([DiscreteFactor(["A", "B"], [3, 2], f.values, state_names={"A": ["a", "b", "c"], "B": ["n", "y"]})],
                                     noise="laplace", scale=1.0)
    with pytest.raises(ValueError, match="the model declares"):
        NaiveMLEEstimator(mn).estimate(other)
    # cliques without a model: the states must be declared
    with pytest.raises(ValueError, match="not declared"):
        release_tables(df, [("A", "B")], LaplaceMechanism(1.0))
    with pytest.raises(ValueError, match="not declared"):
        release_tables(df, [("A", "B")], LaplaceMechanism(1.0), state_names={"A": ["lo", "mid", "hi"]})
    # a value outside the declared states: an error naming column and value, or the record dropped
    bad = df.copy()
    bad.loc[5, "A"] = "extreme"
    with pytest.raises(ValueError, match=r"column 'A' has values \['extreme'\]"):
        release_tables(bad, mn, LaplaceMechanism(1.0))
    kept = pa.bounded_tables(bad, mn, on_unknown="drop")
    assert kept.n_records == len(bad) - 1
    with pytest.raises(ValueError, match="on_unknown"):
        release_tables(bad, mn, LaplaceMechanism(1.0), on_unknown="ignore")


def test_contributions_need_a_public_bound():
    df = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1, 1], "user": ["u", "u", "v", "w", "w", "w", "w"]})
    names = {"A": [0, 1]}
    with pytest.raises(ValueError, match="public bound"):
        release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, individuals="user")
    with pytest.raises(ValueError, match="public bound"):
        release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, individuals="user", max_contributions=2, reweight=True)
    rel = release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, individuals="user", max_contributions=2)
    assert next(iter(rel)).scale == pytest.approx(2 * 1 / 2.0)  # k x tables / epsilon, whatever the data
    b = pa.bounded_tables(df, [("A",)], state_names=names, individuals="user", max_contributions=2)
    assert b.n_records == 2 + 1 + 2
    rw = release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, individuals="user", reweight=True)
    f = next(iter(rw))
    assert f.scale == pytest.approx(0.5) and not f.integer  # weighted counts: real-valued noise
    with pytest.raises(ValueError, match=r"weights in \[0, 1\]"):
        release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, weights=np.full(7, 2.0))
    with pytest.raises(ValueError, match="name the individuals"):
        release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, max_contributions=3)
    with pytest.raises(ValueError, match="not in the data"):
        release_tables(df, [("A",)], LaplaceMechanism(2.0), state_names=names, individuals="person", max_contributions=3)


def test_accountant_refuses_an_over_budget_release_as_a_whole():
    mn, df = _data()
    acc = PrivacyAccountant(epsilon=1.0)
    release_tables(df, mn, LaplaceMechanism(0.7), accountant=acc)
    with pytest.raises(BudgetExceeded):
        release_tables(df, mn, LaplaceMechanism(0.7), accountant=acc)
    with pytest.raises(BudgetExceeded):  # tables fit, tables + N do not
        release_tables(df, mn, LaplaceMechanism(0.2), publish_n=LaplaceMechanism(0.2), accountant=acc)
    assert len(acc.ledger) == 1
    rel = release_tables(df, mn, LaplaceMechanism(0.2), publish_n="public", accountant=acc)
    assert rel.n == 20_000 and rel.spent[-1] == {"what": "N", "public": True}
    with pytest.raises(BudgetExceeded):
        release_tables(df, mn, GaussianMechanism(rho=0.01), accountant=acc)


def test_estimators_return_pgmpy_networks_and_cgm_beats_naive():
    mn, df = _data()
    rel = release_tables(df, mn, LaplaceMechanism(0.1), seed=4)  # b = 90 per cell: privacy dominates; seeded, the same draw
    naive = NaiveMLEEstimator(mn).estimate(rel, l2="paper")  # every run (CGM-EM wins in expectation, not on every private draw)
    est = CGMEstimator(mn)
    cgm = est.estimate(rel, progress=False, stop="converged", init_l2="calibrated", max_iter=30)
    assert naive.check_model() and cgm.check_model()
    assert set(cgm.nodes()) == set(mn.nodes())
    assert est.N_ == pytest.approx(20_000, rel=0.02)
    assert pa.kl_divergence(mn, cgm) <= pa.kl_divergence(mn, naive)
    assert est.history_ and "change" in est.history_[-1]


def test_cgm_estimator_passes_the_release_chosen_mstep_weight_through():
    # the estimator's defaults must not override cgm_em's for this mode (200 iterations, rtol 1e-5, SQUAREM)
    from ppgm.learners.cgm import cgm_em

    mn, df = _data()
    rel = release_tables(df, mn, LaplaceMechanism(0.5), seed=5)
    est = CGMEstimator(mn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = est.estimate(rel, l2="release", stop="converged", progress=False)
        dom, ms = est._inputs(rel)
        ref = cgm_em(dom, ms, l2="release", stop="converged", progress=False)
    assert est.selection_["mstep_l2"] == ref.selection["mstep_l2"]
    assert pa.kl_divergence(mn, fitted) == pytest.approx(pa.kl_divergence(mn, pa.markov_to_pgmpy(ref.model)), rel=1e-9)


def test_tables_released_elsewhere_and_bad_input():
    mn, df = _data()
    exact = pa.contingency_tables(df, [f.variables for f in mn.get_factors()])
    noisy = [DiscreteFactor(t.variables, t.cardinality, t.values + 1.0, state_names=t.state_names) for t in exact]
    rel = NoisyTables.from_factors(noisy, noise="gaussian", scale=2.0, n=20_000)
    assert not rel.private
    assert NaiveMLEEstimator(mn).estimate(rel).check_model()
    with pytest.raises(ValueError, match="no table for the model's cliques"):
        NaiveMLEEstimator(mn).estimate(NoisyTables(tuple(list(rel)[:-1]), rel.n))
    with pytest.raises(ValueError, match="NaN"):
        NoisyTables.from_factors([DiscreteFactor(["A"], [2], [np.nan, 1.0])], noise="laplace", scale=1.0)
    with pytest.raises(ValueError, match="scale"):
        NoisyTables.from_factors(noisy, noise="laplace", scale=[1.0])
    with pytest.raises(TypeError, match="NoisyTables"):
        CGMEstimator(mn).estimate([1, 2])
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceMechanism(0.0)
    with pytest.raises(ValueError, match="not in the data"):
        release_tables(df, [("X0", "nope")], LaplaceMechanism(1.0))
    with pytest.raises(ValueError, match="publish_n"):
        release_tables(df, mn, LaplaceMechanism(1.0), publish_n="yes")
