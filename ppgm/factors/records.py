"""Integer-coded records: validation and cell indexing shared by tables, likelihoods and samplers."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .domain import Domain


def check_records(records, domain: Domain, argument: str = "records", compact: bool = False) -> np.ndarray:
    """Return ``records`` as an ``(N, len(domain))`` integer array, checked against ``domain``
    (int64; with ``compact=True`` an integer array keeps its own, smaller, dtype).

    Raises ``ValueError`` naming ``argument`` for a wrong shape, non-integer or NaN entries, or codes
    outside ``0 .. card-1``. The input is never modified.

    Examples
    --------
    >>> check_records([[0, 1], [1, 2]], Domain(("A", "B"), (2, 3))).shape
    (2, 2)
    """
    arr = np.asarray(records)
    if arr.ndim != 2 or arr.shape[1] != len(domain):
        raise ValueError(
            f"{argument}: expected an array of shape (N, {len(domain)}) with columns {list(domain.variables)}, "
            f"got shape {arr.shape}"
        )
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise ValueError(f"{argument}: contains NaN; code missing values as a state of their own")
        if not np.all(arr == np.round(arr)):
            raise ValueError(f"{argument}: expected integer state codes, got non-integral floats")
    elif arr.dtype.kind not in "iub":
        raise ValueError(f"{argument}: expected integer state codes, got dtype {arr.dtype}")
    if not (compact and arr.dtype.kind in "iu"):
        arr = arr.astype(np.int64, copy=False)
    if arr.size:
        lo, hi = arr.min(axis=0), arr.max(axis=0)
        cards = np.asarray(domain.cards)
        bad = np.flatnonzero((lo < 0) | (hi >= cards))
        if bad.size:
            j = int(bad[0])
            raise ValueError(
                f"{argument}: column {domain.variables[j]!r} has codes in [{lo[j]}, {hi[j]}], "
                f"expected 0 .. {cards[j] - 1}"
            )
    return arr


def cell_index(records: np.ndarray, columns: Sequence[int], shape: Sequence[int]) -> np.ndarray:
    """Flat (C-order) cell index of each record in the table over ``columns`` of the given ``shape``."""
    if len(columns) == 0:
        return np.zeros(len(records), dtype=np.int64)
    return np.ravel_multi_index(tuple(records[:, c] for c in columns), tuple(shape))
