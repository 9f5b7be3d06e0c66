"""Tables with named axes: the one array type every ppgm algorithm passes around.

A :class:`Factor` is a numpy array whose axes are labelled by variables.  Whether the entries
are counts, probabilities or log-potentials is up to the caller; the operations below are the
ones all of them need: re-ordering and broadcasting between scopes, and marginalising either by
summation (counts, probabilities) or by log-sum-exp (log-potentials, log-beliefs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

import numpy as np

from .cell_map import sum_plan


def logsumexp(a: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Stable ``log(sum(exp(a)))`` that returns ``-inf`` (no warning, no NaN) on all ``-inf`` slices.

    Parameters
    ----------
    a : numpy.ndarray
    axis : int or tuple, optional
    keepdims : bool

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> round(float(logsumexp(np.log([0.25, 0.75]))), 12)
    0.0
    """
    a = np.asarray(a, dtype=float)
    if a.size == 0:
        return np.full(np.sum(a, axis=axis, keepdims=keepdims).shape, -np.inf)
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


def align(values: np.ndarray, src: Sequence[Hashable], dst: Sequence[Hashable]) -> np.ndarray:
    """View of ``values`` (axes ``src``) broadcastable against an array with axes ``dst``.

    ``src`` must be a subset of ``dst``; missing axes become length-1 axes.

    Parameters
    ----------
    values : numpy.ndarray
        Axes named by ``src``.
    src, dst : sequence
        ``dst`` contains every variable of ``src``.

    Returns
    -------
    numpy.ndarray
        Broadcastable onto a table with axes ``dst``.

    Examples
    --------
    >>> align(np.zeros((2, 3)), ("A", "B"), ("B", "C", "A")).shape
    (3, 1, 2)
    """
    src, dst = tuple(src), tuple(dst)
    if src == dst:
        return values
    pos = {v: i for i, v in enumerate(dst)}
    try:
        order = sorted(range(len(src)), key=lambda i: pos[src[i]])
    except KeyError as err:
        raise ValueError(f"cannot align scope {src} into {dst}: {err.args[0]!r} is missing") from None
    out = np.transpose(values, order)
    shape = [1] * len(dst)
    for i in order:
        shape[pos[src[i]]] = values.shape[i]
    return out.reshape(shape)


EINSUM_MIN_CELLS = 256  # from this many cells sum_to reduces with one einsum (below it numpy's sum is as fast)


