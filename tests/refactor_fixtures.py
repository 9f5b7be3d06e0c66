"""Outputs of the engine's long algorithms on fixed seeds, checked by tests/test_refactor_fixtures.py
whenever the code is reorganised: integers exactly, floats to a stated tolerance (the last bits of a float
sum depend on the BLAS kernel, the processor and the library versions, so no two machines need agree
bit for bit; within one process the same seed must give the same bytes, which the test checks too).

    python tests/refactor_fixtures.py     # rewrites tests/fixtures/refactor_outputs.npz

Re-record only when an output is meant to change, and say why in the commit.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

PATH = Path(__file__).with_name("fixtures") / "refactor_outputs.npz"


def compute() -> dict:
    from ppgm import contingency_tables, infer, loopy_belief_propagation, sample
    from ppgm.learners.aggregates import aggregate_records
    from ppgm.learners.cgm import cgm_em, naive_mle
    from ppgm.learners.maxent import fit_maxent
    from ppgm.privacy.mechanisms import LaplaceMechanism
    from ppgm.models.random_models import erdos_renyi, random_bayesian_network, third_order_chain
    from ppgm.learners.robust_filter import filter_known_topology

    out = {}
    warnings.simplefilter("ignore")
    # CGM-EM and the naive MLE on a small chain (seeded discrete Laplace release)
    truth = third_order_chain(6, 3, seed=0)
    rng = np.random.default_rng(1)
    tabs = contingency_tables(sample(truth, 5000, seed=rng), truth.domain, truth.scopes)
    ys = LaplaceMechanism(0.5).release(tabs, seed=rng)
    em = cgm_em(truth.domain, ys, max_iter=5, progress=False, stop="converged", init_l2="calibrated")
    out["cgm_theta"] = np.concatenate([f.values.ravel() for f in em.model.factors])
    out["cgm_objective"] = np.array([h["objective"] for h in em.history])
    out["naive_theta"] = np.concatenate([f.values.ravel() for f in naive_mle(truth.domain, ys, l2="calibrated").model.factors])
    # weighted contingency tables in chunks
    rec = sample(truth, 3000, seed=2)
    w = np.random.default_rng(3).random(3000)
    out["tables_weighted"] = np.concatenate([t.values.ravel() for t in contingency_tables(rec, truth.domain, truth.scopes, weights=w, chunk_size=700)])
    # loopy BP on an Erdos-Renyi graph
    er = erdos_renyi(7, 3, p=0.5, seed=4)
    lbp = loopy_belief_propagation(er, damping=0.3)
    out["loopy_beliefs"] = np.concatenate([b.values.ravel() for b in lbp.factor_log_beliefs] + [np.ravel(b) for b in lbp.variable_log_beliefs])
    out["loopy_history"] = np.array(lbp.history)
    out["loopy_log_z"] = np.array([lbp.log_z])
    # MaxEnt PCD with two shards
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, size=(3000, 3))
    y = (rng.random(3000) < 0.2 + 0.25 * x[:, 0]).astype(int)
    from ppgm import Domain

    dom = Domain(("a", "b", "c"), (3, 3, 3))
    agg = aggregate_records(x, y, dom, [("a",), ("b",), ("c",), ("a", "b"), ("b", "c")])
    fit = fit_maxent(agg, dom, n_chains=600, max_iter=25, n_shards=2, seed=6, progress=False, method="pcd")
    out["maxent_mu"], out["maxent_theta"] = fit.model.mu, fit.model.theta
    out["maxent_theta0"] = np.array([fit.model.theta0])
    out["maxent_chains"] = fit.state.chains
    # the eigenvector filter, every mode
    bn = random_bayesian_network(7, 3, seed=7)
    rec = sample(bn, 4000, seed=8)
    bad = np.random.default_rng(9).random(4000) < 0.1
    rec[bad] = 0
    for mode in ("single_pass", "iterative", "paper"):
        res = filter_known_topology(rec, bn.domain, bn.parents, 0.1, mode=mode, seed=10, progress=False)
        out[f"filter_{mode}_eigenvalues"] = np.array([h["eigenvalue"] for h in res.history])
        out[f"filter_{mode}_removed"] = np.array([h["removed"] for h in res.history])
        out[f"filter_{mode}_mask"] = res.inlier_mask
        out[f"filter_{mode}_cpts"] = np.concatenate([res.model.cpts[v].ravel() for v in bn.domain.variables])
    out["marginals"] = np.concatenate([f.values.ravel() for f in infer(truth).factor_marginals()])
    return out


if __name__ == "__main__":
    PATH.parent.mkdir(exist_ok=True)
    np.savez_compressed(PATH, **compute())
    print("wrote", PATH)
