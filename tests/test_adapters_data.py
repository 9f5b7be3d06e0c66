import numpy as np
import pandas as pd
import pytest

from ppgm.adapters import contingency_tables, encode, infer_domain, kl_divergence, load_bif_example, sample, total_variation


def test_contingency_tables_match_pandas_crosstab():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"A": rng.choice(["x", "y", "z"], 500), "B": rng.integers(0, 2, 500), "C": rng.choice(["u", "v"], 500)})
    before = df.copy()
    (ab, c) = contingency_tables(df, [("A", "B"), ("C",)])
    ref = pd.crosstab(df["A"], df["B"])
    assert ab.state_names == {"A": ["x", "y", "z"], "B": [0, 1]}
    np.testing.assert_array_equal(ab.values, ref.values)
    assert c.values.tolist() == df["C"].value_counts().sort_index().tolist()
    pd.testing.assert_frame_equal(df, before)
    w = rng.random(500)
    (abw,) = contingency_tables(df, [("B", "A")], weights=w)
    ref_w = df.assign(w=w).groupby(["B", "A"])["w"].sum().unstack().values
    np.testing.assert_allclose(abw.values, ref_w)


def test_state_names_given_and_errors():
    df = pd.DataFrame({"A": ["x", "y"], "B": ["p", None]})
    (a,) = contingency_tables(df, [("A",)], state_names={"A": ["y", "x", "w"]})
    assert a.values.tolist() == [1.0, 1.0, 0.0] and a.state_names["A"] == ["y", "x", "w"]
    with pytest.raises(ValueError, match="not among its states"):
        contingency_tables(df, [("A",)], state_names={"A": ["x"]})
    with pytest.raises(ValueError, match="missing values"):
        contingency_tables(df, [("B",)])
    with pytest.raises(ValueError, match="not in the data"):
        contingency_tables(df, [("Z",)])
    with pytest.raises(ValueError, match="no rows"):
        contingency_tables(df.iloc[:0], [("A",)])
    with pytest.raises(TypeError, match="DataFrame"):
        encode(np.zeros((2, 1)), infer_domain(df, ["A"]))


def test_sample_dataframe_matches_exact_marginal_and_metrics_on_pgmpy_models():
    asia = load_bif_example("asia")
    df = sample(asia, 100_000, seed=0)
    assert set(df.columns) == set(asia.nodes())
    assert set(df["smoke"].unique()) <= {"yes", "no"}
    from pgmpy.inference import VariableElimination

    p_either = VariableElimination(asia).query(["either"], show_progress=False)
    p_yes = p_either.get_value(either="yes")
    assert abs((df["either"] == "yes").mean() - p_yes) < 4 * np.sqrt(p_yes * (1 - p_yes) / len(df))
    assert kl_divergence(asia, asia) == pytest.approx(0.0, abs=1e-12)
    assert total_variation(asia, asia) == 0.0
    np.testing.assert_array_equal(sample(asia, 20, seed=3).values, sample(asia, 20, seed=3).values)


def test_distances_align_state_orders_between_models():
    """A refit with states in another order (sorted from data) is the same distribution."""
    from pgmpy.models import DiscreteBayesianNetwork

    asia = load_bif_example("asia")
    flipped = DiscreteBayesianNetwork(asia.edges())
    cpds = []
    for cpd in asia.get_cpds():
        c = cpd.copy()
        names = {v: list(reversed(c.state_names[v])) for v in c.variables}
        vals = c.get_values().reshape(c.cardinality)[tuple(slice(None, None, -1) for _ in c.variables)]
        from pgmpy.factors.discrete import TabularCPD

        cpds.append(TabularCPD(c.variable, c.cardinality[0], vals.reshape(c.cardinality[0], -1),
                               evidence=c.variables[1:] or None, evidence_card=list(c.cardinality[1:]) or None,
                               state_names=names))
    flipped.add_cpds(*cpds)
    assert kl_divergence(asia, flipped) == pytest.approx(0.0, abs=1e-12)
    assert total_variation(asia, flipped) == pytest.approx(0.0, abs=1e-12)
    assert kl_divergence(flipped, asia) == pytest.approx(0.0, abs=1e-12)
