"""Discrete domains: ordered variables, their cardinalities and state names."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

Var = Hashable


@dataclass(frozen=True)
class Domain:
    """An ordered set of discrete variables.

    Parameters
    ----------
    variables : sequence of hashable
        Variable names, in the order used for record columns.
    cards : sequence of int
        Number of states of each variable (>= 1).
    state_names : mapping, optional
        ``{variable: sequence of state labels}``; defaults to ``0 .. card-1``.

    Examples
    --------
    >>> d = Domain(("A", "B"), (2, 3))
    >>> d.shape(("B", "A"))
    (3, 2)
    """

    variables: tuple
    cards: tuple
    state_names: Mapping = field(default=None, compare=False)  # type: ignore[arg-type]  # None: states 0 .. k - 1
    _index: dict = field(init=False, repr=False, compare=False)
    _card: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        variables = tuple(self.variables)
        cards = tuple(int(c) for c in self.cards)
        if len(variables) != len(cards):
            raise ValueError(
                f"cards: expected one cardinality per variable ({len(variables)}), got {len(cards)}"
            )
        if len(set(variables)) != len(variables):
            raise ValueError(f"variables: duplicate names in {variables}")
        if any(c < 1 for c in cards):
            raise ValueError(f"cards: every cardinality must be >= 1, got {cards}")
        names = dict(self.state_names or {})
        unknown = set(names) - set(variables)
        if unknown:
            raise ValueError(f"state_names: unknown variables {sorted(map(str, unknown))}")
        full = {}
        for v, c in zip(variables, cards):
            states = tuple(names.get(v, range(c)))
            if len(states) != c:
                raise ValueError(
                    f"state_names[{v!r}]: expected {c} states, got {len(states)}"
                )
            if len(set(states)) != c:
                raise ValueError(f"state_names[{v!r}]: duplicate states {states}")
            full[v] = states
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "cards", cards)
        object.__setattr__(self, "state_names", full)
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(variables)})
        object.__setattr__(self, "_card", dict(zip(variables, cards)))

    def __len__(self) -> int:
        return len(self.variables)

    def __contains__(self, var: Var) -> bool:
        return var in self._index

    def index(self, var: Var) -> int:
        """Column index of ``var``.

        Parameters
        ----------
        var : hashable

        Returns
        -------
        int

        Raises
        ------
        KeyError
            Naming the variable, if it is not in the domain.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.index("B")
        1
        """
        try:
            return self._index[var]
        except KeyError:
            raise KeyError(f"unknown variable {var!r}; the domain has {list(self.variables)}") from None

    def indices(self, variables: Iterable[Var]) -> list[int]:
        """Column indices of ``variables``.

        Parameters
        ----------
        variables : iterable

        Returns
        -------
        list of int

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.indices(["B", "A"])
        [1, 0]
        """
        return [self.index(v) for v in variables]

    def card(self, var: Var) -> int:
        """Number of states of ``var``.

        Parameters
        ----------
        var : hashable

        Returns
        -------
        int

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.card("B")
        3
        """
        return self.cards[self.index(var)]

    def shape(self, variables: Iterable[Var]) -> tuple:
        """Table shape over ``variables`` (their cardinalities, in the given order).

        Parameters
        ----------
        variables : iterable

        Returns
        -------
        tuple of int

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.shape(("B", "A"))
        (3, 2)
        """
        try:
            return tuple(self._card[v] for v in variables)
        except KeyError as err:
            self.index(err.args[0])  # raises the descriptive error
            raise

    def size(self, variables: Iterable[Var]) -> int:
        """Number of cells of the table over ``variables``.

        Parameters
        ----------
        variables : iterable

        Returns
        -------
        int

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.size(("A", "B"))
        6
        """
        return math.prod(self.shape(variables))

    def check(self, variables: Iterable[Var], argument: str = "variables") -> tuple:
        """``variables`` as a tuple, after checking each is known and unique.

        Parameters
        ----------
        variables : iterable
        argument : str
            The argument's name in the error message.

        Returns
        -------
        tuple

        Raises
        ------
        ValueError
            Unknown or repeated variables.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.check(["B"])
        ('B',)
        """
        variables = tuple(variables)
        missing = [v for v in variables if v not in self._index]
        if missing:
            raise ValueError(f"{argument}: unknown variables {missing}; the domain has {list(self.variables)}")
        if len(set(variables)) != len(variables):
            raise ValueError(f"{argument}: repeated variables in {variables}")
        return variables

    def project(self, variables: Sequence[Var]) -> "Domain":
        """The sub-domain over ``variables`` (in the given order).

        Parameters
        ----------
        variables : sequence

        Returns
        -------
        Domain

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.project(["A"]).state_names["A"]
        ('no', 'yes')
        """
        variables = self.check(variables)
        return Domain(variables, self.shape(variables), {v: self.state_names[v] for v in variables})

    def merge(self, other: "Domain") -> "Domain":
        """The union of two domains; shared variables must agree on cardinality.

        Parameters
        ----------
        other : Domain

        Returns
        -------
        Domain

        Raises
        ------
        ValueError
            A shared variable with another number of states.

        Examples
        --------
        >>> d = Domain(("A", "B"), (2, 3), {"A": ["no", "yes"]})
        >>> d.merge(Domain(("C",), (4,))).variables
        ('A', 'B', 'C')
        """
        variables, cards, names = list(self.variables), list(self.cards), dict(self.state_names)
        for v, c in zip(other.variables, other.cards):
            if v in self._index:
                if self.card(v) != c:
                    raise ValueError(f"variable {v!r} has {self.card(v)} states in one domain and {c} in the other")
            else:
                variables.append(v)
                cards.append(c)
                names[v] = other.state_names[v]
        return Domain(tuple(variables), tuple(cards), names)
