"""Differentially private clique tables for pgmpy users, and learning Markov networks from them."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from pgmpy.factors.discrete import DiscreteFactor
from pgmpy.models import DiscreteMarkovNetwork

from ppgm.core import checks
from ppgm.learners.cgm import cgm_em, naive_mle, population_size
from ppgm.factors.domain import Domain
from ppgm.models.measurement import Measurement
from ppgm.privacy.contributions import keep_at_most, reweight_by_individual
from ppgm.factors.factor import Factor
from ppgm.privacy.mechanisms import (GaussianMechanism, LaplaceMechanism, PrivacyAccountant, StatesFromDataWarning, check_release_arguments,
                             noise_generator,
                             noisy_count, release_parts, zcdp_epsilon)
from ppgm.core.rng import as_generator
from ppgm.inference.tables import contingency_tables as _engine_tables
from ppgm.models.tying import Tying
from ppgm.factors.bins import NumericBins, fine_grid
from ppgm.privacy.private_bins import bin_count, bins_from_histogram

from .archive import MAX_BYTES, read_npz, save_path
from .columns import Categorical, Records, Schema
from .data import check_frame, declared_domain, per_record
from .models import declared_states, markov_to_pgmpy


@dataclass(frozen=True)
class NoisyFactor:
    """One released table: noisy counts over ``variables`` and the noise that produced them.

    Parameters
    ----------
    variables : tuple
        The clique.
    values : numpy.ndarray
        Noisy counts, one axis per variable, states in ``state_names`` order.
    state_names : dict
        ``{variable: states}``.
    noise : {"laplace", "gaussian", "none"}
    scale : float
        Laplace b or Gaussian sigma, in counts.
    integer : bool
        True when the noise is integer-valued (discrete Laplace / Gaussian on counts).
    members : tuple of tuple, optional
        For a pooled table (tied cliques released as one, ``release_tables(..., tied=...)``): the
        cliques whose counts it sums, aligned axis by axis in the order written, the first being
        ``variables``; ``state_names`` then names the states of every member's variables.

    Examples
    --------
    >>> f = NoisyFactor(("A",), np.array([4.2, 5.9]), {"A": ["no", "yes"]}, "laplace", 1.0)
    >>> f.to_measurement(n=10).variance
    2.0
    """

    variables: tuple
    values: np.ndarray
    state_names: dict
    noise: str
    scale: float
    integer: bool = False
    members: tuple | None = None

    @property
    def cliques(self) -> tuple:
        """The cliques the table counts: its members when pooled, else ``(variables,)``."""
        return self.members if self.members is not None else (tuple(self.variables),)

    def to_measurement(self, n: float | None = None) -> Measurement:
        """The table as the engine's :class:`ppgm.Measurement` (the noisy-observation factor p(y | n)).

        Parameters
        ----------
        n : float, optional
            The record count to attach.

        Returns
        -------
        ppgm.Measurement

        Examples
        --------
        >>> NoisyFactor(("A",), np.array([4.0, 6.0]), {"A": [0, 1]}, "gaussian", 2.0).to_measurement().variance
        4.0
        """
        return Measurement(self.variables, self.values, self.noise, self.scale, n, integer=self.integer, members=self.members)


@dataclass(frozen=True)
class NoisyTables:
    """The noisy clique tables of one release, usable without the records.

    Iterating yields :class:`NoisyFactor` objects (``.variables``, ``.values`` with axes in
    ``.variables`` order and states as in ``.state_names``, ``.noise``, ``.scale``).

    Parameters
    ----------
    factors : tuple of NoisyFactor
    n : float or None
        The record count when it was published with the tables (declared public, or noised: see
        ``spent``).
    spent : tuple of dict
        Every published part and what it cost: ``{"what": "tables", "epsilon": ...}`` (or ``"rho"``),
        ``{"what": "N", "public": True}`` when the caller declared N public.
    private : bool
        False when the noise was seeded (reproducible, not differentially private) or when the
        tables were built elsewhere and their provenance is unknown.

    Examples
    --------
    >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
    >>> [f.variables for f in t], t.private
    ([('A',)], False)
    """

    factors: tuple
    n: float | None = None
    spent: tuple = ()
    private: bool = False

    def __iter__(self) -> Iterator[NoisyFactor]:
        return iter(self.factors)

    def __len__(self) -> int:
        return len(self.factors)

    @property
    def domain(self) -> Domain:
        names: dict = {}
        for f in self.factors:
            for v in dict.fromkeys(v for c in f.cliques for v in c):
                s = list(f.state_names[v])
                if v in names and names[v] != s:
                    raise ValueError(f"tables: variable {v!r} has states {names[v]} in one table and {s} in another")
                names[v] = s
        return Domain(tuple(names), tuple(len(s) for s in names.values()), names)

    def measurements(self) -> list[Measurement]:
        """The tables as engine :class:`ppgm.Measurement` objects (what the learners take).

        Returns
        -------
        list of ppgm.Measurement

        Examples
        --------
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
        >>> t.measurements()[0].noise
        'laplace'
        """
        return [f.to_measurement(self.n) for f in self.factors]

    @classmethod
    def from_factors(cls, factors: Sequence[DiscreteFactor], noise: str, scale: float | Sequence[float],
                     n: float | None = None, spent: Sequence[Mapping] = (), integer: bool = False) -> "NoisyTables":
        """Tables released by someone else, as pgmpy ``DiscreteFactor`` objects of noisy counts (``private`` is
        False: ppgm cannot vouch for how they were made).

        Parameters
        ----------
        factors : list of DiscreteFactor
        noise : {"laplace", "gaussian", "none"}
        scale : float or list of float
            One noise scale for every table, or one per table.
        n : float, optional
            The record count, if published.
        spent : sequence of dict
            What the publisher says the release cost.
        integer : bool
            The noise was integer-valued.

        Returns
        -------
        NoisyTables

        Raises
        ------
        TypeError, ValueError
            Not a list of DiscreteFactors, scales that are not positive, a wrong number of scales.

        Examples
        --------
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
        >>> len(t), t.factors[0].scale
        (1, 1.0)
        """
        if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence) or not all(isinstance(f, DiscreteFactor) for f in factors):
            raise TypeError(f"factors: expected a list of pgmpy DiscreteFactors of noisy counts, got {factors!r:.80}")
        if not factors:
            raise ValueError("factors: expected at least one table")
        scales = [scale] * len(factors) if not isinstance(scale, (list, tuple, np.ndarray)) else list(scale)
        if len(scales) != len(factors):
            raise ValueError(f"scale: expected one scale or {len(factors)}, got {len(scales)}")
        scales = [checks.positive(s, "scale") for s in scales]
        if isinstance(spent, (str, bytes, Mapping)) or not isinstance(spent, Sequence) or not all(isinstance(p, Mapping) for p in spent):
            raise TypeError(f"spent: expected a list of dicts (what each published part cost), got {spent!r:.80}")
        out = []
        for f, s in zip(factors, scales):
            names = {v: list(f.state_names[v]) if f.state_names and v in f.state_names else list(range(c))
                     for v, c in zip(f.variables, f.cardinality)}
            m = Measurement(tuple(f.variables), np.asarray(f.values, dtype=float), noise, s, n, integer=integer)  # validates
            out.append(NoisyFactor(m.variables, m.values, names, noise, m.scale, m.integer))
        return cls(tuple(out), n, tuple(dict(p) for p in spent), False)

    def __repr__(self) -> str:
        sizes: dict = {}
        for f in self.factors:
            sizes[len(f.variables)] = sizes.get(len(f.variables), 0) + 1
        ways = ", ".join(f"{k} {w}-way" for w, k in sorted(sizes.items()))
        laws = sorted({f"{f.noise} scale {f.scale:.4g}" for f in self.factors})
        law = laws[0] if len(laws) == 1 else f"{len(laws)} noise scales"
        n = "not published" if self.n is None else f"{self.n:g}"
        variables = {v for f in self.factors for c in f.cliques for v in c}
        return (f"NoisyTables({len(self.factors)} tables ({ways}) over {len(variables)} variables, "
                f"{sum(int(np.size(f.values)) for f in self.factors):,} cells, {law}; n {n}; private={self.private})")

    @classmethod
    def from_table(cls, table: pd.DataFrame, noise: str, scale, n: float | None = None, *, value: str = "noisy_count",
                   columns: Sequence = ("var1", "val1", "var2", "val2"), table_column: str | None = "table",
                   state_names: Mapping | None = None, spent: Sequence[Mapping] = (), integer: bool = False) -> "NoisyTables":
        """Tables someone else published as one long table of noisy counts: one row per cell,
        ``table, var1, val1, var2, val2, noisy_count``, with ``var2`` and ``val2`` empty (missing or
        ``""``) on a one-way table's rows (``private`` is False: ppgm cannot vouch for how they were
        made). Wider tables add column pairs: ``columns=("var1", "val1", ..., "var3", "val3")``.

        States are kept as written (a CSV read by :func:`ppgm.adapters.read_records` keeps every cell
        as text, so ``"1"`` is a state, not the number 1); ``state_names`` gives the public domain and
        its order, else a variable's states are the values written, in the order they first appear.
        Every table must have one row for each of its cells (a noisy count cannot be assumed 0).

        Parameters
        ----------
        table : pandas.DataFrame
            The long table (e.g. ``read_records(path)``; the ``value`` column may hold numbers or text
            that reads as numbers).
        noise : {"laplace", "gaussian", "none"}
            The noise the publisher added, and its ``scale`` (Laplace b or Gaussian sigma, in counts).
        scale : float, mapping or str
            One scale for every table, ``{table id: scale}``, or the name of a column holding each
            row's table's scale.
        n : float, optional
            The record count, if published.
        value : str
            The column of noisy counts.
        columns : sequence of str
            The names of ``var1, val1, var2, val2`` (pairs of variable and state columns, as many as
            the widest table has variables).
        table_column : str or None
            The column naming each row's table; None: a table is the set of variables its rows name.
        state_names : mapping, optional
            ``{variable: states}``: the public domain and its order (every value written must be
            one of them).
        spent : sequence of dict
            What the publisher says the release cost (as ``release.spent``).
        integer : bool
            The noise was integer-valued.

        Returns
        -------
        NoisyTables
            One table per ``table`` id, in the order they first appear; axes in the order the table's
            first row names its variables.

        Raises
        ------
        TypeError, ValueError
            A column missing, counts that are not numbers, a cell written twice or not at all, a
            value outside ``state_names``, a table whose rows name different variables.

        Examples
        --------
        >>> long = pd.DataFrame({"table": [0, 0, 1, 1, 1, 1], "var1": ["A", "A", "A", "A", "A", "A"],
        ...                      "val1": ["no", "yes", "no", "no", "yes", "yes"], "var2": ["", "", "B", "B", "B", "B"],
        ...                      "val2": ["", "", "0", "1", "0", "1"], "noisy_count": [40.5, 61.0, 10.2, 29.9, 30.1, 31.0]})
        >>> t = NoisyTables.from_table(long, noise="laplace", scale=2.0)
        >>> [f.variables for f in t], t.factors[1].values.tolist(), t.domain.state_names["B"]
        ([('A',), ('A', 'B')], [[10.2, 29.9], [30.1, 31.0]], ('0', '1'))
        """
        check_frame(table, "table")
        pairs = _long_pairs(columns)
        needed = [c for p in pairs for c in p] + [value] + ([table_column] if table_column is not None else [])
        if isinstance(scale, str):
            needed.append(scale)
        absent = [c for c in needed if c not in table.columns]
        if absent:
            raise ValueError(f"table: columns {absent} are missing; it has {list(table.columns)} (name the columns with "
                             "columns=, value= and table_column=)")
        if len(table) == 0:
            raise ValueError("table: the DataFrame has no rows")
        declared = checks.state_names(state_names) if state_names is not None else {}
        counts = _count_column(table[value], value)
        rows = _long_rows(table, pairs)  # per row: the tuple of (variable, state) it names
        ids = table[table_column].tolist() if table_column is not None else [frozenset(v for v, _ in r) for r in rows]
        order: dict = {}
        for i, key in enumerate(ids):
            order.setdefault(key, []).append(i)
        states: dict = {v: list(s) for v, s in declared.items()}
        for r in rows:
            for v, s in r:
                known = states.setdefault(v, [])
                if v in declared:
                    if s not in known:
                        raise ValueError(f"table: variable {v!r} has the value {s!r}, not among its declared states {known} "
                                         "(a CSV read by read_records holds text: declare the states as written)")
                elif s not in known:
                    known.append(s)
        factors, scales = [], []
        for key, idx in order.items():
            variables = tuple(v for v, _ in rows[idx[0]])
            shape = tuple(len(states[v]) for v in variables)
            pos = {v: {s: j for j, s in enumerate(states[v])} for v in variables}
            cells = np.full(shape, np.nan)
            for i in idx:
                got = dict(rows[i])
                if set(got) != set(variables) or len(got) != len(rows[i]):
                    raise ValueError(f"table: table {key!r} names the variables {list(variables)} on one row and "
                                     f"{[v for v, _ in rows[i]]} on another")
                cell = tuple(pos[v][got[v]] for v in variables)
                if not np.isnan(cells[cell]):
                    raise ValueError(f"table: table {key!r} has two rows for the cell {dict(zip(variables, (got[v] for v in variables)))}")
                cells[cell] = counts[i]
            if np.isnan(cells).any():
                first = next(zip(*np.nonzero(np.isnan(cells))))
                raise ValueError(f"table: table {key!r} has no row for {int(np.isnan(cells).sum())} of its {cells.size} cells, e.g. "
                                 f"{ {v: states[v][j] for v, j in zip(variables, first)} }; a published table lists every cell")
            factors.append(DiscreteFactor(list(variables), list(shape), cells, state_names={v: list(states[v]) for v in variables}))
            scales.append(_table_scale(scale, key, table, idx))
        return cls.from_factors(factors, noise=noise, scale=scales, n=n, spent=spent, integer=integer)

    def to_table(self, value: str = "noisy_count", columns: Sequence | None = None, table_column: str = "table") -> pd.DataFrame:
        """The tables as one long table, the layout :meth:`from_table` reads: one row per cell,
        ``table, var1, val1, var2, val2, ..., noisy_count`` (``table`` the table's position; a
        narrower table's extra columns empty, ``""``). The noise law, ``n`` and the cost are not in
        it: publish :meth:`report` with it.

        Parameters
        ----------
        value : str
            The name of the counts' column.
        columns : sequence of str, optional
            Names of ``var1, val1, ...`` (default those, as many pairs as the widest table has variables).
        table_column : str

        Returns
        -------
        pandas.DataFrame
            Cells in each table's order (the last variable's state changing fastest).

        Raises
        ------
        ValueError
            A pooled table (``tied=``): its members share one table, which this layout cannot say.

        Examples
        --------
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1], state_names={"A": ["no", "yes"]})],
        ...                              noise="laplace", scale=1.0)
        >>> t.to_table().values.tolist()
        [[0, 'A', 'no', 40.2], [0, 'A', 'yes', 59.1]]
        """
        pooled = [i for i, f in enumerate(self.factors) if f.members is not None]
        if pooled:
            raise ValueError(f"tables {pooled} are pooled (tied cliques released as one); the long layout names one clique "
                             "per table: use save()")
        return long_frame([(f.variables, f.values, f.state_names) for f in self.factors], value, columns, table_column)

    def report(self, delta: float = 1e-9) -> dict:
        """The release's privacy report, as the command line writes it beside the tables: every part
        and its cost, the total (zCDP parts also as (epsilon, delta)), whether ppgm made the noise
        privately, the record count and each table's noise.

        Parameters
        ----------
        delta : float
            The delta at which to state epsilon for zCDP parts (tight conversion).

        Returns
        -------
        dict
            ``parts``, ``epsilon``, ``delta``, ``rho`` (zCDP parts, else None), ``private``, ``n``,
            ``tables`` (each ``variables``, ``noise``, ``scale``). ``epsilon`` and ``delta`` are None
            when no part states a cost (tables read from elsewhere without ``spent=``).

        Examples
        --------
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0,
        ...                              spent=[{"what": "tables", "epsilon": 1.0}])
        >>> r = t.report(); r["epsilon"], r["delta"], r["private"]
        (1.0, 0.0, False)
        """
        return _privacy_report(self.spent, self.private, delta, n=self.n,
                               tables=[{"variables": [_plain(v) for v in f.variables], "noise": f.noise, "scale": f.scale}
                                       for f in self.factors])

    def save_report(self, path, delta: float = 1e-9) -> None:
        """Write :meth:`report` as JSON (``privacy_report.json``, as the command line writes it).

        Parameters
        ----------
        path : str or os.PathLike
        delta : float

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile, os, json
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
        >>> f = os.path.join(tempfile.mkdtemp(), "privacy_report.json"); t.save_report(f)
        >>> json.load(open(f))["tables"][0]["noise"]
        'laplace'
        """
        _write_report(path, self.report(delta))

    def save(self, path) -> None:
        """Write the release to an ``.npz`` file (tables and metadata as JSON; no records, no pickles).

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile, os
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
        >>> t.save(os.path.join(tempfile.mkdtemp(), "release.npz"))
        """
        meta = {
            "n": self.n, "spent": list(self.spent), "private": self.private,
            "factors": [{"variables": [_plain(v) for v in f.variables],
                         "state_names": {str(v): [_plain(s) for s in f.state_names[v]] for c in f.cliques for v in c},
                         "noise": f.noise, "scale": f.scale, "integer": f.integer,
                         "members": None if f.members is None else [[_plain(v) for v in c] for c in f.members]}
                        for f in self.factors],
        }
        arrays = {f"t{i}": f.values for i, f in enumerate(self.factors)}
        np.savez(save_path(path), meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path, max_bytes: int = MAX_BYTES) -> "NoisyTables":
        """Read a release written by :meth:`save`.

        The archive's headers are checked before anything is unpacked (a file that would unpack to more
        than ``max_bytes`` is refused: release files come from others), and every table is validated as
        a measurement.

        Parameters
        ----------
        path : str or os.PathLike
        max_bytes : int
            Largest total size of the arrays to unpack (default 1 GiB).

        Returns
        -------
        NoisyTables

        Raises
        ------
        FileNotFoundError
            No file at ``path``.
        ValueError
            Not a ppgm release, or too large.

        Examples
        --------
        >>> import tempfile, os
        >>> t = NoisyTables.from_factors([DiscreteFactor(["A"], [2], [40.2, 59.1])], noise="laplace", scale=1.0)
        >>> f = os.path.join(tempfile.mkdtemp(), "rel.npz"); t.save(f)
        >>> NoisyTables.load(f).factors[0].values.tolist()
        [40.2, 59.1]
        """
        what = "a ppgm release (NoisyTables.save)"
        z = read_npz(path, what, required=("meta",), max_bytes=max_bytes)
        try:
            meta = json.loads(str(z["meta"]))
            out = []
            for i, fm in enumerate(meta["factors"]):
                variables = tuple(fm["variables"])
                members = None if fm.get("members") is None else tuple(tuple(c) for c in fm["members"])
                names = {v: fm["state_names"][str(v)] for c in (members or (variables,)) for v in c}
                m = Measurement(variables, z.pop(f"t{i}"), fm["noise"], fm["scale"], meta["n"], integer=bool(fm.get("integer", False)),
                                members=members)  # popped: the unpacked array is released once the table holds it
                for c in m.cliques:
                    if m.shape != tuple(len(names[v]) for v in c):
                        raise ValueError(f"table {i} has shape {m.shape} but the states of {c} give {tuple(len(names[v]) for v in c)}")
                out.append(NoisyFactor(variables, m.values, names, m.noise, m.scale, m.integer, m.members))
            return cls(tuple(out), meta["n"], tuple(meta["spent"]), bool(meta.get("private", False)))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as err:
            raise ValueError(f"path: {str(path)!r} is not {what}: {err!s}") from None


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def _long_pairs(columns) -> list[tuple]:
    """The (variable, state) column pairs of a long table: ``var1, val1, var2, val2, ...``."""
    if isinstance(columns, (str, bytes)) or not isinstance(columns, (list, tuple)) or not columns or len(columns) % 2:
        raise TypeError(f"columns: expected the names of var1, val1, var2, val2, ... (pairs of a variable and a state "
                        f"column), got {columns!r:.80}")
    names = checks.names(list(columns), "columns")
    return [(names[i], names[i + 1]) for i in range(0, len(names), 2)]


def _blank(x) -> bool:
    return x is None or (isinstance(x, str) and x == "") or (not isinstance(x, str) and bool(pd.isna(x)))


def _long_rows(table: pd.DataFrame, pairs: list) -> list[tuple]:
    """Per row of a long table, the ((variable, state), ...) it names (blank variable columns skipped)."""
    cols = [(table[a].tolist(), table[b].tolist()) for a, b in pairs]
    out = []
    for i in range(len(table)):
        row = []
        for (a, b), (vs, ss) in zip(pairs, cols):
            if _blank(vs[i]):
                continue
            if _blank(ss[i]) and not isinstance(ss[i], str):
                raise ValueError(f"table: row {table.index[i]!r} names the variable {vs[i]!r} in column {a!r} but no state in {b!r}")
            row.append((vs[i], _plain(ss[i])))
        if not row:
            raise ValueError(f"table: row {table.index[i]!r} names no variable in columns {[a for a, _ in pairs]}")
        out.append(tuple(row))
    return out


def _count_column(col: pd.Series, name: str) -> np.ndarray:
    """Noisy counts as floats: numbers, or text that reads as numbers."""
    x = np.asarray(col if pd.api.types.is_numeric_dtype(col) else pd.to_numeric(col, errors="coerce"), dtype=float)
    bad = ~np.isfinite(x)
    if bad.any():
        raise ValueError(f"value: column {name!r} must hold a finite number in every row; row {col.index[int(np.argmax(bad))]!r} "
                         f"holds {col.iloc[int(np.argmax(bad))]!r} ({int(bad.sum())} such rows)")
    return x


def _table_scale(scale, key, table: pd.DataFrame, idx: list) -> float:
    """A table's noise scale: one for all, the mapping's entry, or the scale column's (one value per table)."""
    if isinstance(scale, Mapping):
        if key not in scale:
            raise ValueError(f"scale: no scale for table {key!r}; the mapping has {list(scale)[:10]}")
        return scale[key]
    if isinstance(scale, str):
        vals = _count_column(table[scale].iloc[idx], scale)
        if np.ptp(vals) > 0:
            raise ValueError(f"scale: column {scale!r} holds several scales for table {key!r}: {sorted(set(vals.tolist()))[:5]}")
        return float(vals[0])
    return scale


