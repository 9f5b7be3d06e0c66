"""Discrete Bayesian networks as CPT arrays in topological order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..factors.domain import Domain
from ..factors.factor import Factor
from ..factors.records import cell_index, check_records
from .markov import MarkovNetwork


@dataclass(frozen=True)
class BayesianNetwork:
    """A DAG with one conditional probability table per node.

    Parameters
    ----------
    domain : Domain
        The variables.
    parents : mapping
        ``{node: tuple of parents}``.
    cpts : mapping
        ``{node: array}`` of shape ``(*parent_cards, card)``: axis order = parents then the node,
        each row (last axis) summing to one (within 1e-6; rows are renormalised exactly, as published
        networks such as ALARM round their tables).

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> bn = BayesianNetwork(d, {"A": (), "B": ("A",)},
    ...                      {"A": np.array([0.3, 0.7]), "B": np.array([[0.9, 0.1], [0.2, 0.8]])})
    >>> bn.order
    ('A', 'B')
    """

    domain: Domain
    parents: Mapping
    cpts: Mapping
    order: tuple = field(init=False, compare=False)

    def __post_init__(self) -> None:
        parents = {v: tuple(self.parents.get(v, ())) for v in self.domain.variables}
        unknown = set(self.parents) - set(self.domain.variables)
        if unknown:
            raise ValueError(f"parents: unknown nodes {sorted(map(str, unknown))}")
        cpts = {}
        for v in self.domain.variables:
            self.domain.check(parents[v], f"parents[{v!r}]")
            if v not in self.cpts:
                raise ValueError(f"cpts: no table for node {v!r}")
            t = np.asarray(self.cpts[v], dtype=float)
            shape = self.domain.shape(parents[v] + (v,))
            if t.shape != shape:
                raise ValueError(f"cpts[{v!r}]: expected shape {shape} (parents {parents[v]}, then {v!r}), got {t.shape}")
            if np.isnan(t).any() or (t < 0).any():
                raise ValueError(f"cpts[{v!r}]: probabilities must be non-negative numbers")
            if not np.allclose(t.sum(axis=-1), 1.0, atol=1e-6):
                raise ValueError(f"cpts[{v!r}]: each row (last axis) must sum to 1")
            cpts[v] = t / t.sum(axis=-1, keepdims=True)  # remove rounding of published tables
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "cpts", cpts)
        object.__setattr__(self, "order", self._topological_order())

    def _topological_order(self) -> tuple:
        indeg = {v: len(p) for v, p in self.parents.items()}
        children: dict = {v: [] for v in self.domain.variables}
        for v, ps in self.parents.items():
            for p in ps:
                children[p].append(v)
        ready = [v for v in self.domain.variables if indeg[v] == 0]
        order = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for c in children[v]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(order) != len(self.domain):
            raise ValueError("parents: the graph has a directed cycle")
        return tuple(order)

    def cpt_factor(self, node) -> Factor:
        """The CPT of ``node`` as a factor over its parents and itself (probabilities, not logs).

        Parameters
        ----------
        node : hashable

        Returns
        -------
        Factor

        Examples
        --------
        >>> from ppgm.models.random_models import random_bayesian_network
        >>> bn = random_bayesian_network(3, 2, seed=0)
        >>> float(bn.cpt_factor("V0").values.sum())
        1.0
        """
        return Factor(self.parents[node] + (node,), self.cpts[node])

    def to_markov(self) -> MarkovNetwork:
        """The moralised Markov network with log-CPTs as potentials (its log Z is 0).

        Returns
        -------
        MarkovNetwork

        Examples
        --------
        >>> from ppgm.models.random_models import random_bayesian_network
        >>> bn = random_bayesian_network(3, 2, seed=0)
        >>> len(bn.to_markov().factors)
        3
        """
        with np.errstate(divide="ignore"):
            return MarkovNetwork(self.domain, [Factor(f.variables, np.log(f.values)) for f in map(self.cpt_factor, self.order)])

    def log_prob(self, records) -> np.ndarray:
        """log p(x) of every record (vectorised).

        Parameters
        ----------
        records : array of int, shape (N, len(domain))

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> from ppgm.models.random_models import random_bayesian_network
        >>> bn = random_bayesian_network(3, 2, seed=0)
        >>> bool(np.exp(bn.log_prob(np.array([[0, 0, 0], [1, 1, 1]]))).sum() <= 1.0)
        True
        """
        rec = check_records(records, self.domain)
        out = np.zeros(len(rec))
        with np.errstate(divide="ignore"):
            for v in self.order:
                f = self.cpt_factor(v)
                out += np.log(f.values.ravel()[cell_index(rec, self.domain.indices(f.variables), f.shape)])
        return out

    def joint_log_table(self, max_cells: int = 2**24) -> np.ndarray:
        """The full joint log-probability table (for tests on small networks).

        Parameters
        ----------
        max_cells : int
            Refuse joints larger than this.

        Returns
        -------
        numpy.ndarray
            One axis per variable, in domain order.

        Examples
        --------
        >>> from ppgm.models.random_models import random_bayesian_network
        >>> bn = random_bayesian_network(3, 2, seed=0)
        >>> round(float(np.exp(bn.joint_log_table()).sum()), 12)
        1.0
        """
        return self.to_markov().joint_log_table(max_cells)

    def with_cpts(self, cpts: Mapping) -> "BayesianNetwork":
        """The same DAG with other CPTs.

        Parameters
        ----------
        cpts : mapping
            ``{node: array (parent cards..., card)}``, rows summing to one.

        Returns
        -------
        BayesianNetwork

        Examples
        --------
        >>> from ppgm.models.random_models import random_bayesian_network
        >>> bn = random_bayesian_network(3, 2, seed=0)
        >>> bn.with_cpts({"V0": np.array([0.5, 0.5])}).cpts["V0"].tolist()
        [0.5, 0.5]
        """
        return BayesianNetwork(self.domain, self.parents, {**self.cpts, **cpts})

    def _with_normalised(self, cpts: Mapping) -> "BayesianNetwork":
        """:meth:`with_cpts` for every node's CPT, already of the right shapes and normalised (a learner's
        own M-step): the same network without re-validating the tables."""
        out = object.__new__(BayesianNetwork)
        for name, value in (("domain", self.domain), ("parents", self.parents), ("cpts", dict(cpts)), ("order", self.order)):
            object.__setattr__(out, name, value)
        return out
