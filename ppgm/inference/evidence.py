"""A junction tree under many evidence rows at once, each clique reduced to the row's unobserved cells.

Calibrating a model under evidence on the full tree (:meth:`JunctionTree.calibrate_columns` with a mask)
costs the tree's cells per row, most of them ruled out by the evidence. Here each row keeps, in every
clique, only the cells that agree with its observed values: ``prod(card of the clique's unobserved
variables)`` of them. A clique the row sees entirely keeps one cell, a constant that does not depend on
the rest of the row (:func:`seen_counts` counts those cells like complete records); an edge whose
separator the row sees entirely carries a constant message, so it is cut and the row's tree falls into
independent pieces. All rows' remaining cells form one ragged array, calibrated by the two-pass,
level-batched schedule on the tree: each message a gather and a ``bincount`` over index arrays built
from the rows alone (not the model), so a learner builds them once and calibrates every iterate on them.
A row with a few unobserved variables then costs a few cells instead of the tree's tables.
"""

from __future__ import annotations

import numpy as np

from .junction_tree import SCALED_RANGE, JunctionTree

__all__ = ["ReducedRows", "reduced_cells", "seen_counts"]

_LOWEST = float(np.finfo(float).min)


def _clique_free(tree: JunctionTree, rows: np.ndarray):
    """Per clique: its flat start, shape, the rows' codes on it (``(B, k)``) and each row's reduced size
    (the product of the cardinalities of the clique's variables the row leaves unobserved)."""
    dom, plan = tree.domain, tree._plan()
    cards = np.asarray(dom.cards, dtype=np.int64)
    for c, start, shape in zip(tree.cliques, plan["starts"], plan["shapes"]):
        vs = [dom.index(v) for v in c]
        sub = rows[:, vs]
        yield start, shape, sub, np.prod(np.where(sub < 0, cards[vs][None, :], 1), axis=1)


def reduced_cells(tree: JunctionTree, rows: np.ndarray) -> np.ndarray:
    """Cells of each row's reduced tree: the sum over the cliques with an unobserved variable of the
    product of the cardinalities of the clique's unobserved variables (a row's cost on :class:`ReducedRows`).

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
    [0, 6, 15]
    """
    out = np.zeros(len(rows), dtype=np.int64)
    for _, _, _, n in _clique_free(tree, rows):
        out += np.where(n > 1, n, 0)
    return out


