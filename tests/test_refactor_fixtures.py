"""The engine's long algorithms give the recorded outputs (tests/refactor_fixtures.py computes them,
tests/fixtures/refactor_outputs.npz holds them), on any machine.

Integer and boolean outputs (tables, masks, counts removed, chain states) match exactly. Float outputs
match to a tolerance: 1e-9 relative for the direct computations, looser for CGM-EM, whose five inexact EM
iterations (truncated Newton M-steps stopped by a tolerance) carry a last-bit difference between BLAS
kernels into the third digit of some parameters. Within one process the same seeds give the same bytes.
"""

import numpy as np
import pytest

from refactor_fixtures import PATH, compute

# (rtol, atol) for float outputs; measured across machines: CGM-EM's parameters moved by up to 4e-9 between two
# x86 machines with the same wheels, so these bounds leave room without hiding a real change
TOLERANCE = {"cgm_theta": (0, 0.05), "cgm_objective": (1e-3, 0), "naive_theta": (0, 1e-4)}
DEFAULT = (1e-9, 1e-12)


@pytest.fixture(scope="module")
def now():
    return compute()


@pytest.fixture(scope="module")
def recorded():
    with np.load(PATH) as z:
        return {k: z[k] for k in z.files}


def test_the_same_outputs_are_recorded(now, recorded):
    assert set(now) == set(recorded)


def test_integer_outputs_match_the_recording_exactly(now, recorded):
    changed = [k for k in recorded if recorded[k].dtype.kind in "iub" and not np.array_equal(now[k], recorded[k])]
    assert not changed, f"integer outputs changed: {changed}"


@pytest.mark.parametrize("key", sorted(k for k in np.load(PATH).files if np.load(PATH)[k].dtype.kind == "f"))
def test_float_outputs_match_the_recording_within_tolerance(now, recorded, key):
    rtol, atol = TOLERANCE.get(key, DEFAULT)
    np.testing.assert_allclose(now[key], recorded[key], rtol=rtol, atol=atol, err_msg=key)


def test_the_same_seeds_give_the_same_bytes_within_one_process(now):
    again = compute()
    differ = [k for k in now if now[k].dtype != again[k].dtype or now[k].tobytes() != again[k].tobytes()]
    assert not differ, f"same seeds, other bytes: {differ}"
