"""The column layer: what each column of a table is, and how records become codes and codes records.

A *schema* says, for every column an entry point reads, its kind and its public description, in the
mapping users already pass as ``state_names`` (Python) or ``--domain`` (the command line's JSON):

- a list of states: a categorical column, its states as written (``["F", "M"]``);
- an object: a numeric column, ``{"min": 0, "max": 20000}`` with optional ``"integer": true``,
  ``"bins"`` (a count of equal-width bins over the range, or ``"auto"``, the default), ``"edges"``
  (the user's bin edges) and ``"missing": true`` (a missing value is a state of its own; a
  categorical column takes ``{"states": [...], "missing": true}``).

``"auto"`` bins are chosen where the entry point can afford it: privately in a private release,
from a noisy fine histogram whose cost is charged on the release's ledger
(:mod:`ppgm.privacy.private_bins`), and from the data's quantiles in a fit that is not private.
Values outside a numeric column's public range are clipped into it (a private release must not
read the range from the data).

Records are read once, at the door (:meth:`Schema.read`: every column checked, numbers parsed, each
cell's code or a mark that it is unknown), coded (:meth:`Schema.encode`) and, for synthetic records,
decoded back to values of the column's kind (:meth:`Schema.decode`: a numeric column's numbers are
drawn inside their bin from its within-bin shape, never outside the public range, integers as
integers). :class:`FeatureEncoder` is the same layer's encoder for aggregated tables (MaxEnt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ppgm.core import checks
from ppgm.factors.bins import NumericBins, bin_labels, fine_grid
from ppgm.factors.domain import Domain

from .data import _text, check_frame, check_known, column_kind, state_codes, state_text

MISSING = "<missing>"

#: Bins of a numeric column whose bins are ``"auto"`` in a fit that is not private: equal-count
#: bins at the data's quantiles (repeated edges merged).
DATA_BINS = 10

_NUMERIC_KEYS = {"min", "max", "integer", "bins", "edges", "missing"}


@dataclass(frozen=True)
class Categorical:
    """A categorical column: its public states, as written, and whether a missing value is a state.

    Parameters
    ----------
    states : tuple
        Distinct states of one kind.
    missing : bool
        A missing value is a state of its own (``"<missing>"``), after the others.

    Examples
    --------
    >>> Categorical(("F", "M"), missing=True).names
    ['F', 'M', '<missing>']
    """

    states: tuple
    missing: bool = False

    @property
    def names(self) -> list:
        """The column's states in the domain, the missing state last."""
        return list(self.states) + ([MISSING] if self.missing else [])


@dataclass(frozen=True)
class Numeric:
    """A numeric column: its public range, whole numbers or not, how it is cut into bins, and
    whether a missing value is a state.

    Parameters
    ----------
    min, max : float, optional
        The public range (required in a private release; read from the data otherwise).
    integer : bool
        Whole numbers: bins are runs of integers and decoded values are integers.
    bins : int or "auto"
        Equal-width bins over the range, or ``"auto"``: chosen privately in a private release, at
        the data's quantiles otherwise.
    edges : tuple of float, optional
        The user's bin edges (public); ``min`` and ``max`` are added when they are not among them.
    missing : bool
        A missing value is a state of its own.

    Examples
    --------
    >>> Numeric(0, 100, integer=True, bins=4).resolve("age").labels
    ['0-24', '25-49', '50-75', '76-100']
    """

    min: float | None = None
    max: float | None = None
    integer: bool = False
    bins: int | str = "auto"
    edges: tuple | None = None
    missing: bool = False

    @property
    def public(self) -> bool:
        """Bins known without reading the data: the user's edges or an equal-width count."""
        return self.edges is not None or self.bins != "auto"

    def bounds(self, name: str) -> tuple[float, float]:
        """The public range; a ``ValueError`` naming the column when it is not given."""
        if self.min is None or self.max is None:
            raise ValueError(f"state_names[{name!r}]: a private release needs the column's public range, "
                             "{'min': ..., 'max': ...} (a range read from the data would disclose its extremes)")
        return float(self.min), float(self.max)

    def resolve(self, name: str, cells: bool = False) -> NumericBins:
        """The bins when they are public (equal-width or the user's edges); with ``cells`` the fine
        grid too (:func:`ppgm.factors.bins.fine_grid`, the user's edges among its boundaries), over
        which a private release measures the within-bin shape.

        Parameters
        ----------
        name : str
            The column (for errors).
        cells : bool

        Returns
        -------
        ppgm.factors.bins.NumericBins
        """
        lo, hi = self.bounds(name)
        if self.edges is not None:
            edges = _internal_edges(self.edges, lo, hi, self.integer, name)
        elif self.bins != "auto":
            edges = NumericBins.equal_width(lo, hi, int(self.bins), self.integer).edges
        else:
            raise ValueError(f"state_names[{name!r}]: bins 'auto' are chosen from the data; give 'bins' or 'edges' for public bins")
        grid = np.union1d(fine_grid(lo, hi, self.integer), edges) if cells else None
        return NumericBins(lo, hi, edges, self.integer, cells=grid)


