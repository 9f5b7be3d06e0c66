"""The CGM paper's Figure 1 (Bernstein et al. 2017) on our naive MLE: (a) the error of the learned
marginals against N, with its O(1/N) sampling regime and O(1/N^2) privacy-noise regime; (c) KL
against the L2 weight, learning from true tables and from noisy ones. (Fig. 1b, the effect of the
simplex projection, is a test: tests/test_cgm.py::test_projection_helps_the_naive_mle.)

Model: the paper's third-order chain, T = 10 variables with 10 states, Dirichlet(1) edge tables;
Discrete Laplace release of its 24 edge tables (L1 sensitivity 24), seeded for reproducibility (the
law of a private release, not private itself). Three populations (each with its own
noise draw) per point. Writes benchmarks/img/cgm_fig1.png and the "cgm_fig1" section of RESULTS.md.

    python benchmarks/bench_cgm_figures.py           # about 3 minutes
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _results import machine, write_section  # noqa: E402

warnings.filterwarnings("ignore")

from ppgm import Factor, contingency_tables, infer, kl_divergence, sample  # noqa: E402
from ppgm.learners.cgm import naive_mle, noise_calibrated_l2  # noqa: E402
from ppgm.privacy.mechanisms import LaplaceMechanism  # noqa: E402
from ppgm.learners.mle import fit_marginals  # noqa: E402
from ppgm.models.random_models import third_order_chain  # noqa: E402

SEEDS = (0, 1, 2)
IMG = Path(__file__).with_name("img") / "cgm_fig1.png"


def population(truth, N, eps, seed):
    rng = np.random.default_rng([seed, N, int(round(eps * 1000))])
    tabs = contingency_tables(sample(truth, N, seed=rng), truth.domain, truth.scopes)
    return tabs, LaplaceMechanism(eps).release(tabs, seed=rng)


def marginal_mse(truth_marg, model) -> float:
    got = infer(model).factor_marginals()
    return float(np.mean(np.concatenate([(a.values - b.values).ravel() ** 2 for a, b in zip(truth_marg, got)])))


def figure_a(truth, truth_marg, eps_list, Ns):
    """MSE of the learned edge marginals vs N, with the closed-form expectation of the raw y / N error:
    mean over cells of mu (1 - mu) / N (sampling) + 2 b^2 / N^2 (Laplace noise of scale b)."""
    mu = np.concatenate([f.values.ravel() for f in truth_marg])
    sensitivity = len(truth_marg)  # one count per record in each table: Laplace b = sensitivity / eps
    rows = []
    for eps in eps_list:
        for N in Ns:
            naive, exact = [], []
            for s in SEEDS:
                tabs, ys = population(truth, N, eps, s)
                naive.append(marginal_mse(truth_marg, naive_mle(truth.domain, ys, N=N, l2="paper").model))
                fit = fit_marginals(truth.domain, [Factor(t.variables, t.values / N) for t in tabs], l2=1 / N, tol=1e-7)
                exact.append(marginal_mse(truth_marg, fit.model))
            sampling = float(np.mean(mu * (1 - mu))) / N
            noise = 2 * (sensitivity / eps) ** 2 / N**2
            rows.append(dict(eps=eps, N=N, naive=np.mean(naive), exact=np.mean(exact), sampling=sampling, noise=noise))
            print(rows[-1], flush=True)
    return rows


def figure_c(truth, N, eps, l2s):
    """KL per L2 weight, and the weight ``naive_mle(l2="calibrated")`` picks for the first population."""
    rows = []
    pops = [population(truth, N, eps, s) for s in SEEDS]
    calibrated = noise_calibrated_l2(pops[0][1], N)
    for l2 in l2s:
        kl_noisy, kl_true = [], []
        for tabs, ys in pops:
            kl_noisy.append(kl_divergence(truth, naive_mle(truth.domain, ys, N=N, l2=l2).model))
            fit = fit_marginals(truth.domain, [Factor(t.variables, t.values / N) for t in tabs], l2=l2, tol=1e-7)
            kl_true.append(kl_divergence(truth, fit.model))
        rows.append(dict(l2N=l2 * N, noisy=np.mean(kl_noisy), noisy_sd=np.std(kl_noisy), true=np.mean(kl_true)))
        print(rows[-1], flush=True)
    return rows, calibrated


def plot(rows_a, rows_c, N_c, eps_c):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for eps, color in zip(sorted({r["eps"] for r in rows_a}), ("tab:red", "tab:blue")):
        rs = [r for r in rows_a if r["eps"] == eps]
        Ns = np.array([r["N"] for r in rs])
        ax.loglog(Ns, [r["naive"] for r in rs], "o-", color=color, label=f"naive MLE, eps = {eps}")
        ax.loglog(Ns, [r["sampling"] + r["noise"] for r in rs], ":", color=color, label=f"E|y/N - mu|^2, eps = {eps}")
        ax.loglog(Ns, [r["noise"] for r in rs], "--", color=color, alpha=0.5, lw=1, label="its 1/N^2 noise term")
    rs = [r for r in rows_a if r["eps"] == rows_a[0]["eps"]]
    ax.loglog([r["N"] for r in rs], [r["exact"] for r in rs], "s-", color="k", label="non-private MLE")
    ax.loglog([r["N"] for r in rs], [r["sampling"] for r in rs], "--", color="k", alpha=0.5, lw=1, label="1/N sampling term")
    ax.set(xlabel="N (records)", ylabel="MSE of edge marginals", title="(a) error vs N: 1/N^2 then 1/N")
    ax.legend(fontsize=7)
    l2N = [r["l2N"] for r in rows_c]
    bx.loglog(l2N, [r["noisy"] for r in rows_c], "o-", color="tab:red", label=f"noisy tables (eps = {eps_c})")
    bx.loglog(l2N, [r["true"] for r in rows_c], "s-", color="k", label="true tables")
    bx.set(xlabel="L2 weight x N", ylabel="KL(true || learned), nats", title=f"(c) naive MLE vs regularisation, N = {N_c:,}")
    bx.legend(fontsize=8)
    fig.tight_layout()
    IMG.parent.mkdir(exist_ok=True)
    fig.savefig(IMG, dpi=110)


def main() -> None:
    t0 = time.perf_counter()
    truth = third_order_chain(n_vars=10, k=10, seed=2017)
    truth_marg = infer(truth).factor_marginals()
    Ns = [1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000]
    rows_a = figure_a(truth, truth_marg, [0.1, 1.0], Ns)
    N_c, eps_c = 100_000, 0.1
    rows_c, cal_c = figure_c(truth, N_c, eps_c, [1e-3 / N_c * 10**k for k in range(0, 8)])
    plot(rows_a, rows_c, N_c, eps_c)
    lines = ["## CGM paper, Figure 1 (`benchmarks/bench_cgm_figures.py`)", "",
             f"Machine: {machine()}; {time.perf_counter() - t0:.0f} s. Third-order chain, 10 variables x 10 states, "
             f"discrete Laplace release (seeded) of the 24 edge tables; mean over {len(SEEDS)} populations (each with its own noise draw). "
             "Plot: `benchmarks/img/cgm_fig1.png`.", "",
             "(a) MSE of the learned edge marginals. The expected error of the raw y / N is "
             "mean mu(1 - mu) / N (sampling, slope -1) + 2 b^2 / N^2 (Laplace, b = 24 / eps, slope -2). "
             "The naive MLE's error falls faster than 1/N while the noise dominates (slope about -1.4 at eps = 1 "
             "up to N = 1e5) and follows the 1/N sampling term once it does not; at small N the simplex "
             "projection caps it far below the raw 1/N^2 term. The fits run to their optimum (ppgm's truncated "
             "Newton); L-BFGS capped at 1,000 iterations used to leave the naive MLE above the raw error at eps = "
             "0.1, N >= 3e5 (N = 1e7: 5.05e-8 then, 1.85e-9 now).", "",
             "| eps | N | naive MLE | non-private MLE | 1/N term | 1/N^2 term |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows_a:
        lines.append(f"| {r['eps']} | {r['N']:,} | {r['naive']:.3g} | {r['exact']:.3g} | {r['sampling']:.3g} | {r['noise']:.3g} |")
    lines += ["", f"(c) KL(true || learned) of the L2-regularised MLE, N = {N_c:,}, eps = {eps_c} (noisy: mean and sd over populations). "
              "As in the paper: the true tables tolerate any small weight, the noisy ones overfit unless it is tuned. "
              f"`naive_mle(l2=\"calibrated\")` picks (1 + r)/N = {cal_c * N_c:.0f}/N here (r = 2 b^2 cells / N), "
              "at the bottom of the noisy curve.", "",
              "| L2 weight x N | naive MLE (noisy tables) | MLE on true tables |", "| --- | --- | --- |"]
    for r in rows_c:
        lines.append(f"| {r['l2N']:.0e} | {r['noisy']:.3g} (sd {r['noisy_sd']:.2g}) | {r['true']:.3g} |")
    write_section("cgm_fig1", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
