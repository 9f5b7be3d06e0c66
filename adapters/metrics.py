"""Model distances for pgmpy models."""

from __future__ import annotations

import numpy as np

from ppgm.core import checks
from ppgm.inference import metrics as _m
from ppgm.core.rng import as_generator

from .models import to_engine


def kl_divergence(p, q) -> float:
    """Exact KL(p || q) in nats between two pgmpy models (Markov or Bayesian) on the same variables.

    Parameters
    ----------
    p, q : DiscreteMarkovNetwork or DiscreteBayesianNetwork
        Same variables with the same states (in any order).

    Returns
    -------
    float

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

    Parameters
    ----------
    p, q : DiscreteMarkovNetwork or DiscreteBayesianNetwork
    exact_max_cells : int
        Largest joint table computed exactly.
    n_samples : int
        Draws from each side for the sampling estimate.
    seed : int or numpy.random.Generator, optional
    method : {"auto", "exact", "sample"}

    Returns
    -------
    float

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
    if set(src.variables) != set(domain.variables) or any(
        set(src.state_names[v]) != set(domain.state_names[v]) or src.card(v) != domain.card(v) for v in domain.variables
    ):
        raise ValueError("p, q: the two models must have the same variables with the same states")

    def reindex(values, variables):
        for ax, v in enumerate(variables):
            pos = {s: i for i, s in enumerate(src.state_names[v])}
            values = np.take(values, [pos[s] for s in domain.state_names[v]], axis=ax)
        return values

    if isinstance(model, BayesianNetwork):
        cpts = {v: reindex(model.cpts[v], model.parents[v] + (v,)) for v in model.order}
        return BayesianNetwork(domain, model.parents, cpts)
    return MarkovNetwork(domain, [Factor(f.variables, reindex(f.values, f.variables)) for f in model.factors])
