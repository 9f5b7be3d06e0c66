"""Exact inference: junction tree construction and log-space calibration.

The tree is built once per graph (greedy min-fill triangulation with deterministic tie-breaks,
maximal cliques, maximum-weight spanning tree over separator sizes) and can then calibrate any
number of models on that graph (for instance the iterates of a learner, or a model under several
evidence sets). Calibration is a two-pass Shafer-Shenoy schedule entirely in log space, so
potentials of any scale neither overflow nor underflow.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Sequence

import networkx as nx
import numpy as np

from ..core.blas_threads import halves
from ..factors.cell_map import axis_steps, spread_axes, spread_steps, sum_axes, sum_plan, sum_steps
from ..factors.domain import Domain
from ..factors.factor import Factor, align
from ..models.markov import MarkovNetwork
from .calibration import Calibration
from .tree_size import DEFAULT_MAX_CELLS, JunctionTreeTooLarge

__all__ = ["Calibration", "DEFAULT_MAX_CELLS", "JunctionTree", "JunctionTreeTooLarge"]

SCALED_RANGE = 600.0  # below this total log-range of the potentials, calibrate on scaled probabilities ...
SCALED_MIN_CELLS = 2048  # ... when the cliques are large (mean cells): there one exp per clique beats the batched log
# schedule's passes (third-order chain 10 x 10, 10^4 cells a clique: 0.9 ms against 2.0 ms); with small cliques the
# batched schedule's few calls per level win (Adult: 117 against 185 us; random tree of 100 x 8 states: 0.35 against 1.4 ms) ...
BATCH_MIN_CLIQUES = 8  # ... or small (a few cliques: no gain, and L-BFGS at tol 1e-10 met its tolerance only on the scaled sums)
SCALED_WAIT = 16  # calibrations a tree takes in log space after its scaled schedule ran out of range (its
# potentials, a fit's iterates, change little from one call to the next) before it tries again


DENSE_PARENT = 32_768  # a parent clique of at least this many cells is read as one array by the Fisher product
TINY_MASS = 1e-290  # a separator cell below this mass is left out of the exact Fisher product's expectations


def _elimination_cliques(domain: Domain, scopes: Iterable[Sequence[Hashable]]) -> list[tuple]:
    """Greedy min-fill elimination; ties broken by log table size, then by domain order."""
    n = len(domain)
    adj: list[set] = [set() for _ in range(n)]
    for s in scopes:
        idx = domain.indices(s)
        for a in idx:
            adj[a].update(b for b in idx if b != a)
    logcard = np.log(np.asarray(domain.cards, dtype=float)).tolist()  # Python floats: the same sums, faster to index
    bits = [sum(1 << b for b in a) for a in adj]  # the same adjacency as bit masks, for the fill counts

    def fill(v: int) -> int:
        """Pairs of v's neighbours that are not adjacent (each counted from both ends: a is in v's mask, not in its own)."""
        m = bits[v]
        return (sum((m & ~bits[a]).bit_count() for a in adj[v]) - len(adj[v])) // 2

    def size(v: int) -> float:
        return logcard[v] + sum(logcard[a] for a in adj[v])  # summed in the set's order, as it always was

    alive = set(range(n))
    sizes = {v: size(v) for v in alive}
    scores = {v: (fill(v), sizes[v], v) for v in alive}
    cliques = []
    while alive:
        v = min(alive, key=scores.__getitem__)
        nb = adj[v]
        cliques.append(frozenset(nb | {v}))
        mask = bits[v]
        for a in nb:
            adj[a].update(b for b in nb if b != a)
            adj[a].discard(v)
            bits[a] = (bits[a] | mask) & ~(1 << a) & ~(1 << v)
        alive.discard(v)
        del scores[v]
        touched = set(nb)
        for a in nb:
            touched |= adj[a]
        for u in touched & alive:  # only the neighbours' own adjacency changed; the others' fill may have
            if u in nb:
                sizes[u] = size(u)
            scores[u] = (fill(u), sizes[u], u)
        adj[v] = set()
        bits[v] = 0
    # keep maximal cliques only, in elimination order
    cliques_sorted = sorted(range(len(cliques)), key=lambda i: -len(cliques[i]))
    maximal: list[frozenset] = []
    holding: dict = {}  # vertex -> the maximal cliques kept so far that hold it
    for i in cliques_sorted:
        c = cliques[i]
        if c and not any(c <= m for m in holding.get(next(iter(c)), ())):
            maximal.append(c)
            for v in c:
                holding.setdefault(v, []).append(c)
    order = {c: i for i, c in enumerate(cliques)}
    maximal.sort(key=order.__getitem__)
    return [tuple(domain.variables[i] for i in sorted(c)) for c in maximal]


@dataclass(frozen=True)
class JunctionTree:
    """A rooted junction tree over a :class:`Domain`.

    Build it with :meth:`JunctionTree.build`; calibrate a model on it with :meth:`calibrate`.

    Attributes
    ----------
    cliques : tuple of tuples
        Variables of each clique (in domain order).
    parent : tuple of int
        Parent clique of each clique, ``-1`` for the root (clique 0).
    order : tuple of int
        Cliques from the root outwards (every parent before its children).
    separators : tuple of tuples
        Variables a clique shares with its parent (empty for the root, or between components).

    Parameters
    ----------
    domain : Domain
    cliques, parent, order, separators : tuple
        See Attributes; built by :meth:`build`.

    Examples
    --------
    >>> d = Domain(("A", "B", "C"), (2, 2, 2))
    >>> jt = JunctionTree.build(d, [("A", "B"), ("B", "C")])
    >>> sorted(jt.cliques)
    [('A', 'B'), ('B', 'C')]
    """

    domain: Domain
    cliques: tuple
    parent: tuple
    order: tuple
    separators: tuple
    _children: tuple = field(repr=False, compare=False, default=())
    _memo: dict = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def build(
        cls,
        domain: Domain,
        scopes: Iterable[Sequence[Hashable]],
        max_cells: int | None = DEFAULT_MAX_CELLS,
    ) -> "JunctionTree":
        """Triangulate the graph of ``scopes`` (min-fill, deterministic ties), take its maximal cliques and
        join them by a maximum-weight spanning tree.

        Parameters
        ----------
        domain : Domain
        scopes : iterable of sequences
            The factors' scopes.
        max_cells : int or None
            Refuse a tree whose clique tables hold more entries (``JunctionTreeTooLarge``).

        Returns
        -------
        JunctionTree

        Raises
        ------
        JunctionTreeTooLarge
            The tree exceeds ``max_cells``.

        Examples
        --------
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> sorted(jt.cliques)
        [('A', 'B'), ('B', 'C')]
        """
        scopes = [domain.check(s, "scopes") for s in scopes]
        cliques = _elimination_cliques(domain, scopes)
        cells = sum(domain.size(c) for c in cliques)
        if max_cells is not None and cells > max_cells:
            biggest = max(cliques, key=domain.size)
            raise JunctionTreeTooLarge(
                f"the junction tree needs {cells:,} table cells (largest clique {len(biggest)} variables, "
                f"{domain.size(biggest):,} cells), more than max_cells={max_cells:,}; use loopy belief "
                f"propagation (method='loopy') or raise max_cells"
            )
        g = nx.Graph()
        g.add_nodes_from(range(len(cliques)))
        sets = [set(c) for c in cliques]
        members: dict = {}
        for i, c in enumerate(cliques):
            for v in c:
                members.setdefault(v, []).append(i)
        for i in range(len(cliques)):
            partners = {j for v in cliques[i] for j in members[v] if j > i}
            for j in sorted(partners):
                g.add_edge(i, j, weight=len(sets[i] & sets[j]))
        comps = [min(c) for c in nx.connected_components(g)]
        for a, b in zip(sorted(comps), sorted(comps)[1:]):
            g.add_edge(a, b, weight=0)
        tree = nx.maximum_spanning_tree(g, algorithm="kruskal")
        root = max(range(len(cliques)), key=lambda i: (domain.size(cliques[i]), -i))
        parent = [-1] * len(cliques)
        order = [root]
        for a, b in nx.bfs_edges(tree, root, sort_neighbors=sorted):
            parent[b] = a
            order.append(b)
        seps = tuple(
            tuple(v for v in cliques[i] if parent[i] >= 0 and v in sets[parent[i]]) for i in range(len(cliques))
        )
        children: list[list] = [[] for _ in cliques]
        for i in order[1:]:
            children[parent[i]].append(i)
        return cls(domain, tuple(cliques), tuple(parent), tuple(order), seps, tuple(map(tuple, children)))

    @property
    def children(self) -> tuple:
        return self._children

    @property
    def cells(self) -> int:
        """Total number of entries of the clique tables."""
        return sum(self.domain.size(c) for c in self.cliques)

    def find_home(self, scope: Sequence[Hashable]) -> int | None:
        """Index of the smallest clique containing ``scope``, or None if no clique does.

        Parameters
        ----------
        scope : sequence

        Returns
        -------
        int or None

        Examples
        --------
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> jt.find_home(("A", "C")) is None
        True
        """
        key = ("home of", tuple(scope))
        if key in self._memo:  # queries repeat their scopes (a notebook's marginals, a fit's released tables)
            return self._memo[key]
        self._memo[key] = found = self._find_home(key[1])
        return found

    def _find_home(self, scope: tuple) -> int | None:
        if not scope:
            return min(range(len(self.cliques)), key=lambda i: self.domain.size(self.cliques[i])) if self.cliques else None
        return self._smallest_of("cliques", self.cliques, range(len(self.cliques)), set(scope))

    def _smallest_of(self, name: str, tables: Sequence[tuple], ids: Iterable[int], s: set) -> int | None:
        """The smallest of ``tables[i]`` (i in ``ids``; ties: lower i) holding every variable of the
        non-empty set ``s``, or None, through an index variable -> the tables holding it, smallest first,
        built once per tree and ``name``: only the tables of ``s``'s rarest variable are looked at."""
        index = self._memo.get(("holding", name))
        if index is None:
            index = {}
            for i in sorted(ids, key=lambda i: (self.domain.size(tables[i]), i)):
                for v in tables[i]:
                    index.setdefault(v, []).append(i)
            self._memo[("holding", name)] = index
        v = min(s, key=lambda u: len(index.get(u, ())))
        return next((i for i in index.get(v, ()) if s <= set(tables[i])), None)

    def _smallest_holder(self, scope: tuple) -> tuple[int, bool, Callable] | None:
        """``(i, False, sum)`` for clique i or ``(i, True, sum)`` for the separator of clique i with its
        parent: the smallest table of the calibrated tree that holds ``scope`` (a query sums the fewest
        cells there) and the planned sum of that table onto ``scope``; None when no clique holds it.
        Memoised per scope."""
        key = ("smallest holder", scope)
        if key in self._memo:
            return self._memo[key]
        i = self.find_home(scope)
        found: tuple[int, bool, Callable] | None = None
        if i is not None:
            j = self._smallest_of("separators", self.separators, self.order[1:], set(scope)) if scope else None
            if j is not None and self.domain.size(self.separators[j]) < self.domain.size(self.cliques[i]):
                i, on_separator, table = j, True, self.separators[j]
            else:
                on_separator, table = False, self.cliques[i]
            found = (i, on_separator, sum_plan(self.domain.shape(table), tuple(table.index(v) for v in scope)))
        self._memo[key] = found
        return found

    def home(self, scope: Sequence[Hashable]) -> int:
        """Index of the smallest clique containing ``scope``.

        Parameters
        ----------
        scope : sequence

        Returns
        -------
        int

        Raises
        ------
        ValueError
            No clique contains it.

        Examples
        --------
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> jt.cliques[jt.home(("C",))]
        ('B', 'C')
        """
        i = self.find_home(scope)
        if i is None:
            raise ValueError(f"no clique of the junction tree contains {tuple(scope)}")
        return i

    def _plan(self) -> dict:
        """Axis bookkeeping computed once per tree. Cliques and separators list their variables in
        domain order, so a separator table broadcasts into either clique by a reshape alone."""
        plan = self._memo.get("plan")
        if plan is None:
            dom = self.domain
            shapes = [dom.shape(c) for c in self.cliques]
            child_sum, in_child, in_parent, parent_sum = {}, {}, {}, {}
            for i in self.order[1:]:
                sep, par = set(self.separators[i]), self.cliques[self.parent[i]]
                child_sum[i] = tuple(a for a, v in enumerate(self.cliques[i]) if v not in sep)
                parent_sum[i] = tuple(a for a, v in enumerate(par) if v not in sep)
                in_child[i] = tuple(n if v in sep else 1 for v, n in zip(self.cliques[i], shapes[i]))
                in_parent[i] = tuple(n if v in sep else 1 for v, n in zip(par, shapes[self.parent[i]]))
            sizes = np.array([int(np.prod(sh)) for sh in shapes], dtype=np.intp)
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
            plan = dict(shapes=shapes, sizes=sizes, starts=starts, child_sum=child_sum, parent_sum=parent_sum, in_child=in_child,
                        in_parent=in_parent, log_cells=float(np.log(sizes).sum()) if sizes.size else 0.0)
            self._memo["plan"] = plan
        return plan

    def _homes(self, scopes: tuple) -> list[int]:
        key = ("homes", scopes)
        homes = self._memo.get(key)
        if homes is None:
            homes = [self.home(s) for s in scopes]
            self._memo[key] = homes
        return homes

    def calibrate(self, model: MarkovNetwork) -> "Calibration":
        """Exact clique marginals and log Z of ``model`` (whose scopes must fit in the cliques).

        Parameters
        ----------
        model : MarkovNetwork
            On the tree's domain; every factor's scope inside a clique.

        Returns
        -------
        Calibration

        Raises
        ------
        ValueError
            Another domain, or a model that gives every configuration probability zero.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.zeros((2, 2)))])
        >>> round(JunctionTree.build(d, m.scopes).calibrate(m).log_z, 6) == round(float(np.log(4)), 6)
        True
        """
        return self.calibrate_potentials(self._potentials(model))

    def _potentials(self, model: MarkovNetwork) -> list:
        if model.domain != self.domain:
            raise ValueError("model: its domain differs from the junction tree's")
        psi = [np.zeros(sh) for sh in self._plan()["shapes"]]
        for f, i in zip(model.factors, self._homes(tuple(model.scopes))):
            psi[i] += align(f.values, f.variables, self.cliques[i])
        return psi

    def max_configuration(self, model: MarkovNetwork) -> tuple[np.ndarray, float]:
        """The most probable configuration of ``model`` (one state code per domain variable) and its
        unnormalised log-probability, by max-sum messages towards the root and a traceback from it
        (each clique takes its best entry given the variables its parent has fixed, so ties resolve
        consistently).

        Parameters
        ----------
        model : MarkovNetwork

        Returns
        -------
        codes : numpy.ndarray of int
            One state code per domain variable.
        log_p : float
            The configuration's summed log-potentials.

        Raises
        ------
        ValueError
            A model that gives every configuration probability zero.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1, 2, 3], [4, 9, 5]]))])
        >>> codes, log_p = JunctionTree.build(d, m.scopes).max_configuration(m)
        >>> codes.tolist(), round(float(np.exp(log_p)), 6)
        ([1, 1], 9.0)
        """
        psi = self._potentials(model)
        plan = self._plan()
        up: list = [None] * len(self.cliques)
        inward: list = [None] * len(self.cliques)
        for i in reversed(self.order):
            acc = np.array(psi[i], dtype=float, copy=True)
            for c in self._children[i]:
                acc += up[c].reshape(plan["in_parent"][c])
            inward[i] = acc
            if self.parent[i] >= 0:
                up[i] = acc.max(axis=plan["child_sum"][i]) if plan["child_sum"][i] else acc
        best = float(np.max(inward[self.order[0]]))
        if not np.isfinite(best):
            raise ValueError("the model assigns zero probability to every configuration")
        codes: dict = {}
        for i in self.order:
            clique = self.cliques[i]
            sub = inward[i][tuple(codes[v] if v in codes else slice(None) for v in clique)]
            free = [v for v in clique if v not in codes]
            if free:
                for v, c in zip(free, np.unravel_index(int(np.argmax(sub)), sub.shape)):
                    codes[v] = int(c)
        return np.array([codes.get(v, 0) for v in self.domain.variables], dtype=np.int64), best

    def calibrate_potentials(self, psi: Sequence[np.ndarray]) -> "Calibration":
        """Calibrate given clique log-potentials (one array per clique, axes as in ``cliques``).

        Upward pass: log-sum-exp messages towards the root. Downward pass: every child's separator
        marginal is read off its parent's belief, and the message to the child is that marginal minus the
        child's own upward message (a log-space Hugin division); all the messages of one level of the
        tree are computed together. On large cliques (``SCALED_MIN_CELLS``) or few, a scaled-probability
        schedule runs clique by clique, faster there: exact by construction when the potentials' finite
        log-ranges add up to less than ``SCALED_RANGE``, and beyond it (finite potentials) checked for
        underflow, with the log schedule taking over when a product lost digits.

        Parameters
        ----------
        psi : sequence of numpy.ndarray
            One log-potential table per clique (-inf allowed).

        Returns
        -------
        Calibration

        Raises
        ------
        ValueError
            NaN or +inf potentials, or probability zero everywhere.

        Examples
        --------
        >>> d = Domain(("A", "B", "C"), (2, 2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]])), Factor(("B", "C"), np.zeros((2, 2)))])
        >>> jt = JunctionTree.build(d, m.scopes)
        >>> round(jt.calibrate_potentials([np.zeros((2, 2)), np.zeros((2, 2))]).log_z, 6) == round(float(np.log(8)), 6)
        True
        """
        shapes = self._plan()["shapes"]
        if len(psi) != len(shapes) or any(np.shape(p) != sh for p, sh in zip(psi, shapes)):
            raise ValueError(f"psi: expected one table per clique with shapes {shapes}")
        return self.calibrate_flat(np.concatenate([np.asarray(p, dtype=float).ravel() for p in psi]))

    def calibrate_flat(self, psi: np.ndarray, overwrite: bool = False) -> "Calibration":
        """:meth:`calibrate_potentials` for the clique tables concatenated (each ravelled in C order,
        cliques in ``cliques`` order): the layout learners keep, checked in a few vector operations.

        Parameters
        ----------
        psi : numpy.ndarray
            Flat log-potentials, ``cells`` entries.
        overwrite : bool
            ``psi`` is the caller's scratch array and may be overwritten (saves a copy on the hot path); the
            calibration may keep its memory as the flat beliefs.

        Returns
        -------
        Calibration

        Raises
        ------
        ValueError
            Another length, NaN or +inf potentials, or probability zero everywhere.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 2))
        >>> jt = JunctionTree.build(d, [("A", "B")])
        >>> round(jt.calibrate_flat(np.zeros(4)).log_z, 6) == round(float(np.log(4)), 6)
        True
        """
        plan = self._plan()
        starts, sizes, shapes = plan["starts"], plan["sizes"], plan["shapes"]
        psi = np.asarray(psi, dtype=float)
        scaled_shape = self._few_large_cliques()
        if psi.shape != (plan["cells"],):
            raise ValueError(f"psi: expected a flat vector of {plan['cells']} clique cells, got shape {psi.shape}")
        if not scaled_shape:  # it checks for NaN / +inf only when they have reached the root
            return self._calibrate_log(psi, copy=not overwrite)
        tops = np.maximum.reduceat(psi, starts)  # NaN propagates
        _check_potentials(tops)
        lows = np.minimum.reduceat(psi, starts)
        if (lows == -np.inf).any():  # each table's finite minimum
            lows = np.minimum.reduceat(np.where(psi == -np.inf, np.inf, psi), starts)
        ranges = np.where(np.isfinite(lows), tops - lows, 0.0)
        # below SCALED_RANGE in all, no product can underflow; above it, finite potentials (no cell at zero
        # probability) try the scaled schedule, which checks its products, and the log schedule takes over if
        # one underflowed
        checked = float(ranges.sum()) >= SCALED_RANGE
        if checked and (plan.get("scaled_wait", 0) > 0 or not np.isfinite(lows).all()):
            plan["scaled_wait"] = max(0, plan.get("scaled_wait", 0) - 1)
            return self._calibrate_log(psi)
        if (tops == -np.inf).any():
            raise ValueError(_ZERO)
        # exp(psi - the table's maximum), clique by clique; in the caller's array when nothing can send the
        # calibration back to the log schedule (which needs psi)
        E = psi if overwrite and not checked else np.empty_like(psi)

        top_of = tops.tolist()

        def scale(side: list) -> None:  # exp(psi - the table's maximum) on a side's stretches of cells
            for lo, hi, j in side:
                seg = E[lo:hi]
                np.subtract(psi[lo:hi], top_of[j], out=seg)
                np.exp(seg, out=seg)
        halves(scale, self._halves()["sides"])
        bounds = zip(starts, starts + sizes, shapes)
        try:
            return self._calibrate_scaled([E[a:b].reshape(sh) for a, b, sh in bounds], tops.tolist(), checked, flat=E)
        except _OutOfRange:
            plan["scaled_wait"] = SCALED_WAIT  # the potentials change little between calls: try again later
            return self._calibrate_log(psi)

    def _few_large_cliques(self) -> bool:
        """Whether the tree's cliques are large (``SCALED_MIN_CELLS`` cells on average) or few
        (``BATCH_MIN_CLIQUES``): then calibration runs clique by clique (the scaled schedule), elsewhere
        level by level through index arrays (decided once per tree)."""
        plan = self._plan()
        if plan.get("cells") is None:
            sizes = plan["sizes"]
            plan["cells"] = int(sizes.sum())
            # (a path-shaped tree needed the scaled schedule too while the levels ran from one end; rooted at
            # its centre, a chain of 300 calibrates batched in 4.6 ms against 6.6 ms scaled)
            plan["scaled_shape"] = bool(sizes.mean() >= SCALED_MIN_CELLS or len(self.cliques) < BATCH_MIN_CLIQUES)
        return plan["scaled_shape"]

    def _levels(self, centre: bool = True) -> "_Levels":
        """The batched schedule's index arrays (built once per tree). Calibration and the Fisher product
        (exact, whatever the root) run on the tree re-rooted at a centre, which makes the levels fewest
        (Adult's Chow-Liu tree: 5 instead of 7). Sampling keeps the tree's own root (``centre=False``), so
        that a seed draws the same tables whatever the schedule's rooting."""
        key = "levels" if centre else "levels_own_root"
        lv = self._memo.get(key)
        if lv is None:
            lv = self._memo[key] = _Levels.of(self, centre)
        return lv

    def _separator_groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every non-root clique's cells grouped by the cell of its separator with the parent: the
        cells (flat indices), each one's separator group, and where each group's run begins (all
        levels of :meth:`_levels` renumbered into one range; built once per tree)."""
        groups = self._memo.get("separator_groups")
        if groups is None:
            cells, seps, starts, base, top = [], [], [], 0, 0
            for L in self._levels().levels:
                cells.append(L.child_cells)
                seps.append(L.child_sep + base)
                starts.append(L.child_seg + top)
                base += L.n_sep
                top += L.child_cells.size
            empty = np.zeros(0, dtype=np.intp)
            groups = tuple(np.concatenate(a).astype(np.intp) if a else empty for a in (cells, seps, starts))
            self._memo["separator_groups"] = groups
        return groups

    def fisher(self, beliefs: np.ndarray, centred: bool = True) -> Callable[..., Any]:
        """``v -> F v``: the derivative of the clique marginals along a change ``v`` of the log-potentials,
        at the calibrated ``beliefs`` (both flat, in the cell layout), exact to rounding.

        ``F v = mu (E[g | x_C] - E[g])`` cell by cell, where ``g = sum_C v_C(x_C)``: the conditional
        expectations come from two passes over the tree's levels, upwards (each clique's expectation of
        its subtree's part of g given its separator, through the conditionals ``mu_C / mu_S``) and
        downwards (the rest of the tree's part), in the layout and index arrays of the log schedule
        but with no exp or log. A forward difference of two calibrations loses half the digits (a
        relative error of about 1e-3 at a thousand cliques), which stalls conjugate gradients. Trees of
        large cliques (``SCALED_MIN_CELLS`` on average) take the same passes clique by clique on whole
        arrays, with no index array (:meth:`_fisher_cliques`).

        Parameters
        ----------
        beliefs : numpy.ndarray
            Flat clique marginals of a calibration (:attr:`Calibration.flat_beliefs`).
        centred : bool
            False: the callable returns ``(w, mean)`` with ``F v = w - mean * beliefs``, ``w`` the
            beliefs times ``E[g | cell]`` and ``mean = E[g]``. For callers that sum the cells onto
            smaller tables (:class:`ppgm.learners.mle.MarginalOracle`'s parameters): the centring is
            then one product with the tables' own marginals instead of two passes over every cell.

        Returns
        -------
        callable
            ``v -> F v`` for a flat change of the clique log-potentials (each clique's part of the
            result sums to zero); ``apply(v, overwrite=True)`` may use ``v``'s memory for the result (a
            scratch array of the caller's: saves a copy of the cells). One callable serves one thread
            at a time (it keeps a scratch array between calls).

        Examples
        --------
        >>> d = Domain(("A", "B", "C"), (2, 3, 2))
        >>> jt = JunctionTree.build(d, [("A", "B"), ("B", "C")])
        >>> rng = np.random.default_rng(0)
        >>> psi, v = rng.normal(size=jt.cells), rng.normal(size=jt.cells)
        >>> mu = jt.calibrate_flat(psi).flat_beliefs
        >>> h = 1e-5                                                       # a central difference
        >>> fd = (jt.calibrate_flat(psi + h * v).flat_beliefs - jt.calibrate_flat(psi - h * v).flat_beliefs) / (2 * h)
        >>> bool(np.allclose(jt.fisher(mu)(v), fd, atol=1e-8))
        True
        >>> w, mean = jt.fisher(mu, centred=False)(v)
        >>> bool(np.allclose(w - mean * mu, jt.fisher(mu)(v)))
        True
        """
        mu = np.asarray(beliefs, dtype=float)
        large = float(self._plan()["sizes"].mean()) >= SCALED_MIN_CELLS  # (small ones: the levels' few calls win)
        return self._fisher_cliques(mu, centred) if large else self._fisher_levels(mu, centred)

    def _fisher_levels(self, mu: np.ndarray, centred: bool = True) -> Callable[..., Any]:
        """:meth:`fisher` level by level: each level's cliques gathered through the schedule's index arrays."""
        lv, plan = self._levels(), self._plan()
        levels, root = lv.levels, lv.root
        a, n = int(plan["starts"][root]), int(plan["sizes"][root])
        dense = self._dense_parents()  # large parents, read as arrays; the other edges through index arrays
        per_level = []  # the beliefs each level reads, gathered once: children's, parents', 1 / separator mass
        for L, edges in zip(levels, dense):
            mu_c = mu[L.child_cells]
            mass = np.add.reduceat(mu_c, L.child_seg)
            # a separator cell of mass below TINY_MASS (1e-290) gets no conditional expectation: every cell it
            # reaches has a belief below that, so its share of F v is as small, and 1 / mass would overflow
            # for a subnormal mass
            inv = np.divide(1.0, mass, out=np.zeros_like(mass), where=mass > TINY_MASS)
            pc, ps, seg = L.parent_cells, L.parent_sep, L.parent_seg
            if edges:  # the gathered side leaves out the large parents' separator cells (no segments: bincount)
                gathered = np.ones(L.n_sep, dtype=bool)
                for k, *_ in edges:
                    gathered[L.edge_start[k]:L.edge_start[k] + L.edge_size[k]] = False
                keep = gathered[ps]
                pc, ps, seg = pc[keep], ps[keep], None
            # the conditionals of each side given the separator, so that a product needs no division pass
            per_level.append((mu_c * inv[L.child_sep], pc, ps, seg, mu[pc] * inv[ps], inv))
        mu_parent = {start: mu[start:start + int(np.prod(shape))].reshape(shape)
                     for edges in dense for _, start, shape, _ in edges}

        def apply(v: np.ndarray, overwrite: bool = False) -> Any:  # F v, or (w, E[g]) uncentred
            e = np.asarray(v, dtype=float) if overwrite else np.array(v, dtype=float)
            ups = []
            for L, edges, (cond_c, pc, ps, *_) in zip(reversed(levels), reversed(dense), reversed(per_level)):
                u = np.add.reduceat(cond_c * e[L.child_cells], L.child_seg)  # deepest first: E[subtree | separator]
                ups.append(u)
                if pc.size:
                    np.add.at(e, pc, u[ps])
                for k, start, shape, steps in edges:
                    b = int(L.edge_start[k])  # spread by BLAS steps: a plain broadcast loops over short inner blocks
                    e[start:start + mu_parent[start].size].reshape(shape)[...] += spread_steps(u[b:b + int(L.edge_size[k])], steps, shape)
            for L, edges, (_, pc, ps, seg, cond_p, inv), u in zip(levels, dense, per_level, reversed(ups)):  # root outwards
                if seg is not None:
                    down = np.add.reduceat(cond_p * e[pc], seg)
                else:
                    down = np.bincount(ps, weights=cond_p * e[pc], minlength=L.n_sep) if pc.size else np.zeros(L.n_sep)
                weighted: dict = {}
                for k, start, shape, steps in edges:
                    t = weighted.get(start)
                    if t is None:  # the parent's mu * e, once for all its children at this level
                        t = weighted[start] = mu_parent[start] * e[start:start + mu_parent[start].size].reshape(shape)
                    b = int(L.edge_start[k])
                    down[b:b + int(L.edge_size[k])] = np.ravel(sum_steps(t, steps)) * inv[b:b + int(L.edge_size[k])]
                down -= u
                e[L.child_cells] += down[L.child_sep]
            e *= mu
            mean = float(e[a:a + n].sum())
            if not centred:
                return e, mean
            e -= mu * mean
            return e
        return apply

    def _fisher_cliques(self, mu: np.ndarray, centred: bool = True) -> Callable[..., Any]:
        """:meth:`fisher` clique by clique on whole arrays, as the scaled calibration runs: upwards, each
        clique's part of g plus its children's expectations given their separators, weighted by its
        belief and summed onto its own separator (divided by the separator's mass); downwards, each
        child's expectation of the rest of the tree given the separator, from its parent's, added. Sums
        and broadcasts between a clique and a separator go by BLAS steps on large cliques (``_sum``,
        ``_into``). Against the levels' index arrays: 75 against 123 ms on CHILD's 9.7 million cells
        (6 cliques), 19 against 29 ms on 3.2 million of Adult's (8 cliques), 0.35 against 1.3 ms on the
        10 x 10 third-order chain; on small cliques the levels' few calls win (42 against 14 us on a
        tree of five 16-cell cliques). Downwards, each clique's cells are final when its parent's part
        has been added: they are weighted by the belief in place, and its children's expectations are
        summed from that (one pass fewer than weighting a copy and again at the end)."""
        plan = self._plan()
        starts, sizes, shapes = plan["starts"], plan["sizes"], plan["shapes"]
        order, children, parent = self.order, self._children, self.parent
        k, root = len(self.cliques), self.order[0]
        mus = [mu[a:a + n].reshape(sh) for a, n, sh in zip(starts, sizes, shapes)]
        inv: list = [None] * k  # 1 / separator mass (zero below TINY_MASS, as in the levels' product)
        for i in range(k):
            if parent[i] >= 0:
                axes = plan["child_sum"][i]
                mass = _sum(mus[i], axes) if axes else mus[i].copy()
                inv[i] = np.divide(1.0, mass, out=np.zeros_like(mass), where=mass > TINY_MASS)

        parts, cut_up, cut_down = (self._halves()[key] for key in ("parts", "cut_up", "cut_down"))
        scratch: list = []  # one clique's worth of cells for the upward products, kept between calls

        def apply(v: np.ndarray, overwrite: bool = False) -> Any:  # F v, or (w, E[g]) uncentred
            out = np.asarray(v, dtype=float) if overwrite else np.array(v, dtype=float)
            e = [out[a:a + n].reshape(sh) for a, n, sh in zip(starts, sizes, shapes)]  # views: updated in place
            if not scratch:
                scratch.append(np.empty(int(sizes.max())))
            up: list = [None] * k
            down: list = [None] * k

            def upward(i: int, r: slice) -> Any:  # rows r: the children's expectations in, the product onto the separator
                t, m = _cut(e[i], r), _cut(mus[i], r)
                for c in children[i]:
                    _into_rows(np.add, t, up[c], plan["in_parent"][c], plan["parent_sum"][c], r, cut_up[c])
                if parent[i] < 0:
                    return float(np.vdot(m, t))  # the root's part of E[g]
                axes = plan["child_sum"][i]
                w = np.multiply(m, t, out=_rows_of(scratch[0], shapes[i], r))
                return _sum(w, axes) if axes else w.copy()

            def downward(i: int, r: slice) -> list:  # rows r: the parent's part in, weighted by the belief in place
                t = _cut(e[i], r)
                if parent[i] >= 0:
                    _into_rows(np.add, t, down[i], plan["in_child"][i], plan["child_sum"][i], r, cut_down[i])
                t *= _cut(mus[i], r)
                return [(_sum(t, plan["parent_sum"][c]) if plan["parent_sum"][c] else t.copy()) for c in children[i]]

            mean = 0.0
            for i in reversed(order):  # leaves first: E[subtree's part of g | separator]
                got = halves(lambda r, i=i: upward(i, r), parts[i])
                if parent[i] < 0:
                    mean = float(sum(got))  # E[g]
                else:
                    up[i] = _joined(got, 0 not in plan["child_sum"][i]) * inv[i]
            for i in order:  # root outwards: e becomes E[g | clique cell], then weighted by the belief in place
                got = halves(lambda r, i=i: downward(i, r), parts[i])
                for j, c in enumerate(children[i]):
                    down[c] = _joined([g[j] for g in got], 0 not in plan["parent_sum"][c]) * inv[c] - up[c]
            if not centred:
                return out, mean
            out -= mean * mu
            return out
        return apply

    def _halves(self) -> dict:
        """How the passes cut large cliques (made once per tree): ``parts``, each clique's rows
        (:func:`_row_halves`); ``cut_up`` / ``cut_down``, whether the separator with the parent holds the
        parent's / the clique's own first variable (that axis not summed: the separator is then cut alike);
        ``sides``, the exp's stretches of cells ``(lo, hi, clique)`` for two threads (:func:`_two_sides`)."""
        out = self._memo.get("halves")
        if out is None:
            plan, parent = self._plan(), self.parent
            k = len(self.cliques)
            out = self._memo["halves"] = {
                "parts": [_row_halves(sh) for sh in plan["shapes"]],
                "cut_up": [bool(parent[i] >= 0 and 0 not in plan["parent_sum"][i]) for i in range(k)],
                "cut_down": [bool(parent[i] >= 0 and 0 not in plan["child_sum"][i]) for i in range(k)],
                "sides": _two_sides(plan["starts"].tolist(), plan["sizes"].tolist(), range(k))}
        return out

    def _dense_parents(self) -> list:
        """Per level of the centre-rooted schedule, the edges whose parent has at least DENSE_PARENT cells:
        ``(edge, parent start, parent shape, the axis sums onto the separator)``.
        The Fisher product reads such a parent as one array (a broadcast up, axis sums down) instead of
        gathering its cells once per child through index arrays."""
        key = "dense_parents"
        out = self._memo.get(key)
        if out is None:
            plan, out = self._plan(), []
            for L in self._levels().levels:
                edges = []
                for k, (c, p) in enumerate(zip(L.edge_child, L.edge_parent)):
                    if int(plan["sizes"][p]) < DENSE_PARENT:
                        continue
                    shape = tuple(plan["shapes"][p])
                    child = set(self.cliques[c])  # the separator: the cliques' intersection, in domain order
                    steps = axis_steps(shape, [ax for ax, v in enumerate(self.cliques[p]) if v not in child])
                    edges.append((k, int(plan["starts"][p]), shape, steps))
                out.append(edges)
            self._memo[key] = out
        return out

    def inverse_fisher(self, beliefs: np.ndarray, ridge: float = 0.0) -> Callable[[np.ndarray], np.ndarray]:
        """The inverse of the Fisher information of the clique-indicator statistics at ``beliefs``
        (flat clique marginals), as a product ``v -> J v`` in the flat cell layout.

        A model on a junction tree is its clique marginals over its separator marginals, so the
        log-potentials ``log mu_C - log mu_S(C)`` (each clique over its separator with the parent) map
        marginals back to parameters, and their derivative J inverts the Fisher information F on
        consistent directions: ``F J v = v`` whenever v changes the cliques' shared margins alike. J is
        block-diagonal, one block per clique: ``diag(1 / mu_C) - M' diag(1 / mu_S) M`` with M summing
        the clique onto its separator, positive semi-definite by Cauchy-Schwarz. ``ridge`` is added to
        every cell (and, summed, to the separators) before inverting, so that J approximates
        ``(F + ridge)^-1`` where cells are rarer than the ridge: the preconditioner of an L2-penalised
        Newton step, whose conjugate gradients then take a few products at any size of tree.

        Parameters
        ----------
        beliefs : numpy.ndarray
            Flat clique marginals (:attr:`Calibration.flat_beliefs`), non-negative.
        ridge : float
            Added to every cell; must be positive where a belief is zero.

        Returns
        -------
        callable
            ``v -> J v`` for flat vectors (or ``(cells, B)`` columns) in the cell layout.

        Examples
        --------
        >>> d = Domain(("A", "B", "C"), (2, 3, 2))
        >>> jt = JunctionTree.build(d, [("A", "B"), ("B", "C")])
        >>> rng = np.random.default_rng(0)
        >>> psi = rng.normal(size=jt.cells)
        >>> mu = jt.calibrate_flat(psi).flat_beliefs
        >>> v = jt.calibrate_flat(rng.normal(size=jt.cells)).flat_beliefs - mu   # consistent: two models' marginals apart
        >>> h = 1e-6                                                              # F (J v) by a forward difference
        >>> Fv = (jt.calibrate_flat(psi + h * jt.inverse_fisher(mu)(v)).flat_beliefs - mu) / h
        >>> bool(np.allclose(Fv, v, atol=1e-4))
        True
        """
        w = np.asarray(beliefs, dtype=float) + ridge
        cells, sep, starts = self._separator_groups()
        ws = np.add.reduceat(w[cells], starts) if cells.size else np.zeros(0)
        inv_w, inv_ws = 1.0 / w, 1.0 / ws

        def apply(v: np.ndarray) -> np.ndarray:
            out = v * (inv_w if v.ndim == 1 else inv_w[:, None])
            if cells.size:
                vs = np.add.reduceat(v[cells], starts, axis=0)
                vs *= inv_ws if v.ndim == 1 else inv_ws[:, None]
                out[cells] -= vs[sep]
            return out
        return apply

    def _calibrate_log(self, psi: np.ndarray, copy: bool = True) -> "Calibration":
        """The log-space schedule (any range of potentials), batched by depth: every clique of one level
        of the tree sends its message in the same few array operations (a gather of its cells grouped by
        separator cell, a log-sum-exp over each group shifted by the group's own maximum), so the cost is a
        handful of numpy calls per level, not per clique."""
        hi, lo = (float(psi.max()), float(psi.min())) if psi.ndim == 1 and psi.size else (math.nan, math.nan)
        if math.isfinite(hi) and math.isfinite(lo):  # the learners' case: no -inf to guard, no error to raise
            work = np.array(psi, dtype=float, copy=True) if copy else psi
            # every message and belief stays within [-K (hi - lo), sum of log clique sizes] once hi is taken off
            # every clique: then exp neither underflows nor overflows and no log-sum-exp needs its shift
            bounded = len(self.cliques) * (hi - lo) + self._plan()["log_cells"] < SCALED_RANGE
            if bounded:
                work -= hi
            logs, probs, lz = self._log_schedule(work, finite=True, bounded=bounded)
            if bounded:
                lz += len(self.cliques) * hi
        else:
            try:
                logs, probs, lz = self._log_schedule(np.array(psi, dtype=float, copy=True))
            except ValueError:
                _check_potentials(psi)  # NaN or +inf anywhere reaches the root's log Z: say which error it was
                raise
        cal = Calibration(self, float(lz))
        cal._cache["flat_logs"] = logs  # the per-clique tables are views of these, made on first use
        cal._cache["flat"] = probs
        return cal

    def calibrate_columns(self, psi: np.ndarray, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Calibrate many models on this tree at once: one per column, typically one model under B
        evidence sets. Either ``psi`` is ``(cells, B)`` flat log-potentials (as :meth:`calibrate_flat`'s,
        -inf where a column rules a cell out), or ``psi`` is one model's ``(cells,)`` and ``keep`` a
        ``(cells, B)`` boolean mask of the cells each column allows (evidence). The same level-batched
        schedule, each array operation over all B columns: in probability space with a log-scale per
        clique, message and column when the potentials' finite log-ranges add up to less than
        ``SCALED_RANGE`` (exact there, and no exp or log per message), in log space otherwise.

        Parameters
        ----------
        psi : numpy.ndarray
            ``(cells, B)`` log-potentials, finite or -inf; or ``(cells,)`` with ``keep``.
        keep : numpy.ndarray of bool, optional
            ``(cells, B)``: which cells each column keeps.

        Returns
        -------
        log_z : numpy.ndarray
            ``(B,)``: each column's log partition function (-inf where a column rules out everything).
        beliefs : numpy.ndarray
            ``(cells, B)``: each column's clique marginals, flat (NaN in a column whose log Z is -inf).

        Raises
        ------
        ValueError
            Another shape, or NaN / +inf potentials.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 2))
        >>> jt = JunctionTree.build(d, [("A", "B")])
        >>> keep = np.array([[True, True], [True, True], [True, False], [True, False]])  # the second sees A = 0
        >>> lz, b = jt.calibrate_columns(np.log([1.0, 2.0, 3.0, 4.0]), keep)
        >>> np.round(np.exp(lz), 6).tolist(), np.round(b[:, 1], 4).tolist()
        ([10.0, 3.0], [0.3333, 0.6667, 0.0, 0.0])
        """
        plan = self._plan()
        cells = int(plan["sizes"].sum())
        psi = np.asarray(psi, dtype=float)
        if keep is not None:
            keep = np.asarray(keep, dtype=bool)
            if psi.shape != (cells,) or keep.ndim != 2 or keep.shape[0] != cells:
                raise ValueError(f"psi, keep: expected psi of shape ({cells},) and keep of shape ({cells}, B), "
                                 f"got {psi.shape} and {keep.shape}")
        elif psi.ndim != 2 or psi.shape[0] != cells:
            raise ValueError(f"psi: expected shape ({cells}, B), one column of flat clique cells per model, got {psi.shape}")
        if np.isnan(psi).any() or (psi == np.inf).any():
            raise ValueError("psi: log-potentials must be finite or -inf")
        starts, sizes = plan["starts"], plan["sizes"]
        if keep is not None:
            base = psi
            finite = np.isfinite(base)
            tops = np.maximum.reduceat(np.where(finite, base, -np.inf), starts)
            lows = np.minimum.reduceat(np.where(finite, base, np.inf), starts)
            spread = float(np.where(np.isfinite(lows) & np.isfinite(tops), tops - lows, 0.0).sum())
            if spread < SCALED_RANGE:
                tops = _safe_top(tops)
                E = np.exp(base - np.repeat(tops, sizes))[:, None] * keep
                off = np.repeat(tops[:, None], keep.shape[1], axis=1)
                return self._scaled_columns(E, off)
            psi = np.where(keep, base[:, None], -np.inf)
        else:
            psi = psi.copy()
        _, probs, lz = self._log_schedule(psi, strict=False)
        return lz, probs

    def _scaled_columns(self, E: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The level-batched schedule in probability space on ``E`` (``(cells, B)``, each clique's entries
        at most 1, in place) with ``off`` (``(cliques, B)``) the log-scale of each clique's table: every
        message is divided by its maximum per column and the logarithm of that carried in ``off``."""
        lv, plan = self._levels(), self._plan()
        up: list = [None] * len(lv.levels)
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(len(lv.levels) - 1, -1, -1):  # deepest level first: messages to the parents
                L = lv.levels[k]
                m = np.add.reduceat(E[L.child_cells], L.child_seg, axis=0)
                s = np.maximum.reduceat(m, L.edge_start, axis=0)
                s = np.where(s > 0, s, 1.0)  # an all-zero message stays zero (its column's log Z is -inf)
                m /= np.repeat(s, L.edge_size, axis=0)
                up[k] = m
                np.add.at(off, L.edge_parent, off[L.edge_child] + np.log(s))
                np.multiply.at(E, L.parent_cells, m[L.parent_sep])
            root = lv.root
            a, n = plan["starts"][root], plan["sizes"][root]
            z = E[a:a + n].sum(axis=0)
            log_z = np.where(z > 0, np.log(z) + off[root], -np.inf)
            for k, L in enumerate(lv.levels):  # root outwards: each child reads its separator off its parent
                sep = np.add.reduceat(E[L.parent_cells], L.parent_seg, axis=0)
                down = np.where(up[k] > 0, sep / up[k], 0.0)
                d = np.maximum.reduceat(down, L.edge_start, axis=0)
                down /= np.repeat(np.where(d > 0, d, 1.0), L.edge_size, axis=0)
                E[L.child_cells] *= down[L.child_sep]
            mass = np.add.reduceat(E, plan["starts"], axis=0)
            E /= np.repeat(mass, plan["sizes"], axis=0)
        return log_z, E

    def _log_schedule(self, inward: np.ndarray, strict: bool = True, finite: bool = False, bounded: bool = False) -> tuple:
        """The batched log schedule, in place on flat log-potentials ``(cells,)`` or ``(cells, B)``:
        returns the log beliefs, the beliefs and the root's log Z (a scalar or one per column). With
        ``strict`` a model that rules out every configuration is an error; otherwise its log Z is -inf.

        ``finite``: every potential is finite (the learners' case), so no message can be -inf and the -inf
        bookkeeping (clamped maxima, the NaN clean-up, floating-point error states) is skipped. ``bounded``
        (with ``finite``): every value the schedule can form lies within ``SCALED_RANGE`` nats below zero
        and the clique sizes' log-sum above it, so each log-sum-exp is taken without a shift (three numpy
        calls instead of seven). A level whose parent cells are distinct adds its messages by plain indexing."""
        lv = self._levels()
        plan = self._plan()
        up: list = [None] * len(lv.levels)
        guard, shift = not finite, not bounded
        with contextlib.nullcontext() if finite else np.errstate(divide="ignore", invalid="ignore"):
            for k in range(len(lv.levels) - 1, -1, -1):  # deepest level first: messages to the parents
                L = lv.levels[k]
                up[k] = _lse_segments(inward[L.child_cells], L.child_sep, L.child_seg, guard, shift)
                if L.distinct_parents:
                    inward[L.parent_cells] += up[k][L.parent_sep]
                else:
                    np.add.at(inward, L.parent_cells, up[k][L.parent_sep])
            for k, L in enumerate(lv.levels):  # root outwards: each child reads its separator off its parent
                down = _lse_segments(inward[L.parent_cells], L.parent_sep, L.parent_seg, guard, shift)
                down -= up[k]
                if guard:
                    down[np.isnan(down)] = -np.inf
                inward[L.child_cells] += down[L.child_sep]
            starts, sizes = plan["starts"], plan["sizes"]
            if strict:  # every calibrated clique sums to Z: one log-sum-exp at the root normalises them all
                a, n = int(starts[lv.root]), int(sizes[lv.root])
                top = float(inward[a:a + n].max()) if shift else 0.0
                if not math.isfinite(top):  # -inf: no configuration; NaN / +inf: bad input (the caller tells which)
                    raise ValueError(_ZERO)
                lz = top + math.log(float(np.exp(inward[a:a + n] - top).sum()))
                inward -= lz
                return inward, np.exp(inward), lz
            tops = _safe_top(np.maximum.reduceat(inward, starts, axis=0))
            inward -= np.repeat(tops, sizes, axis=0)
            probs = np.exp(inward)
            mass = np.add.reduceat(probs, starts, axis=0)
            probs /= np.repeat(mass, sizes, axis=0)
            lz = np.log(mass) + tops
            inward -= np.repeat(np.log(mass), sizes, axis=0)
        root = lz[lv.root]
        return inward, probs, np.where(np.isfinite(root) & (tops[lv.root] > _LOWEST), root, -np.inf)

    def _calibrate_scaled(self, scaled: Sequence[np.ndarray], tops: Sequence[float], check: bool = False,
                          flat: np.ndarray | None = None) -> "Calibration":
        """The same schedule on ``scaled`` = exp(psi - max psi), one per clique, with a log-scale per
        table and message (``tops``, the tables' maxima). The arrays are updated in place and become the
        beliefs; ``flat``: the array they are views of, in order, which is then the calibration's
        :attr:`Calibration.flat_beliefs` (no copy).

        Exact in floating point when no product of a table and its normalised messages underflows, and
        several times faster: one exp per clique instead of one per message. The potentials' finite
        log-ranges adding up to less than ``SCALED_RANGE`` guarantees it. Otherwise, for tables with no
        zero cell, ``check``: every factor of a clique's final product is at most 1, so when its smallest
        cell is a normal number none of its partial products (nor the messages summed from them) lost a
        digit; ``_OutOfRange`` is raised when one is not (the caller then calibrates in log space).
        """
        plan = self._plan()
        k = len(self.cliques)
        zero = "the model assigns zero probability to every configuration (log Z = -inf)"
        up: list = [None] * k
        up_off = [0.0] * k
        inward: list = [None] * k
        off = [float(t) for t in tops]
        parent, children = self.parent, self._children
        parts, cut_up, cut_down = (self._halves()[key] for key in ("parts", "cut_up", "cut_down"))
        downs: list = [None] * k  # each clique's normalised message from its parent, multiplied in on its turn

        def upward(i: int, r: slice) -> Any:  # rows r: the children's messages in, the product onto the separator
            t = _cut(scaled[i], r)
            for c in children[i]:
                _into_rows(np.multiply, t, up[c], plan["in_parent"][c], plan["parent_sum"][c], r, cut_up[c])
            if parent[i] < 0:
                return None
            axes = plan["child_sum"][i]
            return _sum(t, axes) if axes else t.copy()

        def arrive(i: int, r: slice) -> tuple:  # rows r: the parent's message in; the smallest cell and the mass
            t = _cut(inward[i], r)
            if parent[i] >= 0:
                _into_rows(np.multiply, t, downs[i], plan["in_child"][i], plan["child_sum"][i], r, cut_down[i])
            return (float(t.min()) if check else 0.0), float(t.sum())

        def normalise(i: int, z: float, r: slice) -> list:  # rows r: the belief in place, summed onto the children's separators
            t = _cut(inward[i], r)
            t /= z
            return [_sum(t, plan["parent_sum"][c]) if plan["parent_sum"][c] else t for c in children[i]]

        for i in reversed(self.order):
            got = halves(lambda r, i=i: upward(i, r), parts[i])  # scaled[i], a fresh array, updated in place
            for c in children[i]:
                off[i] += up_off[c]
            inward[i] = scaled[i]
            if parent[i] >= 0:
                m = _joined(got, 0 not in plan["child_sum"][i])
                s = float(m.max())
                if s <= 0:  # with finite potentials (checked), only an underflow gives zero
                    raise _OutOfRange if check else ValueError(zero)
                m /= s
                up[i] = m
                up_off[i] = off[i] + math.log(s)
        beliefs: list = [None] * k
        log_z = None
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in self.order:
                got = halves(lambda r, i=i: arrive(i, r), parts[i])
                if check and min(g[0] for g in got) < _NORMAL:
                    raise _OutOfRange
                z = float(sum(g[1] for g in got))
                if z <= 0:
                    raise ValueError(zero)  # (not reached when checked: the smallest cell was normal)
                lz = math.log(z) + off[i]
                if log_z is None:
                    log_z = lz
                sums = halves(lambda r, i=i, z=z: normalise(i, z, r), parts[i])  # the clique's product is exp(lz) times it
                beliefs[i] = inward[i]
                for j, c in enumerate(children[i]):
                    sep = _joined([g[j] for g in sums], 0 not in plan["parent_sum"][c])
                    down = np.where(up[c] > 0, sep / up[c], 0.0)
                    d = float(down.max())
                    down /= d
                    downs[c] = down
                    off[c] += math.log(d) + lz - up_off[c]
        cal = Calibration(self, float(log_z), _probs=tuple(beliefs))  # type: ignore[arg-type]  # set in the first pass
        if flat is not None:
            cal._cache["flat"] = flat
        return cal


class _OutOfRange(Exception):
    """A product of the scaled schedule underflowed (calibrate in log space instead)."""


_NORMAL = float(np.finfo(float).tiny)  # the smallest normal float64: below it a product has lost digits


def _sum(t: np.ndarray, axes: tuple) -> np.ndarray:
    """A clique table summed onto a separator: by BLAS steps on tables of at least DENSE_PARENT cells
    (numpy's reduction loops over short inner blocks one at a time), numpy's own sum below."""
    return sum_axes(t, axes) if t.size >= DENSE_PARENT else t.sum(axis=axes)


def _into(op: np.ufunc, t: np.ndarray, m: np.ndarray, in_shape: tuple, axes: tuple) -> None:
    """``t = op(t, m)`` in place (``np.multiply``: a message times a table; ``np.add``: an expectation added),
    with the separator table ``m`` broadcast over ``t``'s other ``axes`` (``in_shape``: m's shape inside t),
    materialised by BLAS steps on large tables."""
    op(t, spread_axes(m, t.shape, axes) if t.size >= DENSE_PARENT and axes else m.reshape(in_shape), out=t)


SPLIT_CELLS = 1 << 18  # a clique of at least this many cells runs the Fisher product in two halves of its first axis


def _row_halves(shape: Sequence[int]) -> list:
    """The rows (slices of the first axis) a clique's passes are cut into: two halves on cliques of at least
    ``SPLIT_CELLS`` cells whose first axis has two states or more, run side by side
    (:func:`ppgm.core.blas_threads.halves`: memory bandwidth is per core); one slice of everything otherwise."""
    if len(shape) == 0 or shape[0] < 2 or math.prod(shape) < SPLIT_CELLS:
        return [slice(None)]
    m = int(shape[0]) // 2
    return [slice(0, m), slice(m, int(shape[0]))]


def _two_sides(starts: Sequence[int], sizes: Sequence[int], values: Sequence) -> list:
    """Stretches ``(lo, hi, value)`` of the flat cells for two threads of about equal cells (elementwise work:
    any cut gives the same result): a clique of ``SPLIT_CELLS`` or more cut in two, the others each to the
    lighter side; one side when no clique is that large."""
    if not sizes or max(sizes) < SPLIT_CELLS:
        return [[(a, a + n, v) for a, n, v in zip(starts, sizes, values)]]
    sides: list = [[], []]
    load = [0, 0]
    for a, n, v in sorted(zip(starts, sizes, values), key=lambda t: -t[1]):
        if n >= SPLIT_CELLS:
            m = n // 2
            sides[0].append((a, a + m, v))
            sides[1].append((a + m, a + n, v))
            load[0], load[1] = load[0] + m, load[1] + n - m
        else:
            j = int(load[1] < load[0])
            sides[j].append((a, a + n, v))
            load[j] += n
    return sides


def _cut(t: np.ndarray, r: slice) -> np.ndarray:
    """Rows ``r`` of a table (the whole table, of any dimension, for ``slice(None)``)."""
    return t if r == slice(None) else t[r]


def _rows_of(flat: np.ndarray, shape: Sequence[int], r: slice) -> np.ndarray:
    """Rows ``r`` of a table of ``shape`` laid out from the start of the flat scratch ``flat`` (a view)."""
    if r == slice(None):
        return flat[:math.prod(shape)].reshape(shape)
    inner = math.prod(shape[1:])
    lo, hi, _ = r.indices(int(shape[0]))
    return flat[lo * inner:hi * inner].reshape((hi - lo,) + tuple(shape[1:]))


def _into_rows(op: np.ufunc, t: np.ndarray, m: np.ndarray, in_shape: tuple, axes: tuple, r: slice, cut: bool) -> None:
    """:func:`_into` on rows ``r`` of a table (``t`` those rows): the separator table ``m`` cut alike when it
    holds the table's first variable (``cut``), whole otherwise."""
    if cut and r != slice(None):
        _into(op, t, m[r], (t.shape[0],) + tuple(in_shape[1:]), axes)
    else:
        _into(op, t, m, in_shape, axes)


def _joined(parts: list, cut: bool) -> np.ndarray:
    """A separator table from the halves' sums: stacked when the separator holds the first variable (each half
    summed its own rows), added otherwise (each half summed part of every cell)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts, axis=0) if cut else parts[0] + parts[1]


_ZERO = "the model assigns zero probability to every configuration (log Z = -inf)"


def _check_potentials(psi: np.ndarray) -> None:
    """Log-potentials (or their maxima) must be finite or -inf."""
    if not (psi < np.inf).all():  # False for NaN and for +inf
        raise ValueError("psi: log-potentials must be finite or -inf")


def _rerooted(tree: "JunctionTree") -> tuple[int, list, list]:
    """The tree re-rooted at a centre (the middle of a longest path, found by two breadth-first searches;
    the larger clique of two centres): the root, each clique's parent (-1 at the root) and the
    breadth-first order, neighbours visited in index order."""
    k = len(tree.cliques)
    adj: list = [[] for _ in range(k)]
    for c, p in enumerate(tree.parent):
        if p >= 0:
            adj[c].append(p)
            adj[p].append(c)
    adj = [sorted(a) for a in adj]

    def bfs(source: int) -> tuple:
        parent, order = [-1] * k, [source]
        seen = [False] * k
        seen[source] = True
        for i in order:  # grows while it is walked
            for j in adj[i]:
                if not seen[j]:
                    seen[j] = True
                    parent[j] = i
                    order.append(j)
        return parent, order

    _, order = bfs(tree.order[0])
    u = order[-1]  # a farthest clique: one end of a longest path
    parent, order = bfs(u)
    path = [order[-1]]  # the other end, walked back to u
    while path[-1] != u:
        path.append(parent[path[-1]])
    n = len(path)
    dom = tree.domain
    root = max({path[(n - 1) // 2], path[n // 2]}, key=lambda i: (dom.size(tree.cliques[i]), -i))
    parent, order = bfs(root)
    return root, parent, order


def _safe_top(top: np.ndarray) -> np.ndarray:
    """Segment maxima with -inf (an all-zero segment) replaced by the lowest float, so that shifting by
    them leaves -inf (and never makes NaN)."""
    return np.maximum(top, _LOWEST, out=top)  # -inf - _LOWEST stays -inf; finite values are untouched


_LOWEST = float(np.finfo(float).min)


def _lse_segments(vals: np.ndarray, seg: np.ndarray, starts: np.ndarray, guard: bool = True, shift: bool = True) -> np.ndarray:
    """log-sum-exp of ``vals`` over consecutive segments (``seg``: each entry's segment; ``starts``: where
    each begins), each shifted by its own maximum, so it is exact for any range of values. ``vals`` is a
    scratch copy and is overwritten. ``guard=False``: no segment is all -inf (finite values); ``shift=False``:
    no exp can underflow to zero or overflow, so the shift is left out."""
    if not shift:
        np.exp(vals, out=vals)
        return np.log(np.add.reduceat(vals, starts))
    top = np.maximum.reduceat(vals, starts)
    if guard:
        top = _safe_top(top)
    vals -= top[seg]
    np.exp(vals, out=vals)
    out = np.log(np.add.reduceat(vals, starts))
    out += top
    return out


@dataclass(frozen=True)
class _Level:
    """The edges (child clique -> parent) whose child lies at one depth, as flat index arrays.

    ``child_cells``: the children's cells (global flat indices) sorted by the separator cell each sums
    onto (``child_sep``, numbered within the level), ``child_seg`` where each separator cell's run
    begins; ``parent_cells`` / ``parent_sep`` / ``parent_seg`` the same for each edge's parent cells (a
    parent with several children at the level appears once per edge)."""

    child_cells: np.ndarray
    child_sep: np.ndarray
    child_seg: np.ndarray
    parent_cells: np.ndarray
    parent_sep: np.ndarray
    parent_seg: np.ndarray
    n_sep: int
    edge_child: np.ndarray  # per edge of the level: the child clique, its parent, and where its separator
    edge_parent: np.ndarray  # cells begin in the level's separator numbering (and how many there are)
    edge_start: np.ndarray
    edge_size: np.ndarray
    distinct_parents: bool = False  # no parent cell appears twice in parent_cells (plain += adds every message)


@dataclass(frozen=True)
class _Levels:
    """The tree's edges grouped by the depth of their child (``levels[0]``: the root's children)."""

    levels: tuple
    root: int

    @classmethod
    def of(cls, tree: "JunctionTree", centre: bool = True) -> "_Levels":
        dom = tree.domain
        starts = tree._plan()["starts"]
        root, parent, order = _rerooted(tree) if centre else (tree.order[0], list(tree.parent), tree.order)
        depth = [0] * len(tree.cliques)
        by_depth: dict = {}
        for i in order[1:]:
            depth[i] = depth[parent[i]] + 1
            by_depth.setdefault(depth[i], []).append(i)

        def separator(c: int, p: int) -> tuple:
            """The separator of edge c - p (stored on whichever end is the child in the tree's own rooting)."""
            return tree.separators[c] if tree.parent[c] == p else tree.separators[p]

        def sep_index(clique: tuple, sep: tuple) -> np.ndarray:
            """The separator cell of every cell of ``clique`` (C order), separator axes in domain order: the
            separator's C-order strides summed along the clique's axes by broadcasting (no coordinate
            arrays, which for a million-cell clique of fifteen variables would hold fifteen million)."""
            shape = dom.shape(clique)
            out = np.zeros(shape, dtype=np.intp)
            stride = 1
            for v in reversed(sep):
                ax = clique.index(v)
                out += (np.arange(shape[ax], dtype=np.intp) * stride).reshape([-1 if k == ax else 1 for k in range(len(shape))])
                stride *= dom.size((v,))
            return out.ravel()

        def grouped(cells: list, seps: list, n_sep: int) -> tuple:
            cells_a, seps_a = np.concatenate(cells).astype(np.intp, copy=False), np.concatenate(seps).astype(np.intp, copy=False)
            order = np.argsort(seps_a, kind="stable")
            runs = np.bincount(seps_a, minlength=n_sep)  # every separator cell has at least one cell
            return cells_a[order], seps_a[order], np.concatenate([[0], np.cumsum(runs)[:-1]]).astype(np.intp)

        levels = []
        for d in sorted(by_depth):
            cc, cs, pc, ps, e_start, e_size = [], [], [], [], [], []
            n_sep = 0
            for c in by_depth[d]:
                p = parent[c]
                sep = separator(c, p)
                sc, sp = sep_index(tree.cliques[c], sep), sep_index(tree.cliques[p], sep)
                cc.append(starts[c] + np.arange(sc.size))
                cs.append(sc + n_sep)
                pc.append(starts[p] + np.arange(sp.size))
                ps.append(sp + n_sep)
                e_start.append(n_sep)
                e_size.append(dom.size(sep))
                n_sep += dom.size(sep)
            c_cells, c_sep, c_seg = grouped(cc, cs, n_sep)
            p_cells, p_sep, p_seg = grouped(pc, ps, n_sep)
            kids = np.asarray(by_depth[d], dtype=np.intp)
            parents = [parent[c] for c in by_depth[d]]
            levels.append(_Level(c_cells, c_sep, c_seg, p_cells, p_sep, p_seg, n_sep, kids,
                                 np.asarray(parents, dtype=np.intp),
                                 np.asarray(e_start, dtype=np.intp), np.asarray(e_size, dtype=np.intp),
                                 len(set(parents)) == len(parents)))  # each edge lists its parent's cells: distinct parents, distinct cells
        return cls(tuple(levels), root)
