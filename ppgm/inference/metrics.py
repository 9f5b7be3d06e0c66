"""Distances and scores between models and data: KL, entropy, log-likelihood, total variation, NLLH."""

from __future__ import annotations

import warnings

import numpy as np

from ..core.rng import as_generator
from ..factors.factor import Factor, align, logsumexp
from ..models.bayes import BayesianNetwork
from ..models.markov import MarkovNetwork
from .junction_tree import DEFAULT_MAX_CELLS, JunctionTree
from .sampling import sample


def _as_markov(model) -> MarkovNetwork:
    if isinstance(model, BayesianNetwork):
        return model.to_markov()
    if isinstance(model, MarkovNetwork):
        return model
    raise TypeError(f"expected a ppgm MarkovNetwork or BayesianNetwork, got {type(model).__name__}")


def _expected(p_marg: Factor, theta: Factor) -> float:
    """sum_x p(x) theta(x) with 0 * (-inf) = 0 and p > 0 on -inf giving -inf."""
    t = align(theta.values, theta.variables, p_marg.variables)
    t = np.broadcast_to(t, p_marg.shape)
    p = p_marg.values
    if np.any((p > 0) & np.isneginf(t)):
        return -np.inf
    return float(np.sum(np.where(p > 0, p * np.where(np.isneginf(t), 0.0, t), 0.0)))


def _forbidden_cells(p_marg: Factor, theta: Factor, domain) -> list[str]:
    """The cells of ``theta``'s scope where ``p`` has mass and ``theta`` is -inf (q forbids them), as
    ``"A=a, B=b (p = 0.12)"``, the most probable first."""
    t = np.broadcast_to(align(theta.values, theta.variables, p_marg.variables), p_marg.shape)
    bad = (p_marg.values > 0) & np.isneginf(t)
    idx = np.argwhere(bad)
    mass = p_marg.values[bad]
    names = domain.state_names or {}
    out = []
    for j in np.argsort(-mass, kind="stable"):
        cell = ", ".join(f"{v}={names[v][k] if v in names else k}" for v, k in zip(p_marg.variables, idx[j]))
        out.append(f"{cell} (p = {mass[j]:.3g})")
    return out


def kl_divergence(p, q, max_cells: int | None = DEFAULT_MAX_CELLS) -> float:
    """Exact KL(p || q) in nats between two models on the same variables.

    p is calibrated on the junction tree of the union of both models' scopes, so that
    E_p[theta_q] is exact even when q has cliques p does not.

    Parameters
    ----------
    p, q : MarkovNetwork or BayesianNetwork
        On the same domain.
    max_cells : int or None
        Budget of the union junction tree.

    Returns
    -------
    float
        ``inf`` when q gives probability zero to a configuration p allows, with a warning naming the
        first such cells (a fit without smoothing: refit with a pseudo-count).

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> p = third_order_chain(5, 3, seed=0)
    >>> kl_divergence(p, p) < 1e-12
    True
    """
    p, q = _as_markov(p), _as_markov(q)
    if set(p.domain.variables) != set(q.domain.variables) or any(
        p.domain.card(v) != q.domain.card(v) for v in p.domain.variables
    ):
        raise ValueError("p, q: the two models must have the same variables with the same cardinalities")
    union = JunctionTree.build(p.domain, p.scopes + q.scopes, max_cells=max_cells)
    cal_p = union.calibrate(p)
    log_zq = JunctionTree.build(p.domain, q.scopes, max_cells=max_cells).calibrate(
        MarkovNetwork(p.domain, q.factors)
    ).log_z
    e_p = sum(_expected(cal_p.marginal(f.variables), f) for f in p.factors)
    e_q = sum(_expected(cal_p.marginal(f.variables), f) for f in q.factors)
    if e_q == -np.inf:
        cells = [c for f in q.factors for c in _forbidden_cells(cal_p.marginal(f.variables), f, p.domain)]
        warnings.warn(f"kl_divergence is infinite: q gives probability zero to cells where p has mass, e.g. "
                      f"{'; '.join(cells[:3])}{f' ({len(cells)} cells in all)' if len(cells) > 3 else ''}. A fit with zero cells "
                      "usually lacks smoothing: refit q with a pseudo-count (ppgm.adapters.MarkovNetworkEstimator("
                      "pseudo_count=...), pgmpy's BayesianEstimator(prior_type='BDeu' or 'dirichlet')), or compare with "
                      "total_variation, which stays finite", stacklevel=2)
        return np.inf
    return max(float(e_p - cal_p.log_z - e_q + log_zq), 0.0)


def entropy(model, max_cells: int | None = DEFAULT_MAX_CELLS) -> float:
    """Exact entropy in nats: log Z - E_p[sum_C theta_C].

    Parameters
    ----------
    model : MarkovNetwork or BayesianNetwork
    max_cells : int or None

    Returns
    -------
    float

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> m = MarkovNetwork(Domain(("A", "B"), (2, 2)), [Factor(("A", "B"), np.zeros((2, 2)))])
    >>> round(entropy(m), 6) == round(float(np.log(4)), 6)
    True
    """
    m = _as_markov(model)
    cal = JunctionTree.build(m.domain, m.scopes, max_cells=max_cells).calibrate(m)
    return float(cal.log_z - sum(_expected(cal.marginal(f.variables), f) for f in m.factors))


