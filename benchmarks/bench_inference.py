"""Exact and loopy inference: ppgm against pgmpy 1.1.2 in the same process.

Tasks (foundation issue):
  (a) every clique marginal of the 10-variable, 10-state third-order chain;
  (b) every clique marginal of pgmpy's ALARM network (moralised);
  (c) loopy BP on a 20 x 20 binary grid (no pgmpy counterpart): time, and its error against the
      exact junction tree on a 10 x 10 grid;
  (d) 24 pairwise-marginal queries on (a);
  (e) many rows at once: 10,000 rows sampled from bundled networks of growing size (ALARM, HEPAR2,
      WIN95PTS), 10%, 30% or 60% of their cells kept, the posterior of one hidden variable for every
      row: ``LogBeliefPropagation.query_rows`` against ppgm's own per-row ``query``, pgmpy's
      VariableElimination per row, pgmpy's ``predict_probability`` and pyAgrum's LazyPropagation per
      row (in its own environment, ``--agrum``; skipped when absent); and 1,000,000 rows of ALARM in a
      subprocess, its peak RSS measured.
pgmpy's BeliefPropagation is given the chain with each factor scaled to max 1 (with the raw
Dirichlet tables it stops early and returns wrong marginals, which is reported too).

Run: python benchmarks/bench_inference.py [--repeats 5] [--part all|classic|batch] [--agrum /path/to/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from _results import HASH_SEED, fix_hash_seed, machine, median_time, write_section  # noqa: E402

fix_hash_seed()

warnings.filterwarnings("ignore")

from pgmpy.inference import BeliefPropagation, VariableElimination  # noqa: E402

from ppgm import infer  # noqa: E402
from ppgm.adapters import LogBeliefPropagation, dirichlet_chain_network, load_bif_example, markov_from_pgmpy, markov_to_pgmpy  # noqa: E402
from ppgm.models.random_models import grid  # noqa: E402

PAIRS = [(f"X{i}", f"X{j}") for i in range(10) for j in range(i + 1, min(i + 4, 10))]


def _normalised(f):
    f = f.copy()
    f.normalize()
    return f


def _pgmpy_clique_beliefs(model):
    bp = BeliefPropagation(model)
    bp.calibrate()
    return bp.get_clique_beliefs()


def _ours_clique_beliefs(model):
    bp = LogBeliefPropagation(model)
    return bp.get_clique_beliefs()


def _max_err_against(ours: LogBeliefPropagation, beliefs: dict, scopes) -> float:
    """Largest difference between ours and pgmpy's normalised clique beliefs, compared on every
    model scope (edge or family) and every single variable, each read from a pgmpy clique holding it.
    (The two libraries triangulate differently, so their cliques differ.)"""
    err = 0.0
    pg = [_normalised(f) for f in beliefs.values()]
    wanted = {tuple(s) for s in scopes} | {(v,) for s in scopes for v in s}
    for scope in wanted:
        holder = next(f for f in pg if set(scope) <= set(f.variables))
        ref = holder.marginalize([v for v in holder.variables if v not in scope], inplace=False)
        got = ours.query(list(ref.variables))
        err = max(err, float(np.abs(got.values - ref.values).max()))
    return err


def _calibrate_only(ours_model, pgmpy_model, repeats, pgmpy_repeats=None):
    ours = LogBeliefPropagation(ours_model)
    t1, _ = median_time(lambda: ours.junction_tree.calibrate(ours.engine_model), repeats)
    bp = BeliefPropagation(pgmpy_model)
    t2, _ = median_time(bp.calibrate, pgmpy_repeats or repeats, warmup=0 if pgmpy_repeats else 1)
    return (t1, "BeliefPropagation.calibrate()", t2)


def main(repeats: int) -> None:
    rows = []
    # (a) chain: pgmpy needs factors scaled to max 1 to calibrate correctly
    raw = dirichlet_chain_network(10, 10, seed=0)
    scaled = markov_to_pgmpy(markov_from_pgmpy(raw))
    t_ours, ours_beliefs = median_time(lambda: _ours_clique_beliefs(raw), repeats)
    t_pg, pg_beliefs = median_time(lambda: _pgmpy_clique_beliefs(scaled), repeats)
    chain_scopes = [f.variables for f in raw.get_factors()]
    err = _max_err_against(LogBeliefPropagation(raw), pg_beliefs, chain_scopes)
    raw_beliefs = _pgmpy_clique_beliefs(raw)
    err_raw = _max_err_against(LogBeliefPropagation(raw), raw_beliefs, chain_scopes)
    rows.append(("(a) chain 10x10: all clique marginals, from the pgmpy model", t_ours, "BeliefPropagation(model).calibrate() (scaled)", t_pg, err))
    rows.append(("(a) chain 10x10: calibration only (tree built)",) + _calibrate_only(raw, scaled, repeats) + (err,))

    # (b) ALARM
    alarm = load_bif_example("alarm")
    for cpd in alarm.get_cpds():
        cpd.normalize()
    t_ours_b, _ = median_time(lambda: _ours_clique_beliefs(alarm), repeats)
    t_pg_b, pg_alarm = median_time(lambda: _pgmpy_clique_beliefs(alarm), 2, warmup=0)
    err_b = _max_err_against(LogBeliefPropagation(alarm), pg_alarm, [c.variables for c in alarm.get_cpds()])
    rows.append(("(b) ALARM moralised: all clique marginals, from the pgmpy model", t_ours_b, "BeliefPropagation(model).calibrate()", t_pg_b, err_b))
    rows.append(("(b) ALARM: calibration only (tree built)",) + _calibrate_only(alarm, alarm, repeats, pgmpy_repeats=2) + (err_b,))

    # (d) 24 pairwise queries on the chain, build + calibrate + queries
    def ours_queries():
        bp = LogBeliefPropagation(raw)
        return [bp.query(list(p)).values for p in PAIRS]

    def pgmpy_bp_queries():
        bp = BeliefPropagation(scaled)
        bp.calibrate()
        return [_normalised(bp.query(list(p), show_progress=False)).values for p in PAIRS]

    def pgmpy_ve_queries():
        ve = VariableElimination(raw)
        return [_normalised(ve.query(list(p), show_progress=False)).values for p in PAIRS]

    t_q, q_ours = median_time(ours_queries, repeats)
    t_qbp, q_bp = median_time(pgmpy_bp_queries, max(1, repeats // 2))
    t_qve, q_ve = median_time(pgmpy_ve_queries, repeats)
    err_qbp = max(np.abs(a - b).max() for a, b in zip(q_ours, q_bp))
    err_qve = max(np.abs(a - b).max() for a, b in zip(q_ours, q_ve))
    rows.append(("(d) chain: 24 pairwise queries", t_q, "BeliefPropagation (scaled)", t_qbp, err_qbp))
    rows.append(("(d) chain: 24 pairwise queries", t_q, "VariableElimination", t_qve, err_qve))

    # (c) loopy BP
    g20 = grid(20, 20, coupling=0.5, seed=0)
    t_c, res20 = median_time(lambda: infer(g20, method="loopy"), repeats)
    g10 = grid(10, 10, coupling=0.5, seed=0)
    exact10, loopy10 = infer(g10), infer(g10, method="loopy")
    err10 = max(np.abs(exact10.marginal([v]).values - loopy10.marginal([v]).values).max() for v in g10.domain.variables)
    err10_pair = max(
        np.abs(exact10.marginal(f.variables).values - loopy10.marginal(f.variables).values).max()
        for f in g10.factors if len(f.variables) == 2
    )
    t_exact10, _ = median_time(lambda: infer(g10), repeats)

    lines = [
        "## Inference (`benchmarks/bench_inference.py`)",
        "",
        f"Machine: {machine()}. Median wall time over {repeats} repeats (pgmpy on ALARM: 2), both libraries in "
        f"one process with PYTHONHASHSEED={HASH_SEED} (pgmpy's ALARM junction tree depends on the hash seed; "
        "see `_results.fix_hash_seed`). Rows 'from the pgmpy model' include converting the model and building "
        "the junction tree on both sides.",
        "",
        "| task | ppgm | pgmpy 1.1.2 | pgmpy time | speed-up | max abs difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for task, t1, peer, t2, e in rows:
        lines.append(f"| {task} | {t1 * 1e3:.2f} ms | {peer} | {t2 * 1e3:.1f} ms | {t2 / t1:.0f}x | {e:.1e} |")
    lines += [
        "",
        f"pgmpy's BeliefPropagation on the raw Dirichlet(1) chain (entries ~1e-2): largest clique-marginal error "
        f"{err_raw:.2e} against ppgm (it declares convergence on unnormalised beliefs with an absolute tolerance). "
        "ppgm agrees with pgmpy's VariableElimination to the figure in the last column.",
        "",
        f"(c) 20 x 20 binary grid (coupling std 0.5, field std 0.5), loopy BP (damping 0.5, tol 1e-8): "
        f"{t_c * 1e3:.0f} ms, {res20.loopy.iterations} iterations, Bethe log Z {res20.log_z:.3f}. "
        f"On a 10 x 10 grid of the same kind: largest node-marginal error {err10:.1e}, edge-marginal error "
        f"{err10_pair:.1e}, Bethe log Z {loopy10.log_z:.4f} vs exact {exact10.log_z:.4f} "
        f"(exact junction tree: {t_exact10 * 1e3:.0f} ms).",
    ]
    write_section("inference", "\n".join(lines))
    print("\n".join(lines))



BATCH_NETWORKS = ("alarm", "hepar2", "win95pts")  # andes: its tree has 389,854 cells, 10,000 rows took over 8 minutes
BATCH_FRACTIONS = (0.1, 0.3, 0.6)
BATCH_ROWS = 10_000
PER_ROW_PPGM = 300  # rows answered by ppgm's per-row query (then extrapolated)
PER_ROW_VE_BUDGET = 8.0  # seconds of pgmpy VariableElimination per case (at least 20 rows; extrapolated)
AGRUM_PYTHON = "/work/venv_agrum/bin/python"


def _batch_case(bn, bif_path, frac, seed, agrum):
    """One network and fraction: rows sampled, cells hidden, the middle variable of the domain queried."""
    from ppgm.adapters import predict_probability, sample

    bp = LogBeliefPropagation(bn)
    full = sample(bn, BATCH_ROWS, seed=seed)
    rng = np.random.default_rng(seed)
    q = full.columns[len(full.columns) // 2]
    data = full.mask(rng.random(full.shape) > frac).drop(columns=[q])
    bp.query_rows(data.iloc[:50], q)  # warm the tree's index caches
    t0 = time.perf_counter()
    got = bp.query_rows(data, q)
    t_rows = time.perf_counter() - t0
    tracemalloc.start()
    bp.query_rows(data, q)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    states = list(got.columns)
    evid = [r.dropna().to_dict() for _, r in data.iloc[:max(PER_ROW_PPGM, 200)].iterrows()]
    t0 = time.perf_counter()
    per = [bp.query([q], evidence=e).values for e in evid[:PER_ROW_PPGM]]
    t_per = (time.perf_counter() - t0) / PER_ROW_PPGM
    err_per = float(np.abs(np.array(per) - got.iloc[:PER_ROW_PPGM].to_numpy()).max())
    ve = VariableElimination(bn)
    ve_rows, t0 = [], time.perf_counter()
    while len(ve_rows) < len(evid) and (len(ve_rows) < 20 or time.perf_counter() - t0 < PER_ROW_VE_BUDGET):
        f = ve.query([q], evidence=evid[len(ve_rows)], show_progress=False)
        ve_rows.append([f.get_value(**{q: s}) for s in states])
    n_ve = len(ve_rows)
    t_ve = (time.perf_counter() - t0) / n_ve
    ve_rows = np.array(ve_rows)
    err_rows = float(np.abs(got.iloc[:n_ve].to_numpy() - ve_rows).max())
    err_per_ve = float(np.abs(np.array(per[:n_ve]) - ve_rows[:len(per)]).max())
    # pgmpy's predict_probability: the rows as they are (with empty cells), then complete rows
    pp = {}
    for label, frame in (("rows with empty cells", data.iloc[:20]), ("complete rows", full.drop(columns=[q]).iloc[:20])):
        t0 = time.perf_counter()
        try:
            res = bn.predict_probability(frame)
            cols = [f"{q}_{s}" for s in states]
            pp[label] = (time.perf_counter() - t0) / len(frame), f"{q} only: {len(res.columns)} columns" if set(cols) <= set(res.columns) else "?"
        except Exception as exc:  # noqa: BLE001 - reported
            pp[label] = (None, f"{type(exc).__name__}: {str(exc)[:60]}")
    ag = None
    if agrum:
        with tempfile.TemporaryDirectory() as tmp:
            csv = os.path.join(tmp, "rows.csv")
            data.fillna("").astype(str).to_csv(csv, index=False)
            out = os.path.join(tmp, "post.npy")
            try:
                run = subprocess.run([agrum, str(__import__("pathlib").Path(__file__).with_name("_agrum_rows.py")), bif_path, csv, q, out],
                                     capture_output=True, text=True, timeout=600, check=True)
                post = np.load(out)
                said = json.loads(run.stdout.strip().splitlines()[-1])
                post = post[:, [said["labels"].index(str(s)) for s in states]]
                ag = (said["seconds"] / BATCH_ROWS, float(np.abs(post[:n_ve] - ve_rows).max()))
            except (subprocess.SubprocessError, OSError, ValueError) as exc:
                ag = (None, f"{type(exc).__name__}")
    return dict(q=q, t_rows=t_rows, peak=peak, t_per=t_per, err_per=max(err_per, err_per_ve), t_ve=t_ve, n_ve=n_ve,
                err_rows=err_rows, pp=pp, agrum=ag, cells=int(bp.junction_tree.cells))


def _million(n: int = 1_000_000) -> dict:
    """ALARM, ``n`` rows with 30% of the cells kept, every row's posterior of one variable; run in a
    subprocess so that its peak RSS is its own."""
    from ppgm.adapters import bayes_to_pgmpy, sample, to_engine

    bn = bayes_to_pgmpy(to_engine(load_bif_example("alarm")))
    full = sample(bn, n, seed=1)
    q = full.columns[len(full.columns) // 2]
    data = full.mask(np.random.default_rng(1).random(full.shape) > 0.3).drop(columns=[q])
    del full
    rss_data = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    bp = LogBeliefPropagation(bn)
    t0 = time.perf_counter()
    out = bp.query_rows(data, q)
    elapsed = time.perf_counter() - t0
    return dict(n=n, seconds=elapsed, rss_before=rss_data, rss_peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                data_bytes=int(data.memory_usage(deep=True).sum()), out_bytes=int(out.memory_usage().sum()),
                sums=float(np.abs(out.sum(axis=1) - 1).max()))


def batch(agrum: str | None) -> None:
    from ppgm.adapters import bayes_to_pgmpy, to_engine, write_bif

    agrum = agrum if agrum and os.path.exists(agrum) else None
    lines = [
        "## Many rows at once (`benchmarks/bench_inference.py --part batch`)",
        "",
        f"Machine: {machine()}, shared with other jobs while it ran (single-run wall times). {BATCH_ROWS:,} rows sampled "
        "from each network, each cell kept with the probability given, the posterior of one hidden variable (the "
        "domain's middle one) for every row. CPT columns rescaled to sum to one as ppgm does (`bayes_to_pgmpy(to_engine(bn))`) "
        "before every library sees them; pyAgrum reads them from a BIF file written at full precision. "
        f"ppgm's per-row `query` ran on the first {PER_ROW_PPGM} rows, pgmpy's VariableElimination on at least 20 rows "
        f"and up to {PER_ROW_VE_BUDGET:.0f} s; both extrapolated to {BATCH_ROWS:,} rows. pyAgrum {'' if agrum else '(not available) '}"
        "LazyPropagation ran on every row in its own environment (query time only). Peak memory: tracemalloc's peak during "
        "`query_rows` (numpy's allocations included). Errors: largest absolute difference from VariableElimination on "
        "the rows it answered.",
        "",
        "| network (cells of ppgm's tree) | kept | query_rows s | rows/s | peak MB | ppgm per-row query s (x) | pgmpy VE per row s (x) | pyAgrum per row s | max err query_rows / per-row / pyAgrum |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in BATCH_NETWORKS:
            bn = bayes_to_pgmpy(to_engine(load_bif_example(name)))
            bif = os.path.join(tmp, f"{name}.bif")
            write_bif(bn, bif)
            for frac in BATCH_FRACTIONS:
                r = _batch_case(bn, bif, frac, seed=0, agrum=agrum)
                per, ve = r["t_per"] * BATCH_ROWS, r["t_ve"] * BATCH_ROWS
                ag = r["agrum"]
                ag_t = f"{ag[0] * BATCH_ROWS:.2f}" if ag and ag[0] is not None else ("failed: " + ag[1] if ag else "n/a")
                ag_e = f"{ag[1]:.1e}" if ag and ag[0] is not None else "-"
                lines.append(f"| {name} ({r['cells']:,}) | {frac:.0%} | {r['t_rows']:.2f} | {BATCH_ROWS / r['t_rows']:,.0f} | "
                             f"{r['peak'] / 2**20:.0f} | {per:.1f} ({per / r['t_rows']:.0f}x) | {ve:.1f} ({ve / r['t_rows']:.0f}x, "
                             f"{r['n_ve']} rows) | {ag_t} | {r['err_rows']:.1e} / {r['err_per']:.1e} / {ag_e} |")
                print(lines[-1], flush=True)
                if frac == BATCH_FRACTIONS[1]:
                    notes.append(f"{name}: " + "; ".join(f"{k}: " + (f"{v[0] * 1e3:.0f} ms a row ({v[1]})" if v[0] is not None else v[1])
                                                        for k, v in r["pp"].items()))
    run = subprocess.run([sys.executable, __file__, "--part", "million"], capture_output=True, text=True, check=True)
    m = json.loads(run.stdout.strip().splitlines()[-1])
    lines += [
        "",
        "pgmpy 1.1.2's `predict_probability` on 20 rows (30% kept; it takes every column as evidence): " + " | ".join(notes) + ".",
        "",
        f"{m['n']:,} rows of ALARM (30% kept), in a subprocess: {m['seconds']:.1f} s ({m['n'] / m['seconds']:,.0f} rows/s); "
        f"peak RSS {m['rss_peak'] / 2**20:,.0f} MB, of which {m['rss_before'] / 2**20:,.0f} MB before the query (Python, "
        f"pgmpy, the sampled rows; the DataFrame itself {m['data_bytes'] / 2**20:,.0f} MB); the answer "
        f"{m['out_bytes'] / 2**20:,.0f} MB; rows sum to one within {m['sums']:.0e}. Rows are answered "
        "65,536 at a time, so the working memory does not grow with the rows.",
    ]
    write_section("inference-batch", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--part", choices=["all", "classic", "batch", "million"], default="all")
    ap.add_argument("--agrum", default=AGRUM_PYTHON, help="a Python with pyagrum, pandas and numpy (skipped when absent)")
    args = ap.parse_args()
    if args.part == "million":
        print(json.dumps(_million(int(os.environ.get("BENCH_MILLION_ROWS", 1_000_000)))))
    else:
        if args.part in ("all", "classic"):
            main(args.repeats)
        if args.part in ("all", "batch"):
            batch(args.agrum)
