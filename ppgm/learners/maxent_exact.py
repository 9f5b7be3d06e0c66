"""The MaxEnt model fitted exactly when its features' joint can be enumerated.

PCD estimates the model's expectations with Gibbs chains. When the features have few joint
configurations (a handful of features: ``maxent.ENUMERATE_CELLS``), every configuration can be
listed instead, and the penalised likelihood of exact tables

    N log Z(mu, theta, theta0) - <d, mu> - <c, theta> - C theta0 + l2_mu |mu|^2 + l2_theta |theta|^2

(the function whose gradient PCD's steps follow) is minimised by Newton's method with conjugate
gradients: no chains to mix, no Monte Carlo noise, a convergence test on the exact Newton decrement.
It matters where the label is nearly a function of the features: there the Gibbs sweep crosses
slowly between the label's modes and PCD's fixed point drifts (``docs/explain/maxent.md``,
"Small feature spaces: the exact fit").

The functions work on flat arrays: ``A`` is the configurations x slots incidence matrix
(:func:`incidence`, built once per layout by ``MaxEntLayout.enumerated``), and table t's slots are
``offsets[t]`` to ``offsets[t] + sizes[t]`` (the layout's).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from .krylov import pcg

#: Newton decrement (nats per record) below which the fit is settled
NEWTON_TOL = 1e-6
CG_ITERS = 200
MAX_STEPS = 200  # Newton steps (a fit takes 5-30)
FORCING = 0.1  # the conjugate gradients' largest relative residual (far from the optimum)


@dataclass
class ExactFit:
    """Parameters, whether the Newton decrement fell below ``NEWTON_TOL``, and the history (the
    objective per record and the decrement after every Newton step)."""

    mu: np.ndarray
    theta: np.ndarray
    theta0: float
    converged: bool
    decrement: float
    history: dict
    gradient_theta: np.ndarray  # the gradient at the result (theta, theta0), in records
    gradient_theta0: float


class _Objective:
    """The penalised likelihood per record, its gradient and Hessian-vector products, over the
    enumerated configurations (y = 0 and y = 1 for each)."""

    def __init__(self, A, offsets, sizes, d, c, C, n, l2_mu, l2_theta):
        self.A, self.S = A, int(d.size)
        self.d, self.c, self.C, self.n = d / n, c / n, C / n, float(n)
        self.pen = np.concatenate([np.full(self.S, 2 * l2_mu / n), np.full(self.S, 2 * l2_theta / n), [0.0]])
        # the tables grouped by size, each group's positions in z: its mu cells, then its theta cells
        self.groups = []
        for k in np.unique(sizes):
            starts = np.asarray(offsets)[np.asarray(sizes) == k]
            cells = starts[:, None] + np.arange(k)[None, :]
            self.groups.append(np.concatenate([cells, cells + self.S], axis=1))

    def split(self, z):
        return z[: self.S], z[self.S : 2 * self.S], float(z[-1])

    def _sum_slots(self, weights):
        return self.A.T @ weights

    def at(self, z):
        """Value and gradient at z; keeps the configurations' probabilities for :meth:`hessp`."""
        mu, th, t0 = self.split(z)
        a = self.A @ mu
        b = a + t0 + self.A @ th
        m = max(a.max(), b.max())
        e0, e1 = np.exp(a - m), np.exp(b - m)
        total = e0.sum() + e1.sum()
        log_z = m + np.log(total)
        self.p0, self.p1 = e0 / total, e1 / total
        value = log_z - self.d @ mu - self.c @ th - self.C * t0 + 0.5 * float(self.pen @ (z * z))
        grad = np.concatenate([self._sum_slots(self.p0 + self.p1) - self.d, self._sum_slots(self.p1) - self.c,
                               [self.p1.sum() - self.C]]) + self.pen * z
        return float(value), grad

    def hessp(self, v):
        """The covariance of the sufficient statistics under the model at the last :meth:`at`, times v."""
        vm, vt, v0 = self.split(v)
        u0 = self.A @ vm
        u1 = u0 + self.A @ vt + v0
        mean = float(self.p0 @ u0 + self.p1 @ u1)
        r0, r1 = self.p0 * (u0 - mean), self.p1 * (u1 - mean)
        return np.concatenate([self._sum_slots(r0 + r1), self._sum_slots(r1), [r1.sum()]]) + self.pen * v

    def preconditioner(self):
        """The inverse of the Hessian's blocks of each table (its mu and theta cells together: within a
        table the cells share the table's total, and a cell's mu and theta move the same records), as a
        function r -> M^-1 r for the conjugate gradients (``krylov.pcg``); tables of one size at once."""
        px, p1 = self._sum_slots(self.p0 + self.p1), self._sum_slots(self.p1)
        q = float(self.p1.sum())
        inverses = []
        for idx in self.groups:
            k = idx.shape[1] // 2
            a, b = px[idx[:, :k]], p1[idx[:, :k]]  # (tables, k)
            e = np.concatenate([a, b], axis=1)  # a cell's mu and theta statistics: E = a and b, E[mu_i theta_i] = b_i
            block = -e[:, :, None] * e[:, None, :]
            diag = np.arange(k)
            block[:, diag, diag] += a
            block[:, diag, k + diag] += b
            block[:, k + diag, diag] += b
            block[:, k + diag, k + diag] += b
            block[:, np.arange(2 * k), np.arange(2 * k)] += self.pen[idx] + 1e-12
            inverses.append(np.linalg.inv(block))
        h0 = 1.0 / max(q * (1 - q), 1e-12)

        def apply(r):
            out = np.empty_like(r)
            for idx, inv in zip(self.groups, inverses):
                out[idx] = np.einsum("gij,gj->gi", inv, r[idx])
            out[-1] = h0 * r[-1]
            return out

        return apply


