import copy

import numpy as np
import pytest
from pgmpy.factors.discrete import DiscreteFactor, TabularCPD
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork

from ppgm import infer
from ppgm.adapters import (
    bayes_from_pgmpy,
    bayes_to_pgmpy,
    load_bif_example,
    markov_from_pgmpy,
    markov_to_pgmpy,
    tabular_cpds,
)
from ppgm.models.random_models import third_order_chain


def _student():
    bn = DiscreteBayesianNetwork([("diff", "grade"), ("intel", "grade"), ("grade", "letter")])
    bn.add_cpds(
        TabularCPD("diff", 2, [[0.6], [0.4]], state_names={"diff": ["easy", "hard"]}),
        TabularCPD("intel", 2, [[0.7], [0.3]], state_names={"intel": ["low", "high"]}),
        TabularCPD(
            "grade", 3,
            [[0.3, 0.05, 0.9, 0.5], [0.4, 0.25, 0.08, 0.3], [0.3, 0.7, 0.02, 0.2]],
            evidence=["intel", "diff"], evidence_card=[2, 2],
            state_names={"grade": ["A", "B", "C"], "intel": ["low", "high"], "diff": ["easy", "hard"]},
        ),
        TabularCPD("letter", 2, [[0.1, 0.4, 0.99], [0.9, 0.6, 0.01]], evidence=["grade"], evidence_card=[3],
                   state_names={"letter": ["weak", "strong"], "grade": ["A", "B", "C"]}),
    )
    return bn


def test_bayes_round_trip_keeps_cpds_and_state_names():
    bn = _student()
    eng = bayes_from_pgmpy(bn)
    assert eng.order.index("grade") > eng.order.index("diff")
    assert eng.domain.state_names["grade"] == ("A", "B", "C")
    # CPT axis convention: parents then node; P(grade=C | intel=high, diff=easy) = 0.02
    assert eng.cpts["grade"][1, 0, 2] == pytest.approx(0.02)
    back = bayes_to_pgmpy(eng)
    for cpd in bn.get_cpds():
        other = back.get_cpds(cpd.variable)
        assert other == cpd  # pgmpy compares values with state-name alignment
    assert back.check_model()


def test_markov_round_trip_and_state_reordering():
    mn = DiscreteMarkovNetwork([("A", "B"), ("B", "C")])
    f1 = DiscreteFactor(["A", "B"], [2, 2], [1, 2, 3, 4], state_names={"A": ["a0", "a1"], "B": ["b0", "b1"]})
    # the second factor lists B's states in the other order
    f2 = DiscreteFactor(["B", "C"], [2, 2], [5, 6, 7, 8], state_names={"B": ["b1", "b0"], "C": [0, 1]})
    mn.add_factors(f1, f2)
    snapshot = copy.deepcopy(mn.get_factors())
    eng = markov_from_pgmpy(mn)
    bc = [f for f in eng.factors if f.variables == ("B", "C")][0]
    np.testing.assert_allclose(np.exp(bc.values), [[7, 8], [5, 6]])  # re-indexed to b0, b1
    for a, b in zip(snapshot, mn.get_factors()):
        assert a == b  # caller's factors untouched
    back = markov_to_pgmpy(eng)
    Z = infer(eng).log_z
    assert np.log(back.get_partition_function()) == pytest.approx(Z - sum(f.values.max() for f in eng.factors))


def test_conversion_errors():
    mn = DiscreteMarkovNetwork([("A", "B")])
    mn.add_factors(DiscreteFactor(["A", "B"], [2, 2], [1, 2, 3, 4]), DiscreteFactor(["B"], [3], [1, 1, 1]))
    with pytest.raises(ValueError, match="'B' has 2 states"):
        markov_from_pgmpy(mn)
    mn2 = DiscreteMarkovNetwork([("A", "B")])
    mn2.add_factors(DiscreteFactor(["A", "B"], [2, 2], [1, -2, 3, 4]))
    with pytest.raises(ValueError, match="negative or NaN"):
        markov_from_pgmpy(mn2)
    with pytest.raises(TypeError, match="DiscreteMarkovNetwork"):
        markov_from_pgmpy("model")
    bn = DiscreteBayesianNetwork([("A", "B")])
    bn.add_cpds(TabularCPD("A", 2, [[0.5], [0.5]]))
    with pytest.raises(ValueError, match="no CPD"):
        bayes_from_pgmpy(bn)


def test_alarm_converts_and_cpds_come_back_equal():
    alarm = load_bif_example("alarm")
    eng = bayes_from_pgmpy(alarm)
    assert len(eng.domain) == 37 and sum(eng.domain.cards) == 105
    for cpd in tabular_cpds(eng):
        assert cpd == alarm.get_cpds(cpd.variable)
    with pytest.raises(ValueError, match="no bundled network"):
        load_bif_example("nope")


def test_engine_to_pgmpy_markov_keeps_distribution():
    m = third_order_chain(5, 3, seed=4)
    back = markov_from_pgmpy(markov_to_pgmpy(m))
    a, b = infer(m), infer(back)
    np.testing.assert_allclose(a.marginal(("X0", "X4")).values, b.marginal(("X0", "X4")).values, atol=1e-12)


def test_extreme_log_potentials_survive_the_trip_to_pgmpy():
    """pgmpy stores exp(log-potential): entries 800 nats down would underflow to exact zeros, and a joint
    that is zero everywhere. They come back floored at -700 relative to their factor; -inf stays zero."""
    from ppgm import Domain, Factor, MarkovNetwork

    d = Domain(("A", "B", "C"), (2, 2, 2))
    ab = np.array([[0.0, -800.0], [-800.0, -np.inf]])
    bc = np.array([[-800.0, 0.0], [0.0, -800.0]])
    m = MarkovNetwork(d, [Factor(("A", "B"), ab), Factor(("B", "C"), bc)])
    back = markov_from_pgmpy(markov_to_pgmpy(m))
    got = [f.values for f in back.factors]
    np.testing.assert_allclose(got[0], [[0.0, -700.0], [-700.0, -np.inf]], atol=1e-9)
    np.testing.assert_allclose(got[1], [[-700.0, 0.0], [0.0, -700.0]], atol=1e-9)
    # the joint keeps its mass where the engine's does: A = B = 0, C = 1
    assert infer(back).marginal(("A", "B", "C")).values[0, 0, 1] > 1 - 1e-12
