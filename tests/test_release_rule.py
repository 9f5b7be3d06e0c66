"""The regularisation chosen from the release (ppgm.learners.release_rule, ppgm.learners.cgm.release_l2); EM's rules are in test_em_rules."""


import numpy as np
import pytest

from ppgm import contingency_tables, infer, kl_divergence, sample
from ppgm import Factor, MarkovNetwork
from ppgm.learners.cgm import naive_mle, naive_refit, noise_calibrated_l2
from ppgm.models.measurement import Measurement
from ppgm.models.random_models import pairwise_dirichlet, third_order_chain
from ppgm.learners.release_rule import UndecidedWarning, choose_l2, simulated_release

from conftest import laplace_release as _release


def test_simulated_release_has_the_pilots_means_and_the_noise_law():
    truth = third_order_chain(4, 3, seed=0)
    ms = [Measurement(f.variables, np.zeros(f.values.shape), "laplace", 5.0) for f in truth.factors]
    marg = infer(truth).factor_marginals()
    rng = np.random.default_rng(0)
    draws = [simulated_release(truth, ms, 4000, rng) for _ in range(600)]  # a sample variance's sd: about 0.09 of it here
    for i, (m, mu) in enumerate(zip(ms, marg)):
        vals = np.array([d[i].values for d in draws])
        assert draws[0][i].noise == "laplace" and draws[0][i].scale == 5.0
        # mean: N mu (closed form); variance: multinomial N mu (1 - mu) plus the Laplace 2 b^2
        np.testing.assert_allclose(vals.mean(axis=0), 4000 * mu.values, atol=5 * np.sqrt(4000 * 0.25 + 50) / np.sqrt(len(draws)))
        var = 4000 * mu.values * (1 - mu.values) + 2 * 25.0
        np.testing.assert_allclose(vals.var(axis=0), var, rtol=0.35)


def test_pooled_tables_are_simulated_as_the_sum_of_their_members():
    truth = pairwise_dirichlet([(0, 1), (1, 2)], 3, 2, seed=1)
    pooled = Measurement(("X0", "X1"), np.zeros((2, 2)), "gaussian", 1e-9, members=(("X0", "X1"), ("X1", "X2")))
    (y,) = simulated_release(truth, [pooled], 1000, np.random.default_rng(2))
    assert abs(y.values.sum() - 2000) < 1e-3 and y.members == pooled.members


def test_release_weight_beats_or_matches_the_constants_it_replaces():
    # heavy noise on a small table set: 1/N overfits, the calibrated weight over-smooths
    truth = pairwise_dirichlet([(0, 1), (1, 2), (2, 3), (3, 4)], 5, 4, alpha=0.5, seed=3)
    N = 3000
    ys = _release(truth, N, 8.0, 4)
    kl = {w: kl_divergence(truth, naive_mle(truth.domain, ys, N=N, l2=w).model) for w in ("paper", "calibrated")}
    fit = naive_mle(truth.domain, ys, N=N)
    assert kl_divergence(truth, fit.model) <= 1.05 * min(kl.values())
    assert 1 / N <= fit.l2 <= 10 ** 1.5 * noise_calibrated_l2(ys, N) * 1.0001  # floor 1/N, range of the rule
    sel = fit.selection
    assert sel["decided"] and len(sel["candidates"]) == len(sel["mean_scores"]) >= 3
    assert min(sel["candidates"]) >= 1 / N * (1 - 1e-9)


def test_same_seed_same_weight_and_an_explicit_weight_is_used_as_given():
    truth = third_order_chain(4, 3, seed=5)
    ys = _release(truth, 2000, 3.0, 6)
    a, b = naive_mle(truth.domain, ys, seed=1), naive_mle(truth.domain, ys, seed=1)
    assert a.l2 == b.l2 and a.selection == b.selection
    given = naive_mle(truth.domain, ys, l2=0.0123)
    assert given.l2 == 0.0123 and given.selection is None
    assert naive_mle(truth.domain, ys, l2="paper").l2 == pytest.approx(1 / ys[0].values.sum(), rel=0.05)
    with pytest.raises(ValueError, match="l2"):
        naive_mle(truth.domain, ys, l2="auto")


def test_a_uniform_pilot_leaves_the_rule_undecided_and_it_says_so():
    # simulated releases of a uniform network: every extra unit of regularisation helps, so the largest
    # weight tried stays best however far the range grows
    truth = pairwise_dirichlet([(0, 1), (1, 2)], 3, 3, seed=7)
    uniform = MarkovNetwork(truth.domain, [Factor(f.variables, np.zeros(f.values.shape)) for f in truth.factors])
    ys = _release(truth, 500, 20.0, 8)
    with pytest.warns(UndecidedWarning, match="largest candidate"):
        ch = choose_l2(ys, 500, naive_refit(truth.domain, ys, 500), uniform, upper=0.01)
    assert not ch.decided and ch.value == max(ch.candidates) == pytest.approx(0.01 * 10 ** 1.5)
    assert ch.scores.shape == (3, len(ch.candidates))


