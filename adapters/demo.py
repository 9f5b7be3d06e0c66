"""``ppgm demo``: the main job, one short end-to-end pass of every capability, printed as a report.

Each capability adds one step: a function taking a ``numpy.random.Generator`` and returning the
lines of its section. Steps use only public API, in pgmpy's idiom.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable

import numpy as np
from ppgm.core.progress import progress_bar


def _bars(plt, name: str, values: dict, colors: list, xlabel: str, log: bool = False) -> dict:
    """One horizontal bar per method: the demo's comparison figures."""
    fig, ax = plt.subplots(figsize=(6, 2.5))
    ax.barh(list(values), list(values.values()), color=colors)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    return {name: fig}


def _inference_step(rng: np.random.Generator) -> list[str]:
    from pgmpy.inference import BeliefPropagation, VariableElimination

    from . import LogBeliefPropagation, dirichlet_chain_network

    mn = dirichlet_chain_network(10, 10, seed=rng)
    pairs = [(f"X{i}", f"X{j}") for i in range(10) for j in range(i + 1, min(i + 4, 10))]
    t0 = time.perf_counter()
    ours = LogBeliefPropagation(mn)
    q_ours = [ours.query(list(p)).values for p in pairs]
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ve = VariableElimination(mn)
    q_ve = []
    for p in pairs:
        f = ve.query(list(p), show_progress=False)
        f.normalize()
        q_ve.append(f.values)
    t_ve = time.perf_counter() - t0
    bp = BeliefPropagation(mn)
    bp.calibrate()
    q_bp = []
    for p in pairs:
        f = bp.query(list(p), show_progress=False)
        f.normalize()
        q_bp.append(f.values)
    err_ours = max(np.abs(a - b).max() for a, b in zip(q_ours, q_ve))
    err_bp = max(np.abs(a - b).max() for a, b in zip(q_bp, q_ve))
    errors = {"ppgm LogBeliefPropagation": err_ours, "pgmpy BeliefPropagation": err_bp}

    def plot(plt):
        return _bars(plt, "inference_error", {k: max(e, 1e-17) for k, e in errors.items()}, ["tab:blue", "tab:red"],
                     "max |edge marginal error| vs VariableElimination", log=True)

    return [
        "model: third-order chain, 10 variables x 10 states, Dirichlet(1) edge tables (pgmpy DiscreteMarkovNetwork)",
        f"{len(pairs)} edge marginals: LogBeliefPropagation {t_ours * 1e3:.0f} ms, pgmpy VariableElimination {t_ve * 1e3:.0f} ms",
        f"max |error| vs VariableElimination: ppgm {err_ours:.1e}, pgmpy BeliefPropagation {err_bp:.1e}"
        + ("  <- pgmpy's BP stops early on small potentials" if err_bp > 1e-6 else ""),
        f"log Z = {ours.log_partition_function():.4f}",
    ], plot


def _sampling_step(rng: np.random.Generator) -> list[str]:
    from pgmpy.models import DiscreteBayesianNetwork
    from pgmpy.parameter_estimator import DiscreteBayesianEstimator

    from . import kl_divergence, load_bif_example, sample, total_variation

    alarm = load_bif_example("alarm")
    n = 20_000
    t0 = time.perf_counter()
    df = sample(alarm, n, seed=rng)
    t_sample = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = DiscreteBayesianNetwork(alarm.edges())
        fitted.add_nodes_from(alarm.nodes())
        state_names = {v: list(alarm.get_cpds(v).state_names[v]) for v in alarm.nodes()}
        fitted.fit(df, estimator=DiscreteBayesianEstimator(state_names=state_names, equivalent_sample_size=1))
    t0 = time.perf_counter()
    kl = kl_divergence(alarm, fitted)
    t_kl = time.perf_counter() - t0
    tv = total_variation(alarm, fitted, n_samples=50_000, seed=rng)
    return [
        f"ALARM (37 nodes, pgmpy's bundled BIF): {n:,} records sampled in {t_sample * 1e3:.0f} ms",
        f"BDeu fit on those records: KL(true || fit) = {kl:.4f} nats (exact, {t_kl * 1e3:.0f} ms), "
        f"TV ~ {tv:.3f} (sampling estimate, 50k draws each side)",
    ]