def _internal_edges(edges, lo: float, hi: float, integer: bool, name: str) -> np.ndarray:
    """The user's edges with the range's ends, as :class:`NumericBins` holds them (integer columns:
    the first integer of each bin, then ``max + 1``)."""
    e = np.asarray(edges, dtype=float)
    if e.ndim != 1 or e.size < 1 or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
        raise ValueError(f"state_names[{name!r}]: 'edges' must be finite and increasing, got {list(edges)}")
    if e[0] < lo or e[-1] > hi:
        raise ValueError(f"state_names[{name!r}]: 'edges' {list(edges)} go outside the range [{lo:g}, {hi:g}]")
    if integer:
        inner = np.unique(np.ceil(e[(e > lo) & (e < hi)]))
        return np.concatenate([[lo], inner[inner <= hi], [hi + 1]])
    return np.unique(np.concatenate([[lo], e, [hi]]))


def column_spec(name, spec, argument: str = "state_names") -> Categorical | Numeric:
    """One column's entry of a schema mapping, checked: a list of states, a numeric object
    (``{"min", "max", "integer", "bins", "edges", "missing"}``), ``{"states": [...], "missing": ...}``
    or a :class:`Categorical` / :class:`Numeric`. Errors name the argument and the column.

    Parameters
    ----------
    name : hashable
        The column.
    spec : list, dict, Categorical or Numeric
    argument : str
        The argument's name in errors.

    Returns
    -------
    Categorical or Numeric

    Raises
    ------
    TypeError, ValueError
        An entry of no known form, unknown keys, a range or edges that are not numbers.

    Examples
    --------
    >>> column_spec("age", {"min": 17, "max": 90, "integer": True})
    Numeric(min=17.0, max=90.0, integer=True, bins='auto', edges=None, missing=False)
    >>> column_spec("sex", ["F", "M"]).states
    ('F', 'M')
    """
    where = f"{argument}[{name!r}]"
    if isinstance(spec, (Categorical, Numeric)):
        return spec
    if isinstance(spec, Mapping) and "states" in spec:
        extra = set(spec) - {"states", "missing"}
        if extra:
            raise ValueError(f"{where}: a categorical column takes 'states' and 'missing', got also {sorted(extra)}")
        return Categorical(tuple(checks.state_names({name: spec["states"]}, argument)[name]),
                           checks.flag(spec.get("missing", False), f"{where}['missing']"))
    if isinstance(spec, Mapping):
        extra = set(spec) - _NUMERIC_KEYS
        if extra:
            raise ValueError(f"{where}: unknown keys {sorted(map(str, extra))}; a numeric column takes {sorted(_NUMERIC_KEYS)}")
        integer = checks.flag(spec.get("integer", False), f"{where}['integer']")
        lo, hi = spec.get("min"), spec.get("max")
        for key, x in (("min", lo), ("max", hi)):
            if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating))
                                  or not math.isfinite(float(x))):
                raise TypeError(f"{where}['{key}']: expected a finite number, got {x!r}")
        if lo is not None and hi is not None and not float(lo) < float(hi):
            raise ValueError(f"{where}: expected min < max, got min={lo!r}, max={hi!r}")
        if integer and any(x is not None and float(x) != round(float(x)) for x in (lo, hi)):
            raise ValueError(f"{where}: an integer column needs whole-number min and max, got {lo!r} and {hi!r}")
        bins = spec.get("bins", "auto")
        if not (bins == "auto" or (isinstance(bins, (int, np.integer)) and not isinstance(bins, bool) and bins >= 1)):
            raise ValueError(f"{where}['bins']: expected a positive whole number of bins or 'auto', got {bins!r}")
        edges = spec.get("edges")
        if edges is not None:
            if isinstance(edges, (str, bytes)) or not isinstance(edges, (Sequence, np.ndarray)) or not all(
                    isinstance(e, (int, float, np.integer, np.floating)) and not isinstance(e, bool) for e in edges):
                raise TypeError(f"{where}['edges']: expected a list of numbers, got {edges!r:.80}")
            edges = tuple(float(e) for e in edges)
            if spec.get("bins", "auto") != "auto":
                raise ValueError(f"{where}: give 'bins' or 'edges', not both")
            if len(edges) < 1 or np.any(np.diff(edges) <= 0) or not np.all(np.isfinite(edges)):
                raise ValueError(f"{where}['edges']: expected finite, increasing edges, got {list(edges)}")
            lo = edges[0] if lo is None else lo
            hi = edges[-1] if hi is None else hi
        return Numeric(None if lo is None else float(lo), None if hi is None else float(hi), integer,
                       int(bins) if bins != "auto" else "auto", edges, checks.flag(spec.get("missing", False), f"{where}['missing']"))
    return Categorical(tuple(checks.state_names({name: spec}, argument)[name]))


