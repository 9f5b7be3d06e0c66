"""Exact sampling of records from Markov networks (along a calibrated junction tree) and Bayesian
networks (ancestral order). Both draw one categorical per record and table by inverse CDF on
row-offset cumulative sums: no Python loop over records and no (records x states) matrix."""

from __future__ import annotations

from typing import cast

import numpy as np

from ..core.rng import as_generator
from ..factors.records import cell_index
from ..models.bayes import BayesianNetwork
from ..models.markov import MarkovNetwork
from .junction_tree import Calibration, JunctionTree


def draw_rows(probs: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each entry r of ``rows``, draw a column index from the distribution ``probs[r]``.

    ``probs`` is (R, K) with non-negative rows (normalised here); returns an int array like ``rows``.

    Examples
    --------
    >>> draw_rows(np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([0, 1, 0]), np.random.default_rng(0)).tolist()
    [1, 0, 1]
    """
    R, K = probs.shape
    cum = np.cumsum(probs, axis=1)
    total = cum[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        cum = np.where(total > 0, cum / total, 1.0)
    flat = (cum + np.arange(R)[:, None]).ravel()
    u = rng.random(len(rows))
    pos = np.searchsorted(flat, rows + u, side="right")
    return np.clip(pos - rows * K, 0, K - 1)


def _calibrated(model: MarkovNetwork, calibration: Calibration | None) -> Calibration:
    return calibration if calibration is not None else JunctionTree.build(model.domain, model.scopes).calibrate(model)


def _given_separator(cal: Calibration, i: int) -> tuple:
    """Clique ``i``'s separator, its other variables, the axis order (separator first) and its joint
    table laid out as (separator cells, other cells): what drawing the clique given its parent needs."""
    t, dom = cal.tree, cal.tree.domain
    clique, sep = t.cliques[i], t.separators[i]
    rest = tuple(v for v in clique if v not in sep)
    perm = [clique.index(v) for v in sep + rest]
    p = np.exp(np.transpose(cal.log_beliefs[i], perm)).reshape(dom.size(sep), dom.size(rest))
    return sep, rest, perm, p


def sample_markov(
    model: MarkovNetwork,
    n: int,
    seed=None,
    calibration: Calibration | None = None,
) -> np.ndarray:
    """Draw ``n`` exact samples (an ``(n, len(domain))`` int array) from a Markov network.

    The root clique is drawn from its marginal, then each clique's remaining variables from their
    conditional given the separator already drawn.

    Parameters
    ----------
    model : MarkovNetwork
    n : int
    seed : int or numpy.random.Generator, optional
    calibration : Calibration, optional
        A calibration of ``model`` to reuse.

    Returns
    -------
    numpy.ndarray of int, shape (n, len(domain))

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> sample_markov(third_order_chain(5, 3, seed=0), 4, seed=1).shape
    (4, 5)
    """
    return _along_tree(model, n, as_generator(seed), calibration, draw_rows)


def _along_tree(model: MarkovNetwork, n: int, rng: np.random.Generator, calibration: Calibration | None, assign) -> np.ndarray:
    """Records built clique by clique from the root: ``assign(p, rows, rng)`` gives each record's
    state of the clique's other variables, from the (separator cells x other cells) joint ``p`` and
    the records' separator cells ``rows``."""
    n = _check_n(n, len(model.domain))
    cal = _calibrated(model, calibration)
    t, dom = cal.tree, model.domain
    out = np.zeros((n, len(dom)), dtype=np.int64)
    for i in t.order:
        sep, rest, _, p = _given_separator(cal, i)
        if not rest:
            continue
        rows = cell_index(out, dom.indices(sep), dom.shape(sep)) if sep else np.zeros(n, dtype=np.int64)
        flat = assign(p, rows, rng)
        out[:, dom.indices(rest)] = np.stack(np.unravel_index(flat, dom.shape(rest)), axis=1)
    return out


def largest_remainder(totals: np.ndarray, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per row g, integers summing to ``totals[g]`` as close as possible to ``totals[g] * probs[g]``:
    the floors, then one more for the largest remainders (ties broken at random).

    Examples
    --------
    >>> largest_remainder(np.array([10]), np.array([[0.26, 0.34, 0.4]]), np.random.default_rng(0)).tolist()
    [[3, 3, 4]]
    """
    target = totals[:, None] * _normalised(probs)
    base = np.floor(target).astype(np.int64)
    short = totals - base.sum(axis=1)
    order = np.argsort(-(target - base) - 1e-9 * rng.random(target.shape), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(target.shape[1])[None, :].repeat(target.shape[0], axis=0), axis=1)
    return base + (rank < short[:, None])


def round_markov(model: MarkovNetwork, n: int, seed=None, calibration: Calibration | None = None) -> np.ndarray:
    """``n`` records whose clique counts are the model's expected counts, rounded: private-pgm's
    "round" synthetic data. The root clique's counts are n times its marginal rounded by largest
    remainder; each later clique splits the records of every separator cell among its other states in
    proportion to its conditional, rounded the same way, in a random order. Unlike :func:`sample_markov`
    the measured cliques' tables carry no sampling noise (at most one record per cell off their
    expectation at the root), so a synthetic table is as close to the model as integers allow.

    Parameters
    ----------
    model : MarkovNetwork
    n : int
    seed : int or numpy.random.Generator, optional
        Breaks ties and pairs the records of one separator cell with their new states at random.
    calibration : Calibration, optional

    Returns
    -------
    numpy.ndarray of int, shape (n, len(domain))
        Records in random order.

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> m = third_order_chain(4, 2, seed=0)
    >>> x = round_markov(m, 1000, seed=1)
    >>> from ppgm.inference.marginals import infer
    >>> p = infer(m).marginal(["X0"]).values
    >>> bool(np.all(np.abs(np.bincount(x[:, 0], minlength=2) - 1000 * p) < 1))
    True
    """
    rng = as_generator(seed)
    out = _along_tree(model, n, rng, calibration, _rounded_rows)
    return out[rng.permutation(len(out))]


def _rounded_rows(p: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The records of every separator cell split among the other cells by largest remainder on the
    conditional, assigned in a random order."""
    n = rows.size
    shuffle = rng.permutation(n)
    by_cell = shuffle[np.argsort(rows[shuffle], kind="stable")]  # records grouped by separator cell, random within
    counts = largest_remainder(np.bincount(rows, minlength=p.shape[0]), p, rng)
    states = np.empty(n, dtype=np.int64)
    states[by_cell] = np.repeat(np.tile(np.arange(p.shape[1]), p.shape[0]), counts.ravel())  # states in cell order
    return states


def sample_clique_tables(model: MarkovNetwork, n: int, seed=None, calibration: Calibration | None = None) -> list:
    """The junction-tree clique count tables of ``n`` exact samples of ``model``, drawn without the
    records: the root clique's counts are multinomial on its marginal, and each child's given its
    parent's are, separator cell by separator cell, multinomial on the child's conditional (records are
    independent, and a child's other variables depend on the rest only through the separator). The
    same law as tabulating :func:`sample_markov`'s records, at a cost linear in the tables' cells
    rather than in n times the variables.

    Parameters
    ----------
    model : MarkovNetwork
    n : int
    seed : int or numpy.random.Generator, optional
    calibration : Calibration, optional
        A calibration of ``model`` to reuse (its tree's cliques are the tables').

    Returns
    -------
    list of numpy.ndarray of int64
        One table per clique of the calibration's tree (axes as its ``cliques``), each summing to n.

    Examples
    --------
    >>> from ppgm.models.random_models import third_order_chain
    >>> tables = sample_clique_tables(third_order_chain(5, 3, seed=0), 1000, seed=1)
    >>> [t.shape for t in tables], [int(t.sum()) for t in tables]
    ([(3, 3, 3, 3), (3, 3, 3, 3)], [1000, 1000])
    """
    n = _check_n(n)
    rng = as_generator(seed)
    cal = _calibrated(model, calibration)
    t = cast(JunctionTree, cal.tree)  # its levels: every calibration here is a junction tree's
    plan = t._plan()
    starts, sizes, shapes = plan["starts"], plan["sizes"], plan["shapes"]
    mu = cal.flat_beliefs
    counts = np.zeros(mu.size, dtype=np.int64)
    root = t.order[0]
    a, k = int(starts[root]), int(sizes[root])
    counts[a:a + k] = rng.multinomial(n, _normalised(mu[a:a + k][None, :])[0])
    for L in t._levels(centre=False).levels:  # root outwards: every child of one depth given its parent's counts
        at_sep = np.add.reduceat(counts[L.parent_cells], L.parent_seg)
        runs = np.diff(np.append(L.child_seg, L.child_cells.size))  # each separator cell's child cells
        for length in np.unique(runs):  # one multinomial call per run length
            which = np.flatnonzero(runs == length)
            cells = L.child_cells[L.child_seg[which][:, None] + np.arange(length)]
            counts[cells] = rng.multinomial(at_sep[which], _normalised(mu[cells]))
    return [counts[a:a + k].reshape(sh) for a, k, sh in zip(starts, sizes, shapes)]


def _normalised(p: np.ndarray) -> np.ndarray:
    """Rows of ``p`` scaled to sum to one (uniform where a row is all zero)."""
    total = p.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / p.shape[1])
    return out / out.sum(axis=1, keepdims=True)


