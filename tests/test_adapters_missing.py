"""pgmpy-facing estimators for missing values and Markov networks from records (adapters.missing)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from pgmpy.inference import VariableElimination
from pgmpy.models import DiscreteBayesianNetwork
from pgmpy.parameter_estimator import DiscreteMLE

import ppgm.adapters as pa
from ppgm.adapters import MarkovNetworkEstimator, MissingValuesEM, load_bif_example


def _aligned(cpd, order):
    """A TabularCPD's table with its axes in ``order`` (pgmpy's evidence order may differ from ours)."""
    f = cpd.to_factor()
    return np.transpose(f.values, [list(f.variables).index(v) for v in order])


def test_on_complete_data_it_is_pgmpys_maximum_likelihood():
    asia = load_bif_example("asia")
    df = pa.sample(asia, 4000, seed=0)
    ours = DiscreteBayesianNetwork(asia.edges())
    ours.fit(df, estimator=MissingValuesEM(pseudo_count=0.0, progress=False))
    ref = DiscreteBayesianNetwork(asia.edges())
    ref.fit(df, estimator=DiscreteMLE())
    for node in asia.nodes():
        a, b = ours.get_cpds(node), ref.get_cpds(node)
        assert set(a.variables) == set(b.variables) and a.variable == b.variable == node
        assert a.state_names == {v: b.state_names[v] for v in a.variables}
        np.testing.assert_allclose(_aligned(a, b.variables), _aligned(b, b.variables), atol=1e-9)


def _kl_cpts(truth, model, df_states):
    """Mean over nodes of the row-averaged KL(true CPT row || learned row)."""
    out = []
    for node in truth.nodes():
        t, m = truth.get_cpds(node), model.get_cpds(node)
        m = m.copy()
        m.state_names = {k: list(v) for k, v in m.state_names.items()}
        tv, mv = t.get_values(), m.get_values()
        out.append(float(np.mean(np.sum(tv * (np.log(tv + 1e-300) - np.log(mv + 1e-300)), axis=0))))
    return float(np.mean(out))


def test_with_cells_missing_at_random_em_beats_dropping_rows_and_leaves_the_frame_alone():
    asia = load_bif_example("asia")
    df = pa.sample(asia, 6000, seed=1)
    rng = np.random.default_rng(2)
    holey = df.copy()
    for c in holey.columns:  # 12% of every column missing completely at random
        holey.loc[rng.random(len(holey)) < 0.12, c] = None
    before = holey.copy()
    em = DiscreteBayesianNetwork(asia.edges())
    em.fit(holey, estimator=MissingValuesEM(pseudo_count=0.5, progress=False))
    pd.testing.assert_frame_equal(holey, before)
    cc = DiscreteBayesianNetwork(asia.edges())
    cc.fit(holey.dropna(), estimator=DiscreteMLE(state_names={c: sorted(df[c].unique()) for c in df.columns}))
    assert len(holey.dropna()) < 0.45 * len(holey)  # complete cases: 1 - 0.88^8 of the rows lost
    assert _kl_cpts(asia, em, None) < 0.7 * _kl_cpts(asia, cc, None)


def test_a_latent_node_needs_its_states_and_then_is_learned_reproducibly():
    asia = load_bif_example("asia")
    df = pa.sample(asia, 2000, seed=3).drop(columns=["either"])
    with pytest.raises(ValueError, match="state_names: node 'either'"):  # a bare DAG declares no states
        MissingValuesEM(progress=False).fit(DiscreteBayesianNetwork(asia.edges()), df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = MissingValuesEM(progress=False, max_iter=20, seed=4, state_names={"either": ["no", "yes"]}).fit(asia, df)
        b = MissingValuesEM(progress=False, max_iter=20, seed=4, state_names={"either": ["no", "yes"]}).fit(asia, df)
    for p, q in zip(a.parameters_, b.parameters_):
        np.testing.assert_array_equal(p.get_values(), q.get_values())
    assert [h["objective"] for h in a.history_] == [h["objective"] for h in b.history_]
    with pytest.raises(ValueError, match="not among its states"):
        MissingValuesEM(progress=False, state_names={"either": ["no", "yes"], "smoke": ["no"]}).fit(asia, df)
    with pytest.raises(ValueError, match="columns \\['zz'\\]"):
        MissingValuesEM(progress=False).fit(asia, df.assign(zz=1))


def test_markov_network_fit_matches_the_data_under_pgmpys_own_inference():
    mn = pa.dirichlet_chain_network(5, 3, seed=0)
    df = pa.sample(mn, 5000, seed=1)
    cliques = [tuple(f.variables) for f in mn.get_factors()]
    fitted = MarkovNetworkEstimator(mn).estimate(df, pseudo_count=0.0, progress=False)
    ve = VariableElimination(fitted)
    tabs = pa.contingency_tables(df, cliques)
    for c, t in zip(cliques, tabs):  # the MLE matches every clique's empirical marginal
        q = ve.query(list(c), joint=True, show_progress=False)
        emp = t.values / t.values.sum()
        vals = np.transpose(q.values, [list(q.variables).index(v) for v in t.variables])
        vals = vals / vals.sum()  # pgmpy's query on a Markov network returns the unnormalised table
        np.testing.assert_allclose(vals, emp, atol=1e-5)
    from_tables = MarkovNetworkEstimator(mn).estimate_from_tables(tabs, pseudo_count=0.0)
    a = pa.markov_from_pgmpy(fitted)
    b = pa.markov_from_pgmpy(from_tables)
    assert pa.kl_divergence(fitted, from_tables) < 1e-9 and a.scopes == b.scopes


def test_markov_network_em_beats_pgmpys_mirror_descent_on_complete_cases():
    mn = pa.dirichlet_chain_network(5, 3, seed=1)
    df = pa.sample(mn, 6000, seed=2)
    rng = np.random.default_rng(3)
    holey = df.copy()
    for c in holey.columns:
        holey.loc[rng.random(len(holey)) < 0.15, c] = None
    est = MarkovNetworkEstimator(mn)
    em = est.estimate(holey, progress=False)
    assert est.converged_ and est.history_[-1]["objective"] >= est.history_[0]["objective"]
    cc = MarkovNetworkEstimator(mn).estimate(holey.dropna(), progress=False)
    assert pa.kl_divergence(mn, em) < 0.8 * pa.kl_divergence(mn, cc)


def test_tables_that_are_not_the_models_are_refused():
    mn = pa.dirichlet_chain_network(4, 2, seed=0)
    df = pa.sample(mn, 500, seed=1)
    tabs = pa.contingency_tables(df, [tuple(f.variables) for f in mn.get_factors()])
    with pytest.raises(ValueError, match="one table per clique"):
        MarkovNetworkEstimator(mn).estimate_from_tables(tabs[:-1])
    with pytest.raises(TypeError, match="DiscreteFactor"):
        MarkovNetworkEstimator(mn).estimate_from_tables([t.values for t in tabs])
    with pytest.raises(TypeError, match="DiscreteMarkovNetwork"):
        MarkovNetworkEstimator("mn")
    with pytest.raises(TypeError, match="progress"):
        MarkovNetworkEstimator(mn).estimate(df, progress="no")
