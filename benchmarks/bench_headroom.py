"""What any release-based rule could reach on `bench_regularisation.py`'s grid: the truth as oracle.

For each cell and report seed (the same releases as `bench_regularisation.py`), KL(true || learned):
  naive grid      the naive MLE at weights c / N on a quarter-decade grid, c = 1 .. 10^4.5; the best of them is what a
                  perfect choice of the naive weight reaches
  best iteration  CGM-EM (default E-step and M-step) run from a start for up to 40 iterations, scored against the
                  truth after each; the best iteration (0 = the start) is what a perfect stopping rule reaches.
                  From the default's start (the release-chosen weight) and from the grid's best weight.
  converged       the same EM from the default's start after its 40 iterations (or its own convergence)
Ratios: the naive columns over the better of 1 / N and the calibrated weight; the CGM-EM columns over the better of the
three naive fits (1 / N, calibrated, release rule), as in `bench_regularisation.py`. The oracle columns use the truth,
which no estimator has: they bound what choosing a weight and an iteration count can do with this E-step and M-step.

  python benchmarks/bench_headroom.py [--quick] [--from-log LOG]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _results import machine, write_section  # noqa: E402

warnings.filterwarnings("ignore")

from bench_regularisation import FAMILIES, MODEL_SEED, REPORT_SEEDS  # noqa: E402
from ppgm import contingency_tables, kl_divergence, sample  # noqa: E402
from ppgm.learners.cgm import cgm_em, naive_mle, noise_calibrated_l2  # noqa: E402
from ppgm.privacy.mechanisms import LaplaceMechanism  # noqa: E402

GRID = 10 ** (np.arange(0, 19) / 4)  # c = 1 .. 10^4.5: the weights c / N of the naive grid
EM_ITERS = 40


def run(fam: str, N: int, eps: float, seed: int) -> dict:
    """One cell and seed: the KLs the table needs (printed as a dict, so that --from-log can tabulate a run)."""
    t0 = time.perf_counter()
    truth = FAMILIES[fam](MODEL_SEED)
    rng = np.random.default_rng([seed, N, int(eps * 1000)])  # the same releases as bench_regularisation.run
    ys = LaplaceMechanism(eps).release(contingency_tables(sample(truth, N, seed=rng), truth.domain, truth.scopes), seed=rng)
    d = truth.domain

    def kl(model) -> float:
        return float(kl_divergence(truth, model))

    grid = [kl(naive_mle(d, ys, N=N, l2=c / N).model) for c in GRID]
    rule = naive_mle(d, ys, N=N)
    default = cgm_em(d, ys, N=N, progress=False)

    def curve(l2: float) -> list:
        """KL of CGM-EM's start at naive weight ``l2`` and of each of its iterates."""
        kls: list = []
        cgm_em(d, ys, N=N, progress=False, init_l2=l2, stop="converged", max_iter=EM_ITERS, rtol=0.0,
               callback=lambda it, model, record: kls.append(kl(model)))
        return [kl(naive_mle(d, ys, N=N, l2=l2, tol=1e-4).model)] + kls  # the start as cgm_em fits it (INIT_TOL)

    from_rule = curve(rule.l2)
    best_c = float(GRID[int(np.argmin(grid))])
    from_best = curve(best_c / N)
    return dict(fam=fam, N=N, eps=eps, seed=seed, paper=grid[0], cal=kl(naive_mle(d, ys, N=N, l2=noise_calibrated_l2(ys, N)).model),
                rule=kl(rule.model), default=kl(default.model), default_its=int(default.selection["iterations"]["value"]),
                grid=min(grid), grid_c=best_c, o1=min(from_rule), o1_its=int(np.argmin(from_rule)), converged=from_rule[-1],
                o2=min(from_best), o2_its=int(np.argmin(from_best)), seconds=round(time.perf_counter() - t0, 1))


COLUMNS = (("rule", "naive release rule", "naive"), ("grid", "naive, best grid weight", "naive"),
           ("default", "CGM-EM default", "cgm"), ("o1", "CGM-EM from the default's start, best iteration", "cgm"),
           ("o2", "CGM-EM from the best grid weight, best iteration", "cgm"),
           ("converged", "CGM-EM from the default's start, converged", "cgm"))


def table(rows: list, quick: bool) -> str:
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["fam"], r["N"], r["eps"]), []).append(r)
    ratios: dict = {key: [] for key, *_ in COLUMNS}
    lines = ["| family | N | eps | " + " | ".join(name for _, name, _ in COLUMNS)
             + " | best iteration from the default's start (per seed) | default's count (per seed) |",
             "|---|---|---|" + "---|" * (len(COLUMNS) + 2)]
    for (fam, N, eps), rs in cells.items():
        mean = {k: float(np.mean([r[k] for r in rs])) for k in ("paper", "cal", "rule", "default", "grid", "o1", "o2", "converged")}
        const = min(mean["paper"], mean["cal"])
        naive = min(const, mean["rule"])
        row = []
        for key, _, kind in COLUMNS:
            ratios[key].append(mean[key] / (const if kind == "naive" else naive))
            row.append(f"{ratios[key][-1]:.3f}")
        lines.append(f"| {fam} | {N:,} | {eps:g} | " + " | ".join(row) + f" | {', '.join(str(r['o1_its']) for r in rs)} | "
                     f"{', '.join(str(r['default_its']) for r in rs)} |")
    summary = []
    for key, name, _ in COLUMNS:
        v = np.array(ratios[key])
        summary.append(f"- {name}: median {np.median(v):.3f}, max {v.max():.3f}, at most 1.02 in {int((v <= 1.02).sum())} of "
                       f"{len(v)}, at most 0.95 in {int((v <= 0.95).sum())}")
    head = ["## Headroom: the truth as oracle on the regularisation grid (`benchmarks/bench_headroom.py`)", "",
            f"Machine: {machine()}. The releases of `bench_regularisation.py` (model seed {MODEL_SEED}, release seeds "
            f"{', '.join(map(str, REPORT_SEEDS))}){' (quick grid)' if quick else ''}. KL(true || learned), mean over seeds. "
            "Naive columns: over the better of 1 / N and the calibrated weight. CGM-EM columns: over the better of the "
            "three naive fits (1 / N, calibrated, release rule). The best grid weight and the best iteration are chosen "
            f"by the truth (quarter-decade grid of c / N, c = 1 to 10^4.5; iterations 0 to {EM_ITERS}), so no estimator "
            "can choose as well: they bound what a rule choosing the weight and the iteration count can reach with "
            "this E-step and M-step.", "", "Ratios over the cells:", ""] + summary + [""]
    return "\n".join(head + lines)


def main(quick: bool, log: str | None) -> None:
    if log:
        rows = [eval(line) for line in Path(log).read_text().splitlines() if line.startswith("{'fam'")]  # our printed dicts
    else:
        fams = ["chain", "sparse"] if quick else list(FAMILIES)
        Ns = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
        epss = [0.5, 2.0] if quick else [0.1, 0.5, 1.0, 2.0]
        rows = []
        for fam in fams:
            for N in Ns:
                for eps in epss:
                    for seed in REPORT_SEEDS:
                        rows.append(run(fam, N, eps, seed))
                        print(rows[-1], flush=True)
    text = table(rows, quick)
    write_section("headroom", text)
    print(text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="chain and sparse families, N in {1e3, 1e4}, eps in {0.5, 2}")
    ap.add_argument("--from-log", metavar="LOG", help="tabulate an earlier run's printed rows instead of running")
    main(**{"quick": ap.parse_args().quick, "log": ap.parse_args().from_log})
