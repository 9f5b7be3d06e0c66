"""Private choice of what to measure: MST's selection of pairs (McKenna, Sheldon and Miklau 2021).

A release that picks its cliques by looking at the data has spent privacy that no accountant saw.
MST's answer: measure every one-way table first, fit the independent model they imply, and choose
the d - 1 pairs of a spanning tree one at a time, each by the exponential mechanism on how badly the
current model explains the pair's table (its L1 error). Kruskal's rule keeps the choice a tree: a
round only offers pairs that join two components.

The score of a pair moves by at most w when one individual (per-table contribution w) joins or
leaves: the model is built from released tables only, and the individual's w counts change one
pair table's L1 error by at most w. Each round is report-noisy-max with Gumbel noise of scale
w / sqrt(2 rho_round) (exponential mechanism, rho_round-zCDP as a bounded-range mechanism),
sampled by OpenDP when private.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core import checks
from ..factors.domain import Domain
from ..factors.factor import Factor
from ..learners.cgm import _naive_targets
from ..models.measurement import Measurement
from ..models.noise import opendp


@dataclass(frozen=True)
class Selected:
    """One pair chosen privately, with the public facts of its choice.

    Parameters
    ----------
    clique : tuple
        The pair measured.
    round : int
        Selection round (0-based).
    candidates : int
        Pairs offered in that round (those joining two components of the tree so far).
    rho : float
        zCDP cost of the round.
    reason : str
        How it was chosen, in words.

    Examples
    --------
    >>> Selected(("A", "B"), 0, 3, 0.1, "round 1 of 2").clique
    ('A', 'B')
    """

    clique: tuple
    round: int
    candidates: int
    rho: float
    reason: str


def gumbel_scale(rho: float, sensitivity: float = 1.0) -> float:
    """Gumbel scale of report-noisy-max that is ``rho``-zCDP for scores of L-infinity sensitivity
    ``sensitivity`` (scores that may move either way): s = sensitivity / sqrt(2 rho), the exponential
    mechanism at epsilon = 2 sensitivity / s, which is epsilon^2 / 8-zCDP.

    Examples
    --------
    >>> gumbel_scale(0.5)
    1.0
    """
    return checks.positive(sensitivity, "sensitivity") / math.sqrt(2 * checks.positive(rho, "rho"))


def report_noisy_max(scores: np.ndarray, rho: float, sensitivity: float = 1.0, rng: np.random.Generator | None = None) -> int:
    """Index of the largest of ``scores`` plus Gumbel noise (the exponential mechanism), ``rho``-zCDP.

    ``rng`` None samples privately with OpenDP's ``make_noisy_max``; a Generator samples the same law
    reproducibly, which is not private (the caller has warned).

    Parameters
    ----------
    scores : numpy.ndarray
        One finite score per candidate.
    rho : float
        zCDP cost of the draw.
    sensitivity : float
        How far one individual can move any score (either way).
    rng : numpy.random.Generator, optional

    Returns
    -------
    int
        The index chosen.

    Examples
    --------
    >>> report_noisy_max(np.array([0.0, 50.0, 1.0]), rho=1.0, rng=np.random.default_rng(0))
    1
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError(f"scores: expected a non-empty vector of finite numbers, got shape {scores.shape}")
    s = gumbel_scale(rho, sensitivity)
    if rng is None:
        dp = opendp()
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=False)
        meas = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=s)
        return int(meas(scores.tolist()))
    return int(np.argmax(scores + rng.gumbel(0.0, s, scores.size)))


def independent_marginals(one_way: Sequence[Measurement]) -> tuple[dict, float]:
    """The independent model the one-way tables imply: each table divided by its total after
    projection onto the simplex, and N as the tables' mean total (post-processing only).

    Examples
    --------
    >>> p, n = independent_marginals([Measurement(("A",), np.array([30.0, -2.0, 72.0]), "gaussian", 1.0)])
    >>> p["A"].round(3).tolist(), n
    ([0.29, 0.0, 0.71], 100.0)
    """
    for m in one_way:
        if len(m.variables) != 1:
            raise ValueError(f"one_way: expected one-way tables, got one over {m.variables}")
    n = max(float(np.mean([m.values.sum() for m in one_way])), 1.0)
    return {f.variables[0]: f.values for f in _naive_targets(one_way, n, project=True)}, n


