"""pandas DataFrames <-> integer-coded records, contingency tables and samples; and the one rule by
which every entry point reads states from a DataFrame.

States read from a column
-------------------------
A column's values are of one kind: numbers, booleans, text, or one other type (dates, tuples...).
Equal values of a kind are one state (``1`` and ``1.0`` are the same number); values of different
kinds are never one state (``1``, ``True`` and ``"1"``), and a column that mixes kinds is refused,
naming the column and an example of each kind, wherever states are read or matched: the states
read from the data (:func:`sorted_states`), the values matched to declared states
(:func:`codes_or_unknown`), aggregates' encoders. A missing value (None, NaN, pandas NA) is no
kind and no state. Aggregates are the one place where states are stored as text (they travel as
JSON and as other tools' tables): there a value matches a category by its text, numbers written
canonically (``1.0`` as ``1``), so the kinds still never merge (``True`` is ``"True"``).
"""

from __future__ import annotations

import warnings
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy.factors.discrete import DiscreteFactor

from ppgm.core import checks
from ppgm.factors.domain import Domain
from ppgm.core.rng import as_generator
from ppgm.inference.sampling import sample as _engine_sample
from ppgm.inference.tables import contingency_tables as _engine_tables

from .dask_backend import frame_blocks, is_dask
from .models import to_engine

#: Distinct non-integer numbers above which a column read as states gets a warning: it looks
#: continuous (each value would be a state of its own); bin it first or declare its states.
CONTINUOUS_STATES = 20

# pandas' inferred type of an object column -> the kind of its values (None: no value)
_INFERRED = {"integer": "number", "floating": "number", "mixed-integer-float": "number", "decimal": "number",
             "boolean": "bool", "string": "text", "empty": None}


def column_kind(values, name: str = "data", column=None, strict: bool = True) -> str | None:
    """The one kind of a column's non-missing values (see the module's rule): ``"number"``, ``"bool"``,
    ``"text"``, another type's name, or None when it has no value. A column that mixes kinds raises
    a ``ValueError`` naming ``name``, the column and an example of each kind (``strict=False``:
    returns ``"mixed"`` instead). Typed columns are answered from their dtype; object columns by
    pandas' type inference, and value by value only when that finds a mixture.

    Examples
    --------
    >>> column_kind(pd.Series([1, 2.5, None])), column_kind(pd.Series(["a", None]))
    ('number', 'text')
    >>> column_kind(pd.Series([1, "1"], dtype=object), "df", "a")
    Traceback (most recent call last):
    ...
    ValueError: df: column 'a' mixes kinds of values (number such as 1, text such as '1'); the states of one variable are all numbers, all booleans or all text (1, True and '1' are three different states): convert the column to one type, e.g. df['a'].astype(str)
    """
    if hasattr(values, "compute"):  # a Dask series: the distinct values come back, not the rows
        values = values.dropna().unique(split_out=1).compute()  # a tree reduction, not a shuffle
    s = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object if not hasattr(values, "dtype") else None)
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        s, dtype = pd.Series(np.asarray(s.cat.categories[pd.unique(s.cat.codes[s.cat.codes >= 0])], dtype=object)), np.dtype(object)
    if pd.api.types.is_bool_dtype(dtype):
        return "bool" if s.notna().any() else None
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        return "number" if s.notna().any() else None
    if pd.api.types.is_string_dtype(dtype) and dtype != object:
        return "text" if s.notna().any() else None
    if dtype != object:
        return str(dtype) if s.notna().any() else None
    inferred = pd.api.types.infer_dtype(s, skipna=True)
    if inferred in _INFERRED:
        return _INFERRED[inferred]
    seen = checks.kinds(s.dropna())  # value by value: only for object columns pandas finds mixed
    if len(seen) <= 1:
        return next(iter(seen), None)
    if not strict:
        return "mixed"
    where = name if column is None else f"{name}: column {column!r}"
    fix = "" if column is None else f", e.g. df[{column!r}].astype(str)"
    raise ValueError(f"{where} {checks.mixed_kinds(seen)}: convert the column to one type{fix}")


