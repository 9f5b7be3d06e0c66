"""EM's loops and release-based rules (ppgm.learners.em_rules): the iteration count and the M-step weight chosen
from the release, and SQUAREM's extrapolated loop."""

import warnings

import numpy as np
import pytest

from ppgm import contingency_tables, infer, kl_divergence, sample
from ppgm.learners.cgm import cgm_em, naive_mle
from ppgm.models.random_models import pairwise_dirichlet, third_order_chain
from ppgm.learners.release_rule import UndecidedWarning, simulated_release

from conftest import laplace_release as _release


def test_cgm_em_iterations_chosen_from_the_release():
    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3), (0, 3)], 4, 3, alpha=2.0, seed=5)
    N = 20_000
    ys = _release(truth, N, 40.0, 7)
    res = cgm_em(truth.domain, ys, N=N, progress=False, max_iter=12)
    it = res.selection["iterations"]
    assert set(res.selection) == {"l2", "iterations"}
    assert 0 <= it["value"] <= 12 and it["value"] == int(it["value"])
    scores = np.array(it["mean_scores"])
    assert scores[int(it["value"])] <= scores[0] + 1e-12  # never chosen worse than the start in the simulation
    n_iter = int(it["value"])
    assert len(res.history) == max(n_iter, 1) and "stopped" in res.history[-1]
    again = cgm_em(truth.domain, ys, N=N, progress=False, max_iter=12)
    np.testing.assert_array_equal(again.model.factors[0].values, res.model.factors[0].values)


def test_iteration_count_is_the_minimum_of_one_simulated_release_rebuilt_from_the_public_api():
    # the default rule simulates one release (ITER_BOOT): its curve is KL(pilot || EM iterate t), EM run by
    # cgm_em itself from the naive refit of that release, and the count is the curve's minimum
    from ppgm.learners.cgm import Pilot, release_l2
    from ppgm.learners.em_rules import ITER_BOOT, RISE
    from ppgm.learners.mle import MarginalOracle

    assert ITER_BOOT == 1
    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3)], 4, 3, alpha=0.5, seed=11)
    N = 5000.0
    ys = _release(truth, int(N), 15.0, 3)
    res = cgm_em(truth.domain, ys, N=N, progress=False)
    it = res.selection["iterations"]
    curve = np.array(it["mean_scores"])
    assert it["value"] == int(np.argmin(curve)) and it["reason"].startswith("smallest")
    oracle = MarginalOracle(truth.domain, [m.variables for m in ys])
    pilot = Pilot.of(truth.domain, ys, N, oracle=oracle)
    start_l2 = release_l2(truth.domain, ys, N, seed=0, pilot=pilot).value
    assert start_l2 == res.selection["l2"]["value"]
    sim = simulated_release(pilot.model, ys, N, np.random.default_rng(0), pilot.calibration)
    start = pilot.refit(sim, start_l2, None)
    ref = [_joint_kl(pilot.model, start)]
    cgm_em(truth.domain, sim, N=N, init=start, stop="converged", max_iter=curve.size - 1, progress=False,
           callback=lambda t, model, record: ref.append(_joint_kl(pilot.model, model)))
    ref += [ref[-1]] * (curve.size - len(ref))  # a run that converged early keeps its last score
    np.testing.assert_allclose(curve, ref, rtol=1e-6)
    # the simulated run stopped RISE iterations past its minimum, or at convergence / max_iter
    assert curve.size - 1 - int(np.argmin(curve)) <= RISE


def test_zero_iterations_return_the_start():
    truth = pairwise_dirichlet([(0, 1), (1, 2)], 3, 3, alpha=1e6, seed=7)
    ys = _release(truth, 500, 50.0, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndecidedWarning)
        res = cgm_em(truth.domain, ys, N=500, progress=False)
        start = naive_mle(truth.domain, ys, N=500, tol=1e-4)
    if res.selection["iterations"]["value"] == 0:
        assert "0 iterations" in res.history[-1]["stopped"]
        for a, b in zip(res.model.factors, start.model.factors):
            np.testing.assert_allclose(a.values, b.values, atol=1e-12)
    else:  # the rule found EM helpful here: the history is EM's
        assert res.history[0]["estep_evals"] > 0


def _joint_kl(p, q) -> float:
    """KL(p || q) by enumerating the joint table of two small models (an independent scorer)."""
    lp, lq = p.joint_log_table(), q.joint_log_table()
    lp, lq = lp - np.logaddexp.reduce(lp.ravel()), lq - np.logaddexp.reduce(lq.ravel())
    return float(np.sum(np.exp(lp) * (lp - lq)))


