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
    inlier_mask: np.ndarray
    history: list = field(default_factory=list)


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


def _diagonal_blocks(parts, layout: CPTLayout, n: int) -> list:
    """The blocks of Z'Z / n on each (node, parent configuration): per node an (n_configs, w, w) array."""
    blocks = []
    for j, cfg, vals in parts:
        w = vals.shape[1]
        ncfg = layout.n_configs[j]
        B = np.empty((ncfg, w, w))
        for s in range(w):
            for t in range(s, w):
                B[:, s, t] = B[:, t, s] = np.bincount(cfg, weights=vals[:, s] * vals[:, t], minlength=ncfg) / n
        blocks.append((layout.base[j], ncfg, w, B))
    return blocks


def _top_eigenpair(gram, m: int, blocks: list, n: int, rng: np.random.Generator, tol: float):
    """Eigenpair of largest magnitude of (Z'Z / n with its diagonal blocks removed), where
    ``gram(u) = Z'(Z u)``: a local product here, a map-reduce over partitions on Dask."""

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
) -> FilterResult:
    """Learn the CPTs of a known DAG from records of which an ``epsilon`` fraction may be corrupted.

    Parameters
    ----------
    records : array (N, len(domain))
        Integer state codes.
    domain : Domain
    parents : mapping
        ``{node: tuple of parents}`` (the known topology).
    epsilon : float in (0, 1/2)
        The corrupted fraction.
    mode : {"single_pass", "paper"}
        ``"single_pass"`` (what the authors ran): one eigenvector, drop the ``ceil(epsilon * N)``
        records with the largest ``|v . (F(x, q) - q)|`` (ties broken by a seeded shuffle).
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
        Drives the Lanczos start vector and the tie-breaking shuffle.
    progress : bool
        Show a tqdm bar over the rounds.
    tol : float
        Relative accuracy of the eigenvalue.

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
    if not (isinstance(epsilon, (int, float, np.floating)) and 0 < epsilon < 0.5):
        raise ValueError(f"epsilon: expected a corrupted fraction in (0, 1/2), got {epsilon!r}")
    if mode not in ("single_pass", "iterative", "paper"):
        raise ValueError(f"mode: expected 'single_pass', 'iterative' or 'paper', got {mode!r}")
    if mode == "iterative" and (not isinstance(rounds, (int, np.integer)) or rounds < 1):
        raise ValueError(f"rounds: expected a positive integer, got {rounds!r}")
    if C <= 0:
        raise ValueError(f"C: expected a positive constant, got {C}")
    rec = np.asfortranarray(check_records(records, domain))  # column access per node is contiguous
    N = rec.shape[0]
    if N < 2:
        raise ValueError(f"records: need at least 2 records to filter, got {N}")
    rng = as_generator(seed)
    layout = CPTLayout.build(domain, parents)
    configs = layout.configs(rec)
    keep = np.ones(N, dtype=bool)
    history: list = []
    d = len(domain)
    total_drop = int(np.ceil(epsilon * N))
    n_rounds = {"single_pass": 1, "iterative": int(rounds), "paper": max_rounds}[mode]
    bar = tqdm(total=n_rounds, desc="robust filter", disable=not progress, leave=False)
    for r in range(n_rounds):
        rows = None if keep.all() else np.flatnonzero(keep)
        n = N if rows is None else rows.size
        counts = layout.counts(rec, configs, rows)
        q = conditional_probabilities(counts)
        Z, parts = _centred_matrix(rec, configs, layout, q, rows)
        lam, v = _top_eigenpair(lambda u: Z.T @ (Z @ u), layout.m, _diagonal_blocks(parts, layout, n), n, rng, tol)
        if rows is None:
            rows = np.arange(N)
        scores = np.abs(Z @ v) if layout.m else np.zeros(n)
        entry = {"eigenvalue": lam, "kept_before": int(n)}
        if mode != "paper":
            n_drop = total_drop * (r + 1) // n_rounds - total_drop * r // n_rounds
            order = rng.permutation(n)
            ranked = order[np.argsort(-scores[order], kind="stable")]
            drop = rows[ranked[:n_drop]]
            entry["threshold"] = float(scores[ranked[n_drop - 1]]) if n_drop else float("inf")
        else:
            cfg_total = np.concatenate([c.sum(axis=1) for c in counts])
            alpha = float(cfg_total[cfg_total > 0].min()) / n
            bound = C * epsilon * np.log(1 / epsilon) / alpha
            if abs(lam) <= bound:
                entry.update(threshold=float(bound), removed=0, kept=int(n), stopped="eigenvalue below bound")
                history.append(entry)
                bar.update(1)
                break
            delta = 3.0 * np.sqrt(epsilon * abs(lam) / alpha)
            cut = _paper_threshold(scores, delta, epsilon, d)
            if cut is None:
                entry.update(threshold=float("nan"), removed=0, kept=int(n), stopped="no threshold T satisfies step 11")
                history.append(entry)
                bar.update(1)
                break
            drop = rows[scores >= cut]
            entry["threshold"] = cut
        keep[drop] = False
        entry.update(removed=int(drop.size), kept=int(keep.sum()))
        history.append(entry)
        bar.update(1)
        if keep.sum() < 2:
            raise ValueError("the filter removed (almost) every record; is epsilon right?")
    bar.close()
    probs = conditional_probabilities(layout.counts(rec, configs, None if keep.all() else np.flatnonzero(keep)))
    cpts = {v: p.reshape(domain.shape(layout.parents[v]) + (domain.card(v),)) for v, p in zip(domain.variables, probs)}
    return FilterResult(BayesianNetwork(domain, layout.parents, cpts), keep, history)


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
