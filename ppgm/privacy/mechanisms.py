"""Differentially private release of contingency tables: the discrete Laplace and discrete Gaussian
mechanisms, and a privacy accountant.

Unit of privacy and sensitivity. Neighbouring data sets differ by one individual's records (added or
removed). Each individual touches each of the T released tables with total weight at most w: one
record (w = 1), at most k records kept per person (w = k), or a person's K records weighted 1/K each
(w = 1, the CGM paper's choice). That bound must be public (see ``ppgm.privacy.contributions``); it is never
read from the data. One individual then moves the concatenated tables by at most w T in L1 and
w sqrt(T) in L2.

Noise. Counts are integers and get integer noise sampled exactly (``ppgm.models.noise``): discrete
Laplace with scale b = w T / epsilon is epsilon-DP; the discrete Gaussian with sigma = w sqrt(T) /
sqrt(2 rho) is rho-zCDP (Canonne, Kamath and Steinke 2020). Without a seed the noise comes from
OpenDP's samplers and the operating system's random source; a seed gives reproducible noise and a
release that is not private (a :class:`NotPrivateWarning` says so).

Accounting. Pure epsilon-DP budgets add up, and so do zCDP budgets; an epsilon-DP release is
epsilon^2 / 2-zCDP. A zCDP guarantee is turned into (epsilon, delta)-DP with the tight conversion of
Canonne, Kamath and Steinke (2020, Corollary 13), delta = inf over alpha > 1 of
exp((alpha - 1)(alpha rho - epsilon)) / alpha * (1 - 1 / alpha)^(alpha - 1).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from ..core.rng import as_generator
from ..factors.factor import Factor
from ..models.measurement import Measurement
from ..models.noise import add_noise


class BudgetExceeded(ValueError):
    """A release would spend more privacy budget than the accountant has left.

    Examples
    --------
    >>> acc = PrivacyAccountant(epsilon=0.5)
    >>> try:
    ...     acc.spend(epsilon=1.0, what="tables")
    ... except BudgetExceeded as err:
    ...     print(err)
    the release costs epsilon = 1 (tables) but only 0.5 of the budget epsilon = 0.5 is left
    """


class NotPrivateWarning(UserWarning):
    """A release was made with seeded (reproducible) noise: it is not differentially private.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = LaplaceMechanism(1.0).release([Factor(("A",), np.array([3, 4]))], seed=0)
    >>> caught[0].category.__name__
    'NotPrivateWarning'
    """


class StatesFromDataWarning(UserWarning):
    """A private release's declared states look read from the records it releases: every released
    column with more than two states is declared with exactly the values present, sorted or in the
    order they first appear. Such a domain discloses which values occur (a value only one person has,
    the largest age); the noise does not hide it. Declare the states from a public source (a
    codebook, the form's categories), values no record may have included.

    Examples
    --------
    >>> issubclass(StatesFromDataWarning, UserWarning)
    True
    """


def _positive(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"{name}: expected a positive number, got {x!r}")
    return float(x)


#: Largest privacy budget (epsilon or rho) taken: beyond it the noise is below anything a float
#: holds next to a count (and no privacy is left to speak of).
MAX_BUDGET = 1e100


def _budget(x, name: str) -> float:
    """A privacy budget: a positive number up to ``MAX_BUDGET``."""
    v = _positive(x, name)
    if v > MAX_BUDGET:
        raise ValueError(f"{name}: expected at most {MAX_BUDGET:g} (a larger budget adds no noise a float can hold), got {x!r}")
    return v


def _check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or not 0 < delta < 1:
        raise ValueError(f"delta: expected a number in (0, 1), got {delta!r}")
    return float(delta)


def _log_delta(rho: float, epsilon: float) -> float:
    """log of the tight delta of rho-zCDP at epsilon (minimised over the Renyi order alpha)."""

    def f(log_am1):  # alpha = 1 + exp(log_am1) keeps alpha > 1
        a = 1.0 + math.exp(log_am1)
        return (a - 1) * (a * rho - epsilon) - math.log(a) + (a - 1) * math.log1p(-1 / a)

    # the minimiser alpha* is near (epsilon + rho) / (2 rho); search a wide bracket around it in log(alpha - 1)
    centre = math.log(max((epsilon + rho) / (2 * rho) - 1, 1e-6))
    res = minimize_scalar(f, bounds=(min(centre - 20, -20.0), centre + 20), method="bounded",
                          options={"xatol": 1e-10})
    return min(float(res.fun), 0.0)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP, by the tight conversion
    (Canonne, Kamath and Steinke 2020, Corollary 13).

    Parameters
    ----------
    rho : float
    delta : float

    Returns
    -------
    float

    Examples
    --------
    >>> round(zcdp_epsilon(0.5, 1e-6), 4)   # the simple bound rho + 2 sqrt(rho log(1/delta)) gives 5.7565
    5.2215
    """
    rho, delta = _budget(rho, "rho"), _check_delta(delta)
    target = math.log(delta)
    if _log_delta(rho, 0.0) <= target:
        return 0.0
    hi = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # the simple bound is always valid
    return float(brentq(lambda e: _log_delta(rho, e) - target, 0.0, hi, xtol=1e-12, rtol=1e-12))


def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest rho whose zCDP guarantee implies (epsilon, delta)-DP under the tight conversion
    (the inverse of :func:`zcdp_epsilon`).

    Parameters
    ----------
    epsilon : float
    delta : float

    Returns
    -------
    float

    Examples
    --------
    >>> rho = rho_from_epsilon_delta(1.0, 1e-6)
    >>> round(zcdp_epsilon(rho, 1e-6), 9)
    1.0
    """
    epsilon, delta = _budget(epsilon, "epsilon"), _check_delta(delta)
    L = math.log(1 / delta)
    lo = (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2  # the simple conversion's rho: feasible
    hi = epsilon  # rho >= epsilon never gives epsilon
    if zcdp_epsilon(hi, delta) <= epsilon:
        return hi
    return float(brentq(lambda r: zcdp_epsilon(r, delta) - epsilon, lo, hi, xtol=1e-14, rtol=1e-12))


@dataclass
class PrivacyAccountant:
    """Tracks the privacy spent by releases and refuses one that would exceed the budget.

    Give ``epsilon`` alone (pure DP: only Laplace releases), ``rho`` (zCDP), or ``epsilon`` and
    ``delta`` (tracked in zCDP as the largest rho that implies them, by the tight conversion).
    Every part of a release is in :attr:`ledger`: charged parts with their cost, parts the caller
    declared public with cost 0.

    Parameters
    ----------
    epsilon : float, optional
    delta : float, optional
    rho : float, optional
        The budget: ``epsilon`` (pure DP), ``rho`` (zCDP) or ``epsilon`` and ``delta``.
    ledger : list
        Every charged or declared part so far.

    Examples
    --------
    >>> acc = PrivacyAccountant(epsilon=1.0)
    >>> acc.spend(epsilon=0.6, what="first release")
    >>> acc.remaining
    0.4
    >>> acc.spend(epsilon=0.5)
    Traceback (most recent call last):
    ...
    ppgm.privacy.mechanisms.BudgetExceeded: the release costs epsilon = 0.5 but only 0.4 of the budget epsilon = 1 is left
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    ledger: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rho is not None:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError("rho: give either rho, or epsilon (and optionally delta), not both")
            self.rho = _budget(self.rho, "rho")
            self.kind, self.budget = "rho", self.rho
        elif self.epsilon is not None:
            self.epsilon = _budget(self.epsilon, "epsilon")
            if self.delta is None:
                self.kind, self.budget = "epsilon", self.epsilon
            else:
                self.delta = _check_delta(self.delta)
                self.kind, self.budget = "rho", rho_from_epsilon_delta(self.epsilon, self.delta)
        elif self.delta is not None:
            raise ValueError("delta: give epsilon with it")
        else:
            raise ValueError("epsilon or rho: the accountant needs a budget")

    @property
    def spent(self) -> float:
        """Total cost so far, in the accountant's unit (``kind``: epsilon or rho)."""
        return float(sum(e["cost"] for e in self.ledger))

    @property
    def remaining(self) -> float:
        return round(self.budget - self.spent, 12)

    def _cost(self, part: dict) -> float:
        """One part's cost in this accountant's unit; raises if it cannot be charged here."""
        if "epsilon" in part and "rho" in part:
            raise ValueError("spend: give epsilon or rho, not both")
        if "epsilon" in part:
            eps = _budget(part["epsilon"], "epsilon")
            return eps if self.kind == "epsilon" else eps**2 / 2
        if "rho" in part:
            if self.kind == "epsilon":
                raise BudgetExceeded("a zCDP (Gaussian) release cannot be charged to a pure epsilon-DP budget")
            return _budget(part["rho"], "rho")
        raise ValueError("spend: expected the cost as epsilon or rho")

    def charge(self, parts: Sequence[dict]) -> None:
        """Charge all ``parts`` of one release at once, or none of them.

        Parameters
        ----------
        parts : sequence of dict
            ``{"what": ..., "epsilon": ...}``, ``{"what": ..., "rho": ...}`` or ``{"what": ...,
            "public": True}`` (declared public by the caller: recorded at cost 0).

        Returns
        -------
        None

        Raises
        ------
        BudgetExceeded
            The parts together cost more than is left; nothing is charged.

        Examples
        --------
        >>> acc = PrivacyAccountant(epsilon=1.0)
        >>> acc.charge([{"what": "tables", "epsilon": 0.9}, {"what": "N", "public": True}])
        >>> [e["what"] for e in acc.ledger], acc.remaining
        (['tables', 'N'], 0.1)
        """
        if isinstance(parts, (str, bytes, Mapping)) or not isinstance(parts, Sequence):
            raise TypeError(f"parts: expected a list of dicts, one per published part, got {parts!r:.80}")
        for i, p in enumerate(parts):
            if not isinstance(p, Mapping):
                raise TypeError(f"parts[{i}]: expected a dict such as {{'what': 'tables', 'epsilon': 1.0}}, got {p!r:.80}")
        costs = [0.0 if p.get("public") else self._cost(p) for p in parts]
        total = sum(costs)
        if total > self.remaining + 1e-12:
            what = " + ".join(str(p["what"]) for p, c in zip(parts, costs) if c > 0 and p.get("what"))
            raise BudgetExceeded(
                f"the release costs {self.kind} = {total:.6g}{f' ({what})' if what else ''} but only {self.remaining:.6g} of the "
                f"budget {self.kind} = {self.budget:.6g} is left"
            )
        for p, c in zip(parts, costs):
            self.ledger.append({"what": p.get("what", ""), "cost": c, "unit": self.kind, "public": bool(p.get("public"))})

    def spend(self, epsilon: float | None = None, rho: float | None = None, what: str = "") -> None:
        """Record a release costing ``epsilon`` (pure DP) or ``rho`` (zCDP), exactly one of them.

        Parameters
        ----------
        epsilon : float, optional
        rho : float, optional
        what : str
            The ledger entry's name.

        Returns
        -------
        None

        Raises
        ------
        BudgetExceeded
            Over budget.
        ValueError
            Both or neither of epsilon and rho.

        Examples
        --------
        >>> acc = PrivacyAccountant(rho=1.0); acc.spend(rho=0.25, what="tables")
        >>> acc.remaining
        0.75
        """
        if (epsilon is None) == (rho is None):
            raise ValueError("spend: give exactly one of epsilon and rho")
        part = {"what": what, "epsilon": epsilon} if epsilon is not None else {"what": what, "rho": rho}
        self.charge([part])

    def epsilon_delta(self, delta: float) -> float:
        """The epsilon of (epsilon, delta)-DP that the spending so far guarantees (tight conversion
        for a zCDP accountant; the spent epsilon itself for a pure one).

        Parameters
        ----------
        delta : float

        Returns
        -------
        float

        Examples
        --------
        >>> acc = PrivacyAccountant(rho=1.0); acc.spend(rho=0.5)
        >>> round(acc.epsilon_delta(1e-6), 4)
        5.2215
        """
        if self.kind == "epsilon":
            return self.spent
        return zcdp_epsilon(self.spent, delta) if self.spent > 0 else 0.0


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


def _is_integer(values: np.ndarray) -> bool:
    """Integer noise for integer tables. The dtype decides, never the values: whether the counts
    happen to be whole numbers is a property of the data, and the noise law must not reveal it."""
    return np.asarray(values).dtype.kind in "iub"


class _Mechanism:
    """What the two mechanisms share: the release of T tables with one noise law."""

    noise = ""

    def scale(self, n_tables: int, contribution: float = 1.0, multiplicity: Sequence[int] | None = None) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def cost(self) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError

    def release(self, tables: Sequence[Factor], seed=None, contribution: float = 1.0,
                accountant: PrivacyAccountant | None = None, n: float | None = None,
                what: str = "tables", members: Sequence | None = None) -> list[Measurement]:
        """Noisy copies of ``tables`` as measurements carrying the noise law and scale.

        Parameters
        ----------
        tables : sequence of Factor
            Exact counts (integers, or real weighted counts).
        seed : int or numpy.random.Generator, optional
            ``None`` (default): private noise from OpenDP and the operating system. A seed gives
            reproducible noise that is **not private** (a :class:`NotPrivateWarning` is issued).
        contribution : float
            Public bound on one individual's total weight in each table (see the module docstring).
        accountant : PrivacyAccountant, optional
            Charged before any noise is drawn; an over-budget release raises ``BudgetExceeded`` and
            releases nothing.
        n : float, optional
            Record count to attach to the measurements (the caller charges or declares it).
        what : str
            Name of this part in the accountant's ledger.
        members : sequence, optional
            Per table, None or the cliques it pools (a sum of tied cliques' tables, see
            :attr:`Measurement.members`): each record then weighs in that many times, and the noise
            scale counts it.
        """
        tables = _check_tables(tables)
        self.scale(len(tables), contribution, _multiplicity(tables, members))  # checks the arguments before anything is charged
        if accountant is not None:
            accountant.charge([{"what": what, **self.cost}])
        return self.measure(tables, noise_generator(seed), contribution, n, members)

    def measure(self, tables: Sequence[Factor], rng: np.random.Generator | None = None, contribution: float = 1.0,
                n: float | None = None, members: Sequence | None = None) -> list[Measurement]:
        """The noisy tables without accounting: what :meth:`release` does after charging. ``rng``
        None samples privately; a Generator samples reproducibly (not private, and no warning: the
        caller has already decided). For callers that charge several parts of one release at once.

        Examples
        --------
        >>> ys = LaplaceMechanism(1.0).measure([Factor(("A",), np.array([3, 4]))], np.random.default_rng(0))
        >>> ys[0].integer, ys[0].scale
        (True, 1.0)
        """
        tables = _check_tables(tables)
        pooled = list(members) if members is not None else [None] * len(tables)
        scale = self.scale(len(tables), contribution, _multiplicity(tables, pooled))
        out = []
        for t, group in zip(tables, pooled):
            noisy = add_noise(t.values, self.noise, scale, rng)
            out.append(Measurement(t.variables, noisy.astype(float), self.noise, scale, n, integer=_is_integer(t.values),
                                   members=group))
        return out


def check_release_arguments(mechanism, accountant, optional: bool = False) -> None:
    """A ``TypeError`` naming the argument unless ``mechanism`` is a mechanism instance (or None,
    when ``optional``) and ``accountant`` a :class:`PrivacyAccountant` or None (checked before any
    record is read).

    Examples
    --------
    >>> check_release_arguments(LaplaceMechanism(1.0), None)
    >>> try:
    ...     check_release_arguments(1.0, None)
    ... except TypeError as err:
    ...     print(str(err)[:40])
    mechanism: expected a LaplaceMechanism o
    """
    if not isinstance(mechanism, _Mechanism) and not (optional and mechanism is None):
        raise TypeError(f"mechanism: expected a LaplaceMechanism or GaussianMechanism instance, got {mechanism!r}")
    if accountant is not None and not isinstance(accountant, PrivacyAccountant):
        raise TypeError(f"accountant: expected a PrivacyAccountant or None, got {accountant!r}")


def noise_generator(seed) -> np.random.Generator | None:
    """``None`` for private noise (no seed); a Generator from ``seed`` otherwise, with a
    :class:`NotPrivateWarning`."""
    if seed is None:
        return None
    rng = as_generator(seed)
    warnings.warn(
        "seeded noise: this release is reproducible and NOT differentially private (anyone who knows or "
        "guesses the seed can remove the noise); omit seed= for a private release",
        NotPrivateWarning, stacklevel=3,
    )
    return rng


@dataclass(frozen=True)
class LaplaceMechanism(_Mechanism):
    """epsilon-DP release of T tables: i.i.d. discrete Laplace noise with scale b = w T / epsilon on
    every cell (w: the public per-table contribution bound of one individual).

    Parameters
    ----------
    epsilon : float
        The privacy level one release spends (pure epsilon-DP).

    Examples
    --------
    >>> mech = LaplaceMechanism(1.0)
    >>> mech.scale(n_tables=3)
    3.0
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _budget(self.epsilon, "epsilon"))

    noise = "laplace"

    def scale(self, n_tables: int, contribution: float = 1.0, multiplicity: Sequence[int] | None = None) -> float:
        """Laplace b for L1 sensitivity ``contribution * n_tables``, or ``contribution * sum(multiplicity)``
        when tables pool several cliques (one record then adds ``multiplicity[t]`` to table t).

        Parameters
        ----------
        n_tables : int
        contribution : float
            The public bound of one individual's weight per table.
        multiplicity : sequence of int, optional
            Per table, the number of cliques it pools (1 for a plain table).

        Returns
        -------
        float

        Examples
        --------
        >>> LaplaceMechanism(0.5).scale(n_tables=3, contribution=2)
        12.0
        """
        total = _count(n_tables) if multiplicity is None else sum(_weights(multiplicity, n_tables))
        return _positive(contribution, "contribution") * total / self.epsilon

    @property
    def cost(self) -> dict:
        """What one release spends: ``{"epsilon": ...}``."""
        return {"epsilon": self.epsilon}


@dataclass(frozen=True)
class GaussianMechanism(_Mechanism):
    """rho-zCDP release of T tables: i.i.d. discrete Gaussian noise with sigma = w sqrt(T) / sqrt(2 rho)
    on every cell.

    ``GaussianMechanism(epsilon=..., delta=...)`` takes the largest rho whose zCDP guarantee implies
    (epsilon, delta)-DP by the tight conversion (:func:`rho_from_epsilon_delta`); accountants charge it
    in zCDP.

    Parameters
    ----------
    rho : float, optional
        zCDP level of one release.
    epsilon, delta : float, optional
        Instead of ``rho``: the largest rho that implies (epsilon, delta)-DP.

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
            object.__setattr__(self, "rho", _budget(self.rho, "rho"))
        elif self.epsilon is not None and self.delta is not None:
            object.__setattr__(self, "rho", rho_from_epsilon_delta(self.epsilon, self.delta))
        else:
            raise ValueError("rho or (epsilon, delta): the Gaussian mechanism needs a privacy level")

    def scale(self, n_tables: int, contribution: float = 1.0, multiplicity: Sequence[int] | None = None) -> float:
        """Gaussian sigma for L2 sensitivity ``contribution * sqrt(n_tables)``, or
        ``contribution * sqrt(sum(multiplicity^2))`` when tables pool several cliques (a record's
        ``multiplicity[t]`` counts in table t may all fall in one cell).

        Parameters
        ----------
        n_tables : int
        contribution : float
        multiplicity : sequence of int, optional
            Per table, the number of cliques it pools (1 for a plain table).

        Returns
        -------
        float

        Examples
        --------
        >>> round(GaussianMechanism(rho=0.5).scale(n_tables=4), 6)
        2.0
        """
        total = _count(n_tables) if multiplicity is None else sum(w * w for w in _weights(multiplicity, n_tables))
        sigma = _positive(contribution, "contribution") * math.sqrt(total) / math.sqrt(2 * float(self.rho))  # type: ignore[arg-type]  # set in __post_init__
        if not sigma > 0:
            raise ValueError(f"rho: {self.rho!r} is so large a budget that the noise vanishes (sigma underflows to 0)")
        return sigma

    @property
    def cost(self) -> dict:
        """What one release spends: ``{"rho": ...}`` (zCDP)."""
        return {"rho": self.rho}


def _multiplicity(tables: Sequence[Factor], members: Sequence | None) -> list[int] | None:
    """Per table, how many cliques it pools (checked against the tables), or None when none pools."""
    if members is None:
        return None
    members = list(members)
    if len(members) != len(tables):
        raise ValueError(f"members: expected one entry (None or the pooled cliques) per table, {len(tables)}, got {len(members)}")
    out = []
    for i, (t, group) in enumerate(zip(tables, members)):
        if group is not None and (len(group) < 2 or tuple(group[0]) != tuple(t.variables)):
            raise ValueError(f"members[{i}]: expected two or more cliques, the first {t.variables}, got {group!r}")
        out.append(1 if group is None else len(group))
    return out


def _weights(multiplicity: Sequence[int], n_tables: int) -> list[int]:
    weights = [int(w) for w in multiplicity]
    if len(weights) != _count(n_tables) or min(weights) < 1:
        raise ValueError(f"multiplicity: expected {n_tables} positive counts, one per table, got {list(multiplicity)!r}")
    return weights


def _count(n_tables) -> int:
    if isinstance(n_tables, bool) or not isinstance(n_tables, (int, np.integer)) or n_tables < 1:
        raise ValueError(f"n_tables: expected a positive whole number of tables, got {n_tables!r}")
    return int(n_tables)


def release_parts(mechanism: _Mechanism, what: str, publish_n=False, before: Sequence[dict] = ()) -> tuple[list, _Mechanism | None]:
    """The parts of one release, for its ``spent`` record and the accountant (charged all at once):
    ``before`` (e.g. private quantiles), the tables released through ``mechanism``, and N: noised
    through a mechanism given as ``publish_n`` (returned, to draw it), declared public by the caller
    (``"public"`` or True: listed at no cost), or not published.

    Examples
    --------
    >>> parts, n_mech = release_parts(LaplaceMechanism(0.9), "tables", publish_n=LaplaceMechanism(0.1))
    >>> [p["what"] for p in parts], n_mech.epsilon
    (['tables', 'N'], 0.1)
    """
    n_mech = publish_n if isinstance(publish_n, _Mechanism) else None
    if n_mech is None and not (publish_n is None or isinstance(publish_n, (bool, np.bool_)) or
                               (isinstance(publish_n, str) and publish_n == "public")):
        raise ValueError(f"publish_n: expected False, 'public' (or True) or a mechanism to noise N with, got {publish_n!r}")
    parts = [dict(p) for p in before] + [{"what": what, **mechanism.cost}]
    if n_mech is not None:
        parts.append({"what": "N", **n_mech.cost})
    elif publish_n:
        parts.append({"what": "N", "public": True})
    return parts, n_mech


def noisy_count(mechanism: _Mechanism, count: float, rng: np.random.Generator | None, contribution: float = 1.0,
                integer: bool = True) -> float:
    """A record count released through ``mechanism`` (integer noise on an integer count; at least 1,
    post-processing that costs nothing). ``rng`` None samples privately.

    Examples
    --------
    >>> noisy_count(LaplaceMechanism(1.0), 1000, np.random.default_rng(0)) > 900
    True
    """
    value = np.array([int(round(count))], dtype=np.int64) if integer else np.array([float(count)])
    noisy = mechanism.measure([Factor(("N",), value)], rng, contribution=contribution)[0]
    return max(float(noisy.values[0]), 1.0)
