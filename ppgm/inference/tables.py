"""Contingency tables (sufficient statistics) from integer-coded records."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..core import checks
from ..core.executor import Blocks, add_all
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..factors.records import cell_index, check_records


def contingency_tables(
    records,
    domain: Domain,
    scopes: Sequence[Sequence],
    weights=None,
    chunk_size: int = 1_000_000,
) -> list[Factor]:
    """Count table of every scope, by one ``bincount`` per scope and chunk.

    Parameters
    ----------
    records : array of shape (N, len(domain)), an iterable of such arrays, or Blocks
        Integer state codes, columns in ``domain`` order. An iterable of chunks (for instance a
        generator reading a file piece by piece) is consumed once, so data larger than memory works.
        Blocks (``ppgm.core.executor``; e.g. Dask partitions) are counted where they live and summed.
    domain : Domain
    scopes : sequence of variable tuples
        The cliques to count.
    weights : array of shape (N,), or an iterable of arrays matching the chunks, optional
        Per-record weights (non-negative, finite). Counts are then float sums of weights.
    chunk_size : int
        Records processed at once when ``records`` is a single array.

    Returns
    -------
    list of Factor
        One table per scope, axes in the scope's order; int64 without weights, float with them.

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> contingency_tables([[0, 1], [1, 1], [0, 1]], d, [("B", "A")])[0].values.tolist()
    [[0, 0], [2, 1]]
    """
    scopes = [tuple(domain.check(s, f"scopes[{i}]")) for i, s in enumerate(scopes)]
    if chunk_size < 1:
        raise ValueError(f"chunk_size: expected a positive integer, got {chunk_size}")
    if isinstance(records, Blocks):
        if weights is not None:
            raise ValueError("weights: not supported for blocks of records; count weighted blocks yourself")
        totals = records.reduce(count_block, domain=domain, scopes=scopes)
    else:
        totals = None
        for rec, w in _chunks(records, weights, chunk_size):
            totals = add_all(totals, count_block(rec, domain, scopes, w))  # type: ignore[arg-type]
    if totals is None:
        raise ValueError("records: no records to count (empty data)")
    return [Factor(tuple(s), t.reshape(domain.shape(s))) for s, t in zip(scopes, totals)]


def count_block(block, domain: Domain, scopes: Sequence[tuple], weights=None) -> list[np.ndarray] | None:
    """Flat count (or weight) tables of ``scopes`` over one block of records (an array of codes or a
    :class:`ppgm.core.executor.RecordBlock`); ``None`` for an empty block, so that it adds nothing.

    Examples
    --------
    >>> count_block(np.array([[0, 1], [1, 1]]), Domain(("A", "B"), (2, 2)), [("B",)])[0].tolist()
    [0, 2]
    """
    rec = check_records(getattr(block, "codes", block), domain)
    if rec.shape[0] == 0:
        return None
    if weights is not None:
        weights = checks.weights(weights, rec.shape[0])
    out = []
    for scope in scopes:
        shape = domain.shape(scope)
        n = int(np.prod(shape, dtype=np.int64))
        counts = np.bincount(cell_index(rec, domain.indices(scope), shape), weights=weights, minlength=n)
        out.append(counts.astype(float if weights is not None else np.int64, copy=False))
    return out


def _chunks(records, weights, chunk_size: int) -> Iterable[tuple]:
    """Pair record chunks with their weight chunks."""
    if isinstance(records, np.ndarray) or (isinstance(records, (list, tuple)) and _is_table(records)):
        arr = np.asarray(records)
        w = None if weights is None else checks.weights(weights, arr.shape[0] if arr.ndim >= 1 else None)
        if arr.ndim != 2:
            yield arr, w  # check_records raises the shape error
            return
        for start in range(0, max(arr.shape[0], 1), chunk_size):
            yield arr[start : start + chunk_size], None if w is None else w[start : start + chunk_size]
        return
    witer = iter(weights) if weights is not None else None
    for chunk in records:
        yield chunk, None if witer is None else next(witer)


def _is_table(obj) -> bool:
    """A list of rows (not a list of chunks)."""
    return len(obj) == 0 or np.ndim(obj[0]) == 1
