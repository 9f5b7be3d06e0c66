"""The discrete MER / INI program on a junction tree of clique marginals.

Variables are the clique marginals mu_C of the junction tree of the triangulated constraint graph,
non-negative, consistent on separators (linear equalities) and summing to one. The entropy of the
decomposable model they define is

    H = H(mu_root) + sum over other cliques C of H(C | S) = sum_x entr(mu_root) - sum_C rel_entr(mu_C, mu_S)

(mu_S broadcast to the cells of C), concave and DCP. The statistics are count tables with pseudo-
counts alpha added to every cell (default 0.5), so that an empty cell does not force a zero
probability: the constraints are KL(mu_i || q_i) = sum rel_entr(mu_i, q_i) <= gamma (k_i / N_i) ** p
with k = K_v - 1 free parameters for a node and K_u K_v - 1 for a pair (the pair's whole joint
table; the discrete analogue of the paper's 3 for a Gaussian pair).

From the KKT conditions the solution is the pairwise model
log p(x) = const - sum_i lambda_i log(mu_i(x_i) / q_i(x_i)) with lambda the constraints' dual
values, which gives the node and edge log-potentials and, from each edge's doubly centred part, the
graph.
"""

from __future__ import annotations

from typing import Sequence

import cvxpy as cp
import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..factors.domain import Domain
from ..inference.junction_tree import JunctionTree
from ..models.measurement import Measurement
from .program import ConvexProgram, Divergence, MERResult

#: Largest |interaction| (nats, doubly centred edge log-potential) read as no edge.
GRAPH_TOL = 0.05


def _marginaliser(domain: Domain, scope: Sequence, onto: Sequence) -> sp.csr_matrix:
    """Sparse matrix summing a C-order table over ``scope`` onto the table over ``onto``."""
    shape = domain.shape(scope)
    size = int(np.prod(shape, dtype=np.int64))
    grid = np.unravel_index(np.arange(size), shape)
    pos = {v: a for a, v in enumerate(scope)}
    if onto:
        rows = np.ravel_multi_index(tuple(grid[pos[v]] for v in onto), domain.shape(onto))
    else:
        rows = np.zeros(size, dtype=np.int64)
    return sp.csr_matrix((np.ones(size), (rows, np.arange(size))), shape=(domain.size(onto), size))