def log_likelihood(model, records, max_cells: int | None = DEFAULT_MAX_CELLS) -> float:
    """Average log-likelihood (nats per record) of integer-coded ``records`` under ``model``.

    Parameters
    ----------
    model : MarkovNetwork or BayesianNetwork
    records : array of int
    max_cells : int or None

    Returns
    -------
    float

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> m = MarkovNetwork(Domain(("A",), (4,)), [Factor(("A",), np.zeros(4))])
    >>> round(log_likelihood(m, [[0], [3]]), 6) == round(float(-np.log(4)), 6)
    True
    """
    return float(np.mean(_log_prob_fn(model, max_cells)(records)))


def _log_prob_fn(model, max_cells):
    if isinstance(model, BayesianNetwork):
        return model.log_prob
    m = _as_markov(model)
    lz = JunctionTree.build(m.domain, m.scopes, max_cells=max_cells).calibrate(m).log_z
    return lambda rec: m.unnormalized_log_prob(rec) - lz


def total_variation(
    p,
    q,
    exact_max_cells: int = 2**22,
    n_samples: int = 100_000,
    seed=None,
    method: str = "auto",
) -> float:
    """Total-variation distance between two models on the same domain.

    ``method="exact"`` enumerates the joint (allowed up to ``exact_max_cells`` configurations);
    ``method="sample"`` draws ``n_samples`` from each side and returns
    P(A) - Q(A) for A = {x : p(x) > q(x)}, estimated from the two samples (unbiased for TV);
    ``"auto"`` picks exact when the joint is small enough.

    Parameters
    ----------
    p, q : MarkovNetwork or BayesianNetwork
    exact_max_cells : int
    n_samples : int
    seed : int or numpy.random.Generator, optional
    method : {"auto", "exact", "sample"}

    Returns
    -------
    float

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> p = random_bayesian_network(4, seed=0)
    >>> total_variation(p, p)
    0.0
    """
    if method not in ("auto", "exact", "sample"):
        raise ValueError(f"method: expected 'auto', 'exact' or 'sample', got {method!r}")
    pm, qm = _as_markov(p), _as_markov(q)
    if pm.domain != qm.domain:
        raise ValueError("p, q: the two models must have the same domain (variables, order, cardinalities)")
    size = pm.domain.size(pm.domain.variables)
    if method == "exact" or (method == "auto" and size <= exact_max_cells):
        lp = pm.joint_log_table(max(exact_max_cells, size) if method == "exact" else exact_max_cells)
        lq = qm.joint_log_table(max(exact_max_cells, size) if method == "exact" else exact_max_cells)
        pp = np.exp(lp - logsumexp(lp))
        qq = np.exp(lq - logsumexp(lq))
        return float(0.5 * np.abs(pp - qq).sum())
    if n_samples < 1:
        raise ValueError(f"n_samples: expected a positive integer, got {n_samples}")
    rng = as_generator(seed)
    log_p, log_q = _log_prob_fn(p, None), _log_prob_fn(q, None)
    xp = sample(p, n_samples, rng)
    xq = sample(q, n_samples, rng)
    in_a_p = log_p(xp) > log_q(xp)
    in_a_q = log_p(xq) > log_q(xq)
    return float(max(in_a_p.mean() - in_a_q.mean(), 0.0))


def nllh(y_true, p_pred, clip: float = 1e-6) -> float:
    """Normalised log-likelihood of a binary classifier: 1 - logloss / H(Y).

    ``H(Y)`` is the entropy of the evaluated labels' base rate; predictions are clipped to
    ``[clip, 1 - clip]``. 0 means no better than the base rate, 1 is perfect.

    Parameters
    ----------
    y_true : array-like of 0 / 1
    p_pred : array-like
        Predicted P(y = 1).
    clip : float
        Probabilities are clipped into [clip, 1 - clip].

    Returns
    -------
    float

    Examples
    --------
    >>> round(nllh([0, 1, 1, 0], [0.5, 0.5, 0.5, 0.5]), 12)
    0.0
    """
    y = np.asarray(y_true, dtype=float).ravel()
    p = np.asarray(p_pred, dtype=float).ravel()
    if y.shape != p.shape:
        raise ValueError(f"p_pred: expected {y.shape[0]} predictions, got {p.shape[0]}")
    if y.size == 0:
        raise ValueError("y_true: no labels")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y_true: labels must be 0 or 1")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p_pred: probabilities must lie in [0, 1]")
    if not 0 < clip < 0.5:
        raise ValueError(f"clip: expected a number in (0, 0.5), got {clip}")
    p = np.clip(p, clip, 1 - clip)
    logloss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    base = y.mean()
    if base in (0.0, 1.0):
        raise ValueError("y_true: all labels are equal, H(Y) = 0 and NLLH is undefined")
    h = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    return float(1 - logloss / h)