def pair_errors(pairs: Sequence[Factor], probs: dict, n: float) -> np.ndarray:
    """Per pair table, the L1 distance between its counts and what the independent model predicts
    (n p_a p_b'): MST's score. Exact counts in, so the scores are private inputs, never published.

    Examples
    --------
    >>> t = Factor(("A", "B"), np.array([[10, 0], [0, 10]]))
    >>> pair_errors([t], {"A": np.array([0.5, 0.5]), "B": np.array([0.5, 0.5])}, 20.0).tolist()
    [20.0]
    """
    out = np.empty(len(pairs))
    for i, t in enumerate(pairs):
        a, b = t.variables
        out[i] = np.abs(np.asarray(t.values, dtype=float) - n * np.outer(probs[a], probs[b])).sum()
    return out


class _Components:
    """Union-find over the variables (Kruskal's bookkeeping)."""

    def __init__(self, variables: Sequence) -> None:
        self.parent = {v: v for v in variables}

    def find(self, v):
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def union(self, a, b) -> None:
        self.parent[self.find(a)] = self.find(b)


def mst_select(domain: Domain, pairs: Sequence[Factor], one_way: Sequence[Measurement], rho: float,
               sensitivity: float = 1.0, rng: np.random.Generator | None = None) -> list[Selected]:
    """Choose the pairs of a spanning tree privately, MST's way: d - 1 rounds of report-noisy-max on
    the pairs' L1 errors under the independent model of the released one-way tables, each round
    offering only pairs that join two components; ``rho`` is split evenly over the rounds.

    Parameters
    ----------
    domain : Domain
    pairs : sequence of Factor
        The exact count table of every candidate pair (never published).
    one_way : sequence of Measurement
        The released one-way tables, one per variable of ``domain``.
    rho : float
        zCDP budget of the whole selection (the caller charges it).
    sensitivity : float
        Public bound of one individual's weight per table.
    rng : numpy.random.Generator, optional
        None: private draws (OpenDP). A Generator: reproducible and not private.

    Returns
    -------
    list of Selected
        The pairs in the order chosen.

    Examples
    --------
    >>> from ppgm.inference.tables import contingency_tables
    >>> dom = Domain(("A", "B", "C"), (2, 2, 2))
    >>> x = np.array([[0, 0, 1], [1, 1, 0], [1, 1, 1], [0, 0, 0]] * 50)
    >>> ones = [Measurement((v,), t.values.astype(float), "gaussian", 1.0) for v, t in
    ...         zip(dom.variables, contingency_tables(x, dom, [("A",), ("B",), ("C",)]))]
    >>> cands = contingency_tables(x, dom, [("A", "B"), ("A", "C"), ("B", "C")])
    >>> [s.clique for s in mst_select(dom, cands, ones, rho=10.0, rng=np.random.default_rng(0))][0]
    ('A', 'B')
    """
    rho = checks.positive(rho, "rho")
    pairs = list(pairs)
    if len(domain) < 2:
        return []
    seen = {tuple(m.variables) for m in one_way}
    missing = [v for v in domain.variables if (v,) not in seen]
    if missing:
        raise ValueError(f"one_way: no released one-way table for {missing}")
    for i, t in enumerate(pairs):
        if not isinstance(t, Factor) or len(t.variables) != 2:
            raise ValueError(f"pairs[{i}]: expected a count table over two variables")
    probs, n = independent_marginals(one_way)
    scores = pair_errors(pairs, probs, n)
    rounds = len(domain) - 1
    rho_round = rho / rounds
    comps = _Components(domain.variables)
    chosen: list[Selected] = []
    for r in range(rounds):
        offered = np.array([i for i, t in enumerate(pairs) if comps.find(t.variables[0]) != comps.find(t.variables[1])])
        if offered.size == 0:
            raise ValueError("pairs: the candidate pairs do not connect every variable")
        pick = int(offered[report_noisy_max(scores[offered], rho_round, sensitivity, rng)])
        a, b = pairs[pick].variables
        comps.union(a, b)
        chosen.append(Selected((a, b), r, int(offered.size), rho_round,
                               f"round {r + 1} of {rounds}: report-noisy-max (Gumbel, rho = {rho_round:.4g}) over the "
                               f"L1 errors of the {offered.size} pairs joining two components, under the independent "
                               "model of the released one-way tables"))
    return chosen

