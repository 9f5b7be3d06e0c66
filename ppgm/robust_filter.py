"""Robust CPT learning from epsilon-corrupted samples: the eigenvector filter (Cheng, Diakonikolas,
Kane, Stewart, NeurIPS 2018, Algorithm 1 Filter-Known-Topology), for binary and categorical nodes.

Each record x maps to F(x, q) (Definition 6): for every node the coordinates of its *active*
parent configuration hold the one-hot state of x (all states but the last), every other coordinate
holds q. So F(x, q) - q has exactly ``sum_i (k_i - 1)`` non-zeros per record, and the centred
records form a sparse matrix Z with that many entries per row (never a dense N x m array). The
filter looks at M = Z'Z / N with its diagonal blocks zeroed (one block per node and parent
configuration: under the true model the covariance of F is block-diagonal, and diagonal for binary
nodes), finds its eigenvalue of largest magnitude with Lanczos (ARPACK) through mat-vecs only, and
removes the records that stick out along that direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh
from tqdm.auto import tqdm

from .bayes import BayesianNetwork
from .cpts import CPTLayout, conditional_probabilities
from .domain import Domain
from .executor import Blocks, LocalBlocks, RecordBlock, record_blocks
from .records import check_records
from .rng import as_generator


@dataclass(frozen=True)
class FilterResult:
    """Outcome of :func:`filter_known_topology`.

    Attributes
    ----------
    model : BayesianNetwork
        The DAG with the empirical CPTs of the records kept.
    inlier_mask : numpy.ndarray of bool
        One entry per input record: True if it was kept.
    history : list of dict
        One entry per round: ``eigenvalue`` (of largest magnitude), ``threshold`` (the score above
        which records were removed, or the stopping bound), ``removed`` (records removed), ``kept``.
    inlier_blocks : Blocks, optional
        For records given as blocks that live elsewhere (Dask), the masks per block; ``inlier_mask``
        is then None.

    Examples
    --------
    >>> from ppgm.random_models import random_bayesian_network
    >>> from ppgm.sampling import sample
    >>> bn = random_bayesian_network(4, 2, seed=0)
    >>> res = filter_known_topology(sample(bn, 1000, seed=0), bn.domain, bn.parents, 0.1, progress=False)
    >>> res.history[0]["removed"], int(res.inlier_mask.sum())
    (100, 900)
    """

    model: BayesianNetwork
    inlier_mask: np.ndarray | None
    history: list = field(default_factory=list)
    inlier_blocks: Blocks | None = None


@dataclass
class _Block:
    """One block of records as the filter holds it: codes (column-major), parent configurations,
    and which of its rows are still kept."""

    start: int
    rec: np.ndarray
    cfg: np.ndarray
    keep: np.ndarray


@dataclass
class _Centred:
    """A block's centred records Z = F(x, q) - q on its kept rows, the per-node pieces of its
    diagonal blocks, and the raw (unnormalised) sums of those blocks."""

    Z: sp.csr_matrix
    rows: np.ndarray
    raw: list


def _prepare(block: RecordBlock, domain: Domain, layout: CPTLayout) -> _Block:
    rec = np.asfortranarray(check_records(block.codes, domain))  # column access per node is contiguous
    return _Block(int(block.start), rec, layout.configs(rec), np.ones(rec.shape[0], dtype=bool))


def _kept_rows(b: _Block):
    return None if b.keep.all() else np.flatnonzero(b.keep)


def _counts(b: _Block, layout: CPTLayout) -> list:
    return layout.counts(b.rec, b.cfg, _kept_rows(b))


def _centre(b: _Block, layout: CPTLayout, q: list) -> _Centred:
    rows = _kept_rows(b)
    Z, parts = _centred_matrix(b.rec, b.cfg, layout, q, rows)
    return _Centred(Z, np.arange(b.rec.shape[0]) if rows is None else rows, _diagonal_sums(parts, layout))


def _centred_matrix(records, configs, layout: CPTLayout, q: list, rows):
    """Sparse Z (rows x m) of F(x, q) - q, and per node its (column start, parent configuration,
    centred values) for the diagonal blocks. ``rows`` is an index array or ``None`` for all rows."""
    dom = layout.domain
    n = records.shape[0] if rows is None else rows.size
    width = sum(k - 1 for k in dom.cards)
    indices = np.empty((width, n), dtype=np.int32)  # m < 2**31 coordinates; filled node by node
    data = np.empty((width, n))
    parts = []
    col = 0
    for j, (k, base) in enumerate(zip(dom.cards, layout.base)):
        if k == 1:
            continue
        w = k - 1
        cfg = configs[:, j] if rows is None else configs[rows, j]
        x = records[:, j] if rows is None else records[rows, j]
        start = base + cfg * w
        vals = (x[:, None] == np.arange(w)[None, :]) - q[j][cfg, :w]
        indices[col : col + w] = start[None, :] + np.arange(w, dtype=np.int32)[:, None]
        data[col : col + w] = vals.T
        parts.append((j, cfg, vals))
        col += w
    indptr = np.arange(0, n * width + 1, max(width, 1), dtype=np.int64)[: n + 1]
    Z = sp.csr_matrix((data.T.ravel(), indices.T.ravel(), indptr), shape=(n, layout.m))
    return Z, parts


def _diagonal_sums(parts, layout: CPTLayout) -> list:
    """Per node with more than one state, the (n_configs, w, w) sums of z z' over the rows of each
    parent configuration: the diagonal blocks of Z'Z, before dividing by n."""
    sums = []
    for j, cfg, vals in parts:
        w = vals.shape[1]
        ncfg = layout.n_configs[j]
        B = np.empty((ncfg, w, w))
        for s in range(w):
            for t in range(s, w):
                B[:, s, t] = B[:, t, s] = np.bincount(cfg, weights=vals[:, s] * vals[:, t], minlength=ncfg)
        sums.append(B)
    return sums


