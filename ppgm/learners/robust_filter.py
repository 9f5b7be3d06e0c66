"""Robust CPT learning from corrupted samples: the eigenvector filter (Cheng, Diakonikolas, Kane,
Stewart, NeurIPS 2018, Algorithm 1 Filter-Known-Topology) for binary and categorical nodes, with a
stopping rule calibrated to the data.

Each record x maps to F(x, q) (Definition 6): for every node the coordinates of its *active* parent
configuration hold the one-hot state of x (all states but the last), every other coordinate holds
q. The centred records z = F(x, q) - q have ``sum_i (k_i - 1)`` non-zeros each. The filter looks at
M = Z'Z / N with its diagonal blocks removed (one block per node and parent configuration: under the
model the covariance of F is block-diagonal, and the blocks are known from the counts), finds its
eigenvalue of largest magnitude by Lanczos through mat-vecs, and removes the records that stick out
along that direction.

Records never become a dense N x m matrix, nor a stored sparse one: each block of records is
reduced to its distinct rows and their multiplicities, and the mat-vecs Z'(w * (Z u)) are gathers
and bincounts over those rows (``ppgm.core.executor`` blocks: in memory or on Dask, same result).

Modes
-----
``"calibrated"`` (default): while the top eigenvalue exceeds what clean data from the fitted network shows
(a parametric bootstrap), remove the records beyond the clearest cut along the eigenvector, refit, repeat;
then look for a systematic batch as a two-component mixture of networks with the DAG (``_Run.mixture``;
failing a whole second network, one that differs only in a few families), and failing that peel an
eigenvalue still ``PEEL`` times out of range (``_Run.peel``). ``epsilon`` only bounds what may be
removed; clean data loses nothing. ``"paper"``: Algorithm 1 with the paper's constants on
whitened coordinates. ``"single_pass"`` / ``"iterative"``: exactly ``ceil(epsilon N)`` records removed.

The modes, their constants and the measurements behind them: ``docs/explain/robust-filter.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh

from ..core import checks
from ..core.executor import Blocks, LocalBlocks, RecordBlock, record_blocks
from ..core.progress import logger, progress_bar
from ..core.rng import as_generator
from ..factors.domain import Domain
from ..factors.records import check_records
from ..models.bayes import BayesianNetwork
from ..models.cpts import CPTLayout, conditional_probabilities

MODES = ("calibrated", "paper", "single_pass", "iterative")
MIN_EXCESS = 1e-3  # calibrated mode: an excess of extreme scores below this fraction of N is not worth a round
PRECISION = 0.9  # calibrated mode: share of the records beyond a cut that must be in excess of clean data
PEEL = 3.0  # calibrated mode: with the mixture rejected, an eigenvalue this many times its clean-data range is peeled ...
PEEL_STEP = 0.25  # ... this share of epsilon N at a time, the highest scores along the refitted eigenvector
FAR = 10.0  # calibrated mode: an eigenvalue this many times its clean-data range is corruption for sure
BUDGET_STEP = 0.9  # calibrated mode: share of the remaining budget a round may spend when the excess reaches past it
MIX_ITER = 100  # calibrated mode's mixture check: EM iterations at most (a batch's mixture settles in 10-50) ...
MIX_TOL = 1e-7  # ... or until the log-likelihood gains less than this (relative) in an iteration
MIX_PRIOR = 0.01  # ... pseudo-count per cell of both components and of the single network it is compared with
MIX_ROOM = 1.5  # ... and its records at most this many times what epsilon still allows are corruption
MIX_PARTIAL = True  # ... and, declined, a second network that differs only in the families whose own gain beats their own penalty
MIX_WITHIN = True  # ... and, after cuts that brought the eigenvalue within range, from the blanket's start only, kept only inside that node's blanket
MIX_BLANKET = True  # ... started also from the records whose recorded state of one node its Markov blanket finds unlikely
BLANKET_START = (0.99, 0.005)  # ... with these responsibilities for the records flagged and the rest


@dataclass(frozen=True)
class FilterResult:
    """Outcome of :func:`filter_known_topology`.

    Attributes
    ----------
    model : BayesianNetwork
        The DAG with the empirical CPTs of the records kept; when the calibrated mode's mixture check
        found a batch, the CPTs of the mixture's major component (its soft counts, which also correct
        for the batch's records that look like clean ones).
    inlier_mask : numpy.ndarray of bool
        One entry per input record: True if it was kept.
    history : list of dict
        One entry per round: ``eigenvalue`` (of largest magnitude), ``null_threshold`` (calibrated
        mode: the largest eigenvalue clean data of this size would show) or the paper's bound,
        ``threshold`` (the score above which records were removed), ``removed``, ``kept``,
        ``estimated_fraction`` (calibrated mode: the corrupted fraction estimated so far), and
        ``stopped`` (why the filter stopped) on the last round, with (calibrated mode) ``mixture``: the
        mixture check's ``gain`` over one network, BIC's ``penalty``, the minor component's ``weight``,
        its EM ``iterations``, whether it was ``accepted`` and the ``reason``, and when the whole-network
        check declined, ``partial``: the partial mixture's ``gain``, ``penalty``, ``families`` kept apart,
        ``weight`` and ``reason``, and ``blanket``: the ``node`` whose Markov blanket gave its second start,
        that start's ``gain`` and ``penalty``, ``inside`` (whether the families it kept apart lie in that
        blanket, required once the eigenvalue is within range), and ``chosen`` when it was kept.
    inlier_blocks : Blocks, optional
        For records given as blocks that live elsewhere (Dask), the masks per block; ``inlier_mask``
        is then None.
    estimated_fraction : float
        The corrupted fraction the filter estimates (calibrated mode: the excess of extreme scores
        over clean data; other modes: the fraction removed).

    Parameters
    ----------
    model : BayesianNetwork
    inlier_mask : numpy.ndarray or None
    history : list of dict
    inlier_blocks : Blocks, optional
    estimated_fraction : float

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> from ppgm.inference.sampling import sample
    >>> bn = random_bayesian_network(4, 2, seed=0)
    >>> res = filter_known_topology(sample(bn, 1000, seed=0), bn.domain, bn.parents, 0.1, progress=False)
    >>> int(res.inlier_mask.sum()), res.history[-1]["removed"]  # clean data: nothing removed
    (1000, 0)
    """

    model: BayesianNetwork
    inlier_mask: np.ndarray | None
    history: list = field(default_factory=list)
    inlier_blocks: Blocks | None = None
    estimated_fraction: float = 0.0


# --------------------------------------------------------------------------------------------------
# blocks of records: distinct rows, multiplicities, and where each row's coordinates are


@dataclass
class _Block:
    """One block of records as the filter holds it: its distinct rows as cells (per node with more
    than one state, the row's (parent configuration, state) cell ``g`` in one index space over all
    nodes), which distinct row each record is, which records are kept, and the kept multiplicity
    ``w`` of every distinct row."""

    start: int
    inv: np.ndarray
    keep: np.ndarray
    g: np.ndarray
    w: np.ndarray
    s: np.ndarray | None = None
    r: np.ndarray | None = None  # the mixture check: each distinct row's responsibility of the minor component
    ll: np.ndarray | None = None  # ... and its log-likelihood under the mixture


@dataclass(frozen=True)
class _Cells:
    """The (node, parent configuration, state) cells of the nodes with more than one state, and how
    they map to the m coordinates (every state but the last)."""

    nodes: tuple
    offset: tuple
    size: int
    coord_cell: np.ndarray

    @classmethod
    def of(cls, layout: CPTLayout) -> "_Cells":
        cards = layout.domain.cards
        nodes = tuple(j for j, k in enumerate(cards) if k > 1)
        sizes = [layout.n_configs[j] * cards[j] for j in nodes]
        offset = tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes)[:-1]])) if nodes else ()
        coord_cell = np.empty(layout.m, dtype=np.int64)
        for j, o in zip(nodes, offset):
            k, n_cfg = cards[j], layout.n_configs[j]
            cells = o + (np.arange(n_cfg)[:, None] * k + np.arange(k - 1)[None, :]).ravel()
            coord_cell[layout.base[j] : layout.base[j] + n_cfg * (k - 1)] = cells
        return cls(nodes, offset, int(sum(sizes)), coord_cell)

    def split(self, layout: CPTLayout, per_cell: np.ndarray) -> list:
        """Per node the (configurations, states) table of a vector over the cells (zeros for one-state nodes)."""
        out, it = [], iter(zip(self.nodes, self.offset))
        nxt = next(it, None)
        for j, k in enumerate(layout.domain.cards):
            n_cfg = layout.n_configs[j]
            if nxt is not None and nxt[0] == j:
                out.append(per_cell[nxt[1] : nxt[1] + n_cfg * k].reshape(n_cfg, k))
                nxt = next(it, None)
            else:
                out.append(np.zeros((n_cfg, 1)))
        return out


def _unique_rows(codes: np.ndarray, cards: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``codes`` and the index of each record's row. Rows are keyed in mixed radix
    when the domain fits in 62 bits; larger domains (many nodes: rows rarely repeat) stay as they are."""
    if codes.shape[0] == 0 or math.prod(int(k) for k in cards) >= 2**62:
        return codes, np.arange(codes.shape[0], dtype=np.int64)
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for j, k in enumerate(cards):
        key *= np.int64(k)
        key += codes[:, j]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return codes[first], inv.ravel()


