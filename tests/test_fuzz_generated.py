"""Generated malformed inputs for every public entry point of ``ppgm.adapters``: instead
of a list of cases someone thought of, each argument of each entry point in ``fuzz_cases.py`` (its
valid arguments and the wrapper's own keyword defaults) is replaced by a value drawn from a strategy
chosen by the valid value's type:

* DataFrames: a column renamed to another's name (duplicated names), inf / NaN / an unseen state in
  a column, a column cast to float, text, categories or booleans, an extra column, no rows or one row;
* reals: special floats (NaN, +-inf, -0.0, subnormal, 1e308), numpy scalars, numeric strings, booleans;
* whole numbers: 0, negatives, 2**63, 10**18, halves, numpy integers, strings;
* flags: strings, numbers, None, lists; strings and paths: text, directories, missing files, None;
* lists, tuples, dicts, arrays and models: empty, duplicated or unknown entries, the wrong kind.

DataFrames also get the classes of doubtful data of ``fuzz_cases.CLASSES`` (a column mixing kinds,
a missing value, a single row, a constant or a continuous column), drawn on a random column the
entry point reads; such a draw carries its class.

A drawn value may happen to be valid, so a call may succeed; what must never happen is an obscure
end (an exception other than a ``ValueError`` / ``TypeError`` raised by ppgm naming the argument, or
one from deep inside numpy or pandas), a change to the caller's objects, a call that runs away (each
call has a time limit), or a silent answer to a draw of a class the entry point does not accept.
Hypothesis runs derandomised, so CI draws the same examples every time; ``PPGM_FUZZ=long`` draws
more and at random.
"""

from __future__ import annotations

import inspect
import os
import signal
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_cases as fc

LONG = os.environ.get("PPGM_FUZZ") == "long"
EXAMPLES = 200 if LONG else 12
CALL_SECONDS = 60  # a call that takes longer has run away (valid calls here take well under a second or two)
ENTRIES = {e.name: e for e in fc.entries()}
# arguments whose drawn values are not malformed inputs of the entry point but the test harness's plumbing
SKIP = {("MaxEntClassifier.fit", "n_shards")}  # shards spawn processes: covered by the listed cases


class RunAway(Exception):
    pass


