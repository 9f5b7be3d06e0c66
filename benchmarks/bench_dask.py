"""Dask scale-out against the in-memory path: time and the client process's peak memory.

Each configuration runs in its own Python process, whose peak resident memory (ru_maxrss of the
process itself; Dask's workers are separate processes and are not counted) is reported with its
wall time. The Dask runs use a LocalCluster of 2 worker processes (1 thread each) on this 2-core
machine, so they show bounded client memory rather than speed.

Experiments
  tables   ALARM (37 variables) sampled in partitions of 1M rows, its 37 family tables counted:
           5M, 10M and 20M rows on Dask; 5M and 20M in memory (sample, then count)
  filter   the eigenvector filter (single pass) on 5M ALARM rows of which 10% are replaced by
           rows with every variable in its first state: Dask (rows sampled on the workers, never
           collected) vs in memory
  pcd      MaxEnt on Adult's aggregates with 2 chain shards: in memory vs shards on the 2 workers

Run: python benchmarks/bench_dask.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _results import machine, write_section  # noqa: E402

warnings.filterwarnings("ignore")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(kind: str, where: str, n: int) -> dict:
    """Run one configuration in this process (called in a child process)."""
    import numpy as np

    from ppgm.adapters import bayes_from_pgmpy, filter_dask, load_bif_example, sample_partitions
    from ppgm.adapters.dask_backend import array_blocks
    from ppgm.learners.robust_filter import filter_known_topology
    from ppgm.inference.sampling import sample
    from ppgm.inference.tables import contingency_tables

    alarm = load_bif_example("alarm")
    bn = bayes_from_pgmpy(alarm)
    scopes = [tuple(bn.parents[v]) + (v,) for v in bn.domain.variables]
    parts = max(1, n // 1_000_000)
    base = _peak_mb()
    client = None
    if where == "dask":
        import distributed

        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit="10GiB")
        client = distributed.Client(cluster)
    t0 = time.perf_counter()
    out = {}
    if kind == "tables":
        if where == "dask":
            codes = sample_partitions(alarm, n, parts, seed=0, codes=True)
            tables = [t.values for t in contingency_tables(array_blocks(codes, client), bn.domain, scopes)]
        else:
            codes = np.concatenate([sample(bn, n // parts, seed=s) for s in range(parts)])
            tables = [t.values for t in contingency_tables(codes, bn.domain, scopes)]
        out["total"] = int(tables[0].sum())
    elif kind == "filter":
        import dask
        import dask.array as da

        def corrupt(block, seed):
            block = block.copy()
            block[np.random.default_rng(seed).random(len(block)) < 0.1] = 0
            return block

        if where == "dask":
            codes = sample_partitions(alarm, n, parts, seed=0, codes=True)
            blocks = [da.from_delayed(dask.delayed(corrupt)(b, i), shape=(c, len(bn.domain)), dtype=np.int64)
                      for i, (b, c) in enumerate(zip(codes.to_delayed().ravel(), codes.chunks[0]))]
            res = filter_dask(da.concatenate(blocks), bn.domain, bn.parents, 0.1, mode="single_pass", seed=0, client=client, progress=False)
            out["removed"] = res.history[0]["removed"]
        else:
            codes = sample_partitions(alarm, n, parts, seed=0, codes=True)
            rec = np.concatenate([corrupt(b.compute(scheduler="sync"), i) for i, b in enumerate(codes.to_delayed().ravel())])
            res = filter_known_topology(rec, bn.domain, bn.parents, 0.1, mode="single_pass", seed=0, progress=False)
            out["removed"] = res.history[0]["removed"]
        out["eigenvalue"] = res.history[0]["eigenvalue"]
    elif kind == "pcd":
        from ppgm.adapters import MaxEntClassifier, aggregate, load_adult

        train, test = load_adult()
        agg = aggregate(train, label="income")
        clf = MaxEntClassifier(progress=False, n_shards=2, client=client, max_iter=n).fit(agg)
        out["nllh"] = round(clf.score(test), 4)
    out["seconds"] = time.perf_counter() - t0
    out["client_peak_mb"] = _peak_mb()
    out["baseline_mb"] = base
    if client is not None:
        client.close()
        cluster.close()
    return out


def child(kind, where, n) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", kind, where, str(n)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", nargs=3)
    args = ap.parse_args(argv)
    if args.child:
        kind, where, n = args.child
        print(json.dumps(run_one(kind, where, int(n))))
        return
    sizes = [2_000_000, 4_000_000] if args.quick else [5_000_000, 10_000_000, 20_000_000]
    rows = ["| experiment | rows | path | time (s) | client peak RSS (MB) | result |", "|---|---|---|---|---|---|"]
    for n in sizes:
        r = child("tables", "dask", n)
        rows.append(f"| tables | {n:,} | Dask, 2 workers | {r['seconds']:.1f} | {r['client_peak_mb']:.0f} | {r['total']:,} records counted |")
    for n in (sizes[0], sizes[-1]):
        r = child("tables", "memory", n)
        rows.append(f"| tables | {n:,} | in memory | {r['seconds']:.1f} | {r['client_peak_mb']:.0f} | {r['total']:,} records counted |")
    nf = sizes[0]
    for where, label in (("dask", "Dask, 2 workers"), ("memory", "in memory")):
        r = child("filter", where, nf)
        rows.append(f"| filter (single pass) | {nf:,} | {label} | {r['seconds']:.1f} | {r['client_peak_mb']:.0f} | removed {r['removed']:,}, eigenvalue {r['eigenvalue']:.4f} |")
    steps = 100 if args.quick else 300
    for where, label in (("memory", "in memory, 2 shards"), ("dask", "Dask, 2 shards on 2 workers")):
        r = child("pcd", where, steps)
        rows.append(f"| PCD MaxEnt, Adult | {steps} steps | {label} | {r['seconds']:.1f} | {r['client_peak_mb']:.0f} | test NLLH {r['nllh']} |")
    text = (
        f"## Dask scale-out\n\n`python benchmarks/bench_dask.py{' --quick' if args.quick else ''}` on {machine()}. "
        "Each row is a fresh process; the client's peak RSS includes about 250 MB of imports.\n\n" + "\n".join(rows)
    )
    print(text)
    write_section("dask", text)


if __name__ == "__main__":
    main()
