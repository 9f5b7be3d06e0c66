"""MER / INI from pandas sample sets: one DataFrame per set, its columns naming what it observed."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Hashable, Iterable, Mapping, Sequence

import cvxpy as cp
import networkx as nx
import numpy as np
import pandas as pd
from pgmpy.factors.continuous import LinearGaussianCPD
from pgmpy.models import DiscreteMarkovNetwork, LinearGaussianBayesianNetwork

from ppgm.factors.domain import Domain
from ppgm.factors.factor import Factor
from ppgm.models.markov import MarkovNetwork
from ppgm.mer.program import ConvexProgram, MERResult
from ppgm.learners.mle import fit_marginals
from ppgm.mer.discrete import GRAPH_TOL as DISCRETE_GRAPH_TOL
from ppgm.mer.discrete import DiscreteMER
from ppgm.mer.gaussian import GRAPH_TOL as GAUSSIAN_GRAPH_TOL
from ppgm.mer.gaussian import GaussianMER
from ppgm.mer.sample_sets import SampleSet, pooled_counts, pooled_moments

from ppgm.core import checks

from .data import check_frame, check_known, codes_or_unknown, column_kind, read_states
from .models import markov_to_pgmpy

KINDS = ("gaussian", "discrete")


@dataclass
class MERFit(MERResult):
    """A :class:`ppgm.mer.program.MERResult` with the domain it was fitted on and pgmpy exports.

    ``fit.program_`` is the compiled convex program (MER's gamma is a cvxpy Parameter):
    ``fit.refit(gamma=..., solver=...)`` re-solves it at another tolerance or with another solver
    without recompiling, and ``fit.resolve(constraints=[...])`` adds constraints of
    your own (on ``fit.program_.covariance(a, b)`` or ``fit.program_.marginal(scope)``) and returns
    a new fit. ``fit.problem`` is the cvxpy ``Problem`` that was solved; its Parameters hold the
    values of the program's latest solve, so re-solve through ``refit`` / ``resolve``.

    Parameters
    ----------
    The fields of :class:`ppgm.mer.program.MERResult`, and
    domain : ppgm.Domain, optional
        The variables and states the statistics were pooled over.
    program_ : ppgm.mer.program.ConvexProgram, optional
        The compiled program.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(400, 3)); x[:, 1] += x[:, 0]; x[:, 2] -= x[:, 1]
    >>> df = pd.DataFrame(x, columns=["a", "b", "c"])
    >>> fit = mer([df[["a", "b"]].iloc[:200], df[["b", "c"]].iloc[200:]], gamma_ratio=2)
    >>> fit.edges(), fit.refit(gamma_ratio=8).gamma == 4 * fit.gamma
    ([('a', 'b'), ('b', 'c')], True)
    """

    domain: Domain | None = None
    program_: ConvexProgram | None = None

    @classmethod
    def _wrap(cls, result: MERResult, domain, program) -> "MERFit":
        return cls(**{f.name: getattr(result, f.name) for f in fields(MERResult)}, domain=domain, program_=program)

    def refit(self, gamma: float | None = None, gamma_ratio: float | None = None, solver: str | None = None) -> "MERFit":
        """MER on the same statistics at another ``gamma`` (or ``gamma_ratio`` times s~), re-using the
        compiled program (gamma is a cvxpy Parameter).

        Parameters
        ----------
        gamma : float, optional
        gamma_ratio : float, optional
            One of the two.
        solver : str, optional

        Returns
        -------
        MERFit

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(400, 3)); x[:, 1] += x[:, 0]; x[:, 2] -= x[:, 1]
        >>> df = pd.DataFrame(x, columns=["a", "b", "c"])
        >>> fit = mer([df[["a", "b"]].iloc[:200], df[["b", "c"]].iloc[200:]], gamma_ratio=2)
        >>> fit.refit(gamma_ratio=8).gamma == 4 * fit.gamma
        True
        """
        gamma, gamma_ratio, solver = _check_gamma(gamma, "gamma"), _check_gamma(gamma_ratio, "gamma_ratio"), _check_solver(solver)
        return MERFit._wrap(self.program_.mer(gamma, gamma_ratio, solver), self.domain, self.program_)

    def resolve(self, constraints: Sequence, gamma: float | None = None, solver: str | None = None) -> "MERFit":
        """MER with constraints of your own added, as a new fit (this one is unchanged).

        Parameters
        ----------
        constraints : list of cvxpy constraints
            On this program's variables: ``fit.program_.covariance(a, b)`` (Gaussian, data units)
            or ``fit.program_.marginal(variables)`` (discrete, a flat C-order table).
        gamma : float, optional
            Default: this fit's gamma.
        solver : str, optional

        Returns
        -------
        MERFit

        Raises
        ------
        TypeError, ValueError
            Not a list of cvxpy constraints, or constraints on another program's variables.
        RuntimeError
            No model meets both the tolerances and the constraints at this gamma.

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(400, 3)); x[:, 1] += x[:, 0]; x[:, 2] -= x[:, 1]
        >>> df = pd.DataFrame(x, columns=["a", "b", "c"])
        >>> fit = mer([df[["a", "b"]].iloc[:200], df[["b", "c"]].iloc[200:]], gamma_ratio=2)
        >>> round(float(fit.covariance[0, 1]), 3)
        1.025
        >>> capped = fit.resolve([fit.program_.covariance("a", "b") <= 0.9], gamma=0.05)
        >>> round(float(capped.covariance[0, 1]), 3), capped.status
        (0.9, 'optimal')
        """
        if self.program_ is None:
            raise ValueError("resolve: this fit carries no program (program_ is None)")
        result = self.program_.resolve(constraints, self.gamma if gamma is None else gamma, solver)
        return MERFit._wrap(result, self.domain, self.program_)

    def constraints_frame(self) -> pd.DataFrame:
        """The constraints as a DataFrame: scope, kind, n, dof, tolerance, divergence, dual value, active;
        for discrete edges also the fitted interaction (nats) and its z (interaction over its standard
        error at the edge's sample size, see :func:`ppgm.mer.discrete.interaction_se`).

        Returns
        -------
        pandas.DataFrame

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(400, 3)); x[:, 1] += x[:, 0]; x[:, 2] -= x[:, 1]
        >>> df = pd.DataFrame(x, columns=["a", "b", "c"])
        >>> fit = mer([df[["a", "b"]].iloc[:200], df[["b", "c"]].iloc[200:]], gamma_ratio=2)
        >>> len(fit.constraints_frame()) == len(fit.constraints)
        True
        """
        return pd.DataFrame(self.constraints)

    def to_markov_network(self, keep_all: bool = False) -> DiscreteMarkovNetwork:
        """pgmpy ``DiscreteMarkovNetwork`` of a discrete fit: node factors and one factor per edge of
        ``graph`` (weaker interactions dropped, their additive parts kept in the node factors), or
        with ``keep_all=True`` every pairwise factor the duals give, which reproduces the fitted
        marginals.

        Parameters
        ----------
        keep_all : bool
            The fitted model itself rather than its sparse reading: every node and edge factor,
            fitted to the fit's own marginals (which it then reproduces to 1e-9).

        Returns
        -------
        DiscreteMarkovNetwork

        Raises
        ------
        ValueError
            For a Gaussian fit.

        Examples
        --------
        >>> d = pd.DataFrame({"a": [0, 1, 1, 0] * 50, "b": [0, 1, 1, 1] * 50, "c": [1, 1, 0, 0] * 50})
        >>> net = mer([d[["a", "b"]], d[["b", "c"]]], kind="discrete").to_markov_network()
        >>> sorted(net.nodes())
        ['a', 'b', 'c']
        """
        if self.kind != "discrete":
            raise ValueError("to_markov_network: this is a Gaussian fit; use precision / to_linear_gaussian_bn")
        return markov_to_pgmpy(self.engine_model(keep_all))

    def engine_model(self, keep_all: bool = False) -> MarkovNetwork:
        """The fitted discrete model as an engine :class:`~ppgm.models.markov.MarkovNetwork` (the factors of
        :meth:`to_markov_network`, as log-potentials).

        Parameters
        ----------
        keep_all : bool
            Every pairwise factor, not only the edges of ``graph``.

        Returns
        -------
        ppgm.MarkovNetwork

        Examples
        --------
        >>> d = pd.DataFrame({"a": [0, 1, 1, 0] * 50, "b": [0, 1, 1, 1] * 50})
        >>> mer([d], kind="discrete").engine_model().domain.variables
        ('a', 'b')
        """
        if self.log_potentials is None:
            raise ValueError("engine_model: this fit has no log-potentials (a Gaussian fit?)")
        if keep_all:
            # the maximum-entropy model with the fit's own node and edge marginals is the fit itself
            # (MER's solution is Markov on the constraint graph): fitting them directly reproduces the
            # marginals to the fit's tolerance, where the duals carry the solver's residue
            scopes = [c["scope"] for c in self.constraints]
            targets = [Factor(sc, self.marginals[sc] / self.marginals[sc].sum()) for sc in scopes]
            return fit_marginals(self.domain, targets, tol=1e-10).model
        keep = {frozenset(e) for e in self.graph.edges}
        factors = [
            Factor(scope, pot)
            for scope, pot in self.log_potentials.items()
            if len(scope) == 1 or keep_all or frozenset(scope) in keep
        ]
        return MarkovNetwork(self.domain, factors)

    def to_linear_gaussian_bn(self, order: Sequence[Hashable], tol: float = 1e-5) -> LinearGaussianBayesianNetwork:
        """pgmpy ``LinearGaussianBayesianNetwork`` of a Gaussian fit along ``order``.

        Each variable is regressed on its predecessors in ``order`` under the fitted covariance;
        coefficients below ``tol`` in magnitude are dropped (exactly zero where the graph separates the
        variable from a predecessor given the others; the solver leaves them near 1e-6). Its
        ``to_joint_gaussian()`` returns the fitted covariance up to the dropped coefficients.

        Parameters
        ----------
        order : list
            A permutation of the variables (each is regressed on those before it).
        tol : float
            Coefficients below this magnitude are dropped.

        Returns
        -------
        LinearGaussianBayesianNetwork

        Raises
        ------
        ValueError
            For a discrete fit, or an ``order`` that is not a permutation of the variables.

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(400, 3)); x[:, 1] += x[:, 0]; x[:, 2] -= x[:, 1]
        >>> df = pd.DataFrame(x, columns=["a", "b", "c"])
        >>> fit = mer([df[["a", "b"]].iloc[:200], df[["b", "c"]].iloc[200:]], gamma_ratio=2)
        >>> sorted(fit.to_linear_gaussian_bn(["a", "b", "c"]).edges())
        [('a', 'b'), ('b', 'c')]
        """
        if self.kind != "gaussian":
            raise ValueError("to_linear_gaussian_bn: this is a discrete fit; use to_markov_network")
        order = list(order)
        if sorted(map(str, order)) != sorted(map(str, self.variables)) or len(order) != len(self.variables):
            raise ValueError(f"order: expected a permutation of {list(self.variables)}, got {order}")
        pos = {v: i for i, v in enumerate(self.variables)}
        S = self.covariance
        bn = LinearGaussianBayesianNetwork()
        bn.add_nodes_from(order)
        cpds = []
        for t, v in enumerate(order):
            i = pos[v]
            pred = [pos[u] for u in order[:t]]
            if pred:
                beta = np.linalg.solve(S[np.ix_(pred, pred)], S[pred, i])
                keep = np.abs(beta) > tol
                parents = [self.variables[j] for j, k in zip(pred, keep) if k]
                beta_k = beta[keep]
                var = S[i, i] - S[i, pred] @ beta
            else:
                parents, beta_k, var = [], np.array([]), S[i, i]
            for u in parents:
                bn.add_edge(u, v)
            intercept = self.means[v] - sum(b * self.means[u] for b, u in zip(beta_k, parents))
            cpds.append(LinearGaussianCPD(v, [float(intercept), *map(float, beta_k)], float(np.sqrt(var)), parents))
        bn.add_cpds(*cpds)
        return bn


#: Distinct values above which a column is not read as discrete states (a float column would make
#: every value a state); bin it first, or declare its states with ``state_names``.
MAX_STATES = 50
#: Sample sets with fewer rows than this (or than twice their columns) get a warning.
SMALL_SET = 10


def _sample_sets(samples: Sequence[pd.DataFrame]) -> list[pd.DataFrame]:
    if isinstance(samples, pd.DataFrame):
        samples = [samples]
    if isinstance(samples, (str, bytes, Mapping)) or not isinstance(samples, Iterable):
        raise TypeError(f"samples: expected a list of pandas DataFrames, got {type(samples).__name__}")
    samples = list(samples)
    if not samples:
        raise ValueError("samples: expected at least one DataFrame")
    for k, df in enumerate(samples):
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"samples[{k}]: expected a pandas DataFrame, got {type(df).__name__}")
        if len(df.columns) == 0:
            raise ValueError(f"samples[{k}]: has no columns")
        check_frame(df, f"samples[{k}]")
    return samples


def _check_solver(solver: str | None) -> str | None:
    """A cvxpy solver that is installed here, or None (the package's policy)."""
    if solver is None:
        return None
    installed = cp.installed_solvers()
    if not isinstance(solver, str) or solver.upper() not in installed:
        raise ValueError(f"solver: expected None or an installed cvxpy solver {sorted(installed)}, got {solver!r}")
    return solver.upper()


def _check_gamma(gamma, name: str) -> float | None:
    """None, or a real number (its range is checked by the program)."""
    if gamma is None:
        return None
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number or None, got {type(gamma).__name__} {gamma!r:.40}")
    return float(gamma)




def check_sample_sets(samples: Sequence[pd.DataFrame], kind: str) -> None:
    """The checks that pooling cannot make once the sets are merged: each raises or warns naming the
    sets and columns concerned.

    - the same rows passed twice (they would be counted twice): ``ValueError``;
    - a column that is boolean, numeric or text in different sets (0/1 in one set and "0"/"1" in
      another would make four states): ``ValueError``;
    - two columns of one set that are exactly proportional (b = 2a: a singular covariance in that
      set), Gaussian: ``ValueError``;
    - a column constant in one set but varying in others, and a set with very few rows (its noisy
      statistics raise s~ and with it the default gamma): ``UserWarning``.

    Examples
    --------
    >>> df = pd.DataFrame(np.random.default_rng(0).normal(size=(50, 2)), columns=["a", "b"])
    >>> check_sample_sets([df, df], "gaussian")
    Traceback (most recent call last):
    ...
    ValueError: samples[1]: the same rows as samples[0]; a set passed twice would be counted twice (concatenate sets to pool them)
    """
    seen: dict = {}
    kinds: dict = {}
    for k, df in enumerate(samples):
        key = (tuple(df.columns), df.shape, int(pd.util.hash_pandas_object(df, index=False).sum()))
        if key in seen:
            raise ValueError(f"samples[{k}]: the same rows as samples[{seen[key]}]; a set passed twice would be counted "
                             "twice (concatenate sets to pool them)")
        seen[key] = k
        for c in df.columns:
            values = column_kind(df[c], f"samples[{k}]", c)  # one kind per column within a set, and across sets below
            if values is not None:
                kinds.setdefault(c, {}).setdefault(values, []).append(k)
        if len(df) < max(SMALL_SET, 2 * len(df.columns)):
            warnings.warn(f"samples[{k}]: only {len(df)} rows over {len(df.columns)} columns; its statistics are noisy, "
                          "raise INI's s~ and with it the default gamma (drop the set, or give gamma)", UserWarning, stacklevel=3)
    for c, by_kind in kinds.items():
        if len(by_kind) > 1:
            where = "; ".join(f"{kd} in samples{sets}" for kd, sets in by_kind.items())
            raise ValueError(f"samples: column {c!r} holds different kinds of values across sets ({where}); "
                             "convert it to one type in every set")
    varying = {c for df in samples for c in df.columns if df[c].nunique(dropna=True) > 1}
    for k, df in enumerate(samples):
        constant = [c for c in df.columns if df[c].nunique(dropna=True) <= 1 and c in varying and len(df) > 1]
        if constant:
            warnings.warn(f"samples[{k}]: columns {constant} are constant in this set but vary in others "
                          "(a fill value?); the set pulls their statistics toward that constant", UserWarning, stacklevel=3)
        if kind == "gaussian" and len(df) > 2:
            x = df.apply(pd.to_numeric, errors="coerce").to_numpy(float)
            sd = x.std(axis=0)
            live = np.flatnonzero(sd > 0)
            if len(live) > 1 and np.isfinite(x).all():
                corr = np.corrcoef(x[:, live], rowvar=False)
                i, j = np.nonzero(np.triu(np.abs(corr) > 1 - 1e-9, 1))
                if len(i):
                    pair = (df.columns[live[i[0]]], df.columns[live[j[0]]])
                    raise ValueError(f"samples[{k}]: columns {pair} are exactly proportional in this set (correlation "
                                     f"{corr[i[0], j[0]]:+.6f}); their covariance is singular: drop one of them")


def _check_discrete_states(variables, samples, names: Mapping) -> None:
    for v in variables:
        if v in names:
            continue
        values = pd.concat([df[v] for df in samples if v in df.columns], ignore_index=True)
        count = values.nunique(dropna=True)
        if count > MAX_STATES:
            raise ValueError(f"samples: variable {v!r} has {count} distinct values, more than MAX_STATES = {MAX_STATES} "
                             f"states for kind='discrete' (a float column?); bin it first (e.g. pandas.cut) or declare "
                             "its states with state_names")


def build_program(
    samples: Sequence[pd.DataFrame],
    kind: str = "gaussian",
    p: float = 0.5,
    edges: Sequence[Sequence[Hashable]] | None = None,
    variables: Sequence[Hashable] | None = None,
    state_names: Mapping | None = None,
    graph_tol: float | None = None,
    pseudo_count: float = 0.5,
) -> tuple[ConvexProgram, Domain]:
    """Pool the statistics of ``samples`` (Eqs. 5-6) and build the MER / INI program once.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame(rng.normal(size=(200, 2)), columns=["a", "b"])
    >>> prog, domain = build_program([df])
    >>> [d.scope for d in prog.divergences]
    [('a',), ('b',), ('a', 'b')]
    """
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    p = checks.in_range(p, "p", 0, 1)
    if p == 0:
        raise ValueError("p: expected an exponent in (0, 1], got 0")
    pseudo_count = checks.positive(pseudo_count, "pseudo_count")
    if pseudo_count > checks.MAX_PENALTY:
        raise ValueError(f"pseudo_count: expected at most {checks.MAX_PENALTY:g}, got {pseudo_count!r}")
    if graph_tol is not None:
        graph_tol = checks.non_negative(graph_tol, "graph_tol")
    state_names = checks.state_names(state_names)
    if variables is not None:
        variables = checks.names(variables, "variables")
    samples = _sample_sets(samples)
    check_sample_sets(samples, kind)
    if variables is None:
        variables = list(dict.fromkeys(c for df in samples for c in df.columns))
    variables = tuple(variables)
    if kind == "gaussian":
        sets = []
        for k, df in enumerate(samples):
            numeric = df.apply(pd.to_numeric, errors="coerce")
            if numeric.isna().any().any():
                bad = numeric.columns[numeric.isna().any()].tolist()
                raise ValueError(f"samples[{k}]: columns {bad} have missing or non-numeric values")
            sets.append(SampleSet(tuple(df.columns), numeric.to_numpy(float)))
        means, nodes, edge_stats = pooled_moments(sets, variables, edges)
        tol = GAUSSIAN_GRAPH_TOL if graph_tol is None else graph_tol
        return GaussianMER(variables, nodes, edge_stats, p=p, graph_tol=tol, means=means), Domain(variables, (1,) * len(variables))
    names = dict(state_names or {})
    _check_discrete_states(variables, samples, names)
    states = {}
    for v in variables:
        if v in names:
            states[v] = list(names[v])
            continue
        states[v] = read_states(pd.concat([df[v] for df in samples if v in df.columns], ignore_index=True), "samples", v)
        if len(states[v]) < 2:
            raise ValueError(f"samples: variable {v!r} is constant ({states[v]}); it carries no dependence to learn")
    domain = Domain(variables, tuple(len(states[v]) for v in variables), states)
    sets = []
    for k, df in enumerate(samples):
        unknown = [c for c in df.columns if c not in domain.variables]
        if unknown:
            raise ValueError(f"samples[{k}]: unknown variables {unknown}; expected names among {list(variables)}")
        sub = Domain(tuple(df.columns), domain.shape(tuple(df.columns)), {c: states[c] for c in df.columns})
        codes = codes_or_unknown(df, sub)
        check_known(df, sub, codes, f"samples[{k}]")
        sets.append(SampleSet(tuple(df.columns), codes))
    nodes, edge_stats = pooled_counts(sets, domain, edges)
    tol = DISCRETE_GRAPH_TOL if graph_tol is None else graph_tol
    return DiscreteMER(domain, nodes, edge_stats, p=p, pseudo_count=pseudo_count, graph_tol=tol), domain


def mer(
    samples: Sequence[pd.DataFrame],
    kind: str = "gaussian",
    gamma: float | None = None,
    p: float = 0.5,
    edges: Sequence[Sequence[Hashable]] | None = None,
    solver: str | None = None,
    gamma_ratio: float | None = None,
    **kwargs,
) -> MERFit:
    """Maximum entropy relaxation: a sparse, globally consistent model of inconsistent sample sets.

    Parameters
    ----------
    samples : sequence of pandas.DataFrame
        One DataFrame per sample set; its columns name the variables it observed.
    kind : {"gaussian", "discrete"}
    gamma : float, optional
        Tolerance scale: delta_v = gamma (k_v / N_v) ** p, delta_E = gamma (k_E / N_E) ** p with
        k = 1 / 3 for a Gaussian node / pair and K_v - 1 / K_u K_v - 1 for discrete ones. Must be at
        least INI's optimum s~ (else ``ValueError`` naming s~).
    p : float
        Tolerance exponent (the paper's p < 1).
    edges : sequence of pairs, optional
        Constraint edges; default every pair observed together in some set.
    solver : str, optional
        A cvxpy solver name; default Clarabel with ppgm's fallbacks (see :func:`ppgm.mer.program.solve`).
    gamma_ratio : float, optional
        gamma as a multiple of s~; with neither, the default rule of :func:`ppgm.mer.program.choose_gamma`
        (stated in ``notes``).
    **kwargs
        ``variables``, ``state_names``, ``graph_tol``, ``pseudo_count`` (see :func:`build_program`).

    Returns
    -------
    MERFit

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(500, 3)); x[:, 1] += x[:, 0]; x[:, 2] += x[:, 1]
    >>> full = pd.DataFrame(x, columns=["a", "b", "c"])
    >>> fit = mer([full[["a", "b"]].iloc[:250], full[["b", "c"]].iloc[250:]], gamma_ratio=4)
    >>> fit.edges()
    [('a', 'b'), ('b', 'c')]
    """
    gamma, gamma_ratio, solver = _check_gamma(gamma, "gamma"), _check_gamma(gamma_ratio, "gamma_ratio"), _check_solver(solver)
    program, domain = build_program(samples, kind, p, edges, **kwargs)
    return MERFit._wrap(program.mer(gamma, gamma_ratio, solver), domain, program)


def ini(
    samples: Sequence[pd.DataFrame],
    kind: str = "gaussian",
    p: float = 0.5,
    edges: Sequence[Sequence[Hashable]] | None = None,
    solver: str | None = None,
    **kwargs,
) -> MERFit:
    """Phase-I program INI: the smallest tolerance scale s~ at which MER is feasible, and the
    consistent model that attains it (``fit.s_tilde``; ``fit.refit(gamma_ratio=...)`` then runs MER).

    Parameters
    ----------
    samples : list of pandas.DataFrame
        One DataFrame per sample set; each observes some of the variables.
    kind : {"gaussian", "discrete"}
    p : float
        Exponent of the tolerances delta = gamma (k / N)^p.
    edges : list of pairs, optional
        Edge statistics to constrain (default: every pair some set observed jointly).
    solver : str, optional
        A cvxpy solver name (default: the package's policy, see ``ppgm.mer.program.solve``).
    **kwargs
        Passed to the program (e.g. ``pseudo_count`` for discrete programs).

    Returns
    -------
    MERFit
        ``s_tilde`` set; ``refit(gamma_ratio=...)`` solves MER on the same compiled program.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> full = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    >>> ini([full]).s_tilde < 1e-6   # one set observes everything: consistent statistics
    True
    """
    solver = _check_solver(solver)
    program, domain = build_program(samples, kind, p, edges, **kwargs)
    return MERFit._wrap(program.ini(solver), domain, program)