def sorted_states(values, name: str = "data", column=None) -> list:
    """Distinct non-missing values of a column, sorted: the default states of a column. The values
    must be of one kind (:func:`column_kind`); equal values are one state (``1`` and ``1.0``), kept
    as first written.

    Examples
    --------
    >>> sorted_states(pd.Series(["b", None, "a", "b"]))
    ['a', 'b']
    """
    if hasattr(values, "compute"):  # a Dask series: the distinct values come back, not the rows
        values = values.dropna().unique(split_out=1).compute()  # a tree reduction, not a shuffle
    series = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object if not hasattr(values, "dtype") else None)
    column_kind(series, name, column)
    vals = list(pd.unique(series.dropna()))
    vals = [v.item() if isinstance(v, np.generic) else v for v in vals]
    try:
        return sorted(vals)
    except TypeError:
        return sorted(vals, key=str)


def read_states(values, name: str = "data", column=None) -> list:
    """:func:`sorted_states`, with a warning when the column holds more than ``CONTINUOUS_STATES``
    distinct non-integer numbers: a continuous column, each value a state of its own.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     states = read_states(pd.Series(np.linspace(0, 1, 30)), "data", "x")
    >>> len(states), str(w[0].message)[:60]
    (30, "data: column 'x' holds 30 distinct non-integer numbers, each")
    """
    states = sorted_states(values, name, column)
    what = f"{name}: column {column!r}" if column is not None else name
    numbers = [v for v in states if checks.value_kind(v) == "number"]
    if len(numbers) > CONTINUOUS_STATES and any(float(v) != int(v) for v in numbers if np.isfinite(float(v))):
        warnings.warn(f"{what} holds {len(numbers)} distinct non-integer numbers, each read as a state of its own (a "
                      "continuous column?); bin it first (e.g. pandas.cut) or declare its states", UserWarning, stacklevel=3)
    return states


def fit_states(data, columns: Sequence, name: str = "data") -> dict:
    """``{column: states}`` read from ``data`` (:func:`read_states`) for a fit, with one warning for
    the columns that hold a single value: their only state is read from the data, and a model fitted
    to them learns nothing about them (not repeated when the data has a single row, which
    :func:`check_rows` warns about).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     states = fit_states(pd.DataFrame({"A": [0, 1], "B": ["x", "x"]}), ["A", "B"])
    >>> states, str(w[0].message)[:44]
    ({'A': [0, 1], 'B': ['x']}, "data: columns ['B'] hold a single value each")
    """
    states = {c: read_states(data[c], name, c) for c in columns}
    constant = [c for c, s in states.items() if len(s) == 1]
    if constant and (hasattr(data, "compute") or len(data) > 1):
        warnings.warn(f"{name}: columns {constant} hold a single value each, their only state read from the data: the fit "
                      "learns nothing about them; declare their states (state_names) if they can take others",
                      UserWarning, stacklevel=3)
    return states


def state_text(values: pd.Series) -> pd.Series:
    """The text by which aggregates match a column's values to their categories: text as written,
    numbers canonically (an integral number without its ``.0``), booleans as ``True`` / ``False``;
    missing values stay missing. The column must be of one kind (:func:`column_kind`).

    Examples
    --------
    >>> state_text(pd.Series([1.0, 2.5, None])).tolist()
    ['1', '2.5', None]
    """
    column_kind(values, "df", values.name)
    codes, uniques = pd.factorize(values, use_na_sentinel=True)  # the text of each distinct value, once
    texts = np.array([_text(v) for v in uniques] + [None], dtype=object)
    return pd.Series(texts[codes], index=values.index, dtype=object)


def _text(v) -> str:
    if checks.value_kind(v) == "number" and not isinstance(v, (bool, np.bool_)):
        f = float(v)
        if np.isfinite(f) and f == round(f) and abs(f) < 2**53:
            return str(int(f))
    return str(v)


def check_rows(data, name: str = "data", fit: bool = False, minimum: int = 1) -> None:
    """Fewer than ``minimum`` rows (at least one) is a ``ValueError`` naming ``name``; with ``fit``,
    a single row is a warning (every column then holds one value: a fit has nothing to estimate
    from). Dask frames are not counted.

    Examples
    --------
    >>> check_rows(pd.DataFrame({"A": []}))
    Traceback (most recent call last):
    ...
    ValueError: data: the DataFrame has no rows
    """
    if hasattr(data, "compute"):
        return
    if len(data) == 0:
        raise ValueError(f"{name}: the DataFrame has no rows")
    if len(data) < minimum:
        raise ValueError(f"{name}: {len(data)} row{'s' if len(data) > 1 else ''}; expected at least {minimum}")
    if fit and len(data) == 1:
        warnings.warn(f"{name}: a single row; every column holds one value and the fit has nothing to estimate from",
                      UserWarning, stacklevel=3)


