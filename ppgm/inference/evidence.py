"""A junction tree under many evidence rows at once, each clique reduced to the row's unobserved cells.

Calibrating a model under evidence on the full tree (:meth:`JunctionTree.calibrate_columns` with a mask)
costs the tree's cells per row, most of them ruled out by the evidence. Here each row keeps, in every
clique, only the cells that agree with its observed values: ``prod(card of the clique's unobserved
variables)`` of them (one cell for a clique the row sees entirely). A row with a few unobserved variables
then costs a few cells per clique instead of the clique's table, and all rows are calibrated together as
one ragged array: the same two-pass, level-batched schedule on the tree, each message a gather and a
``bincount`` over precomputed index arrays, rescaled by its maximum per row and carried as a log-scale.
The index arrays depend on the rows only (not on the model), so a learner builds them once and
calibrates every iterate on them.
"""

from __future__ import annotations

import numpy as np

from .junction_tree import SCALED_RANGE, JunctionTree

__all__ = ["ReducedRows", "reduced_cells"]

_LOWEST = float(np.finfo(float).min)


def reduced_cells(tree: JunctionTree, rows: np.ndarray) -> np.ndarray:
    """Cells of each row's reduced tree: the sum over cliques of the product of the cardinalities of the
    clique's unobserved (negative-coded) variables; a row's cost on :class:`ReducedRows`.

    Parameters
    ----------
    tree : JunctionTree
    rows : numpy.ndarray
        ``(B, d)`` integer codes in the tree's domain order, negative where a value is unobserved.

    Returns
    -------
    numpy.ndarray
        ``(B,)`` int64.

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> jt = JunctionTree.build(Domain(("A", "B", "C"), (2, 3, 4)), [("A", "B"), ("B", "C")])
    >>> reduced_cells(jt, np.array([[0, 1, 2], [-1, 1, -1], [0, -1, -1]])).tolist()
    [2, 6, 15]
    """
    dom = tree.domain
    cards = np.asarray(dom.cards, dtype=np.int64)
    free = np.where(rows < 0, cards[None, :], 1)
    out = np.zeros(len(rows), dtype=np.int64)
    for c in tree.cliques:
        out += np.prod(free[:, [dom.index(v) for v in c]], axis=1)
    return out


