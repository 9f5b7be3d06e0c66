"""One rule for randomness: every function takes ``seed`` (an int, None or a numpy Generator)."""

from __future__ import annotations

import numpy as np


def as_generator(seed) -> np.random.Generator:
    """``seed`` itself if it is a ``numpy.random.Generator`` (so callers can share one stream),
    otherwise ``numpy.random.default_rng(seed)``.

    Examples
    --------
    >>> g = np.random.default_rng(0)
    >>> as_generator(g) is g
    True
    """
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
