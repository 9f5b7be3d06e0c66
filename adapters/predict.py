"""Scoring records with a fitted network, in pgmpy's idiom: the posterior of every missing column
(:func:`predict_probability`), its most probable state (:func:`predict`) and the holes filled
(:func:`impute`), for every row of a DataFrame at once by :meth:`LogBeliefPropagation.query_rows`.
"""

from __future__ import annotations

import warnings
from typing import Hashable, Sequence

import numpy as np
import pandas as pd
from pgmpy.models import DiscreteBayesianNetwork, DiscreteMarkovNetwork

from ppgm.core import checks
from ppgm.core.rng import as_generator
from ppgm.inference.evidence import row_marginals

from .dask_backend import is_dask
from .data import check_frame
from .inference import CHUNK_ROWS, LogBeliefPropagation

_MIX = np.uint64(0x9E3779B97F4A7C15)


def _engine(model) -> LogBeliefPropagation:
    if isinstance(model, LogBeliefPropagation):
        return model
    if not isinstance(model, (DiscreteBayesianNetwork, DiscreteMarkovNetwork)):
        raise TypeError(f"model: expected a pgmpy DiscreteBayesianNetwork or DiscreteMarkovNetwork, got {type(model).__name__}")
    return LogBeliefPropagation(model)


def _checked(bp: LogBeliefPropagation, data) -> None:
    check_frame(data, "data", dask=True)
    extra = [c for c in data.columns if c not in bp.domain]
    if extra:
        raise ValueError(f"data: columns {extra} are not variables of the model; its variables are {list(bp.domain.variables)}")


def _targets(bp: LogBeliefPropagation, data, variables) -> list:
    """The variables to predict: those given, else every model variable absent from the columns and
    every column with an empty cell (in the model's order)."""
    if variables is not None:
        names = [variables] if isinstance(variables, (str, bytes)) or not isinstance(variables, (list, tuple)) else list(variables)
        return list(bp.domain.check(checks.names(names, "variables"), "variables"))
    if is_dask(data):
        holes = set(data.columns[np.asarray(data.isna().any().compute())]) if len(data.columns) else set()
    else:
        holes = set(data.columns[data.isna().any().to_numpy()])
    return [v for v in bp.domain.variables if v not in data.columns or v in holes]


def predict_probability(model, data, variables: Sequence[Hashable] | None = None):
    """P(state | the row's observed cells) of every state of every missing variable, row by row, as
    pgmpy's ``predict_probability`` (columns ``f"{variable}_{state}"``), but exact for every row at once
    on the junction tree (see :meth:`LogBeliefPropagation.query_rows`) and with empty cells allowed.

    Parameters
    ----------
    model : DiscreteBayesianNetwork, DiscreteMarkovNetwork or LogBeliefPropagation
        (a ``LogBeliefPropagation`` is reused: its junction tree is built once).
    data : pandas.DataFrame or dask.dataframe.DataFrame
        Columns among the model's variables; an empty cell is unobserved.
    variables : list, optional
        The variables to report (default: those absent from ``data`` and the columns with an empty cell).

    Returns
    -------
    pandas.DataFrame or dask.dataframe.DataFrame
        Indexed like ``data``; an observed cell's variable has the indicator of its value.

    Raises
    ------
    ValueError
        Columns that are not model variables, values that are not states.

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> bn = load_bif_example("asia")
    >>> rows = pd.DataFrame({"smoke": ["yes", None], "xray": ["yes", "no"], "dysp": ["yes", None]})
    >>> predict_probability(bn, rows, ["lung"]).round(4)
       lung_yes  lung_no
    0    0.7237   0.2763
    1    0.0012   0.9988
    """
    bp = _engine(model)
    _checked(bp, data)
    names = _targets(bp, data, variables)
    if not names:
        raise ValueError("data: no variable is missing; nothing to predict")
    out = bp.query_rows(data, names)
    flat = [f"{v}_{s}" for v, s in out.columns]
    if is_dask(out):
        return out.map_partitions(_flatten, flat, meta=pd.DataFrame(np.zeros((0, len(flat))), columns=flat, index=data._meta.index))
    return _flatten(out, flat)


