"""The exact MaxEnt fit on enumerable feature spaces: against an independent optimiser of the same
likelihood, the tables' fixed point, a label that is nearly a function of its features (where PCD's
Gibbs sweep stalls), its chains, reproducibility, and what it refuses."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

from ppgm import ConvergenceWarning, Domain
from ppgm.learners import maxent_exact
from ppgm.learners.aggregates import aggregate_records, release_aggregates, table_scopes
from ppgm.learners.maxent import MaxEntLayout, MaxEntModel, fit_maxent
from ppgm.privacy.mechanisms import LaplaceMechanism

from test_maxent import _exact_expectations, _tiny


def _reference(tables, dom, n, l2_mu, l2_theta):
    """The penalised likelihood minimised by L-BFGS over joint_log_table (brute force, no shared code)."""
    layout = MaxEntLayout.from_tables(dom, tables)
    d, c = layout.stack(tables, "values"), layout.stack(tables, "label_sums")
    C = float(tables[0].label_sums.sum())
    S = layout.n_slots

    def f(z):
        model = MaxEntModel(layout, z[:S], z[S : 2 * S], z[-1])
        Ed, Ec, logz = _exact_expectations(model)
        J = model.joint_log_table()
        p1 = float(np.exp(np.logaddexp.reduce(J[..., 1].ravel()) - logz))
        value = n * logz - d @ z[:S] - c @ z[S : 2 * S] - C * z[-1] + l2_mu * z[:S] @ z[:S] + l2_theta * z[S : 2 * S] @ z[S : 2 * S]
        grad = np.concatenate([n * Ed - d + 2 * l2_mu * z[:S], n * Ec - c + 2 * l2_theta * z[S : 2 * S], [n * p1 - C]])
        return value / n, grad / n

    r = minimize(f, np.zeros(2 * S + 1), jac=True, method="L-BFGS-B", options=dict(maxiter=5000, gtol=1e-10, ftol=1e-15))
    return MaxEntModel(layout, r.x[:S], r.x[S : 2 * S], r.x[-1])


@pytest.mark.parametrize("l2", [(1.0, 3.0), (0.5, 30.0)])
def test_exact_fit_matches_an_independent_optimiser(l2):
    dom, x, y, tables = _tiny(n=4000)
    fit = fit_maxent(tables, dom, l2_mu=l2[0], l2_theta=l2[1], seed=0, progress=False)
    assert fit.history.get("decrement") and fit.converged is True  # the exact path ran
    ref = _reference(tables, dom, len(x), *l2)
    X = np.stack(np.meshgrid(*[np.arange(k) for k in dom.cards], indexing="ij"), -1).reshape(-1, len(dom.cards))
    np.testing.assert_allclose(fit.model.predict_proba(X), ref.predict_proba(X), atol=2e-4)
    # the same joint model, not only the same conditional
    p_fit, p_ref = (np.exp(m.joint_log_table() - np.logaddexp.reduce(m.joint_log_table().ravel())) for m in (fit.model, ref))
    assert np.abs(p_fit - p_ref).sum() / 2 < 1e-4


def test_without_penalty_the_exact_fit_reproduces_every_table():
    dom, x, y, tables = _tiny(n=20_000)
    fit = fit_maxent(tables, dom, l2_mu=0.0, l2_theta=0.0, seed=0, progress=False)
    Ed, Ec, _ = _exact_expectations(fit.model)
    lay, n = fit.model.layout, len(x)
    assert np.abs(n * Ed - lay.stack(tables, "values")).max() / n < 1e-3  # PCD: within 0.01
    assert np.abs(n * Ec - lay.stack(tables, "label_sums")).max() / n < 1e-3


def test_a_label_that_is_nearly_a_function_of_its_features_reaches_the_logistic():
    """ASIA's `either` (tub OR lung) from its seven other nodes: PCD's sweep (label, then features given
    it) crosses slowly between the label's modes, and at the defaults stopped 0.019 test NLLH short of the
    quadratic logistic on the rows (benchmarks/panel.py, 50,000 rows). The exact fit, penalty chosen from
    the tables as by default, is within 0.006."""
    from ppgm import nllh, sample
    from ppgm.adapters import bayes_from_pgmpy, load_bif_example
    from ppgm.adapters.aggregated import quadratic_one_hot
    from sklearn.linear_model import LogisticRegression

    truth = bayes_from_pgmpy(load_bif_example("asia"))
    features = [v for v in truth.domain.variables if v != "either"]
    rows = sample(truth, 70_000, seed=1)
    x, y = rows[:, [truth.domain.index(f) for f in features]], 1 - rows[:, truth.domain.index("either")]
    dom = Domain(tuple(features), tuple(truth.domain.card(f) for f in features))
    train, test = slice(0, 50_000), slice(50_000, None)
    tables = aggregate_records(x[train], y[train], dom, table_scopes(dom.variables, "all"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = fit_maxent(tables, dom, seed=0, progress=False)
    design = lambda part: quadratic_one_hot(x[part], dom.cards)  # noqa: E731
    logistic = LogisticRegression(C=1.0, max_iter=2000).fit(design(train), y[train])
    skyline = nllh(y[test], logistic.predict_proba(design(test))[:, 1])
    assert skyline > 0.95
    assert nllh(y[test], fit.model.predict_proba(x[test])) >= skyline - 0.006


def test_chains_are_draws_from_the_fitted_model_and_runs_repeat():
    dom, x, y, tables = _tiny(n=4000)
    a = fit_maxent(tables, dom, l2_theta=10.0, n_chains=20_000, seed=3, progress=False)
    b = fit_maxent(tables, dom, l2_theta=10.0, n_chains=20_000, seed=3, progress=False)
    np.testing.assert_array_equal(a.model.theta, b.model.theta)
    np.testing.assert_array_equal(a.state.chains, b.state.chains)
    J = a.model.joint_log_table()
    px = np.exp(np.logaddexp.reduce(J, axis=-1) - np.logaddexp.reduce(J.ravel())).ravel()
    codes = np.ravel_multi_index(a.state.chains.T, dom.cards)
    freq = np.bincount(codes, minlength=px.size) / len(codes)
    assert np.abs(freq - px).sum() / 2 < 0.02
    # a warm start from the optimum stays there: one Newton test, no move
    again = fit_maxent(tables, dom, l2_theta=10.0, model=a.model, state=a.state, progress=False)
    assert len(again.history["decrement"]) == 1
    np.testing.assert_allclose(again.model.theta, a.model.theta, atol=1e-8)


def test_an_unconverged_exact_fit_warns(monkeypatch):
    dom, x, y, tables = _tiny(n=4000)
    monkeypatch.setattr(maxent_exact, "MAX_STEPS", 1)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        fit = fit_maxent(tables, dom, l2_theta=10.0, seed=0, progress=False)
    assert fit.converged is False


def test_method_is_checked_and_noisy_tables_stay_with_pcd():
    dom, x, y, tables = _tiny(n=2000)
    with pytest.raises(ValueError, match="method"):
        fit_maxent(tables, dom, l2_theta=10.0, method="newton", progress=False)
    noisy = release_aggregates(tables, LaplaceMechanism(1.0), seed=0)
    with pytest.raises(ValueError, match="method='exact'"):
        fit_maxent(noisy, dom, l2_theta=10.0, method="exact", progress=False)
    pcd = fit_maxent(noisy, dom, l2_theta=10.0, max_iter=20, n_chains=500, seed=0, progress=False)
    assert "decrement" not in pcd.history and len(pcd.history["step"]) == 20