def test_the_choice_is_the_parabolas_minimum_and_one_se_jumps_to_more_regularisation():
    # a score exactly quadratic in log weight (minimum at 3e-3), plus a per-release offset and a small
    # per-release tilt: the parabola through the best three candidates recovers the minimum in closed
    # form; the one-standard-error rule instead takes the next larger candidate, whose paired excess
    # (0.26 nats) is within the tilt's standard error
    centre = np.log(3e-3)
    tilt = np.array([-1.0, 0.0, 1.0])

    def quadratic(b, l2):
        return 1.0 + b + 0.1 * (np.log(l2) - centre) ** 2 + 0.5 * tilt[b] * (np.log(l2) - centre)

    calls = iter(range(10**6))
    sim = lambda rng: next(calls) % 3  # noqa: E731  (the "release" is its index)
    refit = lambda b, l2, init: (b, l2)  # noqa: E731  (the "fit" remembers its release and weight)
    score = lambda fit: quadratic(*fit)  # noqa: E731
    plain = choose_l2([], 1000.0, refit, None, upper=0.1, simulate=sim, score=score)
    assert plain.decided and plain.reason.startswith("parabola")
    assert plain.value == pytest.approx(3e-3, rel=1e-9)  # the tilts cancel in the mean: exact
    calls = iter(range(10**6))
    jumped = choose_l2([], 1000.0, refit, None, upper=0.1, simulate=sim, score=score, one_se=True)
    assert jumped.value > plain.value * 2 and jumped.value in jumped.candidates
    with pytest.raises(TypeError, match="one_se"):
        choose_l2([], 1000.0, refit, None, upper=0.1, simulate=sim, score=score, one_se="no")


def test_the_descent_stops_at_the_first_candidate_past_the_minimum():
    # one simulated release, a score that falls to a minimum at 1e-3, rises, then falls to a deeper one at 1e-5:
    # patience counts the candidates tried past the current minimum, so one stops on the first rise (candidates
    # 0.1 .. 3.2e-4) and two walks past it into the deeper valley; on a curve with one minimum both choose alike
    def bumpy(l2):
        x = np.log10(l2)
        return (x + 3) ** 2 if x > -3.75 else 0.1 * (x + 5) ** 2 - 1.0

    sim = lambda rng: 0  # noqa: E731
    refit = lambda ys, l2, init: l2  # noqa: E731  (the "fit" is its weight)
    one = choose_l2([], 1e6, refit, None, upper=0.1, n_boot=2, simulate=sim, score=bumpy, patience=1)
    two = choose_l2([], 1e6, refit, None, upper=0.1, n_boot=2, simulate=sim, score=bumpy, patience=2)
    assert len(one.candidates) == 6 and one.candidates[-1] == pytest.approx(10**-3.5)
    assert one.value == pytest.approx(1e-3, rel=1e-9)  # the parabola through three points of a quadratic in log weight
    assert two.value == pytest.approx(1e-5, rel=1e-9) and len(two.candidates) == 11
    default = choose_l2([], 1e6, refit, None, upper=0.1, n_boot=2, simulate=sim, score=bumpy)
    assert len(default.candidates) == 6  # the default stops at the first rise
    single = lambda l2: (np.log10(l2) + 3) ** 2  # noqa: E731
    a, b = (choose_l2([], 1e6, refit, None, upper=0.1, n_boot=2, simulate=sim, score=single, patience=p) for p in (1, 2))
    assert a.value == b.value == pytest.approx(1e-3, rel=1e-9) and len(b.candidates) == len(a.candidates) + 1
    for bad in (0, 1.5, "1"):
        with pytest.raises((TypeError, ValueError), match="patience"):
            choose_l2([], 1e6, refit, None, upper=0.1, n_boot=2, simulate=sim, score=single, patience=bad)


def test_exact_tables_are_not_over_regularised():
    # the case that would break the promise on clean data: exact counts (no noise) must come out as the
    # paper's lightly regularised fit, not a smoothed one
    truth = third_order_chain(5, 3, seed=9)
    N = 20_000
    tabs = contingency_tables(sample(truth, N, seed=10), truth.domain, truth.scopes)
    exact = [Measurement(t.variables, t.values.astype(float), "none", 0.0) for t in tabs]
    fit = naive_mle(truth.domain, exact, N=N)
    paper = naive_mle(truth.domain, exact, N=N, l2="paper")
    assert fit.l2 <= 10 ** 0.5 / N * 1.0001
    assert kl_divergence(truth, fit.model) <= 1.05 * kl_divergence(truth, paper.model)


