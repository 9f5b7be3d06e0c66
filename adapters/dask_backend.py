"""Scale-out on Dask: the data-parallel parts of ppgm over partitions, with numpy as the default.

Nothing here is imported unless a Dask collection or a ``client`` is passed: users who do not
install Dask (``pip install ppgm[dask]``) never touch it. What runs distributed:

- contingency tables and MaxEnt aggregates from a ``dask.dataframe`` or ``dask.array``: one
  bincount per partition, summed (the same counts as the in-memory path, to the last one);
- the eigenvector filter: per round the conditional probabilities, the Lanczos mat-vecs Z'(Z u),
  the scores and the removal are map-reduces over partitions kept on the workers; the client only
  holds vectors of the parameter dimension;
- PCD MaxEnt: the persistent chains live on the workers in shards; each step sends the parameters
  and gets back each shard's expected statistics (``dask_runner``);
- sampling large synthetic data sets partition by partition.
"""

from __future__ import annotations

import copy
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ppgm.aggregates import aggregate_records, table_scopes
from ppgm.bayes import BayesianNetwork
from ppgm.cpts import CPTLayout, conditional_probabilities
from ppgm.domain import Domain
from ppgm.maxent import ChainShard, shard_step
from ppgm.measurement import Measurement
from ppgm.records import check_records
from ppgm.robust_filter import FilterResult, _centred_matrix, _diagonal_blocks, _top_eigenpair
from ppgm.rng import as_generator
from ppgm.sampling import sample as _engine_sample
from ppgm.tables import contingency_tables as _engine_tables


def is_dask(obj) -> bool:
    """True for Dask collections (DataFrame, Series, Array), without importing Dask."""
    return type(obj).__module__.split(".")[0] in ("dask", "dask_expr")


def _client(client=None):
    from distributed import default_client

    return client if client is not None else default_client()


# --------------------------------------------------------------------------------------------------
# tables and aggregates
def _unique(col) -> list:
    from .data import sorted_states

    return sorted_states(col.dropna().unique().compute())


def infer_domain_dask(ddf, columns: Sequence, state_names: Mapping | None = None) -> Domain:
    """The domain of ``columns`` of a Dask DataFrame: given state names, else the sorted values (one
    distributed ``unique`` per column; the values, not the rows, come back)."""
    names = dict(state_names or {})
    states = {c: list(names[c]) if c in names else _unique(ddf[c]) for c in columns}
    empty = [c for c in columns if not states[c]]
    if empty:
        raise ValueError(f"data: columns {empty} have no values to take states from")
    return Domain(tuple(columns), tuple(len(states[c]) for c in columns), states)


def _partition_tables(part: pd.DataFrame, dom: Domain, cliques) -> list:
    from .data import encode

    if len(part) == 0:
        return [np.zeros(dom.shape(c), np.int64) for c in cliques]
    return [t.values for t in _engine_tables(encode(part, dom), dom, cliques)]


def _sum_lists(*lists):
    """Element-wise sum of lists of arrays (``None`` for an empty partition is skipped)."""
    lists = [x for x in lists if x is not None]
    return [sum(parts) for parts in zip(*lists)] if lists else None


