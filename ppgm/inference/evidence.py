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

__all__ = ["ReducedRows", "distinct_rows", "evidence_mask", "reduced_cells", "row_marginals", "seen_counts"]

_LOWEST = float(np.finfo(float).min)
REDUCED_CHUNK = 2**22  # reduced cells calibrated at once
REDUCED_COST = 2  # a row takes the full tree when its reduced cells times this reach the tree's cells: measured per
# cell, a reduced cell costs 1-1.5x a full-tree cell to calibrate and 2-4x with its index arrays built (ALARM,
# WIN95PTS, HAILFINDER at 10-70% missing); at 70% ALARM keeps 469 of 1,038 cells a row, 121 against 145 us
CHUNK_CELLS = 2**22  # full-tree cells x rows calibrated at once on the full tree (32 MB per float64 copy)


def distinct_rows(rec: np.ndarray, top: int, inverse: bool = False) -> tuple:
    """The distinct rows of ``rec`` (codes -1 .. ``top`` - 1) and their multiplicities (``inverse``: and
    each row's distinct row): each row's bytes as one opaque item in the narrowest integer type, so
    that one sort of byte strings finds them (ALARM, 196k rows: 0.2 s, where ``numpy.unique(axis=0)``'s
    sort over 37 columns took 3.5 s).

    Parameters
    ----------
    rec : numpy.ndarray
        ``(N, d)`` integer codes, -1 where unobserved.
    top : int
        The largest cardinality.
    inverse : bool
        Also return, for each row of ``rec``, the index of its distinct row.

    Returns
    -------
    tuple
        ``(distinct, counts)``, or ``(distinct, counts, inverse)``.

    Examples
    --------
    >>> d, c, i = distinct_rows(np.array([[0, -1], [1, 1], [0, -1]]), 2, inverse=True)
    >>> d.tolist(), c.tolist(), i.tolist()
    ([[0, -1], [1, 1]], [2, 1], [0, 1, 0])
    """
    if not len(rec):
        empty = (np.zeros((0, rec.shape[1]), np.int64), np.zeros(0, np.int64))
        return empty + (np.zeros(0, np.intp),) if inverse else empty
    small = np.int8 if top <= 127 else np.int16 if top <= 32767 else np.int64
    packed = np.ascontiguousarray(rec.astype(small))
    items = packed.view(np.dtype((np.void, packed.itemsize * rec.shape[1]))).ravel()
    if inverse:
        distinct, inv, counts = np.unique(items, return_inverse=True, return_counts=True)
    else:
        distinct, counts = np.unique(items, return_counts=True)
    out = (distinct.view(small).reshape(len(distinct), rec.shape[1]).astype(np.int64), counts)
    return out + (np.asarray(inv, dtype=np.intp).ravel(),) if inverse else out