def _loopy_step(rng: np.random.Generator) -> list[str]:
    from ppgm import infer
    from ppgm.models.random_models import grid

    small = grid(8, 8, coupling=0.5, seed=rng)
    exact, loopy = infer(small), infer(small, method="loopy")
    err = max(np.abs(exact.marginal([v]).values - loopy.marginal([v]).values).max() for v in small.domain.variables)
    big = grid(20, 20, coupling=0.5, seed=rng)
    t0 = time.perf_counter()
    res = infer(big, method="auto", max_cells=100_000)
    t = time.perf_counter() - t0
    return [
        f"8 x 8 binary grid: loopy BP node marginals within {err:.1e} of exact, log Z {loopy.log_z:.3f} (Bethe) vs {exact.log_z:.3f}",
        f"20 x 20 binary grid with a 100k-cell budget: {res.note.split(':')[0]}, {res.loopy.iterations} iterations, "
        f"{t * 1e3:.0f} ms, Bethe log Z {res.log_z:.2f}",
    ]


def _robust_step(rng: np.random.Generator, n: int = 100_000) -> list[str]:
    from pgmpy.models import DiscreteBayesianNetwork
    from pgmpy.parameter_estimator import DiscreteMLE

    from . import RobustFilter, load_bif_example, sample, total_variation

    alarm = load_bif_example("alarm")
    eps = 0.2
    df = sample(alarm, n, seed=rng)
    n_bad = int(eps * n)
    bad = rng.choice(n, n_bad, replace=False)
    # the adversary's rows: every variable in its first state
    first = {v: alarm.get_cpds(v).state_names[v][0] for v in alarm.nodes()}
    for v, s in first.items():
        df.loc[bad, v] = s
    clean = np.setdiff1d(np.arange(n), bad)
    states = {v: list(alarm.get_cpds(v).state_names[v]) for v in alarm.nodes()}

    def fit(rows, estimator):
        bn = DiscreteBayesianNetwork(alarm.edges())
        bn.add_nodes_from(alarm.nodes())
        t0 = time.perf_counter()
        bn.fit(df.iloc[rows] if rows is not None else df, estimator=estimator)
        return bn, time.perf_counter() - t0

    est = RobustFilter(epsilon=eps, seed=0, progress=False, state_names=states)
    robust, t_f = fit(None, est)
    mle, t_m = fit(None, DiscreteMLE(state_names=states))
    gold, _ = fit(clean, DiscreteMLE(state_names=states))
    tv = {k: total_variation(alarm, m, n_samples=50_000, seed=rng) for k, m in
          (("MLE", mle), ("RobustFilter", robust), ("clean MLE", gold))}
    caught = float(np.mean(~est.inlier_mask_[bad]))

    def plot(plt):
        return _bars(plt, "robust_filter_tv", tv, ["tab:red", "tab:blue", "gray"],
                     f"estimated TV to ALARM ({eps:.0%} of rows corrupted)")

    return [
        f"ALARM, {n:,} records of which {eps:.0%} replaced by an adversary; bn.fit(df, estimator=RobustFilter(epsilon={eps}))",
        f"estimated TV to ALARM: MLE {tv['MLE']:.3f}, RobustFilter {tv['RobustFilter']:.3f}, MLE on the clean rows {tv['clean MLE']:.3f}",
        f"corrupted rows removed: {caught:.1%}; fit time {t_f:.1f} s (pgmpy's DiscreteMLE: {t_m:.1f} s)",
    ], plot


