"""One rule for randomness: every function takes ``seed`` (an int, None or a numpy Generator)."""

from __future__ import annotations

import numpy as np


def as_generator(seed, name: str = "seed") -> np.random.Generator:
    """``seed`` itself if it is a ``numpy.random.Generator`` (so callers can share one stream),
    otherwise ``numpy.random.default_rng(seed)`` for ``seed`` None, a non-negative whole number, a
    ``SeedSequence`` or a sequence of non-negative whole numbers. Anything else is a ``ValueError``
    or ``TypeError`` naming the argument (``name``).

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> as_generator(g) is g
    True
    >>> try:
    ...     as_generator(-1)
    ... except ValueError as err:
    ...     print(err)
    seed: expected None, a whole number >= 0, a numpy Generator or SeedSequence, got -1
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(seed)
    items = list(seed) if isinstance(seed, (list, tuple, np.ndarray)) else [seed]
    ok = bool(items) and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items)
    if not ok:
        raise TypeError(f"{name}: expected None, a whole number >= 0, a numpy Generator or SeedSequence, got {seed!r}")
    if any(v < 0 for v in items):
        raise ValueError(f"{name}: expected None, a whole number >= 0, a numpy Generator or SeedSequence, got {seed!r}")
    return np.random.default_rng(seed)
