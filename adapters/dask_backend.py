"""Dask as one more executor of the engine's algorithms (``ppgm.core.executor``), and nothing else.

:class:`DaskBlocks` implements the engine's ``Blocks`` protocol over Dask delayed values (kept in
worker memory by ``persist`` on a distributed cluster), combining in the engine's own reduction
tree, so the same blocks give bit-identical results here and in memory. The constructors turn a
Dask array or DataFrame into blocks. Every algorithm (tables, aggregates, the filter, PCD) is the
engine's; nothing here is imported unless a Dask collection, a ``client`` or a Dask executor is used.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from ppgm.factors.domain import Domain
from ppgm.core.executor import BlockLost, RecordBlock, add_all, tree_reduce
from ppgm.learners.robust_filter import FilterResult, filter_known_topology

LOST = {"CancelledError", "FutureCancelledError", "FuturesCancelledError", "KilledWorker", "FutureLost", "LostDependency"}


def is_dask(obj) -> bool:
    """True for Dask collections (DataFrame, Series, Array), without importing Dask."""
    return type(obj).__module__.split(".")[0] in ("dask", "dask_expr")


class DaskBlocks:
    """Blocks that live on Dask: a list of delayed values (see ``ppgm.core.executor.Blocks``).

    ``what`` names the work in errors: a block lost with its worker and not recomputable raises
    ``ppgm.core.executor.BlockLost`` naming it, never a raw ``FutureCancelledError``.

    Examples
    --------
    >>> import dask
    >>> b = DaskBlocks([dask.delayed(np.arange(3)), dask.delayed(np.arange(3, 5))], "numbers")
    >>> int(b.map(lambda x, k: x * k, k=2).reduce(lambda x: x.sum()))
    20
    """

    def __init__(self, parts: list, what: str = "blocks", client=None) -> None:
        self.parts, self.what, self.client = list(parts), what, client

    def map(self, fn: Callable, *others: "DaskBlocks", **kwargs) -> "DaskBlocks":
        import dask

        for o in others:
            if not isinstance(o, DaskBlocks) or len(o) != len(self):
                raise ValueError(f"blocks: expected {len(self)} Dask blocks to pair with")
        shared = {k: dask.delayed(v) if isinstance(v, (np.ndarray, list)) else v for k, v in kwargs.items()}
        task = dask.delayed(fn, pure=False)
        parts = [task(p, *(o.parts[i] for o in others), **shared) for i, p in enumerate(self.parts)]
        return DaskBlocks(parts, self.what, self.client)

    def reduce(self, fn: Callable, *others: "DaskBlocks", combine: Callable | None = None, **kwargs):
        import dask

        mapped = self.map(fn, *others, **kwargs).parts
        top = tree_reduce(mapped, combine or add_all, submit=lambda f, *args: dask.delayed(f, pure=False)(*args))
        return self._run("compute", [top])[0]

    def persist(self) -> "DaskBlocks":
        return DaskBlocks(self._run("persist", self.parts), self.what, self.client)

    def collect(self) -> list:
        return self._run("compute", self.parts)

    def __len__(self) -> int:
        return len(self.parts)

    def _run(self, how: str, parts: list) -> list:
        import dask

        try:
            if self.client is not None:
                out = getattr(self.client, how)(parts)
                return list(self.client.gather(out)) if how == "compute" else list(out)
            return list(getattr(dask, how)(*parts))
        except Exception as exc:
            if type(exc).__name__ in LOST or any(type(c).__name__ in LOST for c in _causes(exc)):
                raise BlockLost(
                    f"{self.what}: a block was lost with its worker and could not be recomputed "
                    f"({type(exc).__name__}: {exc}); run again (state held only on the workers is not checkpointed)"
                ) from exc
            raise


def _causes(exc):
    while exc.__cause__ or exc.__context__:
        exc = exc.__cause__ or exc.__context__
        yield exc


class DaskExecutor:
    """The engine's ``Executor`` on Dask: ``scatter`` puts items (e.g. PCD's chain shards) on the
    workers of ``client`` (default: the current client, or Dask's default scheduler without one).

    Examples
    --------
    >>> DaskExecutor().scatter([1, 2, 3], "numbers").reduce(lambda x: x * x)
    14
    """

    def __init__(self, client=None) -> None:
        self.client = client

    def scatter(self, items: Sequence, what: str = "blocks") -> DaskBlocks:
        import dask

        return DaskBlocks([dask.delayed(x) for x in items], what, self.client).persist()


def dask_executor(client=None) -> DaskExecutor:
    """An executor for ``fit_maxent`` / ``MaxEntClassifier(client=...)``: PCD's chain shards live on
    the workers of ``client`` (same result as in memory with the same ``n_shards``).

    Parameters
    ----------
    client : distributed.Client, optional
        Default: Dask's current scheduler.

    Returns
    -------
    DaskExecutor

    Examples
    --------
    >>> from ppgm.learners.aggregates import aggregate_records
    >>> from ppgm.learners.maxent import fit_maxent
    >>> d = Domain(("a",), (2,))
    >>> tables = aggregate_records([[0], [1]] * 50, [0, 1] * 50, d, [("a",)])
    >>> kw = dict(n_chains=100, max_iter=5, n_shards=2, seed=0, progress=False)
    >>> remote = fit_maxent(tables, d, executor=dask_executor(), **kw)
    >>> bool(np.array_equal(remote.model.theta, fit_maxent(tables, d, **kw).model.theta))
    True
    """
    if client is not None and not hasattr(client, "submit"):
        raise TypeError(f"client: expected None (Dask's current scheduler) or a distributed.Client, got {type(client).__name__}")
    return DaskExecutor(client)


def array_blocks(records, client=None) -> DaskBlocks:
    """A Dask array of integer codes (rows = records) as blocks of ``RecordBlock`` (one per row chunk).

    Examples
    --------
    >>> import dask.array as da
    >>> b = array_blocks(da.zeros((10, 2), chunks=(4, 2), dtype=int))
    >>> [(r.start, len(r)) for r in b.collect()]
    [(0, 4), (4, 4), (8, 2)]
    """
    import dask

    arr = records.rechunk({1: -1})
    sizes = arr.chunks[0]
    if any(np.isnan(s) for s in sizes):
        arr = arr.compute_chunk_sizes()
        sizes = arr.chunks[0]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    return DaskBlocks([dask.delayed(RecordBlock)(int(s), p) for s, p in zip(starts, arr.to_delayed().ravel())],
                      "record blocks", client)


def frame_blocks(ddf, fn: Callable, what: str = "partitions", client=None) -> DaskBlocks:
    """``fn(partition)`` for every partition of a Dask DataFrame, as blocks.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd
    >>> b = frame_blocks(dd.from_pandas(pd.DataFrame({"a": range(6)}), npartitions=2), len)
    >>> b.reduce(lambda n: n)
    6
    """
    return DaskBlocks(list(ddf.to_delayed()), what, client).map(fn)


def filter_dask(
    records,
    domain: Domain,
    parents: Mapping,
    epsilon: float,
    client=None,
    **options,
) -> FilterResult:
    """:func:`ppgm.learners.robust_filter.filter_known_topology` on a Dask array of integer codes: the engine's
    filter on the array's row chunks, which stay on the workers (the caller holds vectors of the
    parameter dimension). The same row blocks in memory (``block_rows``) give the same mask. The
    returned ``inlier_mask`` is a Dask array.

    Parameters
    ----------
    records : dask.array.Array of int, shape (N, len(domain))
        Row chunks are the blocks.
    domain : ppgm.Domain
    parents : mapping
    epsilon : float
    client : distributed.Client, optional
    **options
        :func:`ppgm.learners.robust_filter.filter_known_topology`'s options (``mode``, ``rounds``, ``seed``,
        ``tol``, ``progress``, ...), with its defaults: the same filter, another executor.

    Returns
    -------
    ppgm.FilterResult
        ``inlier_mask`` a Dask array of bool.

    Examples
    --------
    >>> import dask.array as da
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> from ppgm.inference.sampling import sample
    >>> bn = random_bayesian_network(5, 2, seed=0)
    >>> x = sample(bn, 4000, seed=1)
    >>> res = filter_dask(da.from_array(x, chunks=(1000, -1)), bn.domain, bn.parents, 0.05, mode="single_pass", seed=0, progress=False)
    >>> mem = filter_known_topology(x, bn.domain, bn.parents, 0.05, mode="single_pass", seed=0, progress=False, block_rows=1000)
    >>> bool((res.inlier_mask.compute() == mem.inlier_mask).all()), res.history[0]["removed"]
    (True, 200)
    """
    import dask.array as da

    if not (is_dask(records) and getattr(records, "ndim", 0) == 2):
        raise TypeError(f"records: expected a 2-D Dask array of integer codes, got {type(records).__name__}"
                        " (for an in-memory array use ppgm.filter_known_topology)")
    if "block_rows" in options:
        raise TypeError("block_rows: the Dask array's row chunks are the blocks; rechunk the array instead")
    res = filter_known_topology(array_blocks(records, client), domain, parents, epsilon, **options)
    masks = res.inlier_blocks.persist()
    sizes = masks.map(len).collect()
    masks = masks.parts
    mask = da.concatenate([da.from_delayed(m, shape=(s,), dtype=bool) for m, s in zip(masks, sizes)]) if masks else None
    return FilterResult(res.model, mask, res.history, res.inlier_blocks)