@dataclass(frozen=True)
class Records:
    """A DataFrame read through a :class:`Schema`, once: every categorical cell's code among its
    states, every numeric cell's number, and which cells are unknown (missing where missing is no
    state, a number that is not one, a value that is not among the states). The caller's frame is
    kept for its index and the columns outside the schema; it is never modified.

    Parameters
    ----------
    data : pandas.DataFrame
    schema : Schema
    codes : numpy.ndarray
        (N, d) codes of the categorical columns and of the missing values that are a state; -1 elsewhere.
    values : dict
        ``{numeric column: float array}``, NaN where there is no number.
    unknown : numpy.ndarray
        (N, d) bool.

    Examples
    --------
    >>> s = Schema.parse({"sex": ["F", "M"], "age": {"min": 0, "max": 99, "integer": True, "bins": 2}})
    >>> r = s.read(pd.DataFrame({"sex": ["M", "X"], "age": ["7", "x"]}))
    >>> r.unknown.tolist(), r.values["age"].tolist()
    ([[False, False], [True, True]], [7.0, nan])
    """

    data: pd.DataFrame
    schema: "Schema"
    codes: np.ndarray
    values: dict
    unknown: np.ndarray

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def known(self) -> np.ndarray:
        """Rows whose every cell is known."""
        return ~self.unknown.any(axis=1)

    def check(self, argument: str = "data", missing_ok: bool = False) -> None:
        """A ``ValueError`` naming the first column with unknown cells and some of its values (with
        ``missing_ok``, missing values are let through for the learners that fill them)."""
        bad = self.unknown.copy()
        if missing_ok:
            bad &= ~self.data[list(self.schema.names)].isna().to_numpy()
        cols = np.flatnonzero(bad.any(axis=0)) if bad.size else []
        if not len(cols):
            return
        j = int(cols[0])
        v = self.schema.names[j]
        spec = self.schema.columns[v]
        if isinstance(spec, Categorical):
            dom = Domain((v,), (len(spec.names),), {v: spec.names})
            check_known(self.data, dom, np.where(bad[:, [j]], -1, 0), argument, missing_ok)
        col = self.data[v]
        if col.isna().to_numpy()[bad[:, j]].any():
            raise ValueError(f"{argument}: column {v!r} has missing values; declare them a state ({{..., 'missing': true}}), "
                             "drop those records, or use a learner that fills them")
        examples = [x.item() if isinstance(x, np.generic) else x for x in pd.unique(col[bad[:, j]])[:5]]
        raise ValueError(f"{argument}: numeric column {v!r} has values that are not numbers, e.g. {examples}")


