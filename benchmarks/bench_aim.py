"""AIM-style private synthesis against OpenDP's AIM: the same budget, the same public
domain, the same workload; ppgm selects with the paper's loop (``ppgm.adapters.aim_release``) and
fits the published tables with its own learners.

Data sets and metric as ``bench_synthesis.py`` (Adult with public cut points; CHILD records); INSURANCE
(20,000 records from pgmpy's network) is held out: aim_release's defaults were not set on it.
Mechanisms (one record per individual, zCDP rho, private noise and selection on both sides):
  OpenDP AIM        ``opendp.extras.mbi.AIM(queries=k)`` through ``Context.contingency_table`` with
                    keys for every column, its defaults (T = 16 d rounds, 90% of each round on
                    measuring, 80 MB model cap, private-pgm's mirror descent warm-started each round).
  ppgm AIM, rounds' fit   ``aim_release(workload=k, estimator="rounds")``: the paper's Algorithm 1
                    (naive refits between rounds, l2 = 1 / N, warm from the previous round and stopped
                    once the scores that choose the next round are settled); the model is the last
                    round's fit, converged. Rows "(refits to convergence)": logged runs of the library
                    when every round's refit converged and the final fits started cold.
  ppgm AIM, naive MLE / CGM-EM   the same release's published tables refitted by the naive MLE /
                    CGM-EM with the release-chosen regularisation (``--estimators``; the naive weight
                    by total variation, as ``aim_release`` chooses it); a row's time is the release's
                    selection time plus its own fit.
  ppgm AIM, naive MLE (KL rule)   logged runs whose naive weight was chosen by KL (the rule's
                    default for ``naive_mle``) rather than by total variation.
The workload is every k-way marginal (k = 2 or 3), the candidates their subsets; the table reports
the mean total variation over all 2-way and all 3-way marginals whichever the workload, and, for CHILD
and INSURANCE (drawn from pgmpy's networks), KL(true || fit) on 50,000 fresh records from the network.

OpenDP's AIM runs about an hour per release on Adult on this machine (1,000 mirror-descent
iterations per round on a growing model), so every run is appended to a log (``--log``) as it ends
and the table is rebuilt from all runs in the log (``--from-log``): a cell shows its number of runs.

Requirements: ``pip install "opendp[mbi,polars]==0.16.0"`` (see bench_synthesis.py).

Run: python benchmarks/bench_aim.py [--datasets adult child] [--rhos 0.005 0.05 0.5] [--workloads 2 3]
     [--methods opendp ppgm] [--reps 1] [--seed N] [--estimators rounds naive cgm]
     [--log benchmarks/aim_runs.jsonl] [--from-log] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _results import machine, write_section  # noqa: E402
from bench_synthesis import _patch_opendp_budget_split, adult, bif_codes, child, load_bif_example, mbi_network, sample, true_marginals, workload_tv  # noqa: E402

from ppgm.adapters import aim_release  # noqa: E402
from ppgm.adapters.models import markov_from_pgmpy  # noqa: E402
from ppgm.synthesis.aim import _measurements  # noqa: E402
from ppgm.learners.cgm import cgm_em, naive_mle, population_size  # noqa: E402
from ppgm import Domain, Factor, MarkovNetwork  # noqa: E402
from ppgm.inference.marginals import infer  # noqa: E402
from ppgm.inference.junction_tree import JunctionTree  # noqa: E402

LABELS = {"rounds": "ppgm AIM, rounds' fit", "naive": "ppgm AIM, naive MLE", "cgm": "ppgm AIM, CGM-EM"}
KL_RULE = "ppgm AIM, naive MLE (KL rule)"  # logged runs whose naive weight was chosen by the KL criterion
DATASETS = {"adult": ("Adult", adult), "child": ("CHILD (30,000 records)", child),
            # held out: checks aim_release's defaults (estimator, refit tolerance), which were set on Adult and CHILD
            "insurance": ("INSURANCE (20,000 records; held out)", lambda: bif_codes("insurance", 20_000, seed=2023))}
NETWORKS = {"child": "child", "insurance": "insurance"}  # data sets drawn from a known network: KL(true || fit) too
KL_DRAWS, KL_SEED = 50_000, 77  # fresh records from the network for the KL estimate
LOG = Path(__file__).with_name("aim_runs.jsonl")
PHASES = ("sizes", "scores", "refit")  # the rounds' parts (ppgm.synthesis.aim.AIMRun.history's seconds)
ENGINE = "sizes in a worker"  # runs whose size checks are shared with a worker process during the refits
ENGINES = {ENGINE: "", "threaded rule": " (size checks in the round)", "array products": " (serial weight rule)", "proportional-fitting start": " (index-array products)", "gauge E-step": " (zero-start refits)",
           "scope tree": " (diagonal E-step)",
           "settled": " (Jacobi refits)"}  # earlier engines' rows; logged runs without one refitted to convergence
CONVERGED = " (refits to convergence)"
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
    return [("OpenDP AIM", mbi_network(model), secs, {"cliques": len(model.potentials.cliques)})]


def _marginal_fn(model):
    marg = infer(model)
    return lambda s: marg.marginal(list(s)).transpose(s).values


class NetworkKL:
    """KL(true || fit) for data drawn from one of pgmpy's bundled networks, estimated on ``KL_DRAWS``
    fresh records from it: the mean of log p_true(x) - log p_fit(x), exact on both sides (the
    network's CPTs; the fit's log-potentials minus its junction tree's log Z). The generalisation a
    workload's TV does not see: mass the fit leaves off cells where records fall."""

    def __init__(self, name: str, codes):
        bn = load_bif_example(name)
        draws = sample(bn, KL_DRAWS, seed=KL_SEED)
        names = {v: list(bn.get_cpds(v).state_names[v]) for v in codes.columns}
        self.codes = {v: pd.Categorical(draws[v], categories=names[v]).codes.astype(np.int64) for v in codes.columns}
        self.log_true = np.zeros(KL_DRAWS)
        for v in codes.columns:
            cpd = bn.get_cpds(v)
            vals = cpd.get_values().reshape([cpd.cardinality[0]] + list(cpd.cardinality[1:]))
            order = [np.asarray([list(cpd.state_names[u]).index(x) for x in names[u]]) for u in cpd.variables]
            self.log_true += np.log(vals[tuple(o[self.codes[u]] for o, u in zip(order, cpd.variables))])

    def __call__(self, model) -> float:
        """The KL estimate for a ppgm MarkovNetwork over the data's codes (extra trailing states allowed)."""
        log_z = JunctionTree.build(model.domain, model.scopes, max_cells=None).calibrate(model).log_z
        log_fit = np.full(KL_DRAWS, -log_z)
        for f in model.factors:
            log_fit += np.asarray(f.values, dtype=float)[tuple(self.codes[v] for v in f.variables)]
        return float(np.mean(self.log_true - log_fit))


def run_ppgm(codes, states, rho: float, k: int, estimators=("rounds", "naive", "cgm"), seed=None):
    """One private release (AIM's rounds), then each final fit of its published tables, timed apart
    (yields a row per fit as it ends). The final fits start from the rounds' last model, as
    ``aim_release`` does (``warm_start``). ``seed``: the release's randomness (None: fresh), so that two
    versions of the library can be compared on the same release noise. Run against a version whose
    rounds refit to convergence (``PYTHONPATH`` at its checkout), its rows are logged without the
    per-phase times and the final fits start cold."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        load = os.getloadavg()[0]
        c0 = time.process_time()
        rel = aim_release(codes, states, rho=rho, workload=k, estimator="rounds", progress=False, seed=seed)
        select, select_cpu = rel.seconds["select"], time.process_time() - c0
        info = {"rounds": len(rel.selected), "cells": rel.history[-1]["cells"], "select_s": select, "select_cpu": select_cpu,
                "annealed": int(sum(h["annealed"] for h in rel.history)), "load": load, "seed": seed}
        settled = "seconds" in rel.history[-1]
        if settled:
            info.update(phases={p: float(sum(h["seconds"][p] for h in rel.history)) for p in PHASES}, engine=ENGINE)
        warm = {"warm_start": rel.fit.model} if settled else {}
        ms = _measurements(rel.tables.measurements())
        dom = rel.tables.domain
        for est in estimators:
            t0, c0 = time.perf_counter(), time.process_time()
            if est == "rounds":
                model = rel.fit.model
            elif est == "naive":  # as aim_release's
                model = naive_mle(dom, ms, N=population_size(ms), seed=0, criterion="tv", **warm).model
            else:
                model = cgm_em(dom, ms, N=population_size(ms), seed=0, progress=False, **warm).model
            fit_s = time.perf_counter() - t0
            yield LABELS[est], model, select + fit_s, {**info, "fit_s": fit_s, "fit_cpu": time.process_time() - c0}


def _kl_cell(rs: list[dict]) -> str:
    """Mean KL over the runs that measured it, and their number (runs logged when the naive weight was chosen by KL have none)."""
    kls = [x["kl"] for x in rs if "kl" in x]
    return f"{np.mean(kls):.2f} ({len(kls)})" if kls else ""


def _label(r: dict) -> str:
    """The table's method: ppgm's runs logged before the rounds settled their refits are rows of their own."""
    ppgm = r["method"].startswith("ppgm")
    return r["method"] + (ENGINES.get(r["info"].get("engine"), CONVERGED) if ppgm else "")


def _phase_cells(rs: list[dict]) -> str:
    """Median seconds of the selection (its sizes / scores / refits where logged) and of the fit."""
    sel = [x["info"]["select_s"] for x in rs if "select_s" in x["info"]]
    fit = [x["info"]["fit_s"] for x in rs if "fit_s" in x["info"]]
    ph = [x["info"]["phases"] for x in rs if "phases" in x["info"]]
    parts = f" ({' / '.join(f'{np.median([p[k] for p in ph]):.0f}' for k in PHASES)})" if ph else ""
    load = [x["info"]["load"] for x in rs if "load" in x["info"]]
    return (f"{np.median(sel):.0f}{parts}" if sel else "") + " | " + (f"{np.median(fit):.0f}" if fit else "") + " | " + (
        f"{np.median(load):.1f}" if load else "")


def table(rows: list[dict]) -> str:
    lines = ["## AIM-style synthesis against OpenDP's AIM (`benchmarks/bench_aim.py`)", "",
             f"Machine: {machine()}. zCDP rho, one record per individual, public domain, private noise and selection on both "
             "sides; the workload is every k-way marginal. Mean total variation of the fitted model's marginals over all "
             "2-way and all 3-way marginals, mean over the runs (their number in the last column); seconds per release, "
             "median over the runs (selection and fit; ppgm's rows share one release: its selection time plus each row's "
             "own fit). Selection: counting, noise and the rounds, with the rounds' size checks / scores / refits; fit: the "
             "row's final fit (CGM-EM's includes choosing its regularisation). Load: the machine's one-minute load average "
             "when the release started (2 cores shared with other work: above 2, the runs waited for a core).", ""]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        with_kl = any("kl" in r for r in rows if r["dataset"] == ds)
        lines += [f"### {ds}", "", "| rho | workload | method | 2-way TV | 3-way TV | seconds | selection (sizes / scores / "
                  "refits) | fit | load | rounds | runs |" + (" KL(true \\|\\| fit), nats (runs) |" if with_kl else ""),
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if with_kl else "")]
        cells: dict = {}
        for r in rows:
            if r["dataset"] == ds:
                cells.setdefault((r["rho"], r["k"], _label(r)), []).append(r)
        order = {"OpenDP AIM": 0, LABELS["rounds"]: 1, KL_RULE: 2, LABELS["naive"]: 3, LABELS["cgm"]: 4}

        def rank(method: str) -> tuple:
            base = method
            for suffix in filter(None, (*ENGINES.values(), CONVERGED)):
                base = base.replace(suffix, "")
            return (order.get(base, 9), method != base)
        for (rho, k, method), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], rank(kv[0][2]))):
            rounds = [x["info"].get("rounds", x["info"].get("cliques")) for x in rs]
            lines.append(f"| {rho:g} | {k}-way | {method} | {np.mean([x['tv2'] for x in rs]):.4f} | "
                         f"{np.mean([x['tv3'] for x in rs]):.4f} | {np.median([x['secs'] for x in rs]):.0f} | {_phase_cells(rs)} | "
                         f"{np.mean(rounds):.0f} | {len(rs)} |" + (f" {_kl_cell(rs)} |" if with_kl else ""))
        lines.append("")
    lines.append("Rounds: ppgm's selected marginals; for OpenDP, the cliques of its final model. \"(refits to convergence)\": ppgm's "
                 "runs whose rounds refitted the model to every cell's tolerance and whose final fits started cold; \"(Jacobi "
                 "refits)\": runs whose Newton steps on grown junction trees were preconditioned by the Jacobi diagonal "
                 "instead of the scopes' tree; \"(diagonal E-step)\": runs whose CGM-EM E-steps on grown trees were "
                 "preconditioned by the diagonal alone (no gauge term); \"(zero-start refits)\" and every label above: runs "
                 "whose refits between rounds started the measured table at zero, not at its proportional-fitting update; "
                 "\"(size checks in the round)\" and every label above: runs whose rounds made every size check themselves, "
                 "with no worker process; "
                 "\"(serial weight rule)\" and every label above: runs whose naive-weight rule refitted its simulated releases "
                 "one after the other, and whose Fisher products and calibrations on large trees made one or two more passes "
                 "over the cells (a weighted copy of each clique, a concatenated copy of the beliefs); "
                 "\"(index-array products)\" and every label above: runs whose Fisher products went level by level through "
                 "index arrays on every tree, whose large trees calibrated in log space beyond 600 nats of summed ranges, and "
                 "whose Newton steps calibrated their point again for the product. KL: for the "
                 f"data sets drawn from a pgmpy network, KL(true || fit) estimated on {KL_DRAWS:,} fresh records from the network "
                 "(exact log-probabilities on both sides; logged for fewer runs than the TV).")
    return "\n".join(lines)


def backfill_kl(rows: list[dict]) -> list[dict]:
    """KL for OpenDP rows logged before the KL column, from the log-potentials ``run_opendp`` saved (file
    names carry the column count, rho and k, not the row): scored only where a cell has as many saved
    files as rows without KL, one, so the pairing is certain. Returns the rows, those scored with
    ``"kl"`` and ``"kl_from": "saved"``."""
    for key, net in NETWORKS.items():
        name, load = DATASETS[key]
        todo = [r for r in rows if r["dataset"] == name and r["method"] == "OpenDP AIM" and "kl" not in r]
        if not todo:
            continue
        codes, _ = load()
        kl = NetworkKL(net, codes)
        for r in todo:
            saved = sorted(SAVED.glob(f"opendp_aim_{codes.shape[1]}_{r['rho']:g}_{r['k']}_*.npz"))
            twins = [x for x in todo if (x["rho"], x["k"]) == (r["rho"], r["k"])]
            if len(saved) != 1 or len(twins) != 1:
                continue
            with np.load(saved[0]) as z:
                factors = [(tuple(c.split("|")), np.asarray(z[c], dtype=float)) for c in z.files]
            sizes = {v: n for c, t in factors for v, n in zip(c, t.shape)}
            dom = Domain(tuple(v for v in codes.columns if v in sizes), tuple(sizes[v] for v in codes.columns if v in sizes))
            r["kl"], r["kl_from"] = kl(MarkovNetwork(dom, [Factor(c, t) for c, t in factors])), "saved"
            print(f"{name}, rho {r['rho']:g}, {r['k']}-way: OpenDP's saved model scored, KL {r['kl']:.3f}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["adult", "child"], choices=list(DATASETS))
    ap.add_argument("--rhos", nargs="+", type=float, default=[0.005, 0.05, 0.5])
    ap.add_argument("--workloads", nargs="+", type=int, default=[2, 3])
    ap.add_argument("--methods", nargs="+", default=["opendp", "ppgm"], choices=["opendp", "ppgm"])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None, help="ppgm's release seed (the same noise for two versions of it)")
    ap.add_argument("--estimators", nargs="+", default=["rounds", "naive", "cgm"], choices=list(LABELS))
    ap.add_argument("--log", type=Path, default=LOG)
    ap.add_argument("--from-log", action="store_true", help="only rebuild the table from the log")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS.md alone")
    ap.add_argument("--backfill-kl", action="store_true",
                    help="score OpenDP rows logged without KL from their saved log-potentials (SAVED), where a cell's "
                         "saved files and logged rows pair one to one")
    args = ap.parse_args()
    if not args.from_log:
        runners = {"opendp": run_opendp, "ppgm": lambda c, s, r, k: run_ppgm(c, s, r, k, args.estimators, args.seed)}
        for key in args.datasets:
            name, load = DATASETS[key]
            codes, states = load()
            kl = NetworkKL(NETWORKS[key], codes) if key in NETWORKS else None
            pairs, triples = list(combinations(codes.columns, 2)), list(combinations(codes.columns, 3))
            t2, t3 = true_marginals(codes, states, pairs), true_marginals(codes, states, triples)
            for rho in args.rhos:
                for k in args.workloads:
                    for method in args.methods:
                        for _ in range(args.reps):
                            for label, model, secs, info in runners[method](codes, states, rho, k):
                                marginal = _marginal_fn(model)
                                row = {"dataset": name, "rho": rho, "k": k, "method": label, "secs": secs, "info": info,
                                       "tv2": workload_tv(marginal, pairs, t2), "tv3": workload_tv(marginal, triples, t3)}
                                if kl is not None:
                                    row["kl"] = kl(model)
                                with open(args.log, "a") as fh:
                                    fh.write(json.dumps(row) + "\n")
                                print(json.dumps(row), flush=True)
    rows = [json.loads(line) for line in open(args.log)] if args.log.exists() else []
    if args.backfill_kl and rows:
        rows = backfill_kl(rows)
        args.log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = table(rows)
    if rows and not args.no_write:
        write_section("aim", text)
    print(text)


if __name__ == "__main__":
    main()
