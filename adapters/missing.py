"""pgmpy estimators for records with missing values, and Markov networks fitted from records.

``bn.fit(df, estimator=MissingValuesEM())`` learns a ``DiscreteBayesianNetwork``'s CPTs by EM over the
missing cells (NaN / None / pandas NA) instead of dropping the rows that have them;
``MarkovNetworkEstimator(mn).estimate(df)`` gives a ``DiscreteMarkovNetwork`` the potentials that
pgmpy cannot fit (maximum likelihood, or EM when cells are missing). The engine is ``ppgm.learners.missing``.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy.base import DAG
from pgmpy.factors.discrete import DiscreteFactor
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork
from pgmpy.parameter_estimator.base import DiscreteParameterEstimator

from ppgm.core import checks
from ppgm.factors.domain import Domain
from ppgm.learners.missing import em_bayesian, em_markov, fit_markov_records, fit_markov_tables
from ppgm.core.rng import as_generator

from .columns import bin_numeric
from .dask_backend import frame_blocks, is_dask
from .data import check_frame, check_known, check_rows, codes_or_unknown, fit_states
from .models import declared_states, markov_to_pgmpy, tabular_cpds


def _domain(nodes: Sequence, data: pd.DataFrame, declared: Mapping, given: Mapping) -> Domain:
    """States per node: ``state_names`` first, then the model's declared states, then the sorted values
    seen; a node seen nowhere (latent, or an all-missing column) must be declared."""
    states = {}
    read = fit_states(data, [v for v in nodes if v not in given and v not in declared and v in data.columns])
    for v in nodes:
        if v in given:
            states[v] = list(given[v])
        elif v in declared:
            states[v] = list(declared[v])
        elif v in data.columns:
            states[v] = read[v]
        else:
            states[v] = []
        if not states[v] and v in data.columns:
            raise ValueError(f"data: column {v!r} holds no value (every cell missing) and node {v!r} has no declared states; "
                             "declare them, e.g. state_names={" + repr(v) + ": [0, 1]}")
        if not states[v]:
            raise ValueError(f"state_names: node {v!r} is never observed (latent); "
                             "declare its states, e.g. state_names={" + repr(v) + ": [0, 1]}")
    return Domain(tuple(nodes), tuple(len(states[v]) for v in nodes), states)


def _records(data, dom: Domain):
    """The engine's input: codes of a pandas DataFrame, or of a Dask DataFrame's partitions as blocks
    (encoded where they live; the E-steps then reduce over them)."""
    if is_dask(data):
        return frame_blocks(data, lambda part: _codes(part, dom), "partitions of the data")
    return _codes(data, dom)


def _check_rows(data) -> None:
    check_frame(data, "data", dask=True)
    check_rows(data, "data", fit=True)


def _codes(data: pd.DataFrame, dom: Domain) -> np.ndarray:
    """Codes with -1 for a missing cell (NaN, None, pandas NA) and for a node absent from the data
    (latent); a value that is not among its node's states is an error."""
    frame = data.reindex(columns=list(dom.variables))  # absent nodes: all missing
    codes = codes_or_unknown(frame, dom)
    check_known(frame, dom, codes, "data", missing_ok=True)
    return codes