def tables_dask(ddf, cliques: Sequence[Sequence], state_names: Mapping | None = None, domain: Domain | None = None) -> tuple[Domain, list]:
    """Count table of every clique from a Dask DataFrame, or from a Dask array of integer codes
    (columns in ``domain`` order): per-partition bincounts, summed by a tree reduction on the
    workers. Returns the domain and the tables (numpy arrays).

    Examples
    --------
    >>> import dask.array as da
    >>> d = Domain(("a", "b"), (2, 2))
    >>> codes = da.from_array(np.array([[0, 1], [1, 1], [0, 1]]), chunks=(2, 2))
    >>> tables_dask(codes, [("a",)], domain=d)[1][0].tolist()
    [2, 1]
    """
    import dask

    cliques = [tuple(c) for c in cliques]
    if hasattr(ddf, "columns"):
        columns = list(dict.fromkeys(v for c in cliques for v in c))
        missing = [v for v in columns if v not in ddf.columns]
        if missing:
            raise ValueError(f"cliques: columns {missing} are not in the data; it has {list(ddf.columns)}")
        dom = infer_domain_dask(ddf, columns, state_names)
        parts = [dask.delayed(_partition_tables)(p, dom, cliques) for p in ddf.to_delayed()]
    else:
        dom = domain
        if dom is None:
            raise ValueError("domain: a Dask array of integer codes needs its Domain")
        blocks = ddf.rechunk({1: -1}).to_delayed().ravel()
        parts = [dask.delayed(lambda b: [t.values for t in _engine_tables(b, dom, cliques)])(b) for b in blocks]
    while len(parts) > 1:  # pairwise tree reduction: the client never holds more than the tables
        parts = [dask.delayed(_sum_lists)(*parts[i : i + 8]) for i in range(0, len(parts), 8)]
    return dom, list(dask.compute(parts[0])[0])


def _encoder_from_summary(ddf, name: str, bins: int):
    from .aggregated import FeatureEncoder

    col = ddf[name]
    return FeatureEncoder.from_summary(
        name, col.dtype, bool(col.isna().any().compute()), bins, int(col.nunique().compute()),
        lambda: (float(col.min().compute()), float(col.max().compute())), lambda: _unique(col),
    )


def _partition_aggregate(part, agg, scopes, hash_size, hash_seed, spec):
    if len(part) == 0:
        return None
    codes, y = agg.encode(part), agg.labels(part)
    keep = spec.known_rows(codes, part, list(agg.features))
    if not keep.any():
        return None
    tables = aggregate_records(codes[keep], y[keep], agg.domain, scopes, hash_size, hash_seed)
    return [a for t in tables for a in (t.values, t.label_sums)]


def aggregate_dask(ddf, features, label, pairs, spec, hash_size, mechanism, seed, positive, accountant, publish_n):
    """:func:`ppgm.adapters.aggregate` for a Dask DataFrame: public encoders, or encoders fitted from
    distributed summaries (min, max, unique values), then counts and label sums per partition, summed."""
    import dask

    from .aggregated import Aggregates, _feature_list, _positive_label, _with_tables

    from ppgm.mechanisms import noise_generator

    features = _feature_list(ddf.columns, features, label)
    if spec.quantile_epsilon is not None:
        raise ValueError("quantile_epsilon: private quantiles need the column in memory; on Dask pass bin_edges= or bounds=")
    positive = _positive_label(ddf[label], label, positive, private=mechanism is not None)
    rng = noise_generator(seed) if mechanism is not None else np.random.default_rng(seed)
    encoders, _ = spec.encoders(features, rng, fit=lambda f: _encoder_from_summary(ddf, f, spec.bins), column=None)
    agg = Aggregates(tuple(features), label, positive, encoders, [])
    hash_seed = int((rng or np.random.default_rng()).integers(1 << 31)) if hash_size is not None else 0
    scopes = table_scopes(features, pairs)
    parts = [dask.delayed(_partition_aggregate)(p, agg, scopes, hash_size, hash_seed, spec) for p in ddf.to_delayed()]
    while len(parts) > 1:
        parts = [dask.delayed(_sum_lists)(*parts[i : i + 8]) for i in range(0, len(parts), 8)]
    summed = dask.compute(parts[0])[0]
    if summed is None:
        raise ValueError("df: the DataFrame has no rows")
    shapes = aggregate_records(np.zeros((1, len(features)), np.int64), [0], agg.domain, scopes, hash_size, hash_seed)
    n = float(summed[0].sum())
    exact = [Measurement(t.variables, d.astype(float), n=n, label_sums=c, buckets=t.buckets)
             for t, d, c in zip(shapes, summed[0::2], summed[1::2])]
    return _with_tables(agg, exact, mechanism, rng, accountant, publish_n)


