"""The map between a model's parameter tables and the cells of one large junction-tree clique, as a
plan of axis sums instead of one sparse matrix entry per (scope, clique cell) pair.

A clique of C cells that homes k scopes costs k C entries as a sparse matrix, and each product reads
them all (with their indices) at random. The marginal of every homed scope can instead be reached by
summing out axes: a scope that lacks the clique's largest variable is read from the table with that
variable summed out (one pass, a table that many times smaller), and the scopes that hold it are
reached the same way among the remaining variables. The transpose (scope tables to clique
log-potentials) runs the same plan backwards with broadcast additions. AIM's models on Adult (one
clique of 1.6 million cells homing several pairs and one-way tables) are where this matters; see
``docs/explain/inference.md``, "Queries".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
from scipy import sparse


@dataclass
class _Node:
    """A table over ``axes`` (positions in the clique's variable order) and what is read from it."""

    axes: tuple
    shape: tuple
    leaves: list = field(default_factory=list)  # (scope axes, param start, param stop): scopes over exactly these axes
    children: list = field(default_factory=list)  # (axes of this node summed out, child node)
    # compiled (CliqueReduction): either one sparse map for the whole subtree, or the steps to each child
    matrix: tuple | None = None  # (parameter positions, M: positions x cells, M transposed)
    ops: list = field(default_factory=list)  # per child: (axis_steps onto it, child)
    leaf_ops: list = field(default_factory=list)  # (start, stop, scope shape, to scope order, to node order)


def _plan(axes: tuple, shape: dict, scopes: list) -> _Node:
    """Plan the sums that reach each of ``scopes`` (``(axes, start, stop)``, axes a subset of ``axes``)."""
    node = _Node(axes, tuple(shape[a] for a in axes))
    rest: list = []
    for t in scopes:
        (node.leaves if set(t[0]) == set(axes) else rest).append(t)
    while rest:
        used = set().union(*(set(s) for s, _, _ in rest))
        if used != set(axes):  # sum out what no remaining scope needs, once
            kept = tuple(a for a in axes if a in used)
            node.children.append((tuple(i for i, a in enumerate(axes) if a not in used), _plan(kept, shape, rest)))
            break
        # every axis is needed by some scope: split on the largest axis that some scope lacks
        v = max((a for a in axes if any(a not in s for s, _, _ in rest)), key=lambda a: (shape[a], -axes.index(a)))
        lacking = [t for t in rest if v not in t[0]]
        node.children.append(((axes.index(v),), _plan(tuple(a for a in axes if a != v), shape, lacking)))
        rest = [t for t in rest if v in t[0]]
    return node


def _subtree_leaves(node: _Node) -> list:
    return list(node.leaves) + [t for _, c in node.children for t in _subtree_leaves(c)]


COLLAPSE_ENTRIES = 65_536  # a subtree whose table times its scopes is at most this is one sparse product


def _compile(node: _Node) -> None:
    """Fix each step's shapes (no shape arithmetic per product) and turn small subtrees into one sparse map."""
    size = int(np.prod(node.shape))
    leaves = _subtree_leaves(node)
    if size * len(leaves) <= COLLAPSE_ENTRIES:
        coords = np.indices(node.shape).reshape(len(node.axes), -1)
        rows, idx, top = [], [], 0
        for s_axes, start, stop in leaves:
            sub = [coords[node.axes.index(a)] for a in s_axes]
            rows.append(top + (np.ravel_multi_index(sub, [node.shape[node.axes.index(a)] for a in s_axes]) if s_axes
                               else np.zeros(size, dtype=np.intp)))
            idx.append(np.arange(start, stop))
            top += stop - start
        M = sparse.csr_matrix((np.ones(size * len(leaves)), (np.concatenate(rows), np.tile(np.arange(size), len(leaves)))),
                              shape=(top, size))
        node.matrix = (np.concatenate(idx).astype(np.intp), M, M.T.tocsr())
        return
    for s_axes, start, stop in node.leaves:
        perm = tuple(node.axes.index(a) for a in s_axes)
        node.leaf_ops.append((start, stop, tuple(node.shape[i] for i in perm), perm, tuple(np.argsort(perm))))
    for summed, child in node.children:
        _compile(child)
        node.ops.append((axis_steps(node.shape, summed), child))


class CliqueReduction:
    """Scope tables <-> the flat cells of one clique, by the planned axis sums.

    Parameters
    ----------
    clique_shape : tuple of int
        The clique's table shape (its variables in the tree's order).
    scopes : sequence of (tuple of int, int, int)
        Per homed scope: its variables as positions in the clique (in the scope's own order) and its
        slice ``[start, stop)`` of the flat parameter vector (C order over the scope's variables).

    Examples
    --------
    >>> red = CliqueReduction((2, 3), [((1,), 0, 3), ((1, 0), 3, 9)])
    >>> y = np.arange(6.0)
    >>> out = np.zeros(9); red.add_to_params(y, out); out.tolist()
    [3.0, 5.0, 7.0, 0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    >>> red.to_cells(np.ones(9)).tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    """

    def __init__(self, clique_shape: Sequence[int], scopes: Sequence[tuple]):
        self.shape = tuple(int(k) for k in clique_shape)
        axes = tuple(range(len(self.shape)))
        self.root = _plan(axes, dict(zip(axes, self.shape)), [(tuple(s), int(a), int(b)) for s, a, b in scopes])
        _compile(self.root)

    def add_to_params(self, y: np.ndarray, out: np.ndarray) -> None:
        """Add each homed scope's sums of the clique cells ``y`` (flat) into its slice of ``out``."""
        self._down(self.root, np.asarray(y).reshape(self.shape), out)

    def _down(self, node: _Node, t: np.ndarray, out: np.ndarray) -> None:
        if node.matrix is not None:
            idx, M, _ = node.matrix
            out[idx] += M @ t.reshape(-1)
            return
        for start, stop, _, perm, _ in node.leaf_ops:
            out[start:stop] += t.transpose(perm).ravel()
        for steps, child in node.ops:
            self._down(child, sum_steps(t, steps), out)

    def to_cells(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The clique's flat cells: each cell sums the parameters of the homed scopes' cells it lies in
        (written into ``out``, a flat slice of the clique's size, when given)."""
        if out is None:
            return np.ascontiguousarray(self._up(self.root, x)).reshape(-1)
        self._up(self.root, x, out.reshape(self.shape))
        return out

    def _up(self, node: _Node, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The node's table from the parameters; at the root, accumulated in the caller's ``out`` (its
        first term written there, the others added in place: no table-sized temporaries kept)."""
        if node.matrix is not None:
            idx, _, Mt = node.matrix
            t = (Mt @ x[idx]).reshape(node.shape)
            if out is None:
                return t
            np.copyto(out, t)
            return out
        t = None
        for start, stop, sshape, _, back in node.leaf_ops:
            leaf = x[start:stop].reshape(sshape).transpose(back)
            if t is None:
                t = leaf.copy() if out is None else _put(out, leaf)
            else:
                t += leaf
        for steps, child in node.ops:
            small = self._up(child, x)
            if t is None:
                t = spread_steps(small, steps, node.shape, out)
                if not t.flags.writeable:  # a broadcast view (a summed axis of one state): a table of its own
                    t = t.copy()
            else:
                t += spread_steps(small, steps, node.shape)
        if t is None:
            return np.zeros(node.shape) if out is None else _put(out, 0.0)
        return t


def _put(out: np.ndarray, value) -> np.ndarray:
    np.copyto(out, value)
    return out


SMALL_INNER = 16  # below this many cells after the summed axis, a sum is one matrix product (BLAS) with 0/1 blocks


def _sum_out(t: np.ndarray, A: int, K: int, B: int, small: tuple) -> np.ndarray:
    """``t`` (viewed as A x K x B) summed over K, by a matrix product when the axis is outermost or its
    inner block is short (numpy's reduction loops over short inner blocks one at a time: 12 ms
    against 1.5 ms on 1.6 million cells with a trailing axis of 2)."""
    if A == 1:
        return (_ones(K) @ t.reshape(K, B)).reshape(small)
    if B <= SMALL_INNER:
        return (t.reshape(A, K * B) @ _blocks(K, B)).reshape(small)
    return np.einsum("akb->ab", t.reshape(A, K, B)).reshape(small)


def _spread(c: np.ndarray, A: int, K: int, B: int, big: tuple, out: np.ndarray | None = None) -> np.ndarray:
    """The adjoint of :func:`_sum_out`: ``c`` (A x B) repeated K times along the middle axis (written into
    ``out``, a C-contiguous array of ``big``'s size, when given)."""
    if B <= SMALL_INNER and A > 1:
        if out is None:
            return (c.reshape(A, B) @ _blocks(K, B).T).reshape(big)
        np.matmul(c.reshape(A, B), _blocks(K, B).T, out=out.reshape(A, K * B))
        return out.reshape(big)
    if out is None:
        return np.broadcast_to(c.reshape(A, 1, B), (A, K, B)).reshape(big)
    np.copyto(out.reshape(A, K, B), c.reshape(A, 1, B))
    return out.reshape(big)


_BLOCKS: dict = {}


@lru_cache(maxsize=256)
def _ones(k: int) -> np.ndarray:
    """A read-only vector of k ones (the sum over one outermost axis, as a product)."""
    out = np.ones(k)
    out.flags.writeable = False
    return out


def _blocks(k: int, b: int) -> np.ndarray:
    """k identity blocks of size b stacked (k b x b): the sum over an axis of k with inner block b."""
    if (k, b) not in _BLOCKS:
        _BLOCKS[(k, b)] = np.tile(np.eye(b), (k, 1))
    return _BLOCKS[(k, b)]


def axis_steps(shape: Sequence[int], axes: Sequence[int]) -> tuple:
    """The single-axis sums that take a table of ``shape`` to its sum over ``axes``, outermost axis first
    (the cheapest pass shrinks the table first): per step ``(A, K, B, shape after, shape before)``, the
    table viewed as A x K x B and summed over K. Remembered per shape and axes (the tree's passes ask
    for the same few thousands of times).

    Examples
    --------
    >>> axis_steps((2, 3, 4), (0, 2))
    ((1, 2, 12, (3, 4), (2, 3, 4)), (3, 4, 1, (3,), (3, 4)))
    """
    return _axis_steps(tuple(int(k) for k in shape), tuple(sorted(int(a) for a in axes)))


@lru_cache(maxsize=8192)
def _axis_steps(shape: tuple, axes: tuple) -> tuple:
    steps, cur = [], shape
    for i, axis in enumerate(axes):
        a = axis - i
        small = cur[:a] + cur[a + 1:]
        steps.append((math.prod(cur[:a]), cur[a], math.prod(cur[a + 1:]), small, cur))
        cur = small
    return tuple(steps)


def sum_steps(t: np.ndarray, steps: Sequence) -> np.ndarray:
    """``t`` summed by :func:`axis_steps`' steps (:func:`_sum_out` each)."""
    for A, K, B, small, _ in steps:
        t = _sum_out(t, A, K, B, small)
    return t


def spread_steps(c: np.ndarray, steps: Sequence, shape: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    """The adjoint of :func:`sum_steps`: ``c`` (the summed table, any layout of its cells) repeated back to
    ``shape`` along the summed axes, the steps in reverse (:func:`_spread` each); the last step written
    into ``out`` (C-contiguous, ``shape``'s size) when given."""
    t = np.asarray(c).reshape(steps[-1][3] if steps else tuple(shape))
    for k, (A, K, B, _, big) in enumerate(reversed(steps)):
        t = _spread(t, A, K, B, big, out if k == len(steps) - 1 else None)
    if out is not None and not steps:
        np.copyto(out.reshape(t.shape), t)
        return out.reshape(t.shape)
    return t


def sum_axes(t: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """``t.sum(axis=axes)`` by :func:`_sum_out` steps, outermost axis first (the same sums; faster when
    an axis has a short inner block, as a clique's trailing binary variables give).

    Examples
    --------
    >>> t = np.arange(24.0).reshape(2, 3, 4)
    >>> bool(np.allclose(sum_axes(t, (0, 2)), t.sum(axis=(0, 2))))
    True
    """
    return sum_steps(t, axis_steps(t.shape, axes))


@lru_cache(maxsize=4096)
def sum_plan(shape: tuple, keep: tuple) -> Callable[[np.ndarray], np.ndarray]:
    """A function summing a C-ordered array of ``shape`` onto the axes ``keep`` (distinct; the result's
    axes in ``keep``'s order), planned once per shape and axes: each run of adjacent summed axes is
    viewed as one axis and summed by one :func:`_sum_out` step (a product with ones, BLAS's speed),
    then the kept axes are put in ``keep``'s order. A 10^4-cell clique summed onto a pair: 2-4 us,
    against 5-19 us for one einsum over the table.

    Examples
    --------
    >>> t = np.arange(24.0).reshape(2, 3, 4)
    >>> bool(np.allclose(sum_plan((2, 3, 4), (2, 0))(t), t.sum(axis=1).T))
    True
    """
    merged: list = []  # the shape with each run of summed axes as one axis
    summed: list = []  # positions of the merged summed axes
    for k, n in enumerate(shape):
        if k not in keep and k > 0 and (k - 1) not in keep:
            merged[-1] *= int(n)
        else:
            if k not in keep:
                summed.append(len(merged))
            merged.append(int(n))
    steps = axis_steps(merged, summed)
    kept = sorted(keep)
    order = [kept.index(k) for k in keep]
    reorder = order != list(range(len(keep)))
    view = tuple(merged)

    def run(values: np.ndarray) -> np.ndarray:
        out = sum_steps(values.reshape(view), steps)
        return out.transpose(order) if reorder else out

    return run


def spread_axes(m: np.ndarray, shape: Sequence[int], axes: Sequence[int]) -> np.ndarray:
    """``m`` (``shape`` without ``axes``) repeated along ``axes`` to ``shape``: the adjoint of
    :func:`sum_axes`, materialised by BLAS steps where a broadcast would loop over short inner blocks
    (a broadcast view elsewhere).

    Examples
    --------
    >>> m = np.arange(3.0)
    >>> spread_axes(m, (2, 3, 2), (0, 2)).shape, bool((spread_axes(m, (2, 3, 2), (0, 2))[1, :, 0] == m).all())
    ((2, 3, 2), True)
    """
    return spread_steps(m, axis_steps(shape, axes), shape)
