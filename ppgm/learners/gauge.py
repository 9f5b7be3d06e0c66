"""The gauge of an overcomplete log-linear parametrisation, and its projection.

A Markov network with one log-potential table per scope is overcomplete: adding a function of the
variables two scopes share to one table and subtracting it from the other, or a constant to any
table, leaves the distribution unchanged. These directions form the gauge space G. Along G the
log-likelihood is affine, so an L2 penalty ``l2 ||theta||^2`` is the only curvature there, which is
tiny next to the likelihood's (about 1 / N against the cells' probabilities): a first-order method
drifts along G for many iterations. Projecting onto the complement of G separates the two.

The projection is exact and cheap through the functional ANOVA decomposition (uniform weights): a
table over s is a sum of components over the subsets u of s, each a function of u centred along
every variable of u. The distribution depends only on the sums f_U, over the tables containing U,
of their U-components; G is the set of changes that keep every f_U with U non-empty. The
minimum-norm representative of theta's class (its orthogonal projection onto the complement of G)
spreads each f_U over the tables containing U in proportion to 1 / w, where w is the number of cells
a U-component is broadcast over in that table, and drops the constants.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
from scipy import sparse

from ..factors.domain import Domain


class Gauge:
    """Orthogonal projection of flat log-potentials (tables of ``scopes``, concatenated) onto the
    complement of the gauge space.

    Parameters
    ----------
    domain : Domain
    scopes : sequence of tuple
        The tables' scopes, in the order of the flat vector (each table ravelled in C order).

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 3))
    >>> g = Gauge(d, [("A",), ("A", "B")])
    >>> x = np.concatenate([[1.0, -1.0], np.zeros(6)])   # the A-effect held by the node table
    >>> y = g.project(x)            # shared 3 : 1 (the edge table repeats it over B's 3 states)
    >>> np.round(y[:2], 3).tolist(), np.round(y[2:5], 3).tolist()
    ([0.75, -0.75], [0.25, 0.25, 0.25])
    """

    def __init__(self, domain: Domain, scopes: Sequence[tuple]):
        self.scopes = [domain.check(s, "scopes") for s in scopes]
        shapes = [domain.shape(s) for s in self.scopes]
        sizes = [int(np.prod(sh)) for sh in shapes]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.size = int(offsets[-1])
        order = {v: i for i, v in enumerate(domain.variables)}
        # The three sparse maps are built from index templates that depend only on a table's shape and
        # the axes involved, each template laid out once for all the tables that share it (a model of a
        # thousand tables has a handful of shapes).
        by_shape: dict = {}
        for t, sh in enumerate(shapes):
            by_shape.setdefault(sh, []).append(t)
        # 1. subset means: m[t, v] = table t's mean over the axes outside v (v may be empty)
        m_at: dict = {}
        rows, cols, vals = [], [], []
        top = 0
        for sh, ts in by_shape.items():
            size, k = int(np.prod(sh)), len(sh)
            coords = np.indices(sh).reshape(k, -1)
            table_cells = offsets[ts][:, None] + np.arange(size)
            for r in range(k + 1):
                for v in itertools.combinations(range(k), r):
                    vsh = tuple(sh[i] for i in v)
                    n_v = int(np.prod(vsh))
                    base = np.ravel_multi_index([coords[i] for i in v], vsh) if v else np.zeros(size, int)
                    starts = top + n_v * np.arange(len(ts))
                    rows.append((starts[:, None] + base).ravel())
                    cols.append(table_cells.ravel())
                    vals.append(np.full(len(ts) * size, n_v / size))
                    m_at.update({(t, v): (int(a), vsh) for t, a in zip(ts, starts)})
                    top += n_v * len(ts)
        self._mean = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(top, self.size))
        # 2. for each interaction set U: f_U = sum over tables t containing U of their U-components,
        #    comp_{t,U} = sum over V subset of U of (-1)^{|U|-|V|} m[t, V] (Moebius inversion of the means)
        holders: dict = {}
        for t, s in enumerate(self.scopes):
            for r in range(1, len(s) + 1):
                for u in itertools.combinations(range(len(s)), r):
                    holders.setdefault(tuple(sorted((s[i] for i in u), key=order.__getitem__)), []).append(t)
        f_at, f_count, f_top = {}, [], 0
        for U, ts in holders.items():
            f_at[U] = f_top
            f_count.append(np.full(domain.size(U), 1.0 / len(ts)))
            f_top += domain.size(U)
        pairs: dict = {}  # (table shape, U's axes in the table, in U's order) -> [(f_at[U], t)]
        for U, ts in holders.items():
            for t in ts:
                pairs.setdefault((shapes[t], tuple(self.scopes[t].index(x) for x in U)), []).append((f_at[U], t))
        f_rows, f_cols, f_vals = [], [], []
        for (sh, u_pos), members in pairs.items():
            ush = tuple(sh[p] for p in u_pos)
            n_u = int(np.prod(ush))
            cu = np.indices(ush).reshape(len(u_pos), -1)
            f_base = np.array([f for f, _ in members])
            for r in range(len(u_pos) + 1):
                for V in itertools.combinations(range(len(u_pos)), r):  # V as positions within U
                    v = tuple(sorted(u_pos[j] for j in V))  # V's axes in the table's order
                    vsh = tuple(sh[i] for i in v)
                    idx = np.ravel_multi_index([cu[u_pos.index(i)] for i in v], vsh) if v else np.zeros(n_u, int)
                    m_base = np.array([m_at[t, v][0] for _, t in members])
                    f_rows.append((f_base[:, None] + np.arange(n_u)).ravel())
                    f_cols.append((m_base[:, None] + idx).ravel())
                    f_vals.append(np.full(len(members) * n_u, (-1.0) ** (len(u_pos) - r)))
        F = sparse.csr_matrix((np.concatenate(f_vals), (np.concatenate(f_rows), np.concatenate(f_cols))), shape=(f_top, top))
        # 3. back to the tables: each table takes share_{t,U} = (1 / w_t) / sum over holders (1 / w) of f_U
        backs: dict = {}  # (table shape, U's axes in the table, in U's order) -> [(offset of t, f_at[U], share)]
        for t, (s, sh) in enumerate(zip(self.scopes, shapes)):
            for r in range(1, len(s) + 1):
                for u in itertools.combinations(range(len(s)), r):
                    U = tuple(sorted((s[i] for i in u), key=order.__getitem__))
                    inv_w = [domain.size(U) / sizes[h] for h in holders[U]]
                    share = (domain.size(U) / sizes[t]) / sum(inv_w)
                    backs.setdefault((sh, tuple(s.index(x) for x in U)), []).append((offsets[t], f_at[U], share))
        b_rows, b_cols, b_vals = [], [], []
        for (sh, u_pos), members in backs.items():
            size = int(np.prod(sh))
            coords = np.indices(sh).reshape(len(sh), -1)
            idx = np.ravel_multi_index([coords[p] for p in u_pos], tuple(sh[p] for p in u_pos))
            off, fa, share = (np.array(c) for c in zip(*members))
            b_rows.append((off[:, None] + np.arange(size)).ravel())
            b_cols.append((fa[:, None] + idx).ravel())
            b_vals.append(np.repeat(share, size))
        B = sparse.csr_matrix((np.concatenate(b_vals), (np.concatenate(b_rows), np.concatenate(b_cols))), shape=(self.size, f_top))
        self._back = (B @ F).tocsr()
        self._back_mean = (B @ sparse.diags(np.concatenate(f_count)) @ F).tocsr()

    def project(self, x: np.ndarray) -> np.ndarray:
        """The minimum-norm parameters of the same distribution (the projection onto G's complement).

        Parameters
        ----------
        x : numpy.ndarray
            Flat log-potentials (or any vector in that layout: gradients, directions).

        Returns
        -------
        numpy.ndarray
            Same layout; ``project(project(x)) == project(x)``, and ``x - project(x)`` lies in G.

        Examples
        --------
        >>> g = Gauge(Domain(("A",), (2,)), [("A",)])
        >>> g.project(np.array([3.0, 1.0])).tolist()
        [1.0, -1.0]
        """
        return self._back @ (self._mean @ self._check(x))

    def gauge(self, x: np.ndarray) -> np.ndarray:
        """The gauge part ``x - project(x)``: a change of the tables that leaves the distribution
        unchanged (log Z moves by a constant).

        Parameters
        ----------
        x : numpy.ndarray

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> g = Gauge(Domain(("A",), (2,)), [("A",)])
        >>> g.gauge(np.array([3.0, 1.0])).tolist()
        [2.0, 2.0]
        """
        x = self._check(x)
        return x - self._back @ (self._mean @ x)

    def pool(self, x: np.ndarray) -> np.ndarray:
        """Like :meth:`project`, but each interaction f_U is the mean of the tables' U-components
        instead of their sum: the gauge-free parameters that tables estimating the same interaction
        separately (e.g. log-marginals) agree on, not their total.

        Parameters
        ----------
        x : numpy.ndarray
            Flat tables in this layout.

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> g = Gauge(Domain(("A", "B"), (2, 2)), [("A",), ("A", "B")])
        >>> x = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])   # both tables hold the A-effect +-1
        >>> float(g.project(x)[0]), float(g.pool(x)[0])   # the A-effect, 2 in all or 1, is split 2 : 1
        (1.3333333333333333, 0.6666666666666666)
        """
        return self._back_mean @ (self._mean @ self._check(x))

    def _check(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if x.shape != (self.size,):
            raise ValueError(f"x: expected a flat vector of {self.size} log-potentials, got shape {x.shape}")
        return x