def _privacy_report(spent, private: bool, delta: float, **extra) -> dict:
    """Every part, its cost and the total: pure epsilon-DP parts add up in epsilon (delta 0); with zCDP
    parts the total is in rho (a pure part of epsilon counts epsilon^2 / 2) and as (epsilon, delta)."""
    delta = checks.in_range(delta, "delta", 0.0, 1.0, closed=False)
    parts = [dict(p) for p in spent]
    eps = float(sum(p.get("epsilon", 0.0) for p in parts if "rho" not in p))
    if any("rho" in p for p in parts):
        rho = float(sum(p["rho"] for p in parts if "rho" in p) + sum(p.get("epsilon", 0.0) ** 2 / 2 for p in parts if "rho" not in p))
        return {"parts": parts, "rho": rho, "epsilon": zcdp_epsilon(rho, delta) if rho > 0 else 0.0, "delta": delta,
                "private": private, **extra}
    if not any("epsilon" in p for p in parts):  # nothing charged is known (tables read from elsewhere without spent=)
        return {"parts": parts, "rho": None, "epsilon": None, "delta": None, "private": private, **extra}
    return {"parts": parts, "rho": None, "epsilon": eps, "delta": 0.0, "private": private, **extra}


def long_frame(tables: Sequence[tuple], value: str, columns: Sequence | None = None, table_column: str | None = None) -> pd.DataFrame:
    """Tables ``(variables, values, state_names)`` as one long DataFrame: a row per cell, ``var1, val1,
    var2, val2, ..., value`` (as many pairs as the widest table has variables; a narrower table's
    extra columns ``""``), first ``table_column`` (the table's position) when named.

    Examples
    --------
    >>> long_frame([(("A",), np.array([0.4, 0.6]), {"A": ["no", "yes"]})], "prob").values.tolist()
    [['A', 'no', 0.4], ['A', 'yes', 0.6]]
    """
    if not isinstance(value, str):
        raise TypeError(f"value: expected a column name (text), got {value!r:.80}")
    k = max(len(t[0]) for t in tables)
    names = list(columns) if columns is not None else [c for j in range(1, k + 1) for c in (f"var{j}", f"val{j}")]
    if len(names) != 2 * k:
        raise ValueError(f"columns: expected {2 * k} names (a variable and a state column for each of {k} variables), got {names}")
    frames = []
    for i, (variables, values, state_names) in enumerate(tables):
        grid = np.indices(np.shape(values)).reshape(len(variables), -1)
        part: dict = {} if table_column is None else {table_column: np.full(grid.shape[1], i)}
        for j in range(k):
            if j < len(variables):
                v = variables[j]
                states = np.empty(len(state_names[v]), dtype=object)
                states[:] = [_plain(x) for x in state_names[v]]
                part[names[2 * j]] = [v] * grid.shape[1]
                part[names[2 * j + 1]] = states[grid[j]]
            else:
                part[names[2 * j]] = part[names[2 * j + 1]] = [""] * grid.shape[1]
        part[value] = np.asarray(values, dtype=float).ravel()
        frames.append(pd.DataFrame(part))
    return pd.concat(frames, ignore_index=True)


