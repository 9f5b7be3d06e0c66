"""Numeric columns as discrete variables: public ranges cut into bins, values coded by bin, and codes
decoded back to numbers inside their bin.

A numeric column has a public range [lo, hi] and is either continuous or integer. Its bins are
unions of *cells* of a fine grid over the range; the cells carry the within-bin shape that decoding
draws from (weights per cell; uniform when none are known). For an integer column a cell is a run
of consecutive integers (bounds inclusive), and the range's two ends are cells of their own: values
clipped to a public bound, or top-coded by the publisher, pile up there, and decoding puts them back
exactly on the bound. A continuous cell is a half-open interval, the last one closed.

Everything here is public arithmetic on edges and codes: which edges are private (chosen from a
noisy histogram) is decided in :mod:`ppgm.privacy.private_bins`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: Cells of the fine grid at most (a column's within-bin shape has at most this resolution).
FINE_CELLS = 1024


def _check_range(lo, hi, integer: bool, name: str) -> tuple[float, float]:
    try:
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected numbers for min and max, got {lo!r} and {hi!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{name}: expected finite min < max, got min={lo!r}, max={hi!r}")
    if integer and (lo != round(lo) or hi != round(hi)):
        raise ValueError(f"{name}: an integer column needs whole-number min and max, got {lo!r} and {hi!r}")
    return lo, hi


def fine_grid(lo: float, hi: float, integer: bool, cells: int = FINE_CELLS) -> np.ndarray:
    """Boundaries of the fine grid over [lo, hi]: ``cells`` equal-width cells for a continuous
    column; for an integer column one cell per integer when they are at most ``cells``, otherwise
    the two ends as cells of their own and equal runs of integers between (boundaries are the first
    integer of each cell, then ``hi + 1``).

    Examples
    --------
    >>> fine_grid(0, 4, integer=True).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    >>> fine_grid(0, 99, integer=True, cells=6).tolist()
    [0.0, 1.0, 26.0, 50.0, 74.0, 99.0, 100.0]
    >>> fine_grid(0.0, 1.0, integer=False, cells=4).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    lo, hi = _check_range(lo, hi, integer, "range")
    cells = int(cells)
    if cells < (3 if integer else 1):
        raise ValueError(f"cells: expected at least {3 if integer else 1}, got {cells}")
    if not integer:
        return np.linspace(lo, hi, cells + 1)
    n = int(hi - lo) + 1
    if n <= cells:
        return np.arange(lo, hi + 2, dtype=float)
    inner = np.unique(np.round(np.linspace(lo + 1, hi, cells - 1)))  # runs over lo + 1 .. hi - 1
    return np.concatenate([[lo], inner, [hi + 1]]).astype(float)


def bin_labels(edges: np.ndarray, integer: bool) -> list[str]:
    """State names of the bins between ``edges``: ``"[a, b)"`` (the last ``"[a, b]"``) for a
    continuous column, ``"a-b"`` (or ``"a"`` for one value) for an integer column, whose edges are
    the first integer of each bin then ``hi + 1``. Numbers are written with the fewest significant
    digits (four at least) that keep every edge distinct.

    Examples
    --------
    >>> bin_labels(np.array([0.0, 2.5, 10.0]), integer=False)
    ['[0, 2.5)', '[2.5, 10]']
    >>> bin_labels(np.array([0.0, 1.0, 18.0, 91.0]), integer=True)
    ['0', '1-17', '18-90']
    """
    e = np.asarray(edges, dtype=float)
    for digits in range(4, 18):
        def fmt(x: float) -> str:
            return str(int(x)) if x == round(x) and abs(x) < 1e15 else f"{x:.{digits}g}"

        written = [fmt(x) for x in e]
        if len(set(written)) < len(written):
            continue  # two edges read alike: more digits
        if integer:
            return [fmt(a) if b - a == 1 else f"{fmt(a)}-{fmt(b - 1)}" for a, b in zip(e[:-1], e[1:])]
        return [f"[{a}, {b})" for a, b in zip(written[:-2], written[1:-1])] + [f"[{written[-2]}, {written[-1]}]"]
    raise ValueError(f"edges: bins too narrow to tell apart in text: {e.tolist()}")  # pragma: no cover - 17 digits suffice


