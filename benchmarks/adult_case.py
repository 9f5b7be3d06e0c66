"""The Adult case of the noisy-table learners: noisy 1-way tables and the 2-way tables of a Chow-Liu tree.

14 attributes (the 13 features other than the sampling weight ``fnlwgt``, and the label ``income``); the
five numeric ones cut at quantiles of the training rows (at most 8 bins; capital gain and loss fall into
zero and above, and ``educational-num`` repeats ``education`` one to one, as in the raw data). The tree is the
maximum spanning tree of the pairwise mutual information of the rows. Both choices read the
records, which a private release would not: this is a benchmark of the learners on fixed tables,
not a private pipeline (the seeded noise is the same integer law as a release, not private itself).
The score is private-pgm's: mean total variation over all 91 two-way marginals.
"""

from __future__ import annotations

from itertools import combinations

import networkx as nx
import numpy as np

from ppgm import Domain, Factor, contingency_tables, infer
from ppgm.adapters import load_adult
from ppgm.privacy.mechanisms import LaplaceMechanism

NUMERIC = ["age", "educational-num", "capital-gain", "capital-loss", "hours-per-week"]
DROP = ["fnlwgt"]


def adult_records(bins: int = 8) -> tuple[Domain, np.ndarray]:
    """Domain and integer codes of Adult's training rows."""
    train, _ = load_adult()
    df = train.drop(columns=DROP)
    cols, cards, codes = [], [], []
    for c in df.columns:
        x = df[c]
        if c in NUMERIC:
            edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)[1:-1]))
            code = np.searchsorted(edges, x.to_numpy(), side="right")
        else:
            code = np.unique(x.astype(str), return_inverse=True)[1]
        cols.append(c)
        cards.append(int(code.max()) + 1)
        codes.append(code)
    return Domain(tuple(cols), tuple(cards)), np.stack(codes, axis=1).astype(np.int64)


def chow_liu_edges(domain: Domain, x: np.ndarray) -> list[tuple]:
    """Maximum spanning tree of the empirical pairwise mutual information."""
    g = nx.Graph()
    pairs = list(combinations(domain.variables, 2))
    for (a, b), t in zip(pairs, contingency_tables(x, domain, pairs)):
        p = t.values / t.values.sum()
        pa, pb = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
        nz = p > 0
        g.add_edge(a, b, weight=float(np.sum(p[nz] * np.log(p[nz] / (pa @ pb)[nz]))))
    return [tuple(e) for e in nx.maximum_spanning_tree(g).edges()]


def adult_case(epsilon: float, seed: int) -> dict:
    """The exact tables, the released ones (seeded discrete Laplace, total ``epsilon``) and the
    data's 91 two-way marginals."""
    domain, x = adult_records()
    scopes = [(v,) for v in domain.variables] + chow_liu_edges(domain, x)
    exact = contingency_tables(x, domain, scopes)
    ys = LaplaceMechanism(epsilon).measure(exact, np.random.default_rng([seed, int(round(epsilon * 1000))]), n=float(len(x)))
    pairs = list(combinations(domain.variables, 2))
    truth = [Factor(t.variables, t.values / len(x)) for t in contingency_tables(x, domain, pairs)]
    return {"domain": domain, "N": float(len(x)), "scopes": scopes, "exact": exact, "ys": ys, "pairs": pairs,
            "truth": truth}


def workload_tv(model, pairs, truth) -> float:
    """Mean total variation between the model's and the data's two-way marginals."""
    cal = infer(model)
    return float(np.mean([0.5 * np.abs(cal.marginal(p).values - t.values).sum() for p, t in zip(pairs, truth)]))