def per_record(values, data, name: str):
    """A per-record argument (weights, ids, labels) in the order of ``data``'s rows: a pandas Series
    is aligned by its index (which must hold each of the data's index labels once), anything else
    is taken by position. Neither object is modified.

    Examples
    --------
    >>> df = pd.DataFrame({"A": [0, 1, 1]}, index=[10, 11, 12])
    >>> per_record(pd.Series([0.5, 1.0, 0.2], index=[12, 10, 11]), df, "weights").tolist()
    [1.0, 0.2, 0.5]
    """
    if not isinstance(values, pd.Series) or not isinstance(data, pd.DataFrame):
        return values
    if values.index.equals(data.index):
        return values.to_numpy()
    if not data.index.is_unique:
        raise ValueError(f"{name}: a Series is aligned to the data by index, and the data's index repeats labels; pass a "
                         "numpy array in the rows' order, or reset the data's index")
    if not values.index.is_unique:
        raise ValueError(f"{name}: the Series' index repeats labels; each of the data's rows needs one entry")
    absent = data.index.difference(values.index)
    extra = values.index.difference(data.index)
    if len(absent) or len(extra):
        raise ValueError(f"{name}: a Series is aligned to the data by index, and its index does not match the data's "
                         f"({len(absent)} of the data's labels are not in it, e.g. {list(absent[:3])}; {len(extra)} of its labels "
                         f"are not the data's, e.g. {list(extra[:3])}); pass .to_numpy() to use it by position")
    return values.reindex(data.index).to_numpy()


def check_frame(data, name: str = "data", dask: bool = False) -> None:
    """A ``TypeError`` naming ``name`` unless ``data`` is a pandas DataFrame (or, with ``dask``, a
    Dask DataFrame).

    Examples
    --------
    >>> check_frame({"A": [1]}, "df")
    Traceback (most recent call last):
    ...
    TypeError: df: expected a pandas DataFrame, got dict
    >>> check_frame(pd.DataFrame([[1, 2]], columns=["A", "A"]))
    Traceback (most recent call last):
    ...
    ValueError: data: duplicated column names ['A']; every column must have its own name
    """
    if not (isinstance(data, pd.DataFrame) or (dask and is_dask(data) and hasattr(data, "columns"))):
        raise TypeError(f"{name}: expected a pandas {'or Dask ' if dask else ''}DataFrame, got {type(data).__name__}")
    dup = pd.Index(data.columns)
    dup = dup[dup.duplicated()].unique().tolist()
    if dup:
        raise ValueError(f"{name}: duplicated column names {dup}; every column must have its own name")


def check_domain(domain, name: str = "domain") -> Domain:
    """``domain`` itself if it is a ppgm ``Domain``; a ``TypeError`` naming ``name`` otherwise."""
    if not isinstance(domain, Domain):
        raise TypeError(f"{name}: expected a ppgm Domain (e.g. ppgm.adapters.to_engine(model).domain), got {type(domain).__name__}")
    return domain


def infer_domain(data: pd.DataFrame, columns: Sequence, state_names: Mapping | None = None) -> Domain:
    """Domain of ``columns``: given state names where supplied, else the sorted observed values.

    Parameters
    ----------
    data : pandas.DataFrame or dask.dataframe.DataFrame
    columns : list
        The columns to take (distinct names present in ``data``).
    state_names : mapping, optional
        ``{column: states}``; the other columns take their sorted observed values.

    Returns
    -------
    ppgm.Domain

    Raises
    ------
    TypeError, ValueError
        Not a DataFrame, unknown or repeated columns, malformed state lists, a column with no values.

    Examples
    --------
    >>> infer_domain(pd.DataFrame({"A": ["b", "a", "b"]}), ["A"]).state_names["A"]
    ('a', 'b')
    """
    check_frame(data, "data", dask=True)
    columns = checks.names(columns, "columns")
    absent = [c for c in columns if c not in data.columns]
    if absent:
        raise ValueError(f"columns: {absent} are not in the data; it has {list(data.columns)}")
    names = checks.state_names(state_names)
    states = {}
    for c in columns:
        if c in names:
            states[c] = list(names[c])
        else:
            states[c] = read_states(data[c], "data", c)
        if not states[c]:
            raise ValueError(f"data: column {c!r} has no values to take states from; declare them with state_names")
    return Domain(tuple(columns), tuple(len(states[c]) for c in columns), states)


