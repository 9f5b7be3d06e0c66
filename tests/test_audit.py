"""Privacy claims checked by experiment: every private path run many times on two neighbouring inputs
chosen to be hard, and a lower confidence bound on the epsilon its outputs imply (ppgm.privacy.audit)
held below the claim; and each mechanism's broken twin (monkeypatched here, never in the library)
caught above it, so each audit is shown to have the power to see a real leak.

Not flaky by construction. Every bound is at confidence 1 - 1e-6 (Clopper-Pearson, Bonferroni over
the events fixed in advance, both data sets, both sides), so a mechanism that keeps its claim fails
with probability at most 1e-6. Each broken twin's run count is set so its expected bound is well
above the claim: the docstrings give the expected bound (from the exact output distributions) and
the spread seen over repeated audits at that run count.

The scenarios (neighbouring inputs, events, mutations) are benchmarks/audit_privacy.py's, whose long
form runs them at 10 to 100 times the runs. Private path (OpenDP noise, no seed) where it is fast
enough for the suite; seeded (a numpy Generator on a seed drawn from the operating system and
recorded in the result) for the broken twins and for the private quantiles (OpenDP's quantile takes
0.1 s a call: its private path is audited in the long form only).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import audit_privacy as ap  # noqa: E402
from ppgm.privacy import audit  # noqa: E402


def check(scenario, runs, seeded=False):
    results = ap.run(scenario, runs, seeded=seeded)
    for r in results:
        assert r.private == (not seeded) and (r.seed is not None) == seeded
        assert r.passed, f"{r.name}: audited epsilon >= {r.epsilon_lb:.3f} above the claimed {r.claimed:.3f} (seed {r.seed})"
    return results


def caught(scenario, runs):
    """Every claim's bound above the claim under each broken twin (seeded runs)."""
    for label, brk in scenario.breaks.items():
        with brk():
            for r in ap.run(scenario, runs, seeded=True):
                assert not r.passed, f"{r.name} with {label}: the audit missed it ({r.epsilon_lb:.3f} <= {r.claimed:.3f}, seed {r.seed})"


# --- the harness ----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.data())
def test_clopper_pearson_against_the_binomial(n, data):
    """The bounds are where the binomial tail equals alpha (independent reference: scipy's cdf)."""
    k = data.draw(st.integers(0, n))
    alpha = data.draw(st.sampled_from([1e-6, 0.01, 0.2]))
    lo, hi = audit.clopper_pearson([k], n, alpha)
    if k > 0:
        assert binom.sf(k - 1, n, lo[0]) == pytest.approx(alpha, rel=1e-6)  # P(X >= k | lo) = alpha
    else:
        assert lo[0] == 0
    if k < n:
        assert binom.cdf(k, n, hi[0]) == pytest.approx(alpha, rel=1e-6)  # P(X <= k | hi) = alpha
    else:
        assert hi[0] == 1


def test_bound_of_randomised_response():
    """Randomised response with truth probability p is log(p / (1 - p))-DP exactly: the bound at
    200,000 runs sits just below it (within 0.04), and the same outputs judged against a claim of
    90% of it fail."""
    eps = math.log(3)

    def rr(which, runs, rng):
        return ((rng.random(runs) < 0.75) == bool(which))[:, None]

    r = audit.audit(rr, lambda y: np.concatenate([y, ~y], 1), 200_000, eps, seeded=True)
    assert eps - 0.04 < r.epsilon_lb <= eps and r.passed
    low = audit.audit(rr, lambda y: np.concatenate([y, ~y], 1), 200_000, 0.9 * eps, seed=r.seed)
    assert low.epsilon_lb == r.epsilon_lb and not low.passed  # replayed from the recorded seed


def test_delta_and_bonferroni():
    """delta is subtracted from the larger probability; more events widen every bound."""
    one, _, _ = audit.epsilon_lower_bound([6000], [2000], 10_000)
    with_delta, _, _ = audit.epsilon_lower_bound([6000], [2000], 10_000, delta=0.1)
    many, _, _ = audit.epsilon_lower_bound([6000] + [0] * 99, [2000] + [0] * 99, 10_000)
    assert with_delta < one and many < one
    assert with_delta == pytest.approx(math.log((audit.clopper_pearson([6000], 10_000, 1e-6 / 4)[0][0] - 0.1)
                                                / audit.clopper_pearson([2000], 10_000, 1e-6 / 4)[1][0]))


