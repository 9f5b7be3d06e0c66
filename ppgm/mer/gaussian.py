"""The Gaussian MER / INI program on a junction tree of covariance blocks.

Moments are the entries of the covariance P on the chordal completion of the constraint graph (a
single vector variable; each clique's block is a symmetric reshape of it, so blocks agree on
separators by construction). The entropy of the maximum-determinant completion is

    log det P_root + sum over other cliques C of log det(P_R - P_RS P_S^-1 P_SR),   R = C minus S,

written DCP-compliantly with one variable T_C per clique and the linear matrix inequality
[[P_S, P_SR], [P_RS, P_R - T_C]] >= 0 (T_C is then at most the Schur complement), maximising
log det T_C. Every cone is clique-sized: no dense n x n log-det. The maximum-entropy solution is
Markov on the constraint graph, so the chordal restriction is exact.
"""

from __future__ import annotations

from typing import Hashable, Sequence

import cvxpy as cp
import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..factors.domain import Domain
from ..inference.junction_tree import JunctionTree
from .program import FIRST_ORDER_COST, ConvexProgram, Divergence, MERResult
from .sample_sets import Moments

#: Partial-correlation magnitude above which an entry of the information matrix is an edge. MER's
#: exact support is every active edge constraint; near s~ many are active with partial correlations
#: of the order of the sampling noise (on the 16-node cycle: at most 0.07, against at least 0.07 for
#: true edges at gamma / s~ <= 20). 0.05 is about one standard error of a correlation from 400 rows.
GRAPH_TOL = 0.05