def _flatten(frame: pd.DataFrame, names: list) -> pd.DataFrame:
    out = frame.copy()
    out.columns = names
    out.attrs = dict(frame.attrs)
    return out


def _fill(bp: LogBeliefPropagation, part: pd.DataFrame, names: list, method: str, key: int | None, offset: int,
          chunk_rows: int = CHUNK_ROWS) -> pd.DataFrame:
    """``part`` with the variables ``names`` (added when absent) filled where empty: each cell's most probable
    state (``"mode"``) or a draw from the row's joint posterior of its empty cells (``"sample"``, by the
    chain rule over the variables in the model's order, the uniforms keyed by ``key`` and the row's
    position ``offset + i``, so that a row's draw does not depend on how the rows are partitioned)."""
    dom = bp.domain
    states = dom.state_names
    out = part.copy()
    for v in names:
        if v not in out.columns:
            out[v] = pd.Series([None] * len(out), index=out.index, dtype=object)
    tree, psi = bp._tree_for([])
    for a in range(0, len(part), chunk_rows):
        codes = bp._row_codes(part.iloc[a:a + chunk_rows])
        wanted = np.array([v in names for v in dom.variables])
        holes = (codes < 0) & wanted[None, :]
        if not holes.any():
            continue
        filled = codes.copy()
        bad = np.zeros(len(codes), bool)
        if method == "mode":
            js = [j for j in range(len(dom)) if holes[:, j].any()]
            lz, ms = row_marginals(tree, psi, codes, [(dom.variables[j],) for j in js])
            bad |= ~np.isfinite(lz)
            for j, m in zip(js, ms):
                pick = np.argmax(np.nan_to_num(m, nan=-1.0), axis=1)  # ties: the first state in the model's order
                filled[:, j] = np.where(holes[:, j], pick, filled[:, j])
        else:
            u = _uniforms(key, offset + a, len(codes), len(dom))
            for j in range(len(dom)):
                rows = np.flatnonzero(holes[:, j] & ~bad)
                if not rows.size:
                    continue
                lz, (m,) = row_marginals(tree, psi, filled[rows], [(dom.variables[j],)])
                ok = np.isfinite(lz)
                bad[rows[~ok]] = True
                cdf = np.cumsum(np.where(ok[:, None], m, 1.0), axis=1)
                draw = np.minimum((u[rows, j][:, None] * cdf[:, -1:] >= cdf).sum(axis=1), dom.cards[j] - 1)
                filled[rows[ok], j] = draw[ok]
        if bad.any():
            warnings.warn(f"data: {int(bad.sum())} of {len(codes)} rows have observed cells of probability zero under the "
                          "model; their empty cells stay empty", RuntimeWarning, stacklevel=4)
        for j in np.flatnonzero(holes.any(axis=0)):
            v = dom.variables[j]
            col = np.asarray(states[v], dtype=object)[np.maximum(filled[:, j], 0)]
            col[holes[:, j] & bad] = None
            rows = np.flatnonzero(holes[:, j])
            target = out[v].astype(object) if out[v].dtype != object else out[v]
            target.iloc[a + rows] = col[rows]
            out[v] = _as_written(target, states[v])
    return out


def _as_written(col: pd.Series, states) -> pd.Series:
    """A filled column back in its states' type when every value is a state (ints stay ints)."""
    if col.isna().any():
        return col
    try:
        return col.astype(pd.Series(list(states)).dtype)
    except (TypeError, ValueError):
        return col


def _uniforms(key: int | None, offset: int, n: int, d: int) -> np.ndarray:
    """``(n, d)`` uniforms in [0, 1) for rows ``offset .. offset + n - 1``: a SplitMix64 hash of ``key``
    and the cell's position, so that a row's uniforms depend on its position alone."""
    with np.errstate(over="ignore"):
        z = np.uint64(key or 0) * _MIX + (np.arange(offset * d, (offset + n) * d, dtype=np.uint64) + np.uint64(1)) * _MIX
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(11)).astype(np.float64) / float(2**53)).reshape(n, d)


def _seed_key(seed) -> int:
    """The uniforms' key: one draw from ``seed``'s generator (the same seed, the same key)."""
    return int(as_generator(seed).integers(2**63))