def test_harness_rejects_bad_input():
    with pytest.raises(ValueError, match="runs"):
        audit.collect(lambda w, k, r: np.zeros((k, 1)), 0)
    with pytest.raises(ValueError, match="sample"):
        audit.collect(lambda w, k, r: np.zeros((k + 1, 1)), 3)
    with pytest.raises(ValueError, match="events"):
        audit.audit_outputs(np.zeros((3, 1)), np.zeros((3, 1)), lambda y: y[:2] > 0, 1.0)
    with pytest.raises(ValueError, match="delta"):
        audit.epsilon_lower_bound([1], [1], 3, delta=1.5)


# --- the private paths ----------------------------------------------------------------------------


def test_laplace_sampler():
    """LaplaceMechanism(1) on one cell, counts 11 and 10. Private: 5,000 runs (the threshold event
    y >= 11 has probabilities 0.731 and 0.269, ratio e exactly: the bound comes out near 0.82).
    Noise halved (epsilon 2): bound 1.78 on average at 5,000 seeded runs (five audits 1.75-1.82,
    sd 0.024: 32 sd above the claim)."""
    sc = ap.laplace_sampler()
    check(sc, 5_000)
    caught(sc, 5_000)


def test_gaussian_sampler():
    """GaussianMechanism(rho=0.5) on one cell (sigma 1), tested at delta 0.2, where the claim is
    epsilon 1.176. Noise halved (rho 2): bound 1.63 on average at 5,000 seeded runs (five audits
    1.58-1.71, sd 0.047: 10 sd above the claim)."""
    sc = ap.gaussian_sampler()
    check(sc, 5_000)
    caught(sc, 5_000)


def test_release_tables_person_at_the_bound():
    """release_tables end to end, one person with 8 records in one cell and max_contributions=4,
    Laplace epsilon 1 for the table and 1 for N. Private: 100 runs (too few to see much: the check
    is that the private path holds). Sensitivity miscounted (the bound k left out of the scale,
    epsilon 4 in truth): bounds 2.20 (table) and 2.21 (N) on average at 500 seeded runs (five
    audits 2.00-2.35, sd 0.10 and 0.13: 9 sd above the claim).
    The bound skipped (8 records counted, epsilon 2) needs 1,500 runs: the long form."""
    sc = ap.tables_release()
    check(sc, 100)
    sc.breaks.pop("bound skipped")
    caught(sc, 500)


def test_mst_selection():
    """mst_select's two rounds, rho 1 (0.5 a round), the zCDP claim tested at delta 0.2 (epsilon
    2.222). Private: 150 runs. Gumbel scale halved (rho 4): expected bound 3.36 at 5,000 seeded runs
    (five audits 3.16-3.59, sd 0.15: 7 sd above the claim)."""
    sc = ap.mst_selection()
    check(sc, 150)
    caught(sc, 5_000)


def test_aim_selection():
    """One AIM round's choice (aim_scores and report_noisy_max at epsilon 1, pure DP). Private: 500
    runs. Gumbel scale halved (epsilon 2): expected bound 1.43 at 10,000 seeded runs (five audits
    1.39-1.53, sd 0.047: 10 sd above the claim)."""
    sc = ap.aim_selection()
    check(sc, 500)
    caught(sc, 10_000)


def test_maxent_aggregates():
    """noisy_aggregates (counts and label sums of one feature, Laplace epsilon 1): private 300 runs,
    and aggregate(mechanism=...) end to end, private, 60 runs. Label sums left out of the
    sensitivity (epsilon 2): bound 1.49 on average at 2,000 seeded runs (five audits 1.41-1.53, sd
    0.05: 10 sd above the claim)."""
    sc = ap.maxent_aggregates()
    check(sc, 300)
    check(ap.maxent_aggregates(end_to_end=True), 60)
    caught(sc, 2_000)


def test_private_quantiles():
    """One quantile (alpha 0.1, epsilon 2, 11 candidates), seeded (OpenDP's private quantile is
    audited in the long form). Correct: 3,000 runs (bounds 0.74-0.83). The budget quadrupled (the
    split over four levels forgotten): expected bound 3.39 at 3,000 seeded runs (five audits
    3.11-3.59, sd 0.18: 7.6 sd above the claim)."""
    sc = ap.quantiles()
    check(sc, 3_000, seeded=True)
    caught(sc, 3_000)


def test_private_bins_of_a_numeric_column():
    """A numeric column's private bins through the release's own path (the fine histogram at rho 0.5,
    the bins read from it), tested at delta 0.2 (claimed epsilon 1.176) on the noisy cell and the first
    edge chosen; seeded (the private path runs in the long form: 40 s for 3,000 runs here). Correct:
    0.25 at 3,000 private runs. Noise halved: 1.57 at 3,000 seeded runs (one audit), 0.39 above the claim."""
    sc = ap.private_bins()
    check(sc, 1_500, seeded=True)
    caught(sc, 3_000)