class MissingValuesEM(DiscreteParameterEstimator):
    """CPTs of a known DAG from a DataFrame with missing cells, by EM (exact E-step on the junction tree).

    Use it as any pgmpy parameter estimator: ``bn.fit(df, estimator=MissingValuesEM())``. Unlike
    pgmpy 1.1.2's ``ExpectationMaximization``, which drops every row with a missing cell in an observed
    column, every row counts: its missing cells are filled by their posterior under the current CPTs.
    Nodes absent from the data (or never observed) are latent; declare their states in ``state_names``.
    The answer is right when values are missing at random (whether a cell is missing may depend on
    the row's observed values, not on the missing value itself): see ``ppgm.learners.missing``.

    Parameters
    ----------
    pseudo_count : float
        Added to every expected count of every CPT (0: maximum likelihood).
    max_iter : int
    tol : float
        EM stops when the objective's relative change is below ``tol``; at ``max_iter`` it warns.
    seed : int or numpy.random.Generator
        Starting CPTs of latent nodes (same seed, same CPTs).
    progress : bool
    state_names : dict, optional
        ``{node: states}``; other nodes take the model's declared states or the sorted values seen.
        A numeric column takes an object instead (``{"bins": 10}``, ``{"min": 0, "max": 90, "edges":
        [...]}``, ``{}``: :func:`ppgm.adapters.columns.bin_numeric`): its CPTs are over its bins.

    Attributes
    ----------
    parameters_ : list of TabularCPD
    history_ : list of dict
        Per EM iteration: ``log_likelihood`` (observed cells), ``objective``, ``change``.
    converged_ : bool
    log_likelihood_ : float
    state_names_ : dict

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example, sample
    >>> asia = load_bif_example("asia")
    >>> df = sample(asia, 3000, seed=0)
    >>> df.loc[df.index % 4 == 0, "either"] = None              # a quarter of one column missing
    >>> est = MissingValuesEM(progress=False).fit(asia, df)
    >>> len(est.parameters_), est.converged_
    (8, True)
    """

    _tags = {
        "supported_model_types": (DAG, DiscreteBayesianNetwork),
        "supports_latent_variables": True,
        "supports_weighted_data": False,
        "supports_missing_data": True,
    }

    def __init__(self, pseudo_count: float = 1.0, max_iter: int = 200, tol: float = 1e-8, seed=0, progress: bool = True,
                 state_names: dict | None = None) -> None:
        self.pseudo_count = pseudo_count
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.progress = progress
        super().__init__(state_names=state_names)

    def fit(self, model, data, sample_weight=None):
        """Estimate the CPTs of ``model``'s DAG from ``data`` (pgmpy calls this from ``bn.fit``).

        Parameters
        ----------
        model : DiscreteBayesianNetwork or DAG
        data : pandas.DataFrame or dask.dataframe.DataFrame
            A column per observed node; missing cells as NaN, None or pandas NA. A Dask DataFrame's
            partitions stay on the workers: each E-step is a reduction over them.
        sample_weight : None
            Weighted rows are not supported.

        Returns
        -------
        MissingValuesEM
            ``self``, with ``parameters_``, ``history_``, ``converged_``, ``log_likelihood_``.

        Raises
        ------
        TypeError, ValueError
            Not a DataFrame or a DAG, no rows, values outside the states, a latent node without
            declared states, bad settings.

        Examples
        --------
        >>> from ppgm.adapters import load_bif_example, sample
        >>> asia = load_bif_example("asia")
        >>> df = sample(asia, 2000, seed=0).drop(columns=["either"])   # "either" latent
        >>> est = MissingValuesEM(progress=False, max_iter=5, state_names={"either": ["no", "yes"]})
        >>> import warnings; warnings.simplefilter("ignore")
        >>> len(est.fit(asia, df).parameters_)
        8
        """
        if sample_weight is not None:
            raise ValueError("sample_weight: weighted rows are not supported by MissingValuesEM")
        if not isinstance(model, DAG):
            raise TypeError(f"model: expected a pgmpy DiscreteBayesianNetwork or DAG, got {type(model).__name__}")
        _check_rows(data)
        for name in ("max_iter",):
            checks.count(getattr(self, name), name)
        checks.non_negative(self.pseudo_count, "pseudo_count", checks.MAX_PENALTY)
        checks.positive(self.tol, "tol")
        checks.flag(self.progress, "progress")
        as_generator(self.seed)
        unknown = [c for c in data.columns if c not in model.nodes()]
        if unknown:
            raise ValueError(f"data: columns {unknown} are not nodes of the model")
        nodes = list(model.nodes())
        declared = declared_states(model) if isinstance(model, DiscreteBayesianNetwork) else {}
        data, names, self.schema_ = bin_numeric(data, self.state_names) if not is_dask(data) else (data, self.state_names, None)
        dom = _domain(nodes, data, declared, checks.state_names(names))
        parents = {v: tuple(model.get_parents(v)) for v in nodes}
        res = em_bayesian(dom, parents, _records(data, dom), pseudo_count=self.pseudo_count, max_iter=self.max_iter,
                          tol=self.tol, seed=self.seed, progress=self.progress)
        self._model = model
        self.state_names_ = {v: list(dom.state_names[v]) for v in nodes}
        self.history_ = res.history
        self.converged_ = res.converged
        self.log_likelihood_ = res.log_likelihood
        self.parameters_ = self._sort_parameters(tabular_cpds(res.model))
        return self


