"""Differentially private release of contingency tables: Laplace and Gaussian mechanisms and a
privacy accountant.

Sensitivity. One individual changes each of the T released clique tables by at most their total
weight w in one cell (w = 1 when each person is one record; the CGM paper's wifi study gives each of
a user's K records weight 1/K, so w = 1 per user). Adding or removing that person moves the
concatenated tables by w T in L1 and by w sqrt(T) in L2.

Accounting. Pure epsilon-DP budgets add up; so do zero-concentrated (rho-zCDP) budgets. A Laplace
release at epsilon is epsilon-DP and epsilon^2 / 2-zCDP; a Gaussian release with L2 sensitivity D and
noise sigma is D^2 / (2 sigma^2)-zCDP. An (epsilon, delta) target is turned into rho by solving
epsilon = rho + 2 sqrt(rho log(1/delta)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .factor import Factor
from .measurement import Measurement
from .rng import as_generator


class BudgetExceeded(ValueError):
    """A release would spend more privacy budget than the accountant has left."""


def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest rho whose zCDP guarantee implies (epsilon, delta)-DP.

    Examples
    --------
    >>> rho = rho_from_epsilon_delta(1.0, 1e-6)
    >>> round(rho + 2 * math.sqrt(rho * math.log(1e6)), 12)
    1.0
    """
    _positive(epsilon, "epsilon")
    if not 0 < delta < 1:
        raise ValueError(f"delta: expected a number in (0, 1), got {delta!r}")
    L = math.log(1 / delta)
    return (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2


def _positive(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"{name}: expected a positive number, got {x!r}")
    return float(x)


@dataclass
class PrivacyAccountant:
    """Tracks the privacy spent by releases and refuses one that would exceed the budget.

    Give either ``epsilon`` alone (pure DP: only Laplace releases), ``rho`` (zCDP), or ``epsilon``
    and ``delta`` (tracked as the equivalent rho).

    Examples
    --------
    >>> acc = PrivacyAccountant(epsilon=1.0)
    >>> acc.spend(epsilon=0.6, what="first release")
    >>> acc.remaining
    0.4
    >>> acc.spend(epsilon=0.5)
    Traceback (most recent call last):
    ...
    ppgm.mechanisms.BudgetExceeded: the release costs epsilon = 0.5 but only 0.4 of the budget epsilon = 1 is left
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    ledger: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rho is not None:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError("rho: give either rho, or epsilon (and optionally delta), not both")
            self.rho = _positive(self.rho, "rho")
            self.kind, self.budget = "rho", self.rho
        elif self.epsilon is not None:
            self.epsilon = _positive(self.epsilon, "epsilon")
            if self.delta is None:
                self.kind, self.budget = "epsilon", self.epsilon
            else:
                self.kind, self.budget = "rho", rho_from_epsilon_delta(self.epsilon, self.delta)
        else:
            raise ValueError("epsilon or rho: the accountant needs a budget")

    @property
    def spent(self) -> float:
        return float(sum(e["cost"] for e in self.ledger))

    @property
    def remaining(self) -> float:
        return round(self.budget - self.spent, 12)

    def spend(self, epsilon: float | None = None, rho: float | None = None, what: str = "") -> None:
        """Record a release costing ``epsilon`` (pure DP) or ``rho`` (zCDP); raise if over budget."""
        if self.kind == "epsilon":
            if rho is not None:
                raise BudgetExceeded("a zCDP (Gaussian) release cannot be charged to a pure epsilon-DP budget")
            cost, unit = _positive(epsilon, "epsilon"), "epsilon"
        else:
            cost = _positive(rho, "rho") if rho is not None else _positive(epsilon, "epsilon") ** 2 / 2
            unit = "rho"
        if cost > self.remaining + 1e-12:
            raise BudgetExceeded(
                f"the release costs {unit} = {cost:.6g} but only {self.remaining:.6g} of the budget "
                f"{unit} = {self.budget:.6g} is left"
            )
        self.ledger.append({"what": what, "cost": cost, "unit": unit})


def _check_tables(tables: Sequence[Factor]) -> list[Factor]:
    tables = list(tables)
    if not tables:
        raise ValueError("tables: nothing to release")
    for i, t in enumerate(tables):
        if not isinstance(t, Factor):
            raise TypeError(f"tables[{i}]: expected a ppgm Factor of counts, got {type(t).__name__}")
        if not np.all(np.isfinite(t.values)) or (np.asarray(t.values) < 0).any():
            raise ValueError(f"tables[{i}]: counts must be finite and non-negative")
    return tables


@dataclass(frozen=True)
class LaplaceMechanism:
    """epsilon-DP release of T tables: i.i.d. Laplace(w T / epsilon) noise on every cell.

    Examples
    --------
    >>> mech = LaplaceMechanism(1.0)
    >>> mech.scale(n_tables=3)
    3.0
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive(self.epsilon, "epsilon"))

    noise = "laplace"

    def scale(self, n_tables: int, contribution: float = 1.0) -> float:
        """Laplace b for L1 sensitivity ``contribution * n_tables``."""
        return _positive(contribution, "contribution") * int(n_tables) / self.epsilon

    def charge(self, accountant: PrivacyAccountant, n_tables: int, contribution: float = 1.0) -> None:
        accountant.spend(epsilon=self.epsilon, what=f"Laplace release of {n_tables} tables")

    @property
    def cost(self) -> dict:
        """What one release spends: ``{"epsilon": ...}``."""
        return {"epsilon": self.epsilon}

    def release(self, tables: Sequence[Factor], seed=None, contribution: float = 1.0,
                accountant: PrivacyAccountant | None = None, n: float | None = None) -> list[Measurement]:
        """Noisy copies of ``tables`` as measurements carrying the noise model and scale."""
        return _release(self, tables, seed, contribution, accountant, n)


