"""pgmpy models <-> ppgm engine models.

Variables keep their names and state names both ways. A pgmpy factor whose state names list a
variable's states in another order than the model's first factor is re-indexed, never silently
misread; different state sets or cardinalities for one variable are an error.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from pgmpy.factors.discrete import DiscreteFactor, TabularCPD
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork

from ppgm.core import checks
from ppgm.models.bayes import BayesianNetwork
from ppgm.factors.domain import Domain
from ppgm.factors.factor import Factor
from ppgm.models.markov import MarkovNetwork


def _states(factor_like, var) -> list:
    names = getattr(factor_like, "state_names", None) or {}
    if var in names:
        return list(names[var])
    return list(range(factor_like.get_cardinality([var])[var]))


def declared_states(model) -> dict:
    """``{variable: states}`` that a pgmpy model's factors (Markov network) or CPDs (Bayesian
    network) declare, in the model's order (a variable's first factor sets it). Variables with no
    factor are absent. This is the public domain a private release counts over.

    Parameters
    ----------
    model : DiscreteMarkovNetwork or DiscreteBayesianNetwork

    Returns
    -------
    dict
        ``{variable: list of states}``.

    Examples
    --------
    >>> from pgmpy.models import DiscreteMarkovNetwork
    >>> mn = DiscreteMarkovNetwork([("A", "B")])
    >>> mn.add_factors(DiscreteFactor(["A", "B"], [3, 2], range(6), state_names={"A": ["lo", "mid", "hi"], "B": [0, 1]}))
    >>> declared_states(mn)["A"]
    ['lo', 'mid', 'hi']
    """
    if isinstance(model, DiscreteBayesianNetwork):
        factors = list(model.get_cpds())
    elif isinstance(model, DiscreteMarkovNetwork):
        factors = list(model.get_factors())
    else:
        raise TypeError(f"model: expected a pgmpy DiscreteMarkovNetwork or DiscreteBayesianNetwork, got {type(model).__name__}")
    return _states_of(factors)


def _states_of(factors: Sequence) -> dict:
    states: dict = {}
    for f in factors:
        for v in f.variables:
            s = _states(f, v)
            if v not in states:
                states[v] = s
            elif len(states[v]) != len(s):
                raise ValueError(
                    f"model: variable {v!r} has {len(states[v])} states in one factor and {len(s)} in another"
                )
            elif set(states[v]) != set(s):
                raise ValueError(f"model: variable {v!r} has state names {states[v]} in one factor and {s} in another")
    return states


def _collect_domain(model, factors: Sequence) -> Domain:
    states = _states_of(factors)
    variables = [v for v in model.nodes()]
    missing = [v for v in variables if v not in states]
    if missing:
        raise ValueError(f"model: variables {missing} appear in no factor; add factors (or CPDs) for them")
    return Domain(tuple(variables), tuple(len(states[v]) for v in variables), states)


def _reindexed(f, dom: Domain) -> np.ndarray:
    """The factor's values with each axis in the domain's state order."""
    vals = np.asarray(f.values, dtype=float)
    for ax, v in enumerate(f.variables):
        s = _states(f, v)
        target = list(dom.state_names[v])
        if s != target:
            pos = {state: i for i, state in enumerate(s)}
            vals = np.take(vals, [pos[t] for t in target], axis=ax)
    return vals


def markov_from_pgmpy(model: DiscreteMarkovNetwork) -> MarkovNetwork:
    """Engine Markov network with the log of each ``DiscreteFactor`` as a log-potential.

    Parameters
    ----------
    model : DiscreteMarkovNetwork

    Returns
    -------
    ppgm.MarkovNetwork

    Examples
    --------
    >>> from pgmpy.models import DiscreteMarkovNetwork
    >>> from pgmpy.factors.discrete import DiscreteFactor
    >>> mn = DiscreteMarkovNetwork([("A", "B")])
    >>> mn.add_factors(DiscreteFactor(["A", "B"], [2, 2], [1, 2, 3, 4]))
    >>> markov_from_pgmpy(mn).scopes
    [('A', 'B')]
    """
    if isinstance(model, DiscreteBayesianNetwork):
        return bayes_from_pgmpy(model).to_markov()
    if not isinstance(model, DiscreteMarkovNetwork):
        raise TypeError(f"model: expected a pgmpy DiscreteMarkovNetwork, got {type(model).__name__}")
    factors = list(model.get_factors())
    if not factors:
        raise ValueError("model: the DiscreteMarkovNetwork has no factors")
    dom = _collect_domain(model, factors)
    out = []
    for i, f in enumerate(factors):
        vals = _reindexed(f, dom)
        if np.isnan(vals).any() or (vals < 0).any():
            raise ValueError(f"model: factor {i} over {list(f.variables)} has negative or NaN values")
        with np.errstate(divide="ignore"):
            out.append(Factor(tuple(f.variables), np.log(vals)))
    return MarkovNetwork(dom, out)


LOG_FLOOR = 700.0  # exp(-700) ~ 1e-304, still a normal float64


def markov_to_pgmpy(model: MarkovNetwork) -> DiscreteMarkovNetwork:
    """pgmpy ``DiscreteMarkovNetwork`` whose factors are exp of the engine's log-potentials
    (each shifted by its maximum, which changes nothing but the scale). pgmpy stores potentials, not
    their logs, and float64 cannot hold exp(-746): finite log-potentials more than 700 below their
    factor's maximum are raised to that floor (a probability factor of e^-700 instead of an exact
    zero), so that an extreme but valid fit does not come back with zero probability everywhere.
    Only -inf entries become exact zeros.

    Parameters
    ----------
    model : ppgm.MarkovNetwork

    Returns
    -------
    DiscreteMarkovNetwork

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> len(markov_to_pgmpy(third_order_chain(5, 2, seed=0)).get_factors())  # edges at distance 1, 2, 3
    9
    """
    if not isinstance(model, MarkovNetwork):
        raise TypeError(f"model: expected a ppgm MarkovNetwork (the engine's; see markov_from_pgmpy), got {type(model).__name__}")
    mn = DiscreteMarkovNetwork()
    mn.add_nodes_from(model.domain.variables)
    for f in model.factors:
        for i, a in enumerate(f.variables):
            for b in f.variables[i + 1 :]:
                mn.add_edge(a, b)
    factors = []
    for f in model.factors:
        vals = f.values
        top = np.max(vals)
        with np.errstate(invalid="ignore"):
            shifted = vals - (top if np.isfinite(top) else 0.0)
        vals = np.exp(np.where(np.isfinite(shifted), np.maximum(shifted, -LOG_FLOOR), -np.inf))
        factors.append(
            DiscreteFactor(
                list(f.variables),
                list(f.shape),
                vals,
                state_names={v: list(model.domain.state_names[v]) for v in f.variables},
            )
        )
    mn.add_factors(*factors)
    return mn


def markov_network(cliques: Sequence[Sequence], state_names: Mapping) -> DiscreteMarkovNetwork:
    """A pgmpy ``DiscreteMarkovNetwork`` known by its cliques and its variables' states, each clique
    with a uniform factor (all ones) that declares the states: the model to hand to
    ``release_tables`` (its public domain), ``NaiveMLEEstimator``, ``CGMEstimator`` or
    ``MarkovNetworkEstimator`` (its cliques and the order of its states) before any data is fitted.

    Parameters
    ----------
    cliques : list of tuples of names
        The factors' scopes; every pair in a clique becomes an edge.
    state_names : mapping
        ``{variable: [states]}`` for every variable of the cliques, and no other: states distinct,
        of one kind (numbers, booleans or text), in the order the fitted factors will list them.

    Returns
    -------
    DiscreteMarkovNetwork
        Nodes in the order they first appear in ``cliques``; one factor of ones per clique.

    Raises
    ------
    TypeError, ValueError
        A bare pair of names instead of a list of cliques, a clique given twice, a variable whose
        states are not given, states given for a variable in no clique, malformed state lists.

    Examples
    --------
    >>> mn = markov_network([("A", "B"), ("B", "C")], {"A": ["no", "yes"], "B": [0, 1, 2], "C": ["x", "y"]})
    >>> list(mn.nodes()), [f.variables for f in mn.get_factors()], mn.get_factors()[0].state_names["B"]
    (['A', 'B', 'C'], [['A', 'B'], ['B', 'C']], [0, 1, 2])
    >>> float(mn.get_factors()[1].values.sum())
    6.0
    """
    cliques = checks.cliques(cliques, "cliques")
    seen: dict = {}
    for i, c in enumerate(cliques):
        if frozenset(c) in seen:
            raise ValueError(f"cliques: {c!r} (cliques[{i}]) repeats cliques[{seen[frozenset(c)]}]; give each clique once")
        seen[frozenset(c)] = i
    states = checks.state_names(state_names, "state_names")
    variables = list(dict.fromkeys(v for c in cliques for v in c))
    undeclared = [v for v in variables if v not in states]
    if undeclared:
        raise ValueError(f"state_names: the states of {undeclared} are not given; every variable of the cliques needs its states")
    unused = [v for v in states if v not in variables]
    if unused:
        raise ValueError(f"state_names: {unused} are in no clique; add a clique of their own, e.g. ({unused[0]!r},), "
                         "to model them")
    mn = DiscreteMarkovNetwork()
    mn.add_nodes_from(variables)
    for c in cliques:
        for i, a in enumerate(c):
            for b in c[i + 1 :]:
                mn.add_edge(a, b)
    mn.add_factors(*(DiscreteFactor(list(c), [len(states[v]) for v in c], np.ones([len(states[v]) for v in c]),
                                    state_names={v: list(states[v]) for v in c}) for c in cliques))
    return mn


def bayes_from_pgmpy(model: DiscreteBayesianNetwork) -> BayesianNetwork:
    """Engine Bayesian network: CPT arrays of shape (parent cards..., card), topological order.

    Parameters
    ----------
    model : DiscreteBayesianNetwork

    Returns
    -------
    ppgm.BayesianNetwork

    Examples
    --------
    >>> from pgmpy.models import DiscreteBayesianNetwork
    >>> from pgmpy.factors.discrete import TabularCPD
    >>> bn = DiscreteBayesianNetwork([("A", "B")])
    >>> bn.add_cpds(TabularCPD("A", 2, [[0.4], [0.6]]), TabularCPD("B", 2, [[0.9, 0.2], [0.1, 0.8]], ["A"], [2]))
    >>> bayes_from_pgmpy(bn).cpts["B"].tolist()
    [[0.9, 0.1], [0.2, 0.8]]
    """
    if not isinstance(model, DiscreteBayesianNetwork):
        raise TypeError(f"model: expected a pgmpy DiscreteBayesianNetwork, got {type(model).__name__}")
    cpds = {cpd.variable: cpd for cpd in model.get_cpds()}
    missing = [v for v in model.nodes() if v not in cpds]
    if missing:
        raise ValueError(f"model: nodes {missing} have no CPD")
    dom = _collect_domain(model, list(cpds.values()))
    parents, cpts = {}, {}
    for v, cpd in cpds.items():
        ev = tuple(cpd.variables[1:])
        if set(ev) != set(model.get_parents(v)):
            raise ValueError(f"model: the CPD of {v!r} conditions on {list(ev)}, the graph gives parents {model.get_parents(v)}")
        vals = _reindexed(DiscreteFactor(cpd.variables, cpd.cardinality, cpd.get_values().reshape(cpd.cardinality),
                                         state_names=cpd.state_names), dom)
        parents[v] = ev
        cpts[v] = np.moveaxis(vals, 0, -1)
    return BayesianNetwork(dom, parents, cpts)


def tabular_cpds(model: BayesianNetwork, cpts: Mapping | None = None) -> list[TabularCPD]:
    """pgmpy ``TabularCPD`` objects for the engine CPT arrays (``cpts`` overrides ``model.cpts``).

    Parameters
    ----------
    model : ppgm.BayesianNetwork
    cpts : mapping, optional
        ``{variable: array (parent cards..., card)}`` replacing the model's CPTs (rows summing to one).

    Returns
    -------
    list of TabularCPD

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> [c.variable for c in tabular_cpds(random_bayesian_network(3, seed=0))]
    ['V0', 'V1', 'V2']
    """
    if not isinstance(model, BayesianNetwork):
        raise TypeError(f"model: expected a ppgm BayesianNetwork (the engine's; see bayes_from_pgmpy), got {type(model).__name__}")
    given = checks.mapping(cpts, "cpts")
    unknown = [v for v in given if v not in model.domain]
    if unknown:
        raise ValueError(f"cpts: unknown variables {unknown}; the model has {list(model.domain.variables)}")
    tables = {**model.cpts, **given}
    dom = model.domain
    out = []
    for v in model.order:
        ps = model.parents[v]
        try:
            t = np.asarray(tables[v], dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"cpts[{v!r}]: expected an array of probabilities") from None
        want = dom.shape(ps) + (dom.card(v),)
        if v in given and (t.shape != want or not np.all(np.isfinite(t)) or (t < 0).any()
                           or not np.allclose(t.sum(axis=-1), 1.0, atol=1e-6)):
            raise ValueError(f"cpts[{v!r}]: expected finite non-negative rows summing to one, of shape {want}, got shape {t.shape}")
        values = np.moveaxis(t, -1, 0).reshape(dom.card(v), dom.size(ps))
        out.append(
            TabularCPD(
                v,
                dom.card(v),
                values,
                evidence=list(ps) or None,
                evidence_card=list(dom.shape(ps)) or None,
                state_names={u: list(dom.state_names[u]) for u in (v,) + ps},
            )
        )
    return out


def bayes_to_pgmpy(model: BayesianNetwork) -> DiscreteBayesianNetwork:
    """pgmpy ``DiscreteBayesianNetwork`` with the engine's DAG and CPTs.

    Parameters
    ----------
    model : ppgm.BayesianNetwork

    Returns
    -------
    DiscreteBayesianNetwork

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> bayes_to_pgmpy(random_bayesian_network(3, seed=0)).check_model()
    True
    """
    if not isinstance(model, BayesianNetwork):
        raise TypeError(f"model: expected a ppgm BayesianNetwork (the engine's; see bayes_from_pgmpy), got {type(model).__name__}")
    bn = DiscreteBayesianNetwork()
    bn.add_nodes_from(model.domain.variables)
    bn.add_edges_from((p, v) for v in model.order for p in model.parents[v])
    bn.add_cpds(*tabular_cpds(model))
    return bn


def to_engine(model, name: str = "model"):
    """Engine model of a pgmpy ``DiscreteMarkovNetwork`` or ``DiscreteBayesianNetwork`` (engine models pass through).

    Parameters
    ----------
    model : DiscreteMarkovNetwork, DiscreteBayesianNetwork, or an engine model
    name : str
        The argument's name in error messages.

    Returns
    -------
    ppgm.MarkovNetwork or ppgm.BayesianNetwork

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> to_engine(load_bif_example("asia")).order[0]
    'asia'
    """
    if isinstance(model, (MarkovNetwork, BayesianNetwork)):
        return model
    if isinstance(model, DiscreteBayesianNetwork):
        return bayes_from_pgmpy(model)
    if isinstance(model, DiscreteMarkovNetwork):
        return markov_from_pgmpy(model)
    raise TypeError(
        f"{name}: expected a pgmpy DiscreteMarkovNetwork or DiscreteBayesianNetwork, got {type(model).__name__}"
    )
