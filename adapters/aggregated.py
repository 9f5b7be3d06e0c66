"""Learning from aggregated data: pandas in, aggregates out, a MaxEnt classifier and a pgmpy network back.

``aggregate`` turns a DataFrame into the counts d and label sums c of every single feature and
every pair of features (optionally hashed, optionally noised); ``MaxEntClassifier`` learns the
maximum-entropy model from those aggregates alone, with scikit-learn's estimator conventions.
"""

from __future__ import annotations

import json
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from pgmpy.factors.discrete import DiscreteFactor
from pgmpy.models import DiscreteMarkovNetwork

from ppgm.learners.aggregates import aggregate_blocks, noisy_aggregates, table_scopes, treat_as_exact
from ppgm.core import checks
from ppgm.factors.domain import Domain
from ppgm.core.executor import InProcess
from ppgm.models.measurement import Measurement
from ppgm.privacy.mechanisms import check_release_arguments, noise_generator, noisy_count, release_parts
from ppgm.privacy.private_quantiles import private_quantiles
from ppgm.learners.maxent import fit_maxent
from ppgm.inference.metrics import nllh
from ppgm.core.rng import as_generator

from .archive import MAX_BYTES, read_npz, save_path
from .dask_backend import dask_executor, frame_blocks, is_dask
from .columns import MISSING, STRATEGIES, FeatureEncoder, _computed, _summaries
from .data import _text, check_frame, column_kind, per_record, state_text

