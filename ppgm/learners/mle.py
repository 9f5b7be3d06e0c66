"""Maximum-likelihood fit of a log-linear Markov network to clique marginals (possibly inconsistent).

maximise  sum_C <theta_C, mu_C> - log Z(theta) - l2 ||theta||^2   (per record)

by L-BFGS (``method="lbfgs"``) with exact gradients mu_C - E_theta[mu_C] - 2 l2 theta_C from one
junction-tree calibration per evaluation (loopy BP and the Bethe log Z when the tree is too large).
This is the M-step of CGM-EM, and with simplex-projected noisy marginals it is the naive MLE of the
CGM paper.

``method="newton"`` (taken by ``"auto"`` whenever it applies) solves the same problem by a truncated
Newton method that knows the problem's two scales. Along the gauge space G (``ppgm.learners.gauge``) the
likelihood is affine, so the penalised optimum there is one closed-form step. On G's complement the
Hessian is the Fisher information plus 2 l2. Its products with a direction are exact, from two passes
over the junction tree (:meth:`JunctionTree.fisher`). When every clique of the tree is one of the
scopes (trees of measured tables), the tree's inverse Fisher information, block-diagonal in the
cliques' conditionals (:meth:`JunctionTree.inverse_fisher`), preconditions conjugate gradients, which
then take a few products at any size of tree. Otherwise (AIM's grown trees, pairs inside larger
cliques) the same inverse built on a maximum spanning tree of the scopes' overlaps does
(:meth:`MarginalOracle._scope_tree`): exact when the scopes form a tree themselves, positive
semi-definite always, and fewer products than the Jacobi diagonal mu (1 - mu) + 2 l2 on AIM's refits.
Conjugate gradients run on G's complement (each preconditioned residual projected), then an Armijo
line search whose step a cap on the largest change bounds, extended while the cap alone held it back.
A cold start begins at the targets' conditionals along the tree (their log-interactions otherwise)
and, for a weight below ``PATH_START``, follows the path of weights down in half-decades: at the
paper's 1 / N the optimum's potentials can lie hundreds of nats away (``docs/explain/cgm-em.md``,
"The naive MLE").
Tied tables (``ppgm.models.tying``) are fitted by the same Newton method on the shared tables
(:func:`_newton_tied`), preconditioned by their Jacobi diagonal.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import combinations
from typing import Callable, Sequence

import numpy as np
import networkx as nx
from scipy import sparse
from scipy.optimize import minimize

from ..core import checks
from ..core.blas_threads import halves, one_blas_thread
from ..core.progress import ConvergenceWarning
from ..factors.cell_map import CliqueReduction
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..inference.junction_tree import DEFAULT_MAX_CELLS, SPLIT_CELLS, Calibration, JunctionTree, JunctionTreeTooLarge
from ..inference.marginals import infer
from ..models.markov import MarkovNetwork
from ..models.tying import Tying
from .gauge import Gauge
from .krylov import Recycler, fisher_product, pcg


@dataclass(frozen=True)
class FitResult:
    """A fitted network and its optimisation trace.

    Attributes
    ----------
    model : MarkovNetwork
    objective : float
        Final per-record objective.
    history : list of float
        Objective after each L-BFGS iteration or Newton step.
    converged : bool
    l2 : float, optional
        The L2 weight the fit used (per record), when a learner chose it.
    selection : dict, optional
        How the weight was chosen from the release (``ppgm.learners.release_rule.Choice.as_record``): the
        candidates, their mean bootstrap scores, whether the rule decided.
    """

    model: MarkovNetwork
    objective: float
    converged: bool
    history: list = field(default_factory=list)
    l2: float | None = None
    selection: dict | None = None


class _Parameters:
    """Flat vector <-> one table per scope."""

    def __init__(self, domain: Domain, scopes: Sequence[tuple]):
        self.domain = domain
        self.scopes = [domain.check(s, "scopes") for s in scopes]
        self.shapes = [domain.shape(s) for s in self.scopes]
        sizes = [int(np.prod(s)) for s in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def split(self, x: np.ndarray) -> list[np.ndarray]:
        return [x[a:b].reshape(sh) for a, b, sh in zip(self.offsets[:-1], self.offsets[1:], self.shapes)]

    def join(self, tables: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(t, dtype=float).ravel() for t in tables]) if tables else np.zeros(0)

    def model(self, x: np.ndarray) -> MarkovNetwork:
        """The network of flat parameters ``x`` (scopes and shapes are this layout's; NaN or +inf
        entries are refused, as the checked constructor would)."""
        if np.isnan(x).any() or np.isposinf(x).any():
            return MarkovNetwork(self.domain, [Factor(s, t) for s, t in zip(self.scopes, self.split(x))])  # names the table
        return MarkovNetwork._unchecked(self.domain, tuple(Factor._unchecked(s, t) for s, t in zip(self.scopes, self.split(x))))


def _diagonal_minus_groups(diag: np.ndarray, held: np.ndarray, sep: np.ndarray, starts: np.ndarray, c: np.ndarray,
                           a: np.ndarray | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """``r -> diag r - A' diag(c) A r``, A summing ``a * r`` over the cells ``held`` in groups (``starts``;
    ``sep`` the group of each held cell; ``a`` of ones when None): the tree's block inverses in the parameter
    layout (:meth:`MarginalOracle.inverse_fisher`, :meth:`MarginalOracle.inverse_hessian`)."""

    def apply(r: np.ndarray) -> np.ndarray:
        out = r * diag
        if held.size:
            t = np.add.reduceat(r[held] if a is None else a * r[held], starts)
            t *= c
            out[held] -= t[sep] if a is None else a * t[sep]
        return out
    return apply


class MarginalOracle:
    """log Z and the marginals over given scopes for parameter vectors of a fixed structure.

    Builds the junction tree once (or takes one whose cliques hold every scope, ``tree``: its plans are
    built once per tree, which on a tree of millions of cells costs several calibrations); falls back
    to loopy BP (Bethe) when it exceeds ``max_cells``.
    """

    def __init__(self, domain: Domain, scopes: Sequence[tuple], max_cells: int | None = DEFAULT_MAX_CELLS,
                 tree: JunctionTree | None = None):
        self.params = _Parameters(domain, scopes)
        self._local = threading.local()  # the last calibration is each thread's own (refits may share an oracle)
        self.tree: JunctionTree | None
        if tree is not None:  # a tree already built (and planned) whose cliques hold every scope
            if tree.domain != domain or any(tree.find_home(s) is None for s in self.params.scopes):
                raise ValueError("tree: expected a junction tree over the domain with a clique holding every scope")
            self.tree, self.exact = tree, True
        else:
            try:
                self.tree = JunctionTree.build(domain, self.params.scopes, max_cells=max_cells)
                self.exact = True
            except JunctionTreeTooLarge:
                self.tree, self.exact = None, False
                return
        # One 0/1 matrix A (parameters x junction-tree cells): the clique log-potentials are
        # A^T x and the scopes' marginals are A b (b = the clique beliefs, flattened). A cell of a
        # clique feeds the parameter of each scope homed there at the cell's coordinates on that scope.
        t = self.tree
        shapes = [domain.shape(c) for c in t.cliques]
        sizes = [int(np.prod(sh)) for sh in shapes]
        cells = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        homes = [t.home(s) for s in self.params.scopes]
        # A clique of at least PLAN_CELLS cells that homes a scope smaller than itself is mapped by planned
        # axis sums (ppgm.factors.cell_map): a sparse matrix would hold one entry per (scope, clique cell) pair.
        planned = {i for s, i in zip(self.params.scopes, homes) if sizes[i] >= PLAN_CELLS and len(s) < len(t.cliques[i])}
        # One 0/1 matrix A (parameters x junction-tree cells) for the other cliques: the clique log-potentials
        # are A^T x and the scopes' marginals are A b (b = the clique beliefs, flattened). A cell of a
        # clique feeds the parameter of each scope homed there at the cell's coordinates on that scope.
        row_parts, col_parts = [], []
        whole: dict = {}  # clique -> the rows of the first scope that is the whole clique
        by_clique: dict = {}
        for s, i, offset, stop in zip(self.params.scopes, homes, self.params.offsets[:-1], self.params.offsets[1:]):
            clique = t.cliques[i]
            if i in planned:
                by_clique.setdefault(i, []).append((tuple(clique.index(v) for v in s), int(offset), int(stop)))
                if len(s) < len(clique) or i in whole:
                    continue
            coords = np.indices(shapes[i]).reshape(len(clique), -1)
            sub = [coords[clique.index(v)] for v in s]
            rows = offset + (np.ravel_multi_index(sub, domain.shape(s)) if s else np.zeros(sizes[i], int))
            if len(s) == len(clique):
                whole.setdefault(i, rows)
            if i not in planned:
                row_parts.append(rows)
                col_parts.append(cells[i] + np.arange(sizes[i]))
        self._planned = [(int(cells[i]), int(cells[i + 1]), CliqueReduction(shapes[i], sc)) for i, sc in sorted(by_clique.items())]
        self._planned_cells = sum(b - a for a, b, _ in self._planned)  # all cells: no zeros needed around them
        # the planned cliques in two groups of about equal cells, mapped side by side (ppgm.core.blas_threads.halves:
        # each writes its own cliques' cells and its own scopes' tables); largest first, each to the lighter group
        groups: list = [[], []]
        for item in sorted(self._planned, key=lambda p: p[0] - p[1]):
            min(groups, key=lambda g: sum(b - a for a, b, _ in g)).append(item)
        self._planned_groups = [g for g in groups if g] if self._planned_cells >= SPLIT_CELLS else [self._planned]
        # the parameter holding each cell when every clique is one of the scopes (the others its subsets):
        # Newton's steps are then preconditioned by the tree's exact inverse Fisher information
        self._clique_params = (np.concatenate([whole[i] for i in range(len(t.cliques))]).astype(np.intp)
                               if len(whole) == len(t.cliques) else None)
        rows = np.concatenate(row_parts) if row_parts else np.zeros(0, int)
        cols = np.concatenate(col_parts) if col_parts else np.zeros(0, int)
        # A on small maps: a gather and a weighted bincount each way (the same sums, without a sparse product's
        # per-call cost); past SPARSE_MAPS entries scipy's fused loop is faster (third-order chain of 100, naive
        # default: 13.4 s with sparse products against 15.8 s with bincounts)
        self._rows, self._cols, self._n_cells = rows.astype(np.intp), cols.astype(np.intp), int(cells[-1])
        # the cells of the cliques that are not planned, and each mapped entry's position among them: with a scratch
        # array (``_to_cells(out=)``) only those are set by the bincount, the planned cliques' cells written whole
        free = np.ones(self._n_cells if self._planned else 0, dtype=bool)
        for a, b, _ in self._planned:
            free[a:b] = False
        self._free_cells = np.flatnonzero(free)
        self._free_cols = np.searchsorted(self._free_cells, self._cols) if self._planned else self._cols
        self._A = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(self.params.size, self._n_cells)) \
            if rows.size > SPARSE_MAPS else None
        self._At = self._A.T.tocsr() if self._A is not None else None
        # When every scope is a clique of its own (trees, chains of the clique scopes), A is a permutation:
        # the products are then one gather each (a quarter of a sparse product's time at 64k cells).
        self._gather: tuple | None = None
        if not planned and rows.size == cells[-1] == self.params.size and np.array_equal(np.sort(rows), np.arange(rows.size)) \
                and np.array_equal(np.sort(cols), np.arange(cols.size)):
            cell_of_param = np.empty(rows.size, dtype=np.intp)
            cell_of_param[rows] = cols
            param_of_cell = np.empty(cols.size, dtype=np.intp)
            param_of_cell[cols] = rows
            self._gather = (cell_of_param, param_of_cell)

    def fisher(self, x: np.ndarray, mu: np.ndarray | None = None) -> Callable[[np.ndarray], np.ndarray]:
        """``v -> F(x) v``, the Fisher information at ``x`` times a direction: the derivative of the
        scopes' marginals along ``v``. Exact on the junction tree (:meth:`JunctionTree.fisher`,
        from one calibration, reused for every product); a forward difference of Bethe marginals
        otherwise. ``mu``: the flat marginals at ``x`` when the caller has them (when every clique of the
        tree is one of the scopes, the tree's beliefs are among them, and no calibration is needed). Where
        the tree grew cliques that are not scopes, the beliefs of the oracle's last :meth:`flat` are used
        when it was at ``x`` (Newton asks for the product where its line search last calibrated)."""
        if not self.exact:
            mu0 = self.flat(x)[1] if mu is None else mu
            return lambda v: fisher_product(lambda z: self.flat(z)[1], x, mu0, v)
        tree = self.tree
        if self._gather is not None:
            cell_of_param, param_of_cell = self._gather
            F = tree.fisher((np.asarray(mu) if mu is not None else self.flat(x)[1])[param_of_cell])  # type: ignore[union-attr]
            return lambda v: F(v[param_of_cell], overwrite=True)[cell_of_param]
        if mu is not None and self._clique_params is not None:  # every clique a scope: its cells are the beliefs
            beliefs = np.asarray(mu)[self._clique_params]
        else:
            last = self._last
            if last is not None and last[0].shape == np.shape(x) and np.array_equal(last[0], x):
                beliefs, mu = last[1].flat_beliefs, last[2]
            else:
                beliefs = tree.calibrate_flat(self._to_cells(x)).flat_beliefs  # type: ignore[union-attr]  # exact
        mu_p = np.asarray(mu) if mu is not None else self._to_params(beliefs)
        # the product's cells uncentred (w = beliefs * E[g | cell]); summed onto the scopes and centred there by
        # their own marginals: F v = A (w - E[g] beliefs) = A w - E[g] mu
        F = tree.fisher(beliefs, centred=False)  # type: ignore[union-attr]
        # the cells of every product in one array where the maps allow it: a fresh array of millions of cells
        # costs a page fault per 4 kB on first touch (CHILD's 9.7 million-cell tree: 73 against 67 ms a product)
        scratch: list = []

        def product(v: np.ndarray) -> np.ndarray:
            if not scratch and self._At is None and self._planned:
                scratch.append(np.empty(self._n_cells))
            w, mean = F(self._to_cells(v, out=scratch[0] if scratch else None), overwrite=True)
            out = self._to_params(w)
            out -= mean * mu_p
            return out
        return product

    def recycler(self) -> Recycler | None:
        """A fresh memory of conjugate directions for one fit's Newton steps (:class:`ppgm.learners.krylov.Recycler`),
        or None where it does not pay. Without a tree inverse the preconditioners (the scopes' spanning tree for
        fits, the diagonal for CGM-EM's E-steps) leave out every loop of the model, and the directions they miss
        recur step after step: correcting them by the previous steps' directions cut the Fisher products of AIM's
        refits on Adult (rho 0.5, 2-way) by 15% (the correction 0.3 ms a step against 33 ms a product). Trees below
        ``RECYCLE_CELLS`` keep the plain preconditioner: it was measured only on large trees (of the panel's
        networks, only WATER's family tables, 3.7 million cells, recycle)."""
        if not self.exact or self.tree_inverse or self.tree.cells < RECYCLE_CELLS:  # type: ignore[union-attr]  # exact
            return None
        return Recycler()

    @property
    def tree_inverse(self) -> bool:
        """Whether the tree's inverses (:meth:`inverse_fisher`, :meth:`inverse_hessian`) and :meth:`canonical`
        exist: an exact oracle whose every junction-tree clique is one of the scopes."""
        return self.exact and self._clique_params is not None

    def _groups(self) -> tuple | None:
        """The clique parameters (in the tree's cell order) and the tree's separator groups: ``(idx, cells,
        sep, starts)`` (:meth:`JunctionTree._separator_groups`), or None without a tree inverse."""
        if not self.tree_inverse:
            return None
        return (self._clique_params, *self.tree._separator_groups())  # type: ignore[union-attr]  # exact: the tree exists

    @cached_property
    def _scope_tree(self) -> tuple:
        """:meth:`_groups`' layout for a tree over the largest scopes (those inside no other), for oracles whose
        junction tree grew cliques that are not scopes: a maximum spanning tree of the scopes' overlaps
        (weighted by the shared cells), each scope a block, each child block grouped by its cells on
        what it shares with its parent. Exact when the scopes form a junction tree themselves; with
        loops, the overlaps the tree leaves out are counted more than once, which keeps the inverse
        positive semi-definite (Cauchy-Schwarz, block by block) where loopy counting numbers would not."""
        domain, scopes, offsets = self.params.domain, self.params.scopes, self.params.offsets
        sets = [frozenset(s) for s in scopes]
        holding: dict = {}  # variable -> the scopes holding it (only scopes that share a variable can nest or overlap)
        for i, s in enumerate(sets):
            for v in s:
                holding.setdefault(v, []).append(i)
        first = {s: i for i, s in reversed(list(enumerate(sets)))}
        blocks = [i for i, s in enumerate(sets) if first[s] == i
                  and not any(s < sets[j] for j in (holding[next(iter(s))] if s else range(len(sets))))]
        position = {i: a for a, i in enumerate(blocks)}
        pairs = sorted({pair for held in holding.values()  # in order: Kruskal's ties
                        for pair in combinations(sorted(position[i] for i in held if i in position), 2)})
        graph = nx.Graph()
        graph.add_nodes_from(range(len(blocks)))
        graph.add_weighted_edges_from((a, b, int(np.prod([domain.card(v) for v in sets[blocks[a]] & sets[blocks[b]]])))
                                      for a, b in pairs)
        tree = nx.maximum_spanning_tree(graph)
        idx = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in blocks]) if blocks else np.zeros(0, np.intp)
        begins = np.concatenate([[0], np.cumsum([offsets[i + 1] - offsets[i] for i in blocks])]).astype(np.intp)
        cells, sep, starts, n_sep, n_cells = [], [], [], 0, 0
        for root in sorted(min(c) for c in nx.connected_components(tree)):
            for parent, child in nx.bfs_edges(tree, root):
                scope = scopes[blocks[child]]
                shared = [k for k, v in enumerate(scope) if v in sets[blocks[parent]]]
                shape = self.params.shapes[blocks[child]]
                k = int(np.prod([shape[a] for a in shared]))
                order = np.arange(int(np.prod(shape))).reshape(shape).transpose(shared + [a for a in range(len(scope)) if a not in shared])
                cells.append(begins[child] + order.ravel())
                sep.append(n_sep + np.repeat(np.arange(k), order.size // k))
                starts.append(n_cells + np.arange(k) * (order.size // k))
                n_sep, n_cells = n_sep + k, n_cells + order.size
        empty = np.zeros(0, dtype=np.intp)
        cells_, sep_, starts_ = (np.concatenate(a).astype(np.intp) if a else empty for a in (cells, sep, starts))
        return idx.astype(np.intp), cells_, sep_, starts_

    def inverse_fisher(self, mu: np.ndarray, ridge: float | np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """``r -> J r``, the junction tree's inverse Fisher information
        (:meth:`JunctionTree.inverse_fisher`) at the flat marginals ``mu`` in this parameter layout, when
        every clique of the tree is one of the scopes (trees of measured cliques, with or without their
        sub-tables): on consistent directions it inverts the Hessian of ``log Z``. Otherwise, on exact
        oracles, the same construction on the scopes' own tree (:meth:`_scope_tree`), a positive
        semi-definite preconditioner; None on loopy oracles. ``ridge`` (a number, or one per parameter)
        stands for a penalty's curvature."""
        groups = self._groups() if self.tree_inverse else self._scope_tree if self.exact else None
        if groups is None:
            return None
        idx, cells, sep, starts = groups
        w = np.asarray(mu, dtype=float)[idx] + (np.asarray(ridge)[idx] if np.ndim(ridge) else ridge)
        inv_w = np.zeros(self.params.size)
        inv_w[idx] = 1.0 / w  # zero on the scopes inside a clique: the whole clique's scope carries them
        inv_ws = 1.0 / np.add.reduceat(w[cells], starts) if cells.size else np.zeros(0)
        return _diagonal_minus_groups(inv_w, idx[cells], sep, starts, inv_ws)

    def inverse_hessian(self, mu: np.ndarray, ridge: float | np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """``r -> P r``, an approximate inverse of ``F + diag(ridge)`` (F the Fisher information at the
        flat marginals ``mu``) that stays good when the ridge is as large as the cells' marginals or
        larger: CGM-EM's E-step, whose Hessian is ``N F + s2`` with the noise variance s2 of each
        released cell. None without a tree inverse (:attr:`tree_inverse`): the scopes' tree
        (:meth:`_scope_tree`) stands in for the Fisher information's inverse only where the ridge is small.

        The tree's inverse Fisher information J0 is block-diagonal, one block per clique:
        ``diag(1 / mu_C) - M' diag(1 / mu_S) M`` (M sums a clique onto its separator with its parent).
        Each block of ``(J0^-1 + ridge)^-1`` has a closed form (Woodbury, once per block, the
        separator cells' groups disjoint): with ``w = mu + ridge`` and ``a = mu / w``, it is
        ``diag(1 / w) - diag(a) M' diag(1 / sum_group(mu^2 / w)) M diag(a)``, with no cancellation at
        any ridge. That alone treats the directions J0 leaves out (the sub-tables' parameters, each
        group's own mu) as infinitely curved, which is right when the ridge is small and wrong when it
        dominates; the diagonal ``ridge / w^2`` added on every parameter is the noise-dominated part
        of the inverse (it vanishes as ``ridge / mu^2`` for small ridges and tends to ``1 / ridge``
        where the ridge dominates, so that P lies within a factor 2 of ``1 / ridge`` there). On random
        trees the preconditioned condition number stayed at most 8 for ridges from 1e-5 to 1, against
        up to 48 for :meth:`inverse_fisher` with the same ridge, and CGM-EM's E-steps took 1.5-3x fewer
        products (``docs/explain/cgm-em.md``, "CGM-EM").

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 2))
        >>> o = MarginalOracle(d, [("A",), ("A", "B")])
        >>> log_z, mu = o.flat(np.zeros(o.params.size))
        >>> r = np.array([1.0, -1.0, 0.5, -0.5, 0.5, -0.5])
        >>> bool(np.allclose(o.inverse_hessian(mu, 1e-12)(r), o.inverse_fisher(mu, 0.0)(r)))  # no noise: J0
        True
        >>> ratio = o.inverse_hessian(mu, 1e6)(r) * 1e6 / r      # noise dominates: 1 / ridge to 2 / ridge
        >>> bool((ratio > 0.99).all() and (ratio < 2.01).all())
        True
        """
        groups = self._groups()
        if groups is None:
            return None
        idx, cells, sep, starts = groups
        held = idx[cells]  # the separator groups as parameter indices
        m = np.asarray(mu, dtype=float)
        rho = np.broadcast_to(np.asarray(ridge, dtype=float), m.shape)
        w = m + rho
        diag = rho / (w * w)  # the noise-dominated part, on every parameter (sub-tables included)
        diag[idx] += 1.0 / w[idx]
        a = (m / w)[held]
        mass = np.add.reduceat(a * m[held], starts) if cells.size else np.zeros(0)  # sum over the group of mu^2 / w
        c = np.divide(1.0, mass, out=np.zeros_like(mass), where=mass > 0)
        return _diagonal_minus_groups(diag, held, sep, starts, c, a)

    def canonical(self, mu: np.ndarray, ridge: float) -> np.ndarray | None:
        """Log-potentials whose model has the tree's clique tables of ``mu`` (flat, this layout) as
        its root marginal and its cliques' conditionals given their separators: ``log (mu_C + ridge)``
        minus the log of its separator sums, on the scopes that are whole cliques (zero on their
        sub-tables). For consistent marginals this is the maximum-likelihood fit; for noisy ones a
        start inside the basin of Newton's method. None when some clique is not a scope."""
        groups = self._groups()
        if groups is None:
            return None
        idx, cells, sep, starts = groups
        w = np.asarray(mu, dtype=float)[idx] + ridge
        log_w = np.log(w)
        if cells.size:
            log_w[cells] -= np.log(np.add.reduceat(w[cells], starts))[sep]
        out = np.zeros(self.params.size)
        out[idx] = log_w
        return out

    @cached_property
    def gauge(self) -> Gauge:
        """The gauge projection of this parameter layout (built on first use)."""
        return Gauge(self.params.domain, self.params.scopes)

    def flat(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """log Z and the scopes' marginals as one flat vector (the layout of ``x``)."""
        if not self.exact:
            log_z, mus = self(x)
            return log_z, self.params.join(mus)
        if self._gather is not None:
            cell_of_param, param_of_cell = self._gather
            cal = self.tree.calibrate_flat(x[param_of_cell], overwrite=True)  # type: ignore[union-attr]  # exact: the tree exists
            mu = cal.flat_beliefs[cell_of_param]
        else:
            cal = self.tree.calibrate_flat(self._to_cells(x), overwrite=True)  # type: ignore[union-attr]  # exact: the tree exists
            mu = self._to_params(cal.flat_beliefs)
        # kept for calibration() when asked, and for fisher(x) where the tree's beliefs are not among the scopes'
        if self.remember or (self._gather is None and self._clique_params is None):
            self._last = (np.array(x, dtype=float), cal, mu)
        return cal.log_z, mu

    remember = False  # keep the last calibration (``calibration`` reuses it): one more copy of the tree's beliefs

    @property
    def _last(self) -> tuple | None:
        """(x, calibration, mu) of this thread's last flat(), when remembered or fisher(x) needs it."""
        return getattr(self._local, "last", None)

    @_last.setter
    def _last(self, value: tuple | None) -> None:
        self._local.last = value

    def calibration(self, x: np.ndarray) -> "Calibration":
        """The calibration of parameters ``x`` on the oracle's tree (exact oracles): the last one
        :meth:`flat` made when ``remember`` is set and ``x`` differs from its point only along the gauge
        (the same distribution; a fit returns its point plus the gauge's closed-form step), else a new one.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 2))
        >>> o = MarginalOracle(d, [("A",), ("A", "B")]); o.remember = True
        >>> x = np.array([0.3, -0.3, 0.1, 0.2, 0.0, 0.5])
        >>> _ = o.flat(x)
        >>> shifted = x + np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])   # a constant added to one table
        >>> cal = o.calibration(shifted)
        >>> bool(np.isclose(cal.log_z, o.flat(shifted)[0]))
        True
        """
        last = self._last if self.remember else None
        if last is not None and last[0].shape == x.shape:
            d = np.asarray(x, dtype=float) - last[0]
            if float(np.abs(self.gauge.project(d)).max()) <= 1e-12 * max(1.0, float(np.abs(x).max())):
                return replace(last[1], log_z=float(last[1].log_z + d @ last[2]))
        psi = self._to_cells(x) if self._gather is None else x[self._gather[1]]
        return self.tree.calibrate_flat(psi)  # type: ignore[union-attr]  # exact: the tree exists

    def _to_cells(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Clique log-potentials from parameters: each cell sums the parameters of the scopes' cells it lies in.
        ``out``: a scratch array of the cells' length, used when some cliques are planned (the sparse map, and
        the bincount alone, make their own array: copying it over would cost a pass)."""
        if self._At is not None:
            y = self._At @ x
        elif out is not None and self._planned:  # the planned cliques' cells are written whole below: the others here
            y = out
            if self._planned_cells < self._n_cells:
                y[self._free_cells] = np.bincount(self._free_cols, weights=x[self._rows], minlength=self._free_cells.size)
        elif self._rows.size:
            y = np.bincount(self._cols, weights=x[self._rows], minlength=self._n_cells)
        else:
            y = np.zeros(self._n_cells)

        def fill(group: list) -> None:  # no other scope is homed in a planned clique: its cells are all here
            for a, b, red in group:
                red.to_cells(x, y[a:b])
        halves(fill, self._planned_groups)
        return y

    def _to_params(self, y: np.ndarray) -> np.ndarray:
        """Scope tables from clique cells: each scope cell sums the clique cells that lie in it."""
        if self._A is not None:
            out = self._A @ y
        elif self._rows.size:
            out = np.bincount(self._rows, weights=y[self._cols], minlength=self.params.size)
        else:
            out = np.zeros(self.params.size)

        def add(group: list) -> None:
            for a, b, red in group:
                red.add_to_params(y[a:b], out)
        halves(add, self._planned_groups)
        return out

    def __call__(self, x: np.ndarray) -> tuple[float, list[np.ndarray]]:
        if not self.exact:
            res = infer(self.params.model(x), method="loopy")
            return res.log_z, [res.marginal(s).values for s in self.params.scopes]
        log_z, mu = self.flat(x)
        return log_z, self.params.split(mu)


@one_blas_thread
def fit_marginals(
    domain: Domain,
    targets: Sequence[Factor],
    l2: float = 0.0,
    init: MarkovNetwork | None = None,
    oracle: MarginalOracle | None = None,
    max_iter: int = 1000,
    tol: float = 1e-9,
    check_targets: bool = True,
    tied: Sequence | Tying | None = None,
    warn: bool = True,
    method: str = "auto",
    init_marginals: tuple | None = None,
    table_tol: float | None = None,
) -> FitResult:
    """Fit one log-potential table per target scope so that the model's marginals match the targets.

    Parameters
    ----------
    domain : Domain
    targets : sequence of Factor
        Probability tables (each summing to one), one per clique of the model. They need not be
        consistent with each other; zeros are allowed (with ``l2 = 0`` the fit then drives those
        cells towards probability zero and stops at ``max_iter`` or ``tol``).
    l2 : float
        Weight of the penalty ``l2 ||theta||^2`` on the free parameters: with ``tied``, on the shared
        tables z, each counted once (see :mod:`ppgm.models.tying`).
    init : MarkovNetwork, optional
        Starting log-potentials (same scopes as ``targets``), e.g. the previous EM iterate.
    oracle : MarginalOracle, optional
        A prebuilt oracle for this structure (reuses its junction tree).
    max_iter, tol
        Iteration limit (L-BFGS iterations, or Newton steps) and the convergence test: ``tol`` bounds
        the largest gradient entry, i.e. the penalised marginal mismatch.
    check_targets : bool
        Require each target to be a probability table. ``False`` admits raw pseudo-marginals
        (negative cells, totals other than one), for which only ``l2 > 0`` makes the fit exist.
    tied : list of groups of cliques, or Tying, optional
        Cliques that share one log-potential table (see :mod:`ppgm.models.tying`): the fit then matches
        each group's summed marginals, and the model has equal tables on the group's cliques.
    warn : bool
        Raise a ``ppgm.ConvergenceWarning`` when L-BFGS stops before ``tol`` is met (``converged`` in
        the result says so either way). Callers that stop on purpose (CGM-EM's partial M-steps) or
        warn themselves turn it off.
    method : {"auto", "newton", "lbfgs"}
        The optimiser (module docstring). ``"newton"`` needs ``l2 > 0`` and an exact (junction-tree)
        oracle (tied tables: Newton on the shared tables, Jacobi-preconditioned); ``"auto"`` takes it
        when these hold and L-BFGS otherwise, and hands
        over to L-BFGS (from Newton's point) if Newton has not converged after as many calibrations
        as ``max_iter`` L-BFGS iterations would take (near-noise targets with a tiny ``l2``).
    init_marginals : tuple, optional
        ``(log_z, mu)`` of ``init`` (the oracle's flat layout), when the caller has just calibrated it:
        Newton then starts without calibrating it again (CGM-EM's M-step starts where its E-step ended).
    table_tol : float, optional
        A second convergence test for the untied Newton method: every table's gradient within
        ``table_tol`` in L1 (its cells' penalised mismatch summed), the distance of each table's
        marginal from where the fit will put it. For callers that judge the fit by whole tables
        (AIM's scores are L1 errors of tables); met when either test is.

    Returns
    -------
    FitResult

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> from ppgm.inference.marginals import infer
    >>> truth = third_order_chain(5, 2, seed=0)
    >>> marg = infer(truth).factor_marginals()
    >>> fit = fit_marginals(truth.domain, marg)
    >>> bool(np.abs(infer(fit.model).factor_marginals()[0].values - marg[0].values).max() < 1e-6)
    True
    """
    checks.flag(check_targets, "check_targets")
    checks.flag(warn, "warn")
    tol = checks.positive(tol, "tol")
    if not np.isfinite(l2) or l2 < 0:
        raise ValueError(f"l2: expected a non-negative number, got {l2!r}")
    if l2 > checks.MAX_PENALTY:
        raise ValueError(f"l2: expected at most {checks.MAX_PENALTY:g} (a heavier penalty holds every potential at 0, and its "
                         f"gradient overflows), got {l2!r}")
    targets = list(targets)
    if not targets:
        raise ValueError("targets: expected at least one marginal table")
    scopes = [t.variables for t in targets]
    oracle = oracle or MarginalOracle(domain, scopes)
    P = oracle.params
    if P.domain != domain or [tuple(s) for s in P.scopes] != [tuple(s) for s in scopes]:
        raise ValueError("oracle: built for another domain or other scopes than the targets'")
    for i, t in enumerate(targets):
        if t.shape != P.shapes[i]:
            raise ValueError(f"targets[{i}]: scope {t.variables} needs shape {P.shapes[i]}, got {t.shape}")
    mu_hat = P.join([t.values for t in targets])
    bad = np.logical_or.reduceat(~np.isfinite(mu_hat), P.offsets[:-1]) if mu_hat.size else np.zeros(0, bool)  # NaN / inf
    if check_targets and not bad.any():
        bad = (np.minimum.reduceat(mu_hat, P.offsets[:-1]) < 0) | (np.abs(np.add.reduceat(mu_hat, P.offsets[:-1]) - 1) > 1e-6)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"targets[{i}]: expected a probability table over {targets[i].variables}")
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"targets[{i}]: the table over {targets[i].variables} has NaN or infinite entries")
    if init is not None:
        if [f.variables for f in init.factors] != scopes:
            raise ValueError("init: its factors must have the targets' scopes, in order")
        x0 = P.join([np.where(np.isfinite(f.values), f.values, -50.0) for f in init.factors])
    else:
        x0 = np.zeros(P.size)
    history: list = []
    tie = tied if isinstance(tied, Tying) or tied is None else Tying.build(domain, scopes, tied)
    if tie is not None and tie.matrix.shape[0] != P.size:
        raise ValueError("tied: built for other scopes than the targets'")

    if method not in ("auto", "newton", "lbfgs"):
        raise ValueError(f"method: expected 'auto', 'newton' or 'lbfgs', got {method!r}")
    newton_ok = newton_applies(oracle, l2, tie)
    if method == "newton" and not newton_ok:
        raise ValueError("method: 'newton' needs l2 > 0 and a junction-tree oracle; use 'auto' or 'lbfgs'")
    if method != "lbfgs" and newton_ok:
        if tie is not None:
            z0 = tie.restrict(x0)  # the start's marginals hold only if it was tied already (CGM-EM's iterates are)
            same = init is not None and bool(np.array_equal(tie.expand(z0), x0))
            z, value, converged, nit = _newton_tied(oracle, tie, mu_hat, l2, z0, max_iter, tol, history,
                                                    max_evals=max_iter if method == "auto" else None,
                                                    start=init_marginals if same else None)
            x = tie.expand(z)
        else:
            start = init_marginals if init is not None else None
            if init is None:
                # a cold start follows the path of weights from PATH_START down to l2 in half-decades, each fit
                # (to PATH_TOL) starting the next: the optimum's potentials grow like the targets' inconsistency
                # over 2 l2, beyond the reach of Newton's quadratic model from any fixed start when l2 is tiny
                # (a tree of 1,000 noisy tables at 1 / N: unconverged after 1,000 calibrations cold, 6 fits of
                # 4-16 steps along the path)
                path = l2 * PATH_STEP ** np.arange(int(np.ceil(np.log(PATH_START / l2) / np.log(PATH_STEP))), 0, -1)
                x0 = _start(oracle, mu_hat, float(path[0]) if path.size else l2)
                for w in path:  # (the path's objectives are at other weights: not in the history)
                    x0, _, _, _ = _newton(oracle, mu_hat, float(w), x0, max_iter, max(tol, PATH_TOL), [])
            # "auto" gives Newton the calibrations max_iter L-BFGS iterations would take; if that is not enough
            # (near-noise, inconsistent targets with a tiny l2: the optimum is far and Newton's model poor there),
            # L-BFGS continues from Newton's point with its own max_iter
            x, value, converged, nit = _newton(oracle, mu_hat, l2, x0, max_iter, tol, history,
                                               max_evals=max_iter if method == "auto" else None, start=start,
                                               table_tol=table_tol)
        if converged or method == "newton":
            if warn and not converged:
                warnings.warn(f"fit_marginals: {nit} Newton steps did not meet tol={tol}; the fit is approximate",
                              ConvergenceWarning, stacklevel=2)
            return FitResult(P.model(x), value, converged, history)
        x0 = x

    # the free parameters v: theta itself, or the shared tables z with theta = T z; the penalty is on v
    # (a shared cell once)
    if tie is not None:
        x0 = tie.restrict(x0)

    def f(v):
        theta = v if tie is None else tie.expand(v)
        log_z, mu = oracle.flat(theta)
        value = float(theta @ mu_hat - log_z - l2 * (v @ v))
        grad = mu_hat - mu if tie is None else tie.pool(mu_hat - mu)
        return -value, -(grad - 2 * l2 * v)

    def record(intermediate_result):
        history.append(-float(intermediate_result.fun))

    res = minimize(
        f, x0, jac=True, method="L-BFGS-B",
        options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-15, "maxcor": 20},
        callback=record,
    )
    theta = res.x if tie is None else tie.expand(res.x)
    # a line search that fails where the gradient is already within a few times the tolerance has met the
    # limit of floating point, not stopped short (its summation order, e.g. BLAS's thread count, decides
    # which of the two a run reports)
    converged = bool(res.success) or (res.status == 2 and float(np.abs(res.jac).max()) <= LINE_SEARCH_SLACK * tol)
    if warn and not converged:
        warnings.warn(f"fit_marginals: L-BFGS stopped after {res.nit} iterations before its tolerance was met "
                      f"({res.message}); the fit is approximate", ConvergenceWarning, stacklevel=2)
    return FitResult(P.model(theta), float(-res.fun), converged, history)


def _armijo(x: np.ndarray, step: np.ndarray, t: float, f: float, slope: float,
           evaluate: Callable[[np.ndarray], tuple]) -> tuple:
    """Backtracking line search for an ascent along ``step`` from ``x`` (objective ``f``, directional
    derivative ``slope``): halve ``t`` until the Armijo condition holds (gains below the objective's
    rounding count as none) or ``t`` falls below 1e-10. ``evaluate(point)`` -> ``(value, log_z, mu)``.
    Returns ``(t, point, value, log_z, mu, halved)``; a minimiser passes its negated objective and slope.

    Examples
    --------
    >>> out = _armijo(np.zeros(1), np.ones(1), 4.0, 0.0, 1.0, lambda p: (float(-(p[0] - 1) ** 2 + 1), 0.0, None))
    >>> out[0], out[5]   # t = 4 and 2 overshoot the maximum at 1; t = 1 reaches it
    (1.0, True)
    """
    noise = 1e-13 * max(1.0, abs(f))
    halved = False
    while True:
        trial = x + t * step
        value, log_z, mu = evaluate(trial)
        if value >= f + 1e-4 * t * slope - noise or t < 1e-10:
            return t, trial, value, log_z, mu, halved
        t, halved = t * 0.5, True


def _newton_tied(oracle: MarginalOracle, tie: Tying, mu_hat: np.ndarray, l2: float, z: np.ndarray, max_iter: int,
                 tol: float, history: list, cg_iter: int = 200, max_evals: int | None = None,
                 start: tuple | None = None) -> tuple[np.ndarray, float, bool, int]:
    """Truncated Newton for the tied problem ``max <T z, mu_hat> - log Z(T z) - l2 ||z||^2`` in the
    shared parameters z (``theta = T z``, :class:`ppgm.models.tying.Tying`).

    The gradient is ``T'(mu_hat - mu) - 2 l2 z`` and the Hessian ``T' F T + 2 l2``, positive definite
    for ``l2 > 0``; its products are exact (:meth:`MarginalOracle.fisher` between an expansion and a
    pooling). Conjugate gradients are preconditioned by the Jacobi diagonal ``T' mu (1 - mu) + 2 l2``:
    the tree's inverse Fisher information does not carry over to pooled parameters (tried: on the
    mobility chain it did not converge in 7,800 products). Against L-BFGS on the tied mobility chain
    (its 24 tables, one shared pair table): the same optimum in 3-10x less time.
    The same Armijo search and step cap as :func:`_newton`; returns the point, its objective, whether
    the largest gradient entry is within ``tol``, and the Newton steps taken.
    """
    evals = [0]

    def calibrate(z_: np.ndarray) -> tuple:
        evals[0] += 1
        return oracle.flat(tie.expand(z_))

    def objective(z_: np.ndarray, log_z: float) -> float:
        return float(tie.expand(z_) @ mu_hat - log_z - l2 * (z_ @ z_))

    def evaluate(z_: np.ndarray) -> tuple:
        log_z, mu = calibrate(z_)
        return objective(z_, log_z), log_z, mu

    z = np.array(z, dtype=float)
    log_z, mu = calibrate(z) if start is None else (float(start[0]), np.asarray(start[1]))
    f = objective(z, log_z)
    g0 = None
    for it in range(max_iter + 1):
        grad = tie.pool(mu_hat - mu) - 2 * l2 * z
        if float(np.abs(grad).max()) <= tol:
            return z, f, True, it
        if it == max_iter or (max_evals is not None and evals[0] >= max_evals):
            break
        g_norm = float(np.sqrt(grad @ grad))
        g0 = g0 or g_norm
        F = oracle.fisher(tie.expand(z), mu)
        diag = tie.pool(mu * (1 - mu)) + 2 * l2
        step, _ = pcg(lambda v: tie.pool(F(tie.expand(v))) + 2 * l2 * v, grad, lambda r: r / diag,
                      cg_iter, rtol=forcing(g_norm, g0))
        slope = float(grad @ step)
        if slope <= 0:  # not an ascent direction (rounding near the optimum)
            break
        t = min(1.0, MAX_STEP / float(np.abs(step).max()))
        t, trial, f_new, log_z, mu_new, _ = _armijo(z, step, t, f, slope, evaluate)
        if f_new < f - 1e-13 * max(1.0, abs(f)):  # no ascent along the Newton direction
            break
        z, f, mu = trial, f_new, mu_new
        history.append(f)
    return z, f, False, it


PATH_START = 1e-2  # a cold Newton fit at a smaller weight (per record) follows the path of weights from here ...
PATH_STEP = np.sqrt(10.0)  # ... in half-decades ...
PATH_TOL = 1e-2  # ... each fit on the way to this gradient


def _start(oracle: MarginalOracle, mu_hat: np.ndarray, l2: float) -> np.ndarray:
    """A cold start: the targets' conditionals along the junction tree when every clique is a scope,
    else their log-interactions pooled over the tables sharing each."""
    x0 = oracle.canonical(np.clip(mu_hat, 0, None), l2)
    return x0 if x0 is not None else oracle.gauge.pool(np.log(np.clip(mu_hat, 0, None) + l2))


def newton_applies(oracle: MarginalOracle, l2: float, tie: Tying | None) -> bool:
    """Whether ``method="newton"`` can fit this structure: ``l2 > 0`` and an exact (junction-tree)
    oracle (tied tables take :func:`_newton_tied`).

    Parameters
    ----------
    oracle : MarginalOracle
    l2 : float
    tie : Tying or None

    Returns
    -------
    bool

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> newton_applies(MarginalOracle(d, [("A", "B")]), 1e-3, None), newton_applies(MarginalOracle(d, [("A", "B")]), 0.0, None)
    (True, False)
    """
    return l2 > 0 and oracle.exact


CG_RTOL = 0.3  # conjugate gradients stop at this relative residual, tightened as the gradient falls
LINE_SEARCH_SLACK = 10.0  # L-BFGS's failed line search counts as converged within this many times tol
PLAN_CELLS = 4096  # cliques of at least this many cells homing smaller scopes map by axis sums (ppgm.factors.cell_map)
SPARSE_MAPS = 30_000  # entries of the parameter <-> cell map above which it is applied as a scipy sparse product
MAX_STEP = 30.0  # the largest change of a log-potential in one Newton step (its quadratic model is local)
RECYCLE_CELLS = 100_000  # junction trees from this many cells up recycle conjugate directions (MarginalOracle.recycler)


def forcing(g_norm: float, g0: float) -> float:
    """Conjugate gradients' relative tolerance at a Newton step whose gradient norm is ``g_norm`` (``g0`` at
    the first step): ``CG_RTOL`` tightened by the square root of the gradient's fall, down to 1e-4 of it, so
    the early steps solve loosely and the last ones nearly exactly (an inexact Newton forcing term).

    Examples
    --------
    >>> forcing(1.0, 1.0), forcing(0.01, 1.0)
    (0.3, 0.03)
    """
    return CG_RTOL * max(1e-4, min(1.0, float(np.sqrt(g_norm / g0))))


def _newton(oracle: MarginalOracle, mu_hat: np.ndarray, l2: float, x: np.ndarray, max_iter: int, tol: float,
            history: list, cg_iter: int = 100, max_evals: int | None = None,
            start: tuple | None = None, table_tol: float | None = None) -> tuple[np.ndarray, float, bool, int]:
    """Truncated Newton for ``max <x, mu_hat> - log Z(x) - l2 ||x||^2`` (module docstring).

    Returns the point, its objective, whether the largest gradient entry is within ``tol``, and the
    Newton steps taken; appends each step's objective to ``history``. Stops after ``max_iter`` steps,
    or before a step once ``max_evals`` calibrations are spent. ``start``: ``(log_z, mu)`` at ``x``
    when the caller has them.
    """
    gauge = oracle.gauge
    evals = [0]
    flat = oracle.flat
    starts = oracle.params.offsets[:-1]

    def calibrate(z):
        evals[0] += 1
        return flat(z)

    # x = y + g with y on G's complement and g in G. Along G the log-partition function is affine,
    # log Z(y + g) = log Z(y) + <g, mu(y)> with <g, mu(y)> the same for every y, so the objective
    # splits into a part in y and a quadratic in g: g's optimum is one closed-form step (zero when
    # the targets are consistent), and the calibrations only ever see y, whose tables stay small.
    y = gauge.project(x)
    g = x - y
    if start is None:
        log_z, mu = calibrate(y)
    else:  # the same distribution as x: mu(y) = mu(x), log Z(y) = log Z(x) - <g, mu>
        log_z, mu = float(start[0]) - float(g @ start[1]), np.asarray(start[1])
    g = g + gauge.gauge(mu_hat - mu - 2 * l2 * g) / (2 * l2)
    g_const = float(g @ mu_hat - g @ mu - l2 * (g @ g))  # the g-part of the objective

    def objective(y, log_z):
        return float(y @ mu_hat - log_z - l2 * (y @ y)) + g_const

    def evaluate(y_: np.ndarray) -> tuple:
        log_z, mu = calibrate(y_)
        return objective(y_, log_z), log_z, mu

    # with a table test (fits judged by whole tables, such as AIM's refits between rounds), conjugate gradients
    # stop once the step's predicted gradient (the residual) passes it with a factor 2 to spare; fits run to
    # ``tol`` solve in full (the release rules' choices between near-equal weights hang on their last digits)
    enough = None if table_tol is None else lambda r: float(np.add.reduceat(np.abs(r), starts).max()) <= table_tol / 2
    memory = oracle.recycler()  # each step's conjugate directions correct the next steps' preconditioner
    f = objective(y, log_z)
    g0 = None
    for it in range(max_iter + 1):
        grad = gauge.project(mu_hat - mu - 2 * l2 * y)  # the ascent direction on G's complement
        g_norm = float(np.sqrt(grad @ grad))
        g0 = g0 or g_norm
        if float(np.abs(grad).max()) <= tol or (
                table_tol is not None and float(np.add.reduceat(np.abs(grad), starts).max()) <= table_tol):
            return y + g, f, True, it
        if it == max_iter or (max_evals is not None and evals[0] >= max_evals):
            break
        J = oracle.inverse_fisher(mu, 2 * l2)  # the tree's (or the scopes' tree's) inverse; Jacobi's on loopy oracles
        if J is None:
            d = mu * (1 - mu) + 2 * l2
            J = lambda r: r / d  # noqa: E731
        F = oracle.fisher(y, mu)
        step, _ = pcg(lambda v: F(v) + 2 * l2 * v, grad, lambda r: gauge.project(J(r)),
                      cg_iter, rtol=forcing(g_norm, g0), enough=enough, recycle=memory)
        slope = float(grad @ step)
        t = min(1.0, MAX_STEP / float(np.abs(step).max()))
        noise = 1e-13 * max(1.0, abs(f))  # the objective's rounding: gains below it are invisible
        t, trial, f_new, log_z, mu_new, halved = _armijo(y, step, t, f, slope, evaluate)
        capped = t < 1.0 and not halved
        if f_new < f - noise:  # no ascent along the Newton direction
            break
        while capped:  # the cap held and its step was taken whole: the quadratic model may reach further (cells
            t2 = min(1.0, 4 * t)  # whose probability is negligible move on the penalty alone, a true quadratic)
            trial2 = y + t2 * step
            log_z2, mu2 = calibrate(trial2)
            f2 = objective(trial2, log_z2)
            if not f2 >= max(f_new, f + 1e-4 * t2 * slope - noise):
                break
            t, trial, log_z, mu_new, f_new, capped = t2, trial2, log_z2, mu2, f2, t2 < 1.0
        y, f, mu = trial, f_new, mu_new
        history.append(f)
    return y + g, f, False, it
