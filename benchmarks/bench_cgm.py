"""CGM-EM against naive MLE, the non-private MLE and the peer private-pgm (PyPI `mbi`) on the CGM
paper's synthetic models (Bernstein et al. 2017, Sec. 4.1).

Models: T = 10 variables with 10 states; third-order chains (edge i-j iff 1 <= |i-j| <= 3) and
connected Erdos-Renyi graphs (p = 0.3); edge tables Dirichlet(1). Laplace release of all edge tables
at epsilon (L1 sensitivity = number of tables), N known to every method. Metrics: exact
KL(true || learned) in nats, mean edge-marginal total variation, wall time.

Regularisation and stopping, fixed for all cells:
  non-private MLE  exact tables / N, l2 = 1/N, L-BFGS to gradient 1e-7 (at most 1000 iterations)
  naive MLE        simplex-projected y / N, l2 = 1/N, same stopping
  CGM-EM           defaults: noise-aware l2 (0.1/N .. 1/N, ppgm.cgm.noise_aware_l2) in the M-step, dual E-step (L-BFGS-B, gradient 1e-9 relative to N,
                   at most 500 iterations, warm-started), 100 M-step iterations, 30 EM iterations
                   (or marginal change < 1e-6). Looser E-steps (50 iterations, 1e-7) are 3x faster but
                   lose badly at N = 1e6, eps = 0.1 (KL 1.19 instead of 0.08).
  mbi              MirrorDescent, 1000 iterations, l2 loss with the Laplace noise's standard deviation

mbi is not a ppgm dependency: run this in an environment with both, e.g.
  python -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install -e . mbi
  /tmp/benchvenv/bin/python benchmarks/bench_cgm.py [--quick]
Without mbi the script runs the other rows and says so.
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

from ppgm import Factor, MarkovNetwork, contingency_tables, infer, kl_divergence, sample  # noqa: E402
from ppgm.cgm import cgm_em, naive_mle  # noqa: E402
from ppgm.mechanisms import LaplaceMechanism  # noqa: E402
from ppgm.mle import fit_marginals  # noqa: E402
from ppgm.random_models import erdos_renyi, third_order_chain  # noqa: E402

try:
    import jax

    jax.config.update("jax_enable_x64", True)
    import mbi
except ImportError:  # pragma: no cover
    mbi = None


def edge_tv(truth_marg, model) -> float:
    got = infer(model).factor_marginals()
    return float(np.mean([0.5 * np.abs(a.values - b.values).sum() for a, b in zip(truth_marg, got)]))


def run_mbi(truth, ys, N):
    dom = mbi.Domain(list(truth.domain.variables), list(truth.domain.cards))
    meas = [mbi.LinearMeasurement(y.values.ravel(), y.variables, stddev=float(np.sqrt(y.variance))) for y in ys]
    model = mbi.estimation.MirrorDescent().estimate(dom, meas, known_total=float(N), iters=1000)
    factors = []
    for clique in model.potentials.cliques:
        f = model.potentials[clique]
        factors.append(Factor(tuple(f.domain.attributes), np.asarray(f.values, dtype=float)))
    return MarkovNetwork(truth.domain, factors)


def main(quick: bool) -> None:
    Ns = [10_000, 100_000, 1_000_000]
    epsilons = [0.1, 1.0] if quick else [0.1, 0.5, 1.0]
    graphs = [("chain", third_order_chain)] + ([] if quick else [("ER p=0.3", lambda **k: erdos_renyi(p=0.3, **k))])
    rows = []
    for g_index, (gname, make) in enumerate(graphs):
        for N in Ns:
            for eps in epsilons:
                truth = make(n_vars=10, k=10, seed=2017)
                truth_marg = infer(truth).factor_marginals()
                rng = np.random.default_rng([g_index, N, int(round(eps * 1000))])  # reproducible per cell
                x = sample(truth, N, seed=rng)
                tabs = contingency_tables(x, truth.domain, truth.scopes)
                ys = LaplaceMechanism(eps).release(tabs, seed=rng)
                res = {}
                t0 = time.perf_counter()
                m = fit_marginals(truth.domain, [Factor(t.variables, t.values / N) for t in tabs], l2=1 / N, tol=1e-7).model
                res["non-private MLE"] = (m, time.perf_counter() - t0)
                t0 = time.perf_counter()
                res["naive MLE"] = (naive_mle(truth.domain, ys, N=N).model, time.perf_counter() - t0)
                t0 = time.perf_counter()
                res["CGM-EM"] = (cgm_em(truth.domain, ys, N=N, max_iter=30, progress=False).model, time.perf_counter() - t0)
                if mbi is not None:
                    t0 = time.perf_counter()
                    res["mbi MirrorDescent"] = (run_mbi(truth, ys, N), time.perf_counter() - t0)
                row = {"graph": gname, "N": N, "eps": eps}
                for name, (model, t) in res.items():
                    row[name] = (kl_divergence(truth, model), edge_tv(truth_marg, model), t)
                rows.append(row)
                print(row, flush=True)
    methods = ["non-private MLE", "naive MLE", "CGM-EM"] + (["mbi MirrorDescent"] if mbi is not None else [])
    lines = ["## CGM-EM (`benchmarks/bench_cgm.py`)", "",
             f"Machine: {machine()}. One population and one noise draw per cell (not yet averaged over seeds). "
             "Each entry: exact KL(true || learned) in nats / mean edge-marginal TV / time. "
             + ("" if mbi is not None else "mbi was not installed for this run. "),
             "", "| graph | N | eps | " + " | ".join(methods) + " |", "| --- " * (3 + len(methods)) + "|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['N']:,} | {r['eps']} | "
                     + " | ".join(f"{r[m][0]:.3g} / {r[m][1]:.3f} / {r[m][2]:.1f} s" for m in methods) + " |")
    write_section("cgm", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="chains only, eps in {0.1, 1}")
    main(ap.parse_args().quick)