# --------------------------------------------------------------------------------------------------
# sampling
def sample_partitions(model, n: int, npartitions: int, seed=None, codes: bool = False):
    """``n`` exact samples of a pgmpy (or engine) model as a Dask collection of ``npartitions``
    partitions, each drawn on a worker with its own generator spawned from ``seed`` (same seed, same
    data). ``codes=True`` gives a Dask array of integer codes (columns in domain order), else a Dask
    DataFrame of state names.

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> ddf = sample_partitions(load_bif_example("asia"), 1000, 4, seed=0)
    >>> ddf.npartitions, len(ddf.compute())
    (4, 1000)
    """
    import dask
    import dask.array as da
    import dask.dataframe as dd

    from .data import decode
    from .models import to_engine

    m = to_engine(model)
    if int(npartitions) < 1 or int(n) < int(npartitions):
        raise ValueError(f"npartitions: expected 1 .. n, got {npartitions!r}")
    sizes = np.diff(np.linspace(0, int(n), int(npartitions) + 1).round().astype(int))
    seeds = np.random.SeedSequence(as_generator(seed).integers(1 << 63)).spawn(len(sizes))
    d = len(m.domain)
    if codes:
        blocks = [da.from_delayed(dask.delayed(_engine_sample)(m, int(k), np.random.default_rng(s)), shape=(int(k), d), dtype=np.int64)
                  for k, s in zip(sizes, seeds)]
        return da.concatenate(blocks, axis=0)
    meta = decode(np.zeros((1, d), np.int64), m.domain).iloc[:0]  # the dtypes decode really produces
    return dd.from_delayed([dask.delayed(lambda k, s: decode(_engine_sample(m, k, np.random.default_rng(s)), m.domain))(int(k), s)
                            for k, s in zip(sizes, seeds)], meta=meta)


# --------------------------------------------------------------------------------------------------
# PCD: chains sharded across workers
class DaskChains:
    """PCD runner whose chain shards live on Dask workers (see :func:`ppgm.maxent.fit_maxent`).

    Each step submits one task per shard (the shard's previous state stays where it is; only the
    parameters travel) and gathers each shard's sums. The result is the in-memory result with the
    same sharding: every shard owns its generator.
    """

    def __init__(self, shards: list, layout, client=None) -> None:
        self.client = _client(client)
        self.layout = self.client.scatter(layout, broadcast=True)
        self.futures = [self.client.scatter(s) for s in shards]
        self.steps = 0

    def step(self, mu, theta, theta0) -> list:
        client = self.client
        mu_f, th_f = client.scatter(mu, broadcast=True), client.scatter(theta, broadcast=True)
        done = [client.submit(_remote_step, f, self.layout, mu_f, th_f, float(theta0), pure=False) for f in self.futures]
        self.futures = [client.submit(_first, d) for d in done]
        try:
            stats = client.gather([client.submit(_second, d) for d in done])
        except Exception as exc:  # a worker holding chains died and their history is gone
            raise RuntimeError(
                f"PCD on Dask: a shard of chains could not be stepped at step {self.steps + 1} ({type(exc).__name__}: {exc}); "
                "restart the fit (the chains are not checkpointed)"
            ) from exc
        self.steps += 1
        return stats

    def collect(self) -> list:
        return self.client.gather(self.futures)


def _remote_step(shard, layout, mu, theta, theta0):
    own = ChainShard(shard.chains.copy(), copy.deepcopy(shard.rng), None if shard.slots is None else shard.slots.copy())
    return shard_step(own, layout, mu, theta, theta0)


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def dask_runner(client=None):
    """A ``runner`` for :func:`ppgm.maxent.fit_maxent` (and ``MaxEntClassifier(client=...)``) that
    keeps the chains on the workers of ``client`` (default: the current Dask client).

    Examples
    --------
    >>> from distributed import Client
    >>> from ppgm.aggregates import aggregate_records
    >>> from ppgm.maxent import fit_maxent
    >>> d = Domain(("a",), (2,))
    >>> tables = aggregate_records([[0], [1]] * 50, [0, 1] * 50, d, [("a",)])
    >>> with Client(processes=False, dashboard_address=None) as client:
    ...     remote = fit_maxent(tables, d, n_chains=100, max_iter=5, n_shards=2, seed=0, progress=False,
    ...                         runner=dask_runner(client))
    >>> local = fit_maxent(tables, d, n_chains=100, max_iter=5, n_shards=2, seed=0, progress=False)
    >>> bool(np.array_equal(remote.model.theta, local.model.theta))
    True
    """
    return lambda shards, layout: DaskChains(shards, layout, client)