@dataclass
class Aggregates:
    """Aggregated tables (counts d and label sums c per cell) and how the columns were encoded.

    Iterating yields the tables as :class:`ppgm.Measurement` objects (``values`` = d,
    ``label_sums`` = c, over single features and pairs; noisy ones carry the noise model). Save and
    load them without the rows (``save`` / ``load``, npz).

    Parameters
    ----------
    features : tuple
    label : str
    positive : object
        The label value counted as 1.
    encoders : dict
        ``{feature: FeatureEncoder}``.
    tables : list of ppgm.Measurement
        Counts d (``values``) and label sums c (``label_sums``) per table.
    n : float, optional
        The record count, when published.
    spent : tuple of dict
        What a private release cost, part by part.
    private : bool
    negative : object, optional
        The other label value.

    Examples
    --------
    >>> df = pd.DataFrame({"a": ["x", "y", "x", "y"], "b": [1, 2, 1, 1], "y": [1, 0, 1, 0]})
    >>> agg = aggregate(df, label="y")
    >>> [t.variables for t in agg], agg.n
    ([('a',), ('b',), ('a', 'b')], 4.0)
    """

    features: tuple
    label: str
    positive: object
    encoders: dict
    tables: list
    n: float | None = None
    spent: tuple = ()
    private: bool = False
    negative: object = None

    def __iter__(self) -> Iterator[Measurement]:
        return iter(self.tables)

    def __len__(self) -> int:
        return len(self.tables)

    def __repr__(self) -> str:
        sizes: dict = {}
        for t in self.tables:
            sizes[len(t.variables)] = sizes.get(len(t.variables), 0) + 1
        ways = ", ".join(f"{k} {w}-way" for w, k in sorted(sizes.items()))
        noises = sorted({t.noise for t in self.tables})
        noise = "exact" if noises == ["none"] else "noisy (" + ", ".join(x for x in noises if x != "none") + ")"
        n = "not published" if self.n is None else f"{self.n:g}"
        return (f"Aggregates({len(self.features)} features, label {self.label!r} (positive {self.positive!r}); "
                f"{len(self.tables)} tables ({ways}), {sum(int(np.size(t.values)) for t in self.tables):,} cells, {noise}; "
                f"n {n}; private={self.private})")

    @property
    def classes(self) -> list:
        """The two label values, sorted as scikit-learn sorts labels (``classes_`` of a classifier):
        the positive value and the other one (``"not <positive>"`` when it was never seen or declared)."""
        neg = self.negative if self.negative is not None else f"not {self.positive}"
        try:
            return sorted([neg, self.positive])
        except TypeError:
            return sorted([neg, self.positive], key=str)

    @property
    def domain(self) -> Domain:
        return Domain(self.features, tuple(len(self.encoders[f].states) for f in self.features), {f: self.encoders[f].states for f in self.features})

    def encode(self, df: pd.DataFrame) -> np.ndarray:
        """Integer codes (N, features) of a DataFrame, -1 for values unseen when aggregating.

        Parameters
        ----------
        df : pandas.DataFrame
            With every feature column.

        Returns
        -------
        numpy.ndarray of int

        Raises
        ------
        TypeError, ValueError
            Not a DataFrame, or feature columns missing.

        Examples
        --------
        >>> df = pd.DataFrame({"a": ["x", "y", "x", "y"], "b": [1, 2, 1, 1], "y": [1, 0, 1, 0]})
        >>> agg = aggregate(df, label="y")
        >>> agg.encode(df).tolist()[:2]
        [[0, 0], [1, 1]]
        """
        check_frame(df, "df")
        missing = [f for f in self.features if f not in df.columns]
        if missing:
            raise ValueError(f"df: columns {missing} are missing; the aggregates were built on {list(self.features)}")
        return np.stack([self.encoders[f].encode(df[f]) for f in self.features], axis=1) if len(df) else np.zeros((0, len(self.features)), np.int64)

    def labels(self, df: pd.DataFrame) -> np.ndarray:
        """The label as 0 / 1 (1 where it equals ``positive``).

        Parameters
        ----------
        df : pandas.DataFrame
            With the label column.

        Returns
        -------
        numpy.ndarray of int

        Examples
        --------
        >>> df = pd.DataFrame({"a": ["x", "y", "x", "y"], "b": [1, 2, 1, 1], "y": [1, 0, 1, 0]})
        >>> agg = aggregate(df, label="y")
        >>> agg.labels(df).tolist()
        [1, 0, 1, 0]
        """
        if self.label not in df.columns:
            raise ValueError(f"df: label column {self.label!r} is missing")
        return self.binary(df[self.label], f"df[{self.label!r}]")

    def binary(self, values, name: str = "y") -> np.ndarray:
        """Label values as 0 / 1 (1 where a value equals ``positive``); a value that is neither ``positive``
        nor ``negative`` is refused, naming it (a label coded otherwise than the aggregates' would score
        every record as negative). Without a declared ``negative`` (a private release), one other value.

        Parameters
        ----------
        values : array-like
            Label values, as the rows have them.
        name : str
            The argument's name in error messages.

        Returns
        -------
        numpy.ndarray of int

        Examples
        --------
        >>> df = pd.DataFrame({"a": ["x", "y", "x", "y"], "y": ["yes", "no", "yes", "no"]})
        >>> agg = aggregate(df, label="y", positive="yes", negative="no")
        >>> agg.binary(["no", "yes"]).tolist()
        [0, 1]
        >>> agg.binary(["maybe"])
        Traceback (most recent call last):
        ...
        ValueError: y: label values ['maybe'] are neither positive='yes' nor negative='no' (the aggregates' label values; from_table takes them as positive= and negative=)
        """
        text = state_text(pd.Series(np.asarray(values, dtype=object)))
        pos = _text(self.positive)
        if self.negative is None:  # a private release declares the positive value only: one other value is the negative
            others = sorted(set(text[text != pos].astype(str)))
            if len(others) > 1:
                raise ValueError(f"{name}: label values {others[:5]} besides positive={self.positive!r}; a binary label has one other value")
            return (text == pos).to_numpy(int)
        neg = _text(self.negative)
        other = ~text.isin([pos, neg])
        if other.any():
            seen = sorted(set(text[other].astype(str)))[:5]
            raise ValueError(f"{name}: label values {seen} are neither positive={self.positive!r} nor negative={self.negative!r}"
                             " (the aggregates' label values; from_table takes them as positive= and negative=)")
        return (text == pos).to_numpy(int)

    @classmethod
    def from_table(cls, table: pd.DataFrame, label_sums: str = "clicks", count: str = "count", *, label: str | None = None,
                   positive=1, negative=0, features: Sequence | None = None, categories: Mapping | None = None,
                   n: float | None = None, noise: str = "none", scale: float | None = None,
                   columns: Sequence[str] = ("feature_a", "value_a", "feature_b", "value_b")) -> "Aggregates":
        """Aggregates from a long table of pre-aggregated counts and label sums, as platforms report
        them: one row per cell, ``feature_a, value_a, feature_b, value_b, count, clicks`` for a pair
        of features, with ``feature_b`` and ``value_b`` empty (missing or ``""``) for a single
        feature. Rows of the same cell are added (several days' reports sum to the period's); a
        cell with no row counts 0. A feature's single table comes from its own rows when given, else
        from its pairs (whose marginals must then agree: the tables are of one set of records).

        Parameters
        ----------
        table : pandas.DataFrame
            The long table (e.g. ``read_records(path)`` with the numbers converted, or a report
            read by pandas).
        label_sums : str
            The column of label sums (the clicks: records whose label is ``positive``).
        count : str
            The column of record counts.
        label : str, optional
            The label's name, as the rows you score or predict will call it (default: ``label_sums``).
        positive, negative
            The label values the sums count and the other one (default 1 and 0).
        features : list of str, optional
            The features, in this order (default: in the order they first appear); every feature
            of the table must be listed.
        categories : mapping, optional
            ``{feature: [states]}``: the states and their order (e.g. to keep a state no row
            reports); default the values written, numbers in their order, text sorted. A value
            written ``"<missing>"`` is the missing values' state, as :func:`aggregate` writes it.
        n : float, optional
            The number of records (default: the single tables' common total; withheld with noise).
        noise : {"none", "laplace", "gaussian"}
            The noise the counts and sums were released with, and its ``scale`` (per cell).
        scale : float, optional
        columns : four column names
            The names of ``feature_a, value_a, feature_b, value_b`` in ``table``.

        Returns
        -------
        Aggregates
            Single tables in the features' order, then the pair tables in the features' order.

        Raises
        ------
        TypeError, ValueError
            A column missing or repeated, counts that are not finite non-negative numbers, label
            sums above their counts (exact tables), a feature paired with itself, a feature's
            values of mixed kinds, single and pair tables that disagree, singles to derive from
            noisy pairs.

        Examples
        --------
        >>> report = pd.DataFrame({"feature_a": ["site", "site", "site", "site"], "value_a": ["a", "a", "b", "b"],
        ...                        "feature_b": ["hour", "hour", "hour", "hour"], "value_b": [0, 1, 0, 1],
        ...                        "count": [30, 10, 20, 40], "clicks": [3, 2, 1, 8]})
        >>> agg = Aggregates.from_table(report)
        >>> [t.variables for t in agg], agg.n, agg.tables[0].label_sums.tolist()
        ([('site',), ('hour',), ('site', 'hour')], 100.0, [5.0, 9.0])
        """
        check_frame(table, "table")
        for name, column in (("label_sums", label_sums), ("count", count)):
            if not isinstance(column, (str, int)) or isinstance(column, bool):
                raise TypeError(f"{name}: expected a column name, got {column!r:.80}")
        fa, va, fb, vb = _long_columns(columns)
        needed = [fa, va, fb, vb, count, label_sums]
        absent = [c for c in needed if c not in table.columns]
        if absent:
            raise ValueError(f"table: columns {absent} are missing; it has {list(table.columns)} (name the columns with "
                             "columns=, count= and label_sums=)")
        if len(table) == 0:
            raise ValueError("table: the DataFrame has no rows")
        label = label_sums if label is None else label
        if not isinstance(label, str):
            raise TypeError(f"label: expected a column name (text), got {label!r:.80}")
        noise = checks.choice(noise, "noise", ("none", "laplace", "gaussian"))
        scale = 0.0 if noise == "none" and scale is None else checks.positive(scale, "scale") if noise != "none" else checks.non_negative(scale, "scale")
        d = _numbers(table[count], "count", negative_ok=noise != "none")
        c = _numbers(table[label_sums], "label_sums", negative_ok=noise != "none")
        if noise == "none" and (c > d + 1e-9 * np.maximum(d, 1)).any():
            i = int(np.flatnonzero(c > d + 1e-9 * np.maximum(d, 1))[0])
            raise ValueError(f"label_sums: row {table.index[i]!r} has {c[i]:g} {label_sums!r} out of {d[i]:g} records; "
                             "a label sum is at most its count (give noise= for noisy tables)")
        first = _names_column(table[fa], fa, required=True)
        second = _names_column(table[fb], fb, required=False)
        pair = second.notna().to_numpy()
        if (first[pair] == second[pair]).any():
            raise ValueError(f"table: a row pairs feature {first[pair][first[pair] == second[pair]].iloc[0]!r} with itself")
        if table[va].isna().any():
            raise ValueError(f"{va}: {int(table[va].isna().sum())} rows have no value; write a missing value as a state "
                             f"(e.g. {MISSING!r})")
        blank_b = table[vb].isna().to_numpy() | (table[vb].astype(object) == "").to_numpy()
        if (pair & blank_b).any():
            raise ValueError(f"{vb}: {int((pair & blank_b).sum())} pair rows (with {fb}) have no value")
        if (~pair & ~blank_b).any():
            raise ValueError(f"{vb}: {int((~pair & ~blank_b).sum())} single rows (no {fb}) have a value")
        seen = list(dict.fromkeys(v for a, b in zip(first, second) for v in ((a,) if b is None or b != b else (a, b))))
        if features is None:
            features = seen
        else:
            features = list(checks.names(features, "features"))
            extra = [f for f in seen if f not in features]
            if extra:
                raise ValueError(f"features: the table has features {extra} that are not listed")
            unseen = [f for f in features if f not in seen]
            if unseen:
                raise ValueError(f"features: {unseen} appear in no row of the table")
        if label in features:
            raise ValueError(f"label: {label!r} is also a feature of the table")
        declared = checks.state_names(categories, "categories")
        unknown = [f for f in declared if f not in features]
        if unknown:
            raise ValueError(f"categories: {unknown} are not features of the table")
        values = {f: pd.concat([table[va][first == f], table[vb][pair & (second == f).to_numpy()]]) for f in features}
        encoders = {f: _table_encoder(f, values[f], declared.get(f)) for f in features}
        pos = {f: i for i, f in enumerate(features)}
        singles, pairs = {}, {}
        for (a, b), rows in pd.Series(np.arange(len(table))).groupby([first.to_numpy(), second.fillna("").to_numpy()], sort=False):
            rows = rows.to_numpy()
            if b == "":
                codes = [encoders[a].encode(table[va].iloc[rows].reset_index(drop=True))]
                scope = (a,)
            else:
                ca = encoders[a].encode(table[va].iloc[rows].reset_index(drop=True))
                cb = encoders[b].encode(table[vb].iloc[rows].reset_index(drop=True))
                scope, codes = ((a, b), [ca, cb]) if pos[a] < pos[b] else ((b, a), [cb, ca])
            shape = tuple(len(encoders[v].states) for v in scope)
            bad = np.flatnonzero(np.any([k < 0 for k in codes], axis=0))
            if len(bad):
                raise ValueError(f"categories: row {table.index[rows[bad[0]]]!r} has a value of {scope} outside the declared states")
            flat = np.ravel_multi_index(codes, shape)
            tab = (np.bincount(flat, d[rows], int(np.prod(shape))).reshape(shape),
                   np.bincount(flat, c[rows], int(np.prod(shape))).reshape(shape))
            into = singles if b == "" else pairs
            if scope in into:  # a pair written both ways round
                tab = (into[scope][0] + tab[0], into[scope][1] + tab[1])
            into[scope] = tab
        for f in features:
            derived = [(np.asarray(t[0]).sum(axis=1 - scope.index(f)), np.asarray(t[1]).sum(axis=1 - scope.index(f)), scope)
                       for scope, t in pairs.items() if f in scope]
            if (f,) not in singles and noise != "none":
                raise ValueError(f"table: no single rows for {f!r}; singles derived from noisy pairs would carry the sum of "
                                 "the pair's noise, not the declared scale: give the singles' rows")
            if (f,) not in singles and not derived:
                raise ValueError(f"table: feature {f!r} has no rows")  # pragma: no cover - every feature appears in a row
            if noise == "none":
                ref = singles.get((f,), derived[0][:2] if derived else None)
                for dd, cc, scope in derived:
                    if not (np.allclose(dd, ref[0], rtol=1e-9, atol=1e-9) and np.allclose(cc, ref[1], rtol=1e-9, atol=1e-9)):
                        raise ValueError(f"table: the counts of {f!r} summed over the pair {scope} disagree with its "
                                         f"{'single rows' if (f,) in singles else 'other pairs'} ({dd.tolist()} against "
                                         f"{np.asarray(ref[0]).tolist()}); exact tables count one set of records (give noise= "
                                         "for noisy ones)")
                singles.setdefault((f,), ref)
        if n is None and noise == "none":
            totals = [float(np.sum(singles[(f,)][0])) for f in features]
            if not np.allclose(totals, totals[0], rtol=1e-9):
                raise ValueError(f"table: the features' tables count different numbers of records {dict(zip(features, totals))}; "
                                 "exact tables count one set of records")
            n = totals[0]
        elif n is not None:
            n = checks.positive(n, "n")
        scopes = [(f,) for f in features] + sorted(pairs, key=lambda sc: (pos[sc[0]], pos[sc[1]]))
        tables = [Measurement(sc, (singles if len(sc) == 1 else pairs)[sc][0].astype(float), noise, scale, n,
                              label_sums=(singles if len(sc) == 1 else pairs)[sc][1].astype(float)) for sc in scopes]
        if positive is None or negative is None or _text(positive) == _text(negative):
            raise ValueError(f"positive, negative: expected two different label values, got {positive!r} and {negative!r}")
        return cls(tuple(features), label, _plain(positive), encoders, tables, n, (), False, _plain(negative))

    def to_table(self, label_sums: str = "clicks", count: str = "count",
                 columns: Sequence[str] = ("feature_a", "value_a", "feature_b", "value_b")) -> pd.DataFrame:
        """The aggregates as a long table, one row per cell (the layout :meth:`from_table` reads):
        ``feature_a, value_a, feature_b, value_b, count, clicks``, singles with ``feature_b`` and
        ``value_b`` missing; states as the encoders write them (a numeric feature's bins by their
        labels, such as ``[0, 5)``, which :meth:`from_table` reads back as categories).

        Parameters
        ----------
        label_sums, count : str
            Names of the label sums' and the counts' columns.
        columns : four column names

        Returns
        -------
        pandas.DataFrame

        Raises
        ------
        ValueError
            Hashed tables (their cells share buckets).

        Examples
        --------
        >>> df = pd.DataFrame({"a": ["x", "y", "x"], "b": [1, 2, 2], "y": [1, 0, 1]})
        >>> aggregate(df, label="y").to_table().tail(1).to_dict("records")
        [{'feature_a': 'a', 'value_a': 'y', 'feature_b': 'b', 'value_b': '2', 'count': 1.0, 'clicks': 0.0}]
        """
        fa, va, fb, vb = _long_columns(columns)
        rows = []
        for t in self.tables:
            if t.buckets is not None:
                raise ValueError(f"aggregates: the table over {t.variables} is hashed; its cells share buckets and have no rows")
            states = [self.encoders[v].states for v in t.variables]
            cells = np.unravel_index(np.arange(np.size(t.values)), np.shape(t.values))
            frame = {fa: t.variables[0], va: np.asarray(states[0], dtype=object)[cells[0]],
                     fb: t.variables[1] if len(t.variables) == 2 else None,
                     vb: np.asarray(states[1], dtype=object)[cells[1]] if len(t.variables) == 2 else None,
                     count: np.ravel(t.values), label_sums: np.ravel(t.label_sums)}
            rows.append(pd.DataFrame(frame))
        return pd.concat(rows, ignore_index=True)

    def save(self, path) -> None:
        """Write the aggregates to an ``.npz`` file (tables, encoders and label values as JSON; no rows).

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile, os
        >>> df = pd.DataFrame({"a": ["x", "y", "x", "y"], "b": [1, 2, 1, 1], "y": [1, 0, 1, 0]})
        >>> agg = aggregate(df, label="y")
        >>> agg.save(os.path.join(tempfile.mkdtemp(), "agg.npz"))
        """
        meta = dict(
            features=list(self.features), label=self.label, positive=_plain(self.positive), negative=_plain(self.negative), n=self.n,
            spent=list(self.spent), private=self.private,
            encoders={f: dict(kind=e.kind, states=e.states, edges=e.edges, missing=e.missing) for f, e in self.encoders.items()},
            tables=[dict(variables=list(t.variables), noise=t.noise, scale=t.scale, hashed=t.buckets is not None,
                         integer=t.integer) for t in self.tables],
        )
        arrays = {}
        for i, t in enumerate(self.tables):
            arrays[f"d{i}"], arrays[f"c{i}"] = t.values, t.label_sums
            if t.buckets is not None:
                arrays[f"b{i}"] = t.buckets
        np.savez(save_path(path), meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path, max_bytes: int = MAX_BYTES) -> "Aggregates":
        """Read aggregates written by :meth:`save`. The archive's headers are checked before anything
        is unpacked (more than ``max_bytes`` is refused: aggregate files come from others), and every
        table is validated as a measurement.

        Parameters
        ----------
        path : str or os.PathLike
        max_bytes : int
            Largest total size of the arrays to unpack (default 1 GiB).

        Returns
        -------
        Aggregates

        Raises
        ------
        FileNotFoundError
            No file at ``path``.
        ValueError
            Not ppgm aggregates, or too large.

        Examples
        --------
        >>> import tempfile, os
        >>> df = pd.DataFrame({"a": ["x", "y", "x", "y"], "label": [0, 1, 1, 1]})
        >>> f = os.path.join(tempfile.mkdtemp(), "agg.npz"); aggregate(df).save(f)
        >>> Aggregates.load(f).tables[0].values.tolist()
        [2.0, 2.0]
        """
        what = "ppgm aggregates (Aggregates.save)"
        z = read_npz(path, what, required=("meta",), max_bytes=max_bytes)
        try:
            meta = json.loads(str(z["meta"]))
            tables = [
                # popped: each unpacked array is released once its table holds it (peak: the result plus one table)
                Measurement(tuple(t["variables"]), z.pop(f"d{i}"), t["noise"], t["scale"], meta["n"], label_sums=z.pop(f"c{i}"),
                            buckets=z.pop(f"b{i}") if t["hashed"] else None, integer=bool(t.get("integer", False)))
                for i, t in enumerate(meta["tables"])
            ]
            encoders = {f: FeatureEncoder(f, **e) for f, e in meta["encoders"].items()}
            return cls(tuple(meta["features"]), meta["label"], meta["positive"], encoders, tables, meta["n"],
                       tuple(meta["spent"]), bool(meta.get("private", False)), meta.get("negative"))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as err:
            raise ValueError(f"path: {str(path)!r} is not {what}: {err!s}") from None


