"""Loopy belief propagation on the factor graph of a Markov network, in log space.

Factors with the same shape signature are stacked and updated together (one numpy operation per
signature and slot, no Python loop over factors or cells). Messages are normalised, so the
convergence test (largest change of a factor-to-variable message, in probability) does not depend
on the scale of the potentials. The Bethe free energy at the fixed point estimates log Z.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ..core import checks
from ..core.progress import ConvergenceWarning, progress_bar
from ..factors.factor import Factor, logsumexp
from ..models.markov import MarkovNetwork


def _xlogy(p: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """p * logq with 0 * (-inf) = 0."""
    with np.errstate(invalid="ignore"):
        return np.where(p > 0, p * logq, 0.0)


@dataclass
class _Group:
    members: np.ndarray  # indices into model.factors
    var_ids: np.ndarray  # (G, k) domain indices
    cards: tuple
    theta: np.ndarray  # (G, *cards)


@dataclass(frozen=True)
class LoopyResult:
    """Beliefs of loopy BP.

    Attributes
    ----------
    factor_log_beliefs : list of Factor
        Normalised log-belief of each model factor's scope, in ``model.factors`` order.
    variable_log_beliefs : list of numpy.ndarray
        Normalised log-belief of each domain variable.
    log_z : float
        Bethe approximation of log Z.
    converged : bool
    iterations : int
    history : list of float
        Largest message change at each iteration.

    Parameters
    ----------
    factor_log_beliefs : list of Factor
    variable_log_beliefs : list of numpy.ndarray
    log_z : float
    converged : bool
    iterations : int
    history : list of float

    Examples
    --------
    >>> from ppgm.models.random_models import grid
    >>> res = loopy_belief_propagation(grid(4, 4, seed=0))
    >>> res.converged, len(res.variable_log_beliefs)
    (True, 16)
    """

    factor_log_beliefs: list
    variable_log_beliefs: list
    log_z: float
    converged: bool
    iterations: int
    history: list = field(default_factory=list)


def loopy_belief_propagation(
    model: MarkovNetwork,
    damping: float = 0.5,
    tol: float = 1e-8,
    max_iter: int = 2000,
    progress: bool = False,
) -> LoopyResult:
    """Damped, flooding-schedule loopy BP.

    Parameters
    ----------
    model : MarkovNetwork
    damping : float in [0, 1)
        Weight of the old message in the (log-domain) update.
    tol : float
        Stop when no normalised factor-to-variable message changes by more than ``tol``.
    max_iter : int
    progress : bool
        Show a progress bar (drawn only in a terminal or a notebook; see ``ppgm.core.progress``).

    Returns
    -------
    LoopyResult
        With ``converged`` and the message-change ``history``; a run that stops at ``max_iter``
        raises a ``ppgm.ConvergenceWarning``.

    Examples
    --------
    >>> from ppgm.factors.domain import Domain
    >>> d = Domain(("A", "B"), (2, 2))
    >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]]))])
    >>> res = loopy_belief_propagation(m)
    >>> bool(round(res.log_z, 6) == round(float(np.log(10.0)), 6))
    True
    """
    checks.flag(progress, "progress")
    damping, tol = checks.damping(damping), checks.positive(tol, "tol")
    bp = _Messages.build(model)
    history: list = []
    converged = False
    it = 0
    bar = progress_bar(total=max_iter, desc="loopy BP", enabled=progress)
    for it in range(1, max_iter + 1):
        history.append(bp.sweep(damping))
        bar.update(1)
        if history[-1] < tol:
            converged = True
            break
    bar.close()
    if not converged:
        warnings.warn(f"loopy BP did not converge in {it} iterations (last message change "
                      f"{history[-1] if history else float('nan'):.3g} > tol {tol:.3g}); see the result's history",
                      ConvergenceWarning, stacklevel=2)
    factor_lb, var_lb, log_z = bp.bethe(model)
    return LoopyResult(factor_lb, var_lb, log_z, converged, it, history)


def _expand(m: np.ndarray, j: int, k: int) -> np.ndarray:
    """Messages (G, card) as axis ``j`` of a (G, *k cards) array."""
    shape = [m.shape[0]] + [1] * k
    shape[1 + j] = m.shape[1]
    return m.reshape(shape)


@dataclass
class _Messages:
    """Factor-to-variable log-messages of every factor group (factors of one shape are updated
    together), padded to the largest cardinality K."""

    groups: list
    fv: list
    mask: np.ndarray
    cards: np.ndarray

    @classmethod
    def build(cls, model: MarkovNetwork) -> "_Messages":
        dom = model.domain
        K = max(dom.cards)
        cards = np.asarray(dom.cards)
        mask = np.where(np.arange(K)[None, :] < cards[:, None], 0.0, -np.inf)
        by_shape: dict = {}
        for fi, f in enumerate(model.factors):
            by_shape.setdefault(f.shape, []).append(fi)
        groups = []
        for shape, members in by_shape.items():
            ids = np.asarray([dom.indices(model.factors[i].variables) for i in members], dtype=np.int64)
            theta = np.stack([model.factors[i].values for i in members]).astype(float)
            groups.append(_Group(np.asarray(members), ids.reshape(len(members), len(shape)), shape, theta))
        fv = [[np.zeros((len(g.members), K)) for _ in g.cards] for g in groups]
        return cls(groups, fv, mask, cards)

    def var_beliefs(self) -> np.ndarray:
        B = self.mask.copy()
        for g, msgs in zip(self.groups, self.fv):
            for j in range(len(g.cards)):
                np.add.at(B, g.var_ids[:, j], msgs[j])
        return B

    def var_to_factor(self, B: np.ndarray) -> list:
        out = []
        for g, msgs in zip(self.groups, self.fv):
            slot = []
            for j, c in enumerate(g.cards):
                with np.errstate(invalid="ignore"):
                    m = B[g.var_ids[:, j], :c] - msgs[j][:, :c]
                m = np.where(np.isnan(m), -np.inf, m)
                slot.append(m - logsumexp(m, axis=1, keepdims=True))
            out.append(slot)
        return out

    def sweep(self, damping: float) -> float:
        """One flooding update of every message; returns the largest change of a normalised message."""
        vf = self.var_to_factor(self.var_beliefs())
        delta = 0.0
        for g, msgs, inc in zip(self.groups, self.fv, vf):
            k = len(g.cards)
            for j, c in enumerate(g.cards):
                t = g.theta
                for l in range(k):
                    if l != j:
                        t = t + _expand(inc[l], l, k)
                axes = tuple(1 + l for l in range(k) if l != j)
                new = logsumexp(t, axis=axes) if axes else t
                new = new - logsumexp(new, axis=1, keepdims=True)
                old = msgs[j][:, :c]
                if damping > 0:
                    new = np.where(np.isneginf(new) | np.isneginf(old), new, (1 - damping) * new + damping * old)
                    new = new - logsumexp(new, axis=1, keepdims=True)
                delta = max(delta, float(np.max(np.abs(np.exp(new) - np.exp(old)), initial=0.0)))
                msgs[j][:, :c] = new
        return delta

    def bethe(self, model: MarkovNetwork) -> tuple[list, list, float]:
        """Factor and variable log-beliefs and the Bethe estimate of log Z."""
        n = len(model.domain)
        B = self.var_beliefs()
        LB = B - logsumexp(B, axis=1, keepdims=True)  # padded states stay -inf
        var_lb = [LB[i, : self.cards[i]] for i in range(n)]
        vf = self.var_to_factor(B)
        factor_lb: list = [None] * len(model.factors)
        energy = 0.0
        entropy = 0.0
        degree = np.zeros(n)
        for g, inc in zip(self.groups, vf):
            k = len(g.cards)
            t = g.theta
            for l in range(k):
                t = t + _expand(inc[l], l, k)
                degree += np.bincount(g.var_ids[:, l], minlength=n)
            lb = t - logsumexp(t, axis=tuple(range(1, k + 1)), keepdims=True)
            p = np.exp(lb)
            energy += float(np.sum(_xlogy(p, g.theta)))
            entropy -= float(np.sum(_xlogy(p, lb)))
            for row, fi in enumerate(g.members):
                factor_lb[fi] = Factor(model.factors[fi].variables, lb[row])
        entropy += float((degree - 1) @ np.sum(_xlogy(np.exp(LB), LB), axis=1))
        return factor_lb, var_lb, energy + entropy
