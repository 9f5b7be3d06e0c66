"""Model distances and marginal tables for pgmpy models.

Both distances align the two models by name: variables and states are matched by their names, not
their positions, so a copy of a model with its states listed in another order is at distance 0.0. Two
models whose variables or state sets differ are refused, naming the variable and both state sets.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from ppgm.core import checks
from ppgm.inference.junction_tree import DEFAULT_MAX_CELLS
from ppgm.inference import metrics as _m
from ppgm.core.rng import as_generator

from .models import to_engine
from .private import long_frame


def kl_divergence(p, q) -> float:
    """Exact KL(p || q) in nats between two pgmpy models (Markov or Bayesian) on the same variables.

    States are aligned by name: q's variables and states may be listed in any order (a copy of p
    with its states permuted gives 0.0); no reordering by hand is needed.

    Parameters
    ----------
    p, q : DiscreteMarkovNetwork or DiscreteBayesianNetwork
        Same variables with the same state names, in any order.

    Returns
    -------
    float
        ``inf`` when q gives probability zero to a configuration p allows; a warning then names the
        first such cells (variable states where p has mass and q none) and points to fitting q with a
        pseudo-count.

    Raises
    ------
    ValueError
        The models' variables differ, or a variable's state sets differ (naming it and both sets).

    Examples
    --------
    >>> from pgmpy.models import DiscreteBayesianNetwork
    >>> from pgmpy.factors.discrete import TabularCPD
    >>> def coin(p):
    ...     bn = DiscreteBayesianNetwork(); bn.add_node("A")
    ...     bn.add_cpds(TabularCPD("A", 2, [[p], [1 - p]])); return bn
    >>> round(kl_divergence(coin(0.5), coin(0.5)), 12)
    0.0
    """
    return _m.kl_divergence(*_aligned(p, q))


def total_variation(p, q, exact_max_cells: int = 2**22, n_samples: int = 100_000, seed=None, method: str = "auto") -> float:
    """Total-variation distance between two pgmpy models: exact for small joints, otherwise the
    sampling estimate P(A) - Q(A) with A = {x : p(x) > q(x)} (see ``ppgm.total_variation``).

    States are aligned by name, as :func:`kl_divergence` aligns them: the two models may list their
    variables and states in different orders.

    Parameters
    ----------
    p, q : DiscreteMarkovNetwork or DiscreteBayesianNetwork
        Same variables with the same state names, in any order.
    exact_max_cells : int
        Largest joint table computed exactly.
    n_samples : int
        Draws from each side for the sampling estimate.
    seed : int or numpy.random.Generator, optional
    method : {"auto", "exact", "sample"}

    Returns
    -------
    float

    Raises
    ------
    ValueError
        The models' variables differ, or a variable's state sets differ (naming it and both sets).

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> total_variation(load_bif_example("asia"), load_bif_example("asia"))
    0.0
    """
    checks.count(exact_max_cells, "exact_max_cells")
    checks.count(n_samples, "n_samples")
    checks.choice(method, "method", ("auto", "exact", "sample"))
    as_generator(seed)  # checked even where the exact method does not draw
    pe, qe = _aligned(p, q)
    return _m.total_variation(pe, qe, exact_max_cells=exact_max_cells, n_samples=n_samples, seed=seed, method=method)


def _aligned(p, q):
    """Engine models of p and q on p's domain (q's variables and states re-ordered to match)."""
    pe, qe = to_engine(p, "p"), to_engine(q, "q")
    if pe.domain != qe.domain or pe.domain.state_names != qe.domain.state_names:
        qe = _reorder_like(qe, pe.domain)
    return pe, qe


def _reorder_like(model, domain):
    """The same model on ``domain``: same variables and state sets, possibly in another order."""
    from ppgm.models.bayes import BayesianNetwork
    from ppgm.factors.factor import Factor
    from ppgm.models.markov import MarkovNetwork

    src = model.domain
    if set(src.variables) != set(domain.variables):
        only_p = [v for v in domain.variables if v not in src.variables]
        only_q = [v for v in src.variables if v not in domain.variables]
        raise ValueError(f"p, q: the two models must have the same variables; only p has {only_p}, only q has {only_q}")
    for v in domain.variables:
        have, want = list(src.state_names[v]), list(domain.state_names[v])
        if len(have) != len(want) or set(have) != set(want):
            raise ValueError(f"p, q: variable {v!r} has the states {want} in p and {have} in q; states are matched by name "
                             "(in any order), so the two sets must be the same")

    def reindex(values, variables):
        for ax, v in enumerate(variables):
            pos = {s: i for i, s in enumerate(src.state_names[v])}
            values = np.take(values, [pos[s] for s in domain.state_names[v]], axis=ax)
        return values

    if isinstance(model, BayesianNetwork):
        cpts = {v: reindex(model.cpts[v], model.parents[v] + (v,)) for v in model.order}
        return BayesianNetwork(domain, model.parents, cpts)
    return MarkovNetwork(domain, [Factor(f.variables, reindex(f.values, f.variables)) for f in model.factors])


def marginals(model, sets=2, *, value: str = "prob", columns=None, max_cells: int | None = DEFAULT_MAX_CELLS) -> pd.DataFrame:
    """A fitted model's marginal tables as one long DataFrame: one row per cell, ``var1, val1, var2,
    val2, prob`` (a narrower set's extra columns ``""``), by exact inference (one calibration of the
    junction tree of :class:`ppgm.adapters.LogBeliefPropagation`; a set inside a clique is read off its
    belief). The layout :meth:`NoisyTables.to_table` writes and :meth:`NoisyTables.from_table` reads.

    Parameters
    ----------
    model : DiscreteMarkovNetwork or DiscreteBayesianNetwork
    sets : int or list of tuple
        The variable sets: a size (2, the default: every pair of variables, in the model's order;
        1: every variable) or a list of tuples of variables.
    value : str
        The name of the probability column.
    columns : sequence of str, optional
        Names of ``var1, val1, var2, val2, ...`` (default those).
    max_cells : int or None
        Memory budget of the junction tree (see :class:`ppgm.adapters.LogBeliefPropagation`).

    Returns
    -------
    pandas.DataFrame
        Each set's cells in its order (the last variable's state changing fastest), states as the
        model names them; each set's probabilities sum to one.

    Raises
    ------
    TypeError, ValueError
        Not a pgmpy model, an unknown or repeated variable, a size outside 1 .. the variables.

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> m = marginals(load_bif_example("asia"), [("smoke", "lung")])
    >>> m.columns.tolist(), len(m), round(float(m["prob"].sum()), 12)
    (['var1', 'val1', 'var2', 'val2', 'prob'], 4, 1.0)
    >>> len(marginals(load_bif_example("asia")))  # every pair of the 8 binary variables
    112
    """
    from .inference import LogBeliefPropagation

    bp = LogBeliefPropagation(model, max_cells=max_cells)
    variables = list(bp.domain.variables)
    if isinstance(sets, (int, np.integer)) and not isinstance(sets, bool):
        k = int(sets)
        if not 1 <= k <= len(variables):
            raise ValueError(f"sets: expected a size between 1 and {len(variables)} (the model's variables), got {k}")
        scopes = list(combinations(variables, k))
    else:
        if isinstance(sets, (str, bytes)) or not isinstance(sets, (list, tuple)) or not sets:
            raise TypeError(f"sets: expected a size (int) or a non-empty list of tuples of variables, got {sets!r:.80}")
        scopes = [bp.domain.check(checks.names([s] if isinstance(s, str) else list(s), "sets"), "sets") for s in sets]
    cal = bp._calibration(())
    tables = cal.marginals(scopes)
    names = bp.domain.state_names
    return long_frame([(f.variables, f.values, names) for f in tables], value, columns)
