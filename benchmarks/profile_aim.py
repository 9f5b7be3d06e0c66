"""Where an AIM release's time goes: Fisher products, calibrations and seconds per phase.

One seeded release (``aim_release(..., estimator="rounds", seed=...)``) on bench_aim's data, then CGM-EM's
final fit from its rounds' model (as ``aim_release`` does), each phase counted: the rounds' refits (all of
them, and those on junction trees above a million cells), and CGM-EM's pilot, naive-weight rule, naive
start, iteration rule and EM loop. The counts do not depend on the machine's load; the seconds do (run it
alone). ``--zero-start`` starts each round's measured table at zero instead of at its proportional-fitting
update (the engine before it), for a paired comparison on the same release noise.

    python benchmarks/profile_aim.py --dataset adult --rho 0.5 --workload 2 [--seed 0] [--zero-start] [--no-fit]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_aim  # noqa: E402

from ppgm.adapters import aim_release  # noqa: E402
from ppgm.inference.junction_tree import JunctionTree  # noqa: E402
from ppgm.learners import cgm  # noqa: E402
from ppgm.synthesis import aim  # noqa: E402

COUNTS = {"products": 0, "calibrations": 0}


def _count_tree_work() -> None:
    """Count every Fisher product and calibration on a junction tree (wrapping the two methods)."""
    fisher, calibrate = JunctionTree.fisher, JunctionTree.calibrate_flat

    def counted_fisher(self, beliefs):
        product = fisher(self, beliefs)

        def apply(v):
            COUNTS["products"] += 1
            return product(v)
        return apply

    def counted_calibrate(self, *args, **kwargs):
        COUNTS["calibrations"] += 1
        return calibrate(self, *args, **kwargs)

    JunctionTree.fisher, JunctionTree.calibrate_flat = counted_fisher, counted_calibrate


class Phase:
    """Seconds, products and calibrations spent inside a wrapped callable, summed over its calls."""

    def __init__(self, owner, name: str, label: str):
        self.label, self.seconds, self.products, self.calibrations, self.calls = label, 0.0, 0, 0, 0
        inner = getattr(owner, name)

        def wrapped(*args, **kwargs):
            before, t0 = dict(COUNTS), time.perf_counter()
            out = inner(*args, **kwargs)
            self.seconds += time.perf_counter() - t0
            self.products += COUNTS["products"] - before["products"]
            self.calibrations += COUNTS["calibrations"] - before["calibrations"]
            self.calls += 1
            return out
        setattr(owner, name, wrapped)

    def line(self) -> str:
        return f"| {self.label} | {self.calls} | {self.products:,} | {self.calibrations:,} | {self.seconds:.1f} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="adult", choices=list(bench_aim.DATASETS))
    ap.add_argument("--rho", type=float, default=0.5)
    ap.add_argument("--workload", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--zero-start", action="store_true", help="round refits start the measured table at zero")
    ap.add_argument("--no-fit", action="store_true", help="profile the rounds only")
    args = ap.parse_args()
    _count_tree_work()
    refit_call = aim._Refit.__call__
    big: dict = {"products": 0, "rounds": 0}

    def refit(self, ms, n, previous, final=False, known=None):
        before = COUNTS["products"]
        out = refit_call(self, ms, n, previous, final, None if args.zero_start else known)
        if out[2].cells > 1_000_000:
            big["rounds"] += 1
            big["products"] += COUNTS["products"] - before
        return out
    aim._Refit.__call__ = refit
    rounds = Phase(aim._Refit, "__call__", "rounds' refits")
    fit = [Phase(cgm.Pilot, "of", "CGM-EM pilot"), Phase(cgm, "release_l2", "naive-weight rule"),
           Phase(cgm, "naive_mle", "naive start"), Phase(cgm, "release_iterations", "iteration rule"),
           Phase(cgm, "_em_loop", "EM loop")]
    codes, states = bench_aim.DATASETS[args.dataset][1]()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    rel = aim_release(codes, states, rho=args.rho, workload=args.workload, estimator="rounds", progress=False, seed=args.seed)
    select = time.perf_counter() - t0
    print(f"{bench_aim.DATASETS[args.dataset][0]}, rho {args.rho:g}, {args.workload}-way, seed {args.seed}"
          f"{', zero-start refits' if args.zero_start else ''}: {len(rel.selected)} rounds, final tree "
          f"{rel.history[-1]['cells']:,} cells, selection {select:.1f} s; the {big['rounds']} refits on trees above a "
          f"million cells took {big['products']:,} products\n")
    print("| phase | calls | Fisher products | calibrations | seconds |\n| --- | --- | --- | --- | --- |")
    print(rounds.line())
    if not args.no_fit:
        ms = aim._measurements(rel.tables.measurements())
        t0 = time.perf_counter()
        cgm.cgm_em(rel.tables.domain, ms, N=cgm.population_size(ms), seed=0, progress=False, warm_start=rel.fit.model)
        for phase in fit:
            print(phase.line())
        print(f"| CGM-EM fit in all | 1 | | | {time.perf_counter() - t0:.1f} |")


if __name__ == "__main__":
    main()
