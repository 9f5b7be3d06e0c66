import os
import warnings

if os.environ.get("PYTEST_XDIST_WORKER"):
    # A worker is one process per core: OpenBLAS's second thread then waits for a core another process
    # holds (ppgm.core.blas_threads). One BLAS thread per worker: 11% less CPU on the learners' tests
    # (maxent, maxent_rule, cgm, robust_filter, mle, em_rules; 2 workers, 2 busy cores); the README
    # blocks, notebooks and Dask workers the tests start inherit it. A value set by the caller is kept.
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np
import pytest
from hypothesis import strategies as st

from ppgm import Domain, Factor, MarkovNetwork

warnings.filterwarnings("ignore", category=FutureWarning)
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("OPENBLAS_NUM_THREADS") == "1":
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # numpy may have started its BLAS before this file ran


def docs_build():
    """``docs/build.py`` as a module (loaded by path: the name ``build`` is also pypa's package)."""
    import importlib.util
    import sys
    from pathlib import Path

    mod = sys.modules.get("ppgm_docs_build")
    if mod is None:
        spec = importlib.util.spec_from_file_location("ppgm_docs_build", Path(__file__).resolve().parents[1] / "docs" / "build.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["ppgm_docs_build"] = mod
        spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def executed_tutorial(tmp_path_factory):
    """``executed_tutorial(path)``: the tutorial executed in its quick size (``docs/build.py``), once per
    test session; the documentation build and the tutorial tests share the runs."""
    build = docs_build()
    dest = tmp_path_factory.mktemp("executed_tutorials")
    done: dict = {}

    def run(path):
        if path.name not in done:
            done[path.name] = build.execute_tutorial(path, dest)
        return done[path.name]
    return run


def brute_marginal(model, variables):
    """Marginal over `variables` (in that order) by enumerating the joint."""
    J = model.joint_log_table()
    P = np.exp(J - np.logaddexp.reduce(J.ravel()))
    dom = model.domain
    idx = [dom.index(v) for v in variables]
    other = tuple(i for i in range(len(dom)) if i not in idx)
    M = P.sum(axis=other) if other else P
    kept = sorted(idx)
    return np.transpose(M, [kept.index(i) for i in idx])


def brute_log_z(model):
    return float(np.logaddexp.reduce(model.joint_log_table().ravel()))


@st.composite
def small_markov_networks(draw, max_vars=6, max_card=3, max_scope=3, max_factors=7, allow_zeros=True):
    """Random Markov networks small enough to enumerate: loopy graphs, higher-order cliques,
    potentials of any scale, optional hard zeros."""
    n = draw(st.integers(2, max_vars))
    cards = draw(st.lists(st.integers(1, max_card), min_size=n, max_size=n))
    names = tuple(f"V{i}" for i in range(n))
    dom = Domain(names, tuple(cards))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n_factors = draw(st.integers(1, max_factors))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    shift = draw(st.sampled_from([0.0, -300.0, 200.0]))
    factors = []
    for _ in range(n_factors):
        k = int(rng.integers(1, min(max_scope, n) + 1))
        scope = tuple(names[i] for i in rng.choice(n, size=k, replace=False))
        vals = rng.normal(0, scale, dom.shape(scope)) + shift
        if allow_zeros and rng.random() < 0.3 and vals.size > 1:
            vals.ravel()[rng.integers(vals.size)] = -np.inf
        factors.append(Factor(scope, vals))
    m = MarkovNetwork(dom, factors)
    if not np.isfinite(brute_log_z(m)):
        m = MarkovNetwork(dom, [Factor(f.variables, np.where(np.isneginf(f.values), 0.0, f.values)) for f in factors])
    return m


def indicator_moments(model, scopes):
    """The mean and covariance of the cell indicators of ``scopes`` (each table ravelled in C order,
    concatenated) under ``model``, by enumeration of the joint: the marginals and the Fisher information."""
    J = model.joint_log_table()
    p = np.exp(J - np.logaddexp.reduce(J.ravel())).ravel()
    idx = np.indices(model.domain.shape(model.domain.variables)).reshape(len(model.domain), -1)
    feats = []
    for s in scopes:
        sh = model.domain.shape(s)
        cell = np.ravel_multi_index([idx[model.domain.index(v)] for v in s], sh) if s else np.zeros(idx.shape[1], int)
        feats.append(np.eye(int(np.prod(sh)))[cell])
    phi = np.hstack(feats)
    mean = p @ phi
    return mean, (phi * p[:, None]).T @ phi - np.outer(mean, mean)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def laplace_release(truth, N, scale, seed):
    """Continuous Laplace noise of the given scale on every clique table of N records drawn from ``truth``
    (a seeded simulation for the learners' tests, not a private release)."""
    from ppgm import contingency_tables, sample
    from ppgm.models.measurement import Measurement

    rng = np.random.default_rng(seed)
    tabs = contingency_tables(sample(truth, N, seed=rng), truth.domain, truth.scopes)
    return [Measurement(t.variables, t.values + rng.laplace(0, scale, t.shape), "laplace", scale) for t in tabs]