def test_cgm_em_mstep_weight_chosen_from_the_release_for_converged_em():
    from ppgm.learners.cgm import Pilot, noise_aware_l2, release_l2
    from ppgm.learners.em_rules import MSTEP_BOOT, MSTEP_CANDIDATES, MSTEP_MAX_ITER, MSTEP_RTOL
    from ppgm.learners.mle import MarginalOracle
    from ppgm.learners.release_rule import STEP

    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3)], 4, 3, alpha=0.3, seed=3)
    N = 2000.0
    ys = _release(truth, int(N), 6.0, 4)
    res = cgm_em(truth.domain, ys, N=N, l2="release", stop="converged", progress=False)
    ch = res.selection["mstep_l2"]
    assert set(res.selection) == {"l2", "mstep_l2"}
    top = noise_aware_l2(ys, N)
    cands = np.array(ch["candidates"])
    np.testing.assert_allclose(cands, top / STEP ** np.arange(cands.size))  # half-decades down from the noise-aware weight
    best = int(np.argmin(ch["mean_scores"]))
    assert ch["value"] == cands[best] and ch["decided"]
    # the path stops one weight past the lowest best one, and never before MSTEP_CANDIDATES weights
    assert cands.size == max(MSTEP_CANDIDATES, best + 2)
    assert "converged" in res.history[-1]["stopped"] and len(res.history) < MSTEP_MAX_ITER
    # the same scores from the public API: each simulated release's EM path of weights, run by cgm_em itself
    # from the previous weight's end point, scored by enumerating the joint tables
    oracle = MarginalOracle(truth.domain, [m.variables for m in ys])
    pilot = Pilot.of(truth.domain, ys, N, oracle=oracle)
    start_l2 = release_l2(truth.domain, ys, N, seed=0, pilot=pilot).value
    rng = np.random.default_rng(0)
    ref = []
    for sim in [simulated_release(pilot.model, ys, N, rng, pilot.calibration) for _ in range(MSTEP_BOOT)]:
        model, row = pilot.refit(sim, start_l2, None), []
        for w in cands:
            model = cgm_em(truth.domain, sim, N=N, l2=float(w), stop="converged", init=model, max_iter=MSTEP_MAX_ITER,
                           rtol=MSTEP_RTOL, progress=False).model
            row.append(_joint_kl(pilot.model, model))
        ref.append(row)
    np.testing.assert_allclose(ch["mean_scores"], np.mean(ref, axis=0), rtol=1e-5)
    # and the final fit is converged EM at that weight from the naive start
    start = naive_mle(truth.domain, ys, N=N, l2=res.selection["l2"]["value"], tol=1e-4)
    final = cgm_em(truth.domain, ys, N=N, l2=ch["value"], stop="converged", init=start.model, max_iter=MSTEP_MAX_ITER,
                   rtol=MSTEP_RTOL, progress=False)
    for a, b in zip(res.model.factors, final.model.factors):
        np.testing.assert_allclose(a.values, b.values, atol=1e-9)


def test_release_chosen_mstep_weight_beats_the_iteration_rule_on_a_sparse_chain():
    # a tuning cell of the regularisation rules (sparse chain, N = 1,000, eps = 1) where EM stopped by the
    # iteration rule is no better than its start and converged EM at a smaller weight is
    truth = pairwise_dirichlet([(i, i + 1) for i in range(9)], 10, 6, alpha=0.1, seed=7)
    rng = np.random.default_rng([0, 1000, 1000])
    from ppgm.privacy.mechanisms import LaplaceMechanism

    ys = LaplaceMechanism(1.0).release(contingency_tables(sample(truth, 1000, seed=rng), truth.domain, truth.scopes), seed=rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = kl_divergence(truth, cgm_em(truth.domain, ys, N=1000, progress=False).model)
        naive = kl_divergence(truth, naive_mle(truth.domain, ys, N=1000).model)
        rule = kl_divergence(truth, cgm_em(truth.domain, ys, N=1000, l2="release", stop="converged", progress=False).model)
    assert rule < 0.95 * min(default, naive)


def _sparse_release_eps01():
    # a tuning cell (sparse chain, N = 10,000, eps = 0.1) where the simulations ask for ever smaller weights
    from ppgm.privacy.mechanisms import LaplaceMechanism

    truth = pairwise_dirichlet([(i, i + 1) for i in range(9)], 10, 6, alpha=0.1, seed=7)
    rng = np.random.default_rng([0, 10_000, 100])
    ys = LaplaceMechanism(0.1).release(contingency_tables(sample(truth, 10_000, seed=rng), truth.domain, truth.scopes), seed=rng)
    return truth, ys


def test_a_path_whose_lowest_weight_keeps_winning_ends_undecided_and_says_so(monkeypatch):
    # without the flatness stop the lattice runs to its end: the lowest weight is returned and flagged
    from ppgm.learners import em_rules
    from ppgm.learners.cgm import noise_aware_l2
    from ppgm.learners.em_rules import MSTEP_CANDIDATES, MSTEP_EXTEND

    truth, ys = _sparse_release_eps01()
    monkeypatch.setattr(em_rules, "MSTEP_FLAT", 0.0)
    with pytest.warns(UndecidedWarning, match="lowest M-step weight"):
        res = cgm_em(truth.domain, ys, N=10_000, l2="release", stop="converged", progress=False)
    ch = res.selection["mstep_l2"]
    assert not ch["decided"] and len(ch["candidates"]) == MSTEP_CANDIDATES + MSTEP_EXTEND
    assert ch["value"] == min(ch["candidates"]) and int(np.argmin(ch["mean_scores"])) == len(ch["candidates"]) - 1
    assert ch["value"] < noise_aware_l2(ys, 10_000) / 100


def test_a_flat_path_is_decided_and_lower_weights_change_little(monkeypatch):
    # the same cell at the default flatness stop: the path ends where its last half-decade gained under
    # MSTEP_FLAT of the score, without a warning; running the lattice four half-decades further (no
    # flatness stop) moves the fit's KL to the truth by under 2%, which is what "flat" promises
    from ppgm.learners import em_rules
    from ppgm.learners.em_rules import MSTEP_FLAT

    truth, ys = _sparse_release_eps01()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndecidedWarning)
        res = cgm_em(truth.domain, ys, N=10_000, l2="release", stop="converged", progress=False)
    ch = res.selection["mstep_l2"]
    s = np.array(ch["mean_scores"])
    assert ch["decided"] and "flat" in ch["reason"] and ch["value"] == min(ch["candidates"])
    gains = (s[:-1] - s[1:]) / s[1:]
    assert gains[-1] < MSTEP_FLAT and (gains[:-1] >= MSTEP_FLAT).all()  # stopped at the first flat half-decade
    monkeypatch.setattr(em_rules, "MSTEP_FLAT", 0.0)
    monkeypatch.setattr(em_rules, "MSTEP_EXTEND", em_rules.MSTEP_EXTEND + 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndecidedWarning)
        longer = cgm_em(truth.domain, ys, N=10_000, l2="release", stop="converged", progress=False)
    assert longer.selection["mstep_l2"]["value"] < ch["value"] / 10
    kl, kl_longer = kl_divergence(truth, res.model), kl_divergence(truth, longer.model)
    assert abs(kl_longer - kl) < 0.02 * kl


