"""The executor seam: one reduction tree, blocks that behave as values, and algorithms that give the
same answer whatever the blocking."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm import Domain, contingency_tables
from ppgm.core.executor import FAN_IN, InProcess, LocalBlocks, RecordBlock, add_all, record_blocks, tree_reduce
from ppgm.models.random_models import random_bayesian_network
from ppgm.learners.robust_filter import filter_known_topology
from ppgm.inference.sampling import sample


def test_tree_reduce_groups_left_to_right():
    seen = []

    def combine(*xs):
        seen.append(xs)
        return sum(xs)

    assert tree_reduce(list(range(20)), combine) == 190
    assert [len(x) for x in seen] == [FAN_IN, FAN_IN, 4, 3]  # two levels: 8 + 8 + 4 parts, then their 3 sums
    assert tree_reduce([5], combine) == 5
    with pytest.raises(ValueError, match="nothing"):
        tree_reduce([], combine)


def test_add_all_sums_nested_parts_and_skips_empty_blocks():
    a = (np.array([1.0, 2.0]), [np.array([1]), 3], 4)
    b = (np.array([0.5, 0.5]), [np.array([2]), 1], 1)
    out = add_all(a, None, b)
    np.testing.assert_array_equal(out[0], [1.5, 2.5])
    assert out[1][0].tolist() == [3] and out[1][1] == 4 and out[2] == 5
    assert add_all(None, None) is None


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_local_blocks_reduce_is_the_tree_sum(n_blocks, seed):
    rng = np.random.default_rng(seed)
    parts = [rng.normal(size=5) for _ in range(n_blocks)]
    got = InProcess().scatter(parts).reduce(lambda x: x)
    np.testing.assert_array_equal(got, tree_reduce(parts, add_all))
    np.testing.assert_allclose(got, np.sum(parts, axis=0), rtol=1e-12, atol=1e-12)


def test_blocks_pair_and_check_their_lengths():
    a, b = LocalBlocks([1, 2]), LocalBlocks([10, 20])
    assert a.map(lambda x, y: x + y, b).collect() == [11, 22]
    with pytest.raises(ValueError, match="2 blocks"):
        a.map(lambda x, y: x, LocalBlocks([1]))
    blocks = record_blocks(np.arange(14).reshape(7, 2), block_rows=3)
    assert [(r.start, len(r)) for r in blocks.collect()] == [(0, 3), (3, 3), (6, 1)]
    with pytest.raises(ValueError, match="block_rows"):
        record_blocks(np.zeros((3, 1)), block_rows=-1)


def test_tables_and_the_filter_do_not_depend_on_the_blocking():
    bn = random_bayesian_network(6, 3, seed=1)
    x = sample(bn, 3000, seed=2)
    x[np.random.default_rng(3).random(3000) < 0.1] = 0
    scopes = [("V0", "V1"), ("V2",)]
    whole = contingency_tables(x, bn.domain, scopes)
    blocked = contingency_tables(record_blocks(x, 700), bn.domain, scopes)
    for a, b in zip(whole, blocked):
        np.testing.assert_array_equal(a.values, b.values)
    one = filter_known_topology(x, bn.domain, bn.parents, 0.1, mode="iterative", rounds=2, seed=4, progress=False)
    many = filter_known_topology(x, bn.domain, bn.parents, 0.1, mode="iterative", rounds=2, seed=4, progress=False, block_rows=450)
    # ties are broken by a key of the record's global index, so the blocking cannot change who goes
    np.testing.assert_array_equal(one.inlier_mask, many.inlier_mask)
    assert [h["eigenvalue"] for h in one.history] == pytest.approx([h["eigenvalue"] for h in many.history], rel=1e-10)


def test_record_block_from_an_empty_array_counts_nothing():
    d = Domain(("A",), (2,))
    with pytest.raises(ValueError, match="empty"):
        contingency_tables(LocalBlocks([RecordBlock(0, np.zeros((0, 1), int))]), d, [("A",)])
