import numpy as np
import pytest
from pgmpy.inference import BeliefPropagation, VariableElimination

import ppgm.inference.junction_tree as jt_module
from ppgm.adapters import LogBeliefPropagation, dirichlet_chain_network, load_bif_example


def _ve(model, variables, evidence=None):
    f = VariableElimination(model).query(variables, evidence=evidence, show_progress=False)
    f.normalize()
    return f


def test_regression_small_potentials_third_order_chain():
    """pgmpy 1.1.2's BeliefPropagation stops early on this model (entries ~1e-2, products ~1e-50);
    ours must agree with normalised VariableElimination to 1e-10."""
    mn = dirichlet_chain_network(10, 10, seed=0)
    ours = LogBeliefPropagation(mn)
    worst_ours = 0.0
    for i in range(10):
        for j in range(i + 1, min(i + 4, 10)):
            ref = _ve(mn, [f"X{i}", f"X{j}"])
            got = ours.query([f"X{i}", f"X{j}"])
            assert got.variables == [f"X{i}", f"X{j}"]
            worst_ours = max(worst_ours, np.abs(got.values - ref.values).max())
    assert worst_ours < 1e-10
    # record what pgmpy's own BP does on the same model (its silent error is the reason we exist)
    bp = BeliefPropagation(mn)
    bp.calibrate()
    f = bp.query(["X0", "X1"], show_progress=False)
    f.normalize()
    pgmpy_err = np.abs(f.values - _ve(mn, ["X0", "X1"]).values).max()
    assert pgmpy_err > 1e-3 or pgmpy_err < 1e-10  # either still broken, or fixed upstream


def test_tree_built_once_and_calibration_cached(monkeypatch):
    mn = dirichlet_chain_network(6, 3, seed=1)
    calls = {"build": 0, "calibrate": 0}
    real_build = jt_module.JunctionTree.build.__func__
    real_cal = jt_module.JunctionTree.calibrate

    def counting_build(cls, *a, **k):
        calls["build"] += 1
        return real_build(cls, *a, **k)

    def counting_cal(self, *a, **k):
        calls["calibrate"] += 1
        return real_cal(self, *a, **k)

    monkeypatch.setattr(jt_module.JunctionTree, "build", classmethod(counting_build))
    monkeypatch.setattr(jt_module.JunctionTree, "calibrate", counting_cal)
    bp = LogBeliefPropagation(mn)
    for _ in range(5):
        bp.query(["X0", "X5"])
        bp.query(["X1"], evidence={"X2": 1})
    assert calls == {"build": 1, "calibrate": 2}


def test_alarm_queries_with_evidence_match_variable_elimination():
    alarm = load_bif_example("alarm")
    for cpd in alarm.get_cpds():
        cpd.normalize()  # ALARM's published rows sum to 1 +- 1e-7; VE's barren-node pruning assumes exact rows
    bp = LogBeliefPropagation(alarm)
    cases = [
        (["HR", "BP"], None),
        (["LVFAILURE"], {"CVP": "HIGH", "BP": "LOW"}),
        (["HYPOVOLEMIA", "PRESS"], {"HRBP": "HIGH"}),
        (["HISTORY", "KINKEDTUBE"], {"SAO2": "LOW", "EXPCO2": "ZERO"}),
    ]
    for variables, evidence in cases:
        ref = _ve(alarm, variables, evidence)
        got = bp.query(variables, evidence=evidence)
        got_aligned = got.copy()
        np.testing.assert_allclose(got_aligned.values, ref.values, atol=1e-10)
        assert got.state_names == ref.state_names
    assert bp.log_partition_function() == pytest.approx(0.0, abs=1e-10)
    # log P(evidence) against VE's unnormalised evidence factor
    ev = {"CVP": "HIGH", "BP": "LOW"}
    p_ev = VariableElimination(alarm).query(["CVP", "BP"], show_progress=False).get_value(**ev)
    assert bp.log_partition_function(ev) == pytest.approx(np.log(p_ev), rel=1e-9)
    single = bp.query(["HR", "BP"], joint=False)
    np.testing.assert_allclose(single["HR"].values, _ve(alarm, ["HR"]).values, atol=1e-10)


def test_clique_and_sepset_beliefs_are_normalised_and_consistent():
    bp = LogBeliefPropagation(load_bif_example("asia"))
    beliefs = bp.get_clique_beliefs()
    assert set(beliefs) == set(bp.get_cliques())
    for f in beliefs.values():
        assert f.values.sum() == pytest.approx(1.0)
    for key, sep in bp.get_sepset_beliefs().items():
        for clique in key:
            m = beliefs[clique].marginalize([v for v in clique if v not in sep.variables], inplace=False)
            m = m.copy()
            np.testing.assert_allclose(m.values.transpose([m.variables.index(v) for v in sep.variables]), sep.values, atol=1e-12)