def _long_columns(columns) -> tuple:
    """The four column names of a long table (feature_a, value_a, feature_b, value_b)."""
    if isinstance(columns, (str, bytes)) or not isinstance(columns, (list, tuple)) or len(columns) != 4:
        raise TypeError(f"columns: expected the names of feature_a, value_a, feature_b, value_b, got {columns!r:.80}")
    return tuple(checks.names(list(columns), "columns"))


def _numbers(col: pd.Series, name: str, negative_ok: bool = False) -> np.ndarray:
    """A column of finite numbers (non-negative unless ``negative_ok``), as floats."""
    if column_kind(col, name, col.name) not in ("number", None) or col.isna().any():
        raise ValueError(f"{name}: column {col.name!r} must hold a number in every row (got {col.dtype} values, "
                         f"{int(col.isna().sum())} missing); convert it, e.g. pandas.to_numeric")
    x = col.to_numpy(dtype=float)
    if not np.all(np.isfinite(x)) or (not negative_ok and (x < 0).any()):
        raise ValueError(f"{name}: column {col.name!r} must hold finite{'' if negative_ok else ' non-negative'} numbers")
    return x


def _names_column(col: pd.Series, name: str, required: bool) -> pd.Series:
    """Feature names of a long table's column: missing (or "") only where not ``required``."""
    out = col.astype(object).where(col.notna() & (col.astype(object) != ""), None)
    if required and out.isna().any():
        raise ValueError(f"table: {int(out.isna().sum())} rows name no feature in column {name!r}")
    return out.reset_index(drop=True).set_axis(col.index)


def _table_encoder(f, values: pd.Series, declared: list | None) -> FeatureEncoder:
    """The encoder of feature ``f`` of a long table: its declared states, or the values written
    (sorted as :meth:`FeatureEncoder.from_summary` sorts them), a ``<missing>`` value as the missing
    state."""
    values = values.reset_index(drop=True)
    column_kind(values[values.astype(object) != MISSING], "table", f)  # the values of one feature are of one kind
    if declared is not None:
        states = list(declared)
    else:
        states = list(pd.unique(values.dropna()))
    has_missing = any(isinstance(v, str) and v == MISSING for v in states)
    states = [v for v in states if not (isinstance(v, str) and v == MISSING)]
    if declared is None:
        enc = FeatureEncoder.from_summary(str(f), np.dtype(object), has_missing, 2, len(states), None, lambda: states)
        return FeatureEncoder(f, "categorical", enc.states, None, has_missing)
    enc = FeatureEncoder.categorical(f, states, has_missing)
    return FeatureEncoder(f, "categorical", enc.states, None, has_missing)