def _write_report(path, report: dict) -> None:
    """A privacy report as the command line writes it (JSON, one space of indent)."""
    Path(path).write_text(json.dumps(report, indent=1, default=_plain))


def _cliques(cliques_or_model) -> list[tuple]:
    if isinstance(cliques_or_model, DiscreteMarkovNetwork):
        return [tuple(f.variables) for f in cliques_or_model.get_factors()] or [tuple(e) for e in cliques_or_model.edges()]
    return checks.cliques(cliques_or_model, "cliques_or_model")



def release_tables(
    data: pd.DataFrame,
    cliques_or_model,
    mechanism: LaplaceMechanism | GaussianMechanism,
    *,
    state_names: Mapping | None = None,
    individuals=None,
    max_contributions: int | None = None,
    reweight: bool = False,
    weights=None,
    on_unknown: str = "raise",
    publish_n=False,
    accountant: PrivacyAccountant | None = None,
    seed=None,
    tied: Sequence | None = None,
    bins_mechanism: LaplaceMechanism | GaussianMechanism | None = None,
) -> NoisyTables:
    """Count the cliques' contingency tables in ``data`` and release them through ``mechanism``,
    differentially private end to end.

    The privacy model: neighbouring data sets differ by one individual's records (one record, or all
    records of one value of ``individuals``). Everything published is either charged or declared public
    by the caller: the domain comes from the model's declared states or ``state_names``, never from
    the data; one individual's contribution is bounded by a public rule; the noise is integer and
    sampled exactly (OpenDP, the operating system's random source); N is published only if noised
    and charged, or declared public.

    Parameters
    ----------
    data : pandas.DataFrame
    cliques_or_model : sequence of cliques, or a pgmpy ``DiscreteMarkovNetwork`` (its factor scopes;
        its factors' state names are the public domain, in the model's order)
    mechanism : LaplaceMechanism or GaussianMechanism
    state_names : mapping, optional
        ``{column: states}``, the public domain (overrides the model's). A column whose states are
        declared nowhere is an error.
    individuals : str or array-like, optional
        Who each record belongs to (a column name, or one id per record: a pandas Series is aligned
        to the data by index). Requires a public bound:
        ``max_contributions=k`` (keep a random subset of at most k records per individual;
        sensitivity k per table) or ``reweight=True`` (each of an individual's K records weighted
        1 / K; sensitivity 1 per table). Without it every record is its own individual.
    max_contributions : int, optional
    reweight : bool
    weights : array-like, optional
        Per-record weights in [0, 1] (each record still counts for at most 1; a pandas Series is
        aligned to the data by index). Not with ``reweight``.
    on_unknown : {"raise", "drop"}
        A value outside the declared states (or a missing value): an error naming the column and the
        value, or drop the record (a per-record map, which stays private).
    publish_n : False, "public", True or a mechanism
        Publish the record count: ``"public"`` (or True) declares it public (recorded in ``spent`` and
        the accountant's ledger at no cost); a mechanism releases it with noise and charges it.
    accountant : PrivacyAccountant, optional
        Charged for every part at once; an over-budget release raises ``BudgetExceeded`` and releases
        nothing.
    seed : int or numpy.random.Generator, optional
        Reproducible noise for tests and tutorials: the release is then **not private**
        (``release.private`` is False, with a ``NotPrivateWarning``). Omit it for a private release.
    bins_mechanism : LaplaceMechanism or GaussianMechanism, optional
        For numeric columns (``state_names`` entries such as ``{"min": 0, "max": 90}``,
        :mod:`ppgm.adapters.columns`): releases each numeric column's fine histogram, from which the
        bins are chosen where they are ``"auto"`` (charged as its own part). Without it, numeric
        columns need public bins (``"bins": 10`` equal-width, or ``"edges"``).
    tied : list of groups of cliques, optional
        Release each group's tables as one pooled table, their sum cell by cell (members aligned
        axis by axis in the order written, as ``NaiveMLEEstimator(model, tied=...)`` aligns them),
        with one draw of noise. One record adds to every member, so a pooled table of k cliques
        counts k times in the sensitivity (L1: k; L2: k, not sqrt(k)): with Laplace noise the noise
        scale is that of releasing the k tables apart, but the shared table's noise variance is k
        times smaller; with Gaussian noise pooling gains nothing. Both estimators take the pooled
        tables (CGM-EM even with an untied model).

    Returns
    -------
    NoisyTables

    Examples
    --------
    >>> df = pd.DataFrame({"A": [0, 1, 1, 0], "B": [1, 1, 0, 0]})
    >>> rel = release_tables(df, [("A", "B")], LaplaceMechanism(1.0), state_names={"A": [0, 1], "B": [0, 1]})
    >>> next(iter(rel)).scale, rel.spent, rel.private
    (1.0, ({'what': 'tables', 'epsilon': 1.0},), True)
    """
    check_release_arguments(mechanism, accountant)
    check_release_arguments(bins_mechanism, None, optional=True)
    rng = noise_generator(seed)  # None: private noise (and an unseeded choice of records)
    records = read_release(data, cliques_or_model, state_names)
    numeric = records.schema.numeric if bins_mechanism is not None else []
    before = [{"what": f"numeric columns' fine histograms ({len(numeric)})", **bins_mechanism.cost}] if numeric else []  # type: ignore[union-attr]
    parts, n_mech = release_parts(mechanism, "tables", publish_n, before=before)

    def charge():
        if accountant is not None:
            accountant.charge(parts)

    counted = bounded_tables(records, cliques_or_model, individuals=individuals, max_contributions=max_contributions,
                             reweight=reweight, weights=weights, on_unknown=on_unknown, seed=rng,
                             bins_mechanism=bins_mechanism if numeric else None, noise_seed=rng,
                             before_noise=charge if numeric else None)
    tables, members = _pooled_tables(counted, tied)  # checked before anything is charged (but the bins' noise)
    if not numeric:
        charge()
    n = _published_n(counted, publish_n, n_mech, rng)
    ms = mechanism.measure(tables, rng, contribution=counted.contribution, n=n, members=members)
    dom = counted.domain
    factors = tuple(NoisyFactor(m.variables, m.values, {v: list(dom.state_names[v]) for c in m.cliques for v in c}, m.noise, m.scale,
                                m.integer, m.members) for m in ms)
    return NoisyTables(factors, n, tuple(parts), rng is None)


