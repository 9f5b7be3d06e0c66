"""Dask scale-out on a LocalCluster with 2 worker processes: the same results as the in-memory path."""

import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")

from ppgm import total_variation  # noqa: E402
from ppgm.adapters import (  # noqa: E402
    MaxEntClassifier,
    aggregate,
    bayes_from_pgmpy,
    contingency_tables,
    filter_dask,
    load_adult,
    load_bif_example,
    sample_partitions,
)
from ppgm.adapters.dask_backend import DaskBlocks  # noqa: E402
from ppgm.core.executor import BlockLost  # noqa: E402
from ppgm.learners.robust_filter import filter_known_topology  # noqa: E402


pytestmark = pytest.mark.xdist_group("dask")  # one worker, one LocalCluster for the module
# a killed worker's nanny restarts it; on a loaded two-core machine that took over 60 s once (the test then
# failed waiting, not on what it checks)
WORKER_RESTART_S = 240


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_tables_and_aggregates_match_the_in_memory_path(client):
    asia = load_bif_example("asia")
    ddf = sample_partitions(asia, 20_000, 5, seed=0)
    df = ddf.compute()
    cliques = [("smoke", "lung"), ("either",), ("xray", "dysp", "either")]
    ours, ref = contingency_tables(ddf, cliques), contingency_tables(df, cliques)
    for a, b in zip(ours, ref):
        assert a.state_names == b.state_names
        np.testing.assert_array_equal(a.values, b.values)
    train, _ = load_adult()
    adult = dd.from_pandas(train, npartitions=4)
    agg_d, agg_m = aggregate(adult, label="income"), aggregate(train, label="income")
    assert agg_d.features == agg_m.features and agg_d.n == agg_m.n
    for f in agg_m.features:
        assert agg_d.encoders[f].states == agg_m.encoders[f].states
    for a, b in zip(agg_d, agg_m):
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.label_sums, b.label_sums)


def test_sampling_in_partitions_is_seeded():
    asia = load_bif_example("asia")
    a = sample_partitions(asia, 3000, 3, seed=7, codes=True).compute(scheduler="sync")
    b = sample_partitions(asia, 3000, 3, seed=7, codes=True).compute(scheduler="sync")
    assert a.shape == (3000, 8)
    np.testing.assert_array_equal(a, b)


def test_pcd_shards_on_workers_equal_the_in_memory_shards(client):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 4000), "b": rng.integers(0, 2, 4000)})
    df["y"] = (rng.random(4000) < 0.2 + 0.2 * df["a"]).astype(int)
    agg = aggregate(df, label="y")
    kw = dict(n_chains=3000, max_iter=15, progress=False, n_shards=2, seed=3, method="pcd")
    local = MaxEntClassifier(**kw).fit(agg)
    remote = MaxEntClassifier(client=client, **kw).fit(agg)
    np.testing.assert_array_equal(local.model_.theta, remote.model_.theta)
    np.testing.assert_array_equal(local.state_.chains, remote.state_.chains)
    one = MaxEntClassifier(**dict(kw, n_shards=1)).fit(agg)
    assert not np.array_equal(one.model_.theta, local.model_.theta)  # the sharding is part of the seed


def test_filter_on_partitions_matches_the_in_memory_filter(client):
    asia = load_bif_example("asia")
    bn = bayes_from_pgmpy(asia)
    rec = sample_partitions(asia, 40_000, 4, seed=1, codes=True).compute(scheduler="sync")
    bad = np.random.default_rng(2).random(len(rec)) < 0.1
    rec[bad] = 0  # the adversary writes the first state everywhere
    darr = da.from_array(rec, chunks=(10_000, -1))
    res_d = filter_dask(darr, bn.domain, bn.parents, 0.1, mode="iterative", rounds=2, seed=0, client=client, progress=False)
    res_m = filter_known_topology(rec, bn.domain, bn.parents, 0.1, mode="iterative", rounds=2, seed=0, progress=False,
                                  block_rows=10_000)
    # the same blocks give the same answer, bit for bit: one algorithm, two executors
    np.testing.assert_array_equal(res_d.inlier_mask.compute(), res_m.inlier_mask)
    assert [h["eigenvalue"] for h in res_d.history] == [h["eigenvalue"] for h in res_m.history]
    for v in bn.domain.variables:
        np.testing.assert_array_equal(res_d.model.cpts[v], res_m.model.cpts[v])
    one_block = filter_known_topology(rec, bn.domain, bn.parents, 0.1, mode="iterative", rounds=2, seed=0, progress=False)
    assert total_variation(res_d.model, one_block.model, method="exact") < 1e-3


