"""Model distances for pgmpy models."""

from __future__ import annotations

from ppgm import metrics as _m

from .models import to_engine


def kl_divergence(p, q) -> float:
    """Exact KL(p || q) in nats between two pgmpy models (Markov or Bayesian) on the same variables.

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
    return _m.kl_divergence(to_engine(p), to_engine(q))


def total_variation(p, q, exact_max_cells: int = 2**22, n_samples: int = 100_000, seed=None, method: str = "auto") -> float:
    """Total-variation distance between two pgmpy models: exact for small joints, otherwise the
    sampling estimate P(A) - Q(A) with A = {x : p(x) > q(x)} (see ``ppgm.total_variation``)."""
    pe, qe = to_engine(p), to_engine(q)
    if pe.domain != qe.domain:
        qe = _reorder_like(qe, pe.domain)
    return _m.total_variation(pe, qe, exact_max_cells=exact_max_cells, n_samples=n_samples, seed=seed, method=method)


def _reorder_like(model, domain):
    """The same model on ``domain`` (same variables and states, other order)."""
    if set(model.domain.variables) != set(domain.variables) or any(
        model.domain.state_names[v] != domain.state_names[v] for v in domain.variables
    ):
        raise ValueError("p, q: the two models must have the same variables with the same states")
    from ppgm.bayes import BayesianNetwork
    from ppgm.markov import MarkovNetwork

    if isinstance(model, BayesianNetwork):
        return BayesianNetwork(domain, model.parents, model.cpts)
    return MarkovNetwork(domain, model.factors)