def _prepare(block: RecordBlock, domain: Domain, layout: CPTLayout, cells: _Cells) -> _Block:
    rows, inv = _unique_rows(check_records(block.codes, domain, compact=True), domain.cards)
    cfg = layout.configs(rows)
    g = np.empty((len(cells.nodes), rows.shape[0]), dtype=np.int16 if cells.size < 2**15 else np.int32)
    for r, (j, o) in enumerate(zip(cells.nodes, cells.offset)):
        g[r] = o + cfg[:, j] * domain.cards[j] + rows[:, j]
    keep = np.ones(inv.shape[0], dtype=bool)
    return _Block(int(block.start), inv.astype(np.int32), keep, g, np.bincount(inv, minlength=rows.shape[0]).astype(float))


def _cell_sums(b: _Block, size: int, r: np.ndarray | None = None) -> np.ndarray:
    """Sum over the block's kept records of ``r`` (default 1) in every cell."""
    weights = b.w if r is None else r
    out = np.zeros(size)
    for row in b.g:
        out += np.bincount(row, weights=weights, minlength=size)
    return out


def _project(b: _Block, h: np.ndarray) -> np.ndarray:
    """z . u for every distinct row, given u as a vector over the cells (see :meth:`_Operator.cells_of`)."""
    zu = np.zeros(b.w.shape[0])
    for row in b.g:
        zu += h[row]
    return zu


def _gram(b: _Block, h: np.ndarray) -> np.ndarray:
    """Per cell, the sum over the block's kept records of z . u (u given over the cells)."""
    return _cell_sums(b, h.shape[0], b.w * _project(b, h))


# --------------------------------------------------------------------------------------------------
# the second-moment operator


@dataclass
class _Operator:
    """M = Z'Z / n minus its diagonal blocks, optionally whitened block by block, as mat-vecs over
    the blocks of records. ``sigma`` are the diagonal blocks (known from the counts), ``white``
    their inverse square roots (or identities)."""

    layout: CPTLayout
    cells: _Cells
    q: list
    sigma: list
    white: list
    n: float

    @classmethod
    def build(cls, layout: CPTLayout, cells: _Cells, counts: list, whiten: bool) -> "_Operator":
        q = conditional_probabilities(counts)
        n = float(counts[cells.nodes[0]].sum()) if cells.nodes else 0.0
        sigma, white = [], []
        for j in cells.nodes:
            c = counts[j]
            w = c.shape[1] - 1
            head, tot = c[:, :w], c.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                outer = np.where(tot[:, None, None] > 0, head[:, :, None] * head[:, None, :] / tot[:, None, None], 0.0)
            S = (np.einsum("ci,ij->cij", head, np.eye(w)) - outer) / n
            sigma.append(S)
            white.append(_inverse_sqrt(S) if whiten else np.broadcast_to(np.eye(w), S.shape))
        return cls(layout, cells, q, sigma, white, n)

    def _apply(self, matrices: list, u: np.ndarray) -> np.ndarray:
        out = np.empty_like(u)
        lay = self.layout
        for j, B in zip(self.cells.nodes, matrices):
            n_cfg, w = lay.n_configs[j], lay.domain.cards[j] - 1
            seg = slice(lay.base[j], lay.base[j] + n_cfg * w)
            out[seg] = np.einsum("cij,cj->ci", B, u[seg].reshape(n_cfg, w)).ravel()
        return out

    def whiten(self, u: np.ndarray) -> np.ndarray:
        return self._apply(self.white, u)

    def cells_of(self, u: np.ndarray) -> np.ndarray:
        """u over the cells, centred: h[j, c, s] = u[j, c, s] (0 for the last state) - sum_t q[c, t] u[j, c, t],
        so that z . u is the sum over a record's nodes of h at its cells."""
        h = np.zeros(self.cells.size)
        h[self.cells.coord_cell] = u
        lay = self.layout
        for j, o in zip(self.cells.nodes, self.cells.offset):
            n_cfg, k = lay.n_configs[j], lay.domain.cards[j]
            H = h[o : o + n_cfg * k].reshape(n_cfg, k)
            H -= (self.q[j] * H).sum(axis=1, keepdims=True)
        return h

    def surprise_cells(self) -> np.ndarray:
        """-log q over the cells: a record's sum of it is -log p(x) under the fitted network (cells
        without probability, which no kept record is in, get 0)."""
        h = np.zeros(self.cells.size)
        for j, o in zip(self.cells.nodes, self.cells.offset):
            q = self.q[j]
            with np.errstate(divide="ignore"):
                h[o : o + q.size] = np.where(q > 0, -np.log(q), 0.0).ravel()
        return h

    def coords_of(self, t: np.ndarray) -> np.ndarray:
        """Z' r from its per-cell sums t: t[j, c, s] - q[c, s] sum_t t[j, c, t] on the coordinates."""
        lay, out = self.layout, np.empty(self.layout.m)
        for j, o in zip(self.cells.nodes, self.cells.offset):
            n_cfg, k = lay.n_configs[j], lay.domain.cards[j]
            T = t[o : o + n_cfg * k].reshape(n_cfg, k)
            out[lay.base[j] : lay.base[j] + n_cfg * (k - 1)] = (T - self.q[j] * T.sum(axis=1, keepdims=True))[:, :-1].ravel()
        return out

    def matvec(self, blocks: Blocks, u: np.ndarray) -> np.ndarray:
        """W (Z'Z / n - Sigma) W u over the blocks of records."""
        wu = self.whiten(u)
        gram = self.coords_of(blocks.reduce(_gram, h=self.cells_of(wu)))
        return self.whiten(gram / self.n - self._apply(self.sigma, wu))

    def top(self, blocks: Blocks, rng: np.random.Generator, tol: float) -> tuple[float, np.ndarray]:
        """Eigenvalue of largest magnitude, and the direction the records are scored along (over
        the cells: a record's score is |sum of h at its cells|)."""
        m = self.layout.m
        if m == 0:
            return 0.0, np.zeros(self.cells.size)
        mv = lambda u: self.matvec(blocks, np.asarray(u, dtype=float).ravel())  # noqa: E731
        if m <= 2:  # ARPACK needs k < m; form the tiny matrix directly
            M = np.column_stack([mv(e) for e in np.eye(m)])
            lam, V = np.linalg.eigh((M + M.T) / 2)
            i = int(np.argmax(np.abs(lam)))
            return float(lam[i]), self.cells_of(self.whiten(V[:, i]))
        v0 = rng.standard_normal(m)
        if not np.any(mv(v0)):  # the records' covariance matches the fit's exactly (e.g. one or two rows): nothing to find
            return 0.0, np.zeros(self.cells.size)
        lam, V = eigsh(LinearOperator((m, m), matvec=mv, dtype=float), k=1, which="LM", v0=v0, tol=tol, ncv=min(m, 8))
        return float(lam[0]), self.cells_of(self.whiten(V[:, 0]))