def _pooled_tables(counted: "BoundedTables", tied: Sequence | None) -> tuple[list[Factor], list]:
    """The tables to noise: each tied group's members summed (aligned as written) at its first
    member's place, the other cliques' tables as they are; and per table, its members or None."""
    if tied is None:
        return list(counted.tables), [None] * len(counted.tables)
    scopes = [tuple(t.variables) for t in counted.tables]
    tie = Tying.build(counted.domain, scopes, tied)  # errors name the group
    written = {group[0]: [tuple(c) for c in tied[g]] for g, group in enumerate(tie.groups)}
    skip = {i for group in tie.groups for i in group[1:]}
    tables, members = [], []
    for i, t in enumerate(counted.tables):
        if i in skip:
            continue
        if i not in written:
            tables.append(t)
            members.append(None)
            continue
        group = next(g for g in tie.groups if g[0] == i)
        cliques = written[i]
        total = sum(np.transpose(np.asarray(counted.tables[j].values), [scopes[j].index(v) for v in c])
                    for j, c in zip(group, cliques))
        tables.append(Factor(cliques[0], total))
        members.append(tuple(cliques))
    return tables, members


@dataclass(frozen=True)
class BoundedTables:
    """The exact tables a release adds noise to (never publish them).

    Parameters
    ----------
    tables : list of ppgm.Factor
        Counts over the public ``domain``.
    domain : ppgm.Domain
    contribution : float
        The public bound of one individual's weight per table.
    n_records : int
        Records counted.
    total : float
        Their total weight.
    weighted : bool
        The counts are weighted (``reweight`` or ``weights``).
    schema : ppgm.adapters.columns.Schema, optional
        The released columns, numeric columns' bins chosen (and, with a ``bins_mechanism``, their
        within-bin shapes): it decodes synthetic records.
    bins : tuple of Measurement
        The numeric columns' noisy fine histograms, when the bins were chosen privately.

    Examples
    --------
    >>> df = pd.DataFrame({"A": ["a", "b", "b"]})
    >>> b = bounded_tables(df, [("A",)], state_names={"A": ["a", "b", "c"]})
    >>> b.as_factors()[0].values.tolist(), b.contribution, b.n_records
    ([1.0, 2.0, 0.0], 1.0, 3)
    """

    tables: list
    domain: Domain
    contribution: float
    n_records: int
    total: float
    weighted: bool
    schema: Schema | None = None
    bins: tuple = ()

    def __repr__(self) -> str:
        return (f"BoundedTables({len(self.tables)} exact tables over {len(self.domain)} variables, "
                f"{sum(int(np.size(t.values)) for t in self.tables):,} cells; {self.n_records:,} records counted"
                f"{f', total weight {self.total:g}' if self.weighted else ''}; contribution bound {self.contribution:g}; not private)")

    def as_factors(self) -> list[DiscreteFactor]:
        """The tables as pgmpy ``DiscreteFactor`` objects with the domain's state names.

        Returns
        -------
        list of DiscreteFactor

        Examples
        --------
        >>> bounded_tables(pd.DataFrame({"A": ["a"]}), [("A",)], state_names={"A": ["a", "b"]}).as_factors()[0].values.tolist()
        [1.0, 0.0]
        """
        return [DiscreteFactor(list(t.variables), list(t.shape), np.asarray(t.values, dtype=float),
                               state_names={v: list(self.domain.state_names[v]) for v in t.variables}) for t in self.tables]