class GaussianMER(ConvexProgram):
    """MER / INI for zero-mean Gaussian models from node variances and edge covariances.

    Parameters
    ----------
    variables : sequence of hashable
    nodes : sequence of Moments
        One 1 x 1 second moment per variable (k = 1 free parameter).
    edges : sequence of Moments
        One 2 x 2 block per constraint edge (k = 3 free parameters, as in the paper).
    p : float
        Tolerance exponent in delta = gamma (k / N) ** p.
    graph_tol : float
        Partial correlations at or below this magnitude are read as no edge.

    Examples
    --------
    >>> from ppgm.mer.sample_sets import Moments
    >>> nodes = [Moments((v,), np.eye(1), 100) for v in "abc"]
    >>> edges = [Moments(("a", "b"), [[1, .5], [.5, 1]], 100), Moments(("b", "c"), [[1, .5], [.5, 1]], 100)]
    >>> res = GaussianMER("abc", nodes, edges).mer(gamma=0.01)
    >>> res.edges()
    [('a', 'b'), ('b', 'c')]
    """

    kind = "gaussian"

    def __init__(
        self,
        variables: Sequence[Hashable],
        nodes: Sequence[Moments],
        edges: Sequence[Moments],
        p: float = 0.5,
        graph_tol: float = GRAPH_TOL,
        means: dict | None = None,
    ) -> None:
        self.variables = tuple(variables)
        n = len(self.variables)
        pos = {v: i for i, v in enumerate(self.variables)}
        self.graph_tol = float(graph_tol)
        # Standardise: every variable divided by its pooled standard deviation. The KL tolerances are
        # invariant to per-variable scaling, so the solution is the same model in other units, but
        # the solver sees unit-free numbers (columns in units 1e3 or 1e-3 apart no longer break it).
        # Results are mapped back in _finish.
        node_sd = {m.variables[0]: float(np.sqrt(m.covariance[0, 0])) for m in nodes}
        self.scale = np.array([node_sd.get(v, 1.0) for v in self.variables])
        nodes = [Moments(m.variables, np.asarray(m.covariance, float) / node_sd[m.variables[0]] ** 2, m.n) for m in nodes]
        edges = [Moments(m.variables, np.asarray(m.covariance, float) / np.outer([node_sd.get(v, 1.0) for v in m.variables],
                                                                              [node_sd.get(v, 1.0) for v in m.variables]), m.n)
                 for m in edges]
        self.means = dict(means) if means is not None else {v: 0.0 for v in self.variables}
        domain = Domain(self.variables, (2,) * n)
        self.tree = JunctionTree.build(domain, [m.variables for m in edges] + [(v,) for v in self.variables], max_cells=None)
        sizes = np.array([len(c) for c in self.tree.cliques], dtype=float)
        self.cone_cost = float(np.sum((sizes * (sizes + 1) / 2) ** 3))
        self.first_order = self.cone_cost > FIRST_ORDER_COST
        # one scalar per entry (i <= j) of the chordal pattern
        index: dict = {}
        for clique in self.tree.cliques:
            ids = [pos[v] for v in clique]
            for a in ids:
                for b in ids:
                    if a <= b:
                        index.setdefault((a, b), len(index))
        self.index = index
        self.x = cp.Variable(len(index), name="covariance_entries")
        self.blocks = [self._block([pos[v] for v in c]) for c in self.tree.cliques]
        entropy = 0
        structure = []
        for i in self.tree.order:
            clique, sep = self.tree.cliques[i], set(self.tree.separators[i])
            block = self.blocks[i]
            if not sep:
                entropy = entropy + cp.log_det(block) if len(clique) > 1 else entropy + cp.log(block[0, 0])
                continue
            rest = [a for a, v in enumerate(clique) if v not in sep]
            r = len(rest)
            T = cp.Variable((r, r), symmetric=True, name=f"schur_{i}") if r > 1 else cp.Variable((1, 1), name=f"schur_{i}")
            E = np.zeros((len(clique), r))
            E[rest, range(r)] = 1.0
            structure.append(block - E @ T @ E.T >> 0)
            entropy = entropy + (cp.log_det(T) if r > 1 else cp.log(T[0, 0]))
        self.entropy = entropy
        # The divergences as two vectors (one atom per kind, not one per statistic: cvxpy compiles
        # in time proportional to the atoms). Edge log-determinants use an epigraph variable u_e <=
        # c - b^2 / a, the Schur complement of the 2 x 2 block [[a, b], [b, c]], held by one
        # second-order cone: [[a, b], [b, c - u]] >= 0  <=>  a + c - u >= ||(2 b, a - c + u)||.
        self.divergences = [Divergence(m.variables, "node", m.n, 1) for m in nodes]
        node_ids = np.array([index[(pos[m.variables[0]],) * 2] for m in nodes], dtype=np.int64)
        self._node_q = np.array([float(m.covariance[0, 0]) for m in nodes])
        self._node_ids = node_ids
        pv = self.x[node_ids]
        node_div = 0.5 * (cp.multiply(1.0 / self._node_q, pv) - cp.log(pv) + np.log(self._node_q) - 1)
        self._vector_rows = [(node_div, np.arange(len(nodes)))]
        if edges:
            triples, inverses, logdets = [], [], []
            for m in edges:
                i, j = (pos[v] for v in m.variables)
                Q = m.covariance if i < j else m.covariance[::-1, ::-1]
                i, j = min(i, j), max(i, j)
                triples.append((index[(i, i)], index[(i, j)], index[(j, j)]))
                inverses.append(np.linalg.inv(Q))
                logdets.append(np.linalg.slogdet(Q)[1])
                self.divergences.append(Divergence(tuple(self.variables[t] for t in (i, j)), "edge", m.n, 3))
            edge_ids = np.array(triples, dtype=np.int64)
            Qi = np.array(inverses)
            self._edge_ids, self._edge_qinv, self._edge_logdet = edge_ids, Qi, np.array(logdets)
            k = len(edges)
            coef = np.stack([Qi[:, 0, 0], 2 * Qi[:, 0, 1], Qi[:, 1, 1]], axis=1)
            trace_map = sp.csr_matrix((coef.ravel(), (np.repeat(np.arange(k), 3), edge_ids.ravel())), shape=(k, len(index)))
            var_i, cov_ij, var_j = self.x[edge_ids[:, 0]], self.x[edge_ids[:, 1]], self.x[edge_ids[:, 2]]
            u = cp.Variable(k, name="edge_schur")
            structure.append(cp.SOC(var_i + var_j - u, cp.vstack([2 * cov_ij, var_i - var_j + u]), axis=0))
            edge_div = 0.5 * (trace_map @ self.x - cp.log(var_i) - cp.log(u) + self._edge_logdet - 2)
            self._vector_rows.append((edge_div, len(nodes) + np.arange(k)))
        self.structure = structure
        self._setup(p)

    @classmethod
    def from_moments(cls, means: dict, nodes, edges, **kwargs) -> "GaussianMER":
        """The program from pooled moments (see :func:`ppgm.mer.sample_sets.pooled_moments`).

        Parameters
        ----------
        means : dict
            ``{variable: pooled mean}``.
        nodes : list of Moments
            One per variable (its variance).
        edges : list of Moments
            One per constrained pair.
        **kwargs
            ``p`` and the other options of the program.

        Returns
        -------
        GaussianMER

        Examples
        --------
        >>> from ppgm.mer.sample_sets import Moments
        >>> nodes = [Moments((v,), np.eye(1), 200) for v in "ab"]
        >>> prog = GaussianMER.from_moments({"a": 0.0, "b": 0.0}, nodes, [Moments(("a", "b"), [[1, .6], [.6, 1]], 200)])
        >>> prog.variables
        ('a', 'b')
        """
        variables = [m.variables[0] for m in nodes]
        return cls(variables, nodes, edges, means=means, **kwargs)

    def covariance(self, a: Hashable, b: Hashable):
        """The model's covariance of variables ``a`` and ``b`` as a cvxpy expression, in the data's
        units (for constraints of your own, see :meth:`resolve`); only pairs inside a clique of the
        program's junction tree have one.

        Parameters
        ----------
        a, b : hashable
            Variables of the program.

        Returns
        -------
        cvxpy.Expression

        Raises
        ------
        KeyError
            A variable is unknown, or the pair shares no clique (its covariance is not a variable of
            the program: it follows from the others).

        Examples
        --------
        >>> from ppgm.mer.sample_sets import Moments
        >>> nodes = [Moments((v,), np.eye(1) * 4, 200) for v in "ab"]
        >>> prog = GaussianMER("ab", nodes, [Moments(("a", "b"), [[4, 2], [2, 4]], 200)])
        >>> _ = prog.mer(gamma=0.05); round(float(prog.covariance("a", "b").value), 2)
        2.23
        """
        pos = {v: i for i, v in enumerate(self.variables)}
        for v, name in ((a, "a"), (b, "b")):
            if v not in pos:
                raise KeyError(f"{name}: {v!r} is not a variable of the program")
        i, j = sorted((pos[a], pos[b]))
        if (i, j) not in self.index:
            raise KeyError(f"({a!r}, {b!r}) share no clique of the program's junction tree: their covariance is not a variable")
        return float(self.scale[i] * self.scale[j]) * self.x[self.index[(i, j)]]

    def _divergence_vectors(self) -> list:
        return self._vector_rows

    def _divergence_values(self) -> np.ndarray:
        """KL divergences at the solution, computed from the covariance entries (the cone's epigraph
        variable is slack where a constraint is inactive, so the expressions would overstate them)."""
        x = np.asarray(self.x.value, float)
        pv = x[self._node_ids]
        out = [0.5 * (pv / self._node_q - np.log(pv) + np.log(self._node_q) - 1)]
        if len(self._vector_rows) > 1:
            a, b, c = (x[self._edge_ids[:, t]] for t in range(3))
            Qi = self._edge_qinv
            trace = Qi[:, 0, 0] * a + 2 * Qi[:, 0, 1] * b + Qi[:, 1, 1] * c
            out.append(0.5 * (trace - np.log(a * c - b * b) + self._edge_logdet - 2))
        return np.concatenate(out)

    def _entry(self, a: int, b: int):
        return self.x[self.index[(min(a, b), max(a, b))]]

    def _block(self, ids: list[int]):
        k = len(ids)
        rows, cols = [], []
        for r, a in enumerate(ids):
            for c, b in enumerate(ids):
                rows.append(r * k + c)
                cols.append(self.index[(min(a, b), max(a, b))])
        M = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(k * k, len(self.index)))
        block = cp.reshape(M @ self.x, (k, k), order="C")
        return (block + block.T) / 2

    # ----------------------------------------------------------------------------------------------
    def _finish(self, result: MERResult) -> None:
        n = len(self.variables)
        pos = {v: i for i, v in enumerate(self.variables)}
        x = self.x.value
        if x is None:
            raise ValueError("the program has no solution to read (solve it first)")
        J = np.zeros((n, n))
        logdet = 0.0
        worst = np.inf
        for clique, sep in zip(self.tree.cliques, self.tree.separators):
            for scope, sign in ((clique, 1.0), (sep, -1.0)):
                if not scope:
                    continue
                ids = [pos[v] for v in scope]
                block = np.array([[x[self.index[(min(a, b), max(a, b))]] for b in ids] for a in ids])
                worst = min(worst, float(np.linalg.eigvalsh(block)[0]))
                J[np.ix_(ids, ids)] += sign * np.linalg.inv(block)
                logdet += sign * np.linalg.slogdet(block)[1]
        if worst <= 0:
            result.notes.append(f"a clique's covariance block is not positive definite (smallest eigenvalue {worst:.2g}): "
                                "the solution is inaccurate")
            if result.status == "optimal":
                result.status = "optimal_inaccurate"
        J = (J + J.T) / 2
        inv_scale = 1.0 / self.scale  # back to the data's units: Sigma = D S D, J = D^-1 J_s D^-1
        J = J * np.outer(inv_scale, inv_scale)
        result.precision = J
        result.covariance = np.linalg.inv(J)
        result.means = dict(self.means)
        result.entropy = 0.5 * (logdet + n * np.log(2 * np.pi * np.e)) + float(np.log(self.scale).sum())
        d = np.sqrt(np.diag(J))
        partial = -J / np.outer(d, d)
        g = nx.Graph()
        g.add_nodes_from(self.variables)
        iu, ju = np.nonzero(np.triu(np.abs(partial) > self.graph_tol, 1))
        g.add_edges_from((self.variables[a], self.variables[b], {"partial_correlation": float(partial[a, b])}) for a, b in zip(iu, ju))
        result.graph, result.graph_tol = g, self.graph_tol
