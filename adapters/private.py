"""Differentially private clique tables for pgmpy users, and learning Markov networks from them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy.factors.discrete import DiscreteFactor
from pgmpy.models import DiscreteMarkovNetwork

from ppgm.cgm import cgm_em, naive_mle, population_size
from ppgm.domain import Domain
from ppgm.measurement import Measurement
from ppgm.mechanisms import GaussianMechanism, LaplaceMechanism, PrivacyAccountant
from ppgm.tables import contingency_tables as _engine_tables

from .data import clique_domain, encode
from .models import markov_to_pgmpy


@dataclass(frozen=True)
class NoisyFactor:
    """One released table: noisy counts over ``variables`` and the noise that produced them.

    Examples
    --------
    >>> f = NoisyFactor(("A",), np.array([4.2, 5.9]), {"A": ["no", "yes"]}, "laplace", 1.0)
    >>> f.to_measurement(n=10).variance
    2.0
    """

    variables: tuple
    values: np.ndarray
    state_names: dict
    noise: str
    scale: float

    def to_measurement(self, n: float | None = None) -> Measurement:
        return Measurement(self.variables, self.values, self.noise, self.scale, n)


@dataclass(frozen=True)
class NoisyTables:
    """The noisy clique tables of one release, usable without the records.

    Iterating yields :class:`NoisyFactor` objects (``.variables``, ``.values`` with axes in
    ``.variables`` order and states as in ``.state_names``, ``.noise``, ``.scale``).

    Attributes
    ----------
    n : float or None
        The record count when it was published with the tables.
    spent : dict
        What the release cost (``{"epsilon": ...}`` or ``{"rho": ...}``).

    Examples
    --------
    >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
    >>> [f.variables for f in t]
    [('A',)]
    """

    factors: tuple
    n: float | None = None
    spent: dict = field(default_factory=dict)

    def __iter__(self) -> Iterator[NoisyFactor]:
        return iter(self.factors)

    def __len__(self) -> int:
        return len(self.factors)

    @property
    def domain(self) -> Domain:
        names: dict = {}
        for f in self.factors:
            for v in f.variables:
                s = list(f.state_names[v])
                if v in names and names[v] != s:
                    raise ValueError(f"tables: variable {v!r} has states {names[v]} in one table and {s} in another")
                names[v] = s
        return Domain(tuple(names), tuple(len(s) for s in names.values()), names)

    def measurements(self) -> list[Measurement]:
        return [f.to_measurement(self.n) for f in self.factors]

    @classmethod
    def from_factors(cls, factors: Sequence[DiscreteFactor], noise: str, scale: float | Sequence[float],
                     n: float | None = None, spent: Mapping | None = None) -> "NoisyTables":
        """Tables released by someone else, as pgmpy ``DiscreteFactor``s of noisy counts."""
        scales = [scale] * len(factors) if np.isscalar(scale) else list(scale)
        if len(scales) != len(factors):
            raise ValueError(f"scale: expected one scale or {len(factors)}, got {len(scales)}")
        out = []
        for f, s in zip(factors, scales):
            names = {v: list(f.state_names[v]) if f.state_names and v in f.state_names else list(range(c))
                     for v, c in zip(f.variables, f.cardinality)}
            m = Measurement(tuple(f.variables), np.asarray(f.values, dtype=float), noise, s, n)  # validates
            out.append(NoisyFactor(m.variables, m.values, names, noise, m.scale))
        return cls(tuple(out), n, dict(spent or {}))

    def save(self, path) -> None:
        """Write the release to an ``.npz`` file (tables and metadata; no records)."""
        meta = {
            "n": self.n, "spent": self.spent,
            "factors": [{"variables": [_plain(v) for v in f.variables],
                         "state_names": {str(v): [_plain(s) for s in f.state_names[v]] for v in f.variables},
                         "noise": f.noise, "scale": f.scale} for f in self.factors],
        }
        arrays = {f"t{i}": f.values for i, f in enumerate(self.factors)}
        np.savez(Path(path), meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path) -> "NoisyTables":
        """Read a release written by :meth:`save`."""
        with np.load(Path(path), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            out = []
            for i, fm in enumerate(meta["factors"]):
                variables = tuple(fm["variables"])
                names = {v: fm["state_names"][str(v)] for v in variables}
                out.append(NoisyFactor(variables, z[f"t{i}"], names, fm["noise"], float(fm["scale"])))
        return cls(tuple(out), meta["n"], meta["spent"])


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def _cliques(cliques_or_model) -> list[tuple]:
    if isinstance(cliques_or_model, DiscreteMarkovNetwork):
        return [tuple(f.variables) for f in cliques_or_model.get_factors()] or [tuple(e) for e in cliques_or_model.edges()]
    return [tuple(c) for c in cliques_or_model]


def release_tables(
    data: pd.DataFrame,
    cliques_or_model,
    mechanism: LaplaceMechanism | GaussianMechanism,
    seed=None,
    state_names: Mapping | None = None,
    weights=None,
    individuals=None,
    accountant: PrivacyAccountant | None = None,
    publish_n: bool = False,
) -> NoisyTables:
    """Count the cliques' contingency tables in ``data`` and release them through ``mechanism``.

    Parameters
    ----------
    data : pandas.DataFrame
    cliques_or_model : sequence of cliques, or a pgmpy ``DiscreteMarkovNetwork`` (its factor scopes)
    mechanism : LaplaceMechanism or GaussianMechanism
    seed : int or numpy.random.Generator, optional
    state_names : mapping, optional
        States of each variable; default: the sorted values seen (which is itself a disclosure:
        pass the public state spaces for a strict guarantee).
    weights : array-like, optional
        Per-record weights (e.g. 1/K for a person with K records).
    individuals : array-like or column name, optional
        Who each record belongs to; the sensitivity then uses the largest total weight of one
        individual (default: the largest record weight, or 1).
    accountant : PrivacyAccountant, optional
        Charged for the release; an over-budget release raises ``BudgetExceeded`` and releases nothing.
    publish_n : bool
        Also publish the exact record count (not private: only when N is public anyway).

    Examples
    --------
    >>> df = pd.DataFrame({"A": [0, 1, 1, 0], "B": [1, 1, 0, 0]})
    >>> rel = release_tables(df, [("A", "B")], LaplaceMechanism(1.0), seed=0)
    >>> next(iter(rel)).scale, rel.spent
    (1.0, {'epsilon': 1.0})
    """
    cliques, dom = clique_domain(data, _cliques(cliques_or_model), state_names, "cliques_or_model")
    w = None if weights is None else np.asarray(weights, dtype=float)
    contribution = 1.0 if w is None else float(np.max(w))
    if individuals is not None:
        ids = data[individuals].to_numpy() if isinstance(individuals, str) else np.asarray(individuals)
        if len(ids) != len(data):
            raise ValueError(f"individuals: expected {len(data)} entries, got {len(ids)}")
        per = pd.Series(w if w is not None else np.ones(len(data))).groupby(ids).sum()
        contribution = float(per.max())
    tables = _engine_tables(encode(data, dom), dom, cliques, weights=w)
    ms = mechanism.release(tables, seed=seed, contribution=contribution, accountant=accountant,
                           n=float(len(data) if w is None else w.sum()) if publish_n else None)
    spent = mechanism.cost
    factors = tuple(NoisyFactor(m.variables, m.values, {v: list(dom.state_names[v]) for v in m.variables}, m.noise, m.scale)
                    for m in ms)
    return NoisyTables(factors, ms[0].n, spent)


class _NoisyTableEstimator:
    """Shared checks of the two estimators: the tables must cover the model's cliques exactly."""

    def __init__(self, model: DiscreteMarkovNetwork) -> None:
        if not isinstance(model, DiscreteMarkovNetwork):
            raise TypeError(f"model: expected a pgmpy DiscreteMarkovNetwork, got {type(model).__name__}")
        self.model = model

    def _inputs(self, noisy_tables) -> tuple[Domain, list[Measurement]]:
        if not isinstance(noisy_tables, NoisyTables):
            raise TypeError(f"noisy_tables: expected NoisyTables (see release_tables / NoisyTables.from_factors), got {type(noisy_tables).__name__}")
        cliques = {frozenset(c) for c in _cliques(self.model)}
        given = {frozenset(f.variables) for f in noisy_tables}
        if cliques - given:
            raise ValueError(f"noisy_tables: no table for the model's cliques {[sorted(map(str, c)) for c in cliques - given]}")
        if given - cliques:
            raise ValueError(f"noisy_tables: tables over {[sorted(map(str, c)) for c in given - cliques]} are not cliques of the model")
        dom = noisy_tables.domain
        missing = set(self.model.nodes()) - set(dom.variables)
        if missing:
            raise ValueError(f"noisy_tables: the model's variables {sorted(map(str, missing))} appear in no table")
        return dom, noisy_tables.measurements()