class DiscreteMER(ConvexProgram):
    """MER / INI for discrete models from node and edge count tables.

    Parameters
    ----------
    domain : Domain
    nodes, edges : sequence of Measurement
        Exact count tables (``noise="none"``) with their pooled sample size ``n``, over single
        variables and pairs (see :func:`ppgm.mer.sample_sets.pooled_counts`).
    p : float
        Tolerance exponent.
    pseudo_count : float
        Added to every cell of every statistic (> 0).
    graph_tol : float
        Interactions at or below this (nats) are read as no edge.

    Examples
    --------
    >>> d = Domain(("a", "b"), (2, 2))
    >>> nodes = [Measurement(("a",), [50.0, 50.0], n=100), Measurement(("b",), [50.0, 50.0], n=100)]
    >>> edges = [Measurement(("a", "b"), [[40.0, 10.0], [10.0, 40.0]], n=100)]
    >>> res = DiscreteMER(d, nodes, edges).mer(gamma=0.01)
    >>> res.edges(), round(float(res.marginals[("a", "b")][0, 0]), 2)
    ([('a', 'b')], 0.38)
    """

    kind = "discrete"

    def __init__(
        self,
        domain: Domain,
        nodes: Sequence[Measurement],
        edges: Sequence[Measurement],
        p: float = 0.5,
        pseudo_count: float = 0.5,
        graph_tol: float = GRAPH_TOL,
    ) -> None:
        if not (np.isfinite(pseudo_count) and pseudo_count > 0):
            raise ValueError(f"pseudo_count: expected a positive number, got {pseudo_count!r}")
        self.domain = domain
        self.variables = domain.variables
        self.graph_tol = float(graph_tol)
        self.pseudo_count = float(pseudo_count)
        stats = list(nodes) + list(edges)
        for m in stats:
            domain.check(m.variables, "statistics")
            if m.noise != "none" or m.n is None:
                raise ValueError(f"statistics: {m.variables} must be exact counts with their sample size n")
            if m.shape != domain.shape(m.variables):
                raise ValueError(f"statistics: table over {m.variables} has shape {m.shape}, expected {domain.shape(m.variables)}")
        self.tree = JunctionTree.build(domain, [m.variables for m in stats], max_cells=None)
        self.mu = [cp.Variable(domain.size(c), nonneg=True, name=f"mu_{i}") for i, c in enumerate(self.tree.cliques)]
        structure = []
        entropy = 0
        for i in self.tree.order:
            clique, sep = self.tree.cliques[i], self.tree.separators[i]
            if self.tree.parent[i] < 0:
                structure.append(cp.sum(self.mu[i]) == 1)
                entropy = entropy + cp.sum(cp.entr(self.mu[i]))
                continue
            down = _marginaliser(domain, clique, sep)
            up = _marginaliser(domain, self.tree.cliques[self.tree.parent[i]], sep)
            structure.append(down @ self.mu[i] == up @ self.mu[self.tree.parent[i]])
            entropy = entropy - cp.sum(cp.rel_entr(self.mu[i], down.T @ (down @ self.mu[i])))
        self.entropy, self.structure = entropy, structure
        self.targets, self.divergences = [], []
        for m in stats:
            home = self.tree.home(m.variables)
            marg = _marginaliser(domain, self.tree.cliques[home], m.variables) @ self.mu[home]
            q = (m.values + self.pseudo_count).ravel()
            q = q / q.sum()
            self.targets.append(q.reshape(m.shape))
            kind = "node" if len(m.variables) == 1 else "edge"
            dof = int(np.prod(m.shape)) - 1
            if dof < 1:
                raise ValueError(f"statistics: {m.variables} has a single cell; a constant variable has nothing to learn")
            if m.n is None:
                raise ValueError(f"statistics: {m.variables} carries no sample size n")
            self.divergences.append(Divergence(m.variables, kind, float(m.n), dof, cp.sum(cp.rel_entr(marg, q)), marg))
        self._setup(p)

    def marginal(self, variables: Sequence):
        """The model's marginal table over ``variables`` as a cvxpy expression (a flat vector in C
        order over ``variables`` as given), for constraints of your own (see :meth:`resolve`).

        Parameters
        ----------
        variables : sequence
            Variables inside one clique of the program's junction tree.

        Returns
        -------
        cvxpy.Expression

        Raises
        ------
        KeyError
            An unknown variable, or variables that share no clique.

        Examples
        --------
        >>> from ppgm.models.measurement import Measurement
        >>> d = Domain(("a", "b"), (2, 2))
        >>> nodes = [Measurement((v,), np.array([60.0, 40.0]), n=100) for v in "ab"]
        >>> prog = DiscreteMER(d, nodes, [Measurement(("a", "b"), np.array([[50.0, 10], [10, 30]]), n=100)])
        >>> res = prog.resolve([prog.marginal(["a", "b"])[0] >= 0.45], gamma=0.5)
        >>> round(float(res.marginals[("a", "b")][0, 0]), 3)
        0.45
        """
        variables = tuple(self.domain.check(variables, "variables"))
        home = self.tree.home(variables)
        return _marginaliser(self.domain, self.tree.cliques[home], variables) @ self.mu[home]

    # ----------------------------------------------------------------------------------------------
    def _finish(self, result: MERResult) -> None:
        dom = self.domain
        marginals = {}
        for c, mu in zip(self.tree.cliques, self.mu):
            marginals[c] = np.clip(mu.value, 0, None).reshape(dom.shape(c))  # type: ignore[arg-type]  # solved
        for d in self.divergences:
            marginals[d.scope] = np.clip(d.marginal.value, 0, None).reshape(dom.shape(d.scope))
        result.marginals = marginals
        ent = 0.0
        for i, (c, s) in enumerate(zip(self.tree.cliques, self.tree.separators)):
            mc = marginals[c].ravel()
            ms = _marginaliser(dom, c, s) @ mc
            ent -= _xlogx(mc).sum() - _xlogx(ms).sum()
        result.entropy = float(ent)
        # log-potentials of the equivalent pairwise model, from the duals
        node_pot = {v: np.zeros(dom.shape((v,))) for v in self.variables}
        edge_pot, strength = {}, {}
        for d, q, row in zip(self.divergences, self.targets, result.constraints):
            if d.kind == "edge":
                row["interaction"], row["z"] = 0.0, 0.0
            # complementary slackness: an inactive constraint's dual is zero (the solver leaves a small
            # positive residue of the order of its tolerance, which would leak into the potentials)
            lam = row["dual"] if np.isfinite(row["dual"]) and row["active"] else 0.0
            if lam <= 0:
                continue
            with np.errstate(divide="ignore"):
                psi = -lam * (np.log(np.maximum(marginals[d.scope], 1e-300)) - np.log(q))
            if d.kind == "node":
                node_pot[d.scope[0]] = node_pot[d.scope[0]] + psi
                continue
            r, c = psi.mean(axis=1, keepdims=True), psi.mean(axis=0, keepdims=True)
            inter = psi - r - c + psi.mean()
            node_pot[d.scope[0]] = node_pot[d.scope[0]] + (r.ravel() - psi.mean())
            node_pot[d.scope[1]] = node_pot[d.scope[1]] + c.ravel() + psi.mean()
            edge_pot[d.scope] = inter
            strength[d.scope] = float(np.abs(inter).max())
            row["interaction"] = strength[d.scope]
            row["z"] = float(np.max(np.abs(inter) / interaction_se(q, d.n)))
        g = nx.Graph()
        g.add_nodes_from(self.variables)
        g.add_edges_from((a, b, {"interaction": s}) for (a, b), s in strength.items() if s > self.graph_tol)
        result.graph, result.graph_tol = g, self.graph_tol
        pots = {(v,): node_pot[v] for v in self.variables}
        pots.update({e: edge_pot[e] for e in edge_pot})
        result.log_potentials = pots


