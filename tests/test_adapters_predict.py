"""query_rows, predict_probability, predict and impute against brute-force enumeration and pgmpy."""

import io
import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from pgmpy.factors.discrete import DiscreteFactor, TabularCPD
from pgmpy.inference import VariableElimination
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork
from pgmpy.readwrite import BIFReader

from ppgm.adapters import (LogBeliefPropagation, bayes_to_pgmpy, bayesian_network, impute, load_bif_example, predict,
                           predict_probability, read_bif, sample, to_engine, write_bif)

STATES = {"A": ["a0", "a1", "a2"], "B": [0, 1], "C": ["lo", "hi"], "D": ["x", "y", "z"]}


def _tiny(seed=0):
    """A -> B, A -> C, (B, C) -> D: a loop once moralised; B's states are ints."""
    rng = np.random.default_rng(seed)

    def cpd(v, parents):
        cols = int(np.prod([len(STATES[p]) for p in parents])) if parents else 1
        t = rng.dirichlet(np.ones(len(STATES[v])), size=cols).T
        return TabularCPD(v, len(STATES[v]), t, evidence=parents or None,
                          evidence_card=[len(STATES[p]) for p in parents] or None,
                          state_names={x: STATES[x] for x in [v] + parents})

    bn = DiscreteBayesianNetwork([("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")])
    bn.add_cpds(cpd("A", []), cpd("B", ["A"]), cpd("C", ["A"]), cpd("D", ["B", "C"]))
    return bn


def _joint(bn):
    """P(A, B, C, D) by multiplying the CPDs out (pgmpy's factor product, not ppgm)."""
    f = None
    for c in bn.get_cpds():
        f = c.to_factor() if f is None else f.product(c.to_factor(), inplace=False)
    return f


def _brute(bn, row: dict, variables):
    """P(variables | row) by enumeration: the joint reduced to the row, summed, normalised (None if impossible)."""
    f = _joint(bn)
    ev = {k: v for k, v in row.items() if v is not None and not (isinstance(v, float) and np.isnan(v))}
    f = f.reduce(list(ev.items()), inplace=False) if ev else f
    keep = [v for v in variables if v not in ev]
    out = f.marginalize([v for v in f.variables if v not in keep], inplace=False) if len(keep) < len(f.variables) else f
    total = out.values.sum()
    if total == 0:
        return None
    probs = {}
    for combo in itertools.product(*[STATES[v] for v in variables]):
        if any(v in ev and ev[v] != s for v, s in zip(variables, combo)):
            probs[combo] = 0.0
            continue
        sel = {v: s for v, s in zip(variables, combo) if v not in ev}
        probs[combo] = float(out.get_value(**sel)) / total if sel else 1.0
    return probs


def _rows(n, seed, p_missing=0.5):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({v: pd.Series([s[i] for i in rng.integers(0, len(s), n)], dtype=object) for v, s in STATES.items()})
    return df.mask(rng.random(df.shape) < p_missing)


def test_query_rows_equal_brute_force_marginals_and_joint():
    bn = _tiny(0)
    bp = LogBeliefPropagation(bn)
    data = _rows(40, 1)
    one = bp.query_rows(data, "D")
    several = bp.query_rows(data, ["A", "D"])
    joint = bp.query_rows(data, ["B", "C"], joint=True)  # no clique of the tree holds B and C
    assert list(one.columns) == STATES["D"] and one.index.equals(data.index)
    assert several.columns.tolist() == [("A", s) for s in STATES["A"]] + [("D", s) for s in STATES["D"]]
    assert joint.columns.names == ["B", "C"]
    for i, row in data.iterrows():
        r = row.to_dict()
        ref = _brute(bn, r, ["D"])
        np.testing.assert_allclose(one.loc[i].to_numpy(), [ref[(s,)] for s in STATES["D"]], atol=1e-12)
        ref = _brute(bn, r, ["A"])
        np.testing.assert_allclose(several.loc[i, "A"].to_numpy(), [ref[(s,)] for s in STATES["A"]], atol=1e-12)
        ref = _brute(bn, r, ["B", "C"])
        np.testing.assert_allclose(joint.loc[i].to_numpy(), [ref[c] for c in joint.columns], atol=1e-12)