@dataclass(frozen=True)
class NumericBins:
    """A numeric column's bins over its public range, and the within-bin shape decoding draws from.

    Parameters
    ----------
    lo, hi : float
        The public range; values outside it are clipped into it.
    edges : numpy.ndarray
        Bin boundaries, increasing, from ``lo`` to ``hi`` (integer columns: to ``hi + 1``, each
        boundary the first integer of its bin).
    integer : bool
        Whole numbers only.
    cells : numpy.ndarray, optional
        Boundaries of the fine cells (every bin edge is one of them); default the bins themselves.
    weights : numpy.ndarray, optional
        Non-negative mass of each fine cell: the within-bin shape (default uniform).

    Examples
    --------
    >>> b = NumericBins.equal_width(0, 10, 2)
    >>> b.labels, b.codes(np.array([-1.0, 4.0, 5.0, 12.0, np.nan])).tolist()
    (['[0, 5)', '[5, 10]'], [0, 0, 1, 1, -1])
    """

    lo: float
    hi: float
    edges: np.ndarray
    integer: bool = False
    cells: np.ndarray = field(default=None)  # type: ignore[arg-type]  # None: the bins' edges
    weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        lo, hi = _check_range(self.lo, self.hi, self.integer, "range")
        top = hi + 1 if self.integer else hi
        edges = np.asarray(self.edges, dtype=float)
        if edges.ndim != 1 or edges.size < 2 or not np.all(np.isfinite(edges)) or np.any(np.diff(edges) <= 0):
            raise ValueError(f"edges: expected at least two finite, increasing edges, got {edges.tolist()}")
        if edges[0] != lo or edges[-1] != top:
            raise ValueError(f"edges: expected the first edge at min ({lo:g}) and the last at {'max + 1' if self.integer else 'max'} "
                             f"({top:g}), got {edges[0]:g} and {edges[-1]:g}")
        if self.integer and np.any(edges != np.round(edges)):
            raise ValueError(f"edges: an integer column's edges are whole numbers, got {edges.tolist()}")
        cells = edges if self.cells is None else np.asarray(self.cells, dtype=float)
        if cells[0] != lo or cells[-1] != top or np.any(np.diff(cells) <= 0) or not np.isin(edges, cells).all():
            raise ValueError("cells: expected increasing boundaries from min to max that include every bin edge")
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=float)
            if w.shape != (cells.size - 1,) or np.any(~np.isfinite(w)) or np.any(w < 0):
                raise ValueError(f"weights: expected {cells.size - 1} finite non-negative cell masses, got shape {w.shape}")
            object.__setattr__(self, "weights", w)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "cells", cells)

    @classmethod
    def equal_width(cls, lo: float, hi: float, bins: int, integer: bool = False) -> "NumericBins":
        """``bins`` bins of equal width over [lo, hi] (integer columns: equal runs of integers, at
        most one bin per integer).

        Examples
        --------
        >>> NumericBins.equal_width(1, 10, 3, integer=True).labels
        ['1-3', '4-7', '8-10']
        """
        lo, hi = _check_range(lo, hi, integer, "range")
        bins = int(bins)
        if bins < 1:
            raise ValueError(f"bins: expected a positive number of bins, got {bins}")
        if integer:
            edges = np.unique(np.round(np.linspace(lo, hi + 1, min(bins, int(hi - lo) + 1) + 1)))
        else:
            edges = np.linspace(lo, hi, bins + 1)
        return cls(lo, hi, edges, integer)

    @property
    def labels(self) -> list[str]:
        """The bins' state names (:func:`bin_labels`)."""
        return bin_labels(self.edges, self.integer)

    @property
    def n_bins(self) -> int:
        """The number of bins."""
        return int(self.edges.size - 1)

    def clip(self, x: np.ndarray) -> np.ndarray:
        """Values clipped into the public range (integer columns also rounded); NaN stays NaN."""
        x = np.clip(np.asarray(x, dtype=float), self.lo, self.hi)
        return np.round(x) if self.integer else x

    def codes(self, x: np.ndarray, boundaries: np.ndarray | None = None) -> np.ndarray:
        """The bin (or, with ``boundaries``, the cell) of each value after clipping; -1 for NaN.

        Examples
        --------
        >>> NumericBins.equal_width(0, 9, 2, integer=True).codes(np.array([4.6, 5.0])).tolist()
        [1, 1]
        """
        b = self.edges if boundaries is None else boundaries
        x = self.clip(x)
        nan = np.isnan(x)
        got = np.searchsorted(b[1:-1], np.where(nan, self.lo, x), side="right")
        return np.where(nan, -1, got).astype(np.int64)

    def cell_codes(self, x: np.ndarray) -> np.ndarray:
        """The fine cell of each value (see :meth:`codes`)."""
        return self.codes(x, self.cells)

    def draw(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Numbers for bin codes: a fine cell of the bin drawn by its weight (uniform over the
        bin's width when it has none), then a point uniformly inside the cell (an integer among
        the cell's integers). Never outside [lo, hi]. Vectorised over the codes.

        Examples
        --------
        >>> b = NumericBins(0, 9, np.array([0.0, 5.0, 10.0]), integer=True, cells=np.array([0.0, 1.0, 5.0, 10.0]),
        ...                 weights=np.array([1.0, 0.0, 1.0]))
        >>> v = b.draw(np.array([0] * 1000 + [1] * 1000), np.random.default_rng(0))
        >>> sorted(set(v[:1000].tolist())), bool(v[1000:].min() >= 5), bool(v.max() <= 9)
        ([0.0], True, True)
        """
        codes = np.asarray(codes, dtype=np.int64)
        cells = self.cells
        width = np.diff(cells)
        w = self.weights if self.weights is not None else width.copy()
        first = np.searchsorted(cells, self.edges[:-1])  # each bin's first and one-past-last cell
        last = np.searchsorted(cells, self.edges[1:])
        bin_of_cell = np.repeat(np.arange(self.n_bins), last - first)
        totals = np.bincount(bin_of_cell, weights=w, minlength=self.n_bins)
        w = np.where(totals[bin_of_cell] > 0, w, width)  # a bin whose cells carry no mass: uniform over its width
        cum = np.cumsum(w)
        start = np.concatenate([[0.0], cum])[first]
        span = cum[last - 1] - start
        u = start[codes] + rng.random(codes.size) * span[codes]
        cell = np.clip(np.searchsorted(cum, u, side="right"), first[codes], last[codes] - 1)
        if self.integer:
            return cells[cell] + np.floor(rng.random(codes.size) * width[cell])
        return np.minimum(cells[cell] + rng.random(codes.size) * width[cell], self.hi)