class NaiveMLEEstimator(_NoisyTableEstimator):
    """The CGM paper's baseline: noisy tables / N projected onto the simplex, then an L2-regularised
    maximum-likelihood fit. ``estimate(..., l2=...)`` takes the weight per record: default ``1 / N``
    (the paper's), or ``"calibrated"`` for one that grows with the noise (``ppgm.cgm.noise_calibrated_l2``:
    a fixed ``1 / N`` overfits the noise badly when it is large next to the counts).

    Examples
    --------
    >>> import ppgm.adapters as pa
    >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
    >>> rel = release_tables(pa.sample(mn, 2000, seed=1), mn, LaplaceMechanism(1.0), seed=2)
    >>> NaiveMLEEstimator(mn).estimate(rel).check_model(), NaiveMLEEstimator(mn).estimate(rel, l2="calibrated").check_model()
    (True, True)
    """

    def estimate(self, noisy_tables: NoisyTables, N: float | None = None, l2: float | str | None = None,
                 project: bool = True) -> DiscreteMarkovNetwork:
        dom, ms = self._inputs(noisy_tables)
        fit = naive_mle(dom, ms, N=N, l2=l2, project=project)
        self.history_ = fit.history
        self.N_ = population_size(ms) if N is None else float(N)
        return markov_to_pgmpy(fit.model)


