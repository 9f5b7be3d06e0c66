"""pandas DataFrames <-> integer-coded records, contingency tables and samples."""

from __future__ import annotations

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


def sorted_states(values) -> list:
    """Distinct non-missing values, sorted (by their text when they do not compare): the default
    states of a column.

    Examples
    --------
    >>> sorted_states(pd.Series(["b", None, "a", "b"]))
    ['a', 'b']
    """
    if hasattr(values, "compute"):  # a Dask series: the distinct values come back, not the rows
        values = values.dropna().unique().compute()
    vals = list(pd.unique(pd.Series(values).dropna()))
    try:
        return sorted(vals)
    except TypeError:
        return sorted(vals, key=str)


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
            states[c] = sorted_states(data[c])
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


def check_known(data: pd.DataFrame, domain: Domain, codes: np.ndarray) -> None:
    """Raise ``ValueError`` naming the first column (and its values) that ``codes`` marks unknown (-1)."""
    bad_cols = np.flatnonzero((codes < 0).any(axis=0)) if codes.size else []
    if len(bad_cols):
        v = domain.variables[int(bad_cols[0])]
        col = data[v]
        if col.isna().any():
            raise ValueError(f"data: column {v!r} has missing values; give them a state of their own")
        bad = pd.unique(col[codes[:, int(bad_cols[0])] < 0])[:5]
        raise ValueError(f"data: column {v!r} has values {list(bad)} that are not among its states {list(domain.state_names[v])}")


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
        col = data[v]
        codes = pd.Index(list(domain.state_names[v])).get_indexer(col)
        out[:, j] = np.where(col.isna().to_numpy(), -1, codes)
    return out


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
        Per-record weights (for instance 1/K for a user contributing K records).

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