def test_second_level_extrapolation_removes_the_pilots_noise_in_a_gaussian_sequence_model():
    # y = theta + z, theta ~ N(0, 1), z ~ N(0, 1), ridge fit y / (1 + w): the best weight is noise
    # variance / signal energy = 1 (closed form). The bootstrap from the pilot y (energy 2) aims at 1/2,
    # pilots of simulated releases (energy 3) at 1/3, and the extrapolation 1 / w = 2 / (1/2) - 3 = 1 at
    # the best weight. Over five data sets the corrected choice's median log-error is at most half the
    # first level's (which misses by a factor of about 2; the half-decade grid and its parabola add
    # their own error, which the correction carries)
    from ppgm.learners.release_rule import Choice, extrapolate

    n, errors = 20_000, []
    refit = lambda ys, w, init: ys / (1 + w)  # noqa: E731
    for seed in range(5):
        rng = np.random.default_rng(seed)
        y = rng.normal(size=n) + rng.normal(size=n)
        first = choose_l2([], 1.0, refit, y, upper=100.0, lower=1e-4, seed=rng,
                          simulate=lambda r: y + r.normal(size=n), score=lambda fit: float(np.mean((fit - y) ** 2)))
        pilots = [y + rng.normal(size=n) for _ in range(3)]
        draws = iter(pilots)
        second = choose_l2([], 1.0, refit, None, upper=100.0, lower=1e-4, seed=rng,
                           simulate=lambda r: next(draws) + r.normal(size=n),
                           score=[(lambda fit, p=p: float(np.mean((fit - p) ** 2))) for p in pilots])
        corrected = extrapolate(first, second, lower=1e-4)
        assert 0.3 < first.value < 0.65 and 0.2 < second.value < 0.5  # the levels' targets: 1/2 and 1/3
        assert corrected.extrapolation == {"first": first.value, "second": second.value, "raw": pytest.approx(corrected.value)}
        errors.append((abs(np.log(first.value)), abs(np.log(corrected.value))))
    one, two = np.median(errors, axis=0)
    assert one > 0.5 and two < one / 2
    assert "extrapolation" in corrected.as_record()
    # the correction moves at most a half-decade, and never below the floor
    c = lambda v: Choice(v, first.candidates, first.scores)  # noqa: E731
    assert extrapolate(c(0.5), c(0.2), lower=1e-4).value == pytest.approx(0.5 * np.sqrt(10))  # 1 / w = 4 - 5 < 0
    assert extrapolate(c(2e-4), c(1e-3), lower=1.5e-4).value == 1.5e-4
    with pytest.raises(ValueError, match="score"):
        choose_l2([], 1.0, refit, y, upper=1.0, simulate=lambda r: y, score=[lambda f: 0.0])


def test_the_second_level_is_an_opt_in_correction_of_the_naive_rule():
    # a dense third-order chain, where the 1 / N pilot is much rougher than the truth
    truth = third_order_chain(6, 4, seed=11)
    N = 5000
    ys = _release(truth, N, 20.0, 12)
    from ppgm.learners.cgm import release_l2

    one = release_l2(truth.domain, ys, float(N), seed=3, correct=False)
    two = release_l2(truth.domain, ys, float(N), seed=3, correct=True)
    assert one.extrapolation is None and two.value != one.value
    ext = two.extrapolation
    raw = 1 / (2 / ext["first"] - 1 / ext["second"]) if 2 / ext["first"] > 1 / ext["second"] else np.inf
    assert ext["first"] == one.value and two.value == pytest.approx(min(max(raw, one.value / np.sqrt(10)), one.value * np.sqrt(10)))
    fit = naive_mle(truth.domain, ys, N=N, seed=3)  # the default is the first level
    assert fit.l2 == one.value and "extrapolation" not in fit.selection
    with pytest.raises(TypeError, match="correct"):
        release_l2(truth.domain, ys, float(N), correct="yes")


def _tv_by_enumeration(p, q, scopes):
    """Mean total variation of the scopes' marginals, from the two joint tables (brute force)."""
    def joint(m):
        t = np.zeros(m.domain.shape(m.domain.variables))
        for f in m.factors:
            shape = [m.domain.size([v]) if v in f.variables else 1 for v in m.domain.variables]
            order = [f.variables.index(v) for v in m.domain.variables if v in f.variables]
            t = t + np.transpose(f.values, order).reshape(shape)
        t = np.exp(t - t.max())
        return t / t.sum()
    jp, jq = joint(p), joint(q)
    tvs = []
    for s in scopes:
        axes = tuple(i for i, v in enumerate(p.domain.variables) if v not in s)
        tvs.append(0.5 * np.abs(jp.sum(axis=axes) - jq.sum(axis=axes)).sum())
    return float(np.mean(tvs))