def test_query_rows_equal_variable_elimination_on_alarm():
    bn = bayes_to_pgmpy(to_engine(load_bif_example("alarm")))  # CPT columns rescaled as ppgm does
    rng = np.random.default_rng(0)
    data = sample(bn, 25, seed=0)
    data = data.mask(rng.random(data.shape) < 0.7).drop(columns=["LVFAILURE", "HR"])
    got = LogBeliefPropagation(bn).query_rows(data, ["LVFAILURE", "HR"])
    ve = VariableElimination(bn)
    worst = 0.0
    for i, row in data.iterrows():
        ev = row.dropna().to_dict()
        for v in ["LVFAILURE", "HR"]:
            f = ve.query([v], evidence=ev, show_progress=False)
            ref = [f.get_value(**{v: s}) for s in got[v].columns]
            worst = max(worst, float(np.abs(got.loc[i, v].to_numpy() - ref).max()))
    assert worst < 1e-10


def test_predict_is_the_argmax_of_the_brute_force_posterior_and_matches_pgmpy_format():
    bn = _tiny(2)
    data = _rows(60, 3).drop(columns=["D"])
    out = predict(bn, data)
    assert out.columns.tolist() == ["A", "B", "C", "D"] and out.index.equals(data.index)
    assert out["B"].dtype != object  # B's int states stay ints
    probs = predict_probability(bn, data)
    for i, row in data.iterrows():
        r = row.to_dict()
        for v in ["A", "B", "C", "D"]:
            if v in r and pd.notna(r[v]):
                assert out.loc[i, v] == r[v]
                continue
            ref = _brute(bn, r, [v])
            best = max(STATES[v], key=lambda s: (ref[(s,)], -STATES[v].index(s)))  # ties: the first state
            assert out.loc[i, v] == best
            np.testing.assert_allclose([probs.loc[i, f"{v}_{s}"] for s in STATES[v]], [ref[(s,)] for s in STATES[v]], atol=1e-12)


def test_ties_go_to_the_first_state():
    bn = DiscreteBayesianNetwork([("A", "B")])
    bn.add_cpds(TabularCPD("A", 2, [[0.5], [0.5]], state_names={"A": ["p", "q"]}),
                TabularCPD("B", 2, [[0.5, 0.5], [0.5, 0.5]], ["A"], [2], state_names={"A": ["p", "q"], "B": ["u", "v"]}))
    assert predict(bn, pd.DataFrame({"B": ["v"]}))["A"].tolist() == ["p"]


def test_markov_network_rows_equal_brute_force():
    mn = DiscreteMarkovNetwork([("A", "B"), ("B", "C"), ("C", "A")])
    rng = np.random.default_rng(4)
    names = {"A": ["0", "1"], "B": ["u", "v", "w"], "C": ["s", "t"]}
    fs = [DiscreteFactor([a, b], [len(names[a]), len(names[b])], rng.random(len(names[a]) * len(names[b])) + 0.1,
                         state_names={a: names[a], b: names[b]}) for a, b in [("A", "B"), ("B", "C"), ("C", "A")]]
    mn.add_factors(*fs)
    joint = fs[0].product(fs[1], inplace=False).product(fs[2], inplace=False)
    data = pd.DataFrame({"A": ["1", None, None], "C": [None, "t", None]})
    got = predict_probability(mn, data, ["B"])
    for i, row in data.iterrows():
        ev = [(k, v) for k, v in row.items() if pd.notna(v)]
        f = joint.reduce(ev, inplace=False) if ev else joint
        f = f.marginalize([v for v in f.variables if v != "B"], inplace=False)
        f.normalize()
        np.testing.assert_allclose(got.loc[i].to_numpy(), [f.get_value(B=s) for s in names["B"]], atol=1e-12)


def test_impossible_rows_are_nan_and_counted_not_one_failure():
    bn = DiscreteBayesianNetwork([("A", "B")])
    bn.add_cpds(TabularCPD("A", 2, [[1.0], [0.0]]), TabularCPD("B", 2, [[0.3, 0.5], [0.7, 0.5]], ["A"], [2]))
    data = pd.DataFrame({"A": [1, 0, None]}, index=["x", "y", "z"])
    with pytest.warns(RuntimeWarning, match="1 of 3 rows"):
        out = LogBeliefPropagation(bn).query_rows(data, "B")
    assert out.loc["x"].isna().all() and out.attrs["impossible_rows"] == ["x"]
    np.testing.assert_allclose(out.loc[["y", "z"]].to_numpy(), [[0.3, 0.7], [0.3, 0.7]])
    with pytest.warns(RuntimeWarning):
        filled = impute(bn, pd.DataFrame({"A": [1, 0], "B": [None, None]}))
    assert filled["B"].isna().tolist() == [True, False]


