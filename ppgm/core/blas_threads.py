"""One BLAS thread inside the learners' Newton and conjugate-gradient loops.

Those loops take thousands of dot products of vectors with 1e3-1e6 entries. OpenBLAS splits a dot
product over threads once it is longer than a few thousand entries, and waking the threads costs more
than the product; when another process holds the other cores the waiting thread loses its time slice.
Measured on 2 cores (random tree of 1,000 attributes, 8 states, the naive MLE's default fit, a second
process busy): conjugate gradients' own time (its dot products and vector updates) 6.2 s with
OpenBLAS's two threads against 0.37 s with one, and the whole fit 19.5 s against 9.7 s
(``docs/explain/inference.md``, "Where the time goes"). The limit holds only while a decorated function runs (nested calls check a flag
and pay nothing); large matrix products elsewhere keep every thread.

:func:`thread_map` runs independent refits side by side (the release rules' simulated releases): numpy
and the junction tree's passes release the GIL on arrays of millions of cells, so on two cores two
refits take about 1.3-1.4x less time than one after the other. Its workers inherit the caller's limit.

:func:`halves` runs the two halves of one large pass side by side (the junction tree's Fisher product on
cliques of millions of cells, which is bound by memory bandwidth: each core brings its own), on one helper
thread kept for the process. Only the main thread uses it; elsewhere (thread_map's workers, a caller's
own threads) the halves run one after the other, with the same arithmetic and so the same results.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_state = threading.local()
_controller: Any = None
_helper: tuple | None = None  # (process id, a one-thread executor) for halves()


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


def thread_map(fn: Callable, items: Sequence, workers: int | None = None) -> list:
    """``[fn(item) for item in items]``, the calls on threads (results in order; the first exception
    raised is re-raised). Workers inside a :func:`one_blas_thread` call stay inside it. One thread, no
    pool, when there is one item or one core.

    The calls must not share mutable state (ppgm's oracles keep their per-call state per thread).
    With more items than cores the threads share the cores: throughput, not latency, is what counts.

    Parameters
    ----------
    fn : callable
    items : sequence
    workers : int, optional
        Threads (default: one per item, when the machine has more than one core).

    Returns
    -------
    list

    Examples
    --------
    >>> thread_map(lambda k: k * k, [1, 2, 3])
    [1, 4, 9]
    """
    items = list(items)
    if workers is None:
        workers = len(items) if (os.cpu_count() or 1) > 1 else 1
    if workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    inside = getattr(_state, "inside", False)

    def run(item):
        _state.inside = inside
        return fn(item)

    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(run, items))


def halves(fn: Callable, items: Sequence) -> list:
    """``[fn(item) for item in items]`` with the calls after the first on a helper thread, while the first
    runs in the caller's (the two halves of one pass; results in order, the first exception re-raised).
    Side by side only in the main thread of a process on more than one core; one after the other
    elsewhere. The calls must write disjoint memory.

    Parameters
    ----------
    fn : callable
    items : sequence

    Returns
    -------
    list

    Examples
    --------
    >>> halves(lambda k: k + 1, [1, 2])
    [2, 3]
    """
    items = list(items)
    if len(items) <= 1 or (os.cpu_count() or 1) <= 1 or threading.current_thread() is not threading.main_thread():
        return [fn(item) for item in items]
    global _helper
    if _helper is None or _helper[0] != os.getpid():  # a forked child has the executor but not its thread
        _helper = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="ppgm-halves"))
    inside = getattr(_state, "inside", False)

    def run(item):
        _state.inside = inside
        return fn(item)

    rest = [_helper[1].submit(run, item) for item in items[1:]]
    try:
        first = fn(items[0])
    finally:
        done = [f.exception() for f in rest]  # wait for the helper either way: it writes the caller's arrays
    for f, error in zip(rest, done):
        if error is not None:
            raise error
    return [first] + [f.result() for f in rest]


def stop_helper() -> None:
    """Stop :func:`halves`' helper thread (the next call starts another): before forking a process, which
    copies only the calling thread and should find no other (Python 3.12 warns of fork in a threaded
    process).

    Examples
    --------
    >>> stop_helper()
    >>> halves(abs, [-1, -2])
    [1, 2]
    """
    global _helper
    if _helper is not None:
        _helper[1].shutdown(wait=True)
        _helper = None