def _private_step(rng: np.random.Generator) -> list[str]:
    from . import CGMEstimator, LaplaceMechanism, NaiveMLEEstimator, PrivacyAccountant, dirichlet_chain_network, kl_divergence, release_tables, sample

    mn = dirichlet_chain_network(8, 6, seed=rng)
    n, eps = 20_000, 0.2
    df = sample(mn, n, seed=rng)
    acc = PrivacyAccountant(epsilon=1.0)
    release = release_tables(df, mn, LaplaceMechanism(eps), accountant=acc)  # private: no seed
    t0 = time.perf_counter()
    naive = NaiveMLEEstimator(mn).estimate(release, l2="paper")
    t_naive = time.perf_counter() - t0
    calibrated = NaiveMLEEstimator(mn).estimate(release, l2="calibrated")
    t0 = time.perf_counter()
    est = CGMEstimator(mn)
    cgm = est.estimate(release, progress=False)
    t_cgm = time.perf_counter() - t0
    b = next(iter(release)).scale
    kls = {"naive MLE": kl_divergence(mn, naive), "naive, calibrated L2": kl_divergence(mn, calibrated),
           "CGM-EM": kl_divergence(mn, cgm)}

    def plot(plt):
        return _bars(plt, "private_tables_kl", kls, ["tab:red", "tab:orange", "tab:blue"],
                     f"KL(true || learned), Laplace noise at epsilon = {eps}")

    return [
        f"third-order chain, 8 variables x 6 states; {n:,} records -> {len(release)} edge tables released with "
        f"discrete Laplace noise at epsilon = {eps} (b = {b:.0f} per cell, sampled exactly by OpenDP; private: "
        f"{release.private}; budget left {acc.remaining:g} of 1)",
        f"KL(true || learned): naive MLE {kls['naive MLE']:.3f} ({t_naive:.1f} s; the paper's 1/N), "
        f"with the noise-calibrated L2 {kls['naive, calibrated L2']:.3f}, "
        f"CGM-EM {kls['CGM-EM']:.3f} ({t_cgm:.1f} s, {len(est.history_)} EM iterations chosen from the release, from the naive fit at the release-chosen L2)",
    ], plot


def _synthesis_step(rng: np.random.Generator) -> list[str]:
    from itertools import combinations

    from ppgm import contingency_tables, infer

    from . import declared_states, encode, load_bif_example, markov_from_pgmpy, mst_release, sample

    bn = load_bif_example("child")
    n, rho = 20_000, 0.1
    df = sample(bn, n, seed=rng)
    states = {v: s for v, s in declared_states(bn).items() if v in df.columns}
    t0 = time.perf_counter()
    rel = mst_release(df, states, rho=rho, progress=False, fit_seed=rng)  # private: no seed
    t = time.perf_counter() - t0
    model = markov_from_pgmpy(rel.model)
    marg = infer(model)
    pairs = list(combinations(df.columns, 2))
    counts = contingency_tables(encode(df, model.domain), model.domain, pairs)
    tvs = [0.5 * np.abs(marg.marginal(c).transpose(c).values - t.transpose(c).values / n).sum() for c, t in zip(pairs, counts)]
    true_edges = {frozenset(e) for e in bn.edges()}
    hits = sum(frozenset(s.clique) in true_edges for s in rel.selected)
    report = rel.report(delta=1e-9)
    return [
        f"CHILD, {n:,} records over 20 columns: all one-way tables, {len(rel.selected)} pairs chosen by report-noisy-max "
        f"({hits} of them edges of the true network), those pairs measured; rho = {report['rho']:g} in all "
        f"(epsilon {report['epsilon']:.2f} at delta 1e-9; private: {rel.private})",
        f"CGM-EM fit and {len(rel.synthetic):,} synthetic records in {t:.1f} s; mean TV over all {len(tvs)} 2-way marginals "
        f"{np.mean(tvs):.4f}",
    ]


