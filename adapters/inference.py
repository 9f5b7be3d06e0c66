"""A drop-in for pgmpy's ``BeliefPropagation``, backed by ppgm's log-space junction tree."""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Mapping, Sequence

import numpy as np
from pgmpy.factors.discrete import DiscreteFactor

from ppgm import checks
from ppgm.bayes import BayesianNetwork
from ppgm.factor import Factor
from ppgm.junction_tree import DEFAULT_MAX_CELLS, Calibration, JunctionTree
from ppgm.markov import MarkovNetwork

from .models import to_engine


class LogBeliefPropagation:
    """Exact inference for pgmpy models with the interface of ``pgmpy.inference.BeliefPropagation``.

    The junction tree is built once, in ``__init__``; each distinct evidence set is calibrated once
    (in log space, so tiny or huge potentials are fine) and cached. Beliefs and query answers are
    normalised ``DiscreteFactor``s that keep the model's state names.

    Parameters
    ----------
    model : DiscreteMarkovNetwork or DiscreteBayesianNetwork
    max_cells : int or None
        Memory budget of the junction tree in table entries; a larger tree raises
        ``ppgm.JunctionTreeTooLarge`` (use ``ppgm.infer(..., method="loopy")`` for such graphs).
    cache_size : int
        How many evidence sets keep their calibration.

    Attributes
    ----------
    engine_model : ppgm.MarkovNetwork
        The model as the engine sees it (a Bayesian network is moralised, log-CPTs as potentials).
    junction_tree : ppgm.JunctionTree
        Built once and reused by every calibration.

    Examples
    --------
    >>> from pgmpy.models import DiscreteBayesianNetwork
    >>> from pgmpy.factors.discrete import TabularCPD
    >>> bn = DiscreteBayesianNetwork([("A", "B")])
    >>> bn.add_cpds(TabularCPD("A", 2, [[0.4], [0.6]]), TabularCPD("B", 2, [[0.9, 0.2], [0.1, 0.8]], ["A"], [2]))
    >>> bp = LogBeliefPropagation(bn)
    >>> bp.query(["B"]).values.round(2).tolist()
    [0.48, 0.52]
    >>> round(float(bp.query(["A"], evidence={"B": 1}).values[1]), 4)
    0.9231
    """

    def __init__(self, model, max_cells: int | None = DEFAULT_MAX_CELLS, cache_size: int = 32) -> None:
        if max_cells is not None:
            checks.count(max_cells, "max_cells")
        cache_size = checks.count(cache_size, "cache_size")
        self.model = model
        engine = to_engine(model)
        self.engine_model: MarkovNetwork = engine.to_markov() if isinstance(engine, BayesianNetwork) else engine
        self.domain = self.engine_model.domain
        self.junction_tree = JunctionTree.build(self.domain, self.engine_model.scopes, max_cells=max_cells)
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = max(int(cache_size), 1)

    # -- calibration -------------------------------------------------------------------------
    def _evidence_key(self, evidence: Mapping | None) -> tuple:
        evidence = checks.mapping(evidence, "evidence")
        if not evidence:
            return ()
        key = []
        for var, state in evidence.items():
            if var not in self.domain:
                raise ValueError(f"evidence: unknown variable {var!r}; the model has {list(self.domain.variables)}")
            states = list(self.domain.state_names[var])
            # states are named, never indexed: with states 1, 2, 3 the evidence 0 is an error, not the first state
            matches = [i for i, s in enumerate(states) if s == state and type(s) is not bool and type(state) is not bool]
            if not matches:
                raise ValueError(f"evidence: {state!r} is not a state of {var!r}; its states are {states}")
            key.append((var, matches[0]))
        return tuple(sorted(key, key=lambda kv: self.domain.index(kv[0])))

    def _calibration(self, key: tuple) -> Calibration:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        if not key:
            cal = self.junction_tree.calibrate(self.engine_model)
            self._cache[key] = cal
            return cal
        factors = list(self.engine_model.factors)
        for var, code in key:
            ind = np.full(self.domain.card(var), -np.inf)
            ind[code] = 0.0
            factors.append(Factor((var,), ind))
        try:
            cal = self.junction_tree.calibrate(MarkovNetwork(self.domain, factors))
        except ValueError:
            raise ValueError(f"evidence: {dict(key)} has probability zero under the model") from None
        self._cache[key] = cal
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return cal

    def calibrate(self) -> None:
        """Calibrate the junction tree (without evidence)."""
        self._calibration(())

    # -- pgmpy-shaped accessors -----------------------------------------------------------------
    def _to_pgmpy(self, f: Factor) -> DiscreteFactor:
        return DiscreteFactor(
            list(f.variables),
            list(f.shape),
            f.values,
            state_names={v: list(self.domain.state_names[v]) for v in f.variables},
        )

    def get_cliques(self) -> list[tuple]:
        """The junction tree's cliques, as tuples of variables."""
        return list(self.junction_tree.cliques)

    def get_clique_beliefs(self) -> dict:
        """``{clique: DiscreteFactor}`` normalised marginal of every clique."""
        cal = self._calibration(())
        return {f.variables: self._to_pgmpy(f) for f in cal.clique_marginals()}

    def get_sepset_beliefs(self) -> dict:
        """``{frozenset((clique_a, clique_b)): DiscreteFactor}`` normalised marginal of every separator."""
        cal = self._calibration(())
        t = self.junction_tree
        return {
            frozenset((t.cliques[a], t.cliques[b])): self._to_pgmpy(f) for (a, b), f in cal.separator_marginals().items()
        }

    def query(
        self,
        variables: Sequence[Hashable],
        evidence: Mapping | None = None,
        joint: bool = True,
        show_progress: bool = False,
    ):
        """P(variables | evidence) as a normalised ``DiscreteFactor`` (``joint=False``: a dict of
        single-variable factors). ``show_progress`` is accepted for pgmpy compatibility.
        """
        if isinstance(variables, (str, bytes)) or not isinstance(variables, (list, tuple, set)):
            variables = [variables]
        variables = list(checks.names(list(variables), "variables"))
        self.domain.check(variables, "variables")
        evidence = checks.mapping(evidence, "evidence")
        both = set(variables) & set(evidence)
        if both:
            raise ValueError(f"variables and evidence share {sorted(map(str, both))}")
        cal = self._calibration(self._evidence_key(evidence))
        if joint:
            return self._to_pgmpy(cal.marginal(variables))
        return {v: self._to_pgmpy(cal.marginal([v])) for v in variables}

    def log_partition_function(self, evidence: Mapping | None = None) -> float:
        """log Z of the model (for a Bayesian network with ``evidence``: log P(evidence))."""
        return self._calibration(self._evidence_key(evidence)).log_z