def aggregate(
    df: pd.DataFrame,
    features: Sequence | None = None,
    label: str = "label",
    pairs="all",
    bins: int = 10,
    hash_size: int | None = None,
    mechanism=None,
    *,
    categories: Mapping | None = None,
    bounds: Mapping | None = None,
    bin_edges: Mapping | None = None,
    missing: Sequence | bool | None = None,
    quantile_epsilon: float | None = None,
    on_unknown: str = "raise",
    positive=None,
    negative=None,
    accountant=None,
    publish_n=None,
    seed=None,
    strategy: str = "uniform",
) -> Aggregates:
    """Counts and label sums of every single feature and every pair, from a DataFrame.

    Without a ``mechanism`` the tables are exact, and columns without public encodings are encoded
    from the data (bins over the observed range, the categories seen). With a ``mechanism`` the
    release is differentially private end to end: every column needs a public encoding
    (``categories``, ``bin_edges``, or ``bounds`` with equal-width or private-quantile bins), the
    label's positive value is declared, the noise is integer and exact, and N is published only when
    noised or declared public. The unit of privacy is one record.

    Parameters
    ----------
    df : pandas.DataFrame or dask.dataframe.DataFrame
        A Dask DataFrame is aggregated partition by partition on its workers (same tables).
    features : sequence of column names, optional
        Default: every column but ``label``.
    label : str
        The binary label column.
    pairs : "all", "none" or a list of pairs
        Which pair tables to build (singles are always built).
    bins : int
        Number of bins of numeric columns (equal-width over ``bounds`` or the observed range, or
        private quantiles with ``quantile_epsilon``); without a mechanism, numeric columns with at
        most ``bins`` distinct values stay categorical.
    hash_size : int, optional
        Pair tables with more cells are hashed into this many buckets (a seeded map, reproducible).
    mechanism : LaplaceMechanism or GaussianMechanism, optional
        Release the tables with noise (sensitivity: every record touches 2K cells, d and c of K tables).
    categories : mapping, optional
        ``{column: [categories...]}``, public category lists (compared as text).
    bounds : mapping, optional
        ``{column: (low, high)}``, public bounds of numeric columns (values outside are clipped into
        the end bins).
    bin_edges : mapping, optional
        ``{column: [edges...]}``, public bin edges of numeric columns.
    missing : bool or sequence of columns, optional
        Which columns have a ``<missing>`` state for missing values (None, NaN, pandas NA): by default
        the columns encoded from the data that have missing values (public encodings: none); True:
        every column; False: none, a missing value is then refused (or its record dropped with
        ``on_unknown="drop"``); a list: those columns.
    quantile_epsilon : float, optional
        With a mechanism: spend this much (epsilon-DP, charged and listed in ``spent``) on private
        quantile bin edges of the columns given by ``bounds``.
    on_unknown : {"raise", "drop"}
        A value outside a public encoding (or missing, without a missing state): an error naming the
        column and the value, or drop the record (a per-record map, which stays private).
    positive : optional
        The label value counted as 1. Without a mechanism: default ``1`` / ``True`` for 0-1 or boolean
        labels, else the larger of the two sorted values; a value that is not one of the label's two
        values is refused. With a mechanism it must be declared (default 1 / True only for integer or
        boolean label columns) and is checked against the column's type only (its values are private);
        every other value counts as 0.
    accountant : PrivacyAccountant, optional
        Charged for every part (tables, quantiles, N) at once, or for none.
    publish_n : bool, "public" or a mechanism, optional
        The record count: default published without noise and withheld with it; ``"public"`` (or
        True) declares it public (recorded in ``spent`` at no cost); a mechanism noises and charges it.
    seed : int or Generator, optional
        Hashing seed, and with a mechanism reproducible noise: the release is then not private
        (``private`` is False, with a ``NotPrivateWarning``).
    strategy : {"uniform", "quantile", "kmeans"}
        Bin edges of numeric columns encoded from the data (no mechanism): equal widths, equal
        counts or k-means, as scikit-learn's ``KBinsDiscretizer``. Private releases take public
        ``bin_edges`` / ``bounds`` or private quantiles instead.

    Returns
    -------
    Aggregates

    Examples
    --------
    >>> df = pd.DataFrame({"age": [20, 35, 50, 65], "job": ["a", "b", "a", "b"], "y": [0, 0, 1, 1]})
    >>> agg = aggregate(df, label="y", bins=2)
    >>> agg.tables[0].values.tolist(), agg.tables[0].label_sums.tolist()
    ([2.0, 2.0], [0.0, 2.0])
    >>> from ppgm.privacy.mechanisms import LaplaceMechanism
    >>> noisy = aggregate(df, label="y", bins=2, mechanism=LaplaceMechanism(1.0),
    ...                   bounds={"age": (18, 70)}, categories={"job": ["a", "b", "c"]})
    >>> noisy.private, noisy.n, noisy.domain.cards
    (True, None, (2, 3))
    """
    check_release_arguments(mechanism, accountant, optional=True)
    if hash_size is not None:
        hash_size = checks.count(hash_size, "hash_size", 2)
    if not (isinstance(pairs, str) or (isinstance(pairs, (list, tuple)) and all(isinstance(q, (list, tuple)) for q in pairs))):
        raise TypeError(f"pairs: expected 'all', 'none' or a list of feature pairs, got {pairs!r}")
    spec = EncodingSpec.make(bins, categories, bounds, bin_edges, missing, quantile_epsilon, on_unknown, mechanism, strategy)
    distributed = is_dask(df)  # encoders from summaries, counts per partition on the workers
    check_frame(df, "df", dask=True)
    if not distributed and len(df) == 0:
        raise ValueError("df: the DataFrame has no rows")
    features = _feature_list(df.columns, features, label)
    spec.check_missing(features)
    positive, negative = _positive_label(df[label], label, positive, private=mechanism is not None, negative=negative)
    rng = noise_generator(seed) if mechanism is not None else as_generator(seed)
    summary = {}
    if distributed and mechanism is None:  # every column encoded from the data summarised in one pass
        summary = _summaries({f: df[f] for f in features if not spec.public(f)}, spec.bins)
    encoders, quantile_part = spec.encoders(features, rng, fit=lambda f: FeatureEncoder.fit(df[f], spec.bins, spec.strategy,
                                                                                          spec.missing_state(f), summary.get(f)),
                                            column=None if distributed else (lambda f: df[f]))
    agg = Aggregates(tuple(features), label, positive, encoders, [], negative=negative)
    hash_seed = int((rng or np.random.default_rng()).integers(1 << 31)) if hash_size is not None else 0
    if distributed:
        blocks = frame_blocks(df, lambda part: _encoded(part, agg, spec), "partitions of the data")
    else:
        blocks = InProcess().scatter([_encoded(df, agg, spec)])
    exact = aggregate_blocks(blocks, agg.domain, table_scopes(features, pairs), hash_size, hash_seed, publish_n=True)
    return _with_tables(agg, exact, mechanism, rng, accountant, publish_n, quantile_part)


def _encoded(part: pd.DataFrame, agg: "Aggregates", spec: "EncodingSpec") -> tuple[np.ndarray, np.ndarray]:
    """Codes and labels of the rows of ``part`` that enter the aggregates."""
    codes, y = agg.encode(part), agg.labels(part)
    keep = spec.known_rows(codes, part, list(agg.features))
    return codes[keep], y[keep]