def _diagonal_blocks(layout: CPTLayout, sums: list, n: int) -> list:
    """(column start, configurations, width, block / n) of every node with more than one state."""
    nodes = [j for j, k in enumerate(layout.domain.cards) if k > 1]
    return [(layout.base[j], layout.n_configs[j], B.shape[1], B / n) for j, B in zip(nodes, sums)]


def _top_eigenpair(gram, m: int, blocks: list, n: int, rng: np.random.Generator, tol: float):
    """Eigenpair of largest magnitude of (Z'Z / n with its diagonal blocks removed), where
    ``gram(u) = Z'(Z u)`` is a reduction over the blocks of records."""

    def matvec(u):
        u = np.asarray(u).ravel()
        out = gram(u) / n
        for base, ncfg, w, B in blocks:
            seg = slice(base, base + ncfg * w)
            out[seg] -= np.einsum("aij,aj->ai", B, u[seg].reshape(ncfg, w)).ravel()
        return out

    if m == 0:
        return 0.0, np.zeros(0)
    if m <= 2:  # ARPACK needs k < m; form the tiny matrix directly
        M = np.column_stack([matvec(e) for e in np.eye(m)])
        w, V = np.linalg.eigh((M + M.T) / 2)
        i = int(np.argmax(np.abs(w)))
        return float(w[i]), V[:, i]
    op = LinearOperator((m, m), matvec=matvec, dtype=float)
    w, V = eigsh(op, k=1, which="LM", v0=rng.standard_normal(m), tol=tol)
    return float(w[0]), V[:, 0]


def _gram(c: _Centred, u: np.ndarray) -> np.ndarray:
    return c.Z.T @ (c.Z @ u)


def _raw(c: _Centred) -> list:
    return c.raw


@dataclass
class _Scored:
    """A block's scores |v . z| on its kept rows and their tie-breaking keys."""

    rows: np.ndarray
    scores: np.ndarray
    keys: np.ndarray


def _score(c: _Centred, b: _Block, v: np.ndarray, key_seed: int) -> _Scored:
    scores = np.abs(c.Z @ v) if c.Z.shape[1] else np.zeros(c.rows.size)
    return _Scored(c.rows, scores, tie_keys(b.start + c.rows, key_seed))


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


def _at_least(s: _Scored, t: float) -> int:
    return int((s.scores >= t).sum())


def _tied_at_least(s: _Scored, t: float, key) -> int:
    return int(((s.scores == t) & (s.keys >= np.uint64(key))).sum())


def _top(scored: Blocks, k: int) -> tuple[float, int]:
    """The rule that drops exactly the ``k`` records with the largest (score, key): score above t, or
    equal to t with key at least kt. Found by bisection on the bit patterns of t (non-negative
    floats order like their bits) and of kt, with one count reduction per step."""
    lo, hi = 0, int(np.float64(np.inf).view(np.int64))
    while lo < hi:  # largest t with #{score >= t} >= k
        mid = (lo + hi + 1) // 2
        if scored.reduce(_at_least, t=float(np.int64(mid).view(np.float64))) >= k:
            lo = mid
        else:
            hi = mid - 1
    t = float(np.int64(lo).view(np.float64))
    ties = k - scored.reduce(_at_least, t=float(np.nextafter(t, np.inf)))
    klo, khi = 0, 2**64 - 1
    while klo < khi:  # largest kt with #{score == t, key >= kt} >= ties
        mid = (klo + khi + 1) // 2
        if scored.reduce(_tied_at_least, t=t, key=mid) >= ties:
            klo = mid
        else:
            khi = mid - 1
    return t, klo


def _drop_top(b: _Block, s: _Scored, t: float, kt: int) -> _Block:
    drop = (s.scores > t) | ((s.scores == t) & (s.keys >= np.uint64(kt)))
    return _drop(b, s.rows[drop])


