"""Progress bars stay out of non-terminal logs, one switch turns them off or on, and iterative
methods that stop short say so."""

import io
import sys
import warnings

import numpy as np
import pytest

from ppgm import ConvergenceWarning, set_progress
from ppgm.learners.cgm import cgm_em
from ppgm.inference.marginals import infer
from ppgm.inference.loopy import loopy_belief_propagation
from ppgm.models.measurement import Measurement
from ppgm.core.progress import bars_visible, progress_bar
from ppgm.models.random_models import grid, third_order_chain


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_bars_draw_in_a_terminal_only_and_obey_the_switch(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    set_progress(None)
    assert not bars_visible()
    assert sum(progress_bar(range(50), desc="work")) == 1225
    assert log.getvalue() == ""  # nothing written into a log file
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert bars_visible()
    assert sum(progress_bar(range(5), desc="work", file=tty)) == 10
    assert "work" in tty.getvalue()
    set_progress(False)
    try:
        assert not bars_visible() and progress_bar(total=3, enabled=True).disable
        set_progress(True)
        monkeypatch.setattr(sys, "stderr", log)
        assert bars_visible()  # forced on, even into a log
        assert progress_bar(total=3, enabled=False).disable  # the caller's progress=False still wins
    finally:
        set_progress(None)
    with pytest.raises(TypeError, match="enabled"):
        set_progress("off")


def test_loopy_bp_that_stops_short_warns_and_keeps_its_history():
    model = grid(6, 6, coupling=2.5, seed=0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        res = loopy_belief_propagation(model, max_iter=3, progress=False)
    assert not res.converged and len(res.history) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert "did not converge" in infer(model, method="loopy", max_iter=3).note


def test_cgm_em_records_why_it_stopped_and_warns_on_an_unconverged_nlbp_estep():
    truth = third_order_chain(4, 2, seed=0)
    marg = infer(truth).factor_marginals()
    rng = np.random.default_rng(0)
    ys = [Measurement(f.variables, np.round(2000 * f.values + rng.laplace(0, 5.0, f.shape)), "laplace", 5.0) for f in marg]
    res = cgm_em(truth.domain, ys, max_iter=3, progress=False, stop="converged", init_l2="calibrated")
    assert all("estep_converged" in h for h in res.history) and res.history[-1]["stopped"]
    with pytest.warns(ConvergenceWarning, match="E-step"):
        bad = cgm_em(truth.domain, ys, max_iter=2, estep="nlbp", estep_iter=5, progress=False, stop="converged", init_l2="calibrated")
    assert bad.history[-1]["estep_converged"] is False