@dataclass(frozen=True)
class EncodingSpec:
    """How ``aggregate`` encodes its columns: public encodings given by the caller, private quantile
    edges, or (without a mechanism only) encodings fit on the data. One place for the pandas and the
    Dask paths."""

    bins: int
    strategy: str
    categories: dict
    bounds: dict
    bin_edges: dict
    missing: object
    quantile_epsilon: float | None
    on_unknown: str
    private: bool

    @classmethod
    def make(cls, bins, categories, bounds, bin_edges, missing, quantile_epsilon, on_unknown, mechanism,
             strategy: str = "uniform") -> "EncodingSpec":
        if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 2:
            raise ValueError(f"bins: expected at least 2 bins, got {bins!r}")
        if on_unknown not in ("raise", "drop"):
            raise ValueError(f"on_unknown: expected 'raise' or 'drop', got {on_unknown!r}")
        if quantile_epsilon is not None:
            if mechanism is None:
                raise ValueError("quantile_epsilon: private quantiles belong to a private release; give a mechanism")
            if isinstance(quantile_epsilon, bool) or not (isinstance(quantile_epsilon, (int, float)) and 0 < quantile_epsilon < np.inf):
                raise ValueError(f"quantile_epsilon: expected a positive number, got {quantile_epsilon!r}")
        maps = {}
        for name, m in (("categories", categories), ("bounds", bounds), ("bin_edges", bin_edges)):
            if m is not None and not isinstance(m, Mapping):
                raise TypeError(f"{name}: expected a mapping {{column: ...}}, got {type(m).__name__}")
            maps[name] = dict(m or {})
        checks.choice(strategy, "strategy", STRATEGIES)
        return cls(int(bins), strategy, maps["categories"], maps["bounds"], maps["bin_edges"], missing, quantile_epsilon, on_unknown,
                   mechanism is not None)

    def missing_state(self, f) -> bool | None:
        """Whether column ``f`` has a missing state: True, False, or None (the default: a column
        encoded from the data has one when it has missing values)."""
        if self.missing is None or isinstance(self.missing, (bool, np.bool_)):
            return None if self.missing is None else bool(self.missing)
        return f in set(self.missing)

    def public(self, f) -> bool:
        """Whether column ``f`` has a public encoding (categories, bin edges or bounds)."""
        return f in self.categories or f in self.bin_edges or f in self.bounds

    def has_missing_state(self, f) -> bool:
        """Whether a public encoding of ``f`` has a missing state."""
        return bool(self.missing_state(f))

    def check_missing(self, features) -> None:
        """``missing`` is None, True / False, or a list of feature columns."""
        m = self.missing
        if m is None or isinstance(m, (bool, np.bool_)):
            return
        if isinstance(m, (str, bytes)) or not isinstance(m, (list, tuple, set, np.ndarray, pd.Index)):
            raise TypeError(f"missing: expected True, False or a list of feature columns, got {m!r:.80}")
        unknown = [c for c in m if c not in features]
        if unknown:
            raise ValueError(f"missing: {unknown} are not feature columns {list(features)}")

    def encoders(self, features, rng, fit, column) -> tuple[dict, dict | None]:
        """The encoder of every feature and the ledger part of private quantiles (None if none)."""
        out, quantile_cols = {}, []
        for f in features:
            if f in self.categories:
                out[f] = FeatureEncoder.categorical(f, self.categories[f], self.has_missing_state(f))
            elif f in self.bin_edges:
                out[f] = FeatureEncoder.numeric(f, self.bin_edges[f], self.has_missing_state(f))
            elif f in self.bounds:
                lo, hi = _bounds(f, self.bounds[f])
                if self.quantile_epsilon is None:
                    out[f] = FeatureEncoder.numeric(f, np.linspace(lo, hi, self.bins + 1), self.has_missing_state(f))
                else:
                    quantile_cols.append(f)
            elif self.private:
                raise ValueError(
                    f"features: column {f!r} has no public encoding. A private release needs categories=, "
                    "bin_edges= or bounds= for every feature (an encoding fit on the data would disclose its "
                    "values, minimum and maximum)"
                )
            else:
                out[f] = fit(f)
        if not quantile_cols:
            return {f: out[f] for f in features}, None
        if column is None:
            raise ValueError("quantile_epsilon: private quantiles need the columns in memory; on Dask pass bin_edges= or bounds=")
        eps_each = self.quantile_epsilon / len(quantile_cols)
        for f in quantile_cols:
            lo, hi = _bounds(f, self.bounds[f])
            x = pd.to_numeric(column(f), errors="coerce").to_numpy(float)
            inner = private_quantiles(x, (lo, hi), np.arange(1, self.bins) / self.bins, eps_each, rng)
            edges = np.unique(np.concatenate([[lo], inner[(inner > lo) & (inner < hi)], [hi]]))
            out[f] = FeatureEncoder.numeric(f, edges, self.has_missing_state(f))
        return {f: out[f] for f in features}, {"what": f"quantile bin edges of {quantile_cols}", "epsilon": self.quantile_epsilon}

    def known_rows(self, codes: np.ndarray, df, features) -> np.ndarray:
        """Rows whose every value has a state: all of them, or an error naming the column and the
        value (``on_unknown="raise"``), or a mask of the rows kept (``"drop"``)."""
        unknown = codes < 0
        if not unknown.any():
            return np.ones(len(codes), dtype=bool)
        if self.on_unknown == "drop":
            return ~unknown.any(axis=1)
        j = int(np.flatnonzero(unknown.any(axis=0))[0])
        f = features[j]
        holes = int((unknown[:, j] & df[f].isna().to_numpy()).sum())
        if holes:
            raise ValueError(f"df: column {f!r} has {holes} missing values (None / NaN) and its encoding no state for them; "
                             f"give them one (missing=True, or a list naming {f!r}) or pass on_unknown='drop' to drop those records")
        values = [v.item() if isinstance(v, np.generic) else v for v in pd.unique(np.asarray(df[f], dtype=object)[unknown[:, j]])[:5]]
        raise ValueError(
            f"df: column {f!r} has values {values} outside its encoding; declare them (categories=, "
            "missing=) or pass on_unknown='drop' to drop those records"
        )


def _bounds(f, b) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in b)
    except (TypeError, ValueError):
        raise ValueError(f"bounds[{f!r}]: expected (low, high), got {b!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds[{f!r}]: expected finite low < high, got {b!r}")
    return lo, hi


def _feature_list(columns, features, label) -> list:
    columns = list(columns)
    try:
        known = label in columns
    except TypeError:
        known = False
    if not known:
        raise ValueError(f"label: column {label!r} not in the DataFrame (columns {columns})")
    features = [c for c in columns if c != label] if features is None else list(checks.names(features, "features"))
    unknown = [f for f in features if f not in columns]
    if unknown or label in features:
        raise ValueError(f"features: {unknown or [label]} are not feature columns of the DataFrame")
    if not features:
        raise ValueError("features: expected at least one feature column")
    return features


def _positive_label(y_col, label: str, positive, private: bool = False, negative=None) -> tuple:
    """The label value counted as 1 and the other one (see :func:`aggregate`). Without privacy the
    label must be binary, of one kind, and both are read from its values (a declared value must be
    one of them); with privacy nothing is read from the data (0 / 1 and False / True are the
    defaults of integer and boolean columns) and declared values are checked against the column's
    type only."""
    if private:
        kind = _dtype_kind(y_col.dtype)
        if positive is None:
            if not (pd.api.types.is_bool_dtype(y_col.dtype) or pd.api.types.is_integer_dtype(y_col.dtype)):
                raise ValueError(f"positive: declare the positive value of label {label!r} for a private release "
                                 "(reading it from the data would disclose the label's values)")
            positive = True if pd.api.types.is_bool_dtype(y_col.dtype) else 1
        for name, v in (("positive", positive), ("negative", negative)):
            if v is not None and kind is not None and checks.value_kind(v) != kind:
                raise ValueError(f"{name}: {v!r} is a {checks.value_kind(v)} value and label {label!r} holds {kind} values "
                                 "(its column's type); no record would match it")
        if negative is None and isinstance(positive, (bool, np.bool_, int, np.integer)):
            negative = (not positive) if isinstance(positive, (bool, np.bool_)) else 1 - int(positive) if int(positive) in (0, 1) else None
        return _plain(positive), _plain(negative)
    has_na = y_col.isna().any()
    if bool(has_na.compute() if hasattr(has_na, "compute") else has_na):
        raise ValueError(f"label: column {label!r} has missing values")
    distinct = _distinct(y_col)
    if hasattr(y_col, "compute"):  # 1 and "1" would be two values, counted as one
        checks.one_kind(distinct, f"label: column {label!r}")
    else:
        column_kind(y_col, "label", label)
    values = [_plain(v) for v in sorted(distinct, key=str)]
    if len(values) > 2:
        raise ValueError(f"label: expected a binary label, column {label!r} has {len(values)} values")
    texts = [_text(v) for v in values]
    if positive is None:
        text = set(texts)
        positive = 1 if text <= {"0", "1"} else True if text <= {"True", "False"} else values[-1]
    elif len(values) == 2 and _text(positive) not in texts:
        raise ValueError(f"positive: {positive!r} is not a value of label {label!r} (its values are {values}); no record "
                         "would count as positive")
    positive = _plain(positive)
    if negative is not None:
        if _text(negative) == _text(positive):
            raise ValueError(f"negative: {negative!r} is the positive value too")
        if len(values) == 2 and _text(negative) not in texts:
            raise ValueError(f"negative: {negative!r} is not a value of label {label!r} (its values are {values})")
    if len(values) < 2:
        sums = "the counts" if texts == [_text(positive)] else "0"
        warnings.warn(f"label: column {label!r} holds a single value ({values[0]!r}): every label sum is {sums}, and a "
                      "classifier learns nothing from them", UserWarning, stacklevel=3)
    others = [v for v in values if _text(v) != _text(positive)]
    if negative is None and others:
        negative = others[0]
    elif negative is None and isinstance(positive, bool):
        negative = not positive
    elif negative is None and isinstance(positive, (int, float)):  # one value seen: the other is 0 (or 1)
        negative = type(positive)(0 if positive != 0 else 1)
    return positive, _plain(negative)


