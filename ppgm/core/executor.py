"""Where data-parallel work runs: one protocol, an in-process implementation here, Dask's at the boundary.

The algorithms that touch every record (contingency tables, aggregates, the eigenvector filter's
statistics) or every persistent chain (PCD's shards) are written once against :class:`Blocks`: a
sequence of blocks that live somewhere, with

* ``map(fn, *others, **kwargs)``: new blocks ``fn(block, *other_blocks, **kwargs)``, computed where
  the blocks live;
* ``reduce(fn, *others, combine=add_all, **kwargs)``: ``fn`` per block, the parts combined in a
  fixed tree (groups of :data:`FAN_IN`, left to right) and returned to the caller;
* ``persist()``: keep the blocks computed (they are used again), ``collect()``: bring them back.

:class:`LocalBlocks` (this module) holds a list. ``ppgm.adapters``' Dask blocks hold delayed values
on a cluster and implement the same four methods; they contain no algorithm. Because both combine
in the same tree, the same blocks give bit-identical results in memory and on Dask.

An :class:`Executor` makes blocks from items it is given (``scatter``), for state that starts on the
caller's side, such as PCD's chain shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

FAN_IN = 8


class BlockLost(RuntimeError):
    """A block's data was lost (its worker died) and could not be recomputed.

    Examples
    --------
    >>> raise BlockLost("PCD chain shards: a block was lost with its worker")
    Traceback (most recent call last):
    ...
    ppgm.core.executor.BlockLost: PCD chain shards: a block was lost with its worker
    """


@runtime_checkable
class Blocks(Protocol):
    """Blocks of data or state that live with an executor (see the module docstring)."""

    def map(self, fn: Callable, *others: "Blocks", **kwargs) -> "Blocks": ...

    def reduce(self, fn: Callable, *others: "Blocks", combine: Callable | None = None, **kwargs) -> Any: ...

    def persist(self) -> "Blocks": ...

    def collect(self) -> list: ...

    def __len__(self) -> int: ...


class Executor(Protocol):
    """Makes :class:`Blocks` from items held by the caller."""

    def scatter(self, items: Sequence, what: str = "blocks") -> Blocks: ...


def add_all(*parts):
    """Element-wise sum of parts that are arrays, numbers, or tuples / lists of them (``None`` parts,
    from empty blocks, are skipped). Sums left to right from 0, as Python's ``sum``.

    Examples
    --------
    >>> add_all((np.array([1, 2]), 3.0), (np.array([10, 20]), 0.5))
    (array([11, 22]), 3.5)
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    first = parts[0]
    if isinstance(first, (tuple, list)):
        return type(first)(add_all(*items) for items in zip(*parts))
    return sum(parts)


def tree_reduce(parts: list, combine: Callable, submit: Callable | None = None):
    """Combine ``parts`` in groups of :data:`FAN_IN`, level by level, left to right. ``submit(f, *args)``
    runs a combination (default: call it); Dask passes a delayed wrapper, so the tree is the same.

    Examples
    --------
    >>> tree_reduce(list(range(20)), lambda *xs: sum(xs))
    190
    """
    if not parts:
        raise ValueError("parts: nothing to reduce")
    call = submit if submit is not None else (lambda f, *args: f(*args))
    while len(parts) > 1:
        parts = [call(combine, *parts[i : i + FAN_IN]) for i in range(0, len(parts), FAN_IN)]
    return parts[0]