def _mer_step(rng: np.random.Generator) -> list[str]:
    import pandas as pd

    from ppgm.mer.program import precision_recall
    from ppgm.models.random_models import gaussian_cycle, overlapping_sample_sets

    from . import mer

    J, edges = gaussian_cycle(16, seed=rng)
    sets = overlapping_sample_sets(np.linalg.inv(J), seed=rng)
    frames = [pd.DataFrame(rows, columns=[f"x{i}" for i in ix]) for ix, rows in sets]
    truth = [(f"x{i}", f"x{j}") for i, j in edges]
    t0 = time.perf_counter()
    fit = mer(frames, kind="gaussian")
    t_fit = time.perf_counter() - t0
    pr, rc = precision_recall(fit.edges(), truth)
    n_constraint = sum(1 for c in fit.constraints if c["kind"] == "edge")

    def plot(plt):
        import networkx as nx

        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        true_set = {frozenset(e) for e in truth}
        pos = nx.circular_layout(sorted(fit.graph.nodes, key=lambda v: int(v[1:])))
        colors = ["black" if frozenset(e) in true_set else "tab:red" for e in fit.graph.edges]
        nx.draw_networkx(fit.graph, pos, ax=ax, node_size=250, font_size=7, edge_color=colors, width=2)
        ax.set_title(f"MER graph at {fit.gamma / fit.s_tilde:.0f} s~ (true edges black)")
        ax.axis("off")
        return {"mer_graph": fig}

    return [
        f"16-node Gaussian cycle seen through {len(frames)} overlapping sample sets "
        f"({sum(len(f) for f in frames):,} rows, {n_constraint} pairs observed together, inconsistent on overlaps)",
        f"INI: s~ = {fit.s_tilde:.4f}; MER at {fit.notes[0]}: entropy {fit.entropy:.2f} nats, "
        f"{len(fit.active)} active constraints",
        f"graph: {fit.graph.number_of_edges()} edges, precision {pr:.2f}, recall {rc:.2f} against the true cycle "
        f"({fit.solver} {fit.status}, {t_fit:.1f} s for pooling, INI and MER)",
    ], plot


def _maxent_step(rng: np.random.Generator, n_chains: int = 5000, max_iter: int = 200) -> list[str]:
    from ppgm import nllh

    from . import MaxEntClassifier, aggregate, load_adult

    train, test = load_adult()
    t0 = time.perf_counter()
    agg = aggregate(train, label="income")
    t_agg = time.perf_counter() - t0
    clf = MaxEntClassifier(n_chains=n_chains, max_iter=max_iter, seed=int(rng.integers(1 << 31)), progress=False)
    t0 = time.perf_counter()
    clf.fit(agg, eval_set=test, eval_every=10)
    t_fit = time.perf_counter() - t0
    nb = MaxEntClassifier(n_chains=1000, max_iter=5, progress=False).fit(aggregate(train, label="income", pairs="none"))
    lines = [
        f"Adult census: {len(train):,} rows -> {len(agg)} tables of counts and label sums ({t_agg:.1f} s); the rows are not used again",
        f"test NLLH: MaxEnt from aggregates {clf.score(test):.4f} ({t_fit:.0f} s, {clf.n_chains:,} chains x {clf.max_iter} steps), "
        f"Naive Bayes {nb.score(test):.4f}",
    ]
    try:
        from sklearn.linear_model import LogisticRegression

        from ppgm.adapters.aggregated import quadratic_one_hot

        cards = agg.domain.cards
        Xtr = quadratic_one_hot(np.maximum(agg.encode(train), 0), cards)
        Xte = quadratic_one_hot(np.maximum(agg.encode(test), 0), cards)
        t0 = time.perf_counter()
        lr = LogisticRegression(C=1 / 32, max_iter=200).fit(Xtr, agg.labels(train))
        lines.append(
            f"skyline: logistic of the same quadratic shape on the raw rows {nllh(agg.labels(test), lr.predict_proba(Xte)[:, 1]):.4f} "
            f"({time.perf_counter() - t0:.1f} s, scikit-learn, L2 = 16)"
        )
    except ImportError:  # scikit-learn comes with pgmpy; without it, no skyline
        lines.append("skyline skipped: scikit-learn is not installed")

    def plot(plt):
        steps, curve = zip(*clf.history_["nllh"])
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot(steps, curve)
        ax.set_xlabel("PCD step")
        ax.set_ylabel("test NLLH")
        ax.set_title("MaxEnt from Adult's aggregates")
        fig.tight_layout()
        return {"maxent_training_curve": fig}

    return lines, plot


