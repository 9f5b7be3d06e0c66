"""The panel: every learner at its defaults on pgmpy's bundled networks, against its plain baseline and the truth.

A default must hold on data nobody tuned it on. Each network of pgmpy's bundle is the truth of five tasks made
from it, and each learner runs at its defaults beside the estimator a user would otherwise take:

  tables   noisy clique tables: N records, every family's table (node and parents) released with discrete
           Laplace noise at epsilon (seeded: reproducible, not private). The naive MLE at its default weight
           (chosen from the release), at the paper's 1 / N and at the noise-calibrated weight; CGM-EM at its
           defaults. KL(truth || fit), exact on the junction tree. Bar: CGM-EM at most 1.05x the best naive fit.
  filter   tampered rows: N records, none corrupted (clean), 10% from the network with 20 CPTs shifted
           towards a random state (shift), or 10% whose node with the most children records the next state
           (miscode, its children following the true value). RobustFilter's default mode told epsilon = 0.1
           against the MLE on all rows, the quota modes (single pass, iterative) and the MLE on the clean rows.
           Total variation to the truth (1e5 draws per side, the same draws for every estimator). Bars: default
           at most the MLE + 0.003 on clean rows, within 0.01 of the better quota mode on shift and miscode.
  maxent   aggregates only: the binary node with the most neighbours is the label (positive: its first
           state), its 14 nearest nodes the features; every single and pair table of N training rows, exact
           and with discrete Laplace noise (epsilon 1, scale 2T / epsilon); MaxEntClassifier's defaults
           against the quadratic logistic trained on the rows (L2 chosen on a validation split) and Naive
           Bayes. Test NLLH on 20,000 fresh rows. Bar (exact tables): within 0.01 of the logistic, converged.
           "steps": PCD's sweeps, the rule's pilot included (the Newton steps of an exact fit on an enumerable
           feature space).
  holes    records with holes: N records, 10% of the cells removed completely at random (MCAR) or by a rule
           that depends on an always-seen column (MAR). MissingValuesEM's defaults (pseudo-count 1) against
           complete-case and available-case estimates with the same prior. KL(truth || fit). Bar: EM below
           complete-case.
  markov   complete records: a Markov network on the moral graph's families, fitted from the records
           (MarkovNetworkEstimator's defaults), against the DAG's own MLE (pseudo-count 1 both). KL.

Every learner must also say it converged (no ConvergenceWarning). Seeds: the report uses seed 1 on every
network; defaults were tuned elsewhere (Adult, random networks, seed 0 of these networks). ``--quick`` runs
the sizes of the test suite's quick panel (tests/test_panel.py), which asserts the bars there.

Run: python benchmarks/panel.py [--quick] [--networks asia child ...] [--tasks tables filter ...] [--seed 1]
     python benchmarks/panel.py --from-log        # the table again from benchmarks/logs/panel_rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from ppgm import (ConvergenceWarning, Domain, LaplaceMechanism, cgm_em, contingency_tables, em_bayesian,  # noqa: E402
                  empirical_cpts, filter_known_topology, fit_markov_records, kl_divergence, naive_mle, nllh, sample,
                  total_variation)
from ppgm.adapters import bayes_from_pgmpy, load_bif_example  # noqa: E402
from ppgm.learners.aggregates import aggregate_records, noisy_aggregates, table_scopes  # noqa: E402
from ppgm.learners.maxent import MaxEntLayout, MaxEntModel, fit_maxent  # noqa: E402

NETWORKS = ["asia", "cancer", "child", "insurance", "water", "alarm", "hailfinder", "hepar2", "win95pts"]
TASKS = ["tables", "filter", "maxent", "holes", "markov"]
EPSILON_TABLES = 1.0
TOLD = 0.1  # the filter's epsilon
FEATURES = 14  # MaxEnt's features around the label
TEST_ROWS = 20_000
TV_DRAWS = 100_000
LOG = Path(__file__).parent / "logs" / "panel_rows.jsonl"


@dataclass(frozen=True)
class Sizes:
    tables: int = 100_000
    filter: int = 100_000
    maxent: int = 50_000
    holes: int = 20_000
    markov: int = 20_000
    tv_draws: int = TV_DRAWS


FULL, QUICK = Sizes(), Sizes(tables=20_000, filter=20_000, maxent=20_000, holes=5_000, markov=5_000, tv_draws=40_000)


def network(name: str):
    """The engine's BayesianNetwork of a bundled pgmpy network."""
    return bayes_from_pgmpy(load_bif_example(name))


def families(truth) -> list[tuple]:
    return [tuple([v, *truth.parents[v]]) for v in truth.domain.variables]