@dataclass
class LocalBlocks:
    """Blocks held in this process, as a list.

    Parameters
    ----------
    items : list
        The blocks.

    Examples
    --------
    >>> b = LocalBlocks([np.arange(3), np.arange(3, 5)])
    >>> int(b.map(lambda x, k: x * k, k=2).reduce(lambda x: x.sum()))
    20
    """

    items: list

    def map(self, fn: Callable, *others: Blocks, **kwargs) -> "LocalBlocks":
        """New blocks ``fn(block, *other_blocks, **kwargs)``.

        Parameters
        ----------
        fn : callable
        *others : LocalBlocks
            Paired with these blocks, block by block.
        **kwargs
            Passed to ``fn``.

        Returns
        -------
        LocalBlocks

        Examples
        --------
        >>> LocalBlocks([1, 2]).map(lambda x, k: x * k, k=3).items
        [3, 6]
        """
        lists = [_items(o, len(self.items)) for o in others]
        return LocalBlocks([fn(x, *(o[i] for o in lists), **kwargs) for i, x in enumerate(self.items)])

    def reduce(self, fn: Callable, *others: Blocks, combine: Callable | None = None, **kwargs):
        """``fn`` per block, the parts combined in the fixed tree (groups of :data:`FAN_IN`).

        Parameters
        ----------
        fn : callable
        *others : LocalBlocks
        combine : callable, optional
            Default :func:`add_all`.
        **kwargs

        Returns
        -------
        object
            The combined result.

        Examples
        --------
        >>> LocalBlocks([1, 2, 3]).reduce(lambda x: x * x)
        14
        """
        return tree_reduce(self.map(fn, *others, **kwargs).items, combine or add_all)

    def persist(self) -> "LocalBlocks":
        """Keep the blocks computed (in process they already are).

        Returns
        -------
        LocalBlocks

        Examples
        --------
        >>> b = LocalBlocks([1]); b.persist() is b
        True
        """
        return self

    def collect(self) -> list:
        """The blocks, brought back as a list.

        Returns
        -------
        list

        Examples
        --------
        >>> LocalBlocks([1, 2]).collect()
        [1, 2]
        """
        return list(self.items)

    def __len__(self) -> int:
        return len(self.items)


def _items(blocks: Blocks, n: int) -> list:
    if not isinstance(blocks, LocalBlocks):
        raise TypeError(f"blocks: expected in-process blocks to go with in-process blocks, got {type(blocks).__name__}")
    if len(blocks) != n:
        raise ValueError(f"blocks: expected {n} blocks to pair with, got {len(blocks)}")
    return blocks.items


class InProcess:
    """The engine's executor: blocks are lists in this process.

    Examples
    --------
    >>> InProcess().scatter([1, 2, 3]).reduce(lambda x: x * x)
    14
    """

    def scatter(self, items: Sequence, what: str = "blocks") -> LocalBlocks:
        """Blocks from items held by the caller (here: a list in this process).

        Parameters
        ----------
        items : sequence
        what : str
            What the blocks are (for messages about lost work).

        Returns
        -------
        LocalBlocks

        Examples
        --------
        >>> len(InProcess().scatter(["a", "b"]))
        2
        """
        return LocalBlocks(list(items))


@dataclass(frozen=True)
class RecordBlock:
    """A block of integer-coded records and the index of its first record in the whole data set.

    Parameters
    ----------
    start : int
    codes : numpy.ndarray

    Examples
    --------
    >>> len(RecordBlock(100, np.zeros((5, 3), dtype=int)))
    5
    """

    start: int
    codes: np.ndarray

    def __len__(self) -> int:
        return int(self.codes.shape[0])


def record_blocks(records: np.ndarray, block_rows: int | None = None) -> LocalBlocks:
    """``records`` as in-process :class:`RecordBlock` s of at most ``block_rows`` rows (default: one block).

    Parameters
    ----------
    records : numpy.ndarray, shape (N, d)
    block_rows : int, optional

    Returns
    -------
    LocalBlocks

    Examples
    --------
    >>> [len(b) for b in record_blocks(np.zeros((10, 2), int), block_rows=4).items]
    [4, 4, 2]
    """
    n = records.shape[0]
    step = n if not block_rows else int(block_rows)
    if step < 1 and n:
        raise ValueError(f"block_rows: expected a positive number of rows, got {block_rows!r}")
    starts = range(0, n, step) if n else [0]
    return LocalBlocks([RecordBlock(s, records[s : s + step]) for s in starts])