@dataclass(frozen=True)
class GaussianMechanism:
    """rho-zCDP (or (epsilon, delta)-DP) release of T tables: i.i.d. N(0, sigma^2) noise on every cell,
    sigma = w sqrt(T) / sqrt(2 rho).

    Examples
    --------
    >>> round(GaussianMechanism(rho=0.5).scale(n_tables=4), 6)
    2.0
    """

    rho: float | None = None
    epsilon: float | None = None
    delta: float | None = None

    noise = "gaussian"

    def __post_init__(self) -> None:
        if self.rho is not None:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError("rho: give either rho or (epsilon, delta), not both")
            object.__setattr__(self, "rho", _positive(self.rho, "rho"))
        elif self.epsilon is not None and self.delta is not None:
            object.__setattr__(self, "rho", rho_from_epsilon_delta(self.epsilon, self.delta))
        else:
            raise ValueError("rho or (epsilon, delta): the Gaussian mechanism needs a privacy level")

    def scale(self, n_tables: int, contribution: float = 1.0) -> float:
        """Gaussian sigma for L2 sensitivity ``contribution * sqrt(n_tables)``."""
        return _positive(contribution, "contribution") * math.sqrt(int(n_tables)) / math.sqrt(2 * self.rho)

    def charge(self, accountant: PrivacyAccountant, n_tables: int, contribution: float = 1.0) -> None:
        accountant.spend(rho=self.rho, what=f"Gaussian release of {n_tables} tables")

    @property
    def cost(self) -> dict:
        """What one release spends: ``{"rho": ...}`` (zCDP)."""
        return {"rho": self.rho}

    def release(self, tables: Sequence[Factor], seed=None, contribution: float = 1.0,
                accountant: PrivacyAccountant | None = None, n: float | None = None) -> list[Measurement]:
        """Noisy copies of ``tables`` as measurements carrying the noise model and scale."""
        return _release(self, tables, seed, contribution, accountant, n)


def _release(mech, tables, seed, contribution, accountant, n) -> list[Measurement]:
    tables = _check_tables(tables)
    scale = mech.scale(len(tables), contribution)
    if accountant is not None:
        mech.charge(accountant, len(tables), contribution)
    rng = as_generator(seed)
    out = []
    for t in tables:
        vals = np.asarray(t.values, dtype=float)
        noise = rng.laplace(0.0, scale, vals.shape) if mech.noise == "laplace" else rng.normal(0.0, scale, vals.shape)
        out.append(Measurement(t.variables, vals + noise, mech.noise, scale, n))
    return out