# --------------------------------------------------------------------------------------------------
# the eigenvector filter over partitions
def _blocks_of(records) -> list:
    """Row blocks of a Dask array (all columns in one chunk)."""
    return list(records.rechunk({1: -1}).to_delayed().ravel())


def _part_counts(rec, keep, layout):
    rec = np.asfortranarray(rec)
    cfg = layout.configs(rec)
    return layout.counts(rec, cfg, np.flatnonzero(keep))


def _part_matrix(rec, keep, layout, q):
    rec = np.asfortranarray(rec)
    cfg = layout.configs(rec)
    rows = np.flatnonzero(keep)
    Z, parts = _centred_matrix(rec, cfg, layout, q, rows)
    raw = [B * len(rows) for _, _, _, B in _diagonal_blocks(parts, layout, max(len(rows), 1))]
    return Z, rows, raw


def _gram(zr, u):
    Z = zr[0]
    return Z.T @ (Z @ u)


def _scores(zr, v):
    return np.abs(zr[0] @ v)


def _count_at_least(scores, t):
    return int((scores >= t).sum())


def _count_above(scores, t):
    return int((scores > t).sum())


def _count_equal(scores, t):
    return int((scores == t).sum())


def _update_keep(keep, zr, scores, t, ties_to_drop):
    keep = keep.copy()
    rows = zr[1]
    drop = scores > t
    eq = np.flatnonzero(scores == t)[:ties_to_drop]
    drop[eq] = True
    keep[rows[drop]] = False
    return keep


def _sum(*xs):
    return sum(xs)