def encode(data: pd.DataFrame, domain: Domain, dtype=np.int64) -> np.ndarray:
    """Integer codes (N, len(domain)) of the DataFrame's columns, states looked up in ``domain``
    (``dtype``: a signed integer type; ``np.int8`` holds up to 127 states in an eighth of the memory).

    Raises ``ValueError`` naming the column for a missing column, a missing value or a value that
    is not one of the variable's states. The DataFrame is not modified.

    Parameters
    ----------
    data : pandas.DataFrame
    domain : ppgm.Domain
    dtype : numpy integer type

    Returns
    -------
    numpy.ndarray
        Shape (N, len(domain)).

    Examples
    --------
    >>> d = Domain(("A",), (2,), {"A": ["no", "yes"]})
    >>> encode(pd.DataFrame({"A": ["yes", "no"]}), d).ravel().tolist()
    [1, 0]
    """
    try:
        signed = np.issubdtype(np.dtype(dtype), np.signedinteger)
    except TypeError:
        signed = False
    if not signed:
        raise TypeError(f"dtype: expected a signed numpy integer type such as np.int64 or np.int8, got {dtype!r:.80}")
    out = codes_or_unknown(data, domain, dtype)
    check_known(data, domain, out)
    return out


def check_known(data: pd.DataFrame, domain: Domain, codes: np.ndarray, name: str = "data", missing_ok: bool = False) -> None:
    """Raise ``ValueError`` naming the first column (and its values) that ``codes`` marks unknown (-1):
    missing values (unless ``missing_ok``), a column that mixes kinds, values of another kind than
    the states, or values that are not among them."""
    unknown = codes < 0
    if missing_ok and unknown.any():
        unknown &= ~data[list(domain.variables)].isna().to_numpy()
    bad_cols = np.flatnonzero(unknown.any(axis=0)) if codes.size else []
    if len(bad_cols):
        v = domain.variables[int(bad_cols[0])]
        col = data[v]
        if col.isna().any() and not missing_ok:
            raise ValueError(f"{name}: column {v!r} has missing values; give them a state of their own")
        column_kind(col, name, v)  # a column that mixes kinds: say so
        states = list(domain.state_names[v])
        bad = [x.item() if isinstance(x, np.generic) else x for x in pd.unique(col[unknown[:, int(bad_cols[0])]])[:5]]
        kinds = {checks.value_kind(x) for x in states} - {None}
        kind = column_kind(col, name, v)
        if len(kinds) == 1 and kind not in kinds:
            raise ValueError(f"{name}: column {v!r} holds {kind} values such as {bad[:3]}, its states {states[:10]} are "
                             f"{kinds.pop()} values; a value and a state of different kinds never match (1, True and '1' are "
                             "three states): convert the column or declare its states as written")
        raise ValueError(f"{name}: column {v!r} has values {bad} that are not among its states {states}"
                         + ("; declare every state (state_names, or the model's own)" if missing_ok else ""))


def codes_or_unknown(data: pd.DataFrame, domain: Domain, dtype=np.int64) -> np.ndarray:
    """Integer codes (N, len(domain)) of the DataFrame's columns, -1 where a value is missing or not
    among the variable's states (see :func:`encode`, which raises instead).

    Examples
    --------
    >>> d = Domain(("A",), (2,), {"A": ["no", "yes"]})
    >>> codes_or_unknown(pd.DataFrame({"A": ["yes", "maybe", None]}), d).ravel().tolist()
    [1, -1, -1]
    """
    check_frame(data, "data")
    check_domain(domain)
    missing = [v for v in domain.variables if v not in data.columns]
    if missing:
        raise ValueError(f"data: columns {missing} are missing; the DataFrame has {list(data.columns)}")
    if np.dtype(dtype).kind != "i" or max(domain.cards, default=1) > np.iinfo(dtype).max:
        raise ValueError(f"dtype: expected a signed integer type that holds {max(domain.cards, default=1)} states, got {np.dtype(dtype)}")
    out = np.empty((len(data), len(domain)), dtype=dtype)
    for j, v in enumerate(domain.variables):
        out[:, j] = state_codes(data[v], domain.state_names[v])
    return out


