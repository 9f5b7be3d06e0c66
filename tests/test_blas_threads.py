"""The solvers run with one BLAS thread and give the caller's thread count back, even on an error."""

import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from ppgm import Domain, Factor
from ppgm.core.blas_threads import one_blas_thread
from ppgm.learners.mle import fit_marginals


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.skipif(not blas_threads(), reason="no BLAS library loaded")
def test_one_thread_inside_restored_after_and_on_error():
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        seen = []

        @one_blas_thread
        def inner():
            seen.append(blas_threads())

        @one_blas_thread
        def outer(fail):
            inner()  # nested: still one thread, and the outer call restores
            seen.append(blas_threads())
            if fail:
                raise RuntimeError("boom")
            return 7

        assert outer(False) == 7
        assert seen == [[1] * len(before)] * 2 and blas_threads() == before
        with pytest.raises(RuntimeError, match="boom"):
            outer(True)
        assert blas_threads() == before
        assert outer(False) == 7 and seen[-1] == [1] * len(before)  # the nesting flag was cleared by the error


def test_a_decorated_solver_keeps_its_answer():
    d = Domain(("A", "B"), (2, 3))
    t = np.array([[0.1, 0.2, 0.1], [0.3, 0.2, 0.1]])
    fit = fit_marginals(d, [Factor(("A", "B"), t)])
    joint = np.exp(fit.model.joint_log_table())
    assert np.allclose(joint / joint.sum(), t, atol=1e-7)  # the MLE of one full table is the table
    assert fit_marginals.__name__ == "fit_marginals" and "targets" in fit_marginals.__doc__


def test_thread_map_keeps_order_raises_and_inherits_the_limit():
    import threading

    from ppgm.core.blas_threads import thread_map
    main = threading.get_ident()
    out = thread_map(lambda k: (k * k, threading.get_ident()), range(5), workers=3)
    assert [v for v, _ in out] == [0, 1, 4, 9, 16] and any(t != main for _, t in out)
    assert thread_map(lambda k: threading.get_ident(), [1, 2], workers=1) == [main, main]  # one worker: no pool

    def boom(k):
        if k == 2:
            raise ValueError("item 2")
        return k
    with pytest.raises(ValueError, match="item 2"):
        thread_map(boom, range(4), workers=2)
    from ppgm.core.blas_threads import _state
    flag = lambda _: getattr(_state, "inside", False)  # noqa: E731
    assert one_blas_thread(lambda: thread_map(flag, range(2), workers=2))() == [True, True]  # inside the caller's limit
    assert thread_map(flag, range(2), workers=2) == [False, False]


def test_halves_side_by_side_in_the_main_thread_only(monkeypatch):
    """The second half on the helper thread while the first runs in the caller's (the main thread, several
    cores); one after the other in any other thread and on one core; results in order, the helper waited
    for when the first half raises, an error of the second re-raised, the caller's BLAS limit inherited."""
    import os
    import threading

    from ppgm.core import blas_threads
    from ppgm.core.blas_threads import _state, halves, thread_map
    me = threading.get_ident()
    ident = lambda k: (k, threading.get_ident())  # noqa: E731
    if threading.current_thread() is threading.main_thread() and (os.cpu_count() or 1) > 1:
        out = halves(ident, ["a", "b"])
        assert [k for k, _ in out] == ["a", "b"] and out[0][1] == me and out[1][1] != me
        assert one_blas_thread(lambda: halves(lambda _: getattr(_state, "inside", False), [0, 1]))() == [True, True]
        done = []

        def first_fails(k):
            if k == 0:
                raise ValueError("half 0")
            time.sleep(0.05)
            done.append(k)
        with pytest.raises(ValueError, match="half 0"):
            halves(first_fails, [0, 1])
        assert done == [1]  # the helper's half finished before the error left
        with pytest.raises(ValueError, match="half 1"):
            halves(lambda k: (_ for _ in ()).throw(ValueError("half 1")) if k else k, [0, 1])
        names = lambda: {t.name for t in threading.enumerate() if t.name.startswith("ppgm-halves")}  # noqa: E731
        assert names()
        blas_threads.stop_helper()  # before a fork: no helper thread left
        assert not names() and halves(ident, [1, 2])[1][1] != me and names()  # the next call starts another
    # in a worker thread (thread_map's, a caller's own): both halves there
    (inner,) = thread_map(lambda _: (threading.get_ident(), halves(ident, [1, 2])), [0, 1], workers=2)[:1]
    assert [t for _, t in inner[1]] == [inner[0]] * 2
    monkeypatch.setattr(blas_threads.os, "cpu_count", lambda: 1)
    assert halves(ident, [1, 2]) == [(1, me), (2, me)]
