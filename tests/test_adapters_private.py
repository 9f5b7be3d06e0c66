import numpy as np
import pandas as pd
import pytest
from pgmpy.factors.discrete import DiscreteFactor

import ppgm.adapters as pa
from ppgm.adapters import (
    BudgetExceeded,
    CGMEstimator,
    GaussianMechanism,
    LaplaceMechanism,
    NaiveMLEEstimator,
    NoisyTables,
    PrivacyAccountant,
    release_tables,
)


def _data():
    mn = pa.dirichlet_chain_network(5, 3, seed=0)
    return mn, pa.sample(mn, 20_000, seed=1)


def test_release_counts_noise_and_round_trip(tmp_path):
    mn, df = _data()
    rel = release_tables(df, mn, LaplaceMechanism(1.0), seed=0, publish_n=True)
    assert len(rel) == len(mn.get_factors()) and rel.n == 20_000
    exact = pa.contingency_tables(df, [f.variables for f in rel])
    for f, t in zip(rel, exact):
        assert f.scale == len(rel) / 1.0  # L1 sensitivity = number of tables
        assert f.state_names == t.state_names
        assert np.abs(f.values - t.values).max() < 20 * f.scale
    path = tmp_path / "release.npz"
    rel.save(path)
    back = NoisyTables.load(path)
    assert back.n == rel.n and back.spent == rel.spent
    for a, b in zip(rel, back):
        assert a.variables == b.variables and a.state_names == b.state_names and a.scale == b.scale
        np.testing.assert_array_equal(a.values, b.values)


def test_weighted_records_and_individuals_set_the_sensitivity():
    df = pd.DataFrame({"A": [0, 1, 1, 0, 1], "user": ["u", "u", "v", "w", "w"]})
    w = np.array([0.5, 0.5, 1.0, 0.5, 0.5])  # 1/K per user
    rel = release_tables(df, [("A",)], LaplaceMechanism(2.0), weights=w, individuals="user", seed=0)
    assert next(iter(rel)).scale == pytest.approx(1.0 * 1 / 2.0)
    rel2 = release_tables(df, [("A",)], LaplaceMechanism(2.0), weights=2 * w, seed=0)
    assert next(iter(rel2)).scale == pytest.approx(2.0 * 1 / 2.0)  # largest record weight


def test_accountant_refuses_an_over_budget_release():
    mn, df = _data()
    acc = PrivacyAccountant(epsilon=1.0)
    release_tables(df, mn, LaplaceMechanism(0.7), accountant=acc)
    with pytest.raises(BudgetExceeded):
        release_tables(df, mn, LaplaceMechanism(0.7), accountant=acc)
    with pytest.raises(BudgetExceeded):
        release_tables(df, mn, GaussianMechanism(rho=0.01), accountant=acc)


def test_estimators_return_pgmpy_networks_and_cgm_beats_naive():
    mn, df = _data()
    rel = release_tables(df, mn, LaplaceMechanism(0.1), seed=3)  # noise b = 90 per cell: privacy dominates
    naive = NaiveMLEEstimator(mn).estimate(rel)
    est = CGMEstimator(mn)
    cgm = est.estimate(rel, progress=False, max_iter=30)
    assert naive.check_model() and cgm.check_model()
    assert set(cgm.nodes()) == set(mn.nodes())
    assert est.N_ == pytest.approx(20_000, rel=0.01)
    assert pa.kl_divergence(mn, cgm) <= pa.kl_divergence(mn, naive)
    assert est.history_ and "change" in est.history_[-1]


def test_tables_released_elsewhere_and_bad_input():
    mn, df = _data()
    exact = pa.contingency_tables(df, [f.variables for f in mn.get_factors()])
    noisy = [DiscreteFactor(t.variables, t.cardinality, t.values + 1.0, state_names=t.state_names) for t in exact]
    rel = NoisyTables.from_factors(noisy, noise="gaussian", scale=2.0, n=20_000)
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