def _missing_step(rng: np.random.Generator) -> list[str]:
    from pgmpy.models import DiscreteBayesianNetwork
    from pgmpy.parameter_estimator import DiscreteBayesianEstimator

    from . import MissingValuesEM, kl_divergence, load_bif_example, sample

    alarm = load_bif_example("alarm")
    n, rate = 5_000, 0.1
    df = sample(alarm, n, seed=rng)
    for c in df.columns:  # 10% of every column missing completely at random
        df.loc[rng.random(n) < rate, c] = None
    states = {v: list(alarm.get_cpds(v).state_names[v]) for v in alarm.nodes()}
    complete = df.dropna()
    cc = DiscreteBayesianNetwork(alarm.edges())
    cc.fit(complete, estimator=DiscreteBayesianEstimator(prior_type="dirichlet", pseudo_counts=1, state_names=states))
    em = DiscreteBayesianNetwork(alarm.edges())
    est = MissingValuesEM(progress=False, state_names=states)
    t0 = time.perf_counter()
    em.fit(df, estimator=est)
    t_em = time.perf_counter() - t0
    kl_cc, kl_em = kl_divergence(alarm, cc), kl_divergence(alarm, em)

    def plot(plt):
        return _bars(plt, "missing_values_kl", {"complete-case": kl_cc, "ppgm EM": kl_em}, ["tab:red", "tab:blue"],
                     "KL(true || learned), ALARM, 10% of cells missing", log=True)

    return [
        f"ALARM, {n:,} records with {rate:.0%} of cells missing at random: {len(complete):,} complete rows "
        "(pgmpy's DiscreteEM would keep only these)",
        f"KL(true || CPTs): complete-case {kl_cc:.3f}, MissingValuesEM {kl_em:.4f} "
        f"({len(est.history_)} EM iterations, converged {est.converged_}, {t_em:.1f} s)",
    ], plot


STEPS: list[tuple[str, Callable[..., list[str]]]] = [
    ("Exact inference on pgmpy models (LogBeliefPropagation)", _inference_step),
    ("Sampling, KL and total variation (ALARM)", _sampling_step),
    ("Loopy belief propagation with automatic fallback", _loopy_step),
    ("Robust CPTs from adversarially corrupted records (eigenvector filter)", _robust_step),
    ("Markov networks from differentially private tables (naive MLE vs CGM-EM)", _private_step),
    ("Private synthetic records with privately chosen cliques (MST-style)", _synthesis_step),
    ("A sparse consistent model from inconsistent sample sets (INI + MER, cvxpy)", _mer_step),
    ("A classifier from aggregated tables only (MaxEnt by PCD)", _maxent_step),
    ("CPTs from records with missing cells (EM)", _missing_step),
]


#: The steps' sizes: ``"full"`` is the demo; ``"test"`` is what the test suite runs, the same steps
#: on fewer records and a smaller MaxEnt budget (on Adult, 2,000 chains x 60 steps reach the same
#: test NLLH as 5,000 x 200 to 3 decimals: 0.4217 against 0.4215).
SIZES = {"full": {}, "test": {"_robust_step": dict(n=40_000), "_maxent_step": dict(n_chains=2000, max_iter=60)}}


def run_demo(seed: int = 0, progress: bool = True, out=print, plots=None, size: str = "full") -> None:
    """Run every step and print the report; with ``plots`` (a folder), also write each step's figures
    there as PNG files (needs matplotlib). ``size="test"`` runs the steps on fewer records and a
    smaller MaxEnt budget (:data:`SIZES`)."""
    from ppgm.core import checks

    sizes = SIZES[checks.choice(size, "size", tuple(SIZES))]
    plt = None
    if plots is not None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise RuntimeError("--plots needs matplotlib: pip install 'ppgm[tutorials]' or pip install matplotlib") from exc
        from pathlib import Path

        plots = Path(plots)
        plots.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    out(f"ppgm demo (seed {seed})")
    total = time.perf_counter()
    for title, step in progress_bar(STEPS, desc="demo", enabled=progress):
        t0 = time.perf_counter()
        lines = step(rng, **sizes.get(step.__name__, {}))
        lines, plot = lines if isinstance(lines, tuple) else (lines, None)
        out("")
        out(f"== {title}  [{time.perf_counter() - t0:.1f} s]")
        for line in lines:
            out(f"   {line}")
        if plt is not None and plot is not None:
            for name, fig in plot(plt).items():
                fig.savefig(plots / f"{name}.png", dpi=110)
                plt.close(fig)
                out(f"   figure: {plots / f'{name}.png'}")
    out("")
    out(f"done in {time.perf_counter() - total:.1f} s")
