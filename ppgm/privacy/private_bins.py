"""Private bins for numeric columns: the bins, and the shape inside them, read from a noisy fine
histogram, so that what the release discloses about a column's values is what that histogram's
noise already paid for.

One noisy histogram over the column's fine grid (:func:`ppgm.factors.bins.fine_grid`), released
like any other table, serves twice, both times as post-processing:

- the bin edges: cells grouped left to right into bins of about equal noisy mass (a cell holding
  more than a bin's share, such as a point mass at a bound, is a bin of its own);
- the within-bin shape that decoding draws numbers from: each cell's noisy count, less one noise
  standard deviation and clipped at zero (noise on empty cells would otherwise spread mass where the
  data has none).

The number of bins, where the user gives none, follows the release's precision by a stated rule
(:func:`bin_count`).
"""

from __future__ import annotations

import math

import numpy as np

from ..factors.bins import NumericBins

#: The bin-count rule's constants (:func:`bin_count`): bins = SCALE * (n * sqrt(rho)) ** POWER, clipped.
#: SCALE chosen among 0.25, 0.5, 1 and 2 on diamonds and the RAND HIE extract (MST, rho 0.05 and 0.5,
#: two seeds: 1 was best or tied on both) and checked on Adult, held out (within 0.0006 of 2-way TV of
#: the best there): ``python benchmarks/bench_numeric.py``.
SCALE, POWER = 1.0, 0.4
MIN_BINS, MAX_BINS = 4, 64


def bin_count(n: float, rho: float) -> int:
    """Bins of a numeric column, where none are given: more bins as records and budget grow,
    ``SCALE * (n * sqrt(rho)) ** POWER`` clipped to ``MIN_BINS .. MAX_BINS``. ``n * sqrt(rho)`` is
    the records per unit of noise of a table released at ``rho``; ``n`` must itself be public or
    private (a noisy count), never the exact record count of private data.

    Parameters
    ----------
    n : float
        Record count (noisy or public).
    rho : float
        zCDP budget of the release's tables.

    Returns
    -------
    int

    Examples
    --------
    >>> bin_count(30_000, 0.5), bin_count(30_000, 0.005), bin_count(100, 0.005)
    (54, 21, 4)
    """
    s = max(float(n), 1.0) * math.sqrt(max(float(rho), 0.0))
    return int(min(MAX_BINS, max(MIN_BINS, round(SCALE * s ** POWER))))


def equal_mass_edges(cells: np.ndarray, mass: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin edges among the fine ``cells`` boundaries that group the cells left to right into at most
    ``n_bins`` bins of about equal ``mass`` (non-negative): each bin takes the cells up to its share
    of the mass left, so a cell heavier than a share is a bin of its own and the rest is split
    among the bins left. A loop over bins, not over cells.

    Parameters
    ----------
    cells : numpy.ndarray
        Boundaries of the fine cells.
    mass : numpy.ndarray
        Non-negative mass of each cell.
    n_bins : int

    Returns
    -------
    numpy.ndarray
        Edges, from ``cells[0]`` to ``cells[-1]``.

    Examples
    --------
    >>> equal_mass_edges(np.arange(6.0), np.array([1, 1, 1, 1, 0.0]), 2).tolist()
    [0.0, 2.0, 5.0]
    >>> equal_mass_edges(np.arange(6.0), np.array([10, 1, 1, 1, 1.0]), 3).tolist()   # the heavy cell alone
    [0.0, 1.0, 3.0, 5.0]
    """
    cells = np.asarray(cells, dtype=float)
    m = np.maximum(np.asarray(mass, dtype=float), 0.0)
    cum = np.cumsum(m)
    total, k = float(cum[-1]), m.size
    cuts = [0]
    pos, left = 0, int(n_bins)
    while left > 1 and pos < k:
        before = cum[pos - 1] if pos else 0.0
        target = before + (total - before) / left
        j = max(int(np.searchsorted(cum, target * (1 - 1e-12), side="left")), pos)
        if j >= k - 1:
            break
        cuts.append(j + 1)
        pos, left = j + 1, left - 1
    cuts.append(k)
    return cells[np.unique(cuts)]


def bins_from_histogram(lo: float, hi: float, integer: bool, cells: np.ndarray, noisy: np.ndarray, sigma: float,
                        n_bins: int | None = None, edges: np.ndarray | None = None) -> NumericBins:
    """A column's bins and within-bin shape from its noisy fine histogram (post-processing).

    Parameters
    ----------
    lo, hi : float
        The public range.
    integer : bool
    cells : numpy.ndarray
        Boundaries of the fine cells the histogram counted.
    noisy : numpy.ndarray
        The noisy count of each cell.
    sigma : float
        The noise's standard deviation per cell.
    n_bins : int, optional
        Bins chosen by equal noisy mass (when ``edges`` is not given).
    edges : numpy.ndarray, optional
        Public edges (each among ``cells``): only the shape is read from the histogram.

    Returns
    -------
    ppgm.factors.bins.NumericBins

    Examples
    --------
    >>> cells = np.arange(0.0, 11.0)                 # the integers 0 .. 9
    >>> noisy = np.array([50, 0, 0, 10, 10, 10, 10, 0, 0, 0.0])
    >>> b = bins_from_histogram(0, 9, True, cells, noisy, sigma=1.0, n_bins=3)
    >>> b.labels
    ['0', '1-4', '5-9']
    """
    noisy = np.asarray(noisy, dtype=float)
    shape = np.maximum(noisy - float(sigma), 0.0)
    if edges is None:
        if n_bins is None:
            raise ValueError("n_bins: give a bin count or the public edges")
        edges = equal_mass_edges(cells, np.maximum(noisy, 0.0), n_bins)
    return NumericBins(lo, hi, np.asarray(edges, dtype=float), integer, cells=cells, weights=shape)