def _model_cliques(model: DiscreteMarkovNetwork) -> list[tuple]:
    factors = list(model.get_factors())
    return [tuple(f.variables) for f in factors] if factors else [tuple(e) for e in model.edges()]


class MarkovNetworkEstimator:
    """Potentials of a ``DiscreteMarkovNetwork`` from records (pgmpy's ``DiscreteMarkovNetwork`` has no
    ``fit``): maximum likelihood on the tables of its factors' scopes (or its edges when it has no
    factors yet), by the same Newton / L-BFGS fit the private learners use; EM over missing cells.

    Parameters
    ----------
    model : DiscreteMarkovNetwork
        Its factors' scopes are the cliques fitted (its edges when it has none); its declared states
        are kept.

    Examples
    --------
    >>> import ppgm.adapters as pa
    >>> mn = pa.dirichlet_chain_network(5, 2, seed=0)
    >>> fitted = MarkovNetworkEstimator(mn).estimate(pa.sample(mn, 5000, seed=1), progress=False)
    >>> fitted.check_model()
    True
    """

    def __init__(self, model: DiscreteMarkovNetwork) -> None:
        if not isinstance(model, DiscreteMarkovNetwork):
            raise TypeError(f"model: expected a pgmpy DiscreteMarkovNetwork, got {type(model).__name__}")
        self.model = model
        self.cliques = _model_cliques(model)
        if not self.cliques:
            raise ValueError("model: the DiscreteMarkovNetwork has neither factors nor edges to fit")

    def estimate(self, data: pd.DataFrame, l2: float = 0.0, pseudo_count: float = 1.0, max_iter: int = 200,
                 tol: float = 1e-8, seed=0, progress: bool = True, state_names: Mapping | None = None) -> DiscreteMarkovNetwork:
        """Fit the potentials to ``data``: one maximum-likelihood fit when it is complete, EM when cells
        are missing (NaN / None / NA) or nodes are absent (latent).

        Parameters
        ----------
        data : pandas.DataFrame or dask.dataframe.DataFrame
            A Dask DataFrame is read by EM's reductions over its partitions (one E-step when complete).
        l2 : float
            Weight of ``l2 ||theta||^2`` per record.
        pseudo_count : float
            Records spread uniformly over every table (keeps potentials finite where a cell is unseen).
        max_iter, tol
            EM's limits (``ppgm.learners.missing.em_markov``); unused on complete data.
        seed : int or numpy.random.Generator
            Starting potentials of latent nodes.
        progress : bool
        state_names : mapping, optional
            ``{node: states}``; a numeric column takes an object instead (``{"bins": 10}``,
            :func:`ppgm.adapters.columns.bin_numeric`), and its factors are over its bins.

        Returns
        -------
        DiscreteMarkovNetwork
            With ``history_`` (EM's, or the fit's trace), ``converged_`` set on the estimator.

        Examples
        --------
        >>> import ppgm.adapters as pa
        >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
        >>> df = pa.sample(mn, 3000, seed=1)
        >>> df.loc[::5, "X1"] = None
        >>> est = MarkovNetworkEstimator(mn)
        >>> _ = est.estimate(df, progress=False); est.converged_
        True
        """
        _check_rows(data)
        checks.flag(progress, "progress")
        l2 = checks.non_negative(l2, "l2", checks.MAX_PENALTY)
        pseudo_count = checks.non_negative(pseudo_count, "pseudo_count", checks.MAX_PENALTY)
        max_iter, tol = checks.count(max_iter, "max_iter"), checks.positive(tol, "tol")
        as_generator(seed)
        unknown = [c for c in data.columns if c not in self.model.nodes()]
        if unknown:
            raise ValueError(f"data: columns {unknown} are not nodes of the model")
        nodes = list(self.model.nodes())
        data, state_names, self.schema_ = bin_numeric(data, state_names) if not is_dask(data) else (data, state_names, None)
        dom = _domain(nodes, data, declared_states(self.model), checks.state_names(state_names))
        codes = _records(data, dom)
        if not is_dask(data) and (codes >= 0).all():
            fit = fit_markov_records(dom, self.cliques, codes, l2=l2, pseudo_count=pseudo_count)
            self.history_, self.converged_ = fit.history, fit.converged
            return markov_to_pgmpy(fit.model)
        res = em_markov(dom, self.cliques, codes, l2=l2, pseudo_count=pseudo_count, max_iter=max_iter, tol=tol, seed=seed,
                        progress=progress)
        self.history_, self.converged_ = res.history, res.converged
        return markov_to_pgmpy(res.model)

    def estimate_from_tables(self, tables: Sequence[DiscreteFactor], l2: float = 0.0, pseudo_count: float = 1.0) -> DiscreteMarkovNetwork:
        """Fit the potentials to exact count tables (e.g. ``ppgm.adapters.contingency_tables``), for users who
        hold counts rather than records: one table per clique, consistent totals.

        Parameters
        ----------
        tables : list of DiscreteFactor
            Non-negative counts over exactly the model's cliques, state names as the model's.
        l2, pseudo_count
            As :meth:`estimate`.

        Returns
        -------
        DiscreteMarkovNetwork

        Examples
        --------
        >>> import ppgm.adapters as pa
        >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
        >>> tabs = pa.contingency_tables(pa.sample(mn, 3000, seed=1), [f.variables for f in mn.get_factors()])
        >>> MarkovNetworkEstimator(mn).estimate_from_tables(tabs).check_model()
        True
        """
        if not isinstance(tables, (list, tuple)) or not all(isinstance(t, DiscreteFactor) for t in tables):
            raise TypeError("tables: expected a list of pgmpy DiscreteFactor count tables")
        tables = list(tables)
        by_scope = {frozenset(t.variables): t for t in tables}
        want = {frozenset(c) for c in self.cliques}
        if set(by_scope) != want or len(tables) != len(self.cliques):
            raise ValueError(f"tables: expected one table per clique of the model {[list(c) for c in self.cliques]}, "
                             f"got {[list(t.variables) for t in tables]}")
        states: dict = {}
        for t in tables:
            for v in t.variables:
                states.setdefault(v, list(t.state_names[v]))
        declared = declared_states(self.model)
        for v, s in states.items():
            if v in declared and list(declared[v]) != s:
                raise ValueError(f"tables: variable {v!r} has states {s}, the model declares {list(declared[v])}")
        nodes = [v for v in self.model.nodes() if v in states]
        if len(nodes) != len(self.model.nodes()):
            raise ValueError("tables: every node of the model must appear in a table")
        dom = Domain(tuple(nodes), tuple(len(states[v]) for v in nodes), states)
        targets, totals = [], []
        for c in self.cliques:
            t = by_scope[frozenset(c)]
            vals = np.asarray(t.values, dtype=float)
            if not np.all(np.isfinite(vals)) or (vals < 0).any():
                raise ValueError(f"tables: the table over {list(t.variables)} must hold non-negative finite counts")
            vals = np.transpose(vals, [list(t.variables).index(v) for v in c])
            totals.append(vals.sum())
            targets.append((c, vals))
        n = float(totals[0])
        if n <= 0 or not np.allclose(totals, n, rtol=1e-9):
            raise ValueError(f"tables: the tables must count the same positive number of records, got totals {totals}")
        return markov_to_pgmpy(fit_markov_tables(dom, self.cliques, [v for _, v in targets], l2, pseudo_count).model)