def sample_bayes(model: BayesianNetwork, n: int, seed=None) -> np.ndarray:
    """Draw ``n`` samples from a Bayesian network by ancestral sampling (vectorised per node).

    Parameters
    ----------
    model : BayesianNetwork
    n : int
    seed : int or numpy.random.Generator, optional

    Returns
    -------
    numpy.ndarray of int, shape (n, len(domain))

    Examples
    --------
    >>> from ppgm.models.random_models import random_bayesian_network
    >>> sample_bayes(random_bayesian_network(4, seed=0), 3, seed=0).shape
    (3, 4)
    """
    n = _check_n(n, len(model.domain))
    rng = as_generator(seed)
    dom = model.domain
    out = np.zeros((n, len(dom)), dtype=np.int64)
    for v in model.order:
        ps = model.parents[v]
        table = model.cpts[v].reshape(dom.size(ps), dom.card(v))
        rows = cell_index(out, dom.indices(ps), dom.shape(ps))
        out[:, dom.index(v)] = draw_rows(table, rows, rng)
    return out


def sample(model, n: int, seed=None) -> np.ndarray:
    """Exact samples from a :class:`MarkovNetwork` or :class:`BayesianNetwork`.

    Parameters
    ----------
    model : MarkovNetwork or BayesianNetwork
    n : int
    seed : int or numpy.random.Generator, optional

    Returns
    -------
    numpy.ndarray of int, shape (n, len(domain))

    Examples
    --------
    >>> from ppgm.models.random_models import grid
    >>> sample(grid(2, 2, seed=0), 3, seed=0).shape
    (3, 4)
    """
    if isinstance(model, BayesianNetwork):
        return sample_bayes(model, n, seed)
    if isinstance(model, MarkovNetwork):
        return sample_markov(model, n, seed)
    raise TypeError(f"model: expected a ppgm MarkovNetwork or BayesianNetwork, got {type(model).__name__}")


MAX_CELLS = 10**9  # one call draws at most this many record cells (8 GB of int64 codes): draw more in batches


def _check_n(n, width: int | None = None) -> int:
    """A record count; with ``width`` (variables per record), at most ``MAX_CELLS`` cells in all."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n: expected a non-negative integer number of records, got {n!r}")
    if width is not None and int(n) * max(int(width), 1) > MAX_CELLS:
        raise ValueError(f"n: {int(n):,} records of {width} variables are {int(n) * width:,} cells, more than one call draws "
                         f"({MAX_CELLS:,}, 8 GB of codes); draw them in batches")
    if int(n) > 2**62:
        raise ValueError(f"n: expected at most 2**62 records, got {n!r}")
    return int(n)
