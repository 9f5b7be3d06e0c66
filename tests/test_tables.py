import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm import Domain, contingency_tables


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**31 - 1), st.integers(1, 50))
def test_counts_match_a_python_count_and_chunking_changes_nothing(n, seed, chunk):
    rng = np.random.default_rng(seed)
    d = Domain(("A", "B", "C"), (2, 3, 4))
    x = np.stack([rng.integers(0, c, n) for c in d.cards], axis=1)
    w = rng.random(n)
    scopes = [("C", "A"), ("B",), ("A", "B", "C")]
    tabs = contingency_tables(x, d, scopes)
    tabs_chunked = contingency_tables(x, d, scopes, chunk_size=chunk)
    tabs_w = contingency_tables(x, d, scopes, weights=w, chunk_size=chunk)
    ref = np.zeros((4, 2), dtype=int)
    ref_w = np.zeros((4, 2))
    for row, wi in zip(x, w):
        ref[row[2], row[0]] += 1
        ref_w[row[2], row[0]] += wi
    np.testing.assert_array_equal(tabs[0].values, ref)
    np.testing.assert_array_equal(tabs_chunked[0].values, ref)
    np.testing.assert_allclose(tabs_w[0].values, ref_w)
    assert tabs[2].values.sum() == n and tabs[0].values.dtype == np.int64


def test_iterable_of_chunks_with_weights():
    d = Domain(("A",), (3,))
    chunks = [np.array([[0], [1]]), np.array([[2], [2]])]
    weights = [np.array([0.5, 0.5]), np.array([1.0, 2.0])]
    t = contingency_tables(iter(chunks), d, [("A",)], weights=iter(weights))[0]
    np.testing.assert_allclose(t.values, [0.5, 0.5, 3.0])


def test_bad_records_are_rejected_without_touching_input():
    d = Domain(("A", "B"), (2, 2))
    x = np.array([[0, 1], [1, 2]])
    before = x.copy()
    with pytest.raises(ValueError, match="column 'B'"):
        contingency_tables(x, d, [("A", "B")])
    np.testing.assert_array_equal(x, before)
    with pytest.raises(ValueError, match="shape"):
        contingency_tables(np.zeros((3, 3), int), d, [("A",)])
    with pytest.raises(ValueError, match="NaN"):
        contingency_tables(np.array([[0.0, np.nan]]), d, [("A",)])
    with pytest.raises(ValueError, match="empty"):
        contingency_tables(np.zeros((0, 2), int), d, [("A",)])
    with pytest.raises(ValueError, match="unknown variables"):
        contingency_tables(np.zeros((1, 2), int), d, [("Z",)])
    with pytest.raises(ValueError, match="non-negative"):
        contingency_tables(np.zeros((2, 2), int), d, [("A",)], weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="weights"):
        contingency_tables(np.zeros((2, 2), int), d, [("A",)], weights=[1.0])
    with pytest.raises(ValueError, match="-1"):
        contingency_tables(np.array([[-1, 0]]), d, [("A",)])