def test_tv_criterion_is_the_mean_total_variation_of_the_scopes_marginals():
    from ppgm.learners.mle import MarginalOracle
    from ppgm.learners.release_rule import tv_from

    p, q = third_order_chain(5, 3, seed=0), third_order_chain(5, 3, seed=4)
    tv = tv_from(p, MarginalOracle(p.domain, p.scopes))
    assert tv(p) == 0.0
    assert tv(q) == pytest.approx(_tv_by_enumeration(p, q, p.scopes), rel=1e-10)


def test_naive_mle_with_the_tv_criterion_scores_its_candidates_by_tv():
    from ppgm.learners.cgm import Pilot, release_l2
    from ppgm.learners.mle import MarginalOracle
    from ppgm.learners.release_rule import STEP

    truth = third_order_chain(4, 3, seed=0)
    ms = _release(truth, 3000, 8.0, seed=5)
    N = 3000.0
    fit = naive_mle(truth.domain, ms, N=N, criterion="tv", seed=3)
    assert fit.selection["criterion"] == "tv"
    assert naive_mle(truth.domain, ms, N=N, seed=3).selection["criterion"] == "kl"
    # the same choice with an independent scorer (marginals of the joint table) gives the same scores
    oracle = MarginalOracle(truth.domain, [m.variables for m in ms])
    pilot = Pilot.of(truth.domain, ms, N, oracle=oracle)
    ref = choose_l2(ms, N, pilot.refit, pilot.model, upper=STEP * noise_calibrated_l2(ms, N), n_boot=3, seed=np.random.default_rng(3),
                    score=lambda m: _tv_by_enumeration(pilot.model, m, pilot.model.scopes),
                    simulate=lambda r: simulated_release(pilot.model, ms, N, r, pilot.calibration))
    np.testing.assert_allclose(fit.selection["mean_scores"], ref.scores.mean(axis=0), rtol=1e-6)
    assert fit.l2 == pytest.approx(ref.value)
    assert release_l2(truth.domain, ms, N, seed=3, criterion="tv").value == pytest.approx(fit.l2)


def test_an_unknown_criterion_is_refused_by_name():
    truth = third_order_chain(4, 2, seed=0)
    ms = _release(truth, 1000, 2.0, seed=1)
    with pytest.raises(ValueError, match="criterion"):
        naive_mle(truth.domain, ms, criterion="l1")


def test_refits_on_threads_choose_as_one_after_the_other(monkeypatch):
    """A weight's simulated releases refitted side by side on threads (sharing one oracle, whose last
    calibration is each thread's own) give the same candidates and scores, bit for bit, as in turn; the
    pool is really used (the refits ran on other threads)."""
    import threading

    from ppgm.learners.cgm import Pilot
    from ppgm.learners.mle import MarginalOracle
    import ppgm.inference.junction_tree as jtm
    monkeypatch.setattr(jtm, "SCALED_MIN_CELLS", 1)  # the clique-by-clique product and the scaled schedule
    truth = third_order_chain(5, 3, seed=2)
    N = 3000.0
    ys = _release(truth, int(N), 4.0, 3)
    oracle = MarginalOracle(truth.domain, [tuple(m.variables) for m in ys])
    assert oracle._clique_params is None  # Newton's products read the thread's last calibration
    pilot = Pilot.of(truth.domain, ys, N, oracle=oracle)
    seen, lock, calls = set(), threading.Lock(), []
    calibrate = jtm.JunctionTree.calibrate_flat

    def counted(self, *a, **k):
        with lock:
            calls[-1] += 1
        return calibrate(self, *a, **k)
    monkeypatch.setattr(jtm.JunctionTree, "calibrate_flat", counted)

    def refit(rs, l2, init):
        seen.add(threading.get_ident())
        return pilot.refit(rs, l2, init)

    runs = []
    for t in (False, True):
        calls.append(0)
        runs.append(choose_l2(ys, N, refit, pilot.model, upper=0.05, seed=4, score=pilot.score, threads=t,
                              simulate=lambda r: simulated_release(pilot.model, ys, N, r, pilot.calibration)))
    assert len(seen) > 1
    assert calls[0] == calls[1] > 0  # no thread calibrated again for a product because another's calibration came between
    np.testing.assert_array_equal(runs[0].candidates, runs[1].candidates)
    np.testing.assert_array_equal(runs[0].scores, runs[1].scores)
    assert runs[0].value == runs[1].value