def seen_counts(tree: JunctionTree, rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Flat clique counts (the tree's cell layout) of the cliques each row sees entirely, each row
    counted ``weights`` times: the part of a row's expected clique counts that no model changes.

    Parameters
    ----------
    tree : JunctionTree
    rows : numpy.ndarray
        ``(B, d)`` codes, negative where unobserved.
    weights : numpy.ndarray
        ``(B,)``.

    Returns
    -------
    numpy.ndarray
        ``(cells,)``.

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> jt = JunctionTree.build(Domain(("A", "B", "C"), (2, 2, 2)), [("A", "B"), ("B", "C")])
    >>> jt.cliques, seen_counts(jt, np.array([[1, 0, -1]]), np.array([3.0])).tolist()
    ((('A', 'B'), ('B', 'C')), [0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    """
    total = int(tree._plan()["sizes"].sum())
    out = np.zeros(total)
    for start, shape, sub, n in _clique_free(tree, rows):
        sel = n == 1
        if sel.any():  # a missing variable of one state is seen at 0
            cell = start + (np.ravel_multi_index(np.maximum(sub[sel], 0).T, shape) if sub.shape[1] else 0)
            out += np.bincount(np.broadcast_to(cell, (int(sel.sum()),)), weights=weights[sel], minlength=total)
    return out


def _strides(free: np.ndarray) -> np.ndarray:
    """C-order strides of each row of axis sizes ``free`` (``(P, n)``)."""
    out = np.ones_like(free)
    if free.shape[1] > 1:
        out[:, :-1] = np.cumprod(free[:, :0:-1], axis=1)[:, ::-1]
    return out


def _distinct(code: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.unique(code, return_inverse=True)`` for codes below ``2 ** bits``: by counting when that range
    is small (no sort over the rows)."""
    if bits > 20:
        return np.unique(code, return_inverse=True)
    seen = np.bincount(code, minlength=1 << bits) > 0
    pats = np.flatnonzero(seen)
    lut = np.zeros(seen.size, dtype=np.intp)
    lut[pats] = np.arange(pats.size)
    return pats.astype(np.int64), lut[code]


def _compact(a: np.ndarray) -> np.ndarray:
    """An index array as int32 when its values allow (half the memory of the arrays kept between calls)."""
    return a.astype(np.int32) if a.size and int(a.max()) < 2**31 - 1 else a.astype(np.intp)


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + n)`` over ``zip(starts, sizes)``."""
    total = int(sizes.sum())
    return np.repeat(starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(total, dtype=np.int64)


class ReducedRows:
    """Index arrays of ``rows`` (``(B, d)`` codes, negative where unobserved) on ``tree``: every clique
    reduced to each row's unobserved cells (see the module docstring). :meth:`calibrate` then computes,
    under any model's potentials on the tree, each row's log-probability of its observed values (without
    the cliques it sees entirely, which :func:`seen_counts` covers) and its reduced clique beliefs.

    Parameters
    ----------
    tree : JunctionTree
    rows : numpy.ndarray
        ``(B, d)`` int64 codes in the tree's domain order, -1 where unobserved.

    Attributes
    ----------
    cells : numpy.ndarray
        ``(R,)``: the full tree's flat cell of every reduced cell (blocks of a clique and a row, clique
        by clique).
    block_sizes, block_row : numpy.ndarray
        Each block's cells and row.

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
        cards = np.asarray(dom.cards, dtype=np.int64)
        order = [lv.root] + [int(c) for L in lv.levels for c in L.edge_child]  # cliques by depth, root first
        miss = rows < 0
        # Per clique, the rows' distinct local patterns (which of its variables are unobserved) and, per
        # pattern, a table of its reduced cells' offsets in the full clique: a row's cells are then its
        # observed values' offset plus its pattern's table (no per-cell arithmetic over the rows).
        info, start = {}, 0
        for k in order:
            vs = np.array([dom.index(v) for v in tree.cliques[k]], dtype=np.intp)
            ck = cards[vs]
            strides = _strides(ck[None, :])[0]
            mk = miss[:, vs]
            code = mk.astype(np.int64) @ (np.int64(1) << np.arange(len(vs), dtype=np.int64))
            pats, inv = _distinct(code, len(vs))
            pm = ((pats[:, None] >> np.arange(len(vs))) & 1).astype(bool)
            free = np.where(pm, ck[None, :], 1)
            prs = _strides(free)
            psize = np.prod(free, axis=1)
            tstart = np.cumsum(psize) - psize
            pp = np.repeat(np.arange(len(pats)), psize)
            jj = np.arange(int(psize.sum()), dtype=np.int64) - np.repeat(tstart, psize)
            off = np.zeros(jj.size, dtype=np.int64)
            for ax in range(len(vs)):
                off += np.where(pm[pp, ax], strides[ax] * ((jj // prs[pp, ax]) % ck[ax]), 0)
            n = psize[inv]
            live = np.flatnonzero(n > 1)  # the rows with a block here (others see the clique entirely)
            n_live = n[live]
            base = plan["starts"][k] + np.where(mk[live], 0, rows[live][:, vs] * strides[None, :]).sum(axis=1)
            li = _ranges(tstart[inv[live]], n_live)  # each reduced cell: its cell in its pattern's table
            at = np.full(B, -1, dtype=np.int64)  # each row's block start (flat), -1 without one
            at[live] = start + np.cumsum(n_live) - n_live
            info[k] = dict(vs=list(vs), inv=inv, pm=pm, prs=prs, pp=pp, jj=jj, n=n, live=live, n_live=n_live,
                           base=base, off=off, li=li, at=at, start=start, size=int(n_live.sum()))
            start += info[k]["size"]
        self.n_reduced = start
        self.n_cells = int(plan["sizes"].sum())
        self.clique_starts = np.asarray(plan["starts"], dtype=np.intp)
        self.order = np.asarray(order, dtype=np.intp)  # the cliques in the ragged layout's order, their cells and blocks
        self.clique_cells = np.array([info[k]["size"] for k in order], dtype=np.int64)
        self.clique_blocks = np.array([info[k]["live"].size for k in order], dtype=np.int64)
        sizes = np.concatenate([info[k]["n_live"] for k in order])
        self.block_sizes = _compact(sizes)
        self.block_starts = _compact(np.cumsum(sizes) - sizes)
        self.block_row = _compact(np.concatenate([info[k]["live"] for k in order]))
        block_first = np.cumsum([0] + [info[k]["live"].size for k in order])
        block_of = {k: block_first[i] for i, k in enumerate(order)}  # the clique's first block
        self.cells = _compact(np.concatenate([np.repeat(info[k]["base"], info[k]["n_live"]) + info[k]["off"][info[k]["li"]]
                                              for k in order]))

        def sep_table(k, sep_vars):
            """Per pattern of clique ``k``: the reduced separator's size, and the separator cell of each of
            the pattern's cells (separator axes in domain order, C order over the unobserved ones)."""
            i = info[k]
            axes = [i["vs"].index(v) for v in sep_vars]
            sm = i["pm"][:, axes]
            free = np.where(sm, cards[sep_vars][None, :], 1)
            sstr = _strides(free)
            pp, jj = i["pp"], i["jj"]
            out = np.zeros(jj.size, dtype=np.int64)
            for q, (ax, v) in enumerate(zip(axes, sep_vars)):
                out += np.where(sm[pp, q], sstr[pp, q] * ((jj // i["prs"][pp, ax]) % cards[v]), 0)
            return np.prod(free, axis=1), out

        # An edge carries a message for the rows that leave part of its separator unobserved; for the
        # others it is cut, and the child's block (if any) is the root of a piece of the row's tree.
        piece_root = [block_of[lv.root] + np.arange(info[lv.root]["live"].size)]
        self.levels = []
        for L in lv.levels:
            kids = [int(c) for c in L.edge_child]
            pars = [int(p) for p in L.edge_parent]
            edges = []
            for c, p in zip(kids, pars):
                sv = np.array([dom.index(v) for v in tree.cliques[c] if v in tree.cliques[p]], dtype=np.intp)
                (csize, ctab), (_, ptab) = sep_table(c, sv), sep_table(p, sv)
                ms = csize[info[c]["inv"]]  # each row's message size on this edge
                up = np.flatnonzero(ms > 1)
                edges.append((c, p, ms, up, ctab, ptab))
                piece_root.append(block_of[c] + np.flatnonzero(ms[info[c]["live"]] == 1))  # the child's blocks it cuts off
            msize = np.concatenate([ms[up] for (_, _, ms, up, _, _) in edges])
            n_msg = int(msize.sum())
            if not n_msg:
                continue
            mstart = (np.cumsum(msize) - msize).astype(np.int64)
            c2m, parent_side, m0 = [], [], 0
            rounds: dict[int, int] = {}
            for c, p, ms, up, ctab, ptab in edges:
                row_msg = np.full(B, n_msg, dtype=np.int64)  # the dummy slot n_msg for the rows it does not carry
                row_msg[up] = mstart[m0:m0 + up.size]
                m0 += up.size
                ic, ip = info[c], info[p]
                carries = ms[ic["live"]] > 1
                c2m.append(np.repeat(row_msg[ic["live"]], ic["n_live"])
                           + np.where(np.repeat(carries, ic["n_live"]), ctab[ic["li"]], 0))
                if up.size:
                    r = rounds.get(p, 0)
                    rounds[p] = r + 1
                    n_up = ip["n"][up]
                    pc = _ranges(ip["at"][up], n_up)  # the parent's cells of the carrying rows
                    parent_side.append((r, pc, np.repeat(row_msg[up], n_up) + ptab[ip["li"][pc - ip["start"]]]))
            lo, hi = info[kids[0]]["start"], info[kids[-1]]["start"] + info[kids[-1]]["size"]
            parent_side.sort(key=lambda t: t[0])  # stable: by round, edges in level order within one
            bounds = np.cumsum([0] + [t[1].size for t in parent_side])
            firsts = [[t[0] for t in parent_side].index(r) for r in range(max(rounds.values()))]
            cuts = [int(bounds[i]) for i in firsts] + [int(bounds[-1])]
            self.levels.append(dict(lo=lo, hi=hi, c2m=_compact(np.concatenate(c2m)),
                                    p_cells=_compact(np.concatenate([t[1] for t in parent_side])),
                                    p2m=_compact(np.concatenate([t[2] for t in parent_side])),
                                    rounds=list(zip(cuts[:-1], cuts[1:])), n_msg=n_msg,
                                    mstart=_compact(mstart), msize=_compact(msize),
                                    mrow=_compact(np.concatenate([up for (_, _, _, up, _, _) in edges]))))
        self.piece_root = _compact(np.concatenate(piece_root))

    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        out = self.cells.nbytes + self.block_sizes.nbytes + self.block_starts.nbytes + self.block_row.nbytes
        out += self.piece_root.nbytes
        for L in self.levels:
            out += sum(v.nbytes for v in L.values() if isinstance(v, np.ndarray))
        return out

    def calibrate(self, psi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every row's log-probability (unnormalised) of its observed values, less the potentials of the
        cliques it sees entirely, and its reduced clique beliefs, under the flat log-potentials ``psi``
        (``(cells,)``, finite or -inf, as :meth:`JunctionTree.calibrate_flat`'s).

        Computed in probability space, each message rescaled by its maximum per row, the log-scales
        carried. When the model's cliques' finite log-ranges add up to less than ``SCALED_RANGE`` (they
        bound every row's), each cell is shifted by its clique's maximum and every row is exact; otherwise
        each block is shifted by its own maximum, and ``exact`` reports the rows whose blocks' ranges add
        up to less (a row outside it is left to the full tree's log schedule).

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
        starts, bsize, brow = self.block_starts, self.block_sizes, self.block_row
        if not vals.size:
            return np.zeros(B), vals, np.ones(B, bool)
        with np.errstate(invalid="ignore", divide="ignore"):
            # the model's cliques' finite log-ranges bound every row's: when they allow, each cell is shifted by
            # its clique's maximum; otherwise by its block's, and rows beyond the range are reported
            tops = np.maximum.reduceat(np.where(np.isnan(psi), -np.inf, psi), self.clique_starts)
            lows = np.minimum.reduceat(np.where(psi == -np.inf, np.inf, psi), self.clique_starts)
            if float(np.where(np.isfinite(tops) & np.isfinite(lows), tops - lows, 0.0).sum()) < SCALED_RANGE:
                exact = np.ones(B, bool)
                top = np.repeat(np.maximum(tops[self.order], _LOWEST), self.clique_blocks)
                E = vals
                E -= np.repeat(np.maximum(tops[self.order], _LOWEST), self.clique_cells)
            else:
                top = np.maximum.reduceat(vals, starts)
                low = np.minimum.reduceat(np.where(vals == -np.inf, np.inf, vals), starts)
                spread = np.where(np.isfinite(top) & np.isfinite(low), top - low, 0.0)
                exact = np.bincount(brow, weights=spread, minlength=B) < SCALED_RANGE
                top = np.maximum(top, _LOWEST)  # an all-zero block stays zero (no NaN)
                E = vals
                E -= np.repeat(top, bsize)
            np.exp(E, out=E)
            log_z = np.bincount(brow, weights=np.where(top > _LOWEST, top, 0.0), minlength=B)
            ups = []
            for L in reversed(self.levels):  # deepest level first: messages to the parents
                m: np.ndarray = np.bincount(L["c2m"], weights=E[L["lo"]:L["hi"]], minlength=L["n_msg"] + 1)[:L["n_msg"]]
                s = np.maximum.reduceat(m, L["mstart"])
                s = np.where(s > 0, s, 1.0)
                m /= np.repeat(s, L["msize"])
                log_z += np.bincount(L["mrow"], weights=np.log(s), minlength=B)
                for a, b in L["rounds"]:  # a parent with several children here: one of them per round
                    E[L["p_cells"][a:b]] *= m[L["p2m"][a:b]]
                ups.append(m)
            mass = np.add.reduceat(E, starts)
            log_z += np.bincount(brow[self.piece_root], weights=np.log(mass[self.piece_root]), minlength=B)
            for L, up in zip(self.levels, reversed(ups)):  # root outwards: each child reads its separator off its parent
                sep = np.bincount(L["p2m"], weights=E[L["p_cells"]], minlength=up.size)
                down = np.where(up > 0, sep / up, 0.0)
                d = np.maximum.reduceat(down, L["mstart"])
                down /= np.repeat(np.where(d > 0, d, 1.0), L["msize"])
                E[L["lo"]:L["hi"]] *= np.append(down, 1.0)[L["c2m"]]
            mass = np.add.reduceat(E, starts)
            E /= np.repeat(mass, bsize)
        return log_z, E, exact
