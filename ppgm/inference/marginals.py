"""One entry point for marginal inference: exact when it fits in memory, loopy BP otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from ..core import checks
from ..factors.factor import Factor
from ..models.markov import MarkovNetwork
from .junction_tree import DEFAULT_MAX_CELLS, Calibration, JunctionTree, JunctionTreeTooLarge
from .loopy import LoopyResult, loopy_belief_propagation


@dataclass(frozen=True)
class Marginals:
    """Marginals of a Markov network, exact or approximate.

    Attributes
    ----------
    method : str
        ``"junction_tree"`` or ``"loopy"``.
    log_z : float
        Exact log Z, or the Bethe estimate.
    note : str
        Why this method was used (for instance the automatic fallback and its reason).
    calibration : Calibration or None
    loopy : LoopyResult or None

    Parameters
    ----------
    model : MarkovNetwork
    method : str
    log_z : float
    note : str
    calibration : Calibration, optional
    loopy : LoopyResult, optional

    Examples
    --------
    >>> from ppgm.models.random_models import grid
    >>> res = infer(grid(6, 6, seed=0), max_cells=100)
    >>> res.method, res.note.startswith("fell back")
    ('loopy', True)
    """

    model: MarkovNetwork
    method: str
    log_z: float
    note: str
    calibration: Calibration | None = None
    loopy: LoopyResult | None = None

    def log_marginal(self, variables: Sequence[Hashable]) -> Factor:
        """Normalised log-marginal over ``variables``.

        Exact results answer any set of variables; loopy results answer subsets of one factor's
        scope (a ``ValueError`` otherwise).

        Parameters
        ----------
        variables : sequence

        Returns
        -------
        Factor

        Raises
        ------
        ValueError
            Loopy results answer only subsets of one factor's scope.

        Examples
        --------
        >>> from ppgm.models.random_models import third_order_chain
        >>> res = infer(third_order_chain(4, 2, seed=0))
        >>> round(float(np.exp(res.log_marginal(["X0"]).values).sum()), 12)
        1.0
        """
        if self.calibration is not None:
            return self.calibration.log_marginal(variables)
        variables = self.model.domain.check(variables)
        if self.loopy is None:  # pragma: no cover - a Marginals has a calibration or a loopy result
            raise ValueError("marginals: no calibration and no loopy result")
        if len(variables) == 1:
            i = self.model.domain.index(variables[0])
            return Factor(variables, self.loopy.variable_log_beliefs[i])
        for f in self.loopy.factor_log_beliefs:
            if set(variables) <= set(f.variables):
                return f.logsumexp_to(variables).normalized_log()
        raise ValueError(f"variables: loopy BP has no belief covering {variables}; ask for a subset of a factor scope")

    def marginal(self, variables: Sequence[Hashable]) -> Factor:
        """Probability table over ``variables``.

        Parameters
        ----------
        variables : sequence

        Returns
        -------
        Factor

        Examples
        --------
        >>> from ppgm.models.random_models import third_order_chain
        >>> res = infer(third_order_chain(4, 2, seed=0))
        >>> res.marginal(["X0", "X1"]).values.shape
        (2, 2)
        """
        cal = self.calibration
        if cal is not None and cal.tree.find_home(self.model.domain.check(variables)) is None:
            return cal.marginal(variables)  # out of clique: contracts probability tables (no huge products)
        f = self.log_marginal(variables)
        return Factor(f.variables, np.exp(f.values))

    def factor_marginals(self) -> list[Factor]:
        """Probability table over each model factor's scope, in ``model.factors`` order.

        Returns
        -------
        list of Factor

        Examples
        --------
        >>> from ppgm.models.random_models import third_order_chain
        >>> res = infer(third_order_chain(4, 2, seed=0))
        >>> len(res.factor_marginals()) == len(res.model.factors)
        True
        """
        return [self.marginal(f.variables) for f in self.model.factors]


def infer(
    model: MarkovNetwork,
    method: str = "auto",
    max_cells: int | None = DEFAULT_MAX_CELLS,
    tree: JunctionTree | None = None,
    damping: float = 0.5,
    tol: float = 1e-8,
    max_iter: int = 2000,
    progress: bool = False,
) -> Marginals:
    """Marginals and log Z of ``model``.

    Parameters
    ----------
    model : MarkovNetwork
    method : {"auto", "junction_tree", "loopy"}
        ``"auto"`` uses the junction tree unless its tables exceed ``max_cells``, then falls back to
        loopy BP and says so in ``Marginals.note``; ``"junction_tree"`` raises
        :class:`~ppgm.inference.junction_tree.JunctionTreeTooLarge` instead.
    max_cells : int or None
        Memory budget of the junction tree, in table entries.
    tree : JunctionTree, optional
        A tree already built for this graph (reused, not rebuilt).
    damping, tol, max_iter, progress
        Loopy BP settings.

    Returns
    -------
    Marginals

    Examples
    --------
    >>> from ppgm.models.random_models import grid
    >>> res = infer(grid(3, 3, seed=0))
    >>> res.method
    'junction_tree'
    """
    checks.flag(progress, "progress")
    checks.damping(damping)
    checks.positive(tol, "tol")
    if method not in ("auto", "junction_tree", "loopy"):
        raise ValueError(f"method: expected 'auto', 'junction_tree' or 'loopy', got {method!r}")
    note = ""
    if method != "loopy":
        try:
            jt = tree if tree is not None else JunctionTree.build(model.domain, model.scopes, max_cells=max_cells)
            cal = jt.calibrate(model)
            return Marginals(model, "junction_tree", cal.log_z, "exact", calibration=cal)
        except JunctionTreeTooLarge as err:
            if method == "junction_tree":
                raise
            note = f"fell back to loopy BP: {err}"
    res = loopy_belief_propagation(model, damping=damping, tol=tol, max_iter=max_iter, progress=progress)
    if not note:
        note = "loopy BP requested"
    if not res.converged:
        note += f"; loopy BP did not converge in {res.iterations} iterations (last change {res.history[-1]:.2e})"
    return Marginals(model, "loopy", res.log_z, note, loopy=res)
