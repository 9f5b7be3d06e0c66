"""The quick panel: every learner at its defaults on small bundled networks, against its plain baseline.

The full panel (``python benchmarks/panel.py``, nine networks, one table in benchmarks/RESULTS.md) holds the
bars; this is its small form, run by the test suite on every change, so that a default that falls behind its
baseline beyond noise, or stops converging, fails here. The tasks are benchmarks/panel.py's own functions at
its ``QUICK`` sizes; the margins are wider than the full panel's bars because the sizes are smaller (the
sampling noise of a KL, a TV or a test NLLH at N = 5,000-20,000), but far narrower than the failures they
guard against (PCD running off gave a test NLLH of -0.4 to -18; a filter worse than the MLE by 0.026 TV).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import panel  # noqa: E402

SEED = 2  # not the report's seed, nor a tuning one
SIZES = panel.QUICK


@pytest.fixture(scope="module", params=["asia", "cancer", "child"])
def truth(request):
    return request.param, panel.network(request.param)


def test_cgm_em_is_no_worse_than_the_best_naive_fit(truth):
    name, bn = truth
    row = panel.task_tables(bn, SIZES.tables, SEED)
    assert row["converged"], name
    assert row["ratio"] <= 1.10, (name, row)


@pytest.mark.parametrize("kind", panel.FILTER_KINDS)
def test_the_filter_never_does_worse_than_the_mle(truth, kind):
    name, bn = truth
    row = panel.task_filter(bn, SIZES.filter, SEED, kind, SIZES.tv_draws)
    assert row["converged"], (name, kind)
    assert row["default"] <= row["MLE"] + (0.005 if kind == "clean" else 0.01), (name, kind, row)
    if kind == "clean":
        assert row["removed"] == 0 and row["default"] == row["MLE"], (name, row)


@pytest.mark.parametrize("name", ["cancer", "child"])  # asia's label is an OR of two features: the full panel reports it
def test_maxent_from_exact_tables_converges_near_the_logistic(name):
    row = panel.task_maxent(panel.network(name), SIZES.maxent, SEED, noisy=False)
    assert row["converged"], (name, row)
    assert row["gap"] <= 0.03, (name, row)


@pytest.mark.parametrize("rule", panel.HOLE_RULES)
def test_em_with_holes_beats_complete_case(truth, rule):
    name, bn = truth
    row = panel.task_holes(bn, SIZES.holes, SEED, rule)
    assert row["converged"], (name, rule)
    assert row["EM"] < row["complete-case"], (name, rule, row)


def test_a_markov_network_from_records_is_as_close_as_the_dags_mle(truth):
    name, bn = truth
    row = panel.task_markov(bn, SIZES.markov, SEED)
    assert row["converged"], name
    assert row["Markov network"] <= 1.5 * row["DAG MLE"], (name, row)
