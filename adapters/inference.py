"""A drop-in for pgmpy's ``BeliefPropagation``, backed by ppgm's log-space junction tree."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Hashable, Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy import config
from pgmpy.factors.discrete import DiscreteFactor, TabularCPD

from ppgm.core import checks
from ppgm.models.bayes import BayesianNetwork
from ppgm.factors.factor import Factor
from ppgm.inference.evidence import row_marginals
from ppgm.inference.junction_tree import DEFAULT_MAX_CELLS, Calibration, JunctionTree
from ppgm.models.markov import MarkovNetwork

from .dask_backend import is_dask
from .data import check_frame, check_known, codes_or_unknown, state_codes
from .models import to_engine

CHUNK_ROWS = 2**16  # rows of a DataFrame encoded and answered at once by query_rows (bounded memory)


def _state_maps(states) -> tuple:
    """A variable's state names and pgmpy's two lookups (name -> number, number -> name)."""
    names = list(states)
    return names, {n: i for i, n in enumerate(names)}, dict(enumerate(names))


def _direct_factor(variables: tuple, values: np.ndarray, maps: dict) -> DiscreteFactor:
    """The ``DiscreteFactor`` that pgmpy's constructor would make from a table the engine has already
    checked, with its attributes set directly: the constructor's checks and state-name maps cost
    ~10 us a factor, as much as the query itself. Fresh containers and a copy of the values, as the
    constructor makes, so that users may change the factor freely."""
    out = DiscreteFactor.__new__(DiscreteFactor)
    out.variables = list(variables)
    out.cardinality = np.array(values.shape, dtype=int)
    out.values = np.array(values, dtype=float)
    out.state_names = {v: list(maps[v][0]) for v in variables}
    out.name_to_no = {v: dict(maps[v][1]) for v in variables}
    out.no_to_name = {v: dict(maps[v][2]) for v in variables}
    return out


_DIRECT_OK: list = []  # filled once: whether _direct_factor reproduces this pgmpy's constructor


def _direct_factors_ok() -> bool:
    """Whether factors may be made by :func:`_direct_factor`: pgmpy on its numpy float64 backend, and a
    probe factor made both ways with the same attributes (a pgmpy release that stores something else
    falls back to its constructor)."""
    if config.BACKEND != "numpy" or np.dtype(config.get_dtype()) != np.float64:
        return False
    if not _DIRECT_OK:
        names = {"a": ["x", "y"], "b": [0, 1, 2]}
        made = DiscreteFactor(["a", "b"], [2, 3], np.arange(6.0), state_names=names)
        direct = _direct_factor(("a", "b"), np.arange(6.0).reshape(2, 3), {v: _state_maps(s) for v, s in names.items()})
        a, b = vars(made), vars(direct)
        same = set(a) == set(b) and all(
            type(a[k]) is type(b[k]) and (a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k])
            for k in a
        )
        _DIRECT_OK.append(bool(same))
    return _DIRECT_OK[0]


class LogBeliefPropagation:
    """Exact inference for pgmpy models with the interface of ``pgmpy.inference.BeliefPropagation``.

    The junction tree is built once, in ``__init__``; each distinct evidence set is calibrated once
    (in log space, so tiny or huge potentials are fine) and cached. Beliefs and query answers are
    normalised ``DiscreteFactor`` objects that keep the model's state names.

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
        self._state_maps: dict | None = None
        self._max_cells = max_cells
        self._trees: dict = {}  # junction trees that hold a joint query's scope, and each tree's flat log-potentials

    # -- calibration -------------------------------------------------------------------------
    def _evidence_key(self, evidence: Mapping | None, virtual_evidence=None) -> tuple:
        """A hashable key of the hard evidence (variable, state code) and the virtual evidence
        (variable, likelihood of each state in the domain's order)."""
        evidence = checks.mapping(evidence, "evidence")
        hard = []
        for var, state in evidence.items():
            if var not in self.domain:
                raise ValueError(f"evidence: unknown variable {var!r}; the model has {list(self.domain.variables)}")
            states = list(self.domain.state_names[var])
            # states are named, never indexed: with states 1, 2, 3 the evidence 0 is an error, not the first state
            matches = [i for i, s in enumerate(states) if s == state and type(s) is not bool and type(state) is not bool]
            if not matches:
                raise ValueError(f"evidence: {state!r} is not a state of {var!r}; its states are {states}")
            hard.append((var, matches[0]))
        soft = self._virtual_key(virtual_evidence, set(evidence))
        if not hard and not soft:
            return ()
        return (tuple(sorted(hard, key=lambda kv: self.domain.index(kv[0]))), soft)

    def _virtual_key(self, virtual_evidence, observed: set) -> tuple:
        """pgmpy's virtual evidence: a list of single-variable ``TabularCPD`` objects whose values are the
        likelihood of the observation under each state of the variable (each in [0, 1])."""
        if virtual_evidence is None:
            return ()
        if isinstance(virtual_evidence, TabularCPD) or not isinstance(virtual_evidence, (list, tuple)):
            raise TypeError(f"virtual_evidence: expected a list of single-variable TabularCPDs, got {type(virtual_evidence).__name__}")
        out, seen = [], set()
        for cpd in virtual_evidence:
            if not isinstance(cpd, TabularCPD) or len(cpd.variables) != 1:
                raise TypeError(f"virtual_evidence: expected single-variable TabularCPDs, got {cpd!r:.60}")
            var = cpd.variables[0]
            if var not in self.domain or var in seen or var in observed:
                why = "is not in the model" if var not in self.domain else "is given twice" if var in seen else "is also hard evidence"
                raise ValueError(f"virtual_evidence: variable {var!r} {why}")
            seen.add(var)
            values = np.asarray(cpd.values, dtype=float).ravel()
            names = list(cpd.state_names.get(var, range(values.size))) if cpd.state_names else list(range(values.size))
            states = list(self.domain.state_names[var])
            if len(names) != len(states) or set(map(str, names)) != set(map(str, states)):
                raise ValueError(f"virtual_evidence: {var!r} has states {names}; the model's are {states}")
            if not np.all(np.isfinite(values)) or (values < 0).any() or (values > 1).any() or not (values > 0).any():
                raise ValueError(f"virtual_evidence: the likelihoods of {var!r} must lie in [0, 1], not all zero")
            pos = {str(n): i for i, n in enumerate(names)}
            out.append((var, tuple(float(values[pos[str(s)]]) for s in states)))
        return tuple(sorted(out, key=lambda kv: self.domain.index(kv[0])))

    def _with_evidence(self, key: tuple) -> MarkovNetwork:
        """The engine model times the evidence's indicator and likelihood factors."""
        if not key:
            return self.engine_model
        hard, soft = key
        factors = list(self.engine_model.factors)
        for var, code in hard:
            ind = np.full(self.domain.card(var), -np.inf)
            ind[code] = 0.0
            factors.append(Factor((var,), ind))
        with np.errstate(divide="ignore"):
            factors += [Factor((var,), np.log(np.asarray(lik))) for var, lik in soft]
        return MarkovNetwork(self.domain, factors)

    def _calibration(self, key: tuple) -> Calibration:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            cal = self.junction_tree.calibrate(self._with_evidence(key))
        except ValueError:
            if not key:
                raise
            raise ValueError(f"evidence: {dict(key[0])} (with the virtual evidence) has probability zero under the model") from None
        self._cache[key] = cal
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return cal

    def calibrate(self) -> None:
        """Calibrate the junction tree without evidence (queries do it on demand; this only warms the cache).

        Returns
        -------
        None

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> bp = LogBeliefPropagation(load_bif_example("asia")); bp.calibrate()
        """
        self._calibration(())

    # -- pgmpy-shaped accessors -----------------------------------------------------------------
    def _to_pgmpy(self, f: Factor) -> DiscreteFactor:
        if not _direct_factors_ok():
            return DiscreteFactor(list(f.variables), list(f.shape), f.values,
                                  state_names={v: list(self.domain.state_names[v]) for v in f.variables})
        maps = self._state_maps
        if maps is None:
            maps = self._state_maps = {v: _state_maps(self.domain.state_names[v]) for v in self.domain.variables}
        return _direct_factor(f.variables, f.values, maps)

    def get_cliques(self) -> list[tuple]:
        """The junction tree's cliques, as pgmpy's ``BeliefPropagation.get_cliques``.

        Returns
        -------
        list of tuple
            The variables of each clique.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> len(LogBeliefPropagation(load_bif_example("asia")).get_cliques())
        6
        """
        return list(self.junction_tree.cliques)

    def get_clique_beliefs(self) -> dict:
        """The normalised marginal of every clique (no evidence), as pgmpy's ``get_clique_beliefs``.

        Returns
        -------
        dict
            ``{clique (tuple of variables): DiscreteFactor}``, each summing to one.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> beliefs = LogBeliefPropagation(load_bif_example("asia")).get_clique_beliefs()
        >>> all(abs(f.values.sum() - 1) < 1e-12 for f in beliefs.values())
        True
        """
        cal = self._calibration(())
        return {f.variables: self._to_pgmpy(f) for f in cal.clique_marginals()}

    def get_sepset_beliefs(self) -> dict:
        """The normalised marginal of every separator (no evidence), as pgmpy's ``get_sepset_beliefs``.

        Returns
        -------
        dict
            ``{frozenset((clique_a, clique_b)): DiscreteFactor}``.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> seps = LogBeliefPropagation(load_bif_example("asia")).get_sepset_beliefs()
        >>> len(seps)
        5
        """
        cal = self._calibration(())
        t = self.junction_tree
        return {
            frozenset((t.cliques[a], t.cliques[b])): self._to_pgmpy(f) for (a, b), f in cal.separator_marginals().items()
        }

    def query(
        self,
        variables: Sequence[Hashable],
        evidence: Mapping | None = None,
        virtual_evidence: Sequence[TabularCPD] | None = None,
        joint: bool = True,
        show_progress: bool = False,
    ):
        """P(variables | evidence) as a normalised ``DiscreteFactor`` (``joint=False``: a dict of
        single-variable factors), as pgmpy's ``BeliefPropagation.query``.

        Parameters
        ----------
        variables : list
            Query variables (not among the evidence).
        evidence : dict, optional
            ``{variable: state name}`` observed.
        virtual_evidence : list of TabularCPD, optional
            Soft evidence as in pgmpy: one single-variable ``TabularCPD`` per variable, whose values
            are the likelihood of the observation under each state.
        joint : bool
        show_progress : bool
            Accepted for pgmpy compatibility (calibration is a single pass).

        Returns
        -------
        DiscreteFactor or dict

        Raises
        ------
        ValueError
            Unknown or repeated variables, states that are not the model's, evidence of probability zero.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> bp = LogBeliefPropagation(load_bif_example("asia"))
        >>> round(float(bp.query(["lung"], evidence={"smoke": "yes"}).values[0]), 3)
        0.1
        """
        checks.flag(joint, "joint")
        checks.flag(show_progress, "show_progress")
        if isinstance(variables, (str, bytes)) or not isinstance(variables, (list, tuple, set)):
            variables = [variables]
        variables = self.domain.check(checks.names(list(variables), "variables"), "variables")
        if evidence is None and virtual_evidence is None:  # the common case: the cached calibration without evidence
            cal = self._calibration(())
        else:
            evidence = checks.mapping(evidence, "evidence")
            both = set(variables) & set(evidence)
            if both:
                raise ValueError(f"variables and evidence share {sorted(map(str, both))}")
            cal = self._calibration(self._evidence_key(evidence, virtual_evidence))
        if joint:
            return self._to_pgmpy(cal._marginal(variables))
        return {v: self._to_pgmpy(cal._marginal((v,))) for v in variables}

    def map_query(
        self,
        variables: Sequence[Hashable] | None = None,
        evidence: Mapping | None = None,
        virtual_evidence: Sequence[TabularCPD] | None = None,
        show_progress: bool = False,
    ) -> dict:
        """The most probable states of ``variables`` given the evidence, as pgmpy's ``map_query``.

        For every unobserved variable (``variables=None``) it is the most probable configuration, by
        max-sum on the junction tree; for a subset it is the mode of their joint marginal (the others
        summed out), as pgmpy's ``VariableElimination.map_query``.

        Parameters
        ----------
        variables : list, optional
            The variables to report (default: every variable not in the evidence).
        evidence : dict, optional
            ``{variable: state name}`` observed.
        virtual_evidence : list of TabularCPD, optional
            Soft evidence, as in :meth:`query`.
        show_progress : bool
            Accepted for pgmpy compatibility.

        Returns
        -------
        dict
            ``{variable: state name}``.

        Raises
        ------
        ValueError
            Unknown variables, states that are not the model's, evidence of probability zero.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> bp = LogBeliefPropagation(load_bif_example("asia"))
        >>> bp.map_query(["lung", "tub"], evidence={"xray": "yes"})
        {'lung': 'yes', 'tub': 'no'}
        """
        checks.flag(show_progress, "show_progress")
        evidence = checks.mapping(evidence, "evidence")
        key = self._evidence_key(evidence, virtual_evidence)
        if variables is None:
            variables = [v for v in self.domain.variables if v not in evidence]
        if isinstance(variables, (str, bytes)) or not isinstance(variables, (list, tuple, set)):
            variables = [variables]
        variables = list(checks.names(list(variables), "variables"))
        self.domain.check(variables, "variables")
        if set(variables) & set(evidence):
            raise ValueError(f"variables and evidence share {sorted(map(str, set(variables) & set(evidence)))}")
        names = self.domain.state_names
        if set(variables) | set(evidence) == set(self.domain.variables):
            try:
                codes, _ = self.junction_tree.max_configuration(self._with_evidence(key))
            except ValueError:
                raise ValueError("evidence: has probability zero under the model") from None
            return {v: names[v][int(codes[self.domain.index(v)])] for v in variables}
        m = self._calibration(key).marginal(variables)
        flat = np.unravel_index(int(np.argmax(m.values)), m.values.shape)
        return {v: names[v][int(c)] for v, c in zip(m.variables, flat)}

    def log_partition_function(self, evidence: Mapping | None = None, virtual_evidence: Sequence[TabularCPD] | None = None) -> float:
        """log Z of the model; for a Bayesian network with ``evidence``, log P(evidence).

        Parameters
        ----------
        evidence : dict, optional
            ``{variable: state name}`` observed.
        virtual_evidence : list of TabularCPD, optional
            Soft evidence, as in :meth:`query`: its likelihoods multiply in.

        Returns
        -------
        float

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example
        >>> round(LogBeliefPropagation(load_bif_example("asia")).log_partition_function({"smoke": "yes"}), 4)
        -0.6931
        """
        return self._calibration(self._evidence_key(evidence, virtual_evidence)).log_z

    # -- many rows at once ------------------------------------------------------------------------
    def _row_codes(self, data: pd.DataFrame) -> np.ndarray:
        """Codes (-1 where a cell is empty or the column absent) of a DataFrame whose columns are model variables."""
        dom = self.domain
        codes = np.full((len(data), len(dom)), -1, dtype=np.int64)
        for j, v in enumerate(dom.variables):
            if v in data.columns:  # each distinct value looked up once, by the rule of ``state_codes``
                col = data[v]
                at, uniques = pd.factorize(col.astype(object) if isinstance(col.dtype, pd.CategoricalDtype) else col)
                if len(uniques):
                    lut = state_codes(pd.Series(np.asarray(uniques, dtype=object), dtype=object), dom.state_names[v])
                    codes[:, j] = np.where(at >= 0, lut[np.maximum(at, 0)], -1)
        unknown = (codes < 0) & data.reindex(columns=list(dom.variables)).notna().to_numpy()
        if unknown.any():
            frame = data.reindex(columns=list(dom.variables))
            check_known(frame, dom, codes_or_unknown(frame, dom), "data", missing_ok=True)
        return codes

    def _tree_for(self, scopes: list) -> tuple[JunctionTree, np.ndarray]:
        """The model's junction tree when it holds every scope, else one built with the scopes added
        (cached), and the model's flat log-potentials on it."""
        tree = self.junction_tree
        if any(tree.find_home(s) is None for s in scopes):
            key = frozenset(map(frozenset, scopes))
            if key not in self._trees:
                self._trees[key] = JunctionTree.build(self.domain, list(self.engine_model.scopes) + list(scopes),
                                                      max_cells=self._max_cells)
            tree = self._trees[key]
        psi_key = ("psi", id(tree))
        if psi_key not in self._trees:
            self._trees[psi_key] = np.concatenate([p.ravel() for p in tree._potentials(self.engine_model)])
        return tree, self._trees[psi_key]

    def query_rows(self, data, variables, joint: bool = False, chunk_rows: int = CHUNK_ROWS):
        """For every row of ``data``, the exact posterior of ``variables`` given that row's observed cells.

        An empty cell (NaN, None, pandas NA) or a model variable absent from the columns is unobserved;
        a variable observed in a row has the indicator of its value as posterior. Rows are answered
        together by the engine of the EM E-step (:func:`ppgm.inference.evidence.row_marginals`): the
        distinct rows once, each on the junction tree reduced to its unobserved cells (or, when that
        costs about as much, as a column of the full tree's calibration), ``chunk_rows`` rows at a time
        so that memory stays bounded. A row whose observed cells have probability zero gets a row of
        NaN: a ``RuntimeWarning`` says how many, and ``result.attrs["impossible_rows"]`` lists their labels.
        A Dask DataFrame is answered partition by partition (``map_partitions``), with the same values.

        Parameters
        ----------
        data : pandas.DataFrame or dask.dataframe.DataFrame
            Columns named by model variables (any subset), values among their states as written.
        variables : hashable or list
            One variable (columns: its states) or a list of them (columns: ``(variable, state)``).
        joint : bool
            With a list: the joint posterior instead, one column per combination of states (a
            MultiIndex with one level per variable, C order); a tree holding the scope is built once
            when no clique of the model's tree does.
        chunk_rows : int
            Rows encoded and answered at once.

        Returns
        -------
        pandas.DataFrame or dask.dataframe.DataFrame
            Indexed like ``data``; each row sums to one (or is NaN for impossible evidence).

        Raises
        ------
        ValueError
            Columns that are not model variables (named), values that are not their variable's states,
            unknown or repeated query variables.

        Examples
        --------
        >>> import pandas as pd
        >>> from ppgm.adapters import load_bif_example
        >>> bp = LogBeliefPropagation(load_bif_example("asia"))
        >>> rows = pd.DataFrame({"smoke": ["yes", "no", None], "xray": ["yes", None, "no"]})
        >>> bp.query_rows(rows, "lung").round(4)
              yes      no
        0  0.6460  0.3540
        1  0.0100  0.9900
        2  0.0012  0.9988
        >>> bp.query_rows(rows, ["lung", "smoke"]).columns.tolist()[:2]
        [('lung', 'yes'), ('lung', 'no')]
        """
        checks.flag(joint, "joint")
        chunk_rows = checks.count(chunk_rows, "chunk_rows")
        single = isinstance(variables, (str, bytes)) or not isinstance(variables, (list, tuple))
        names = [variables] if single else list(variables)
        if not names:
            raise ValueError("variables: expected at least one variable")
        names = list(self.domain.check(checks.names(names, "variables"), "variables"))
        check_frame(data, "data", dask=True)
        extra = [c for c in data.columns if c not in self.domain]
        if extra:
            raise ValueError(f"data: columns {extra} are not variables of the model; its variables are {list(self.domain.variables)}")
        states = self.domain.state_names
        if joint and not single:
            columns = pd.MultiIndex.from_product([list(states[v]) for v in names], names=names)
            scopes = [tuple(names)]
        elif single:
            columns = pd.Index(list(states[names[0]]))
            scopes = [(names[0],)]
        else:
            columns = pd.MultiIndex.from_tuples([(v, s) for v in names for s in states[v]], names=["variable", "state"])
            scopes = [(v,) for v in names]
        if is_dask(data):
            meta = pd.DataFrame(np.zeros((0, len(columns))), columns=columns, index=data._meta.index)
            return data.map_partitions(self._answer_rows, scopes, columns, chunk_rows, meta=meta)
        return self._answer_rows(data, scopes, columns, chunk_rows)

    def _answer_rows(self, data: pd.DataFrame, scopes: list, columns: pd.Index, chunk_rows: int = CHUNK_ROWS) -> pd.DataFrame:
        """:meth:`query_rows` on one pandas DataFrame (checked), in chunks of ``chunk_rows`` rows."""
        tree, psi = self._tree_for(scopes)
        out = np.empty((len(data), len(columns)))
        impossible = np.zeros(len(data), bool)
        for a in range(0, len(data), chunk_rows):
            codes = self._row_codes(data.iloc[a:a + chunk_rows])
            lz, marginals = row_marginals(tree, psi, codes, scopes)
            out[a:a + len(codes)] = np.concatenate(marginals, axis=1)
            impossible[a:a + len(codes)] = ~np.isfinite(lz)
        result = pd.DataFrame(out, index=data.index, columns=columns)
        if impossible.any():
            labels = data.index[impossible].tolist()
            warnings.warn(f"data: {len(labels)} of {len(data)} rows have observed cells of probability zero under the "
                          f"model (rows {labels[:5]}{' ...' if len(labels) > 5 else ''}); their posteriors are NaN",
                          RuntimeWarning, stacklevel=3)
            result.attrs["impossible_rows"] = labels
        return result