def fit_enumerated(A, offsets, sizes, d, c, C, n, mu, theta, theta0, l2_mu, l2_theta, max_iter=None, tol=None,
                   on_step=None) -> ExactFit:
    """Minimise the penalised likelihood of exact tables from (mu, theta, theta0) by Newton's method.

    Each step solves H p = -g by conjugate gradients preconditioned by each table's block of H (the
    products are two passes over the configurations), then backtracks until the objective falls (Armijo).
    The fit stops when the Newton decrement g' H^-1 g / 2 is below ``tol`` nats per record.
    ``on_step(mu, theta, theta0, k)`` is called after every step k = 1, 2, ...

    Examples
    --------
    >>> A = incidence(np.array([[0, 1]]), 2)  # one binary feature a, its single table (slots 0, 1)
    >>> d = np.array([30.0, 70.0]); c = np.array([3.0, 35.0])  # 100 records, 38 positive
    >>> fit = fit_enumerated(A, [0], [2], d, c, 38.0, 100.0, np.zeros(2), np.zeros(2), 0.0, 0.0, 0.0)
    >>> p = 1 / (1 + np.exp(-(fit.theta0 + fit.theta))); np.round(p, 3).tolist(), fit.converged  # label rate per a
    ([0.1, 0.5], True)
    """
    tol = NEWTON_TOL if tol is None else tol
    max_iter = MAX_STEPS if max_iter is None else max_iter
    f = _Objective(A, offsets, sizes, np.asarray(d, float), np.asarray(c, float), float(C), float(n), float(l2_mu), float(l2_theta))
    z = np.concatenate([mu, theta, [theta0]]).astype(float)
    value, grad = f.at(z)
    history = {"objective": [value], "decrement": []}
    decrement, forcing = np.inf, FORCING
    for _ in range(int(max_iter)):
        # inexact Newton: the linear solve only as precise as the step needs (tighter near the optimum)
        step, _ = pcg(f.hessp, -grad, f.preconditioner(), CG_ITERS, forcing)
        decrement = 0.5 * float(-grad @ step)
        history["decrement"].append(decrement)
        if decrement <= tol:
            break
        forcing = min(FORCING, np.sqrt(decrement))
        t = 1.0
        while True:  # Armijo backtracking: H is only the local curvature far from the optimum
            new_value, new_grad = f.at(z + t * step)
            if new_value <= value - 0.25 * t * 2 * decrement or t < 1e-6:
                break
            t *= 0.5
        z, value, grad = z + t * step, new_value, new_grad
        history["objective"].append(value)
        if on_step is not None:
            on_step(*f.split(z.copy()), len(history["objective"]) - 1)
    else:
        decrement = 0.5 * float(grad @ pcg(f.hessp, grad, f.preconditioner(), CG_ITERS, 1e-6)[0])
    mu, th, t0 = f.split(z)
    _, g_th, g0 = f.split(grad * f.n)
    return ExactFit(mu.copy(), th.copy(), t0, bool(decrement <= tol), decrement, history, g_th.copy(), g0)


def incidence(every: np.ndarray, n_slots: int):
    """The configurations x slots 0/1 matrix (CSR; a configuration's row holds one slot per table) of the
    slots ``every`` (tables x configurations): its products replace gathers and scatters over the tables."""
    T, K = every.shape
    return sparse.csr_matrix((np.ones(T * K), every.T.ravel(), np.arange(0, T * K + 1, T)), shape=(K, n_slots))


def draw(A, configs, mu, theta, theta0, k, rng) -> np.ndarray:
    """``k`` independent draws of the features from the model's marginal (the label summed out)."""
    log_p = A @ mu + np.logaddexp(0.0, theta0 + A @ theta)
    cdf = np.cumsum(np.exp(log_p - log_p.max()))
    pick = np.minimum(np.searchsorted(cdf, rng.random(k) * cdf[-1], side="right"), len(cdf) - 1)
    return configs[pick]