def _complete(bp: LogBeliefPropagation, data, names: list, method: str, seed):
    key = _seed_key(seed) if method == "sample" else None
    if not is_dask(data):
        return _fill(bp, data, names, method, key, 0)
    meta = _fill(bp, data._meta, names, method, key, 0)
    lengths = np.concatenate([[0], np.cumsum(data.map_partitions(len).compute().to_numpy())])

    def part(frame: pd.DataFrame, partition_info=None) -> pd.DataFrame:
        number = partition_info["number"] if partition_info else 0
        return _fill(bp, frame, names, method, key, int(lengths[number]))

    return data.map_partitions(part, meta=meta)


def predict(model, data, variables: Sequence[Hashable] | None = None):
    """The most probable state of each missing variable in every row, as pgmpy's ``predict``: ``data``
    with the variables absent from it added and every empty cell filled.

    Each cell gets the argmax of its own posterior marginal given the row's observed cells (exact, from
    :meth:`LogBeliefPropagation.query_rows`); a tie goes to the first state in the model's order. It is
    the per-column MAP: pgmpy 1.1.2's ``predict`` asks ``map_query`` for the joint mode of all of a row's
    missing variables, which can differ where the marginal modes do not form the joint one. A row of
    impossible evidence keeps its holes (see :meth:`LogBeliefPropagation.query_rows`).

    Parameters
    ----------
    model : DiscreteBayesianNetwork, DiscreteMarkovNetwork or LogBeliefPropagation
    data : pandas.DataFrame or dask.dataframe.DataFrame
    variables : list, optional
        The variables to fill (default: those absent and the columns with an empty cell).

    Returns
    -------
    pandas.DataFrame or dask.dataframe.DataFrame
        A copy of ``data`` (its columns, then the added variables), indexed like it.

    Raises
    ------
    ValueError
        Columns that are not model variables, values that are not states.

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> rows = pd.DataFrame({"smoke": ["yes", "no"], "xray": ["yes", "no"]})
    >>> predict(load_bif_example("asia"), rows, ["lung", "bronc"])
      smoke xray lung bronc
    0   yes  yes  yes   yes
    1    no   no   no    no
    """
    bp = _engine(model)
    _checked(bp, data)
    return _complete(bp, data, _targets(bp, data, variables), "mode", None)


def impute(model, data, method: str = "mode", seed=None):
    """``data`` with every empty cell filled from the model given the row's observed cells.

    ``"mode"``: each cell's most probable state (the argmax of its exact posterior marginal; ties to the
    first state in the model's order), as :func:`predict`. ``"sample"``: one draw from the row's joint
    posterior of its empty cells (the chain rule over the variables in the model's order, each an exact
    posterior from :meth:`LogBeliefPropagation.query_rows`'s engine given the observed cells and the
    cells drawn so far): a proper multiple imputation. Draws depend on ``seed`` and on the row's position
    only, so a Dask DataFrame gives the same values as the same rows in memory.

    Parameters
    ----------
    model : DiscreteBayesianNetwork, DiscreteMarkovNetwork or LogBeliefPropagation
    data : pandas.DataFrame or dask.dataframe.DataFrame
        Columns among the model's variables (variables absent from it are summed out, not added).
    method : {"mode", "sample"}
    seed : int, numpy.random.Generator or None
        For ``"sample"``.

    Returns
    -------
    pandas.DataFrame or dask.dataframe.DataFrame
        A copy of ``data``, same columns and index, holes filled (kept where the row is impossible).

    Raises
    ------
    ValueError
        An unknown method, columns that are not model variables, values that are not states.

    Examples
    --------
    >>> from ppgm.adapters import load_bif_example
    >>> rows = pd.DataFrame({"smoke": ["yes", None], "lung": [None, "yes"]})
    >>> impute(load_bif_example("asia"), rows)
      smoke lung
    0   yes   no
    1   yes  yes
    >>> impute(load_bif_example("asia"), rows, "sample", seed=0).isna().sum().sum()
    np.int64(0)
    """
    if method not in ("mode", "sample"):
        raise ValueError(f"method: expected 'mode' or 'sample', got {method!r}")
    bp = _engine(model)
    _checked(bp, data)
    return _complete(bp, data, [v for v in bp.domain.variables if v in data.columns], method, seed)