def state_codes(col: pd.Series, states: Sequence) -> np.ndarray:
    """Codes of a column's values among ``states`` by the module's rule (a value matches a state of
    its own kind that it equals: ``1.0`` matches ``1``, ``True`` does not), -1 for a missing value
    or one that matches no state (a column that mixes kinds is matched value by value).

    Examples
    --------
    >>> state_codes(pd.Series([1.0, True, "1", None, 0], dtype=object), [0, 1]).tolist()
    [1, -1, -1, -1, 0]
    """
    states = list(states)
    codes = pd.Index(states).get_indexer(col.astype(object) if isinstance(col.dtype, pd.CategoricalDtype) else col)
    state_kinds = np.array([checks.value_kind(x) for x in states] + [None], dtype=object)
    kind = column_kind(col, strict=False)
    if kind == "mixed":  # rare: the kinds value by value
        value_kinds = np.array([checks.value_kind(x) for x in col.to_numpy(dtype=object)], dtype=object)
        same = state_kinds[codes] == value_kinds
    else:
        same = state_kinds[codes] == kind
    return np.where(same & (codes >= 0) & ~col.isna().to_numpy(), codes, -1)


def declared_domain(columns: Sequence, states: Mapping, argument: str = "state_names") -> Domain:
    """Domain of ``columns`` from declared (public) states only, never from data values.

    Raises ``ValueError`` naming the columns whose states are not declared.

    Examples
    --------
    >>> declared_domain(["A"], {"A": ["no", "yes"], "B": [0, 1]}).cards
    (2,)
    """
    undeclared = [c for c in columns if c not in states]
    if undeclared:
        raise ValueError(
            f"{argument}: the states of {undeclared} are not declared. A private release counts over a public "
            "domain: pass state_names={column: [states...]} or a model whose factors declare them "
            "(states read from the data would disclose values that only the private data contain)"
        )
    names = {c: list(states[c]) for c in columns}
    empty = [c for c in columns if not names[c]]
    if empty:
        raise ValueError(f"{argument}: columns {empty} are declared with no states")
    return Domain(tuple(columns), tuple(len(names[c]) for c in columns), names)


def decode(records: np.ndarray, domain: Domain) -> pd.DataFrame:
    """DataFrame of state names from integer codes.

    Parameters
    ----------
    records : numpy.ndarray of int, shape (N, len(domain))
        State codes, each in ``0 .. card - 1``.
    domain : ppgm.Domain

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    TypeError, ValueError
        Not a Domain, a wrong shape, or codes outside a variable's states.

    Examples
    --------
    >>> d = Domain(("A",), (2,), {"A": ["no", "yes"]})
    >>> decode(np.array([[1], [0]]), d)["A"].tolist()
    ['yes', 'no']
    """
    check_domain(domain)
    codes = np.asarray(records) if isinstance(records, (np.ndarray, list, tuple)) else None
    if codes is None or codes.ndim != 2 or codes.shape[1] != len(domain) or (codes.size and codes.dtype.kind not in "iu"):
        raise ValueError(f"records: expected an integer array of shape (N, {len(domain)}), one column per variable of the domain, "
                         f"got {type(records).__name__} {getattr(records, 'shape', '')}")
    if codes.size and ((codes < 0).any() or (codes >= np.asarray(domain.cards)).any()):
        j = int(np.flatnonzero(((codes < 0) | (codes >= np.asarray(domain.cards))).any(axis=0))[0])
        raise ValueError(f"records: column {j} ({domain.variables[j]!r}) has codes outside 0..{domain.cards[j] - 1}")
    return pd.DataFrame(
        {v: np.asarray(domain.state_names[v], dtype=object)[codes[:, j]] for j, v in enumerate(domain.variables)}
    )


def clique_domain(data, cliques: Sequence[Sequence], state_names: Mapping | None = None,
                  argument: str = "cliques") -> tuple[list[tuple], Domain]:
    """Check that ``data`` (a pandas or Dask DataFrame) has every column the cliques name; return the
    cliques as tuples and the domain of their columns (see :func:`infer_domain`)."""
    check_frame(data, "data", dask=True)
    cliques = checks.cliques(cliques, argument)
    if not hasattr(data, "compute") and len(data) == 0:
        raise ValueError("data: the DataFrame has no rows")
    columns = list(dict.fromkeys(v for c in cliques for v in c))
    missing = [v for v in columns if v not in data.columns]
    if missing:
        raise ValueError(f"{argument}: columns {missing} are not in the data; it has {list(data.columns)}")
    return cliques, infer_domain(data, columns, state_names)