def bounded_tables(
    data,
    cliques_or_model,
    *,
    state_names: Mapping | None = None,
    individuals=None,
    max_contributions: int | None = None,
    reweight: bool = False,
    weights=None,
    on_unknown: str = "raise",
    seed=None,
    bins_mechanism=None,
    noise_seed=None,
    before_noise=None,
) -> BoundedTables:
    """The exact contingency tables that :func:`release_tables` adds noise to, over the public domain
    and after bounding each individual's contribution (same arguments, same checks). For inspecting
    and testing a release's sensitivity; the tables themselves are not private.

    Parameters
    ----------
    data : pandas.DataFrame or ppgm.adapters.columns.Records
        The records, or records already read through the release's schema.
    cliques_or_model : list of cliques, or a pgmpy DiscreteMarkovNetwork
    state_names : mapping, optional
    individuals : str or array-like, optional
    max_contributions : int, optional
    reweight : bool
    weights : array-like, optional
    on_unknown : {"raise", "drop"}
        See :func:`release_tables` for all of these.
    seed : int or numpy.random.Generator, optional
        Only drives the random choice of records kept under ``max_contributions``.
    bins_mechanism : GaussianMechanism or LaplaceMechanism, optional
        Releases the numeric columns' fine histograms, from which their bins (where ``"auto"``) and
        within-bin shapes are read (:mod:`ppgm.privacy.private_bins`); the caller charges it. Without
        it every numeric column needs public bins.
    noise_seed : numpy.random.Generator, optional
        The fine histograms' noise: None samples privately.
    before_noise : callable, optional
        Called once every argument and record is checked, before any noise is drawn (a release
        charges its accountant there).

    Returns
    -------
    BoundedTables

    Raises
    ------
    ValueError, TypeError
        As :func:`release_tables`.

    Examples
    --------
    >>> df = pd.DataFrame({"A": [0, 1, 1, 1], "who": ["u", "v", "v", "v"]})
    >>> b = bounded_tables(df, [("A",)], state_names={"A": [0, 1]}, individuals="who", max_contributions=2, seed=0)
    >>> b.tables[0].values.tolist(), b.contribution
    ([1, 2], 2.0)
    """
    checks.flag(reweight, "reweight")
    rng = as_generator(seed)
    cliques = [tuple(c) for c in _cliques(cliques_or_model)]
    if not cliques:
        raise ValueError("cliques_or_model: expected at least one clique")
    records = data if isinstance(data, Records) else read_release(data, cliques_or_model, state_names)
    columns = list(dict.fromkeys(v for c in cliques for v in c))
    absent = [v for v in columns if v not in records.schema.names]
    if absent:
        raise ValueError(f"cliques_or_model: columns {absent} are not in the release's schema {list(records.schema.names)}")
    keep, w, contribution = _bounded_records(records, individuals, max_contributions, reweight, weights, on_unknown, rng)
    schema, fine = records.schema.public_bins(cells=bins_mechanism is not None), []
    if schema.unresolved and bins_mechanism is None:
        raise ValueError(f"state_names: the numeric columns {schema.unresolved} have bins 'auto', which a release chooses "
                         "privately from its budget: give public bins ({'min': ..., 'max': ..., 'bins': 10} or 'edges'), or "
                         "a budget for private bins (bins_mechanism)")
    if before_noise is not None:
        before_noise()
    if bins_mechanism is not None and schema.numeric:
        schema, fine = _private_bins(schema, records, keep, w, contribution, bins_mechanism, noise_seed)
    codes = schema.encode(records)[keep]
    dom = schema.domain
    if w is not None:
        w = w[keep]
    if len(codes):
        tables = _engine_tables(codes, dom, cliques, weights=w)
    else:
        tables = [Factor(c, np.zeros(dom.shape(c), dtype=float if w is not None else np.int64)) for c in cliques]
    total = float(len(codes)) if w is None else float(w.sum())
    return BoundedTables(tables, dom, contribution, int(len(codes)), total, w is not None, schema, tuple(fine))


