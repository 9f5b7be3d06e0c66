"""Bounded contributions: how many records, or how much weight, one individual brings to a release.

Differential privacy protects individuals, and an individual may own many records (a person-day
cut into hourly records, a customer's purchases). The noise must cover the most one individual can
change the tables, and that bound must be public: read from the data, it is itself a disclosure and
unbounded (one person with 10,000 records would multiply the noise by 10,000 and reveal that such a
person exists). Two public bounds are offered, each a per-individual map applied before counting:

* :func:`keep_at_most` keeps a uniformly random subset of at most k records per individual
  (contribution bound k per table);
* :func:`reweight_by_individual` weights each of an individual's K records by 1 / K (contribution
  bound 1 per table; the CGM paper's choice for its mobility study).
"""

from __future__ import annotations

import numpy as np


def _group(individuals) -> tuple[np.ndarray, np.ndarray]:
    """Dense group ids (0 .. G-1) of every record and the group sizes."""
    ids = np.asarray(individuals)
    if ids.ndim != 1:
        raise ValueError(f"individuals: expected one identifier per record (1-D), got shape {ids.shape}")
    try:
        _, inverse, sizes = np.unique(ids, return_inverse=True, return_counts=True)
    except TypeError:  # mixed types that do not sort: group by their text
        _, inverse, sizes = np.unique(ids.astype(str), return_inverse=True, return_counts=True)
    return inverse.ravel(), sizes


def keep_at_most(individuals, max_contributions: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask keeping a uniformly random subset of at most ``max_contributions`` records of
    every individual (all of them when they have fewer).

    Vectorised: each record draws a random key, records are ranked by key within their individual,
    and ranks below the bound are kept. The keys are drawn in record order, so removing the last
    individual's records leaves every other individual's choice unchanged for a given generator.

    Parameters
    ----------
    individuals : array-like of shape (N,)
        Who each record belongs to.
    max_contributions : int
        The public bound k (>= 1).
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of bool

    Examples
    --------
    >>> mask = keep_at_most(["a", "a", "a", "b"], 2, np.random.default_rng(0))
    >>> int(mask[:3].sum()), bool(mask[3])
    (2, True)
    """
    k = _bound(max_contributions)
    group, _ = _group(individuals)
    keys = rng.random(group.size)
    order = np.lexsort((keys, group))
    sorted_groups = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, sorted_groups.size]))
    rank = np.empty(group.size, dtype=np.int64)
    rank[order] = np.arange(group.size) - first
    return rank < k


def reweight_by_individual(individuals) -> np.ndarray:
    """Weight 1 / K for each record of an individual with K records: every individual's weights sum
    to 1, so each contributes at most 1 to each table.

    Parameters
    ----------
    individuals : array-like of shape (N,)

    Returns
    -------
    numpy.ndarray of float

    Examples
    --------
    >>> reweight_by_individual(["a", "a", "b", "a"]).round(3).tolist()
    [0.333, 0.333, 1.0, 0.333]
    """
    group, sizes = _group(individuals)
    return 1.0 / sizes[group]


def _bound(max_contributions) -> int:
    if isinstance(max_contributions, bool) or not isinstance(max_contributions, (int, np.integer)) or max_contributions < 1:
        raise ValueError(f"max_contributions: expected a positive whole number of records per individual, got {max_contributions!r}")
    return int(max_contributions)
