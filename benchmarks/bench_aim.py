"""AIM-style private synthesis against OpenDP's AIM (issue #34): the same budget, the same public
domain, the same workload; ppgm selects with the paper's loop (``ppgm.adapters.aim_release``) and
fits the published tables with its own learners.

Data sets and metric as ``bench_synthesis.py`` (Adult with public cut points; CHILD records); INSURANCE
(20,000 records from pgmpy's network) is held out: aim_release's defaults were not set on it.
Mechanisms (one record per individual, zCDP rho, private noise and selection on both sides):
  OpenDP AIM        ``opendp.extras.mbi.AIM(queries=k)`` through ``Context.contingency_table`` with
                    keys for every column, its defaults (T = 16 d rounds, 90% of each round on
                    measuring, 80 MB model cap, private-pgm's mirror descent warm-started each round).
  ppgm AIM, rounds' fit   ``aim_release(workload=k, estimator="rounds")``: the paper's Algorithm 1
                    (naive refits between rounds, l2 = 1 / N); the model is the last round's fit.
  ppgm AIM, naive MLE / CGM-EM   the same release's published tables refitted by the naive MLE /
                    CGM-EM with the release-chosen regularisation (``--estimators``; the naive weight
                    by total variation, as ``aim_release`` chooses it); a row's time is the release's
                    selection time plus its own fit.
  ppgm AIM, naive MLE (KL rule)   runs logged before session 20, when the naive weight was chosen
                    by KL (the rule's default for ``naive_mle``).
The workload is every k-way marginal (k = 2 or 3), the candidates their subsets; the table reports
the mean total variation over all 2-way and all 3-way marginals whichever the workload.

OpenDP's AIM runs about an hour per release on Adult on this machine (1,000 mirror-descent
iterations per round on a growing model), so every run is appended to a log (``--log``) as it ends
and the table is rebuilt from all runs in the log (``--from-log``): a cell shows its number of runs.

Requirements: ``pip install "opendp[mbi,polars]==0.16.0"`` (see bench_synthesis.py).

Run: python benchmarks/bench_aim.py [--datasets adult child] [--rhos 0.005 0.05 0.5] [--workloads 2 3]
     [--methods opendp ppgm] [--reps 1] [--log benchmarks/aim_runs.jsonl] [--from-log]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _results import machine, write_section  # noqa: E402
from bench_synthesis import _patch_opendp_budget_split, adult, bif_codes, child, mbi_marginals, true_marginals, workload_tv  # noqa: E402

from ppgm.adapters import aim_release  # noqa: E402
from ppgm.adapters.models import markov_from_pgmpy  # noqa: E402
from ppgm.aim import _measurements  # noqa: E402
from ppgm.cgm import cgm_em, naive_mle, population_size  # noqa: E402
from ppgm.inference import infer  # noqa: E402

LABELS = {"rounds": "ppgm AIM, rounds' fit", "naive": "ppgm AIM, naive MLE", "cgm": "ppgm AIM, CGM-EM"}
KL_RULE = "ppgm AIM, naive MLE (KL rule)"  # runs before session 20: the naive weight chosen by the KL criterion
DATASETS = {"adult": ("Adult", adult), "child": ("CHILD (30,000 records)", child),
            # held out: checks aim_release's defaults (estimator, refit tolerance), which were set on Adult and CHILD
            "insurance": ("INSURANCE (20,000 records; held out)", lambda: bif_codes("insurance", 20_000, seed=2023))}
LOG = Path(__file__).with_name("aim_runs.jsonl")
SAVED = Path("/tmp/ppgm_bench_aim")  # OpenDP's fitted log-potentials, one file per release


def run_opendp(codes, states, rho: float, k: int) -> list[tuple[str, object, float, dict]]:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    _patch_opendp_budget_split()
    t0 = time.perf_counter()
    ctx = dp.Context.compositor(data=pl.from_pandas(codes).lazy(), privacy_unit=dp.unit_of(contributions=1),
                                privacy_loss=dp.loss_of(rho=rho))
    table = ctx.query(rho=rho).select(list(codes.columns)).contingency_table(keys=states, algorithm=dp.mbi.AIM(queries=k)).release()
    secs = time.perf_counter() - t0
    model = table.model
    SAVED.mkdir(exist_ok=True)  # an hour's release is kept before it is scored
    np.savez(SAVED / f"opendp_aim_{len(codes.columns)}_{rho:g}_{k}_{int(time.time())}.npz",
             **{"|".join(c): np.asarray(model.potentials.arrays[c].values) for c in model.potentials.cliques})
    return [("OpenDP AIM", mbi_marginals(model), secs, {"cliques": len(model.potentials.cliques)})]


def _marginal_fn(model):
    marg = infer(model)
    return lambda s: marg.marginal(list(s)).transpose(s).values


def run_ppgm(codes, states, rho: float, k: int, estimators=("rounds", "naive", "cgm")):
    """One private release (AIM's rounds), then each final fit of its published tables, timed apart
    (yields a row per fit as it ends)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = aim_release(codes, states, rho=rho, workload=k, estimator="rounds", progress=False)
        select = rel.seconds["select"]
        info = {"rounds": len(rel.selected), "cells": rel.history[-1]["cells"], "select_s": select,
                "annealed": int(sum(h["annealed"] for h in rel.history))}
        ms = _measurements(rel.tables.measurements())
        dom = rel.tables.domain
        for est in estimators:
            t0 = time.perf_counter()
            if est == "rounds":
                model = rel.fit.model
            elif est == "naive":
                model = naive_mle(dom, ms, N=population_size(ms), seed=0, criterion="tv").model  # as aim_release's
            else:
                model = cgm_em(dom, ms, N=population_size(ms), seed=0, progress=False).model
            fit_s = time.perf_counter() - t0
            yield LABELS[est], _marginal_fn(model), select + fit_s, {**info, "fit_s": fit_s}


def table(rows: list[dict]) -> str:
    lines = ["## AIM-style synthesis against OpenDP's AIM (`benchmarks/bench_aim.py`)", "",
             f"Machine: {machine()}. zCDP rho, one record per individual, public domain, private noise and selection on both "
             "sides; the workload is every k-way marginal. Mean total variation of the fitted model's marginals over all "
             "2-way and all 3-way marginals, mean over the runs (their number in the last column); seconds per release "
             "(selection and fit; ppgm's rows share one release: its selection time plus each row's own fit).", ""]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        lines += [f"### {ds}", "", "| rho | workload | method | 2-way TV | 3-way TV | seconds | rounds | runs |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        cells: dict = {}
        for r in rows:
            if r["dataset"] == ds:
                cells.setdefault((r["rho"], r["k"], r["method"]), []).append(r)
        order = {"OpenDP AIM": 0, LABELS["rounds"]: 1, KL_RULE: 2, LABELS["naive"]: 3, LABELS["cgm"]: 4}
        for (rho, k, method), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 9))):
            rounds = [x["info"].get("rounds", x["info"].get("cliques")) for x in rs]
            lines.append(f"| {rho:g} | {k}-way | {method} | {np.mean([x['tv2'] for x in rs]):.4f} | "
                         f"{np.mean([x['tv3'] for x in rs]):.4f} | {np.median([x['secs'] for x in rs]):.0f} | "
                         f"{np.mean(rounds):.0f} | {len(rs)} |")
        lines.append("")
    lines.append("Rounds: ppgm's selected marginals; for OpenDP, the cliques of its final model.")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["adult", "child"], choices=list(DATASETS))
    ap.add_argument("--rhos", nargs="+", type=float, default=[0.005, 0.05, 0.5])
    ap.add_argument("--workloads", nargs="+", type=int, default=[2, 3])
    ap.add_argument("--methods", nargs="+", default=["opendp", "ppgm"], choices=["opendp", "ppgm"])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--estimators", nargs="+", default=["rounds", "naive", "cgm"], choices=list(LABELS))
    ap.add_argument("--log", type=Path, default=LOG)
    ap.add_argument("--from-log", action="store_true", help="only rebuild the table from the log")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    args = ap.parse_args()
    if not args.from_log:
        runners = {"opendp": run_opendp, "ppgm": lambda c, s, r, k: run_ppgm(c, s, r, k, args.estimators)}
        for key in args.datasets:
            name, load = DATASETS[key]
            codes, states = load()
            pairs, triples = list(combinations(codes.columns, 2)), list(combinations(codes.columns, 3))
            t2, t3 = true_marginals(codes, states, pairs), true_marginals(codes, states, triples)
            for rho in args.rhos:
                for k in args.workloads:
                    for method in args.methods:
                        for _ in range(args.reps):
                            for label, marginal, secs, info in runners[method](codes, states, rho, k):
                                row = {"dataset": name, "rho": rho, "k": k, "method": label, "secs": secs, "info": info,
                                       "tv2": workload_tv(marginal, pairs, t2), "tv3": workload_tv(marginal, triples, t3)}
                                with open(args.log, "a") as fh:
                                    fh.write(json.dumps(row) + "\n")
                                print(json.dumps(row), flush=True)
    rows = [json.loads(line) for line in open(args.log)] if args.log.exists() else []
    text = table(rows)
    if rows and not args.no_write:
        write_section("aim", text)
    print(text)


if __name__ == "__main__":
    main()