class Schema:
    """Every column's kind and public description (see the module docstring), and the bins of the
    numeric columns once they are chosen. Immutable: choosing bins returns a new schema.

    Parameters
    ----------
    columns : mapping
        ``{column: Categorical or Numeric}`` in the order of the domain.
    bins : mapping, optional
        ``{numeric column: NumericBins}``, the bins chosen so far.

    Examples
    --------
    >>> s = Schema.parse({"sex": ["F", "M"], "hours": {"min": 0, "max": 100, "bins": 2}}).public_bins()
    >>> s.domain.state_names["hours"], s.encode(s.read(pd.DataFrame({"sex": ["M"], "hours": [72.5]}))).tolist()
    (('[0, 50)', '[50, 100]'), [[1, 1]])
    """

    def __init__(self, columns: Mapping, bins: Mapping | None = None) -> None:
        self.columns = dict(columns)
        self.bins = dict(bins or {})
        self.names = tuple(self.columns)

    def __repr__(self) -> str:
        kinds = ", ".join(f"{c!r}: {'numeric' if isinstance(s, Numeric) else f'{len(s.names)} states'}" for c, s in self.columns.items())
        return f"Schema({{{kinds}}})"

    @classmethod
    def parse(cls, mapping, argument: str = "state_names") -> "Schema":
        """A schema from the mapping users write (or a schema itself).

        Parameters
        ----------
        mapping : mapping or Schema
            ``{column: states or numeric object}``.
        argument : str
            The argument's name in errors.

        Returns
        -------
        Schema

        Examples
        --------
        >>> Schema.parse({"a": [0, 1], "x": {"min": 0, "max": 1}}).numeric
        ['x']
        """
        if isinstance(mapping, Schema):
            return mapping
        return cls({c: column_spec(c, s, argument) for c, s in checks.mapping(mapping, argument).items()})

    @property
    def numeric(self) -> list:
        """The numeric columns."""
        return [c for c, s in self.columns.items() if isinstance(s, Numeric)]

    @property
    def unresolved(self) -> list:
        """The numeric columns whose bins are not chosen yet."""
        return [c for c in self.numeric if c not in self.bins]

    def with_bins(self, bins: Mapping) -> "Schema":
        """The same columns with these numeric columns' bins chosen.

        Parameters
        ----------
        bins : mapping
            ``{numeric column: NumericBins}``.

        Returns
        -------
        Schema
        """
        return Schema(self.columns, {**self.bins, **dict(bins)})

    def project(self, columns: Sequence) -> "Schema":
        """The schema of some of the columns, in the order given.

        Parameters
        ----------
        columns : sequence

        Returns
        -------
        Schema
        """
        return Schema({c: self.columns[c] for c in columns}, {c: b for c, b in self.bins.items() if c in columns})

    def public_bins(self, cells: bool = False) -> "Schema":
        """Every numeric column whose bins are public (a count or edges) with its bins chosen (with
        ``cells``, its fine grid too).

        Parameters
        ----------
        cells : bool

        Returns
        -------
        Schema
        """
        return self.with_bins({c: self.columns[c].resolve(c, cells) for c in self.unresolved if self.columns[c].public})

    def data_bins(self, records: Records) -> "Schema":
        """The numeric columns' bins read from the data where they are not public (not private):
        the range, where not given, from the values; ``"auto"`` bins at ``DATA_BINS`` quantiles.

        Parameters
        ----------
        records : Records

        Returns
        -------
        Schema
        """
        out = {}
        for c in self.unresolved:
            spec, x = self.columns[c], records.values[c]
            x = x[~np.isnan(x)]
            if not x.size:
                raise ValueError(f"data: numeric column {c!r} has no values to choose bins from")
            lo = float(x.min()) if spec.min is None else spec.min
            hi = float(x.max()) if spec.max is None else spec.max
            if not lo < hi:
                hi = lo + 1.0
            full = Numeric(lo, hi, spec.integer, spec.bins, spec.edges, spec.missing)
            if full.public:
                out[c] = full.resolve(c)
                continue
            q = np.quantile(np.clip(x, lo, hi), np.linspace(0, 1, DATA_BINS + 1)[1:-1])
            b = np.unique(np.ceil(q) if spec.integer else q)
            out[c] = NumericBins(lo, hi, _internal_edges(b[(b > lo) & (b < hi)], lo, hi, spec.integer, c), spec.integer)
        return self.with_bins(out)

    @property
    def domain(self) -> Domain:
        """The discrete domain: categorical states as declared, numeric bins' labels (the missing
        state last where it is one). Every numeric column's bins must be chosen."""
        if self.unresolved:
            raise ValueError(f"state_names: the bins of {self.unresolved} are not chosen yet")
        names = {}
        for c, s in self.columns.items():
            names[c] = s.names if isinstance(s, Categorical) else self.bins[c].labels + ([MISSING] if s.missing else [])
        return Domain(self.names, tuple(len(names[c]) for c in self.names), names)

    def read(self, data: pd.DataFrame, argument: str = "data") -> Records:
        """Read ``data``'s columns once: categorical codes, numbers parsed (text such as a CSV's
        ``"39"`` included), unknown cells marked. Nothing is raised for unknown cells
        (:meth:`Records.check` does).

        Parameters
        ----------
        data : pandas.DataFrame
        argument : str
            The argument's name in errors.

        Returns
        -------
        Records

        Raises
        ------
        TypeError, ValueError
            Not a DataFrame, or a column of the schema absent.
        """
        check_frame(data, argument)
        absent = [c for c in self.names if c not in data.columns]
        if absent:
            raise ValueError(f"{argument}: columns {absent} are missing; the DataFrame has {list(data.columns)}")
        n, d = len(data), len(self.names)
        codes = np.full((n, d), -1, dtype=np.int64)
        unknown = np.zeros((n, d), dtype=bool)
        values = {}
        for j, c in enumerate(self.names):
            spec, col = self.columns[c], data[c]
            miss = col.isna().to_numpy()
            if isinstance(spec, Categorical):
                codes[:, j] = state_codes(col, spec.states)
            else:
                x = _numbers(col)
                values[c] = x
                codes[:, j] = np.where(np.isnan(x), -1, 0)
            if spec.missing:
                codes[:, j] = np.where(miss, len(spec.names) - 1 if isinstance(spec, Categorical) else -2, codes[:, j])
            unknown[:, j] = codes[:, j] == -1
        return Records(data, self, codes, values, unknown)

    def encode(self, records: Records) -> np.ndarray:
        """Codes (N, d) of read records over :attr:`domain` (numeric cells by bin, after clipping
        into the public range); -1 where a cell is unknown.

        Parameters
        ----------
        records : Records

        Returns
        -------
        numpy.ndarray
        """
        dom = self.domain
        out = records.codes.copy()
        for c in self.numeric:
            j = self.names.index(c)
            got = self.bins[c].codes(records.values[c])
            out[:, j] = np.where(records.codes[:, j] == -2, dom.cards[j] - 1, np.where(records.unknown[:, j], -1, got))
        return out

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
        """Records of values from codes over :attr:`domain`: categorical states as declared, the
        missing state as a missing value, numbers drawn inside their bin (post-processing, with
        ``rng``), integer columns as integers (pandas' ``Int64`` where a value may be missing).

        Parameters
        ----------
        codes : numpy.ndarray
            (N, d) codes.
        rng : numpy.random.Generator

        Returns
        -------
        pandas.DataFrame
        """
        dom = self.domain
        codes = np.asarray(codes, dtype=np.int64)
        out = {}
        for j, c in enumerate(self.names):
            spec, k = self.columns[c], codes[:, j]
            miss = k == dom.cards[j] - 1 if spec.missing else np.zeros(k.size, dtype=bool)
            if isinstance(spec, Categorical):
                col = np.asarray(list(spec.states) + [None], dtype=object)[np.where(miss, len(spec.states), k)]
                out[c] = col
                continue
            x = self.bins[c].draw(np.where(miss, 0, k), rng)
            if spec.integer:
                out[c] = pd.array(np.where(miss, 0, x).astype(np.int64), dtype="Int64") if spec.missing else x.astype(np.int64)
                if spec.missing:
                    out[c][miss] = pd.NA
            else:
                out[c] = np.where(miss, np.nan, x)
        return pd.DataFrame(out)

    def describe(self) -> dict:
        """A JSON-ready description of the public schema as released: each column's kind, states
        or range and bin edges (for a privacy report: the bins are part of what a release publishes).

        Returns
        -------
        dict
        """
        out = {}
        for c, s in self.columns.items():
            if isinstance(s, Categorical):
                out[str(c)] = {"kind": "categorical", "states": [_plain(v) for v in s.states], "missing": s.missing}
            else:
                b = self.bins.get(c)
                out[str(c)] = {"kind": "numeric", "min": s.min, "max": s.max, "integer": s.integer, "missing": s.missing,
                               "bins": b.labels if b is not None else s.bins,
                               "edges": b.edges.tolist() if b is not None else None}
        return out