def _dtype_kind(dtype) -> str | None:
    """The kind of a column's values told by its type alone (None for object columns)."""
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_numeric_dtype(dtype):
        return "number"
    if pd.api.types.is_string_dtype(dtype) and dtype != object:
        return "text"
    return None


def _distinct(col) -> list:
    vals = col.dropna().unique(split_out=1) if hasattr(col, "compute") else col.dropna().unique()  # Dask: no shuffle
    return list(vals.compute() if hasattr(vals, "compute") else vals)


def _with_tables(agg: "Aggregates", exact: list, mechanism, rng, accountant, publish_n, quantile_part=None) -> "Aggregates":
    """Attach the exact tables, or their release through ``mechanism`` (every part charged at once);
    publish N as asked (default: yes without noise, no with it)."""
    n = exact[0].n
    if mechanism is None:
        publish = publish_n is None or bool(publish_n)
        agg.tables = exact if publish else [Measurement(t.variables, t.values, label_sums=t.label_sums, buckets=t.buckets) for t in exact]
        agg.n = n if publish else None
        return agg
    parts, n_mech = release_parts(mechanism, "aggregates", publish_n, before=[quantile_part] if quantile_part else [])
    if accountant is not None:
        accountant.charge(parts)
    if n_mech is not None:
        n = noisy_count(n_mech, n, rng)
    agg.n = n if publish_n else None
    agg.tables = noisy_aggregates(exact, mechanism, rng, n=agg.n)
    agg.spent, agg.private = tuple(parts), rng is None
    return agg


@contextmanager
def _as_argument(name: str):
    """Errors about the rows that :func:`aggregate` and the encoders name ``df`` name the caller's
    argument instead (``X`` of a classifier's fit and predictions)."""
    try:
        yield
    except ValueError as err:
        text = str(err)
        if text.startswith("df: "):
            raise ValueError(f"{name}: {text[4:]}") from None
        raise


def _warn_constant_label(aggregates: "Aggregates") -> None:
    """Warn when exact aggregates hold one label value only (every label sum 0, or every sum its
    count): a classifier learns nothing about the other class from them."""
    exact = [t for t in aggregates.tables if t.noise == "none" and t.label_sums is not None]
    if not exact or any(np.asarray(t.values).sum() <= 0 for t in exact):
        return
    if all(np.all(np.asarray(t.label_sums) == 0) for t in exact):
        which = "0: no record is positive"
    elif all(np.allclose(t.label_sums, t.values) for t in exact):
        which = "its count: every record is positive"
    else:
        return
    warnings.warn(f"X: every label sum of the aggregates is {which} ({aggregates.label!r} = {aggregates.positive!r}); "
                  "the classifier learns nothing about the other class", UserWarning, stacklevel=3)


class _MissingTarget(TypeError, ValueError):
    """Rows given without labels: a wrong type for ``fit(aggregates)`` and a missing ``y`` for
    ``fit(X, y)`` (scikit-learn expects a ValueError there), so either ``except`` catches it."""


def _rows(X, name: str, names: list | None = None) -> pd.DataFrame:
    """Rows as a DataFrame: a DataFrame as it is, an array-like (checked as scikit-learn checks
    arrays: 2-D, at least one row and one feature, no complex values) with columns ``names``
    (default ``x0``, ``x1``, ...); sparse input is refused."""
    if isinstance(X, pd.DataFrame):
        check_frame(X, name)
        return X
    import scipy.sparse as sp
    from sklearn.utils.validation import check_array

    if sp.issparse(X):
        raise TypeError(f"{name}: sparse input is not supported; pass a dense array or a DataFrame of rows")
    if X is None or isinstance(X, (str, bytes, dict, Aggregates)) or not (hasattr(X, "__array__") or isinstance(X, (list, tuple))):
        raise TypeError(f"{name}: expected a pandas DataFrame or a 2-D array of rows, got {type(X).__name__}")
    arr = check_array(X, dtype=None, ensure_all_finite="allow-nan", input_name=name)
    cols = names if names is not None else [f"x{j}" for j in range(arr.shape[1])]
    if len(cols) != arr.shape[1]:
        raise ValueError(f"{name} has {arr.shape[1]} features, but MaxEntClassifier is expecting {len(cols)} features as input")
    return pd.DataFrame(arr, columns=cols)


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def quadratic_one_hot(codes: np.ndarray, cards: Sequence[int]):
    """Sparse one-hot design of the quadratic logistic: every feature, then every pair's cross.

    The raw-data counterpart of the aggregates (the logistic skyline of the MaxEnt paper).

    Examples
    --------
    >>> quadratic_one_hot(np.array([[0, 1], [1, 0]]), [2, 2]).toarray().tolist()
    [[1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]]
    """
    import scipy.sparse as sp

    codes = np.asarray(codes)
    n, F = codes.shape
    cols, offset = [], 0
    for f in range(F):
        cols.append(codes[:, f] + offset)
        offset += cards[f]
    for f in range(F):
        for g in range(f + 1, F):
            cols.append(codes[:, f] * cards[g] + codes[:, g] + offset)
            offset += cards[f] * cards[g]
    idx = np.stack(cols, axis=1)
    return sp.csr_matrix((np.ones(idx.size), idx.ravel(), np.arange(0, idx.size + 1, idx.shape[1])), shape=(n, offset))


