"""Log-linear discrete Markov networks: one log-potential table per clique."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..factors.domain import Domain
from ..factors.factor import Factor
from ..factors.records import cell_index, check_records


@dataclass(frozen=True)
class MarkovNetwork:
    """p(x) proportional to exp(sum_C theta_C(x_C)).

    Parameters
    ----------
    domain : Domain
        The variables.
    factors : sequence of Factor
        Log-potentials ``theta_C``; ``-inf`` marks an impossible cell. Several factors may share a scope.

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 2))
    >>> m = MarkovNetwork(d, [Factor(("A", "B"), np.log([[1.0, 2.0], [3.0, 4.0]]))])
    >>> m.scopes
    [('A', 'B')]
    """

    domain: Domain
    factors: Sequence[Factor]

    def __post_init__(self) -> None:
        factors = tuple(self.factors)
        for i, f in enumerate(factors):
            if not isinstance(f, Factor):
                raise TypeError(f"factors[{i}]: expected a ppgm Factor, got {type(f).__name__}")
            self.domain.check(f.variables, f"factors[{i}].variables")
            expected = self.domain.shape(f.variables)
            if f.shape != expected:
                raise ValueError(f"factors[{i}]: scope {f.variables} needs shape {expected}, got {f.shape}")
        every = np.concatenate([np.ravel(f.values) for f in factors]) if factors else np.zeros(0)  # one check for all
        if np.isnan(every).any() or np.isposinf(every).any():
            i = next(i for i, f in enumerate(factors) if np.isnan(f.values).any() or np.isposinf(f.values).any())
            raise ValueError(f"factors[{i}]: log-potentials must be finite or -inf (found NaN or +inf)")
        object.__setattr__(self, "factors", factors)

    @classmethod
    def _unchecked(cls, domain: Domain, factors: tuple) -> "MarkovNetwork":
        """A network of factors the engine made itself over ``domain`` (known scopes and shapes, finite
        values): no checks, for the fits that rebuild one per iteration."""
        m = object.__new__(cls)
        object.__setattr__(m, "domain", domain)
        object.__setattr__(m, "factors", tuple(factors))
        return m

    @property
    def scopes(self) -> list:
        return [f.variables for f in self.factors]

    def unnormalized_log_prob(self, records) -> np.ndarray:
        """The sum of the log-potentials at every record (log p(x) + log Z).

        Parameters
        ----------
        records : array of int, shape (N, len(domain))

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> from ppgm.models.random_models import third_order_chain
        >>> mn = third_order_chain(4, 2, seed=0)
        >>> mn.unnormalized_log_prob(np.zeros((2, 4), int)).shape
        (2,)
        """
        rec = check_records(records, self.domain)
        out = np.zeros(len(rec))
        for f in self.factors:
            out += f.values.ravel()[cell_index(rec, self.domain.indices(f.variables), f.shape)]
        return out

    def joint_log_table(self, max_cells: int = 2**24) -> np.ndarray:
        """The full joint table of unnormalised log-probabilities (its log-sum-exp is log Z; for tests on small networks).

        Parameters
        ----------
        max_cells : int
            Refuse joints larger than this.

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> from ppgm.models.random_models import third_order_chain
        >>> mn = third_order_chain(4, 2, seed=0)
        >>> from ppgm.inference.marginals import infer
        >>> bool(np.isclose(np.log(np.exp(mn.joint_log_table()).sum()), infer(mn).log_z))
        True
        """
        size = self.domain.size(self.domain.variables)
        if size > max_cells:
            raise MemoryError(f"the joint table has {size} cells, more than max_cells={max_cells}")
        out = np.zeros(self.domain.cards)
        for f in self.factors:
            out = out + f.expand(self.domain.variables, self.domain.cards)
        return out

    def with_factors(self, factors: Sequence[Factor]) -> "MarkovNetwork":
        """The same domain with other factors.

        Parameters
        ----------
        factors : sequence of Factor

        Returns
        -------
        MarkovNetwork

        Examples
        --------
        >>> from ppgm.models.random_models import third_order_chain
        >>> mn = third_order_chain(4, 2, seed=0)
        >>> len(mn.with_factors(mn.factors[:2]).factors)
        2
        """
        return MarkovNetwork(self.domain, tuple(factors))
