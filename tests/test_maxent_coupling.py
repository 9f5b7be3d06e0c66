"""The coupling of mu (ppgm.learners.maxent_coupling): the largest eigenvalue of the count-scaled cell covariance,
checked against a dense eigen-solver and against enumeration, and its use as PCD's mu step."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppgm import Domain
from ppgm.learners.aggregates import aggregate_records, table_scopes
from ppgm.learners.maxent import DEFAULT_STEP, MaxEntLayout, MaxEntModel, _sigmoid, fit_maxent
from ppgm.learners.maxent_coupling import mu_coupling


def _dense(slots: np.ndarray, n_slots: int) -> np.ndarray:
    """The matrix itself: indicators (chains x slots), centred second moments, scaled by the floored counts."""
    T, n = slots.shape
    A = np.zeros((n, n_slots))
    for t in range(T):
        A[np.arange(n), slots[t]] = 1.0
    m = A.mean(axis=0)
    cov = A.T @ A / n - np.outer(m, m)
    root = 1 / np.sqrt(np.maximum(m, 1 / n))
    return root[:, None] * cov * root[None, :]


def _chains(seed, n=600):
    """Three features with a dependence (b copies a half the time), all single and pair tables."""
    rng = np.random.default_rng(seed)
    dom = Domain(("a", "b", "c"), (3, 4, 2))
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.5, a, rng.integers(0, 4, n))
    c = (rng.random(n) < 0.2 + 0.6 * (a == 1)).astype(int)
    x = np.stack([a, b, c], axis=1)
    tables = aggregate_records(x, np.zeros(n, int), dom, table_scopes(dom.variables, "all"))
    return MaxEntLayout.from_tables(dom, tables), x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coupling_is_the_dense_matrix_largest_eigenvalue(seed):
    layout, x = _chains(seed)
    slots = layout.slots_by_table(x)
    truth = float(np.linalg.eigvalsh(_dense(slots, layout.n_slots))[-1])
    lam, vec = mu_coupling(slots, layout.n_slots, iters=500, rtol=1e-10)
    assert lam == pytest.approx(truth, rel=1e-6)
    # the vector is the eigenvector: a warm start from it stops at once with the same value
    again, _ = mu_coupling(slots, layout.n_slots, start=vec, iters=2)
    assert again == pytest.approx(truth, rel=1e-4)


def test_coupling_of_an_enumerated_model_matches_its_population_value():
    """Chains drawn exactly from a small MaxEnt model: the estimate approaches the covariance of the
    model's own cell indicators (enumerated), which lies strictly between 1 and T."""
    dom = Domain(("a", "b", "c"), (2, 3, 2))
    scopes = table_scopes(dom.variables, "all")
    ones = [aggregate_records(np.zeros((1, 3), int), [0], dom, [s])[0] for s in scopes]
    layout = MaxEntLayout.from_tables(dom, ones)
    rng = np.random.default_rng(3)
    model = MaxEntModel(layout, rng.normal(0, 1.0, layout.n_slots), np.zeros(layout.n_slots), 0.0)
    J = model.joint_log_table()
    P = np.exp(J - np.logaddexp.reduce(J.ravel())).sum(axis=-1).ravel()
    X = np.array(list(itertools.product(*[range(k) for k in dom.cards])))
    slots_all = layout.slots_by_table(X)
    A = np.zeros((len(X), layout.n_slots))
    for t in range(slots_all.shape[0]):
        A[np.arange(len(X)), slots_all[t]] = 1.0
    m = P @ A
    cov = (A * P[:, None]).T @ A - np.outer(m, m)
    root = 1 / np.sqrt(m)
    population = float(np.linalg.eigvalsh(root[:, None] * cov * root[None, :])[-1])
    assert 1.2 < population < len(scopes) - 0.5
    draws = X[rng.choice(len(X), size=200_000, p=P)]
    lam, _ = mu_coupling(layout.slots_by_table(draws), layout.n_slots, iters=300, rtol=1e-9)
    assert lam == pytest.approx(population, rel=0.02)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 60), tables=st.integers(1, 5), cells=st.integers(1, 6))
def test_coupling_lies_between_one_and_the_number_of_tables(seed, n, tables, cells):
    rng = np.random.default_rng(seed)
    slots = rng.integers(0, cells, size=(tables, n)) + cells * np.arange(tables)[:, None]
    lam, vec = mu_coupling(slots, cells * tables)
    assert 1.0 <= lam <= tables
    assert np.isfinite(vec).all()


def test_pcd_steps_mu_by_the_measured_coupling_and_keeps_the_fixed_point():
    """The default mu step is DEFAULT_STEP / (coupling + 1), re-measured on the chains every few steps
    (recorded in the history); a given step_mu is kept. Both settle at the same model."""
    rng = np.random.default_rng(0)
    dom = Domain(("a", "b", "c"), (2, 3, 2))
    x = np.stack([rng.integers(0, k, 4000) for k in dom.cards], axis=1)
    x[:, 1] = np.where(rng.random(4000) < 0.6, x[:, 0], x[:, 1])
    y = (rng.random(4000) < _sigmoid(-1 + 1.5 * x[:, 0] + x[:, 0] * x[:, 2])).astype(int)
    tables = aggregate_records(x, y, dom, table_scopes(dom.variables, "all"))
    T = len(tables)
    adaptive = fit_maxent(tables, dom, n_chains=4000, max_iter=300, seed=0, progress=False, method="pcd")
    records = adaptive.history["mu_coupling"]
    assert [s for s, _ in records] == list(range(0, 300, 25))
    assert all(1.0 <= lam < T for _, lam in records)
    fixed = fit_maxent(tables, dom, n_chains=4000, max_iter=300, step_mu=DEFAULT_STEP / (T + 1), seed=0, progress=False, method="pcd")
    assert "mu_coupling" not in fixed.history
    X = np.array(list(itertools.product(*[range(k) for k in dom.cards])))
    assert np.abs(adaptive.model.predict_proba(X) - fixed.model.predict_proba(X)).max() < 0.03
