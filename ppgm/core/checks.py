"""Argument checks shared by every public entry point: each failure is a ``ValueError`` or
``TypeError`` whose message starts with the argument's name and says what was expected.

Booleans are never numbers here (``True`` is not a count of 1), strings are never sequences of
names (``"AB"`` is not the clique ``("A", "B")``), and NaN or infinity is never a size, a weight or
a tolerance.

Examples
--------
>>> positive(0.5, "epsilon")
0.5
>>> count(3, "max_iter")
3
>>> try:
...     count(2.5, "max_iter")
... except TypeError as err:
...     print(err)
max_iter: expected a whole number, got 2.5
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np


def _is_real(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def real(x, name: str) -> float:
    """``x`` as a float; a ``TypeError`` naming ``name`` unless it is a real number (not a bool,
    a string or a container).

    Examples
    --------
    >>> real(np.float32(2), "l2")
    2.0
    """
    if not _is_real(x):
        raise TypeError(f"{name}: expected a number, got {x!r}")
    return float(x)


def positive(x, name: str, allow_inf: bool = False) -> float:
    """A positive finite number (``allow_inf``: infinity allowed).

    Examples
    --------
    >>> positive(1e-3, "tol")
    0.001
    """
    v = real(x, name)
    if not (v > 0 and (math.isfinite(v) or (allow_inf and v == math.inf))):
        raise ValueError(f"{name}: expected a positive {'' if allow_inf else 'finite '}number, got {x!r}")
    return v


def non_negative(x, name: str, maximum: float | None = None) -> float:
    """A finite number >= 0 (and at most ``maximum`` when given).

    Examples
    --------
    >>> non_negative(0, "l2")
    0.0
    """
    v = real(x, name)
    if not (v >= 0 and math.isfinite(v)):
        raise ValueError(f"{name}: expected a finite number >= 0, got {x!r}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name}: expected a number in [0, {maximum:g}], got {x!r}")
    return v


def in_range(x, name: str, lo: float, hi: float, closed: bool = True) -> float:
    """A number in [lo, hi] (``closed=False``: in (lo, hi)).

    Examples
    --------
    >>> in_range(0.3, "average", 0, 1)
    0.3
    """
    v = real(x, name)
    ok = (lo <= v <= hi) if closed else (lo < v < hi)
    if not ok:
        raise ValueError(f"{name}: expected a number in {'[' if closed else '('}{lo}, {hi}{']' if closed else ')'}, got {x!r}")
    return v


MAX_PENALTY = 1e100  # an L2 weight or pseudo-count beyond it swamps any data and overflows the arithmetic
MAX_COUNT = 10**9  # no count ppgm takes (iterations, chains, rounds, draws, cells, variables) is useful beyond it


def count(x, name: str, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """A whole number in [``minimum``, ``maximum``] (an integral float such as ``3.0`` is accepted).
    The default upper bound, ``MAX_COUNT`` = 1e9, keeps a mistyped size from allocating until the
    machine runs out; entry points with a tighter natural bound pass their own.

    Examples
    --------
    >>> count(np.int64(4), "n_chains")
    4
    """
    if isinstance(x, (bool, np.bool_)) or not (_is_real(x) and math.isfinite(float(x)) and float(x) == int(x)):
        raise TypeError(f"{name}: expected a whole number, got {x!r}")
    v = int(x)
    if v < minimum:
        raise ValueError(f"{name}: expected a whole number >= {minimum}, got {x!r}")
    if v > maximum:
        raise ValueError(f"{name}: expected a whole number <= {maximum:,}, got {x!r}")
    return v


def flag(x, name: str) -> bool:
    """A bool (numpy's too).

    Examples
    --------
    >>> flag(np.True_, "reweight")
    True
    """
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {x!r}")
    return bool(x)


def damping(x, name: str = "damping") -> float:
    """A finite number in [0, 1) (a message-damping weight).

    Examples
    --------
    >>> damping(0.5)
    0.5
    """
    v = real(x, name)
    if not 0 <= v < 1:
        raise ValueError(f"{name}: expected a number in [0, 1), got {x!r}")
    return v


def callback(x, name: str = "callback"):
    """None or a callable, checked before any work (a non-callable would fail mid-run).

    Examples
    --------
    >>> callback(print) is print, callback(None) is None
    (True, True)
    """
    if x is not None and not callable(x):
        raise TypeError(f"{name}: expected a callable or None, got {type(x).__name__}")
    return x


def choice(x, name: str, options: Sequence) -> Any:
    """One of ``options``.

    Examples
    --------
    >>> choice("dual", "estep", ("dual", "nlbp"))
    'dual'
    """
    if not isinstance(x, str) or x not in options:
        raise ValueError(f"{name}: expected one of {tuple(options)}, got {x!r}")
    return x


def names(x, name: str, allow_empty: bool = False) -> tuple:
    """A sequence of distinct hashable names (not a bare string).

    Examples
    --------
    >>> names(["A", "B"], "columns")
    ('A', 'B')
    """
    if isinstance(x, (str, bytes)) or not isinstance(x, (Sequence, np.ndarray, *pd_index_types())):
        raise TypeError(f"{name}: expected a list of names, got {x!r}")
    out: tuple = tuple(x)  # type: ignore[arg-type]  # any sequence or array of names
    try:
        distinct = len(set(out)) == len(out)
    except TypeError:  # an unhashable name: say which
        for v in out:
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"{name}: names must be hashable, got {v!r}") from None
        raise
    if not out and not allow_empty:
        raise ValueError(f"{name}: expected at least one name")
    if not distinct:
        dup = sorted({str(v) for v in out if out.count(v) > 1})
        raise ValueError(f"{name}: repeated names {dup}")
    return out


def pd_index_types() -> tuple:
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        return ()
    return (pd.Index,)


def cliques(x, name: str = "cliques") -> list[tuple]:
    """A list of cliques, each a non-empty sequence of distinct names. A bare sequence of names
    (``("A", "B")``) is refused: it reads as one clique to some and as two 1-way cliques to others.

    Examples
    --------
    >>> cliques([("A", "B"), ["C"]])
    [('A', 'B'), ('C',)]
    >>> try:
    ...     cliques(("A", "B"))
    ... except TypeError as err:
    ...     print(str(err)[:60])
    cliques: expected a list of cliques (each a tuple of names),
    """
    if isinstance(x, (str, bytes)) or not isinstance(x, (list, tuple)):
        raise TypeError(f"{name}: expected a list of cliques (each a tuple of names), got {x!r}")
    if x and all(not isinstance(c, (list, tuple)) for c in x):
        raise TypeError(
            f"{name}: expected a list of cliques (each a tuple of names), got a bare sequence of names {tuple(x)!r}; "
            f"write [{tuple(x)!r}] for one clique, or [(v,) for v in ...] for one table per variable"
        )
    out = []
    for i, c in enumerate(x):
        if isinstance(c, (str, bytes)) or not isinstance(c, (list, tuple)):
            raise TypeError(f"{name}[{i}]: expected a tuple of names, got {c!r}")
        out.append(names(c, f"{name}[{i}]"))
    if not out:
        raise ValueError(f"{name}: expected at least one clique")
    return out


def mapping(x, name: str, allow_none: bool = True) -> dict:
    """A mapping (or None, as an empty one).

    Examples
    --------
    >>> mapping(None, "state_names")
    {}
    """
    if x is None and allow_none:
        return {}
    if not isinstance(x, Mapping):
        raise TypeError(f"{name}: expected a mapping, got {x!r}")
    return dict(x)


def value_kind(x) -> str | None:
    """The kind of one state value: ``"number"`` (int, float, numpy numbers, Decimal), ``"bool"``,
    ``"text"``, or the type's name for anything else (``"bytes"``, ``"tuple"``, ``"Timestamp"``...);
    None for a missing value (None, NaN, pandas NA / NaT).

    A variable's states are of one kind: ``1`` and ``1.0`` are one state (the same number), ``1``,
    ``True`` and ``"1"`` are three kinds, never merged and never held by one variable.

    Examples
    --------
    >>> [value_kind(v) for v in (1, 2.5, np.int8(3), True, np.bool_(False), "1", None, float("nan"))]
    ['number', 'number', 'number', 'bool', 'bool', 'text', None, None]
    """
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (str, np.str_)):
        return "text"
    if isinstance(x, (int, float, np.integer, np.floating)) or type(x).__name__ == "Decimal":
        return None if x != x else "number"  # NaN is missing
    if type(x).__name__ in ("NAType", "NaTType"):
        return None
    return type(x).__name__


def one_kind(values, name: str) -> str | None:
    """The one kind (:func:`value_kind`) of ``values`` (None when empty); a ``ValueError`` naming
    ``name`` and an example of each kind when they mix.

    Examples
    --------
    >>> one_kind([0, 1, 2.5], "state_names['A']")
    'number'
    >>> try:
    ...     one_kind([0, 1, "unknown"], "state_names['A']")
    ... except ValueError as err:
    ...     print(str(err)[:71])
    state_names['A']: mixes kinds of values (number such as 0, text such as
    """
    seen = kinds(values)
    if len(seen) > 1:
        raise ValueError(f"{name}: {mixed_kinds(seen)}")
    return next(iter(seen), None)


def kinds(values) -> dict:
    """``{kind: first value of that kind}`` of ``values`` (:func:`value_kind`; missing values left out).

    Examples
    --------
    >>> kinds([1, "a", 2.5, None])
    {'number': 1, 'text': 'a'}
    """
    seen: dict = {}
    for v in values:
        k = value_kind(v)
        if k is not None and k not in seen:
            seen[k] = v.item() if isinstance(v, np.generic) else v
    return seen


def mixed_kinds(seen: dict) -> str:
    """What is wrong with values of several kinds (``seen`` as :func:`kinds` returns it).

    Examples
    --------
    >>> mixed_kinds({"number": 1, "bool": True})
    "mixes kinds of values (number such as 1, bool such as True); the states of one variable are all numbers, all booleans or all text (1, True and '1' are three different states)"
    """
    text = ", ".join(f"{k} such as {v!r}" for k, v in list(seen.items())[:3])
    return (f"mixes kinds of values ({text}); the states of one variable are all numbers, all booleans or all text "
            "(1, True and '1' are three different states)")


def state_names(x, name: str = "state_names") -> dict:
    """``{variable: states}``, each a non-empty sequence of distinct states (not a string) of one
    kind (:func:`value_kind`).

    Examples
    --------
    >>> state_names({"A": ["no", "yes"]})
    {'A': ['no', 'yes']}
    """
    out = {}
    for v, states in mapping(x, name).items():
        out[v] = list(names(states, f"{name}[{v!r}]"))
        one_kind(out[v], f"{name}[{v!r}]")
    return out


def weights(x, n: int | None, name: str = "weights", upper: float | None = None) -> np.ndarray:
    """One finite non-negative weight per record (``n`` of them when ``n`` is given; at most
    ``upper`` each when given), as a float array.

    Examples
    --------
    >>> weights([0.5, 1], 2).tolist()
    [0.5, 1.0]
    """
    try:
        w = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected one number per record, got {type(x).__name__}") from None
    if w.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of one weight per record, got shape {w.shape}")
    if n is not None and w.shape[0] != n:
        raise ValueError(f"{name}: expected {n} weights, one per record, got {w.shape[0]}")
    if not np.all(np.isfinite(w)) or (w < 0).any() or (upper is not None and (w > upper).any()):
        rng = f"[0, {upper:g}]" if upper is not None else "finite and non-negative"
        raise ValueError(f"{name}: expected weights {'in ' if upper is not None else ''}{rng}")
    return w