def read_release(data, cliques_or_model, state_names: Mapping | None = None) -> Records:
    """The records of a release read once, at its door, through its public schema: the model's
    declared states, overridden by ``state_names`` (states or numeric columns,
    :mod:`ppgm.adapters.columns`); a released column declared nowhere is an error (states read from
    the data would disclose values that only the private data contain).

    Parameters
    ----------
    data : pandas.DataFrame
    cliques_or_model : list of cliques, or a pgmpy DiscreteMarkovNetwork
    state_names : mapping, optional

    Returns
    -------
    ppgm.adapters.columns.Records

    Examples
    --------
    >>> r = read_release(pd.DataFrame({"A": ["a", "b"], "x": [3.5, 9.0]}), [("A", "x")],
    ...                  {"A": ["a", "b"], "x": {"min": 0, "max": 10, "bins": 2}})
    >>> r.codes[:, 0].tolist(), r.values["x"].tolist()
    ([0, 1], [3.5, 9.0])
    """
    check_frame(data, "data")
    cliques = [tuple(c) for c in _cliques(cliques_or_model)]
    columns = list(dict.fromkeys(v for c in cliques for v in c))
    absent = [v for v in columns if v not in data.columns]
    if absent:
        raise ValueError(f"cliques_or_model: columns {absent} are not in the data; it has {list(data.columns)}")
    declared = declared_states(cliques_or_model) if isinstance(cliques_or_model, DiscreteMarkovNetwork) else {}
    given = state_names if isinstance(state_names, Schema) else Schema.parse(checks.mapping(state_names, "state_names"))
    declared_domain([c for c in columns if c not in given.columns], declared)  # the undeclared columns, named
    schema = Schema({**Schema.parse(declared).columns, **given.columns}, given.bins).project(columns)
    stated = {c: list(given.columns[c].states) for c in columns if isinstance(given.columns.get(c), Categorical)}
    if stated:
        warn_if_states_from_data(data, Domain(tuple(stated), tuple(len(v) for v in stated.values()), stated), stated)
    return schema.read(data)


def warn_if_states_from_data(data: pd.DataFrame, domain: Domain, state_names: Mapping | None) -> bool:
    """Warn (once per release, a :class:`ppgm.StatesFromDataWarning`) when a private release's states
    given as ``state_names`` look read from the records it releases: every such column with more than
    two states is declared with exactly the values present in ``data``, sorted or in the order they
    first appear (what ``sorted(df[c].unique())``, ``df[c].unique()`` and
    :func:`ppgm.adapters.infer_domain` give). Columns of one or two states say too little to tell; a
    model's declared states (a network built for the job, or one the records were drawn from) are
    taken as declared.

    Parameters
    ----------
    data : pandas.DataFrame
    domain : ppgm.Domain
        The release's domain.
    state_names : mapping or None
        The states the caller passed.

    Returns
    -------
    bool
        Whether it warned.

    Examples
    --------
    >>> import warnings
    >>> df = pd.DataFrame({"age": ["20-29", "30-39", "40-49", "30-39"]})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     read = {"age": ["20-29", "30-39", "40-49"]}
    ...     warn_if_states_from_data(df, Domain(("age",), (3,), read), read)
    True
    >>> codebook = {"age": ["20-29", "30-39", "40-49", "50+"]}
    >>> warn_if_states_from_data(df, Domain(("age",), (4,), codebook), codebook)
    False
    """
    given = state_names if isinstance(state_names, Mapping) else {}
    looked = [v for v in domain.variables if v in given and domain.card(v) > 2 and v in data.columns]
    if not looked:
        return False
    for v in looked:
        states = list(domain.state_names[v])
        present = [_plain(x) for x in pd.unique(data[v])]
        if len(present) != len(states):
            return False
        if present == states:
            continue
        try:
            if sorted(present) == states:
                continue
        except TypeError:  # values of mixed kinds have no order
            pass
        return False
    warnings.warn(
        f"state_names: the declared states of {looked} are exactly the values present in the data, as if read from it. "
        "A domain read from the records discloses which values occur (a value only one person has, the largest age), "
        "and the noise does not hide it. Declare every column's states from a public source (a codebook, the form's "
        "categories), values no record may have included; if they were, silence this with "
        "warnings.filterwarnings('ignore', category=ppgm.StatesFromDataWarning)", StatesFromDataWarning, stacklevel=3)
    return True


def _private_bins(schema: Schema, records: Records, keep: np.ndarray, w, contribution: float, mechanism, rng):
    """The numeric columns' fine histograms released through ``mechanism`` (one table per column, so
    a record moves each of them), and the schema with every numeric column's bins and within-bin
    shape read from them (post-processing); the bin count, where not given, from the noisy record
    count by :func:`ppgm.privacy.private_bins.bin_count`."""
    cols = schema.numeric
    grids = {c: schema.bins[c].cells if c in schema.bins else fine_grid(*schema.columns[c].bounds(c), schema.columns[c].integer)
             for c in cols}
    exact = []
    for c in cols:
        cells = NumericBins(*schema.columns[c].bounds(c), grids[c][[0, -1]], schema.columns[c].integer).codes(
            records.values[c][keep], grids[c])
        ok = cells >= 0
        weights = None if w is None else w[keep][ok]
        counts = np.bincount(cells[ok], weights=weights, minlength=grids[c].size - 1)
        exact.append(Factor((c,), counts if w is not None else counts.astype(np.int64)))
    noisy = mechanism.measure(exact, rng, contribution=contribution)
    rho = getattr(mechanism, "rho", None)
    sigma = noisy[0].scale * (1.0 if mechanism.noise == "gaussian" else math.sqrt(2.0))
    n_hat = float(np.median([max(m.values.sum(), 1.0) for m in noisy]))
    out = {}
    for c, m in zip(cols, noisy):
        spec = schema.columns[c]
        lo, hi = spec.bounds(c)
        edges = schema.bins[c].edges if c in schema.bins else None
        n_bins = None if edges is not None else bin_count(n_hat, rho if rho is not None else float(mechanism.epsilon) ** 2 / 2)
        out[c] = bins_from_histogram(lo, hi, spec.integer, grids[c], m.values, sigma, n_bins=n_bins, edges=edges)
    return schema.with_bins(out), noisy


