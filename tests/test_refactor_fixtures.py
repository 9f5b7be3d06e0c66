"""The engine's algorithms give, bit for bit, the outputs recorded before the executor refactor
(issue 15): tests/refactor_fixtures.py computes them, tests/fixtures/refactor_outputs.npz holds them."""

import numpy as np
import pytest

from refactor_fixtures import PATH, compute


@pytest.fixture(scope="module")
def now():
    return compute()


@pytest.fixture(scope="module")
def recorded():
    with np.load(PATH) as z:
        return {k: z[k] for k in z.files}


def test_every_recorded_output_is_reproduced_bit_for_bit(now, recorded):
    assert set(now) == set(recorded)
    differ = [k for k in recorded if not np.array_equal(now[k], recorded[k])]
    assert not differ, f"outputs changed: {differ}"