def test_accelerated_em_reaches_plain_em_s_fixed_point_in_fewer_iterations():
    truth = third_order_chain(5, 3, seed=2)
    N = 5000.0
    ys = _release(truth, int(N), 10.0, 3)
    kw = dict(N=N, stop="converged", l2=0.1 / N, init_l2="calibrated", max_iter=2000, tol=1e-10, rtol=1e-12, progress=False)
    plain = cgm_em(truth.domain, ys, **kw)
    fast = cgm_em(truth.domain, ys, accelerate=True, **kw)
    assert any(h.get("extrapolated") for h in fast.history) and len(fast.history) < len(plain.history)
    assert "converged" in fast.history[-1]["stopped"] and "converged" in plain.history[-1]["stopped"]
    # the same fixed point, to the precision EM's stopping test settles at: both stop when an iteration no longer
    # raises the objective by rtol, about 1e-6 nats of KL short of EM run on to its fixed point with solved M-steps
    # (both 0.8-1e-6 here, where the Jacobi-preconditioned M-step stopped 3e-6 short)
    fixed = cgm_em(truth.domain, ys, **{**kw, "max_iter": 400, "tol": 1e-300, "rtol": 0.0}, mstep_iter=20)
    for m in (plain, fast):
        assert kl_divergence(fixed.model, m.model) < 2e-6
        for a, b in zip(infer(fixed.model).factor_marginals(), infer(m.model).factor_marginals()):
            np.testing.assert_allclose(a.values, b.values, atol=5e-5)
    with pytest.raises(ValueError, match="accelerate"):
        cgm_em(truth.domain, ys, N=N, accelerate=True, progress=False)


def test_a_release_chosen_mstep_weight_needs_em_run_to_convergence():
    truth = pairwise_dirichlet([(0, 1), (1, 2)], 3, 3, alpha=1.0, seed=1)
    ys = _release(truth, 1000, 5.0, 2)
    with pytest.raises(ValueError, match="l2: .*stop='converged'"):
        cgm_em(truth.domain, ys, N=1000, l2="release", progress=False)
    with pytest.raises(ValueError, match="l2: "):
        cgm_em(truth.domain, ys, N=1000, l2="calibrated", stop="converged", progress=False)


def test_iteration_rule_rejects_a_count_of_simulated_releases_that_is_not_a_whole_positive_number():
    from ppgm.learners.cgm import Pilot
    from ppgm.learners.em_rules import release_iterations
    from ppgm.learners.release_rule import within_one_se

    truth = pairwise_dirichlet([(0, 1), (1, 2)], 3, 3, alpha=1.0, seed=2)
    ys = _release(truth, 2000, 10.0, 1)
    pilot = Pilot.of(truth.domain, ys, 2000.0)
    for bad, err in ((0, ValueError), (1.5, TypeError), ("2", TypeError)):
        with pytest.raises(err, match="n_boot"):
            release_iterations(ys, 2000.0, None, pilot, 1e-3, 5, 1e-6, 1e-4, n_boot=bad)
    # one simulated release has no standard error: the one-standard-error rule then keeps the minimum, quietly
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "degrees of freedom <= 0" would be a RuntimeWarning
        assert within_one_se(np.array([[0.3, 0.1, 0.2]]), 1) is None
    assert within_one_se(np.array([[0.11, 0.1], [0.09, 0.1]]), 1) == 0