def _drop_from(b: _Block, s: _Scored, cut: float) -> _Block:
    return _drop(b, s.rows[s.scores >= cut])


def _drop(b: _Block, rows: np.ndarray) -> _Block:
    keep = b.keep.copy()
    keep[rows] = False
    return _Block(b.start, b.rec, b.cfg, keep)


def _n_kept(b: _Block) -> int:
    return int(b.keep.sum())


def _scores_of(s: _Scored) -> np.ndarray:
    return s.scores


def _keep_of(b: _Block) -> np.ndarray:
    return b.keep


def filter_known_topology(
    records,
    domain: Domain,
    parents: Mapping,
    epsilon: float,
    mode: str = "single_pass",
    C: float = 1.0,
    max_rounds: int = 50,
    rounds: int = 4,
    seed=None,
    progress: bool = True,
    tol: float = 1e-6,
    block_rows: int | None = None,
) -> FilterResult:
    """Learn the CPTs of a known DAG from records of which an ``epsilon`` fraction may be corrupted.

    Parameters
    ----------
    records : array (N, len(domain)), or Blocks of :class:`ppgm.executor.RecordBlock`
        Integer state codes; blocks (for instance on Dask, see ``ppgm.adapters.filter_dask``) are
        filtered where they live, with the same result as the same blocks in memory.
    domain : Domain
    parents : mapping
        ``{node: tuple of parents}`` (the known topology).
    epsilon : float in (0, 1/2)
        The corrupted fraction.
    mode : {"single_pass", "iterative", "paper"}
        ``"single_pass"`` (what the authors ran): one eigenvector, drop the ``ceil(epsilon * N)``
        records with the largest ``|v . (F(x, q) - q)|`` (ties broken by a seeded key per record,
        :func:`tie_keys`).
        ``"iterative"``: ``rounds`` such passes, each recomputing q and the eigenvector on the rows
        left and dropping ``epsilon * N / rounds`` of them (same total removed; at large epsilon
        one direction does not capture all of the corruption, see benchmarks/RESULTS.md).
        ``"paper"``: Algorithm 1 iterated; stop when ``|lambda| <= C * eps * log(1/eps) / alpha``
        (alpha: smallest empirical probability of an observed parent configuration), otherwise
        remove the records scoring above ``T + delta`` with ``delta = 3 sqrt(eps |lambda| / alpha)``
        and the largest ``T > 0`` whose empirical tail exceeds ``7 exp(-T^2/2) + 3 eps / (T^2 ln d)``
        (step 11), and repeat (at most ``max_rounds`` rounds).
    C : float
        Constant of the paper-mode stopping rule.
    max_rounds : int
        Paper-mode round limit.
    rounds : int
        Passes of the iterative mode.
    seed : int or numpy.random.Generator, optional
        Drives the Lanczos start vector and the tie-breaking keys.
    progress : bool
        Show a tqdm bar over the rounds.
    tol : float
        Relative accuracy of the eigenvalue.
    block_rows : int, optional
        Split an in-memory array into blocks of this many rows (default: one block).

    Returns
    -------
    FilterResult

    Examples
    --------
    >>> from ppgm.random_models import random_bayesian_network
    >>> from ppgm.sampling import sample
    >>> bn = random_bayesian_network(6, 2, seed=0)
    >>> x = sample(bn, 2000, seed=1)
    >>> res = filter_known_topology(x, bn.domain, bn.parents, 0.05, seed=0, progress=False)
    >>> int((~res.inlier_mask).sum())
    100
    """
    _check_filter_arguments(epsilon, mode, rounds, C)
    blocks = (records if isinstance(records, Blocks) else record_blocks(np.asarray(records), block_rows))
    layout = CPTLayout.build(domain, parents)
    blocks = blocks.map(_prepare, domain=domain, layout=layout).persist()
    N = blocks.reduce(_n_kept)
    if N < 2:
        raise ValueError(f"records: need at least 2 records to filter, got {N}")
    rng = as_generator(seed)
    key_seed = int(rng.integers(1 << 62))
    run = _Run(layout, epsilon, mode, C, N, rng, tol, key_seed)
    n_rounds = {"single_pass": 1, "iterative": int(rounds), "paper": max_rounds}[mode]
    history: list = []
    for r in tqdm(range(n_rounds), desc="robust filter", disable=not progress, leave=False):
        blocks, entry = run.round(blocks, r, n_rounds)
        history.append(entry)
        if "stopped" in entry:
            break
        if entry["kept"] < 2:
            raise ValueError("the filter removed (almost) every record; is epsilon right?")
    probs = conditional_probabilities(blocks.reduce(_counts, layout=layout))
    cpts = {v: p.reshape(domain.shape(layout.parents[v]) + (domain.card(v),)) for v, p in zip(domain.variables, probs)}
    model = BayesianNetwork(domain, layout.parents, cpts)
    masks = blocks.map(_keep_of)
    local = isinstance(masks, LocalBlocks)
    return FilterResult(model, np.concatenate(masks.collect()) if local else None, history, None if local else masks)


