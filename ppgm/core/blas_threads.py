"""One BLAS thread inside the learners' Newton and conjugate-gradient loops.

Those loops take thousands of dot products of vectors with 1e3-1e6 entries. OpenBLAS splits a dot
product over threads once it is longer than a few thousand entries, and waking the threads costs more
than the product; when another process holds the other cores the waiting thread loses its time slice.
Measured on 2 cores (random tree of 1,000 attributes, 8 states, the naive MLE's default fit, a second
process busy): conjugate gradients' own time (its dot products and vector updates) 6.2 s with
OpenBLAS's two threads against 0.37 s with one, and the whole fit 19.5 s against 9.7 s
(``docs/explain/inference.md``, "Where the time goes"). The limit holds only while a decorated function runs (nested calls check a flag
and pay nothing); large matrix products elsewhere keep every thread.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_state = threading.local()
_controller: Any = None


def one_blas_thread(fn: F) -> F:
    """Run ``fn`` with BLAS limited to one thread (restored afterwards; nested calls are free).

    Parameters
    ----------
    fn : callable

    Returns
    -------
    callable
        ``fn`` wrapped.

    Examples
    --------
    >>> import numpy as np
    >>> @one_blas_thread
    ... def norm(v):
    ...     return float(np.sqrt(v @ v))
    >>> norm(np.ones(4))
    2.0
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if getattr(_state, "inside", False):
            return fn(*args, **kwargs)
        global _controller
        if _controller is None:  # scanning the loaded libraries takes a while: once per process
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        _state.inside = True
        try:
            with _controller.limit(limits=1, user_api="blas"):
                return fn(*args, **kwargs)
        finally:
            _state.inside = False

    return wrapper  # type: ignore[return-value]