def test_bad_input_is_named():
    bp = LogBeliefPropagation(_tiny(0))
    with pytest.raises(ValueError, match=r"columns \['E'\] are not variables"):
        bp.query_rows(pd.DataFrame({"A": ["a0"], "E": [1]}), "D")
    with pytest.raises(ValueError, match="'A' has values"):
        bp.query_rows(pd.DataFrame({"A": ["a9"]}), "D")
    with pytest.raises(ValueError, match="variables"):
        bp.query_rows(pd.DataFrame({"A": ["a0"]}), "Q")
    with pytest.raises(ValueError, match="method"):
        impute(_tiny(0), pd.DataFrame({"A": ["a0"]}), method="mean")
    data = _rows(5, 0)
    before = data.copy()
    impute(_tiny(0), data, "sample", seed=1)
    pd.testing.assert_frame_equal(data, before)  # the caller's frame is not modified


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_rows_permuted_give_posteriors_permuted_summing_to_one_with_indicators(seed):
    bp = _BP
    data = _rows(12, seed)
    perm = np.random.default_rng(seed).permutation(len(data))
    a = bp.query_rows(data, ["A", "B"])
    b = bp.query_rows(data.iloc[perm], ["A", "B"])
    pd.testing.assert_frame_equal(a.iloc[perm], b)
    for v in ["A", "B"]:
        np.testing.assert_allclose(a[v].sum(axis=1), 1.0, atol=1e-12)
        seen = data[v].notna().to_numpy()
        ind = np.array([[s == x for s in STATES[v]] for x in data[v][seen]], dtype=float).reshape(-1, len(STATES[v]))
        np.testing.assert_allclose(a[v].to_numpy()[seen], ind, atol=1e-15)


_BP = LogBeliefPropagation(_tiny(5))


def test_impute_mode_is_predict_and_sample_draws_the_joint_posterior():
    bn = _tiny(6)
    data = _rows(30, 7)
    pd.testing.assert_frame_equal(impute(bn, data), predict(bn, data, ["A", "B", "C", "D"]))
    row = {"A": None, "B": None, "C": "hi", "D": None}
    many = pd.DataFrame([row] * 3000)
    drawn = impute(bn, many, "sample", seed=3)
    assert drawn.notna().all().all()
    pd.testing.assert_frame_equal(drawn, impute(bn, many, "sample", seed=3))  # same seed, same draws
    ref = _brute(bn, row, ["A", "B", "D"])
    freq = drawn.groupby(["A", "B", "D"]).size() / len(many)
    for combo, p in ref.items():
        f = float(freq.get(combo, 0.0))
        assert abs(f - p) < 4 * np.sqrt(p * (1 - p) / len(many)) + 1e-9, (combo, f, p)


def test_read_bif_equals_bif_reader_and_round_trips(tmp_path):
    import gzip
    from importlib.resources import files

    path = files("pgmpy") / "utils" / "example_models" / "child.bif.gz"
    ours = read_bif(str(path))
    with gzip.open(str(path)) as fh:
        ref = BIFReader(string=fh.read().decode("utf-8")).get_model()
    assert set(ours.edges()) == set(ref.edges()) and set(ours.nodes()) == set(ref.nodes())
    for c in ref.get_cpds():
        o = ours.get_cpds(c.variable)
        assert o.state_names == c.state_names and o.variables == c.variables
        np.testing.assert_array_equal(o.get_values(), c.get_values())
    write_bif(ours, tmp_path / "child.bif")
    back = read_bif(tmp_path / "child.bif")
    for c in ours.get_cpds():
        np.testing.assert_allclose(back.get_cpds(c.variable).get_values(), c.get_values(), rtol=1e-12)


def test_bayesian_network_from_an_edge_list_csv():
    bn = bayesian_network(io.StringIO("parent,child\nA,B\nB,C\n"))
    assert sorted(bn.edges()) == [("A", "B"), ("B", "C")]
    with pytest.raises(ValueError, match="self-loop"):
        bayesian_network([("A", "A")])


@pytest.mark.xdist_group("dask")
def test_dask_partitions_give_the_in_memory_values():
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    bn = _tiny(8)
    data = _rows(50, 9)
    with dask.config.set({"dataframe.convert-string": False}):  # keep the integer states as they are
        ddf = dd.from_pandas(data, npartitions=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bp = LogBeliefPropagation(bn)
        pd.testing.assert_frame_equal(bp.query_rows(ddf, ["A", "D"]).compute(), bp.query_rows(data, ["A", "D"]))
        pd.testing.assert_frame_equal(predict_probability(bn, ddf).compute(), predict_probability(bn, data))
        pd.testing.assert_frame_equal(predict(bn, ddf).compute(), predict(bn, data))
        pd.testing.assert_frame_equal(impute(bn, ddf, "sample", seed=2).compute(), impute(bn, data, "sample", seed=2))
