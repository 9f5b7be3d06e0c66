"""Numeric bins (ppgm.factors.bins) and private bins (ppgm.privacy.private_bins): codes against pandas' cut,
decoding inside the bin with the measured shape, equal-mass edges against brute force, and the bins' sensitivity."""

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm.factors.bins import NumericBins, bin_labels, fine_grid
from ppgm.privacy.private_bins import bin_count, bins_from_histogram, equal_mass_edges


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 0.99), min_size=1, max_size=6, unique=True), st.integers(0, 10**6))
def test_codes_match_pandas_cut_and_clip_into_the_range(inner, seed):
    edges = np.concatenate([[0.0], np.sort(inner), [1.0]])
    b = NumericBins(0.0, 1.0, edges)
    x = np.random.default_rng(seed).uniform(-0.5, 1.5, 500)
    ref = np.asarray(pd.cut(np.clip(x, 0, 1), edges, right=False, labels=False), dtype=float)
    ref[np.clip(x, 0, 1) == 1.0] = len(edges) - 2  # the last bin is closed
    assert np.array_equal(b.codes(x), ref.astype(int))
    assert b.codes(np.array([np.nan])).tolist() == [-1]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 50), st.integers(1, 3000), st.integers(1, 12), st.booleans(), st.integers(0, 10**6))
def test_draw_stays_in_its_bin_and_in_the_range(lo, width, bins, integer, seed):
    hi = lo + width
    rng = np.random.default_rng(seed)
    cells = fine_grid(lo, hi, integer, cells=64)
    b = bins_from_histogram(lo, hi, integer, cells, rng.poisson(5, cells.size - 1).astype(float), 1.0, n_bins=bins)
    codes = rng.integers(0, b.n_bins, 2000)
    x = b.draw(codes, rng)
    assert x.min() >= lo and x.max() <= hi
    assert np.array_equal(b.codes(x), codes)  # decoded inside the bin it came from
    if integer:
        assert np.array_equal(x, np.round(x))


def test_draw_follows_the_within_bin_weights():
    cells = np.array([0.0, 1.0, 2.0, 4.0])
    b = NumericBins(0.0, 4.0, np.array([0.0, 4.0]), cells=cells, weights=np.array([1.0, 0.0, 3.0]))
    x = b.draw(np.zeros(40_000, dtype=int), np.random.default_rng(0))
    share = np.bincount(b.cell_codes(x), minlength=3) / x.size
    assert abs(share[0] - 0.25) < 0.01 and share[1] == 0 and abs(share[2] - 0.75) < 0.01
    # within a cell: uniform (mean of the last cell's values is its midpoint)
    assert abs(x[x >= 2].mean() - 3.0) < 0.02


def test_a_bin_without_mass_decodes_uniformly_and_integer_ends_are_exact():
    b = NumericBins(0, 9, np.array([0.0, 1.0, 10.0]), integer=True, cells=np.array([0.0, 1.0, 5.0, 10.0]),
                    weights=np.array([2.0, 0.0, 0.0]))
    x = b.draw(np.array([0] * 100 + [1] * 9000), np.random.default_rng(1))
    assert set(x[:100].tolist()) == {0.0}  # the bound's own cell: exactly the bound
    counts = np.bincount(x[100:].astype(int), minlength=10)[1:]
    assert counts.min() > 800  # 1 .. 9 uniform: 1,000 each


def test_fine_grid_keeps_the_ends_as_cells_of_their_own():
    g = fine_grid(0, 99_999, integer=True, cells=1024)
    assert g[0] == 0 and g[1] == 1 and g[-2] == 99_999 and g[-1] == 100_000
    assert np.all(np.diff(g) >= 1) and g.size <= 1025
    assert fine_grid(17, 90, integer=True).tolist() == list(range(17, 92))


def test_equal_mass_edges_against_brute_force():
    """The greedy grouping is, among all groupings into at most k bins, one whose heaviest bin is no
    heavier than a share of the mass plus the heaviest single cell (checked on every 8-cell example)."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        m = rng.integers(0, 20, 8).astype(float)
        m[rng.integers(0, 8)] += rng.integers(0, 80)
        k = int(rng.integers(2, 5))
        cells = np.arange(9.0)
        edges = equal_mass_edges(cells, m, k)
        assert edges[0] == 0 and edges[-1] == 8 and 2 <= edges.size <= k + 1 and np.all(np.isin(edges, cells))
        got = max(m[int(a):int(b)].sum() for a, b in zip(edges[:-1], edges[1:]))
        best = min(max(m[a:b].sum() for a, b in zip((0,) + c, c + (8,)))
                   for r in range(k) for c in itertools.combinations(range(1, 8), r))
        assert got <= max(best, m.sum() / k + m.max())


def test_a_point_mass_gets_a_bin_of_its_own():
    cells = fine_grid(0, 99_999, integer=True, cells=64)
    mass = np.ones(cells.size - 1)
    mass[0] = 900.0  # zeros: most of the records
    b = bins_from_histogram(0, 99_999, True, cells, mass, 0.0, n_bins=6)
    assert b.labels[0] == "0" and b.n_bins == 6


def test_labels_are_distinct_where_four_digits_are_not():
    assert bin_labels(np.array([100_000.0, 100_001.0, 100_002.0]), integer=False) == ["[100000, 100001)", "[100001, 100002]"]
    assert bin_labels(np.array([0.12341, 0.12342, 0.5]), integer=False) == ["[0.12341, 0.12342)", "[0.12342, 0.5]"]


def test_bin_count_rule_is_monotone_and_clipped():
    counts = [bin_count(n, rho) for n in (10, 1_000, 30_000, 10**6) for rho in (0.005, 0.5, 50)]
    assert min(counts) >= 4 and max(counts) <= 64
    assert bin_count(30_000, 0.05) <= bin_count(30_000, 0.5) <= bin_count(30_000, 5)
    assert bin_count(1_000, 0.5) <= bin_count(30_000, 0.5)


def test_bad_bins_are_refused_by_name():
    with pytest.raises(ValueError, match="edges"):
        NumericBins(0, 1, np.array([0.0, 0.5]))  # does not reach max
    with pytest.raises(ValueError, match="range"):
        NumericBins.equal_width(1, 1, 3)
    with pytest.raises(ValueError, match="whole-number"):
        NumericBins.equal_width(0.5, 3, 2, integer=True)