@dataclass(frozen=True)
class Factor:
    """A numpy array with one named axis per variable.

    Parameters
    ----------
    variables : tuple
        Axis names, one per axis of ``values``.
    values : numpy.ndarray
        The table.

    Examples
    --------
    >>> f = Factor(("A", "B"), np.log(np.full((2, 3), 1 / 6)))
    >>> np.exp(f.logsumexp_to(("B",)).values).round(3).tolist()
    [0.333, 0.333, 0.333]
    """

    variables: tuple
    values: np.ndarray

    @classmethod
    def _unchecked(cls, variables: tuple, values: np.ndarray) -> "Factor":
        """A factor the engine made itself (a tuple of distinct names, an array of matching rank): no
        checks, for the thousands of tables a fit rebuilds per iteration."""
        f = object.__new__(cls)
        object.__setattr__(f, "variables", variables)
        object.__setattr__(f, "values", values)
        return f

    def __post_init__(self) -> None:
        variables = tuple(self.variables)
        values = np.asarray(self.values)
        if values.ndim != len(variables):
            raise ValueError(
                f"values: expected {len(variables)} axes for variables {variables}, got shape {values.shape}"
            )
        if len(set(variables)) != len(variables):
            raise ValueError(f"variables: repeated names in {variables}")
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "values", values)

    @property
    def shape(self) -> tuple:
        return self.values.shape

    def card(self, var: Hashable) -> int:
        """Length of the axis of ``var``.

        Parameters
        ----------
        var : hashable

        Returns
        -------
        int

        Examples
        --------
        >>> f = Factor(("A", "B"), np.arange(6.0).reshape(2, 3))
        >>> f.card("B")
        3
        """
        return self.values.shape[self.variables.index(var)]

    def transpose(self, variables: Sequence[Hashable]) -> "Factor":
        """The same factor with its axes in the order of ``variables``.

        Parameters
        ----------
        variables : sequence
            A permutation of the factor's variables.

        Returns
        -------
        Factor

        Examples
        --------
        >>> f = Factor(("A", "B"), np.arange(6.0).reshape(2, 3))
        >>> f.transpose(("B", "A")).values.shape
        (3, 2)
        """
        variables = tuple(variables)
        if set(variables) != set(self.variables) or len(variables) != len(self.variables):
            raise ValueError(f"variables: {variables} is not a permutation of {self.variables}")
        return Factor(variables, np.transpose(self.values, [self.variables.index(v) for v in variables]))

    def expand(self, variables: Sequence[Hashable], shape: Sequence[int]) -> np.ndarray:
        """The values broadcast onto ``variables`` (a superset of the factor's) with the given ``shape``.

        Parameters
        ----------
        variables : sequence
        shape : sequence of int

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> f = Factor(("A", "B"), np.arange(6.0).reshape(2, 3))
        >>> f.expand(("C", "A", "B"), (4, 2, 3)).shape
        (4, 2, 3)
        """
        return np.broadcast_to(align(self.values, self.variables, variables), tuple(shape))

    def _checked_keep(self, keep: Iterable[Hashable]) -> tuple:
        keep = tuple(keep)
        missing = [v for v in keep if v not in self.variables]
        if missing:
            raise ValueError(f"keep: variables {missing} are not in the factor's scope {self.variables}")
        return keep

    def _reduce(self, keep: Iterable[Hashable], reducer) -> "Factor":
        keep = self._checked_keep(keep)
        axes = tuple(i for i, v in enumerate(self.variables) if v not in keep)
        reduced = reducer(self.values, axes) if axes else self.values
        kept = tuple(v for v in self.variables if v in keep)
        return Factor(kept, reduced).transpose(keep) if kept != keep else Factor(kept, reduced)

    def sum_to(self, keep: Iterable[Hashable]) -> "Factor":
        """Sum out every variable not in ``keep`` (axes in ``keep`` order).

        Parameters
        ----------
        keep : iterable

        Returns
        -------
        Factor

        Examples
        --------
        >>> f = Factor(("A", "B"), np.arange(6.0).reshape(2, 3))
        >>> f.sum_to(["A"]).values.tolist()
        [3.0, 12.0]
        """
        keep = tuple(keep)
        if self._by_plan(keep):  # (the numpy path checks keep in _reduce)
            keep = self._checked_keep(keep)
            if len(set(keep)) != len(keep):
                raise ValueError(f"keep: expected distinct variables, got {list(keep)}")
        return self._sum_to_unchecked(keep)

    def _by_plan(self, keep: tuple) -> bool:
        """Whether :meth:`sum_to` reduces by a planned summation (:func:`sum_plan`): numpy's sum loops
        over short inner blocks when the summed axes are not the trailing ones (2-4x slower on a
        10^4-cell clique summed onto a pair)."""
        return self.values.size >= EINSUM_MIN_CELLS and self.values.ndim <= 52 and len(keep) < self.values.ndim

    def _sum_to_unchecked(self, keep: tuple) -> "Factor":
        """:meth:`sum_to` for distinct ``keep`` inside the scope, without checking it (the engine's own
        queries), in ``keep``'s order."""
        if not self._by_plan(keep):
            return self._reduce(keep, lambda a, ax: np.sum(a, axis=ax))
        at = {v: i for i, v in enumerate(self.variables)}
        return Factor._unchecked(keep, sum_plan(self.values.shape, tuple(at[v] for v in keep))(self.values))

    def logsumexp_to(self, keep: Iterable[Hashable]) -> "Factor":
        """Log-sum-exp out every variable not in ``keep`` (for log-space tables).

        Parameters
        ----------
        keep : iterable

        Returns
        -------
        Factor

        Examples
        --------
        >>> Factor(("A", "B"), np.log(np.ones((2, 2)))).logsumexp_to(["A"]).values.round(4).tolist()
        [0.6931, 0.6931]
        """
        return self._reduce(keep, lambda a, ax: logsumexp(a, axis=ax))

    def __add__(self, other: "Factor") -> "Factor":
        """Broadcasting sum over the union scope (the product of two log-factors)."""
        scope = self.variables + tuple(v for v in other.variables if v not in self.variables)
        return Factor(scope, align(self.values, self.variables, scope) + align(other.values, other.variables, scope))

    def normalized_log(self) -> "Factor":
        """The log-table shifted so that its exponential sums to one.

        Returns
        -------
        Factor

        Examples
        --------
        >>> np.exp(Factor(("A",), np.array([0.0, np.log(3)])).normalized_log().values).round(6).tolist()
        [0.25, 0.75]
        """
        return Factor(self.variables, self.values - logsumexp(self.values))