def interaction_se(table: np.ndarray, n: float) -> np.ndarray:
    """Standard error of each entry of a pair table's doubly centred log-table (its interaction, in
    nats) under independence, from ``n`` samples: Var_ij = (1 / n) (sum_a (d_ai - 1/K)^2 / p_a)
    (sum_b (d_bj - 1/L)^2 / q_b), the delta method on log counts, with p and q the table's margins.

    MER's edge rows carry ``z``, the largest absolute interaction over its se in the fitted edge potential: a
    reading of each edge against its own sample size (the graph itself is read at ``graph_tol``
    nats; see ``benchmarks/RESULTS.md`` for how the two readings compare).

    Parameters
    ----------
    table : numpy.ndarray, shape (K, L)
        Probabilities or counts (only the margins' proportions are used).
    n : float
        Sample size.

    Returns
    -------
    numpy.ndarray, shape (K, L)

    Raises
    ------
    ValueError
        A table that is not 2-d and non-negative with positive margins, or a non-positive n.

    Examples
    --------
    >>> interaction_se(np.full((2, 2), 0.25), 100.0)  # a quarter of the log odds ratio's 2 / 5
    array([[0.1, 0.1],
           [0.1, 0.1]])
    """
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or not np.all(np.isfinite(t)) or (t < 0).any():
        raise ValueError(f"table: expected a 2-d table of non-negative numbers, got shape {t.shape}")
    if not (np.isfinite(n) and n > 0):
        raise ValueError(f"n: expected a positive sample size, got {n!r}")
    p, q = t.sum(axis=1) / t.sum(), t.sum(axis=0) / t.sum()
    if (p <= 0).any() or (q <= 0).any():
        raise ValueError("table: every row and column needs a positive total (add pseudo-counts)")
    K, L = t.shape
    U = (np.eye(K) - 1.0 / K) ** 2
    V = (np.eye(L) - 1.0 / L) ** 2
    return np.sqrt(np.outer(U @ (1.0 / p), V @ (1.0 / q)) / n)


def _xlogx(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)
