"""Tied (shared) log-potentials: groups of cliques with the same state spaces that share one table.

A time-homogeneous chain has one pairwise potential for every pair of adjacent steps; a grid with
symmetries, one per direction. With tying the learners optimise the shared tables z, and every
clique's log-potential is a copy of its group's: theta = T z for a sparse 0/1 matrix T (clique cells
x shared cells). The gradient of a likelihood in theta becomes T^T times it, i.e. the group's
statistics summed, which is how the naive MLE pools a group's tables and CGM-EM's M-step sums its
expected counts. Inference and export see ordinary factors (theta).

The L2 penalty is on the free parameters, l2 ||z||^2: a shared table is penalised once, not once per
clique that copies it, so a prior of the same weight holds a tied table as it holds a free one
while the group's pooled statistics weigh m times more. (It was l2 ||T z||^2 at first, the
untied objective restricted to equal tables: it held a group of m cliques m times as hard, and on the
mobility study, 23 tied hours, CGM-EM's M-steps dragged the shared transition table towards uniform
at every iteration. Measured on unreported seeds, 3,000 people, separate Laplace tables, held-out
log-likelihood of tied CGM-EM, old -> new: eps 0.1: -32.0 -> -24.9, eps 0.5: -21.4 -> -20.1,
eps 1: -20.0 -> -19.3, eps 5: -18.88 -> -18.67; the tied naive MLE at its default 1 / N gains at
eps >= 1 and loses at high noise, where its calibrated weight is the one to use.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Hashable, Sequence

import numpy as np
from scipy import sparse

from ..factors.domain import Domain


@dataclass(frozen=True)
class Tying:
    """The map from shared tables z to per-clique log-potentials theta = ``matrix @ z``.

    Built by :meth:`build`; the fields are below.

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix
    groups : tuple of tuple of int

    Attributes
    ----------
    matrix : scipy.sparse.csr_matrix
        (clique cells) x (shared cells), one 1 per row.
    groups : tuple of tuple of int
        Per group, the indices of its scopes among the model's scopes (free scopes are groups of one).

    Examples
    --------
    >>> d = Domain(("a", "b", "c"), (2, 2, 2))
    >>> t = Tying.build(d, [("a", "b"), ("b", "c")], [[("a", "b"), ("b", "c")]])
    >>> t.matrix.shape, t.groups
    ((8, 4), ((0, 1),))
    >>> t.expand(np.arange(4.0)).tolist()
    [0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0]
    """

    matrix: sparse.csr_matrix
    groups: tuple

    @classmethod
    def build(cls, domain: Domain, scopes: Sequence[tuple], tied: Sequence[Sequence[Sequence[Hashable]]]) -> "Tying":
        """Tying of ``scopes`` (the model's cliques, in its parameter order) by the groups ``tied``.

        Each group lists two or more cliques by their variables; a clique may be named in another
        order than the model's (``("x1", "x0")`` for the model's ``("x0", "x1")``): members are aligned
        axis by axis in the order they are written, so those orders must give equal shapes.

        Parameters
        ----------
        domain : Domain
        scopes : sequence of tuple
            The model's cliques.
        tied : sequence of groups
            Each a sequence of cliques (sequences of variable names).

        Returns
        -------
        Tying

        Raises
        ------
        ValueError
            A clique that is not the model's, named twice, a group of fewer than two, or members
            whose state spaces differ.

        Examples
        --------
        >>> d = Domain(("a", "b", "c"), (2, 3, 2))
        >>> Tying.build(d, [("a", "b"), ("c", "b")], [[("b", "a"), ("b", "c")]]).size   # one shared 3 x 2 table
        6
        """
        if isinstance(tied, (str, bytes)) or not isinstance(tied, (list, tuple)):
            raise TypeError(f"tied: expected a list of groups of cliques, got {type(tied).__name__}")
        scopes = [tuple(s) for s in scopes]
        index = {frozenset(s): i for i, s in enumerate(scopes)}
        sizes = [int(np.prod(domain.shape(s))) for s in scopes]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        owner: dict = {}
        groups: list = []
        members: list = []
        for g, group in enumerate(tied):
            if isinstance(group, (str, bytes)) or not isinstance(group, (list, tuple)) or len(group) < 2:
                raise ValueError(f"tied[{g}]: expected a list of at least two cliques, got {group!r}")
            written = []
            for k, clique in enumerate(group):
                if isinstance(clique, (str, bytes)) or not isinstance(clique, (list, tuple)):
                    raise ValueError(f"tied[{g}][{k}]: expected a clique as a tuple of variables, got {clique!r}")
                clique = tuple(clique)
                i = index.get(frozenset(clique))
                if i is None or len(clique) != len(scopes[i]):
                    raise ValueError(f"tied[{g}][{k}]: {clique} is not a clique of the model; its cliques are {scopes}")
                if i in owner:
                    raise ValueError(f"tied[{g}][{k}]: {clique} is already tied in tied[{owner[i]}]")
                owner[i] = g
                written.append((i, clique))
            shapes = {domain.shape(c) for _, c in written}
            if len(shapes) > 1:
                raise ValueError(f"tied[{g}]: its cliques have different state spaces {sorted(shapes)} in the order written; "
                                 "tied cliques share one table, cell for cell")
            groups.append(tuple(i for i, _ in written))
            members.append(written)
        rows, cols = [], []
        width = 0
        for i, s in enumerate(scopes):  # free cliques keep their own table
            if i not in owner:
                rows.append(offsets[i] + np.arange(sizes[i]))
                cols.append(width + np.arange(sizes[i]))
                width += sizes[i]
        for written in members:
            shape = domain.shape(written[0][1])
            for i, clique in written:
                model_order = scopes[i]
                coords = np.indices(domain.shape(model_order)).reshape(len(model_order), -1)
                mine = [coords[model_order.index(v)] for v in clique]
                rows.append(offsets[i] + np.arange(sizes[i]))
                cols.append(width + np.ravel_multi_index(mine, shape))
            width += int(np.prod(shape))
        r, c = np.concatenate(rows), np.concatenate(cols)
        matrix = sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(int(offsets[-1]), width))
        return cls(matrix, tuple(groups))

    @property
    def size(self) -> int:
        """Number of free parameters (shared cells plus the free cliques' cells)."""
        return int(self.matrix.shape[1])

    def expand(self, z: np.ndarray) -> np.ndarray:
        """Per-clique parameters theta = T z.

        Parameters
        ----------
        z : numpy.ndarray
            Shared parameters, length :attr:`size`.

        Returns
        -------
        numpy.ndarray
            One entry per clique cell, in the model's parameter order.

        Examples
        --------
        >>> t = Tying.build(Domain(("a", "b"), (2, 2)), [("a",), ("b",)], [[("a",), ("b",)]])
        >>> t.expand(np.array([1.0, 2.0])).tolist()
        [1.0, 2.0, 1.0, 2.0]
        """
        return self.matrix @ z

    def pool(self, g: np.ndarray) -> np.ndarray:
        """T^T g: a per-clique vector (a gradient, counts) summed over each group.

        Parameters
        ----------
        g : numpy.ndarray
            One entry per clique cell.

        Returns
        -------
        numpy.ndarray
            Length :attr:`size`.

        Examples
        --------
        >>> t = Tying.build(Domain(("a", "b"), (2, 2)), [("a",), ("b",)], [[("a",), ("b",)]])
        >>> t.pool(np.array([1.0, 2.0, 10.0, 20.0])).tolist()
        [11.0, 22.0]
        """
        return self._pooling @ g

    @cached_property
    def _pooling(self) -> sparse.csr_matrix:
        """T^T as its own CSR matrix, built once (a transpose per call cost about a tenth of a tied fit)."""
        return self.matrix.T.tocsr()

    def restrict(self, theta: np.ndarray) -> np.ndarray:
        """Shared parameters closest to ``theta`` in least squares: each group's tables averaged.

        Parameters
        ----------
        theta : numpy.ndarray
            One entry per clique cell.

        Returns
        -------
        numpy.ndarray
            Length :attr:`size`.

        Examples
        --------
        >>> t = Tying.build(Domain(("a", "b"), (2, 2)), [("a",), ("b",)], [[("a",), ("b",)]])
        >>> t.restrict(np.array([1.0, 2.0, 3.0, 4.0])).tolist()
        [2.0, 3.0]
        """
        counts = np.asarray(self.matrix.sum(axis=0)).ravel()
        return self.pool(theta) / counts
