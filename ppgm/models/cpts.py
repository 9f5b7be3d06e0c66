"""Conditional probability tables of a fixed DAG: coordinates, counts and empirical estimates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..factors.domain import Domain
from ..factors.records import cell_index, check_records
from .bayes import BayesianNetwork


@dataclass(frozen=True)
class CPTLayout:
    """Where each conditional probability of a DAG lives in one flat vector.

    There is one coordinate per (node, parent configuration, state) for all states but the last,
    so a binary network has one coordinate per CPT row (the paper's ``m``). Nodes are in domain order.

    Parameters
    ----------
    domain : Domain
    parents : mapping
    n_configs : tuple of int
        Parent configurations per node.
    base : tuple of int
        First coordinate of each node.
    m : int
        Coordinates in all. Built by :meth:`build`.

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 3))
    >>> CPTLayout.build(d, {"A": (), "B": ("A",)}).m   # A: 1 row x 1, B: 2 rows x 2
    5
    """

    domain: Domain
    parents: Mapping
    n_configs: tuple  # parent configurations of each node
    base: tuple  # first coordinate of each node
    m: int

    @classmethod
    def build(cls, domain: Domain, parents: Mapping) -> "CPTLayout":
        """The layout of the DAG ``parents`` over ``domain`` (nodes without an entry have no parents).

        Parameters
        ----------
        domain : Domain
        parents : mapping
            ``{node: tuple of parents}``.

        Returns
        -------
        CPTLayout

        Raises
        ------
        ValueError
            Unknown variables.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3))
        >>> lay = CPTLayout.build(d, {"A": (), "B": ("A",)})
        >>> lay.m, lay.n_configs
        (5, (1, 2))
        """
        unknown = set(parents) - set(domain.variables)
        if unknown:
            raise ValueError(f"parents: unknown nodes {sorted(map(str, unknown))}")
        parents = {v: domain.check(parents.get(v, ()), f"parents[{v!r}]") for v in domain.variables}
        n_cfg = tuple(domain.size(parents[v]) for v in domain.variables)
        widths = [n * (k - 1) for n, k in zip(n_cfg, domain.cards)]
        base = tuple(int(b) for b in np.concatenate([[0], np.cumsum(widths)[:-1]])) if widths else ()
        return cls(domain, parents, n_cfg, base, int(sum(widths)))

    def configs(self, records: np.ndarray) -> np.ndarray:
        """The parent configuration of every node in every record (mixed radix over the parents).

        Parameters
        ----------
        records : numpy.ndarray of int, shape (N, len(domain))

        Returns
        -------
        numpy.ndarray of int, shape (N, len(domain))

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3))
        >>> lay = CPTLayout.build(d, {"A": (), "B": ("A",)})
        >>> lay.configs(np.array([[1, 2]])).tolist()
        [[0, 1]]
        """
        out = np.empty(records.shape, dtype=np.int32, order="F")
        for j, v in enumerate(self.domain.variables):
            ps = self.parents[v]
            out[:, j] = cell_index(records, self.domain.indices(ps), self.domain.shape(ps))
        return out

    def counts(self, records: np.ndarray, configs: np.ndarray, rows=None) -> list[np.ndarray]:
        """Counts of every (parent configuration, state) of every node.

        Parameters
        ----------
        records : numpy.ndarray of int
        configs : numpy.ndarray of int
            From :meth:`configs`.
        rows : array of int, optional
            Count only these records.

        Returns
        -------
        list of numpy.ndarray
            Per node, shape (parent configurations, states).

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3))
        >>> lay = CPTLayout.build(d, {"A": (), "B": ("A",)})
        >>> x = np.array([[0, 1], [1, 2], [1, 2]])
        >>> lay.counts(x, lay.configs(x))[1].tolist()
        [[0, 1, 0], [0, 0, 2]]
        """
        out = []
        for j, (v, k, n) in enumerate(zip(self.domain.variables, self.domain.cards, self.n_configs)):
            cfg = configs[:, j] if rows is None else configs[rows, j]
            x = records[:, j] if rows is None else records[rows, j]
            out.append(np.bincount(cfg * np.int64(k) + x, minlength=n * k).reshape(n, k))
        return out


def conditional_probabilities(counts: list[np.ndarray]) -> list[np.ndarray]:
    """Row-normalised counts; a parent configuration never seen gets the uniform row (as pgmpy's MLE)."""
    out = []
    for c in counts:
        c = np.asarray(c, dtype=float)
        tot = c.sum(axis=1, keepdims=True)
        out.append(np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), 1.0 / c.shape[1]))
    return out


def empirical_cpts(records, domain: Domain, parents: Mapping, rows=None) -> BayesianNetwork:
    """Maximum-likelihood CPTs of the DAG ``parents`` from integer ``records`` (optionally a subset of rows).

    Parameters
    ----------
    records : array of int, shape (N, len(domain))
    domain : Domain
    parents : mapping
        ``{node: tuple of parents}``.
    rows : array of int, optional
        Use only these records.

    Returns
    -------
    BayesianNetwork
        A parent configuration never seen gets the uniform row.

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> bn = empirical_cpts([[0, 0], [0, 1], [1, 1]], d, {"B": ("A",)})
    >>> bn.cpts["B"].tolist()
    [[0.5, 0.5], [0.0, 1.0]]
    """
    rec = check_records(records, domain)
    if rec.shape[0] == 0:
        raise ValueError("records: no records to estimate from")
    layout = CPTLayout.build(domain, parents)
    probs = conditional_probabilities(layout.counts(rec, layout.configs(rec), rows))
    cpts = {
        v: p.reshape(domain.shape(layout.parents[v]) + (domain.card(v),)) for v, p in zip(domain.variables, probs)
    }
    return BayesianNetwork(domain, layout.parents, cpts)