@contextmanager
def time_limit(seconds: int):
    def stop(signum, frame):
        raise RunAway(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def arguments(entry: fc.Entry) -> dict:
    """The entry point's arguments with their valid values: the builder's, then the wrapper's own
    keyword defaults (None defaults are left out: None is often the meaningful default)."""
    out = dict(entry.valid())
    try:
        params = inspect.signature(entry.call).parameters.values()
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.name not in out and p.default is not inspect.Parameter.empty and p.default is not None and p.kind is not p.VAR_KEYWORD:
            out[p.name] = p.default
    return {k: v for k, v in out.items() if (entry.name, k) not in SKIP}


# --- strategies by the type of the valid value ----------------------------------------------------

SPECIAL_FLOATS = [float("nan"), float("inf"), -float("inf"), -0.0, 5e-324, 1e308, -1.0, 0.0, np.float32(0.5), np.float64(2.0),
                  "1.0", True, None, [1.0]]
SPECIAL_INTS = [0, -1, -3, 2**63, 10**18, 2.5, float("nan"), np.int64(3), np.uint8(2), "3", True, None, [2]]
FLAGS = ["no", "yes", "", 0, 1, 2, None, [True], np.float64(1.0)]
TEXT = ["", " ", "x", "../x", "/", ".", "\x00", "é", None, 3, 2.5, True, ["x"], {"x": 1}]


class Labelled:
    """A drawn value of a class of doubtful data (``fuzz_cases.CLASSES``), with the column it touched."""

    def __init__(self, value, klass: str, column) -> None:
        self.value, self.klass, self.column = value, klass, column

    def __repr__(self) -> str:
        return f"{self.klass} in {self.column!r}"


def _class_mutations(df: pd.DataFrame, columns: list) -> st.SearchStrategy:
    def make(klass, c):
        return Labelled(fc.CLASSES[klass](df, c), klass, c)

    usable = [c for c in columns if df[c].notna().any()] or list(df.columns)
    return st.builds(make, st.sampled_from(sorted(fc.CLASSES)), st.sampled_from(usable))


def _frame_mutations(df: pd.DataFrame, columns: list | None = None) -> st.SearchStrategy:
    cols = list(df.columns)

    def duplicated(i, j):
        if len(cols) < 2:
            return df.copy()
        out = df.copy()
        names = list(cols)
        names[i % len(cols)] = names[j % len(cols)] if i % len(cols) != j % len(cols) else names[(j + 1) % len(cols)]
        out.columns = names
        return out

    def special(c, v, row):
        out = df.copy()
        col = cols[c % len(cols)]
        out[col] = out[col].astype(object)
        out.iloc[row % len(out), out.columns.get_loc(col)] = v
        return out

    def cast(c, kind):
        out = df.copy()
        col = cols[c % len(cols)]
        try:
            out[col] = {"float": lambda s: pd.to_numeric(s, errors="coerce").astype(float), "str": lambda s: s.astype(str),
                        "category": lambda s: s.astype("category"), "bool": lambda s: s.astype(bool),
                        "int8": lambda s: pd.to_numeric(s, errors="coerce").fillna(0).astype(np.int8)}[kind](out[col])
        except (TypeError, ValueError):
            pass
        return out

    def extra(name, v):
        out = df.copy()
        out[name] = v
        return out

    i = st.integers(0, 50)
    return st.one_of(
        st.builds(duplicated, i, i),
        st.builds(special, i, st.sampled_from([float("nan"), float("inf"), -float("inf"), None, "??", 10**9, -1, 1.5]), i),
        st.builds(cast, i, st.sampled_from(["float", "str", "category", "bool", "int8"])),
        st.builds(extra, st.sampled_from(["zz", "", "0", cols[0]]), st.sampled_from([0, "a", float("nan")])),
        st.sampled_from([df.iloc[:0], df.iloc[:1], df[cols[::-1]], df.reset_index(drop=True).T, df.to_numpy(), None, "data.csv"]),
        _class_mutations(df, columns if columns is not None else cols),
    )


def _path_mutations(path: str) -> st.SearchStrategy:
    folder = os.path.dirname(path)
    text = os.path.join(folder, "not_an_archive.npz")
    if not os.path.exists(text):
        with open(text, "w") as f:
            f.write("not an archive")
    return st.sampled_from([folder, os.path.join(folder, "missing.npz"), text, None, 3, "", os.path.join(folder, "a", "b.npz")])


def _list_mutations(value: list | tuple) -> st.SearchStrategy:
    items = list(value)
    kinds = [[], [None], items + items[:1], items + ["no such name"], [items], "".join(map(str, items)), None, {"x": 1}, 3]
    if items and isinstance(items[0], (list, tuple)):
        kinds += [[tuple(items[0]) + tuple(items[0])], [()], [tuple(items[0])[::-1] + ("??",)]]
    return st.sampled_from(kinds)


def _array_mutations(a: np.ndarray) -> st.SearchStrategy:
    return st.sampled_from([a.astype(float) + 0.5, a.T, a.ravel(), a[:0], -np.ones_like(a), np.full(a.shape, np.nan), a.astype(str),
                            a.astype(object), np.full(a.shape, 10**6), a.tolist(), None])


def _model_mutations(world: dict) -> st.SearchStrategy:
    return st.sampled_from([None, "model", world["df_chain"], world["asia"], world["chain"], world["onetwothree"], world["engine_chain"], 3])


def strategy(name: str, value, world: dict, columns: list | None = None) -> st.SearchStrategy:
    from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork

    if isinstance(value, pd.DataFrame):
        return _frame_mutations(value, columns)
    if isinstance(value, list) and value and isinstance(value[0], pd.DataFrame):  # sample sets: the first set mutated
        return _frame_mutations(value[0], columns).map(
            lambda v: Labelled([v.value] + value[1:], v.klass, v.column) if isinstance(v, Labelled) else [v] + value[1:])
    if isinstance(value, bool):
        return st.sampled_from(FLAGS)
    if isinstance(value, (int, np.integer)):
        return st.sampled_from(SPECIAL_INTS)
    if isinstance(value, (float, np.floating)):
        return st.sampled_from(SPECIAL_FLOATS)
    if isinstance(value, str):
        return _path_mutations(value) if value.endswith(".npz") else st.sampled_from(TEXT + [value.upper(), value * 2])
    if isinstance(value, np.ndarray):
        return _array_mutations(value)
    if isinstance(value, (list, tuple)):
        return _list_mutations(value)
    if isinstance(value, dict):
        return st.sampled_from([{}, {"no such name": 1}, {k: None for k in value}, {k: [v, v] for k, v in value.items()}, list(value), None, "x"])
    if isinstance(value, (DiscreteBayesianNetwork, DiscreteMarkovNetwork)) or hasattr(value, "domain"):
        return _model_mutations(world)
    return st.sampled_from([None, "x", 3, float("nan"), [value]])


CASES = [(name, arg) for name, e in ENTRIES.items() for arg in arguments(e)]


def test_every_public_name_has_generated_cases():
    """The generated cases reach every entry point the listed suite covers, and every argument."""
    names = {n for n, _ in CASES}
    assert names == set(ENTRIES)
    assert len(CASES) >= 2 * len(ENTRIES)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_generated_inputs_end_clearly_and_leave_the_inputs_alone(name):
    entry = ENTRIES[name]
    world = fc.world()
    args = arguments(entry)

    frames = entry.frames()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data):
        arg = data.draw(st.sampled_from(sorted(args)), label="argument")
        value = data.draw(strategy(arg, args[arg], world, frames.get(arg)), label="value")
        labelled = value if isinstance(value, Labelled) else None
        with time_limit(CALL_SECONDS):
            out = fc.run(entry, arg, labelled.value if labelled else value)
        assert not out.mutated, f"{name}: {arg}={out.value} changed the caller's objects"
        assert out.kind in ("clear", "warned", "silent"), f"{name}: {arg}={out.value}: {out.kind} {out.message}"
        if labelled is not None and not entry.accepted(labelled.klass, labelled.column) and labelled.column in frames.get(arg, ()):
            assert out.kind != "silent", f"{name}: {arg} with {labelled!r} was answered without a word"

    check()