def _bounded_records(records: Records, individuals, max_contributions, reweight, weights, on_unknown, rng):
    """The records that enter the counts (a mask), their weights and the public per-table bound of
    one individual's contribution."""
    if on_unknown not in ("raise", "drop"):
        raise ValueError(f"on_unknown: expected 'raise' or 'drop', got {on_unknown!r}")
    if on_unknown == "raise":
        records.check()  # raises naming the column and the value
    data = records.data
    keep = records.known()
    w = None
    if weights is not None:
        if reweight:
            raise ValueError("weights: not with reweight=True (reweighting sets the weights)")
        w = checks.weights(per_record(weights, data, "weights"), len(data), upper=1.0)  # the public bound of one record's weight is 1
    if individuals is None:
        if max_contributions is not None or reweight:
            raise ValueError("individuals: max_contributions and reweight bound each individual's records; name the individuals")
        return keep, w, 1.0
    if isinstance(individuals, str) and individuals not in data.columns:
        raise ValueError(f"individuals: column {individuals!r} is not in the data")
    ids = data[individuals].to_numpy() if isinstance(individuals, str) else np.asarray(per_record(individuals, data, "individuals"))
    if ids.ndim != 1 or ids.shape[0] != len(data):
        raise ValueError(f"individuals: expected {len(data)} entries, one per record, got shape {ids.shape}")
    missing = int(pd.isna(ids).sum())
    if missing:
        raise ValueError(f"individuals: {missing} records have no id (NaN / None); a missing id would count all of them as one "
                         "individual. Drop those records or give each its own id")
    if (max_contributions is None) == (not reweight):
        raise ValueError(
            "individuals: give a public bound on each individual's records, max_contributions=k or reweight=True "
            "(one of them); a bound read from the data would itself be a disclosure"
        )
    if reweight:
        w = np.zeros(len(data))
        w[keep] = reweight_by_individual(ids[keep])
        return keep, w, 1.0
    keep = keep.copy()
    keep[keep] = keep_at_most(ids[keep], max_contributions, rng)
    return keep, w, float(max_contributions)


def _published_n(counted: BoundedTables, publish_n, n_mech, rng) -> float | None:
    """N as published: exact when declared public, noised (and at least 1) with a mechanism."""
    if not publish_n:
        return None
    if n_mech is None:
        return counted.total if counted.total > 0 else None
    count = counted.total if counted.weighted else counted.n_records
    return noisy_count(n_mech, count, rng, counted.contribution, integer=not counted.weighted)


class _NoisyTableEstimator:
    """Shared checks of the two estimators: the tables must cover the model's cliques exactly."""

    def __init__(self, model: DiscreteMarkovNetwork, tied: Sequence | None = None) -> None:
        if not isinstance(model, DiscreteMarkovNetwork):
            raise TypeError(f"model: expected a pgmpy DiscreteMarkovNetwork, got {type(model).__name__}")
        self.model = model
        if tied is not None:  # checked against the model's cliques now, not at the first estimate
            Tying.build(Domain(tuple(model.nodes()), tuple(int(model.get_cardinality(v)) for v in model.nodes())),
                        [tuple(c) for c in _cliques(model)], tied)
        self.tied = tied

    def __repr__(self) -> str:
        model = f"{len(self.model.nodes())} variables, {len(_cliques(self.model))} cliques"
        if not hasattr(self, "history_"):
            return f"{type(self).__name__}({model}; not estimated yet)"
        l2 = "None" if getattr(self, "l2_", None) is None else f"{self.l2_:.3g}"
        last = self.history_[-1] if self.history_ and isinstance(self.history_[-1], dict) else {}
        steps = f"{len(self.history_)} {'EM iterations' if last else 'optimiser steps'}"
        stopped = f", stopped: {last['stopped']}" if "stopped" in last else ""
        return f"{type(self).__name__}({model}; estimated: N_={self.N_:g}, l2_={l2}, {steps}{stopped})"

    def _inputs(self, noisy_tables) -> tuple[Domain, list[Measurement]]:
        if not isinstance(noisy_tables, NoisyTables):
            raise TypeError(f"noisy_tables: expected NoisyTables (see release_tables / NoisyTables.from_factors), got {type(noisy_tables).__name__}")
        cliques = {frozenset(c) for c in _cliques(self.model)}
        given = {frozenset(c) for f in noisy_tables for c in f.cliques}
        if cliques - given:
            raise ValueError(f"noisy_tables: no table for the model's cliques {[sorted(map(str, c)) for c in cliques - given]}")
        if given - cliques:
            raise ValueError(f"noisy_tables: tables over {[sorted(map(str, c)) for c in given - cliques]} are not cliques of the model")
        dom = noisy_tables.domain
        missing = set(self.model.nodes()) - set(dom.variables)
        if missing:
            raise ValueError(f"noisy_tables: the model's variables {sorted(map(str, missing))} appear in no table")
        return _in_model_order(dom, noisy_tables.measurements(), declared_states(self.model))


def _in_model_order(dom: Domain, ms: list[Measurement], declared: Mapping) -> tuple[Domain, list[Measurement]]:
    """The release's domain and tables with every variable's states in the model's declared order
    (so that the fitted network lists them as the model does); different state sets are an error."""
    order = {}
    for v in dom.variables:
        if v not in declared or list(declared[v]) == list(dom.state_names[v]):
            continue
        have, want = list(dom.state_names[v]), list(declared[v])
        if len(have) != len(want) or set(have) != set(want):
            raise ValueError(f"noisy_tables: variable {v!r} was released with states {have}, the model declares {want}")
        order[v] = [have.index(x) for x in want]
    if not order:
        return dom, ms
    names = {v: [dom.state_names[v][i] for i in order[v]] if v in order else list(dom.state_names[v]) for v in dom.variables}
    out = []
    for m in ms:
        vals = m.values
        for ax in range(len(m.variables)):
            moves = {tuple(order.get(c[ax], range(dom.cards[dom.index(c[ax])]))) for c in m.cliques}
            if len(moves) > 1:
                raise ValueError(f"noisy_tables: the pooled table over {m.cliques} aligns variables whose states the model "
                                 "orders differently; declare them in the same order")
            if any(c[ax] in order for c in m.cliques):
                vals = np.take(vals, list(moves.pop()), axis=ax)
        out.append(Measurement(m.variables, vals, m.noise, m.scale, m.n, integer=m.integer, members=m.members))
    return Domain(dom.variables, dom.cards, names), out


