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


def logsumexp(a: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Stable ``log(sum(exp(a)))`` that returns ``-inf`` (no warning, no NaN) on all ``-inf`` slices.

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
        return self.values.shape[self.variables.index(var)]

    def transpose(self, variables: Sequence[Hashable]) -> "Factor":
        """The same table with axes in the order ``variables`` (a permutation of ours)."""
        variables = tuple(variables)
        if set(variables) != set(self.variables) or len(variables) != len(self.variables):
            raise ValueError(f"variables: {variables} is not a permutation of {self.variables}")
        return Factor(variables, np.transpose(self.values, [self.variables.index(v) for v in variables]))

    def expand(self, variables: Sequence[Hashable], shape: Sequence[int]) -> np.ndarray:
        """Broadcast into the full array over ``variables`` with the given ``shape``."""
        return np.broadcast_to(align(self.values, self.variables, variables), tuple(shape))

    def _reduce(self, keep: Iterable[Hashable], reducer) -> "Factor":
        keep = tuple(keep)
        missing = [v for v in keep if v not in self.variables]
        if missing:
            raise ValueError(f"keep: variables {missing} are not in the factor's scope {self.variables}")
        axes = tuple(i for i, v in enumerate(self.variables) if v not in keep)
        reduced = reducer(self.values, axes) if axes else self.values
        kept = tuple(v for v in self.variables if v in keep)
        return Factor(kept, reduced).transpose(keep) if kept != keep else Factor(kept, reduced)

    def sum_to(self, keep: Iterable[Hashable]) -> "Factor":
        """Marginalise by summation onto ``keep`` (axes in that order)."""
        return self._reduce(keep, lambda a, ax: np.sum(a, axis=ax))

    def logsumexp_to(self, keep: Iterable[Hashable]) -> "Factor":
        """Marginalise log-values by log-sum-exp onto ``keep`` (axes in that order)."""
        return self._reduce(keep, lambda a, ax: logsumexp(a, axis=ax))

    def __add__(self, other: "Factor") -> "Factor":
        """Broadcasting sum over the union scope (the product of two log-factors)."""
        scope = self.variables + tuple(v for v in other.variables if v not in self.variables)
        return Factor(scope, align(self.values, self.variables, scope) + align(other.values, other.variables, scope))

    def normalized_log(self) -> "Factor":
        """Log-values shifted so that they log-sum-exp to zero (a log-probability table)."""
        return Factor(self.variables, self.values - logsumexp(self.values))