class ReducedRows:
    """Index arrays of ``rows`` (``(B, d)`` codes, negative where unobserved) on ``tree``: every clique
    reduced to each row's unobserved cells (see the module docstring). :meth:`calibrate` then computes each
    row's log partition function and its reduced clique beliefs under any model's potentials on the tree.

    Parameters
    ----------
    tree : JunctionTree
    rows : numpy.ndarray
        ``(B, d)`` int64 codes in the tree's domain order, -1 where unobserved.

    Attributes
    ----------
    cells : numpy.ndarray
        ``(R,)``: the full tree's flat cell of every reduced cell (rows' blocks, clique by clique).
    n_rows : int

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> jt = JunctionTree.build(Domain(("A", "B"), (2, 2)), [("A", "B")])
    >>> red = ReducedRows(jt, np.array([[-1, -1], [0, -1]]))
    >>> lz, beliefs, exact = red.calibrate(np.log([1.0, 2.0, 3.0, 4.0]))
    >>> np.round(np.exp(lz), 6).tolist(), np.round(beliefs, 4).tolist()       # second row: A = 0 seen
    ([10.0, 3.0], [0.1, 0.2, 0.3, 0.4, 0.3333, 0.6667])
    """

    def __init__(self, tree: JunctionTree, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        dom, plan = tree.domain, tree._plan()
        lv = tree._levels()
        self.n_rows = B = len(rows)
        self.n_cells = int(plan["sizes"].sum())
        cards = np.asarray(dom.cards, dtype=np.int64)
        order = [lv.root] + [int(c) for L in lv.levels for c in L.edge_child]  # cliques by depth, root first
        pos = {k: i for i, k in enumerate(order)}
        miss = rows < 0
        sizes, rstrides, axes_of = {}, {}, {}
        for k in order:  # per clique: each row's reduced size and the reduced layout's strides (C order)
            vs = np.array([dom.index(v) for v in tree.cliques[k]], dtype=np.intp)
            free = np.where(miss[:, vs], cards[vs][None, :], 1)
            rs = np.ones_like(free)
            if len(vs) > 1:
                rs[:, :-1] = np.cumprod(free[:, :0:-1], axis=1)[:, ::-1]
            sizes[k] = np.prod(free, axis=1) if len(vs) else np.ones(B, np.int64)
            rstrides[k] = rs
            axes_of[k] = vs
        block_sizes = np.concatenate([sizes[k] for k in order]) if order else np.zeros(0, np.int64)
        self.block_sizes = block_sizes
        self.block_starts = np.concatenate([[0], np.cumsum(block_sizes)[:-1]]).astype(np.intp)
        self.block_row = np.tile(np.arange(B, dtype=np.intp), len(order))
        clique_start = {}
        a = 0
        for k in order:
            clique_start[k] = a
            a += int(sizes[k].sum())
        self.n_reduced = a
        self.root_range = (clique_start[lv.root], clique_start[lv.root] + int(sizes[lv.root].sum())) if order else (0, 0)
        self.root_starts = self.block_starts[:B] if order else np.zeros(0, np.intp)

        def layout(k):
            """Each reduced cell of clique ``k``: its row and its position in the row's block."""
            n = sizes[k]
            rb = np.repeat(np.arange(B, dtype=np.intp), n)
            j = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
            return rb, j

        def digit(k, a, rb, j):
            """The state of axis ``a`` of clique ``k`` at each reduced cell (the row's code when observed)."""
            v = axes_of[k][a]
            return np.where(miss[rb, v], (j // rstrides[k][rb, a]) % cards[v], rows[rb, v])

        cells = np.empty(self.n_reduced, dtype=np.intp)
        cache = {}
        for k in order:
            rb, j = layout(k)
            cache[k] = (rb, j)
            shape = plan["shapes"][k]
            strides = np.ones(len(shape), dtype=np.int64)
            if len(shape) > 1:
                strides[:-1] = np.cumprod(np.asarray(shape[:0:-1], dtype=np.int64))[::-1]
            g = np.full(rb.size, plan["starts"][k], dtype=np.int64)
            for ax in range(len(shape)):
                g += strides[ax] * digit(k, ax, rb, j)
            a = clique_start[k]
            cells[a:a + rb.size] = g
        self.cells = cells

        def sep_index(k, sep_axes_k, sep_vars, sstr, rb, j):
            """Each reduced cell of clique ``k``: its reduced separator cell (within the row's message block)."""
            out = np.zeros(rb.size, dtype=np.int64)
            for ax, v, s in zip(sep_axes_k, sep_vars, sstr.T):
                m = miss[rb, v]
                out += np.where(m, s[rb] * ((j // rstrides[k][rb, ax]) % cards[v]), 0)
            return out

        self.levels = []
        for L in lv.levels:
            kids = [int(c) for c in L.edge_child]
            pars = [int(p) for p in L.edge_parent]
            msizes, sep_info = [], []
            for c, p in zip(kids, pars):
                sep_vars = np.array([dom.index(v) for v in tree.cliques[c] if v in tree.cliques[p]], dtype=np.intp)
                free = np.where(miss[:, sep_vars], cards[sep_vars][None, :], 1)
                sstr = np.ones_like(free)
                if len(sep_vars) > 1:
                    sstr[:, :-1] = np.cumprod(free[:, :0:-1], axis=1)[:, ::-1]
                msizes.append(np.prod(free, axis=1) if len(sep_vars) else np.ones(B, np.int64))
                sep_info.append((sep_vars, sstr))
            msize = np.concatenate(msizes)
            mstart = np.concatenate([[0], np.cumsum(msize)[:-1]]).astype(np.intp)
            c2m, p_cells, p2m, rounds = [], [], [], {}
            for e, (c, p) in enumerate(zip(kids, pars)):
                sep_vars, sstr = sep_info[e]
                base = mstart[e * B:(e + 1) * B]
                rb, j = cache[c]
                c_axes = [list(axes_of[c]).index(v) for v in sep_vars]
                c2m.append(base[rb] + sep_index(c, c_axes, sep_vars, sstr, rb, j))
                rb, j = cache[p]
                p_axes = [list(axes_of[p]).index(v) for v in sep_vars]
                r = rounds.setdefault(p, 0)
                rounds[p] = r + 1
                p_cells.append((r, clique_start[p] + np.arange(rb.size, dtype=np.intp),
                                base[rb] + sep_index(p, p_axes, sep_vars, sstr, rb, j)))
            lo = clique_start[kids[0]]
            hi = clique_start[kids[-1]] + int(sizes[kids[-1]].sum())
            by_round = []
            for r in range(max(rounds.values())):
                sel = [(pc, pm) for rr, pc, pm in p_cells if rr == r]
                by_round.append((np.concatenate([s[0] for s in sel]), np.concatenate([s[1] for s in sel]).astype(np.intp)))
            self.levels.append(dict(lo=lo, hi=hi, c2m=np.concatenate(c2m).astype(np.intp), rounds=by_round,
                                    p_cells=np.concatenate([r[0] for r in by_round]),
                                    p2m=np.concatenate([r[1] for r in by_round]),
                                    mstart=mstart, msize=msize, mrow=np.tile(np.arange(B, dtype=np.intp), len(kids))))

    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        out = self.cells.nbytes + self.block_sizes.nbytes + self.block_starts.nbytes + self.block_row.nbytes
        for L in self.levels:
            out += sum(v.nbytes for k, v in L.items() if isinstance(v, np.ndarray))
            out += sum(a.nbytes + b.nbytes for a, b in L["rounds"])
        return out

    def calibrate(self, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every row's log partition function and reduced clique beliefs under the flat log-potentials
        ``psi`` (``(cells,)``, finite or -inf, as :meth:`JunctionTree.calibrate_flat`'s).

        Computed in probability space, each row's block shifted by its maximum and each message rescaled
        by its maximum; exact when the row's blocks' finite log-ranges add up to less than
        ``SCALED_RANGE``, which ``exact`` reports per row (a row outside it is left to the full tree's log
        schedule by the caller).

        Parameters
        ----------
        psi : numpy.ndarray

        Returns
        -------
        log_z : numpy.ndarray
            ``(B,)``, -inf where the row's observed values have probability zero.
        beliefs : numpy.ndarray
            ``(R,)``: each row's clique marginals over its reduced cells (aligned with :attr:`cells`).
        exact : numpy.ndarray of bool
            ``(B,)``: the rows whose range allowed the scaled computation.
        """
        B = self.n_rows
        vals = psi[self.cells]
        starts, bsize = self.block_starts, self.block_sizes
        if not vals.size:
            return np.zeros(B), vals, np.ones(B, bool)
        with np.errstate(invalid="ignore", divide="ignore"):
            top = np.maximum.reduceat(vals, starts)
            low = np.minimum.reduceat(np.where(vals == -np.inf, np.inf, vals), starts)
            spread = np.where(np.isfinite(top) & np.isfinite(low), top - low, 0.0)
            exact = np.bincount(self.block_row, weights=spread, minlength=B) < SCALED_RANGE
            top = np.maximum(top, _LOWEST)  # an all-zero block stays zero (no NaN)
            E = vals
            E -= np.repeat(top, bsize)
            np.exp(E, out=E)
            log_scale = np.bincount(self.block_row, weights=np.where(top > _LOWEST, top, 0.0), minlength=B)
            ups = []
            for L in reversed(self.levels):  # deepest level first: messages to the parents
                m = np.bincount(L["c2m"], weights=E[L["lo"]:L["hi"]], minlength=L["msize"].sum())
                s = np.maximum.reduceat(m, L["mstart"])
                s = np.where(s > 0, s, 1.0)
                m /= np.repeat(s, L["msize"])
                log_scale += np.bincount(L["mrow"], weights=np.log(s), minlength=B)
                for pc, pm in L["rounds"]:
                    E[pc] *= m[pm]
                ups.append(m)
            a, b = self.root_range
            z = np.add.reduceat(E[a:b], self.root_starts - a)
            log_z = np.where(z > 0, np.log(z) + log_scale, -np.inf)
            for L, up in zip(self.levels, reversed(ups)):  # root outwards: each child reads its separator off its parent
                sep = np.bincount(L["p2m"], weights=E[L["p_cells"]], minlength=up.size)
                down = np.where(up > 0, sep / up, 0.0)
                d = np.maximum.reduceat(down, L["mstart"])
                down /= np.repeat(np.where(d > 0, d, 1.0), L["msize"])
                E[L["lo"]:L["hi"]] *= down[L["c2m"]]
            mass = np.add.reduceat(E, starts)
            E /= np.repeat(mass, bsize)
        return log_z, E, exact
