"""The solvers run with one BLAS thread and give the caller's thread count back, even on an error."""

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