def test_a_killed_worker_is_recovered_by_dask(client):
    asia = load_bif_example("asia")
    ddf = sample_partitions(asia, 60_000, 12, seed=4)
    ref = contingency_tables(ddf.compute(scheduler="sync"), [("smoke", "bronc")])[0].values
    pids = list(client.run(os.getpid).values())

    def kill_one():
        time.sleep(0.3)
        os.kill(pids[0], 9)

    threading.Thread(target=kill_one).start()
    got = contingency_tables(ddf, [("smoke", "bronc")])[0].values
    np.testing.assert_array_equal(got, ref)
    client.wait_for_workers(2, timeout=WORKER_RESTART_S)


def test_pcd_survives_a_killed_worker_or_names_the_lost_shards(client):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 4000), "b": rng.integers(0, 2, 4000)})
    df["y"] = (rng.random(4000) < 0.2 + 0.2 * df["a"]).astype(int)
    agg = aggregate(df, label="y")
    kw = dict(n_chains=3000, max_iter=40, progress=False, n_shards=2, seed=3)
    local = MaxEntClassifier(**kw).fit(agg)
    pids = list(client.run(os.getpid).values())

    def kill_one():
        time.sleep(0.5)
        os.kill(pids[0], 9)

    threading.Thread(target=kill_one).start()
    try:  # Dask recomputes lost shards from their lineage; if it cannot, the error names them
        remote = MaxEntClassifier(client=client, **kw).fit(agg)
        np.testing.assert_array_equal(local.model_.theta, remote.model_.theta)
    except BlockLost as err:
        assert "PCD chain shards" in str(err)
    client.wait_for_workers(2, timeout=WORKER_RESTART_S)


def _forget(client, futures):
    """Cancel ``futures`` and wait until the scheduler has forgotten their keys (cancel is asynchronous)."""
    keys = [f.key for f in futures]
    client.cancel(futures)
    for _ in range(400):
        if not client.run_on_scheduler(lambda dask_scheduler: any(k in dask_scheduler.tasks for k in keys)):
            return
        time.sleep(0.05)
    raise AssertionError("the scheduler did not forget the cancelled keys within 20 s")


def test_lost_blocks_raise_a_clear_error_not_a_cancelled_future(client):
    import dask

    # scattered data has no lineage: once forgotten it cannot be recomputed, so the loss is certain
    scattered = client.scatter([np.arange(3), np.arange(4)])
    blocks = DaskBlocks([dask.delayed(f) for f in scattered], "test blocks", client)
    _forget(client, scattered)
    with pytest.raises(BlockLost, match="test blocks: a block was lost"):
        blocks.collect()


def test_lost_blocks_with_lineage_are_recomputed_or_named(client):
    import dask

    blocks = DaskBlocks([dask.delayed(np.arange)(3), dask.delayed(np.arange)(4)], "test blocks", client).persist()
    _forget(client, [f for p in blocks.parts for f in p.__dask_graph__().values() if isinstance(f, distributed.Future)])
    try:  # Dask may recompute from the persisted graph's lineage: then the values are right
        got = blocks.collect()
        assert [g.tolist() for g in got] == [[0, 1, 2], [0, 1, 2, 3]]
    except BlockLost as err:
        assert "test blocks: a block was lost" in str(err)


def test_missing_value_em_on_partitions_matches_the_in_memory_fit(client):
    from pgmpy.models import DiscreteBayesianNetwork

    from ppgm.adapters import MarkovNetworkEstimator, MissingValuesEM, dirichlet_chain_network, kl_divergence, sample

    asia = load_bif_example("asia")
    df = sample(asia, 8000, seed=5)
    rng = np.random.default_rng(6)
    for c in df.columns:
        df.loc[rng.random(len(df)) < 0.15, c] = None
    ddf = dd.from_pandas(df, npartitions=4)
    local, remote = DiscreteBayesianNetwork(asia.edges()), DiscreteBayesianNetwork(asia.edges())
    a, b = MissingValuesEM(progress=False), MissingValuesEM(progress=False)
    local.fit(df, estimator=a)
    remote.fit(ddf, estimator=b)  # the partitions stay on the workers; each E-step is a reduction over them
    assert len(a.history_) == len(b.history_)
    assert a.log_likelihood_ == pytest.approx(b.log_likelihood_, rel=1e-9)
    assert kl_divergence(local, remote) < 1e-9
    chain = dirichlet_chain_network(5, 2, seed=0)
    cdf = sample(chain, 4000, seed=1)
    cdf.loc[::7, "X2"] = None
    m_local = MarkovNetworkEstimator(chain).estimate(cdf, progress=False)
    import dask

    with dask.config.set({"dataframe.convert-string": False}):  # keep the integer states as they are
        cpart = dd.from_pandas(cdf, npartitions=3)
    m_remote = MarkovNetworkEstimator(chain).estimate(cpart, progress=False)
    assert kl_divergence(m_local, m_remote) < 1e-9

