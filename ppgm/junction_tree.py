"""Exact inference: junction tree construction and log-space calibration.

The tree is built once per graph (greedy min-fill triangulation with deterministic tie-breaks,
maximal cliques, maximum-weight spanning tree over separator sizes) and can then calibrate any
number of models on that graph (for instance the iterates of a learner, or a model under several
evidence sets). Calibration is a two-pass Shafer-Shenoy schedule entirely in log space, so
potentials of any scale neither overflow nor underflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable, Sequence

import networkx as nx
import numpy as np

from .domain import Domain
from .factor import Factor, align, logsumexp
from .markov import MarkovNetwork

DEFAULT_MAX_CELLS = 50_000_000  # 400 MB of float64 per copy of the clique tables


class JunctionTreeTooLarge(MemoryError):
    """Raised when the junction tree's clique tables would exceed the memory budget."""


def _elimination_cliques(domain: Domain, scopes: Iterable[Sequence[Hashable]]) -> list[tuple]:
    """Greedy min-fill elimination; ties broken by log table size, then by domain order."""
    n = len(domain)
    adj = [set() for _ in range(n)]
    for s in scopes:
        idx = domain.indices(s)
        for a in idx:
            adj[a].update(b for b in idx if b != a)
    logcard = np.log(np.asarray(domain.cards, dtype=float))

    def score(v: int) -> tuple:
        nb = list(adj[v])
        fill = sum(1 for i, a in enumerate(nb) for b in nb[i + 1 :] if b not in adj[a])
        return (fill, logcard[v] + sum(logcard[a] for a in nb), v)

    alive = set(range(n))
    scores = {v: score(v) for v in alive}
    cliques = []
    while alive:
        v = min(alive, key=scores.__getitem__)
        nb = adj[v]
        cliques.append(frozenset(nb | {v}))
        for a in nb:
            adj[a].update(b for b in nb if b != a)
            adj[a].discard(v)
        alive.discard(v)
        del scores[v]
        touched = set(nb)
        for a in nb:
            touched |= adj[a]
        for u in touched & alive:
            scores[u] = score(u)
        adj[v] = set()
    # keep maximal cliques only, in elimination order
    cliques_sorted = sorted(range(len(cliques)), key=lambda i: -len(cliques[i]))
    maximal: list[frozenset] = []
    for i in cliques_sorted:
        c = cliques[i]
        if not any(c <= m for m in maximal):
            maximal.append(c)
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

    @classmethod
    def build(
        cls,
        domain: Domain,
        scopes: Iterable[Sequence[Hashable]],
        max_cells: int | None = DEFAULT_MAX_CELLS,
    ) -> "JunctionTree":
        """Triangulate the graph of ``scopes`` and connect its maximal cliques.

        Raises :class:`JunctionTreeTooLarge` when the clique tables would hold more than
        ``max_cells`` entries in total (``None`` disables the check).
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
        children = [[] for _ in cliques]
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

    def home(self, scope: Sequence[Hashable]) -> int:
        """Index of the smallest clique containing ``scope``; ``ValueError`` if none does."""
        s = set(scope)
        best = [i for i, c in enumerate(self.cliques) if s <= set(c)]
        if not best:
            raise ValueError(f"no clique of the junction tree contains {tuple(scope)}")
        return min(best, key=lambda i: self.domain.size(self.cliques[i]))

    def calibrate(self, model: MarkovNetwork) -> "Calibration":
        """Exact clique marginals and log Z of ``model`` (whose scopes must fit in the cliques).

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 2))
        >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.zeros((2, 2)))])
        >>> round(float(JunctionTree.build(d, m.scopes).calibrate(m).log_z), 6) == round(np.log(4), 6)
        True
        """
        if model.domain != self.domain:
            raise ValueError("model: its domain differs from the junction tree's")
        psi = [np.zeros(self.domain.shape(c)) for c in self.cliques]
        for f in model.factors:
            i = self.home(f.variables)
            psi[i] = psi[i] + align(f.values, f.variables, self.cliques[i])
        return self.calibrate_potentials(psi)

    def calibrate_potentials(self, psi: Sequence[np.ndarray]) -> "Calibration":
        """Calibrate given clique log-potentials (one array per clique, axes as in ``cliques``)."""
        k = len(self.cliques)
        up: list = [None] * k  # message from clique i to its parent, axes = separators[i]
        inward: list = [None] * k
        for i in reversed(self.order):
            acc = psi[i]
            for c in self._children[i]:
                acc = acc + align(up[c], self.separators[c], self.cliques[i])
            inward[i] = acc
            if self.parent[i] >= 0:
                up[i] = _lse_onto(acc, self.cliques[i], self.separators[i])
        beliefs: list = [None] * k
        down: list = [None] * k
        for i in self.order:
            full = inward[i] if self.parent[i] < 0 else inward[i] + align(down[i], self.separators[i], self.cliques[i])
            beliefs[i] = full
            for c in self._children[i]:
                msg = align(up[c], self.separators[c], self.cliques[i])
                if np.all(np.isfinite(msg)):
                    excl = full - msg
                else:  # exclude the child's message exactly where it is -inf
                    excl = psi[i] if self.parent[i] < 0 else psi[i] + align(down[i], self.separators[i], self.cliques[i])
                    for c2 in self._children[i]:
                        if c2 != c:
                            excl = excl + align(up[c2], self.separators[c2], self.cliques[i])
                down[c] = _lse_onto(excl, self.cliques[i], self.separators[c])
        log_z = float(logsumexp(beliefs[self.order[0]]))
        if not np.isfinite(log_z):
            raise ValueError("the model assigns zero probability to every configuration (log Z = -inf)")
        log_beliefs = tuple(b - logsumexp(b) for b in beliefs)
        return Calibration(self, log_beliefs, log_z)


def _lse_onto(values: np.ndarray, scope: Sequence, keep: Sequence) -> np.ndarray:
    axes = tuple(i for i, v in enumerate(scope) if v not in keep)
    out = logsumexp(values, axis=axes) if axes else values
    kept = [v for v in scope if v in keep]
    return np.transpose(out, [kept.index(v) for v in keep]) if kept != list(keep) else out


@dataclass(frozen=True)
class Calibration:
    """The result of calibrating a model on a junction tree.

    Attributes
    ----------
    tree : JunctionTree
    log_beliefs : tuple of arrays
        Normalised log-marginal of each clique (axes as ``tree.cliques``).
    log_z : float
        Log partition function of the calibrated model.
    """

    tree: JunctionTree
    log_beliefs: tuple
    log_z: float
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def clique_marginals(self) -> list[Factor]:
        """Probability table of every clique."""
        return [Factor(c, np.exp(b)) for c, b in zip(self.tree.cliques, self.log_beliefs)]

    def separator_marginals(self) -> dict:
        """``{(child, parent): Factor}`` probability table of every separator."""
        t = self.tree
        return {
            (i, t.parent[i]): Factor(t.separators[i], np.exp(_lse_onto(self.log_beliefs[i], t.cliques[i], t.separators[i])))
            for i in t.order[1:]
        }

    def log_marginal(self, variables: Sequence[Hashable]) -> Factor:
        """Normalised log-marginal over ``variables`` (any subset of the domain, in that order).

        Inside one clique this is a log-sum-exp of that clique's belief; otherwise the smallest
        subtree covering ``variables`` is contracted (out-of-clique inference), in log space.
        """
        variables = self.tree.domain.check(variables)
        key = variables
        if key in self._cache:
            return self._cache[key]
        t = self.tree
        try:
            i = t.home(variables)
            out = Factor(variables, _lse_onto(self.log_beliefs[i], t.cliques[i], variables))
        except ValueError:
            out = self._out_of_clique(variables)
        out = out.normalized_log()
        self._cache[key] = out
        return out

    def marginal(self, variables: Sequence[Hashable]) -> Factor:
        """Probability table over ``variables`` (see :meth:`log_marginal`)."""
        f = self.log_marginal(variables)
        return Factor(f.variables, np.exp(f.values))

    def _out_of_clique(self, variables: tuple) -> Factor:
        t = self.tree
        q = set(variables)
        nodes = set(range(len(t.cliques)))
        nbrs = {i: set() for i in nodes}
        for i in t.order[1:]:
            nbrs[i].add(t.parent[i])
            nbrs[t.parent[i]].add(i)
        changed = True
        while changed:  # prune leaves whose query variables also live in their neighbour
            changed = False
            for i in sorted(nodes):
                live = nbrs[i] & nodes
                if len(nodes) > 1 and len(live) <= 1:
                    nb = next(iter(live), None)
                    if nb is None or (q & set(t.cliques[i])) <= set(t.cliques[nb]):
                        nodes.discard(i)
                        changed = True
        sub_order = [i for i in t.order if i in nodes]
        root = sub_order[0]
        msgs: dict = {}
        for i in reversed(sub_order):
            f = Factor(t.cliques[i], self.log_beliefs[i])
            if i != root:
                sep = align(_lse_onto(self.log_beliefs[i], t.cliques[i], t.separators[i]), t.separators[i], t.cliques[i])
                with np.errstate(invalid="ignore"):
                    vals = np.where(np.isneginf(sep), -np.inf, f.values - sep)
                f = Factor(t.cliques[i], vals)
            for c in t.children[i]:
                if c in msgs:
                    f = f + msgs.pop(c)
            if i == root:
                return f.logsumexp_to(variables)
            keep = [v for v in f.variables if v in q or v in t.separators[i]]
            msgs[i] = f.logsumexp_to(keep)
        raise AssertionError("unreachable")  # pragma: no cover