class _Warnings:
    """Runs a fit and records whether it raised a ConvergenceWarning (the panel's 'converged' column)."""

    def __init__(self):
        self.unconverged = False

    def run(self, fn, *args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(*args, **kwargs)
        self.unconverged |= any(issubclass(w.category, ConvergenceWarning) for w in caught)
        return out


# --- tasks ---------------------------------------------------------------------------------------------------
def task_tables(truth, n: int, seed: int) -> dict:
    """Noisy family tables: the naive MLE three ways and CGM-EM, KL to the truth."""
    rng = np.random.default_rng([seed, 1])
    scopes = families(truth)
    tables = contingency_tables(sample(truth, n, seed=rng), truth.domain, scopes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the release is seeded (reproducible, not private) on purpose
        release = LaplaceMechanism(EPSILON_TABLES).release(tables, seed=rng)
    w = _Warnings()
    out = {}
    t0 = time.perf_counter()
    out["naive"] = kl_divergence(truth, w.run(naive_mle, truth.domain, release, seed=seed).model)
    out["t_naive"] = time.perf_counter() - t0
    out["naive 1/N"] = kl_divergence(truth, w.run(naive_mle, truth.domain, release, l2="paper").model)
    out["naive calibrated"] = kl_divergence(truth, w.run(naive_mle, truth.domain, release, l2="calibrated").model)
    t0 = time.perf_counter()
    out["CGM-EM"] = kl_divergence(truth, w.run(cgm_em, truth.domain, release, progress=False, seed=seed).model)
    out["t_CGM-EM"] = time.perf_counter() - t0
    out["ratio"] = out["CGM-EM"] / min(out["naive"], out["naive 1/N"], out["naive calibrated"])
    out["converged"] = not w.unconverged
    return out


FILTER_KINDS = ["clean", "shift 10%", "miscode 10%"]


def task_filter(truth, n: int, seed: int, kind: str, tv_draws: int = TV_DRAWS) -> dict:
    """Tampered rows: the filter's default against the MLE, the quota modes and the clean rows' MLE, TV."""
    from bench_robust_filter import corrupted

    rng = np.random.default_rng([seed, 2, FILTER_KINDS.index(kind)])
    x, is_clean = corrupted(truth, kind, n, rng)
    dom, parents = truth.domain, truth.parents
    tv_seed = int(rng.integers(2**31))
    tv = lambda m: total_variation(truth, m, method="sample", n_samples=tv_draws, seed=tv_seed)  # noqa: E731
    w = _Warnings()
    out = {"MLE": tv(empirical_cpts(x, dom, parents))}
    t0 = time.perf_counter()
    res = w.run(filter_known_topology, x, dom, parents, TOLD, seed=seed, progress=False)
    out["t_default"] = time.perf_counter() - t0
    out["default"] = tv(res.model)
    out["removed"] = int((~res.inlier_mask).sum())
    for mode in ("single_pass", "iterative"):
        out[mode] = tv(w.run(filter_known_topology, x, dom, parents, TOLD, mode=mode, seed=seed, progress=False).model)
    out["clean MLE"] = tv(empirical_cpts(x[is_clean], dom, parents))
    out["converged"] = not w.unconverged
    return out


def label_and_features(truth, k: int = FEATURES) -> tuple[str, list] | None:
    """The binary node with the most neighbours in the DAG's skeleton (ties: first in topological order), and
    its k nearest nodes (by path length, then name); None when the network has no binary node."""
    skeleton = nx.Graph([(p, v) for v in truth.domain.variables for p in truth.parents[v]])
    binary = [v for v in truth.order if truth.domain.card(v) == 2 and v in skeleton]
    if not binary:
        return None
    label = max(binary, key=lambda v: skeleton.degree(v))
    dist = nx.single_source_shortest_path_length(skeleton, label)
    return label, sorted((v for v in dist if v != label), key=lambda v: (dist[v], v))[:k]


def task_maxent(truth, n: int, seed: int, noisy: bool, positive: int = 0) -> dict | None:
    """MaxEnt from the aggregates of n rows against the quadratic logistic on the rows and Naive Bayes."""
    from _baselines import quadratic_logistic

    picked = label_and_features(truth)
    if picked is None:
        return None
    label, features = picked
    rng = np.random.default_rng([seed, 3])
    rows = sample(truth, n + TEST_ROWS, seed=rng)
    x = rows[:, [truth.domain.index(f) for f in features]]
    y = (rows[:, truth.domain.index(label)] == positive).astype(np.int64)
    dom = Domain(tuple(features), tuple(truth.domain.card(f) for f in features))
    train, test = slice(0, n), slice(n, None)
    tables = aggregate_records(x[train], y[train], dom, table_scopes(dom.variables, "all"))
    if noisy:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # seeded noise: reproducible, not private
            tables = noisy_aggregates(tables, LaplaceMechanism(1.0), rng)
    w = _Warnings()
    t0 = time.perf_counter()
    fit = w.run(fit_maxent, tables, dom, n=float(n), seed=seed, progress=False)
    out = {"label": f"{label} ({len(features)} features)", "t_MaxEnt": time.perf_counter() - t0}
    out["MaxEnt"] = nllh(y[test], fit.model.predict_proba(x[test]))
    out["logistic"], _, _ = quadratic_logistic(x[train], y[train], x[test], y[test], dom.cards, seed=seed)
    singles = [t for t in tables if len(t.variables) == 1]
    nb = MaxEntModel.naive_bayes(MaxEntLayout.from_tables(dom, singles), singles)
    out["Naive Bayes"] = nllh(y[test], nb.predict_proba(x[test]))
    out["gap"] = out["logistic"] - out["MaxEnt"]
    out["converged"] = bool(fit.converged) and not w.unconverged
    out["l2_theta"] = fit.l2_theta
    out["steps"] = int(fit.state.step)  # PCD sweeps (pilot included) or Newton steps of the exact fit
    return out


HOLE_RULES = ["MCAR", "MAR"]


def with_holes(truth, x: np.ndarray, rate: float, rule: str, rng) -> np.ndarray:
    """x with a share ``rate`` of its cells set to -1: at random (MCAR), or (MAR) never in the first node of the
    topological order, in every other column 1.6x as often when that node is in its first state, 0.4x
    otherwise, scaled so that the rate holds."""
    holes = x.copy()
    if rule == "MCAR":
        holes[rng.random(x.shape) < rate] = -1
        return holes
    first = truth.domain.index(truth.order[0])
    driver = x[:, first] == 0
    base = rate * x.shape[1] / (x.shape[1] - 1) / (1.6 * driver.mean() + 0.4 * (1 - driver.mean()))
    p = np.where(driver, 1.6 * base, 0.4 * base)[:, None]
    mask = rng.random(x.shape) < p
    mask[:, first] = False
    holes[mask] = -1
    return holes


def available_case(truth, holes: np.ndarray, pseudo_count: float = 1.0):
    """Each CPT from the rows whose family is fully observed, with ``pseudo_count`` per cell."""
    dom = truth.domain
    cpts = {}
    for v in truth.domain.variables:
        fam = [v, *truth.parents[v]]
        cols = [dom.index(u) for u in fam]
        seen = (holes[:, cols] >= 0).all(axis=1)
        sub = Domain(tuple(fam), tuple(dom.card(u) for u in fam))
        counts = contingency_tables(holes[seen][:, cols], sub, [tuple(fam)])[0].values + pseudo_count
        table = np.moveaxis(counts, 0, -1)  # parents first, the node last, as the engine's CPTs
        cpts[v] = table / table.sum(axis=-1, keepdims=True)
    return truth.with_cpts(cpts)


def task_holes(truth, n: int, seed: int, rule: str, rate: float = 0.1) -> dict:
    """Records with holes: EM against complete-case and available-case (same prior), KL."""
    rng = np.random.default_rng([seed, 4, HOLE_RULES.index(rule)])
    x = sample(truth, n, seed=rng)
    holes = with_holes(truth, x, rate, rule, rng)
    complete = holes[(holes >= 0).all(axis=1)]
    w = _Warnings()
    out = {"complete rows": len(complete)}
    cc = truth.with_cpts({v: (c + 1.0) / (c + 1.0).sum(axis=-1, keepdims=True) for v, c in
                          ((v, _family_counts(truth, complete, v)) for v in truth.domain.variables)})
    out["complete-case"] = kl_divergence(truth, cc)
    out["available-case"] = kl_divergence(truth, available_case(truth, holes))
    t0 = time.perf_counter()
    res = w.run(em_bayesian, truth.domain, truth.parents, holes, seed=seed, progress=False)
    out["t_EM"] = time.perf_counter() - t0
    out["EM"] = kl_divergence(truth, res.model)
    out["iterations"] = len(res.history)
    out["converged"] = bool(res.converged) and not w.unconverged
    return out


def _family_counts(truth, records: np.ndarray, v: str) -> np.ndarray:
    """Counts of v's family in the engine's CPT layout (parents first, v last)."""
    dom = truth.domain
    fam = [v, *truth.parents[v]]
    sub = Domain(tuple(fam), tuple(dom.card(u) for u in fam))
    counts = contingency_tables(records[:, [dom.index(u) for u in fam]], sub, [tuple(fam)])[0].values
    return np.moveaxis(counts, 0, -1)


def task_markov(truth, n: int, seed: int) -> dict:
    """A Markov network on the families from complete records, against the DAG's MLE (pseudo-count 1 both)."""
    rng = np.random.default_rng([seed, 5])
    x = sample(truth, n, seed=rng)
    w = _Warnings()
    t0 = time.perf_counter()
    fit = w.run(fit_markov_records, truth.domain, families(truth), x)
    out = {"t_Markov": time.perf_counter() - t0, "Markov network": kl_divergence(truth, fit.model)}
    out["DAG MLE"] = kl_divergence(truth, truth.with_cpts({v: (c + 1.0) / (c + 1.0).sum(axis=-1, keepdims=True)
                                                           for v, c in ((v, _family_counts(truth, x, v)) for v in truth.domain.variables)}))
    out["converged"] = bool(fit.converged) and not w.unconverged
    return out


# --- the report ----------------------------------------------------------------------------------------------
def _fmt(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        if v != 0 and abs(v) < 0.01:
            return f"{v:.2e}"
        return f"{v:.4f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def run(networks, tasks, seed: int, sizes: Sizes, log: Path | None = None) -> dict:
    """Every (network, task) cell's row, printed as it comes (and appended to ``log`` as a JSON line)."""
    rows: dict = {t: [] for t in tasks}
    for name in networks:
        truth = network(name)
        for task in tasks:
            t0 = time.perf_counter()
            if task == "tables":
                cells = [("", task_tables(truth, sizes.tables, seed))]
            elif task == "filter":
                cells = [(kind, task_filter(truth, sizes.filter, seed, kind, sizes.tv_draws)) for kind in FILTER_KINDS]
            elif task == "maxent":
                cells = [(which, task_maxent(truth, sizes.maxent, seed, which == "noisy")) for which in ("exact", "noisy")]
            elif task == "holes":
                cells = [(rule, task_holes(truth, sizes.holes, seed, rule)) for rule in HOLE_RULES]
            else:
                cells = [("", task_markov(truth, sizes.markov, seed))]
            for case, row in cells:
                if row is None:
                    continue
                row = {"network": name, "case": case, **row, "s": time.perf_counter() - t0}
                rows[task].append(row)
                print(task, {k: _fmt(v) for k, v in row.items()}, flush=True)
                if log is not None:
                    with log.open("a") as fh:
                        fh.write(json.dumps({"task": task, "seed": seed, **row}) + "\n")
    return rows


def from_log(log: Path, seed: int) -> dict:
    """The rows of a run, read back from its log (the last row of each cell wins)."""
    cells: dict = {}
    for line in log.read_text().splitlines():
        row = json.loads(line)
        if row.pop("seed") == seed:
            cells[(row["task"], row["network"], row["case"])] = row
    rows: dict = {t: [] for t in TASKS}
    for (task, network, case), row in sorted(cells.items(), key=lambda kv: (NETWORKS.index(kv[0][1]), kv[0])):
        rows[task].append({k: v for k, v in row.items() if k != "task"})
    return {t: rs for t, rs in rows.items() if rs}


COLUMNS = {
    "tables": ["naive", "naive 1/N", "naive calibrated", "CGM-EM", "ratio", "converged", "t_naive", "t_CGM-EM"],
    "filter": ["MLE", "default", "single_pass", "iterative", "clean MLE", "removed", "converged", "t_default"],
    "maxent": ["label", "MaxEnt", "logistic", "gap", "Naive Bayes", "l2_theta", "steps", "converged", "t_MaxEnt"],
    "holes": ["complete rows", "complete-case", "available-case", "EM", "iterations", "converged", "t_EM"],
    "markov": ["DAG MLE", "Markov network", "converged", "t_Markov"],
}


def verdicts(rows: dict) -> list[str]:
    """The bars, cell by cell: which hold and where they fail."""
    out = []
    if rows.get("tables"):
        bad = [f"{r['network']} {r['ratio']:.3f}" for r in rows["tables"] if r["ratio"] > 1.05]
        out.append(f"CGM-EM at most 1.05x the best naive fit in {len(rows['tables']) - len(bad)} of {len(rows['tables'])} networks"
                   + (f" (above: {', '.join(bad)})" if bad else "") + ".")
    if rows.get("filter"):
        clean = [r for r in rows["filter"] if r["case"] == "clean"]
        batch = [r for r in rows["filter"] if r["case"] != "clean"]
        bad_clean = [f"{r['network']} {r['default'] - r['MLE']:+.4f}" for r in clean if r["default"] > r["MLE"] + 0.003]
        bad_batch = [f"{r['network']} {r['case'].split()[0]} {r['default'] - min(r['single_pass'], r['iterative']):+.3f}"
                     for r in batch if r["default"] > min(r["single_pass"], r["iterative"]) + 0.01]
        worse = [f"{r['network']} {r['case'].split()[0]} {r['default'] - r['MLE']:+.3f}" for r in batch if r["default"] > r["MLE"] + 0.003]
        out.append(f"Filter default at most the MLE + 0.003 on clean rows in {len(clean) - len(bad_clean)} of {len(clean)}"
                   + (f" (above: {', '.join(bad_clean)})" if bad_clean else "")
                   + f"; within 0.01 of the better quota mode on shift and miscode in {len(batch) - len(bad_batch)} of {len(batch)}"
                   + (f" (above: {', '.join(bad_batch)})" if bad_batch else "")
                   + f"; worse than the MLE on a batch in {len(worse)}" + (f" ({', '.join(worse)})" if worse else "") + ".")
    if rows.get("maxent"):
        exact = [r for r in rows["maxent"] if r["case"] == "exact"]
        bad = [f"{r['network']} {r['gap']:+.3f}{'' if r['converged'] else ' unconverged'}" for r in exact
               if r["gap"] > 0.01 or not r["converged"]]
        out.append(f"MaxEnt on exact tables within 0.01 NLLH of the quadratic logistic and converged in {len(exact) - len(bad)} of "
                   f"{len(exact)} networks with a binary node" + (f" (not: {', '.join(bad)})" if bad else "") + ".")
    if rows.get("holes"):
        bad = [f"{r['network']} {r['case']}" for r in rows["holes"] if not r["EM"] < r["complete-case"]]
        out.append(f"EM below complete-case in {len(rows['holes']) - len(bad)} of {len(rows['holes'])} cells"
                   + (f" (not: {', '.join(bad)})" if bad else "") + ".")
    unconverged = [f"{t} {r['network']} {r['case']}".strip() for t, rs in rows.items() for r in rs if not r.get("converged", True)]
    out.append("Every learner converged." if not unconverged else f"Not converged: {', '.join(unconverged)}.")
    return out


def markdown(rows: dict, seed: int, sizes: Sizes, seconds: float) -> str:
    from _results import machine

    took = "" if seconds != seconds else f"; {seconds / 60:.0f} minutes"
    lines = [f"`python benchmarks/panel.py` (seed {seed}; {machine()}{took}; rows logged in `benchmarks/logs/panel_rows.jsonl`, "
             "`--from-log` rebuilds this table). Every learner at its defaults; "
             f"N: tables {sizes.tables:,}, filter {sizes.filter:,}, MaxEnt {sizes.maxent:,} training rows, holes {sizes.holes:,}, "
             f"Markov {sizes.markov:,}. KL in nats (lower is better), TV (lower is better), test NLLH (higher is better); "
             "times in seconds. The script's docstring defines each task.", ""]
    lines += ["**Bars.** " + " ".join(verdicts(rows)), ""]
    titles = {"tables": f"Noisy family tables (epsilon {EPSILON_TABLES:g}), KL(truth || fit)",
              "filter": "Tampered rows, TV to the truth", "maxent": "Aggregates around a binary label, test NLLH",
              "holes": "Records with 10% of cells missing, KL(truth || fit)", "markov": "Complete records, KL(truth || fit)"}
    for task, rs in rows.items():
        if not rs:
            continue
        cols = COLUMNS[task]
        lines += [f"#### {titles[task]}", "", "| network | case | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
        lines += ["| " + " | ".join([r["network"], r["case"]] + [_fmt(r.get(c, "")) for c in cols]) + " |" for r in rs]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    from _results import write_section

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quick panel's sizes (no RESULTS update)")
    ap.add_argument("--networks", nargs="+", default=NETWORKS)
    ap.add_argument("--tasks", nargs="+", default=TASKS, choices=TASKS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", type=Path, default=LOG, help="JSON lines of every cell's row (appended)")
    ap.add_argument("--from-log", action="store_true", help="rebuild the table from --log instead of running")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    if args.from_log:
        rows = from_log(args.log, args.seed)
    else:
        rows = run(args.networks, args.tasks, args.seed, sizes, None if args.quick else args.log)
    text = markdown(rows, args.seed, sizes, time.perf_counter() - t0 if not args.from_log else float("nan"))
    print(text)
    if not args.quick and (args.from_log or (args.networks == NETWORKS and args.tasks == TASKS)):
        write_section("panel", text)


if __name__ == "__main__":
    main()