def bin_numeric(data, state_names, argument: str = "state_names") -> tuple:
    """The learners that are not private take numeric columns through this: each numeric entry of
    ``state_names`` (``{"bins": 10}``, ``{"min": 0, "max": 90, "edges": [...]}``, ``{}`` for the
    defaults) is cut into bins, public where they are given and read from the data otherwise
    (:meth:`Schema.data_bins`: the range from the values, ``"auto"`` bins at the data's deciles),
    and its column replaced by the bins' labels (a missing value stays missing). The caller's frame
    is not modified.

    Parameters
    ----------
    data : pandas.DataFrame
    state_names : mapping or None
        ``{column: states or numeric object}``.
    argument : str
        The argument's name in errors.

    Returns
    -------
    tuple
        ``(data, state_names, schema)``: the frame with binned columns (``data`` itself when no
        column is numeric), the states of every declared column (numeric ones: their bins' labels),
        and the numeric columns' :class:`Schema` (None when there are none), which codes new records
        the same way.

    Examples
    --------
    >>> df = pd.DataFrame({"age": [20, 35, 50, 65], "smoker": ["y", "n", "n", "y"]})
    >>> out, states, schema = bin_numeric(df, {"age": {"min": 0, "max": 100, "bins": 2}})
    >>> out["age"].tolist(), states["age"]
    (['[0, 50)', '[0, 50)', '[50, 100]', '[50, 100]'], ['[0, 50)', '[50, 100]'])
    """
    given = checks.mapping(state_names, argument)
    numeric = [c for c, s in given.items() if isinstance(s, Numeric) or (isinstance(s, Mapping) and "states" not in s)]
    if not numeric:
        return data, state_names, None
    check_frame(data, "data")
    absent = [c for c in numeric if c not in data.columns]
    if absent:
        raise ValueError(f"{argument}: numeric columns {absent} are not in the data; it has {list(data.columns)}")
    schema = Schema.parse({c: given[c] for c in numeric}, argument)
    records = schema.read(data, "data")
    records.check("data", missing_ok=True)
    schema = schema.data_bins(records)
    codes, dom = schema.encode(records), schema.domain
    out = data.copy(deep=False)
    for j, c in enumerate(schema.names):
        labels = np.asarray(list(dom.state_names[c]) + [None], dtype=object)
        out[c] = labels[np.where(codes[:, j] < 0, dom.cards[j], codes[:, j])]
    states = {c: (list(dom.state_names[c]) if c in numeric else s) for c, s in given.items()}
    return out, states, schema


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _numbers(col: pd.Series) -> np.ndarray:
    """A column's numbers as floats: numeric columns as they are, text parsed (``"39"``, ``"1e3"``);
    NaN where a cell is missing or is not a number (booleans are not numbers)."""
    if pd.api.types.is_bool_dtype(col.dtype):
        return np.full(len(col), np.nan)
    if pd.api.types.is_numeric_dtype(col.dtype):
        return col.to_numpy(dtype=float, na_value=np.nan)
    kind = column_kind(col, strict=False)
    if kind in (None, "bool"):
        return np.full(len(col), np.nan)
    vals = col.astype(object)
    if kind == "mixed":  # rare: booleans among the values are not numbers
        vals = vals.where(~vals.map(lambda v: isinstance(v, (bool, np.bool_))), None)
    return pd.to_numeric(vals, errors="coerce").to_numpy(dtype=float, na_value=np.nan)




