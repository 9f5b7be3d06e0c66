"""Where an AIM release's time goes: Fisher products, calibrations and seconds per phase.

One seeded release (``aim_release(..., estimator="rounds", seed=...)``) on bench_aim's data, then CGM-EM's
final fit from its rounds' model (as ``aim_release`` does), each phase counted: the rounds' refits (all of
them, and those on junction trees above a million cells), and CGM-EM's pilot, naive-weight rule, naive
start, iteration rule and EM loop. The counts do not depend on the machine's load; the seconds do (run it
alone). ``--zero-start`` starts each round's measured table at zero instead of at its proportional-fitting
update (the engine before it), for a paired comparison on the same release noise. ``--kernels`` times the two
tree passes every phase is made of, on the rounds' final junction tree: one Fisher product and one calibration
(medians), and two of each run one after the other against two at once on two threads (BLAS at one thread):
what running the rules' independent refits side by side could gain on this machine. ``--orders`` compares the final tree's
cells with the tree of the best elimination order (every order searched, :func:`best_order_cells`): whether a
smaller tree, and so cheaper passes, was to be had.

    python benchmarks/profile_aim.py --dataset adult --rho 0.5 --workload 2 [--seed 0] [--zero-start] [--no-fit] [--kernels] [--orders]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))
import bench_aim  # noqa: E402

from ppgm.adapters import aim_release  # noqa: E402
from ppgm.inference.junction_tree import JunctionTree  # noqa: E402
from ppgm.learners import cgm  # noqa: E402
from ppgm.learners.mle import MarginalOracle  # noqa: E402
from ppgm.synthesis import aim  # noqa: E402

COUNTS = {"products": 0, "calibrations": 0}


def _count_tree_work() -> None:
    """Count every Fisher product and calibration on a junction tree (wrapping the two methods)."""
    fisher, calibrate = JunctionTree.fisher, JunctionTree.calibrate_flat

    def counted_fisher(self, beliefs, **options):
        product = fisher(self, beliefs, **options)

        def apply(v, **kwargs):
            COUNTS["products"] += 1
            return product(v, **kwargs)
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


def _median_ms(fn, repeats: int = 7) -> float:
    fn()  # warm: plans and buffers
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def kernels(model) -> None:
    """Median milliseconds of one Fisher product and one calibration on ``model``'s junction tree, and of two
    of each one after the other against two at once on two threads."""
    oracle = MarginalOracle(model.domain, [tuple(f.variables) for f in model.factors])
    x = oracle.params.join([f.values for f in model.factors])
    product = oracle.fisher(x, oracle.flat(x)[1])
    rng = np.random.default_rng(0)
    vs = [rng.normal(size=oracle.params.size) for _ in range(2)]
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(2) as pool:
        rows = [("Fisher product", lambda: product(vs[0]), lambda: [product(v) for v in vs],
                 lambda: list(pool.map(product, vs))),
                ("calibration", lambda: oracle.flat(x), lambda: [oracle.flat(x) for _ in vs],
                 lambda: list(pool.map(lambda _: oracle.flat(x), vs)))]
        print(f"\nOn the final tree ({oracle.tree.cells:,} cells), median ms:\n\n"
              "| pass | one | two in turn | two on two threads | gain |\n| --- | --- | --- | --- | --- |")
        for name, one, turn, threads in rows:
            a, b, c = _median_ms(one), _median_ms(turn), _median_ms(threads)
            print(f"| {name} | {a:.1f} | {b:.1f} | {c:.1f} | {b / c:.2f}x |")


def _tree_cells(cards: list, adjacency: list, order: list) -> int:
    """Cells of the junction tree that eliminating in ``order`` gives: its maximal elimination cliques' tables."""
    adj = [set(a) for a in adjacency]
    cliques = []
    for v in order:
        cliques.append(frozenset(adj[v] | {v}))
        for a in adj[v]:
            adj[a] |= adj[v] - {a}
            adj[a].discard(v)
    kept: list = []
    for c in sorted(set(cliques), key=len, reverse=True):
        if not any(c <= k for k in kept):
            kept.append(c)
    return sum(int(np.prod([cards[v] for v in c])) for c in kept)


def best_order_cells(domain, scopes) -> tuple[int, float]:
    """The junction-tree cells of the elimination order whose elimination cliques hold the fewest cells in all,
    found by dynamic programming over the sets of variables eliminated (2^d states: a few seconds on Adult's 15
    variables, two minutes on CHILD's 20), and that smallest sum. Eliminating v after the set S makes the clique of
    v and the variables outside S that v reaches through S, whatever order S was eliminated in."""
    d, cards = len(domain.variables), list(domain.cards)
    index = {v: i for i, v in enumerate(domain.variables)}
    adjacency: list = [set() for _ in range(d)]
    for s in scopes:
        for a in s:
            adjacency[index[a]] |= {index[b] for b in s if b != a}
    masks = [sum(1 << b for b in a) for a in adjacency]

    def clique_cells(S: int, v: int) -> int:
        seen, stack, out = 1 << v, [v], 1 << v
        while stack:
            new = masks[stack.pop()] & ~seen
            seen |= new
            out |= new & ~S
            inner = new & S
            while inner:
                low = inner & -inner
                stack.append(low.bit_length() - 1)
                inner ^= low
        return int(np.prod([cards[u] for u in range(d) if out >> u & 1]))

    best = np.full(1 << d, np.inf)
    last = np.zeros(1 << d, dtype=np.int64)
    best[0] = 0.0
    for S in range(1 << d):  # every subset after its own subsets (increasing integers)
        for v in range(d):
            if not S >> v & 1:
                cost = best[S] + clique_cells(S, v)
                if cost < best[S | 1 << v]:
                    best[S | 1 << v], last[S | 1 << v] = cost, v
    order, S = [], (1 << d) - 1
    while S:
        order.append(int(last[S]))
        S &= ~(1 << int(last[S]))
    return _tree_cells(cards, adjacency, order[::-1]), float(best[-1])


def orders(model) -> None:
    """Min-fill's tree for ``model``'s scopes against the best elimination order's."""
    scopes = [tuple(f.variables) for f in model.factors]
    t0 = time.perf_counter()
    cells, summed = best_order_cells(model.domain, scopes)
    print(f"\nElimination orders ({len(model.domain.variables)} variables): min-fill's tree "
          f"{JunctionTree.build(model.domain, scopes).cells:,} cells; the best order's {cells:,} (its elimination "
          f"cliques {summed:,.0f} cells in all; searched in {time.perf_counter() - t0:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="adult", choices=list(bench_aim.DATASETS))
    ap.add_argument("--rho", type=float, default=0.5)
    ap.add_argument("--workload", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--zero-start", action="store_true", help="round refits start the measured table at zero")
    ap.add_argument("--no-fit", action="store_true", help="profile the rounds only")
    ap.add_argument("--kernels", action="store_true", help="time one product and one calibration on the final tree, "
                    "alone and two on two threads")
    ap.add_argument("--orders", action="store_true", help="compare the final tree with the best elimination order's")
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
    if args.kernels:
        kernels(rel.fit.model)
    if args.orders:
        orders(rel.fit.model)


if __name__ == "__main__":
    main()