def _check_filter_arguments(epsilon, mode, rounds, C) -> None:
    if not (isinstance(epsilon, (int, float, np.floating)) and 0 < epsilon < 0.5):
        raise ValueError(f"epsilon: expected a corrupted fraction in (0, 1/2), got {epsilon!r}")
    if mode not in ("single_pass", "iterative", "paper"):
        raise ValueError(f"mode: expected 'single_pass', 'iterative' or 'paper', got {mode!r}")
    if mode == "iterative" and (not isinstance(rounds, (int, np.integer)) or rounds < 1):
        raise ValueError(f"rounds: expected a positive integer, got {rounds!r}")
    if C <= 0:
        raise ValueError(f"C: expected a positive constant, got {C}")


@dataclass
class _Run:
    """The constants of one filtering run and its round."""

    layout: CPTLayout
    epsilon: float
    mode: str
    C: float
    N: int
    rng: np.random.Generator
    tol: float
    key_seed: int

    def round(self, blocks: Blocks, r: int, n_rounds: int) -> tuple[Blocks, dict]:
        """One round: q and the centred records, the top eigenpair, the scores, the removal."""
        layout = self.layout
        counts = blocks.reduce(_counts, layout=layout)
        n = int(counts[0].sum())  # rows kept: every node's counts add up to them
        centred = blocks.map(_centre, layout=layout, q=conditional_probabilities(counts)).persist()
        diag = _diagonal_blocks(layout, centred.reduce(_raw), n)
        lam, v = _top_eigenpair(lambda u: centred.reduce(_gram, u=u), layout.m, diag, n, self.rng, self.tol)
        scored = centred.map(_score, blocks, v=v, key_seed=self.key_seed).persist()
        entry = {"eigenvalue": lam, "kept_before": n}
        if self.mode == "paper":
            return self._paper_step(blocks, scored, counts, lam, n, entry)
        total = int(np.ceil(self.epsilon * self.N))
        n_drop = total * (r + 1) // n_rounds - total * r // n_rounds
        if n_drop:
            t, kt = _top(scored, n_drop)
            blocks = blocks.map(_drop_top, scored, t=t, kt=kt).persist()
        entry["threshold"] = t if n_drop else float("inf")
        kept = blocks.reduce(_n_kept)
        entry.update(removed=n - kept, kept=kept)
        return blocks, entry

    def _paper_step(self, blocks, scored, counts, lam, n, entry) -> tuple[Blocks, dict]:
        """Algorithm 1's stopping rule and threshold (step 11) on the scores of every kept record."""
        eps = self.epsilon
        cfg_total = np.concatenate([c.sum(axis=1) for c in counts])
        alpha = float(cfg_total[cfg_total > 0].min()) / n
        bound = self.C * eps * np.log(1 / eps) / alpha
        if abs(lam) <= bound:
            entry.update(threshold=float(bound), removed=0, kept=int(n), stopped="eigenvalue below bound")
            return blocks, entry
        delta = 3.0 * np.sqrt(eps * abs(lam) / alpha)
        cut = _paper_threshold(np.concatenate(scored.map(_scores_of).collect()), delta, eps, len(self.layout.domain))
        if cut is None:
            entry.update(threshold=float("nan"), removed=0, kept=int(n), stopped="no threshold T satisfies step 11")
            return blocks, entry
        blocks = blocks.map(_drop_from, scored, cut=cut).persist()
        kept = blocks.reduce(_n_kept)
        entry.update(threshold=cut, removed=n - kept, kept=kept)
        return blocks, entry


def _paper_threshold(scores: np.ndarray, delta: float, epsilon: float, d: int) -> float | None:
    """Largest cut c = T + delta (T > 0) with Pr[score >= c] > 7 exp(-T^2 / 2) + 3 eps / (T^2 ln d), or None.

    Candidate cuts are the scores themselves: just below a score s the tail Pr[score > T + delta]
    counts every score >= s, so the records removed are those scoring >= the returned cut.
    """
    s = np.sort(scores)[::-1]
    T = s - delta
    tail = np.searchsorted(-s, -s, side="right") / s.size  # fraction of scores >= s[j]
    ok = T > 0
    if not ok.any():
        return None
    T, tail, cut = T[ok], tail[ok], s[ok]
    bound = 7 * np.exp(-(T**2) / 2) + 3 * epsilon / (T**2 * np.log(max(d, 2)))
    good = np.flatnonzero(tail > bound)
    return float(cut[good[0]]) if good.size else None