@dataclass
class FeatureEncoder:
    """How one column becomes integer codes: equal-width bins (numeric) or an explicit category
    list (anything else, or numeric columns with at most ``bins`` distinct values); a missing value
    is a category of its own. Values never seen when fitting encode as -1.

    Parameters
    ----------
    name : str
        The column.
    kind : {"numeric", "categorical"}
    states : list
        The states (bin labels or categories, then ``"<missing>"`` if any).
    edges : list of float, optional
        Bin edges of a numeric encoder.
    missing : bool
        Missing values have a state of their own.

    Examples
    --------
    >>> enc = FeatureEncoder.fit(pd.Series([1.0, 2.0, 3.0, 10.0, None]), bins=3)
    >>> enc.states
    ['[1, 4)', '[4, 7)', '[7, 10]', '<missing>']
    >>> enc.encode(pd.Series([0.5, 9.0, None])).tolist()   # below the range: first bin
    [0, 2, 3]
    """

    name: str
    kind: str
    states: list
    edges: list | None = None
    missing: bool = False

    @classmethod
    def fit(cls, series, bins: int = 10, strategy: str = "uniform", missing: bool | None = None,
            summary: Mapping | None = None) -> "FeatureEncoder":
        """The encoder of a column fit on its values (a pandas or a Dask series: for Dask only the
        summaries come back). Not for private releases, whose encodings must be public.

        Parameters
        ----------
        series : pandas.Series or dask Series
            Values of one kind (numbers, booleans or text: see :mod:`ppgm.adapters.data`).
        bins : int
            Bins of a numeric column with more than ``bins`` distinct values.
        strategy : {"uniform", "quantile", "kmeans"}
            Where the bin edges go, as scikit-learn's ``KBinsDiscretizer``: equal widths over the
            observed range, equal counts (quantiles; repeated edges merged), or 1-D k-means centres'
            midpoints.
        missing : bool, optional
            A state for missing values: when the column has some (default), always (True) or never
            (False: a missing value is then outside the encoding).
        summary : mapping, optional
            The column's summaries computed beforehand (``_summaries``: for a Dask frame, every
            column's in one pass over the partitions instead of one per summary).

        Returns
        -------
        FeatureEncoder

        Raises
        ------
        ValueError
            A column with no values.

        Examples
        --------
        >>> FeatureEncoder.fit(pd.Series(["b", "a", "b"])).states
        ['a', 'b']
        """
        checks.choice(strategy, "strategy", STRATEGIES)
        if not hasattr(series, "compute"):  # a Dask column's kinds are checked on its distinct values (from_summary)
            column_kind(series, "df", series.name)
        values = series.dropna()
        numeric = pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype)
        got = dict(summary) if summary is not None else _summaries({series.name: series}, bins)[series.name]
        has_missing = got["na"] if missing is None else bool(missing)
        if got.get("inf"):
            raise ValueError(f"df: column {series.name!r} has {got['inf']} infinite values; no bin covers them (replace them, "
                             "or give bin_edges whose outer bins you want them in)")
        if got["nunique"] == 0:
            raise ValueError(f"df: column {series.name!r} has no values")
        if strategy != "uniform" and numeric and got["nunique"] > bins:
            edges = _data_edges(values, bins, strategy)
            if edges.size >= 2:
                return cls.numeric(str(series.name), edges.tolist(), has_missing)
        uniques = got.get("uniques")
        return cls.from_summary(
            str(series.name), series.dtype, has_missing, bins, got["nunique"], lambda: (got["lo"], got["hi"]),
            lambda: pd.unique(uniques if uniques is not None else _computed(values.unique())),
        )

    @classmethod
    def numeric(cls, name: str, edges: Sequence[float], missing: bool = False) -> "FeatureEncoder":
        """Bins between public ``edges`` (values below the first or above the last fall in the end
        bins); ``missing`` adds a state for missing values.

        Parameters
        ----------
        name : str
        edges : list of float
            At least two finite, increasing, public edges.
        missing : bool

        Returns
        -------
        FeatureEncoder

        Raises
        ------
        TypeError, ValueError
            Edges that are not numbers, or not increasing.

        Examples
        --------
        >>> FeatureEncoder.numeric("age", [17, 40, 90]).encode(pd.Series([10, 39, 95])).tolist()
        [0, 0, 1]
        """
        if isinstance(edges, (str, bytes)) or not isinstance(edges, (Sequence, np.ndarray)) or not all(
                isinstance(e, (int, float, np.integer, np.floating)) and not isinstance(e, bool) for e in edges):
            raise TypeError(f"bin_edges[{name!r}]: expected a list of numbers, got {edges!r}")
        edges = [float(e) for e in edges]
        if len(edges) < 2 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
            raise ValueError(f"bin_edges[{name!r}]: expected at least two finite, increasing edges, got {edges}")
        states = bin_labels(np.asarray(edges), integer=False)
        return cls(str(name), "numeric", states + ([MISSING] if missing else []), edges, bool(missing))

    @classmethod
    def categorical(cls, name: str, categories: Sequence, missing: bool = False) -> "FeatureEncoder":
        """One state per public category, matched by its text (numbers written canonically: ``1.0`` is
        ``"1"``; see :func:`ppgm.adapters.data.state_text`); ``missing`` adds a state for missing values.

        Parameters
        ----------
        name : str
        categories : list
            Distinct public categories.
        missing : bool

        Returns
        -------
        FeatureEncoder

        Raises
        ------
        TypeError, ValueError
            Not a list of values, or repeated categories.

        Examples
        --------
        >>> FeatureEncoder.categorical("job", ["a", "b"]).encode(pd.Series(["b", "c"])).tolist()   # c: unknown
        [1, -1]
        """
        if isinstance(categories, (str, bytes)) or not isinstance(categories, (Sequence, np.ndarray, pd.Index)) or any(
                isinstance(c, (list, tuple, dict, set, np.ndarray)) for c in categories):
            raise TypeError(f"categories[{name!r}]: expected a list of category values, got {categories!r}")
        checks.one_kind(categories, f"categories[{name!r}]")
        states = [_text(c) for c in categories]  # matched by text, numbers written canonically
        if not states or len(set(states)) != len(states):
            raise ValueError(f"categories[{name!r}]: expected distinct categories, got {list(categories)}")
        return cls(str(name), "categorical", states + ([MISSING] if missing else []), None, bool(missing))

    @classmethod
    def from_summary(cls, name: str, dtype, has_missing: bool, bins: int, nunique: int, bounds, uniques) -> "FeatureEncoder":
        """The encoder from a column's summaries (what a distributed frame can compute without collecting
        it): ``bounds()`` / ``uniques()`` are only called when needed.

        Parameters
        ----------
        name : str
        dtype : numpy or pandas dtype
        has_missing : bool
        bins : int
        nunique : int
            Distinct non-missing values.
        bounds : callable
            Returns (min, max) of the values.
        uniques : callable
            Returns the distinct values.

        Returns
        -------
        FeatureEncoder

        Examples
        --------
        >>> FeatureEncoder.from_summary("x", np.dtype(float), False, 2, 50, lambda: (0.0, 10.0), None).states
        ['[0, 5)', '[5, 10]']
        """
        numeric = pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
        if numeric and nunique > bins:
            lo, hi = bounds()
            edges = np.linspace(lo, hi, bins + 1).tolist()
            states = bin_labels(np.asarray(edges), integer=False)
            kind = "numeric"
        else:
            uniq = list(uniques())
            if checks.one_kind(uniq, f"df: column {name!r}") == "number":  # numbers in their order, written canonically
                states = list(dict.fromkeys(_text(v) for v in sorted(uniq)))
            else:
                states = sorted(dict.fromkeys(_text(v) for v in uniq))
            edges, kind = None, "categorical"
        if has_missing:
            states = states + [MISSING]
        return cls(name, kind, states, edges, has_missing)

    def encode(self, series: pd.Series) -> np.ndarray:
        """Integer codes of a column's values; -1 for values outside the encoding.

        Parameters
        ----------
        series : pandas.Series

        Returns
        -------
        numpy.ndarray of int

        Examples
        --------
        >>> FeatureEncoder.categorical("job", ["a", "b"]).encode(pd.Series(["b", "c"])).tolist()
        [1, -1]
        """
        miss = series.isna().to_numpy()
        codes = np.full(len(series), -1, dtype=np.int64)
        if self.kind == "numeric":
            if column_kind(series, "df", series.name) not in (None, "number"):  # booleans or text are in no bin
                return np.where(miss, len(self.states) - 1 if self.missing else -1, -1).astype(np.int64)
            x = pd.to_numeric(series, errors="coerce").to_numpy(float)
            bad = ~miss & ~np.isfinite(x)  # infinite: outside every bin (unseen, code -1)
            inner = np.asarray(self.edges[1:-1])
            got = np.searchsorted(inner, np.where(np.isnan(x), 0.0, x), side="right")
            codes = np.where(bad, -1, got)
        else:
            lookup = {s: i for i, s in enumerate(self.states) if s != MISSING or not self.missing}
            codes = state_text(series).map(lookup).fillna(-1).to_numpy(np.int64)
        if self.missing:
            codes = np.where(miss, len(self.states) - 1, codes)
        else:
            codes = np.where(miss, -1, codes)
        return codes.astype(np.int64)