class MaxEntClassifier(ClassifierMixin, BaseEstimator):
    """Maximum-entropy model of features and a binary label, learned from aggregates only.

    Parameters follow :func:`ppgm.learners.maxent.fit_maxent`; ``noise_model=False`` treats noisy aggregates
    as exact (clipped to 0 <= c <= d), the baseline the noise model is compared with. ``warm_start``
    continues from the previous fit's parameters, chains and generator. ``n_shards`` splits the
    chains into shards with their own generators; with a Dask ``client`` the shards live on its
    workers (same result as in memory with the same ``n_shards``).

    Attributes (after ``fit``): ``model_`` (engine :class:`ppgm.learners.maxent.MaxEntModel`), ``state_``,
    ``history_`` (per step: ``d_error``, ``c_error``, ``step_size``, ``gradient_z``; (step, value) pairs: ``nllh`` on
    ``eval_set``, ``mu_coupling``, ``remaining_gain`` per convergence test; ``selection``),
    ``aggregates_``, ``classes_``, ``feature_names_in_``, ``n_features_in_``, ``n_iter_``, ``method_`` (which fit
    ran: ``"exact"``, Newton's method on the enumerated joint, or ``"pcd"``, the sampled chains; the ``repr``
    says it too), ``l2_theta_`` (the
    penalty used) and ``selection_`` (how it was chosen from a noisy release, else None), and the
    convergence test's ``remaining_gain_`` and ``converged_`` (see :class:`ppgm.learners.maxent.PCDResult`; a fit whose
    averaged model still moves raises a ``ppgm.ConvergenceWarning``).

    Parameters
    ----------
    n_chains : int, optional
        Persistent chains (all shards together); default 8,000 on exact aggregates, 4,000 on noisy ones.
    max_iter : int, optional
        The most PCD steps; default 1,800 on exact aggregates, stopped at the first convergence test (every 300
        steps) that reads at most ``tol``, and 600 on noisy ones, all run: the same budget spent on steps, which
        noisy fits lack (see :func:`ppgm.learners.maxent.fit_maxent`).
    tol : float, "auto" or None
        Stop once one more Newton step would gain at most this many nats per record; "auto": 2.5e-4 on exact
        aggregates, None (run ``max_iter``) on noisy ones.
    l2_mu : float
        L2 penalty of the feature parameters.
    l2_theta : float, "release" or None
        L2 penalty of the interaction parameters. Default: chosen from the aggregates by a parametric
        bootstrap of them (their sampling noise, and their privacy noise when noisy; ``l2_theta_`` and
        ``selection_`` after ``fit``; see :func:`ppgm.learners.maxent.fit_maxent`). A number fixes it (e.g. for
        ``GridSearchCV`` on rows).
    step_mu, step_theta : float, optional
        Step sizes (default: theta 1.5 / (number of tables + 1), mu 1.5 / (the tables' measured coupling
        + 1); see :func:`ppgm.learners.maxent.fit_maxent`).
    rescaled, precondition : bool
        The paper's rescaled pseudo-gradient and diagonal preconditioning.
    average : float
        Fraction of the last iterates averaged, in [0, 1).
    noise_model : bool
        Model the noise of noisy aggregates (False: treat them as exact).
    seed : int or numpy.random.Generator
    progress : bool
    warm_start : bool
    n_shards : int
    client : distributed.Client, optional
    bins : int
        ``fit(X, y)`` on rows: bins of numeric columns (see :func:`aggregate`).
    strategy : {"uniform", "quantile", "kmeans"}
        ``fit(X, y)`` on rows: where the bin edges go (see :func:`aggregate`).
    method : {"auto", "pcd", "exact"}
        "auto": exact aggregates over few features (at most 65,536 joint configurations, ``ppgm.learners.maxent.ENUMERATE_CELLS``) are
        fitted exactly by Newton's method, the rest by PCD (see :func:`ppgm.learners.maxent.fit_maxent`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"a": rng.integers(0, 3, 5000), "b": rng.integers(0, 2, 5000)})
    >>> df["y"] = (rng.random(5000) < 0.1 + 0.3 * df["a"]).astype(int)
    >>> clf = MaxEntClassifier(n_chains=2000, max_iter=100, progress=False).fit(aggregate(df, label="y"))
    >>> clf.predict_proba(pd.DataFrame({"a": [0, 2], "b": [0, 0]}))[:, 1].round(1).tolist()
    [0.1, 0.7]
    """

    def __init__(
        self,
        n_chains: int | None = None,
        max_iter: int | None = None,
        l2_mu: float = 1.0,
        l2_theta: float | str | None = None,
        step_mu: float | None = None,
        step_theta: float | None = None,
        rescaled: bool = True,
        precondition: bool = True,
        average: float = 0.3,
        noise_model: bool = True,
        seed=0,
        progress: bool = True,
        warm_start: bool = False,
        n_shards: int = 1,
        client=None,
        bins: int = 10,
        strategy: str = "uniform",
        method: str = "auto",
        tol: float | str | None = "auto",
    ) -> None:
        self.n_chains = n_chains
        self.max_iter = max_iter
        self.l2_mu = l2_mu
        self.l2_theta = l2_theta
        self.step_mu = step_mu
        self.step_theta = step_theta
        self.rescaled = rescaled
        self.precondition = precondition
        self.average = average
        self.noise_model = noise_model
        self.seed = seed
        self.progress = progress
        self.warm_start = warm_start
        self.n_shards = n_shards
        self.client = client
        self.bins = bins
        self.strategy = strategy
        self.method = method
        self.tol = tol

    def fit(self, X, y=None, eval_set: pd.DataFrame | None = None, eval_every: int = 10) -> "MaxEntClassifier":
        """Learn from aggregates by persistent contrastive divergence: ``fit(aggregates)``, or
        ``fit(X, y)`` on rows, which are aggregated first (with :func:`aggregate`'s encoders fit on the
        rows, ``bins`` bins for numeric columns), so that the model still sees only the tables.

        Parameters
        ----------
        X : Aggregates, pandas.DataFrame or 2-D array
            Aggregates (then ``y`` is omitted), or one row per record (array columns are named
            ``x0``, ``x1``, ...).
        y : array-like, optional
            The binary label of every row of ``X``.
        eval_set : pandas.DataFrame, optional
            Rows with the label: adds an NLLH curve to ``history_`` every ``eval_every`` steps.
        eval_every : int

        Returns
        -------
        MaxEntClassifier
            ``self``, fitted.

        Raises
        ------
        TypeError, ValueError
            Not aggregates, or bad settings (steps, chains, penalties; checked before any work).

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> df = pd.DataFrame({"a": rng.integers(0, 3, 4000)}); df["y"] = (rng.random(4000) < 0.2 + 0.3 * df["a"]).astype(int)
        >>> clf = MaxEntClassifier(progress=False).fit(aggregate(df, label="y"))  # one feature: fitted exactly
        >>> clf.classes_.tolist(), clf.converged_, "decrement" in clf.history_
        ([0, 1], True, True)
        >>> pcd = MaxEntClassifier(n_chains=1000, max_iter=60, progress=False, method="pcd").fit(aggregate(df, label="y"))
        >>> len(pcd.history_["step"])  # the pilot's 20 steps, then the final fit's 40
        60
        """
        for name in ("rescaled", "precondition", "noise_model", "progress", "warm_start"):
            checks.flag(getattr(self, name), name)
        checks.count(self.bins, "bins", 2)  # used only by fit(X, y), but a wrong value is wrong either way
        checks.choice(self.strategy, "strategy", ("uniform", "quantile", "kmeans"))
        if y is None:
            if isinstance(X, (pd.DataFrame, np.ndarray, list)):
                raise _MissingTarget("y: MaxEntClassifier requires y to be passed, but the target y is None "
                                     "(give the labels of the rows X, or fit(aggregates) with X an Aggregates)")
            if not isinstance(X, Aggregates):
                raise TypeError(f"X: expected ppgm.adapters.Aggregates (from aggregate()) when y is omitted, "
                                f"or rows X with their labels y; got {type(X).__name__}")
            aggregates = X
            _warn_constant_label(aggregates)
        else:
            aggregates = self._aggregate_rows(X, y)
        tables = list(aggregates.tables)
        if not self.noise_model:
            tables = treat_as_exact(tables)
        warm = self.warm_start and hasattr(self, "model_")
        if warm and tuple(aggregates.features) != tuple(self.feature_names_in_):
            raise ValueError("aggregates: warm_start needs the same features as the previous fit")
        callback = None
        if eval_set is not None:
            codes, y = aggregates.encode(eval_set), aggregates.labels(eval_set)
            callback = lambda model, step: {"nllh": nllh(y, model.predict_proba(codes))}
        result = fit_maxent(
            tables, aggregates.domain, n=aggregates.n, n_chains=self.n_chains, max_iter=self.max_iter,
            l2_mu=self.l2_mu, l2_theta=self.l2_theta, step_mu=self.step_mu, step_theta=self.step_theta,
            rescaled=self.rescaled, precondition=self.precondition, average=self.average, seed=self.seed,
            progress=self.progress, model=self.model_ if warm else None, state=self.state_ if warm else None,
            callback=callback, callback_every=eval_every, n_shards=self.n_shards,
            executor=None if self.client is None else dask_executor(self.client), method=self.method, tol=self.tol,
        )
        if warm:
            for k, v in result.history.items():
                self.history_.setdefault(k, []).extend(v)
        else:
            self.history_ = result.history
        self.model_, self.state_, self.aggregates_ = result.model, result.state, aggregates
        self.n_iter_ = int(result.state.step)
        self.converged_, self.remaining_gain_ = result.converged, result.remaining_gain
        self.l2_theta_, self.selection_ = result.l2_theta, result.selection
        self.method_ = "exact" if "decrement" in result.history else "pcd"
        self.feature_names_in_ = np.array(aggregates.features, dtype=object)
        self.n_features_in_ = len(aggregates.features)
        self.classes_ = np.array(aggregates.classes)  # numpy's dtype for the values, as scikit-learn keeps labels
        self._positive_column = next(i for i, c in enumerate(self.classes_) if str(c) == str(aggregates.positive))
        return self

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        params = super().__repr__(N_CHAR_MAX)
        if not hasattr(self, "model_"):
            return params
        if self.method_ == "exact":
            how = "exact Newton fit over the enumerated joint"
        else:
            try:
                how = f"sampled-chains (PCD) fit, {len(self.state_.chains):,} chains"
            except (AttributeError, TypeError, ValueError):  # chains held by Dask workers
                how = "sampled-chains (PCD) fit"
        conv = {True: "converged", False: "not converged", None: "convergence not tested"}[self.converged_]
        return (f"{params}  # fitted: {how}, {self.n_iter_} steps, {conv}; {self.n_features_in_} features, "
                f"{len(self.aggregates_.tables)} tables, l2_theta_={self.l2_theta_:.3g}")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # a binary label (the MaxEnt model's y in {0, 1})
        tags.input_tags.allow_nan = True  # missing values get a state of their own
        tags.input_tags.string = True  # categorical columns as text
        return tags

    def _aggregate_rows(self, X, y) -> Aggregates:
        """Rows and labels as the aggregates :meth:`fit` learns from (the label column is named
        after ``y`` when it is a named Series that is not a feature, else ``"label"``)."""
        from sklearn.utils.multiclass import check_classification_targets, type_of_target
        from sklearn.utils.validation import column_or_1d

        df = _rows(X, "X")
        name = getattr(y, "name", None)
        if isinstance(y, (str, bytes, Mapping)) or np.asarray(y).ndim == 0:
            raise TypeError(f"y: expected one label per row of X, got {type(y).__name__} {y!r:.40}")
        y = np.asarray(per_record(y, df if isinstance(X, pd.DataFrame) else None, "y"))
        if y.ndim != 1 and y.shape[1:] != (1,):
            raise ValueError(f"y: expected one label per row of X (a 1-D array), got shape {y.shape}")
        labels = column_or_1d(y, warn=True)
        column_kind(pd.Series(labels), "y")  # 1 and "1" would be two classes
        if labels.shape[0] != len(df):
            raise ValueError(f"y: expected one label per row of X ({len(df)}), got {labels.shape[0]}")
        if pd.isna(pd.Series(labels)).any() or (labels.dtype.kind == "f" and not np.all(np.isfinite(labels))):
            raise ValueError("y: the labels have missing or infinite values")
        check_classification_targets(labels)  # a continuous y: "Unknown label type"
        if type_of_target(labels, input_name="y") not in ("binary", "unknown") and len(pd.unique(pd.Series(labels))) > 2:
            raise ValueError(f"y: expected a binary label, got {len(pd.unique(pd.Series(labels)))} values. "
                             "Only binary classification is supported.")
        if len(pd.unique(pd.Series(labels))) < 2:
            raise ValueError(f"y: only one class ({_plain(pd.unique(pd.Series(labels))[0])!r}) in the labels; a classifier needs "
                             "both classes to learn from")
        label = name if isinstance(name, str) and name not in df.columns else "label"
        if label in df.columns:
            raise ValueError(f"X: has a column named {label!r}, the label's name here; rename it")
        framed = df.assign(**{label: labels})
        with _as_argument("X"):
            return aggregate(framed, label=label, bins=self.bins, strategy=self.strategy)

    def _codes(self, df) -> np.ndarray:
        if not hasattr(self, "model_"):
            raise NotFittedError("MaxEntClassifier: call fit(aggregates) or fit(X, y) first")
        if not isinstance(df, pd.DataFrame):
            df = _rows(df, "X", names=list(self.feature_names_in_))
        check_frame(df, "X")
        with _as_argument("X"):
            codes = self.aggregates_.encode(df)
        unseen = codes < 0
        if unseen.any():
            cols = [f for f, u in zip(self.aggregates_.features, unseen.any(axis=0)) if u]
            warnings.warn(
                f"X: {int(unseen.sum())} values in columns {cols} were not seen in the aggregates; "
                "they contribute nothing to the prediction (their tables' terms are 0)",
                stacklevel=3,
            )
        return codes

    def decision_function(self, X) -> np.ndarray:
        """The logit theta0 + sum_t theta_t[x_t] of P(y = positive | x).

        Parameters
        ----------
        X : pandas.DataFrame or 2-D array

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> df = pd.DataFrame({"a": rng.integers(0, 3, 4000)}); df["y"] = (rng.random(4000) < 0.2 + 0.3 * df["a"]).astype(int)
        >>> clf = MaxEntClassifier(n_chains=1000, max_iter=60, progress=False).fit(aggregate(df, label="y"))
        >>> bool(np.all(np.diff(clf.decision_function(pd.DataFrame({"a": [0, 1, 2]}))) > 0))
        True
        """
        codes = self._codes(X)
        return self.model_.decision_function(codes)

    def predict_proba(self, X) -> np.ndarray:
        """(N, 2) array of the label's probabilities, columns in ``classes_`` order (scikit-learn's:
        the label values sorted).

        Parameters
        ----------
        X : pandas.DataFrame or 2-D array

        Returns
        -------
        numpy.ndarray, shape (N, 2)

        Examples
        --------
        >>> df = pd.DataFrame({"a": ["p", "q"] * 200, "y": (["yes", "no"] * 150) + ["no", "no"] * 50})
        >>> clf = MaxEntClassifier(n_chains=500, max_iter=50, progress=False).fit(aggregate(df, label="y"))
        >>> clf.classes_.tolist(), clf.predict(pd.DataFrame({"a": ["p", "q"]})).tolist()
        (['no', 'yes'], ['yes', 'no'])
        """
        codes = self._codes(X)
        p = self.model_.predict_proba(codes)
        out = np.empty((p.shape[0], 2))
        out[:, self._positive_column], out[:, 1 - self._positive_column] = p, 1 - p
        return out

    def predict(self, X) -> np.ndarray:
        """The more probable label value of every row (a value of ``classes_``).

        Parameters
        ----------
        X : pandas.DataFrame or 2-D array

        Returns
        -------
        numpy.ndarray

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> df = pd.DataFrame({"a": rng.integers(0, 3, 4000)}); df["y"] = (rng.random(4000) < 0.2 + 0.3 * df["a"]).astype(int)
        >>> clf = MaxEntClassifier(n_chains=1000, max_iter=60, progress=False).fit(aggregate(df, label="y"))
        >>> clf.predict(pd.DataFrame({"a": [0, 2]})).tolist()
        [0, 1]
        """
        proba = self.predict_proba(X)  # checks that the classifier is fitted
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y=None) -> float:
        """NLLH (1 - logloss / H(Y)): ``score(X, y)`` as scikit-learn calls it (model selection then
        ranks by this proper scoring rule, not by accuracy), or ``score(df)`` on rows carrying the
        label column.

        Parameters
        ----------
        X : pandas.DataFrame or 2-D array
            Rows (with the label column when ``y`` is omitted).
        y : array-like, optional
            Their labels.

        Returns
        -------
        float
            Higher is better; 0 is the label's base rate.

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> df = pd.DataFrame({"a": rng.integers(0, 3, 4000)}); df["y"] = (rng.random(4000) < 0.2 + 0.3 * df["a"]).astype(int)
        >>> clf = MaxEntClassifier(n_chains=1000, max_iter=60, progress=False).fit(aggregate(df, label="y"))
        >>> clf.score(df) > 0.05
        True
        """
        if y is None:
            labels = self.aggregates_.labels(X)
        else:
            y = per_record(y, X if isinstance(X, pd.DataFrame) else None, "y")
            labels = self.aggregates_.binary(y, "y")
        return nllh(labels, self.predict_proba(X)[:, self._positive_column])

    def to_markov_network(self) -> DiscreteMarkovNetwork:
        """The fitted joint model as a pgmpy ``DiscreteMarkovNetwork`` over the features and the label
        (state names kept; the label's states are 0 and 1): one factor per aggregated table over its
        features and the label, and one over the label for the intercept.

        Returns
        -------
        DiscreteMarkovNetwork

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> df = pd.DataFrame({"a": rng.integers(0, 3, 4000)}); df["y"] = (rng.random(4000) < 0.2 + 0.3 * df["a"]).astype(int)
        >>> clf = MaxEntClassifier(n_chains=1000, max_iter=60, progress=False).fit(aggregate(df, label="y"))
        >>> sorted(clf.to_markov_network().nodes())
        ['a', 'y']
        """
        if not hasattr(self, "model_"):
            raise ValueError("MaxEntClassifier: call fit(aggregates) first")
        label = self.aggregates_.label
        dom = self.aggregates_.domain
        mn = DiscreteMarkovNetwork()
        mn.add_nodes_from(list(dom.variables) + [label])
        factors = [DiscreteFactor([label], [2], np.exp([0.0, self.model_.theta0]), state_names={label: [0, 1]})]
        for scope, mu, th in self.model_.tables():
            vals = np.stack([mu, mu + th], axis=-1)
            vals = np.exp(vals - vals.max())
            names = {v: list(dom.state_names[v]) for v in scope}
            names[label] = [0, 1]
            factors.append(DiscreteFactor(list(scope) + [label], list(vals.shape), vals, state_names=names))
            for i, a in enumerate(list(scope) + [label]):
                for b in (list(scope) + [label])[i + 1 :]:
                    mn.add_edge(a, b)
        mn.add_factors(*factors)
        return mn