def _inverse_sqrt(S: np.ndarray) -> np.ndarray:
    """Per block the pseudo-inverse square root of a covariance (directions without variance: 0)."""
    lam, V = np.linalg.eigh(S)
    scale = np.maximum(lam.max(axis=1, keepdims=True), 0.0)
    inv = np.where(lam > 1e-9 * scale + 1e-300, 1.0 / np.sqrt(np.where(lam > 0, lam, 1.0)), 0.0)
    return np.einsum("cij,cj,ckj->cik", V, inv, V)


# --------------------------------------------------------------------------------------------------
# removal


def tie_keys(index: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random uint64 key per global record index (the splitmix64 finaliser of index +
    seed, a bijection): ties between equal scores are broken by it, so the records removed do not
    depend on how the data is split into blocks.

    Examples
    --------
    >>> k = tie_keys(np.arange(5), seed=1)
    >>> k.dtype, len(set(k.tolist()))
    (dtype('uint64'), 5)
    """
    with np.errstate(over="ignore"):
        z = np.asarray(index, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _with_keep(b: _Block, keep: np.ndarray) -> _Block:
    w = np.bincount(b.inv, weights=keep, minlength=b.w.shape[0])
    return _Block(b.start, b.inv, keep, b.g, w)


def _s(b: _Block) -> np.ndarray:
    """The scores of a scored block (see :func:`_scored`)."""
    if b.s is None:  # pragma: no cover - every caller works on scored blocks
        raise ValueError("block: not scored")
    return b.s


def _scored(b: _Block, h: np.ndarray) -> _Block:
    """The block with the score |z . u| of each distinct row attached (for one round's removal)."""
    return _Block(b.start, b.inv, b.keep, b.g, b.w, np.abs(_project(b, h)))


def _drop_above(b: _Block, cut: float) -> _Block:
    """Remove every kept record whose score is at least ``cut``."""
    return _with_keep(b, b.keep & ~(_s(b) >= cut)[b.inv])


def _tail_counts(b: _Block, edges: np.ndarray) -> np.ndarray:
    """Kept records with score >= each edge (edges ascending)."""
    bins = np.searchsorted(edges, _s(b), side="right")  # number of edges <= s
    hist = np.bincount(bins, weights=b.w, minlength=edges.size + 1)
    return np.cumsum(hist[::-1])[::-1][1:]


def _cell_sums_below(b: _Block, size: int, t: float) -> np.ndarray:
    """Per cell, the kept records scoring below t."""
    return _cell_sums(b, size, b.w * (_s(b) < t))


def _at_least(b: _Block, t: float) -> float:
    return float(b.w[_s(b) >= t].sum())


def _tied_keys(b: _Block, t: float, key_seed: int) -> np.ndarray:
    """Sorted tie-breaking keys of the kept records scoring exactly t."""
    rec = np.flatnonzero(b.keep & (_s(b) == t)[b.inv])
    return np.sort(tie_keys(b.start + rec, key_seed))


def _keys_at_least(keys: np.ndarray, key: int) -> int:
    return int(keys.size - np.searchsorted(keys, np.uint64(key), side="left"))


def _drop_top(b: _Block, t: float, kt: int, key_seed: int) -> _Block:
    keep = b.keep & ~(_s(b) > t)[b.inv]
    tied = np.flatnonzero(keep & (_s(b) == t)[b.inv])
    keep[tied[tie_keys(b.start + tied, key_seed) >= np.uint64(kt)]] = False
    return _with_keep(b, keep)


def _top_records(scored: Blocks, k: int, key_seed: int) -> tuple[float, int]:
    """The rule that drops exactly the ``k`` records with the largest (score, key): score above t, or
    equal to t with key at least kt. Bisection on the bit patterns of t (non-negative floats order
    like their bits) and of kt, one count reduction per step, over scored blocks."""
    lo, hi = 0, int(np.float64(np.inf).view(np.int64))
    while lo < hi:  # largest t with #{score >= t} >= k
        mid = (lo + hi + 1) // 2
        if scored.reduce(_at_least, t=float(np.int64(mid).view(np.float64))) >= k:
            lo = mid
        else:
            hi = mid - 1
    t = float(np.int64(lo).view(np.float64))
    ties = k - int(scored.reduce(_at_least, t=float(np.nextafter(t, np.inf))))
    keys = scored.map(_tied_keys, t=t, key_seed=key_seed).persist()
    klo, khi = 0, 2**64 - 1
    while klo < khi:  # largest kt with #{score == t, key >= kt} >= ties
        mid = (klo + khi + 1) // 2
        if keys.reduce(_keys_at_least, key=mid) >= ties:
            klo = mid
        else:
            khi = mid - 1
    return t, klo


def _keep_of(b: _Block) -> np.ndarray:
    return b.keep


def _log_cpts(layout: CPTLayout, cells: _Cells, per_cell: np.ndarray) -> np.ndarray:
    """log P(state | parent configuration) over the cells, from counts with ``MIX_PRIOR`` added."""
    out = np.zeros(cells.size)
    for j, o in zip(cells.nodes, cells.offset):
        t = per_cell[o:o + layout.n_configs[j] * layout.domain.cards[j]].reshape(layout.n_configs[j], -1) + MIX_PRIOR
        out[o:o + t.size] = np.log(t / t.sum(axis=1, keepdims=True)).ravel()
    return out


def _mix_start(b: _Block, h: np.ndarray, t: float, high: float, low: float) -> _Block:
    """Responsibilities to start EM from: ``high`` for the rows scoring above ``t`` along ``h``."""
    r = np.where(np.abs(_project(b, h)) > t, high, low)
    return _Block(b.start, b.inv, b.keep, b.g, b.w, None, r, None)


def _mix_estep(b: _Block, lp_major: np.ndarray, lp_minor: np.ndarray, log_major: float, log_minor: float) -> _Block:
    """Each distinct row's responsibility of the minor component and its mixture log-likelihood."""
    a0, a1 = _project(b, lp_major) + log_major, _project(b, lp_minor) + log_minor
    top = np.maximum(a0, a1)
    ll = top + np.log(np.exp(a0 - top) + np.exp(a1 - top))
    return _Block(b.start, b.inv, b.keep, b.g, b.w, None, np.exp(a1 - ll), ll)


def _mix_cells(b: _Block, size: int, minor: bool) -> np.ndarray:
    return _cell_sums(b, size, b.w * (b.r if minor else 1.0 - b.r))  # type: ignore[operator]  # set by _mix_start


def _mix_ll(b: _Block) -> float:
    return float(b.w @ b.ll)


def _minor_mass(b: _Block) -> float:
    return float(b.w @ b.r)


def _single_ll(b: _Block, lp: np.ndarray) -> float:
    return float(b.w @ _project(b, lp))


def _weight_information(b: _Block, pi: float) -> float:
    d = np.asarray(b.r) / pi - (1.0 - np.asarray(b.r)) / (1.0 - pi)
    return float(b.w @ (d * d))


def _blanket(b: _Block, rows: np.ndarray, shifts: np.ndarray, offset: int, k: int, lp: np.ndarray) -> tuple:
    """Per distinct row, -log P(recorded state of a node | its Markov blanket) under the log-CPTs ``lp``,
    and the entropy of that posterior (the surprise's expectation were the node drawn from it): ``rows`` are
    the node's and its children's rows of ``g``, ``shifts`` how far each one's cell moves when the node's
    state goes up by one."""
    g = b.g[rows].astype(np.int64)
    x = (g[0] - offset) % k
    a = np.stack([lp[g + ((s - x)[None, :] * shifts[:, None])].sum(axis=0) for s in range(k)])
    a = a - a.max(axis=0)
    logp = a - np.log(np.exp(a).sum(axis=0))
    return -logp[x, np.arange(x.size)], -(np.exp(logp) * logp).sum(axis=0)


def _blanket_scored(b: _Block, **kw) -> _Block:
    """The block scored by :func:`_blanket`'s surprise."""
    return _Block(b.start, b.inv, b.keep, b.g, b.w, _blanket(b, **kw)[0])


def _blanket_excess(b: _Block, **kw) -> float:
    """The kept records' surprise beyond its expectation (:func:`_blanket`)."""
    surprise, entropy = _blanket(b, **kw)
    return float(b.w @ (surprise - entropy))


def _start_above(b: _Block, t: float, high: float, low: float) -> _Block:
    """Responsibilities to start EM from: ``high`` for the rows scoring above ``t``."""
    return _Block(b.start, b.inv, b.keep, b.g, b.w, None, np.where(_s(b) > t, high, low), None)


def _resp_scored(b: _Block) -> _Block:
    """The block scored by each row's responsibility of the minor component (for :func:`_top_records`)."""
    return _Block(b.start, b.inv, b.keep, b.g, b.w, np.asarray(b.r))


def _n_kept(b: _Block) -> float:
    return float(b.keep.sum())


# --------------------------------------------------------------------------------------------------
# the filter


def filter_known_topology(
    records,
    domain: Domain,
    parents: Mapping,
    epsilon: float,
    mode: str = "calibrated",
    C: float = 1.0,
    max_rounds: int = 10,
    rounds: int = 4,
    seed=None,
    progress: bool = True,
    tol: float = 1e-3,
    block_rows: int | None = None,
    n_null: int = 100_000,
    null_draws: int = 3,
) -> FilterResult:
    """Learn the CPTs of a known DAG from records of which at most an ``epsilon`` fraction may be corrupted.

    Parameters
    ----------
    records : array (N, len(domain)), or Blocks of :class:`ppgm.core.executor.RecordBlock`
        Integer state codes; blocks (for instance on Dask, see ``ppgm.adapters.filter_dask``) are
        filtered where they live, with the same result as the same blocks in memory.
    domain : Domain
    parents : mapping
        ``{node: tuple of parents}`` (the known topology).
    epsilon : float in (0, 1/2)
        The largest corrupted fraction to allow for: an upper bound on what the calibrated and paper
        modes remove, the quota the single-pass and iterative modes remove.
    mode : {"calibrated", "paper", "single_pass", "iterative"}
        See the module docstring. ``"calibrated"`` (default) removes records only while the top
        eigenvalue exceeds its clean-data range, and only as many as the excess of extreme scores
        warrants. ``"paper"``: Algorithm 1 on whitened coordinates: stop when
        ``|lambda| <= C eps log(1/eps)``, else remove the records scoring at least ``T + delta``,
        ``delta = 3 sqrt(eps |lambda|)``, with the largest ``T > 0`` whose empirical tail exceeds
        ``7 exp(-T^2/2) + 3 eps / (T^2 ln d)`` (step 11). ``"single_pass"``: one eigenvector, drop the
        ``ceil(epsilon N)`` records with the largest scores (ties broken by :func:`tie_keys`);
        ``"iterative"``: the same in ``rounds`` passes.
    C : float
        Constant of the paper-mode stopping rule.
    max_rounds : int
        Round limit of the calibrated and paper modes.
    rounds : int
        Passes of the iterative mode.
    seed : int or numpy.random.Generator, optional
        Drives the Lanczos start vectors, the bootstrap draws and the tie-breaking keys.
    progress : bool
        Show a progress bar over the rounds (drawn only in a terminal or a notebook; see ``ppgm.core.progress``).
    tol : float
        Relative accuracy of the eigenvalue (ARPACK's; the bootstrap's eigenvalues take 1e-2).
    block_rows : int, optional
        Split an in-memory array into blocks of this many rows (default: one block).
    n_null, null_draws : int
        Calibrated mode: size and number of the bootstrap samples from the fitted network that give
        the clean-data range of the eigenvalue and of the scores (the eigenvalue is rescaled by
        sqrt(n_null / N) when N is larger).

    Returns
    -------
    FilterResult

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> from ppgm.inference.sampling import sample
    >>> bn = random_bayesian_network(6, 2, seed=0)
    >>> x = sample(bn, 2000, seed=1)
    >>> x[:100] = 0   # a planted cluster of 100 identical records
    >>> res = filter_known_topology(x, bn.domain, bn.parents, 0.2, seed=0, progress=False)
    >>> bool((~res.inlier_mask[:100]).all()), int((~res.inlier_mask[100:]).sum()) < 20
    (True, True)
    """
    checks.flag(progress, "progress")
    _check_filter_arguments(epsilon, mode, rounds, C, max_rounds, tol, n_null, null_draws)
    if block_rows is not None:
        checks.count(block_rows, "block_rows")
    if not isinstance(records, Blocks) and not isinstance(records, (np.ndarray, list, tuple)):
        raise TypeError(f"records: expected an integer array (N, {len(domain)}) or Blocks of RecordBlock, got {type(records).__name__}")
    blocks = records if isinstance(records, Blocks) else record_blocks(np.asarray(records), block_rows)
    layout = CPTLayout.build(domain, parents)
    cells = _Cells.of(layout)
    blocks = blocks.map(_prepare, domain=domain, layout=layout, cells=cells).persist()
    N = int(blocks.reduce(_n_kept))
    if N < 2:
        raise ValueError(f"records: need at least 2 records to filter, got {N}")
    rng = as_generator(seed)
    run = _Run(layout, cells, float(epsilon), mode, C, N, rng, tol, int(rng.integers(1 << 62)), int(n_null), int(null_draws))
    n_rounds = int(rounds) if mode == "iterative" else 1 if mode == "single_pass" else int(max_rounds)
    history: list = []
    for r in progress_bar(range(n_rounds), desc="robust filter", enabled=progress):
        blocks, entry = run.round(blocks, r, n_rounds)
        history.append(entry)
        logger.debug("robust filter round %d: eigenvalue %.4g (clean-data range %.4g), removed %d%s", r + 1, entry["eigenvalue"],
                     entry.get("null_threshold", float("nan")), entry["removed"], f", stopped: {entry['stopped']}" if "stopped" in entry else "")
        if "stopped" in entry:
            break
        if entry["kept"] < 2:
            raise ValueError("the filter removed (almost) every record; is epsilon right?")
    else:
        if mode in ("calibrated", "paper"):
            history[-1]["stopped"] = f"round limit ({n_rounds}) reached"
    counts = run.counts(blocks)
    if mode == "calibrated" and run.last_h is not None:
        beyond = abs(history[-1]["eigenvalue"]) > history[-1].get("null_threshold", np.inf)
        blocks, mixed, history[-1]["mixture"] = run.mixture(blocks, run.last_h, beyond)
        if mixed is not None:
            counts = mixed
            history[-1]["kept"] = int(round(blocks.reduce(_n_kept)))
            history[-1]["estimated_fraction"] = run.estimated
        elif (PEEL is not None and not history[-1]["mixture"].get("population")
              and abs(history[-1]["eigenvalue"]) > PEEL * history[-1].get("null_threshold", np.inf)):
            # corruption beyond doubt that neither a cut nor a second network isolates (a batch spread
            # over the scores' bulk, one column recoded): remove it as the quota modes do, a step at a
            # time, while the eigenvalue stays beyond clean data's range. Not when the mixture check found
            # a second population heavier than epsilon: that is the DAG missing a group, not corruption
            blocks, peeled = run.peel(blocks, history[-1]["null_threshold"])
            history.extend(peeled)
            counts = run.counts(blocks)
    probs = conditional_probabilities(counts)
    cpts = {v: p.reshape(domain.shape(layout.parents[v]) + (domain.card(v),)) for v, p in zip(domain.variables, probs)}
    model = BayesianNetwork(domain, layout.parents, cpts)
    masks = blocks.map(_keep_of)
    local = isinstance(masks, LocalBlocks)
    removed = 1.0 - history[-1]["kept"] / N
    estimate = history[-1].get("estimated_fraction", removed)
    return FilterResult(model, np.concatenate(masks.collect()) if local else None, history, None if local else masks, estimate)


def _check_filter_arguments(epsilon, mode, rounds, C, max_rounds, tol, n_null, null_draws) -> None:
    if not (isinstance(epsilon, (int, float, np.floating)) and not isinstance(epsilon, bool) and 0 < epsilon < 0.5):
        raise ValueError(f"epsilon: expected a corrupted fraction in (0, 1/2), got {epsilon!r}")
    checks.choice(mode, "mode", MODES)
    checks.count(rounds, "rounds")
    checks.count(max_rounds, "max_rounds")
    checks.positive(C, "C")
    checks.positive(tol, "tol")
    checks.count(n_null, "n_null", 2)
    checks.count(null_draws, "null_draws")


@dataclass
class _Run:
    """The constants of one filtering run and its rounds."""

    layout: CPTLayout
    cells: _Cells
    epsilon: float
    mode: str
    C: float
    N: int
    rng: np.random.Generator
    tol: float
    key_seed: int
    n_null: int
    null_draws: int
    estimated: float = 0.0
    last_h: np.ndarray | None = None  # the last round's eigenvector (over the cells)

    def counts(self, blocks: Blocks) -> list:
        return self.cells.split(self.layout, blocks.reduce(_cell_sums, size=self.cells.size))

    def _top(self, blocks: Blocks) -> tuple:
        """The kept records' counts, the operator of their fit, and its top eigenpair."""
        counts = self.counts(blocks)
        op = _Operator.build(self.layout, self.cells, counts, whiten=self.mode == "paper")
        return (counts, op, *op.top(blocks, self.rng, self.tol))

    def round(self, blocks: Blocks, r: int, n_rounds: int) -> tuple[Blocks, dict]:
        """One round: the fit, the top eigenpair of the (whitened) second moments, the removal."""
        counts, op, lam, h = self._top(blocks)
        self.last_h = h
        entry = {"eigenvalue": lam, "kept_before": int(round(op.n))}
        scored = blocks.map(_scored, h=h).persist()
        if self.mode == "calibrated":
            return self._calibrated(scored, counts, op, lam, h, entry)
        if self.mode == "paper":
            return self._paper(scored, op, lam, entry)
        total = int(np.ceil(self.epsilon * self.N))
        n_drop = total * (r + 1) // n_rounds - total * r // n_rounds
        if n_drop:
            t, kt = _top_records(scored, n_drop, self.key_seed)
            blocks = scored.map(_drop_top, t=t, kt=kt, key_seed=self.key_seed).persist()
        entry["threshold"] = t if n_drop else float("inf")
        return blocks, self._removed(blocks, entry)

    def peel(self, blocks: Blocks, threshold: float) -> tuple[Blocks, list]:
        """The calibrated mode's last resort, when the eigenvalue is ``PEEL`` times beyond clean data's range
        ``threshold`` and no clear cut nor mixture explains it (nor a second population heavier than epsilon): remove ``PEEL_STEP`` epsilon N records at a
        time, the highest scores along the refitted top eigenvector (as the ``"iterative"`` mode does), while
        the eigenvalue stays beyond ``threshold`` and epsilon allows. Clean data never get here: their
        eigenvalue is within its range. One history entry per step (``direction`` ``"peel"``)."""
        entries = []
        while True:
            _, op, lam, h = self._top(blocks)
            entry = {"eigenvalue": lam, "kept_before": int(round(op.n)), "null_threshold": threshold, "direction": "peel"}
            budget = int(np.floor(self.epsilon * self.N)) - (self.N - int(round(op.n)))
            k = min(budget, int(np.ceil(PEEL_STEP * self.epsilon * self.N)))
            if abs(lam) <= threshold or k < 1:
                entries.append(dict(entry, removed=0, kept=entry["kept_before"], stopped="peeled" if k >= 1 else "epsilon budget spent"))
                return blocks, entries
            scored = blocks.map(_scored, h=h).persist()
            t, kt = _top_records(scored, k, self.key_seed)
            blocks = scored.map(_drop_top, t=t, kt=kt, key_seed=self.key_seed).persist()
            entries.append(self._removed(blocks, dict(entry, threshold=t)))

    def mixture(self, blocks: Blocks, h: np.ndarray, beyond: bool = True) -> tuple[Blocks, list | None, dict]:
        """The calibrated mode's last look: is what is left a batch away from the rest?

        A systematic error (one source's records shifted the same way) leaves each record plausible,
        so no cut along a direction is clear, but it makes the records a mixture of two networks with
        the same DAG. Fit that mixture by EM (the minor component started from the records scoring
        highest along the last eigenvector ``h``) and keep it only when its log-likelihood gain over
        one network beats BIC's penalty for the second component's parameters, ``(m + 1) log(n) / 2``,
        and its records fit in what epsilon still allows. Clean records from a network with this DAG
        give a gain of about a chi-square with the parameters' count, far below that penalty. When
        kept, the mixture is fitted again with the minor component's weight held at most what epsilon
        still allows (free, it takes clean records along), and if it still beats the penalty the records
        more likely from its minor component are removed, and the CPTs are its major component's (soft
        counts), which corrects the overlap a cut cannot.

        A batch that touches a few families (a miscoded column and its children, a few shifted CPTs)
        gains too little to pay for a whole second network, or lets a free second network take a
        population along. When the whole-network check declines for either reason, a partial mixture is
        fitted: the minor component has its own CPTs only for the families whose own gain beats their own
        BIC penalty, and shares the rest (``_mixture_em`` with ``partial``); it is judged by the same rules
        against the penalty of the families it keeps apart. Its EM is started twice, from the eigenvector's
        top records and from those whose recorded state of one node its Markov blanket finds least likely
        (:meth:`_blanket_start`: a miscoded column), and the start with the larger gain beyond its penalty
        is kept. Once the cuts have brought the eigenvalue within clean data's range (not ``beyond``, records
        removed), only the blanket's start is tried, and kept only when the families it keeps apart are that node's own and
        its children's: there, a freer partial mixture took structure for a batch (ALARM with 2% of its rows
        in rare parent configurations: 0.035-0.042 against the MLE's 0.027-0.028), while a miscoded column
        whose batch the cuts mostly left in place stays in its node's blanket (docs/explain/robust-filter.md)."""
        lay, cells, size = self.layout, self.cells, self.cells.size
        n = float(blocks.reduce(_n_kept))
        spent = self.N - n
        room = max(0.0, self.epsilon * self.N - spent)  # what may still be removed
        penalty = 0.5 * (lay.m + 1) * math.log(max(n, 2.0))
        entry: dict = {"gain": 0.0, "penalty": penalty, "weight": 0.0, "iterations": 0, "accepted": False}
        if room < max(4.0, MIN_EXCESS * self.N) or n < 2 * (lay.m + 1):
            entry["reason"] = "no room left in epsilon" if room < max(4.0, MIN_EXCESS * self.N) else "too few records"
            return blocks, None, entry
        k = int(min(room, self.epsilon * n))
        scored = blocks.map(_scored, h=h).persist()
        t, _ = _top_records(scored, max(k, 1), self.key_seed)
        start = blocks.map(_mix_start, h=h, t=t, high=0.9, low=0.05).persist()
        lp_single = _log_cpts(lay, cells, blocks.reduce(_cell_sums, size=size))
        single = float(blocks.reduce(_single_ll, lp=lp_single))
        state, ll, it, _ = self._mixture_em(start, n, single, penalty)
        pi = float(min(max(state.reduce(_minor_mass) / n, 1e-12), 1 - 1e-12))
        # the weight's standard error from the observed information, sum w (r / pi - (1 - r) / (1 - pi))^2
        se = 1.0 / math.sqrt(max(float(state.reduce(_weight_information, pi=pi)), 1e-300))
        entry.update(gain=ll - single, weight=pi, weight_se=se, iterations=it)
        if pi > 0.5:  # the components swapped roles: the larger one is the data's
            entry["reason"] = "the started component took most of the records"
            return blocks, None, entry
        if ll - single <= penalty:
            entry["reason"] = "one network explains the records (log-likelihood gain below BIC's penalty)"
        else:
            likelier = int(round(state.map(_resp_scored).reduce(_at_least, t=0.5)))
            entry["likelier_minor"] = likelier
            if likelier <= MIX_ROOM * room:
                return self._batch(blocks, start, n, single, penalty, room, None, entry)
            # the minor component's weight comes out above the batch's share (a broader component takes
            # some clean records: 0.11-0.24 for a 10% batch), so it is the records likelier from it that must
            # fit in what epsilon still allows, up to MIX_ROOM times it; more is a part of the population the
            # DAG does not capture, not corruption (docs/explain/robust-filter.md, "The default: calibrated")
            entry["reason"] = f"{likelier:,} records likelier from a second component: more than epsilon allows, not corruption"
            entry["population"] = True
        if not MIX_PARTIAL or not (beyond or (MIX_WITHIN and spent > 0)):
            return blocks, None, entry
        # a second network differing in a few families: only those pay BIC's penalty
        if beyond:
            state, ll, it, sel = self._mixture_em(start, n, single, penalty, partial=lp_single)
        else:
            state, ll, it, sel = blocks, single, 0, None
        if MIX_BLANKET:
            blanket = self._blanket_start(blocks, k, lp_single)
            if blanket is not None:
                other = self._mixture_em(blanket[1], n, single, penalty, partial=lp_single)
                entry["blanket"] = {"node": blanket[0], "gain": other[1] - single, "penalty": self._partial_penalty(other[3], n)}
                inside = beyond or (other[3] is not None and not (other[3] & ~blanket[2]).any())
                entry["blanket"]["inside"] = bool(inside)
                if inside and other[3] is not None and other[1] - entry["blanket"]["penalty"] > ll - self._partial_penalty(sel, n):
                    (state, ll, it, sel), start = other, blanket[1]
                    entry["blanket"]["chosen"] = True
        if not beyond and not entry.get("blanket", {}).get("chosen"):
            entry["partial"] = {"reason": "within clean data's range, no one node's blanket explains a batch"}
            return blocks, None, entry
        part = {"gain": ll - single, "penalty": self._partial_penalty(sel, n), "iterations": it,
                "families": self._families(sel),
                "weight": float(state.reduce(_minor_mass) / n)}
        entry["partial"] = part
        if sel is None or not sel.any() or part["weight"] > 0.5 or ll - single <= part["penalty"]:
            part["reason"] = "no family's second CPT beats its penalty" if sel is None or not sel.any() else \
                "the started component took most of the records" if part["weight"] > 0.5 else \
                "a second CPT for a few families does not beat their penalty"
            return blocks, None, entry
        likelier = int(round(state.map(_resp_scored).reduce(_at_least, t=0.5)))
        part["likelier_minor"] = likelier
        if likelier > MIX_ROOM * room:
            part["reason"] = f"{likelier:,} records likelier from a second component: more than epsilon allows, not corruption"
            entry["population"] = True
            return blocks, None, entry
        entry.pop("population", None)
        return self._batch(blocks, start, n, single, part["penalty"], room, lp_single, entry, None if beyond else blanket[2])

    def _batch(self, blocks, start, n, single, penalty, room, partial, entry, inside=None) -> tuple[Blocks, list | None, dict]:
        """The batch, estimated with the minor component held to what epsilon allows: left free, it takes clean
        records along, and its major component's CPTs and the records removed follow it (on a miscoded column
        the free fit ended worse than the MLE: docs/explain/robust-filter.md, "Tried and not kept"). With
        ``partial`` (one network's log-CPTs), the minor component has its own CPTs only for the families chosen
        within what epsilon allows; the CPTs returned are, for every family, the major component's soft counts (which
        also discount the batch in families it moved too little to be kept apart). ``inside``: a mask of the families
        that may be kept apart (one node's blanket), or None for any."""
        lay, cells, size = self.layout, self.cells, self.cells.size
        state, ll, it, sel = self._mixture_em(start, n, single, penalty, cap=room / n, partial=partial, allowed=inside)
        if partial is not None:
            penalty = self._partial_penalty(sel, n)
            entry["partial"].update(families_within_epsilon=self._families(sel), penalty_within_epsilon=penalty)
        entry.update(gain_within_epsilon=ll - single, iterations_within_epsilon=it)
        if (partial is not None and (sel is None or not sel.any())) or ll - single <= penalty:
            entry["reason"] = "within what epsilon allows, a second network does not beat BIC's penalty"
            return blocks, None, entry
        scored = state.map(_resp_scored).persist()  # the records likelier from the minor component
        k = min(int(round(scored.reduce(_at_least, t=0.5))), int(room))
        kept = scored
        if k > 0:
            t, kt = _top_records(scored, k, self.key_seed)
            kept = scored.map(_drop_top, t=t, kt=kt, key_seed=self.key_seed).persist()
        major = state.reduce(_mix_cells, size=size, minor=False)
        reason = "a second network explains a batch of the records" if partial is None else \
            "a second network differing in a few families explains a batch of the records"
        entry.update(accepted=True, reason=reason, removed=int(round(n - kept.reduce(_n_kept))))
        self.estimated += min(float(state.reduce(_minor_mass)), room) / self.N
        return kept, cells.split(lay, major), entry

    def _blanket_start(self, blocks: Blocks, k: int, lp: np.ndarray):
        """A start for the partial mixture aimed at one miscoded column: for every node with children, the
        ``k`` records whose recorded state its Markov blanket finds least likely under one network ``lp``, for the
        node whose recorded states are the most surprising beyond the surprise's expectation. Returns (node,
        start, a mask over ``cells.nodes`` of its blanket's families: its own and its children's) or None."""
        lay, cells = self.layout, self.cells
        pos = {j: r for r, j in enumerate(cells.nodes)}
        best, best_score = None, 0.0
        for j in cells.nodes:
            v = lay.domain.variables[j]
            rows, shifts = [pos[j]], [1]
            for c, w in enumerate(lay.domain.variables):
                if c in pos and v in lay.parents[w]:
                    ps = lay.parents[w]
                    rows.append(pos[c])
                    shifts.append(int(np.prod(lay.domain.shape(ps)[ps.index(v) + 1:], dtype=np.int64)) * lay.domain.cards[c])
            if len(rows) == 1:
                continue
            kw = dict(rows=np.array(rows), shifts=np.array(shifts, dtype=np.int64), offset=cells.offset[pos[j]], k=lay.domain.cards[j], lp=lp)
            score = float(blocks.reduce(_blanket_excess, **kw))
            if score > best_score:
                best, best_score = (v, kw), score
        if best is None:
            return None
        scored = blocks.map(_blanket_scored, **best[1]).persist()
        t, _ = _top_records(scored, max(k, 1), self.key_seed)
        own = np.zeros(len(cells.nodes), dtype=bool)
        own[best[1]["rows"]] = True
        return best[0], scored.map(_start_above, t=t, high=BLANKET_START[0], low=BLANKET_START[1]).persist(), own

    def _families(self, sel: np.ndarray | None) -> list:
        """The names of the families ``sel`` marks (over ``cells.nodes``)."""
        return [self.layout.domain.variables[j] for j in np.asarray(self.cells.nodes)[sel]] if sel is not None else []

    def _cell_family(self) -> np.ndarray:
        """For every cell, the index (into ``cells.nodes``) of its family."""
        lay, cells = self.layout, self.cells
        sizes = [lay.n_configs[j] * lay.domain.cards[j] for j in cells.nodes]
        return np.repeat(np.arange(len(sizes)), sizes)

    def _family_params(self) -> np.ndarray:
        lay = self.layout
        return np.array([lay.n_configs[j] * (lay.domain.cards[j] - 1) for j in self.cells.nodes], dtype=float)

    def _partial_penalty(self, sel, n: float) -> float:
        """BIC's penalty for a minor component with its own CPTs for the families ``sel`` (and its weight)."""
        p = float(self._family_params()[sel].sum()) if sel is not None else 0.0
        return 0.5 * (p + 1) * math.log(max(n, 2.0))

    def _mixture_em(self, start: Blocks, n: float, single: float, penalty: float, cap: float = 1 - 1e-12,
                    partial: np.ndarray | None = None, allowed: np.ndarray | None = None) -> tuple:
        """EM for a mixture of two networks with the DAG from ``start``'s responsibilities, the minor
        component's weight held at most ``cap``: (the blocks with their responsibilities, log-likelihood,
        iterations, the families kept apart). Stops when settled, or when its shrinking gains could not reach
        ``penalty`` over ``single`` (one network's log-likelihood) within MIX_ITER iterations.

        With ``partial`` (one network's log-CPTs over the cells), the minor component has its own CPTs only for
        the families whose expected complete-data log-likelihood gain (given the responsibilities) beats their
        own BIC penalty, ``p_f log(n) / 2`` for the family's p_f parameters, and shares one network's CPTs
        with the major component for the rest: each M-step chooses the families (Friedman's structural EM on
        the choice shared / apart), and the penalty is that of the families kept apart; ``allowed`` (a mask over
        ``cells.nodes``) limits the families that may be."""
        lay, cells, size = self.layout, self.cells, self.cells.size
        state, prev, ll, it, sel = start, -np.inf, -np.inf, 0, None
        if partial is not None:
            fam, first = self._cell_family(), np.asarray(cells.offset, dtype=np.int64)
            fam_pen = 0.5 * self._family_params() * math.log(max(n, 2.0))
        for it in range(1, MIX_ITER + 1):
            major, minor = state.reduce(_mix_cells, size=size, minor=False), state.reduce(_mix_cells, size=size, minor=True)
            pi = float(min(max(state.reduce(_minor_mass) / n, 1e-12), cap, 1 - 1e-12))
            lp_major, lp_minor = _log_cpts(lay, cells, major), _log_cpts(lay, cells, minor)
            changed = False
            if partial is not None:
                gain = np.add.reduceat(minor * lp_minor + major * lp_major - (minor + major) * partial, first)
                new = gain > fam_pen if allowed is None else (gain > fam_pen) & allowed
                changed = sel is None or bool((new != sel).any())
                sel = new
                if not sel.any():
                    return state, single, it, sel
                on = sel[fam]
                lp_major, lp_minor = np.where(on, lp_major, partial), np.where(on, lp_minor, partial)
                penalty = self._partial_penalty(sel, n)
            state = state.map(_mix_estep, lp_major=lp_major, lp_minor=lp_minor,
                              log_major=math.log(1 - pi), log_minor=math.log(pi)).persist()
            ll = float(state.reduce(_mix_ll))
            gained = ll - prev
            if (not changed and gained < MIX_TOL * abs(ll)) or (it > 5 and ll - single + gained * (MIX_ITER - it) < penalty):
                break  # settled, or (EM's gains shrinking) it would not reach the penalty within MIX_ITER
            prev = ll
        return state, ll, it, sel

    def _removed(self, blocks: Blocks, entry: dict) -> dict:
        kept = int(round(blocks.reduce(_n_kept)))
        entry.update(removed=entry["kept_before"] - kept, kept=kept)
        return entry

    def _calibrated(self, blocks, counts, op, lam, h, entry) -> tuple[Blocks, dict]:
        """Cut where the scores' excess over clean data's is largest along the eigenvector; with
        nothing to cut there, a last look along the likelihood."""
        if op.n <= 0:  # no record weighs in (e.g. two identical rows): nothing to compare with clean data
            return blocks, dict(entry, threshold=float("inf"), removed=0, kept=entry["kept_before"], stopped="no records to test")
        directions = {"eigenvector": h, "likelihood": op.surprise_cells()}
        null = _Null.draw(self.layout, self.cells, counts, op, self.n_null, self.null_draws, self.rng, self.tol, directions)
        threshold = null.eigenvalue_bound(op.n)
        entry.update(null_threshold=threshold, estimated_fraction=self.estimated, direction="eigenvector")
        if abs(lam) <= threshold:
            return self._unlikely(blocks, null, op, entry)
        cut = self._cut(blocks, null.along["eigenvector"], op.n)
        if not self._significant(*cut) and abs(lam) > FAR * threshold:
            # far beyond clean data's range yet no clear cut: the corruption bends the fitted network so
            # much that its bootstrap makes the corrupted records look ordinary (a large point mass).
            # Refit the null without the epsilon N highest scores and look again.
            k = min(int(np.ceil(self.epsilon * self.N)), int(round(op.n)) - 2)
            t, _ = _top_records(blocks, k, self.key_seed)
            trimmed = self.cells.split(self.layout, blocks.reduce(_cell_sums_below, size=self.cells.size, t=t))
            refit = _Null.draw(self.layout, self.cells, trimmed, op, self.n_null, self.null_draws, self.rng, self.tol, {"eigenvector": h})
            cut = self._cut(blocks, refit.along["eigenvector"], op.n)
            entry["null_refit_without_top"] = k
        if not self._significant(*cut):
            return self._unlikely(blocks, null, op, entry, "no excess of extreme scores")
        return self._remove(blocks, cut, op, entry)

    def _unlikely(self, blocks, null: "_Null", op: "_Operator", entry: dict,
                  reason: str = "eigenvalue within the clean-data range") -> tuple[Blocks, dict]:
        """Nothing to cut along the eigenvector (its eigenvalue within clean data's range, or no clear
        excess along it). Corruption spread thin over many directions (a product distribution's rows
        once most are gone, rows in rare parent configurations) can still stand out as an excess of
        records that the fitted network finds unlikely: score each record by -log p(x) under the fit
        (a sum over its cells, as along an eigenvector) and compare that tail with the bootstrap's
        clean records, by the same rule. Clean data shows no such excess: the fit's own records are,
        if anything, likelier than fresh ones. Stop for ``reason`` when there is none."""
        scored = blocks.map(_scored, h=op.surprise_cells()).persist()
        cut = self._cut(scored, null.along["likelihood"], op.n)
        if not self._significant(*cut):
            return blocks, dict(entry, threshold=float("inf"), removed=0, kept=entry["kept_before"], stopped=reason)
        entry["direction"] = "likelihood"
        return self._remove(scored, cut, op, entry)

    def _remove(self, blocks, cut, op, entry) -> tuple[Blocks, dict]:
        """Remove the records beyond the chosen cut, within what epsilon still allows."""
        edges, data_tail, expected, excess, i = cut
        budget = int(np.floor(self.epsilon * self.N)) - (self.N - int(round(op.n)))  # what may still be removed
        if budget < 1:
            return blocks, dict(entry, threshold=float("inf"), removed=0, kept=entry["kept_before"], stopped="epsilon budget spent")
        if data_tail[i] <= budget:  # cut there
            t, k = float(edges[i]), int(data_tail[i])
            blocks = blocks.map(_drop_above, cut=t).persist()
        else:
            # more than epsilon allows. Just past it: the budget's worth of the highest scores. Far past
            # it, the fitted network may be bent enough by corruption that clean data look extreme too:
            # take no more than the records beyond anything the bootstrap's clean data show, and no more
            # than most of the budget, then look again with a refitted network
            beyond = float(data_tail[int(np.searchsorted(-expected, -1.0, side="left"))]) if (expected < 1.0).any() else 0.0
            step = max(1, int(BUDGET_STEP * budget)) if budget > MIN_EXCESS * self.N else budget
            k = budget if data_tail[i] <= 1.05 * budget + 10 else min(step, int(beyond))
            if k <= max(4.0, MIN_EXCESS * self.N):
                return blocks, dict(entry, threshold=float("inf"), removed=0, kept=entry["kept_before"],
                                    stopped="no excess of extreme scores beyond clean data's range")
            t, kt = _top_records(blocks, k, self.key_seed)
            blocks = blocks.map(_drop_top, t=t, kt=kt, key_seed=self.key_seed).persist()
        self.estimated += float(min(excess[i], k)) / self.N
        entry.update(threshold=t, estimated_fraction=self.estimated)
        return blocks, self._removed(blocks, entry)

    @staticmethod
    def _cut(blocks: Blocks, null: "_Tail", n: float):
        """Tails of the data's and the null's scores at the candidate cuts, and the cut with the largest
        excess among the clear ones, where at least PRECISION of the records beyond it are in excess of
        clean data (a data bulk a little wider than the fitted network's, as while corruption bends the
        fit, gives no clear cut in the bulk)."""
        edges = null.edges()
        data_tail = blocks.reduce(_tail_counts, edges=edges)
        expected = null.tail(edges) * n
        excess = data_tail - expected
        clear = expected <= (1.0 - PRECISION) * data_tail
        i = int(np.argmax(np.where(clear, excess, -np.inf))) if clear.any() else -1
        return edges, data_tail, expected, excess, i

    def _significant(self, edges, data_tail, expected, excess, i) -> bool:
        """A cut is worth a round when its excess over clean data is beyond 4 standard deviations of a
        count and at least ``MIN_EXCESS`` of N."""
        return i >= 0 and excess[i] > max(4.0 * math.sqrt(expected[i] + 1.0), MIN_EXCESS * self.N)

    def _paper(self, blocks, op, lam, entry) -> tuple[Blocks, dict]:
        """Algorithm 1 on whitened coordinates: stopping bound, delta and the step-11 threshold."""
        eps = self.epsilon
        bound = self.C * eps * np.log(1 / eps)
        entry["null_threshold"] = float(bound)
        if abs(lam) <= bound:
            return blocks, dict(entry, threshold=float(bound), removed=0, kept=entry["kept_before"], stopped="eigenvalue below bound")
        delta = 3.0 * np.sqrt(eps * abs(lam))
        edges = np.unique(np.concatenate(blocks.map(_scores_of).collect()))
        tail = blocks.reduce(_tail_counts, edges=edges) / op.n
        cut = _paper_threshold(edges, tail, delta, eps, len(self.layout.domain))
        if cut is None or self.N - op.n + tail[np.searchsorted(edges, cut)] * op.n > eps * self.N + 0.5:
            reason = "no threshold T satisfies step 11" if cut is None else "epsilon budget spent"
            return blocks, dict(entry, threshold=float("nan"), removed=0, kept=entry["kept_before"], stopped=reason)
        blocks = blocks.map(_drop_above, cut=cut).persist()
        entry["threshold"] = cut
        return blocks, self._removed(blocks, entry)


def _scores_of(b: _Block) -> np.ndarray:
    return _s(b)[b.w > 0]


@dataclass
class _Null:
    """Clean data from the fitted network: bootstrap samples (each with its own fit, as the filter
    fits the data), their top eigenvalues, and their records' scores along given directions over the
    cells (``along[name]``), computed as each sample is drawn so that no sample is kept."""

    eigenvalues: np.ndarray
    along: dict
    n: float

    @classmethod
    def draw(cls, layout, cells, counts, op: _Operator, n_null: int, draws: int, rng, tol, directions: Mapping) -> "_Null":
        from ..inference.sampling import sample_bayes

        probs = conditional_probabilities(counts)
        dom = layout.domain
        fitted = BayesianNetwork(dom, layout.parents, {v: p.reshape(dom.shape(layout.parents[v]) + (dom.card(v),))
                                                       for v, p in zip(dom.variables, probs)})
        n = int(min(n_null, round(op.n)))
        lams, weights = [], []
        scores: dict = {name: [] for name in directions}
        for _ in range(draws):
            boot = LocalBlocks([_prepare(RecordBlock(0, sample_bayes(fitted, n, rng)), dom, layout, cells)])
            boot_counts = cells.split(layout, boot.reduce(_cell_sums, size=cells.size))
            lam, _ = _Operator.build(layout, cells, boot_counts, whiten=False).top(boot, rng, max(tol, 1e-2))
            lams.append(abs(lam))
            b = boot.items[0]
            for name, h in directions.items():
                scores[name].append(np.abs(_project(b, h)))
            weights.append(b.w)
        w = np.concatenate(weights)
        total = float(n * draws)
        return cls(np.array(lams), {name: _Tail(np.concatenate(s), w, total) for name, s in scores.items()}, total)

    def eigenvalue_bound(self, n: float) -> float:
        """The largest eigenvalue clean data of size n shows: the bootstrap's largest, rescaled from
        the bootstrap's size (sampling noise shrinks as 1 / sqrt(n)), with a 10% margin."""
        per_draw = self.n / len(self.eigenvalues)
        return float(self.eigenvalues.max() * math.sqrt(per_draw / n) * 1.1)


@dataclass
class _Tail:
    """The bootstrap records' scores along one direction, with their multiplicities."""

    scores: np.ndarray
    weights: np.ndarray
    n: float

    def edges(self) -> np.ndarray:
        """Candidate cuts: the distinct null scores (at most 4096 of their quantiles)."""
        s = np.unique(self.scores)
        if s.size > 4096:
            s = np.unique(np.quantile(self.scores, np.linspace(0, 1, 4096)))
        return np.append(s, np.nextafter(s[-1], np.inf)) if s.size else np.array([np.inf])

    def tail(self, edges: np.ndarray) -> np.ndarray:
        """Fraction of clean records with score >= each edge."""
        order = np.argsort(self.scores)
        s, w = self.scores[order], self.weights[order]
        above = np.cumsum(w[::-1])[::-1]
        pos = np.searchsorted(s, edges, side="left")
        return np.where(pos < s.size, above[np.minimum(pos, s.size - 1)], 0.0) / self.n


def _paper_threshold(edges: np.ndarray, tail: np.ndarray, delta: float, epsilon: float, d: int) -> float | None:
    """The cut c = T + delta for the smallest T > 0, among the score values ``edges`` (ascending) with
    tail fractions ``tail`` (of scores >= each edge), such that the tail exceeds
    7 exp(-T^2 / 2) + 3 eps / (T^2 ln d) (Algorithm 1, step 11: any such T removes more corrupted
    records than clean ones; the smallest removes the most per round). None if there is none."""
    T = edges - delta
    ok = T > 0
    if not ok.any():
        return None
    bound = 7 * np.exp(-(T[ok] ** 2) / 2) + 3 * epsilon / (T[ok] ** 2 * np.log(max(d, 2)))
    good = np.flatnonzero(tail[ok] > bound)
    return float(edges[ok][good[0]]) if good.size else None