def contingency_tables(
    data: pd.DataFrame,
    cliques: Sequence[Sequence],
    state_names: Mapping | None = None,
    weights=None,
) -> list[DiscreteFactor]:
    """One count table per clique from a DataFrame, as pgmpy ``DiscreteFactor`` objects with state names.

    Parameters
    ----------
    data : pandas.DataFrame or dask.dataframe.DataFrame
        One record per row; the columns named in ``cliques`` are counted. A Dask DataFrame is
        counted partition by partition on its workers (same counts).
    cliques : sequence of sequences of column names
    state_names : mapping, optional
        ``{column: states}``; a column not given takes its sorted observed values.
        A value not among the given states is an error.
    weights : array-like of shape (N,), optional
        Per-record weights (for instance 1/K for a user contributing K records); a pandas Series
        is aligned to the data by index.

    Returns
    -------
    list of pgmpy DiscreteFactor
        One count table per clique, state names kept.

    Raises
    ------
    TypeError, ValueError
        Not a DataFrame, a bare pair of names instead of a list of cliques, unknown columns, values
        outside the declared states, malformed weights.

    Examples
    --------
    >>> df = pd.DataFrame({"A": ["a", "b", "a"], "B": [0, 1, 1]})
    >>> contingency_tables(df, [("A", "B")])[0].values.tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    cliques, dom = clique_domain(data, cliques, state_names)
    weights = per_record(weights, data, "weights")
    if is_dask(data):  # per-partition bincounts on the workers, summed by the engine's reduction
        if weights is not None:
            raise ValueError("weights: not supported for Dask data; add a weight column and aggregate it yourself")
        tables = _engine_tables(frame_blocks(data, lambda part: encode(part, dom), "partitions of the data"), dom, cliques)
    else:
        tables = _engine_tables(encode(data, dom), dom, cliques, weights=weights)
    return [
        DiscreteFactor(list(t.variables), list(t.shape), t.values.astype(float),
                       state_names={v: list(dom.state_names[v]) for v in t.variables})
        for t in tables
    ]


def sample(model, n: int, seed=None) -> pd.DataFrame:
    """``n`` exact samples from a pgmpy ``DiscreteMarkovNetwork`` or ``DiscreteBayesianNetwork``,
    as a DataFrame whose values are state names.

    Parameters
    ----------
    model : DiscreteMarkovNetwork or DiscreteBayesianNetwork
    n : int
        Number of records.
    seed : int or numpy.random.Generator, optional

    Returns
    -------
    pandas.DataFrame
        One column per variable, values are state names.

    Examples
    --------
    >>> from pgmpy.models import DiscreteBayesianNetwork
    >>> from pgmpy.factors.discrete import TabularCPD
    >>> bn = DiscreteBayesianNetwork()
    >>> bn.add_node("A")
    >>> bn.add_cpds(TabularCPD("A", 2, [[0.0], [1.0]], state_names={"A": ["off", "on"]}))
    >>> sample(bn, 2, seed=0)["A"].tolist()
    ['on', 'on']
    """
    m = to_engine(model)
    return decode(_engine_sample(m, n, seed), m.domain)


def sample_partitions(model, n: int, npartitions: int, seed=None, codes: bool = False):
    """``n`` exact samples of a pgmpy (or engine) model as a Dask collection of ``npartitions``
    partitions, each drawn on a worker with its own generator spawned from ``seed`` (same seed, same
    data). ``codes=True`` gives a Dask array of integer codes (columns in domain order), else a Dask
    DataFrame of state names.

    Parameters
    ----------
    model : pgmpy or engine model
    n : int
        Number of records in all.
    npartitions : int
        Number of partitions (1 .. n).
    seed : int or numpy.random.Generator, optional
    codes : bool
        Integer codes in a Dask array instead of a Dask DataFrame of state names.

    Returns
    -------
    dask.dataframe.DataFrame or dask.array.Array

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> ddf = sample_partitions(load_bif_example("asia"), 1000, 4, seed=0)
    >>> ddf.npartitions, len(ddf.compute())
    (4, 1000)
    """
    checks.flag(codes, "codes")
    import dask
    import dask.array as da
    import dask.dataframe as dd

    m = to_engine(model)
    n, npartitions = checks.count(n, "n"), checks.count(npartitions, "npartitions")
    if npartitions > n:
        raise ValueError(f"npartitions: expected 1 .. n ({n}), got {npartitions!r}")
    sizes = np.diff(np.linspace(0, int(n), int(npartitions) + 1).round().astype(int))
    seeds = np.random.SeedSequence(as_generator(seed).integers(1 << 63)).spawn(len(sizes))
    d = len(m.domain)
    if codes:
        blocks = [da.from_delayed(dask.delayed(_engine_sample)(m, int(k), np.random.default_rng(s)), shape=(int(k), d), dtype=np.int64)
                  for k, s in zip(sizes, seeds)]
        return da.concatenate(blocks, axis=0)
    meta = decode(np.zeros((1, d), np.int64), m.domain).iloc[:0]  # the dtypes decode really produces
    return dd.from_delayed([dask.delayed(lambda k, s: decode(_engine_sample(m, k, np.random.default_rng(s)), m.domain))(int(k), s)
                            for k, s in zip(sizes, seeds)], meta=meta)


def read_records(path, missing=None, *, columns: Sequence | None = None, sep: str = ",", encoding: str = "utf-8") -> pd.DataFrame:
    """Records from a CSV file with every cell kept as the text written: ``TRUE`` stays ``"TRUE"``
    (pandas reads it as a boolean), ``None`` and ``NA`` stay states (pandas reads them as missing),
    ``01`` stays ``"01"`` and ``1.0`` stays ``"1.0"`` (pandas reads both as numbers, merging ``01``
    with ``1``), an empty cell stays ``""``. Only the markers named in ``missing`` are read as
    missing values.

    Parameters
    ----------
    path : str or os.PathLike
    missing : str or list of str, optional
        The cells, as written, that mean "no value" (e.g. ``["", "NA"]``): read as missing (None).
        Default: none; every cell is a state.
    columns : list of str, optional
        The columns to read (default: all).
    sep : str
        The field separator.
    encoding : str

    Returns
    -------
    pandas.DataFrame
        One row per record, every column of text (``str``) with missing values where ``missing``
        says; the index 0 .. N - 1.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    TypeError, ValueError
        Markers that are not text, a header that repeats a column name (pandas would rename the
        second ``A`` to ``A.1``), a column asked for that the header lacks.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "survey.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("smoker,code,score\\nTRUE,01,1.0\\nNone,NA,\\n")
    >>> read_records(path).values.tolist()
    [['TRUE', '01', '1.0'], ['None', 'NA', '']]
    >>> read_records(path, missing=["", "NA"])["code"].tolist()
    ['01', None]
    """
    import csv
    import os

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    if not os.path.isfile(path):
        if os.path.isdir(path):
            raise ValueError(f"path: {str(path)!r} is a directory, not a CSV file")
        raise FileNotFoundError(f"path: no file {str(path)!r}")
    markers = [missing] if isinstance(missing, str) else [] if missing is None else missing
    if isinstance(markers, (bytes, Mapping)) or not isinstance(markers, (list, tuple, set)) or not all(isinstance(m, str) for m in markers):
        raise TypeError(f"missing: expected a marker or a list of markers as written in the file (text), got {missing!r:.80}")
    if not isinstance(sep, str) or len(sep) != 1:
        raise ValueError(f"sep: expected one character, got {sep!r}")
    import codecs

    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError, ValueError):
        raise ValueError(f"encoding: expected the name of a text encoding such as 'utf-8', got {encoding!r:.80}") from None
    with open(path, newline="", encoding=encoding) as fh:
        header = next(csv.reader(fh, delimiter=sep), None)
    if not header:
        raise ValueError(f"path: {str(path)!r} has no header line (the first line names the columns)")
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise ValueError(f"path: the header repeats the column names {repeated}; every column must have its own name")
    if columns is not None:
        columns = list(checks.names(columns, "columns"))
        absent = [c for c in columns if c not in header]
        if absent:
            raise ValueError(f"columns: {absent} are not in the file's header {header}")
    data = pd.read_csv(path, sep=sep, encoding=encoding, dtype=str, keep_default_na=False, na_filter=bool(markers),
                       na_values=list(markers) if markers else None, usecols=columns)
    if markers:  # pandas' missing value, as None: an object column whose values are text or nothing
        data = data.astype(object).where(data.notna(), None)
    return data


def to_frame(tables, domain: Domain | None = None, value: str = "value") -> pd.DataFrame:
    """A table, or a set of tables, as a long DataFrame: one row per cell, a column per variable
    holding its state, and ``value``. For a pgmpy ``DiscreteFactor`` (a query's answer, a network's
    factor, a count table), a ``TabularCPD`` (one row per child state and parent configuration: the
    conditional probability), a released ``NoisyFactor``, or the engine's ``ppgm.Factor`` (states
    from ``domain``, else the codes 0 .. k - 1); and for a list, tuple or dict of them,
    ``NoisyTables`` or ``BoundedTables``, stacked with a first column ``table`` (the position, or
    the dict's key) and a variable outside a table's scope missing (NaN) on its rows.

    Parameters
    ----------
    tables : table, sequence or dict of tables, NoisyTables or BoundedTables
    domain : ppgm.Domain, optional
        The state names of engine factors.
    value : str
        The name of the value column (e.g. ``"count"``, ``"probability"``).

    Returns
    -------
    pandas.DataFrame
        Cells in the table's order (the last variable's state changing fastest).

    Raises
    ------
    TypeError, ValueError
        Not a table, an empty set of tables, a value column named like a variable.

    Examples
    --------
    >>> f = DiscreteFactor(["A", "B"], [2, 2], [0.1, 0.2, 0.3, 0.4], state_names={"A": ["no", "yes"], "B": [0, 1]})
    >>> to_frame(f, value="p").values.tolist()
    [['no', 0, 0.1], ['no', 1, 0.2], ['yes', 0, 0.3], ['yes', 1, 0.4]]
    >>> to_frame({"A": f.marginalize(["B"], inplace=False)}).values.tolist()
    [['A', 'no', 0.30000000000000004], ['A', 'yes', 0.7]]
    """
    if not isinstance(value, str):
        raise TypeError(f"value: expected a column name (text), got {value!r:.80}")
    if domain is not None:
        check_domain(domain)
    if hasattr(tables, "as_factors"):  # BoundedTables
        tables = tables.as_factors()
    elif hasattr(tables, "factors") and hasattr(tables, "measurements"):  # NoisyTables
        tables = list(tables.factors)
    if _is_table(tables):
        return _table_frame(tables, domain, value, "tables")
    if isinstance(tables, Mapping):
        keys, items = list(tables.keys()), list(tables.values())
    elif isinstance(tables, (list, tuple)):
        keys, items = list(range(len(tables))), list(tables)
    else:
        raise TypeError(f"tables: expected a pgmpy DiscreteFactor, a NoisyFactor, a ppgm Factor, or a list or dict of them, "
                        f"got {type(tables).__name__}")
    if not items:
        raise ValueError("tables: expected at least one table")
    frames = []
    for k, t in zip(keys, items):
        if not _is_table(t):
            raise TypeError(f"tables[{k!r}]: expected a pgmpy DiscreteFactor, a NoisyFactor or a ppgm Factor, got {type(t).__name__}")
        frames.append(_table_frame(t, domain, value, f"tables[{k!r}]"))
    if "table" in {c for f in frames for c in f.columns}:
        raise ValueError("tables: a variable is named 'table', the column that tells the tables apart; rename it")
    out = pd.concat([f.assign(table=[k] * len(f)) for k, f in zip(keys, frames)], ignore_index=True)
    order = ["table"] + list(dict.fromkeys(c for f in frames for c in f.columns if c != value)) + [value]
    return out[order]


def _is_table(t) -> bool:
    return hasattr(t, "variables") and hasattr(t, "values") and not isinstance(t, (pd.DataFrame, pd.Series, Mapping))


def _table_frame(t, domain: Domain | None, value: str, name: str) -> pd.DataFrame:
    """One table's cells as rows (see :func:`to_frame`)."""
    variables = list(t.variables)
    vals = np.asarray(t.values)
    if vals.ndim != len(variables):
        raise ValueError(f"{name}: {len(variables)} variables but values of shape {vals.shape}")
    if value in variables:
        raise ValueError(f"value: {value!r} is also a variable of {name}; name the value column otherwise")
    names = getattr(t, "state_names", None) or {}
    cells = np.unravel_index(np.arange(vals.size), vals.shape)
    out = {}
    for j, v in enumerate(variables):
        if v in names:
            states = list(names[v])
        elif domain is not None and v in domain.variables:
            states = list(domain.state_names[v])
        else:
            states = list(range(vals.shape[j]))
        if len(states) != vals.shape[j]:
            raise ValueError(f"{name}: variable {v!r} has {len(states)} states but {vals.shape[j]} cells along its axis")
        out[v] = pd.Index(states).take(cells[j]).to_numpy()
    out[value] = vals.ravel()
    return pd.DataFrame(out)