class NaiveMLEEstimator(_NoisyTableEstimator):
    """The CGM paper's baseline: noisy tables / N projected onto the simplex, then an L2-regularised
    maximum-likelihood fit (a pgmpy-style estimator of a ``DiscreteMarkovNetwork``'s factors).

    Parameters
    ----------
    model : DiscreteMarkovNetwork
        Its factors' scopes are the cliques; its declared states are kept in the result.
    tied : list of groups of cliques, optional
        Cliques that share one log-potential, e.g. ``[[("x0", "x1"), ("x1", "x2"), ("x2", "x3")]]``
        for a time-homogeneous chain (members aligned axis by axis in the order written; see
        ``ppgm.models.tying``). The result is an ordinary network whose tied factors are equal.

    Examples
    --------
    >>> import ppgm.adapters as pa
    >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
    >>> rel = release_tables(pa.sample(mn, 2000, seed=1), mn, LaplaceMechanism(1.0), seed=2)
    >>> NaiveMLEEstimator(mn).estimate(rel).check_model(), NaiveMLEEstimator(mn).estimate(rel, l2="calibrated").check_model()
    (True, True)
    """

    def estimate(self, noisy_tables: NoisyTables, N: float | None = None, l2: float | str | None = None,
                 project: bool = True, seed=0, criterion: str = "kl") -> DiscreteMarkovNetwork:
        """Fit the network to the noisy tables treated as exact marginals.

        Parameters
        ----------
        noisy_tables : NoisyTables
            One table per clique of the model.
        N : float, optional
            The record count (default: the release's, or estimated from the tables' totals).
        l2 : float, "release", "paper" or "calibrated", optional
            L2 weight per record: by default chosen from the release by a parametric bootstrap
            (``ppgm.learners.cgm.release_l2``); ``"paper"`` for the paper's ``1 / N``; ``"calibrated"`` for one
            that grows with the noise (``ppgm.learners.cgm.noise_calibrated_l2``).
        project : bool
            Project each table onto the simplex first.
        seed : int or numpy.random.Generator
            Randomness of the release-based rule (same seed, same weight).
        criterion : {"kl", "tv"}
            What the release-based rule minimises on its simulated releases: KL to their truth
            (default), or the mean total variation of the released tables' marginals, when the fit
            is judged by workload error.

        Returns
        -------
        DiscreteMarkovNetwork
            With ``history_`` (the optimiser's objective), ``N_``, ``l2_`` (the weight used) and
            ``selection_`` (the release-based rule's criterion, or None) set on the estimator.

        Raises
        ------
        TypeError, ValueError
            Tables that are not a release of the model's cliques, bad ``N`` or ``l2``.

        Examples
        --------
        >>> import ppgm.adapters as pa
        >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
        >>> rel = release_tables(pa.sample(mn, 2000, seed=1), mn, LaplaceMechanism(1.0), seed=2)
        >>> sorted(map(sorted, NaiveMLEEstimator(mn).estimate(rel).edges()))[:2]
        [['X0', 'X1'], ['X0', 'X2']]
        """
        checks.flag(project, "project")
        dom, ms = self._inputs(noisy_tables)
        fit = naive_mle(dom, ms, N=N, l2=l2, project=project, tied=self.tied, seed=seed, criterion=criterion)
        self.history_ = fit.history
        self.l2_, self.selection_ = fit.l2, fit.selection
        self.N_ = population_size(ms) if N is None else float(N)
        return markov_to_pgmpy(fit.model)


class CGMEstimator(_NoisyTableEstimator):
    """EM for collective graphical models (Bernstein et al. 2017, Algorithm 2): learn the network's
    parameters from noisy tables by treating the true counts as latent.

    Parameters
    ----------
    model : DiscreteMarkovNetwork
        Its factors' scopes are the cliques; its declared states are kept in the result.
    tied : list of groups of cliques, optional
        Cliques that share one log-potential, e.g. ``[[("x0", "x1"), ("x1", "x2"), ("x2", "x3")]]``
        for a time-homogeneous chain (members aligned axis by axis in the order written; see
        ``ppgm.models.tying``). The result is an ordinary network whose tied factors are equal.

    Examples
    --------
    >>> import ppgm.adapters as pa
    >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
    >>> rel = release_tables(pa.sample(mn, 2000, seed=1), mn, LaplaceMechanism(1.0), seed=2)
    >>> est = CGMEstimator(mn)
    >>> est.estimate(rel, progress=False).check_model(), "objective" in est.history_[0]
    (True, True)
    """

    def estimate(self, noisy_tables: NoisyTables, N: float | None = None, l2: float | str | None = None, estep: str = "dual",
                 max_iter: int | None = None, tol: float = 1e-6, progress: bool = True, init_l2: float | None = None,
                 moment_match: bool = True, rtol: float | None = None, callback=None, stop: str = "release",
                 seed=0, accelerate: bool | None = None) -> DiscreteMarkovNetwork:
        """Run CGM-EM on the release (the arguments of :func:`ppgm.learners.cgm.cgm_em`, whose docstring gives the
        defaults and what they were measured against).

        Parameters
        ----------
        noisy_tables : NoisyTables
            One table per clique of the model.
        N : float, optional
            The record count (default: the release's, or estimated from the tables' totals).
        l2 : float or "release", optional
            M-step L2 weight per record (default: noise-aware); ``"release"`` with ``stop="converged"``:
            chosen from the release for EM run to convergence (``ppgm.learners.em_rules.release_mstep_l2``, opt-in).
        estep : {"dual", "nlbp"}
        max_iter, tol, rtol
            EM's stopping rule (defaults as :func:`ppgm.learners.cgm.cgm_em`'s: 30 and 1e-4, or 200 and 1e-4 with
            ``l2="release"``).
        progress : bool
        init_l2 : float or str, optional
            L2 weight of the starting naive fit (any ``l2`` of ``NaiveMLEEstimator.estimate``; default
            chosen from the release).
        moment_match : bool
        callback : callable, optional
            ``callback(iteration, network, record)`` with a pgmpy ``DiscreteMarkovNetwork``; raise
            ``StopIteration`` to stop.
        stop : {"release", "converged"}
            EM's iteration count chosen from the release (default), or EM run to ``tol`` / ``rtol``.
        seed : int or numpy.random.Generator
            Randomness of the release-based rules (same seed, same result).
        accelerate : bool, optional
            SQUAREM extrapolation of EM run to convergence (default off).

        Returns
        -------
        DiscreteMarkovNetwork
            With ``history_`` (per EM iteration; the last record says why EM stopped), ``N_``, ``l2_``
            (the M-step's L2 weight per record) and ``selection_`` (what the release-based rules chose:
            the naive start's weight under ``"l2"``, the iteration count under ``"iterations"``) set on
            the estimator.

        Raises
        ------
        TypeError, ValueError
            Tables that are not a release of the model's cliques, bad arguments.

        Examples
        --------
        >>> import ppgm.adapters as pa
        >>> mn = pa.dirichlet_chain_network(4, 2, seed=0)
        >>> rel = release_tables(pa.sample(mn, 2000, seed=1), mn, LaplaceMechanism(1.0), seed=2)
        >>> est = CGMEstimator(mn); _ = est.estimate(rel, max_iter=3, progress=False)
        >>> len(est.history_) <= 3, "stopped" in est.history_[-1]
        (True, True)
        """
        checks.flag(progress, "progress")
        checks.flag(moment_match, "moment_match")
        checks.callback(callback)
        dom, ms = self._inputs(noisy_tables)
        res = cgm_em(dom, ms, N=N, l2=l2, estep=estep, max_iter=max_iter, tol=tol, progress=progress,
                     init_l2=init_l2, moment_match=moment_match, rtol=rtol, tied=self.tied, stop=stop, seed=seed,
                     accelerate=accelerate,
                     callback=None if callback is None else (lambda i, m, rec: callback(i, markov_to_pgmpy(m), rec)))
        self.history_ = res.history
        self.selection_ = res.selection
        self.l2_ = res.l2
        self.N_ = res.N
        return markov_to_pgmpy(res.model)