def filter_dask(
    records,
    domain: Domain,
    parents: Mapping,
    epsilon: float,
    mode: str = "iterative",
    rounds: int = 4,
    seed=None,
    tol: float = 1e-6,
    client=None,
    progress: bool = True,
) -> FilterResult:
    """:func:`ppgm.robust_filter.filter_known_topology` (modes ``single_pass`` / ``iterative``) on a
    Dask array of integer codes, without collecting the rows on the client.

    Per round: per-partition CPT counts (summed) give q; each partition builds its sparse block of
    Z = F(x, q) - q and keeps it in worker memory; ARPACK's mat-vecs Z'(Z u) are map-reduces; the
    scores |Z v| stay on the workers and the ``epsilon N / rounds`` largest are found by bisection
    on the score (64 small count reductions); ties at the threshold are dropped in partition order
    (the in-memory path breaks them by a seeded shuffle, so the two can differ in which of equal
    scores go). The returned ``inlier_mask`` is a Dask array; ``history`` has one entry per round.

    Examples
    --------
    >>> import dask.array as da
    >>> from distributed import Client
    >>> from ppgm.random_models import random_bayesian_network
    >>> bn = random_bayesian_network(5, 2, seed=0)
    >>> x = da.from_array(_engine_sample(bn, 4000, seed=1), chunks=(1000, -1))
    >>> with Client(processes=False, dashboard_address=None) as client:
    ...     res = filter_dask(x, bn.domain, bn.parents, 0.05, mode="single_pass", seed=0, client=client)
    ...     removed = int((~res.inlier_mask).sum().compute())
    >>> removed, res.history[0]["removed"]
    (200, 200)
    """
    import dask.array as da

    if mode not in ("single_pass", "iterative"):
        raise ValueError(f"mode: the Dask filter supports 'single_pass' and 'iterative', got {mode!r}")
    if not (0 < epsilon < 0.5):
        raise ValueError(f"epsilon: expected a corrupted fraction in (0, 1/2), got {epsilon!r}")
    client = _client(client)
    layout = CPTLayout.build(domain, parents)
    blocks = _blocks_of(records)
    recs = client.compute(blocks)
    recs = [client.submit(check_records, r, domain, pure=False) for r in recs]
    sizes = client.gather([client.submit(len, r) for r in recs])
    N = int(sum(sizes))
    keeps = [client.submit(np.ones, k, dtype=bool, pure=False) for k in sizes]
    layout_f = client.scatter(layout, broadcast=True)
    rng = as_generator(seed)
    n_rounds = 1 if mode == "single_pass" else int(rounds)
    total_drop = int(np.ceil(epsilon * N))
    history = []
    from tqdm.auto import tqdm

    for r in tqdm(range(n_rounds), desc="robust filter (Dask)", disable=not progress, leave=False):
        counts = client.submit(_sum_list, client.map(_part_counts, recs, keeps, layout=layout_f)).result()
        q = conditional_probabilities(counts)
        zr = client.map(_part_matrix, recs, keeps, layout=layout_f, q=q, pure=False)
        n = int(counts[0].sum())  # rows kept: every node's counts add up to them
        raw = client.submit(_sum_list, [client.submit(lambda x: x[2], z) for z in zr]).result()
        nodes = [j for j, k in enumerate(domain.cards) if k > 1]  # _diagonal_blocks skips constant nodes
        blocks_sum = [(layout.base[j], layout.n_configs[j], B.shape[1], B / n) for j, B in zip(nodes, raw)]
        gram = lambda u: client.submit(_sum, *client.map(_gram, zr, u=u, pure=False)).result()
        lam, v = _top_eigenpair(gram, layout.m, blocks_sum, n, rng, tol)
        scores = client.map(_scores, zr, v=v, pure=False)
        n_drop = total_drop * (r + 1) // n_rounds - total_drop * r // n_rounds
        t = _kth_largest(client, scores, n_drop)
        above = sum(client.gather(client.map(_count_above, scores, t=t, pure=False)))
        ties = n_drop - above
        eq = client.gather(client.map(_count_equal, scores, t=t, pure=False))
        take = []
        for e in eq:
            take.append(min(e, ties))
            ties -= take[-1]
        keeps = [client.submit(_update_keep, k, z, s, t, tk, pure=False) for k, z, s, tk in zip(keeps, zr, scores, take)]
        kept = sum(client.gather(client.map(lambda k: int(k.sum()), keeps, pure=False)))
        history.append({"eigenvalue": lam, "kept_before": n, "threshold": float(t), "removed": n - kept, "kept": kept})
        del zr, scores
    counts = client.submit(_sum_list, client.map(_part_counts, recs, keeps, layout=layout_f)).result()
    probs = conditional_probabilities(counts)
    cpts = {v: p.reshape(domain.shape(layout.parents[v]) + (domain.card(v),)) for v, p in zip(domain.variables, probs)}
    mask = da.concatenate([da.from_delayed(k, shape=(s,), dtype=bool) for k, s in zip(keeps, sizes)])
    return FilterResult(BayesianNetwork(domain, layout.parents, cpts), mask, history)


def _sum_list(parts):
    return _sum_lists(*parts)


def _kth_largest(client, scores, k: int) -> float:
    """The k-th largest of all scores (k >= 1), by bisection on the bit patterns of non-negative
    float64 values (monotone in the value): 64 rounds of per-partition counts."""
    if k < 1:
        return float("inf")
    lo, hi = 0, np.float64(np.inf).view(np.int64)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t = np.int64(mid).view(np.float64)
        if sum(client.gather(client.map(_count_at_least, scores, t=float(t), pure=False))) >= k:
            lo = mid
        else:
            hi = mid - 1
    return float(np.int64(lo).view(np.float64))