def _evidence_index(tree: JunctionTree) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per variable of the domain: the flat cells of every clique that holds it, and its state there."""
    memo = tree._memo.get("evidence")
    if memo is None:
        plan = tree._plan()
        memo = []
        for v in tree.domain.variables:
            cells, states = [], []
            for c, start, shape in zip(tree.cliques, plan["starts"], plan["shapes"]):
                if v in c:
                    cells.append(start + np.arange(int(np.prod(shape))))
                    states.append(np.indices(shape)[c.index(v)].ravel())
            memo.append((np.concatenate(cells).astype(np.intp), np.concatenate(states)) if cells
                        else (np.zeros(0, np.intp), np.zeros(0, np.int64)))
        tree._memo["evidence"] = memo
    return memo


def evidence_mask(tree: JunctionTree, rows: np.ndarray) -> np.ndarray:
    """Which of the tree's flat clique cells agree with each row's observed values: the ``keep`` mask of
    :meth:`JunctionTree.calibrate_columns`, one column per row.

    Parameters
    ----------
    tree : JunctionTree
    rows : numpy.ndarray
        ``(B, d)`` codes in the tree's domain order, negative where unobserved.

    Returns
    -------
    numpy.ndarray
        ``(cells, B)`` bool.

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> jt = JunctionTree.build(Domain(("A", "B"), (2, 2)), [("A", "B")])
    >>> evidence_mask(jt, np.array([[-1, 1]])).ravel().tolist()
    [False, True, False, True]
    """
    rows = np.asarray(rows)
    keep = np.ones((int(tree._plan()["sizes"].sum()), len(rows)), dtype=bool)
    for j, (idx, st) in enumerate(_evidence_index(tree)):
        obs = rows[:, j]
        if idx.size and (obs >= 0).any():  # compat[s, r]: state s agrees with row r (or r misses it)
            compat = (obs[None, :] == np.arange(tree.domain.cards[j])[:, None]) | (obs < 0)[None, :]
            keep[idx] &= compat[st]
    return keep


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


def _scope_codes(tree: JunctionTree, home: int, scope: tuple) -> np.ndarray:
    """Each cell of clique ``home`` (flat, C order): its code over ``scope`` (C order in the scope's order)."""
    clique, shape = tree.cliques[home], tree._plan()["shapes"][home]
    if not scope:
        return np.zeros(int(np.prod(shape)), dtype=np.intp)
    idx = np.indices(shape).reshape(len(shape), -1)
    return np.ravel_multi_index(tuple(idx[clique.index(v)] for v in scope), tree.domain.shape(scope)).astype(np.intp)


def _seen_log_potential(tree: JunctionTree, psi: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each row's sum of the log-potentials of the cliques it sees entirely, at its observed cell (the part
    of its log-probability that :meth:`ReducedRows.calibrate` leaves out)."""
    out = np.zeros(len(rows))
    for start, shape, sub, n in _clique_free(tree, rows):
        sel = np.flatnonzero(n == 1)
        if sel.size:
            cell = start + (np.ravel_multi_index(np.maximum(sub[sel], 0).T, shape) if sub.shape[1] else 0)
            out[sel] += psi[cell]
    return out


def _marginals_full(tree: JunctionTree, psi: np.ndarray, rows: np.ndarray, homes: list, codes: list,
                    sizes: list, chunk_cells: int) -> tuple[np.ndarray, list]:
    """:func:`row_marginals` of ``rows`` on the full tree: each row a column of
    :meth:`JunctionTree.calibrate_columns` under its evidence mask, in chunks."""
    plan = tree._plan()
    cells = int(plan["sizes"].sum())
    step = max(1, chunk_cells // max(cells, 1))
    log_z = np.empty(len(rows))
    out = [np.empty((len(rows), s)) for s in sizes]
    for a in range(0, len(rows), step):
        part = rows[a:a + step]
        lz, beliefs = tree.calibrate_columns(psi, evidence_mask(tree, part))
        log_z[a:a + len(part)] = lz
        for o, h, code, s in zip(out, homes, codes, sizes):
            b = beliefs[plan["starts"][h]:plan["starts"][h] + plan["sizes"][h]]
            o[a:a + len(part)] = np.stack([np.bincount(code, weights=b[:, j], minlength=s) for j in range(b.shape[1])]) \
                if b.shape[1] <= 4 else (np.eye(s)[code].T @ b).T
    return log_z, out


def _marginals_reduced(tree: JunctionTree, psi: np.ndarray, rows: np.ndarray, homes: list, codes: list,
                       sizes: list) -> tuple[np.ndarray, list, np.ndarray]:
    """:func:`row_marginals` of ``rows`` on their reduced trees (:class:`ReducedRows`); ``exact`` as its
    :meth:`ReducedRows.calibrate` reports (the other rows are left to the full tree)."""
    B = len(rows)
    red = ReducedRows(tree, rows)
    lz, E, exact = red.calibrate(psi)
    with np.errstate(invalid="ignore"):
        log_z = lz + _seen_log_potential(tree, psi, rows)
    pos = {int(k): i for i, k in enumerate(red.order)}
    cell_first = np.concatenate([[0], np.cumsum(red.clique_cells)])
    block_first = np.concatenate([[0], np.cumsum(red.clique_blocks)])
    starts = tree._plan()["starts"]
    dom = tree.domain
    out = []
    for h, code, s in zip(homes, codes, sizes):
        i = pos[h]
        c0, c1, b0, b1 = cell_first[i], cell_first[i + 1], block_first[i], block_first[i + 1]
        brow = red.block_row[b0:b1].astype(np.intp)
        row_of = np.repeat(brow, red.block_sizes[b0:b1])
        local = red.cells[c0:c1].astype(np.intp) - starts[h]
        o = np.bincount(row_of * s + code[local], weights=E[c0:c1], minlength=B * s).reshape(B, s)
        seen = np.ones(B, bool)
        seen[brow] = False
        if seen.any():  # the rows that see the whole clique: the indicator of their cell
            vs = [dom.index(v) for v in tree.cliques[h]]
            sub = np.maximum(rows[seen][:, vs], 0)
            cell = np.ravel_multi_index(sub.T, dom.shape(tree.cliques[h])) if vs else np.zeros(int(seen.sum()), np.intp)
            o[np.flatnonzero(seen), code[cell]] = 1.0
        out.append(o)
    return log_z, out, exact


def row_marginals(tree: JunctionTree, psi: np.ndarray, rows: np.ndarray, scopes, chunk_cells: int = CHUNK_CELLS,
                  reduced_chunk: int = REDUCED_CHUNK, path: str = "auto") -> tuple[np.ndarray, list]:
    """Every row's posterior marginal of each scope given the row's observed values, by the engine of the
    EM E-step: distinct rows once; each on the tree reduced to its unobserved cells (:class:`ReducedRows`)
    or, when that would cost about as much as the full tree (``REDUCED_COST``), as a column of
    :meth:`JunctionTree.calibrate_columns` under its evidence mask; in chunks of ``reduced_chunk``
    reduced cells or ``chunk_cells`` full-tree cells, so memory stays bounded.

    Parameters
    ----------
    tree : JunctionTree
        Every scope inside one of its cliques.
    psi : numpy.ndarray
        ``(cells,)`` flat log-potentials of a model on the tree (as :meth:`JunctionTree.calibrate_flat`'s).
    rows : numpy.ndarray
        ``(B, d)`` integer codes in the tree's domain order, negative where unobserved.
    scopes : sequence of tuple
        The scopes to report (an observed variable's marginal is the indicator of its value).
    chunk_cells, reduced_chunk : int
        Cells calibrated at once on either path.
    path : {"auto", "reduced", "tree"}
        Force one path (for tests); ``"auto"`` chooses per row.

    Returns
    -------
    log_evidence : numpy.ndarray
        ``(B,)``: each row's log of the unnormalised mass of its observed values (for a Bayesian network's
        CPTs, log P(observed values)); -inf where that is zero.
    marginals : list of numpy.ndarray
        Per scope, ``(B, prod(cards))`` in C order over the scope's variables; NaN rows where the
        evidence is impossible.

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> jt = JunctionTree.build(Domain(("A", "B"), (2, 2)), [("A", "B")])
    >>> lz, (mA,) = row_marginals(jt, np.log([1.0, 2.0, 3.0, 4.0]), np.array([[-1, -1], [-1, 0]]), [("A",)])
    >>> np.round(np.exp(lz), 6).tolist(), np.round(mA, 4).tolist()
    ([10.0, 4.0], [[0.3, 0.7], [0.25, 0.75]])
    """
    rows = np.asarray(rows, dtype=np.int64)
    dom = tree.domain
    if rows.ndim != 2 or rows.shape[1] != len(dom):
        raise ValueError(f"rows: expected shape (B, {len(dom)}), got {rows.shape}")
    scopes = [tuple(s) for s in scopes]
    homes = [tree.home(s) for s in scopes]
    codes = [_scope_codes(tree, h, s) for h, s in zip(homes, scopes)]
    sizes = [int(np.prod(dom.shape(s))) for s in scopes]
    B = len(rows)
    log_z = np.full(B, -np.inf)
    out = [np.full((B, s), np.nan) for s in sizes]
    if not B:
        return log_z, out
    distinct, _, inv = distinct_rows(np.where(rows < 0, -1, rows), max(dom.cards), inverse=True)
    D = len(distinct)
    dz = np.full(D, -np.inf)
    dm = [np.full((D, s), np.nan) for s in sizes]
    cells = int(tree._plan()["sizes"].sum())
    size = reduced_cells(tree, distinct)
    on_tree = np.ones(D, bool) if path == "tree" else np.zeros(D, bool) if path == "reduced" else size * REDUCED_COST >= cells

    def put(which: np.ndarray, lz: np.ndarray, ms: list) -> None:
        dz[which] = lz
        for d, m in zip(dm, ms):
            d[which] = m

    idx = np.flatnonzero(~on_tree)
    if idx.size:
        ends = np.searchsorted(np.cumsum(size[idx]), np.arange(1, 1 + int(size[idx].sum()) // reduced_chunk + 1)
                               * reduced_chunk, side="right")
        bounds = np.unique(np.concatenate([[0], ends, [idx.size]]))
        for a, b in zip(bounds[:-1], bounds[1:]):
            which = idx[a:b]
            lz, ms, exact = _marginals_reduced(tree, psi, distinct[which], homes, codes, sizes)
            put(which[exact], lz[exact], [m[exact] for m in ms])
            on_tree[which[~exact]] = True  # a range too wide for the scaled schedule: the full tree's log schedule
    idx = np.flatnonzero(on_tree)
    if idx.size:
        lz, ms = _marginals_full(tree, psi, distinct[idx], homes, codes, sizes, chunk_cells)
        put(idx, lz, ms)
    bad = ~np.isfinite(dz)
    for d in dm:
        d[bad] = np.nan
    dz[bad] = -np.inf
    log_z = dz[inv]
    return log_z, [d[inv] for d in dm]