def _summaries(columns: Mapping, bins: int) -> dict:
    """What :meth:`FeatureEncoder.fit` reads of each column (``{name: series}``): missing values,
    infinite values, distinct values, the range of numeric columns and the distinct values of the
    columns that stay categorical. For Dask series all columns are summarised together, in two
    passes over the partitions (the distinct values only where they are needed)."""
    def numeric(s):
        return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)

    def distinct(v, what):  # on Dask: a tree reduction (split_out=1), not the shuffle that is its default
        return getattr(v, what)(split_out=1) if hasattr(v, "compute") else getattr(v, what)()

    lazy = {}
    for name, s in columns.items():
        v = s.dropna()
        lazy[name] = {"na": s.isna().any(), "nunique": distinct(v, "nunique")}
        if numeric(s):
            lazy[name].update(inf=np.isinf(v.astype(float)).sum(), lo=v.min(), hi=v.max())
    if any(hasattr(s, "compute") for s in columns.values()):
        import dask

        (lazy,) = dask.compute(lazy)
    out = {name: {k: (bool(x) if k == "na" else int(x) if k in ("nunique", "inf") else float(x)) for k, x in d.items()}
           for name, d in lazy.items()}
    categorical = {name: distinct(s.dropna(), "unique") for name, s in columns.items()
                   if hasattr(s, "compute") and not (numeric(s) and out[name]["nunique"] > bins)}
    if categorical:
        import dask

        (categorical,) = dask.compute(categorical)
        for name, u in categorical.items():
            out[name]["uniques"] = np.asarray(u)
    return out


def _computed(x):
    """``x`` itself, or its value for a lazy Dask result."""
    return x.compute() if hasattr(x, "compute") else x



STRATEGIES = ("uniform", "quantile", "kmeans")


def _data_edges(values, bins: int, strategy: str) -> np.ndarray:
    """Bin edges of a column's non-missing values by ``strategy`` (quantiles of a Dask series are
    computed on the workers; k-means needs the values in memory)."""
    if strategy == "quantile":
        qs = np.linspace(0.0, 1.0, bins + 1)
        q = values.quantile(qs)
        return np.unique(np.asarray(_computed(q), dtype=float))
    from sklearn.preprocessing import KBinsDiscretizer

    x = np.asarray(_computed(values), dtype=float).reshape(-1, 1)
    kb = KBinsDiscretizer(n_bins=bins, encode="ordinal", strategy="kmeans", subsample=None).fit(x)
    return np.unique(kb.bin_edges_[0])