def test_query_factors_are_pgmpy_s_own_and_independent():
    """Query results are made without pgmpy's constructor (its checks cost as much as the query) but
    equal, attribute for attribute, what the constructor makes; each is the caller's own: changing a
    result's values or state maps leaves the next query's result and the cached beliefs intact."""
    from pgmpy.factors.discrete import DiscreteFactor

    from ppgm.adapters import inference

    bp = LogBeliefPropagation(load_bif_example("asia"))
    assert inference._direct_factors_ok()
    f = bp.query(["lung", "smoke"])
    made = DiscreteFactor(["lung", "smoke"], [2, 2], f.values.copy(),
                          state_names={v: list(bp.domain.state_names[v]) for v in ("lung", "smoke")})
    assert f == made and set(vars(f)) == set(vars(made))
    for k in vars(made):
        a, b = vars(f)[k], vars(made)[k]
        assert type(a) is type(b) and (np.array_equal(a, b) and a.dtype == b.dtype if isinstance(a, np.ndarray) else a == b)
    ve = VariableElimination(load_bif_example("asia")).query(["lung", "smoke"], show_progress=False)
    np.testing.assert_allclose(f.values, ve.values.transpose([ve.variables.index(v) for v in f.variables]), atol=1e-12)
    f.values[...] = 0.0
    f.state_names["lung"].append("maybe")
    f.name_to_no["lung"]["maybe"] = 2
    g = bp.query(["lung", "smoke"])
    np.testing.assert_allclose(g.values, made.values)
    assert g.state_names == made.state_names and g.name_to_no == made.name_to_no
    beliefs = bp.get_clique_beliefs()
    for b in beliefs.values():
        b.values[...] = 0.0
    assert all(abs(b.values.sum() - 1) < 1e-12 for b in bp.get_clique_beliefs().values())


def test_query_factors_fall_back_to_pgmpy_s_constructor(monkeypatch):
    """When the probe says a pgmpy release stores its factors differently, queries use pgmpy's
    constructor, with the same answers."""
    from ppgm.adapters import inference

    bp = LogBeliefPropagation(load_bif_example("asia"))
    direct = bp.query(["lung", "smoke"])
    monkeypatch.setattr(inference, "_DIRECT_OK", [False])
    monkeypatch.setattr(inference, "_direct_factor", lambda *a: pytest.fail("the direct path was taken"))
    made = bp.query(["lung", "smoke"])
    assert made == direct and made.state_names == direct.state_names and made.name_to_no == direct.name_to_no


def test_bad_queries():
    bp = LogBeliefPropagation(load_bif_example("asia"))
    with pytest.raises(ValueError, match="unknown variables"):
        bp.query(["nope"])
    with pytest.raises(ValueError, match="not a state"):
        bp.query(["lung"], evidence={"smoke": "maybe"})
    with pytest.raises(ValueError, match="unknown variable"):
        bp.query(["lung"], evidence={"nope": "yes"})
    with pytest.raises(ValueError, match="share"):
        bp.query(["lung"], evidence={"lung": "yes"})
    with pytest.raises(ValueError, match="probability zero"):
        bp.query(["dysp"], evidence={"either": "no", "lung": "yes"})


def test_map_query_matches_pgmpy_and_brute_force():
    import itertools

    from pgmpy.inference import VariableElimination

    from ppgm.adapters import LogBeliefPropagation, dirichlet_chain_network, load_bif_example

    asia = load_bif_example("asia")
    bp, ve = LogBeliefPropagation(asia), VariableElimination(asia)
    for variables, evidence in [(["lung", "tub"], {"xray": "yes"}), (["either"], {}), (["bronc", "smoke", "asia"], {"dysp": "yes"})]:
        assert bp.map_query(variables, evidence=evidence) == ve.map_query(variables, evidence=evidence, show_progress=False)
    # every unobserved variable: the most probable configuration, against the full joint by brute force
    mn = dirichlet_chain_network(5, 3, seed=2)
    bp = LogBeliefPropagation(mn)
    best = bp.map_query(evidence={"X2": 1})
    factors = mn.get_factors()
    scores = {}
    for cfg in itertools.product(range(3), repeat=5):
        if cfg[2] != 1:
            continue
        scores[cfg] = sum(np.log(f.values[tuple(cfg[int(v[1])] for v in f.variables)]) for f in factors)
    top = max(scores, key=scores.get)
    assert best == {f"X{i}": top[i] for i in range(5) if i != 2}


def test_virtual_evidence_matches_pgmpy():
    from pgmpy.factors.discrete import TabularCPD
    from pgmpy.inference import VariableElimination

    from ppgm.adapters import LogBeliefPropagation, load_bif_example

    asia = load_bif_example("asia")
    soft = [TabularCPD("xray", 2, [[0.8], [0.3]], state_names={"xray": ["yes", "no"]}),
            TabularCPD("smoke", 2, [[0.9], [0.4]], state_names={"smoke": ["yes", "no"]})]
    reordered = [soft[0], TabularCPD("smoke", 2, [[0.4], [0.9]], state_names={"smoke": ["no", "yes"]})]  # pgmpy refuses this order
    theirs = VariableElimination(asia).query(["lung"], evidence={"asia": "yes"}, virtual_evidence=soft, show_progress=False)
    for given in (soft, reordered):
        ours = LogBeliefPropagation(asia).query(["lung"], evidence={"asia": "yes"}, virtual_evidence=given)
        np.testing.assert_allclose(ours.values, theirs.values, atol=1e-12)
    assert LogBeliefPropagation(asia).map_query(["lung"], virtual_evidence=soft) == VariableElimination(asia).map_query(
        ["lung"], virtual_evidence=soft, show_progress=False)
    with pytest.raises(ValueError, match="virtual_evidence"):
        LogBeliefPropagation(asia).query(["lung"], virtual_evidence=[TabularCPD("xray", 2, [[1.5], [0.3]])])
    with pytest.raises(TypeError, match="virtual_evidence"):
        LogBeliefPropagation(asia).query(["lung"], virtual_evidence=soft[0])