class CGMEstimator(_NoisyTableEstimator):
    """EM for collective graphical models (Bernstein et al. 2017, Algorithm 2): learn the network's
    parameters from noisy tables by treating the true counts as latent. The arguments of
    ``estimate`` are those of ``ppgm.cgm.cgm_em`` (see its docstring for the defaults and what they
    were measured against): the L2 weights of the M-step and of the starting naive fit, the E-step
    solver and its noise model, the number of EM iterations; ``callback(iteration, network, record)``
    receives a pgmpy ``DiscreteMarkovNetwork``.

    Examples
    --------
    >>> import ppgm.adapters as pa
    >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
    >>> rel = release_tables(pa.sample(mn, 2000, seed=1), mn, LaplaceMechanism(1.0), seed=2)
    >>> est = CGMEstimator(mn)
    >>> est.estimate(rel, progress=False).check_model(), "objective" in est.history_[0]
    (True, True)
    """

    def estimate(self, noisy_tables: NoisyTables, N: float | None = None, l2: float | None = None, estep: str = "dual",
                 max_iter: int = 30, tol: float = 1e-6, progress: bool = True, init_l2: float | None = None,
                 moment_match: bool = True, rtol: float = 1e-4, callback=None) -> DiscreteMarkovNetwork:
        dom, ms = self._inputs(noisy_tables)
        res = cgm_em(dom, ms, N=N, l2=l2, estep=estep, max_iter=max_iter, tol=tol, progress=progress,
                     init_l2=init_l2, moment_match=moment_match, rtol=rtol,
                     callback=None if callback is None else (lambda i, m, rec: callback(i, markov_to_pgmpy(m), rec)))
        self.history_ = res.history
        self.N_ = res.N
        return markov_to_pgmpy(res.model)
