"""How strongly the tables of a MaxEnt model couple its feature potentials mu: the step size of mu.

PCD moves each mu cell by a step times its gradient over its count (the Hessian's diagonal). Such a
step is stable while it is below 2 / lambda, where lambda is the largest eigenvalue of the model's
cell-indicator covariance scaled by the counts, C = D^(-1/2) Cov D^(-1/2). Every record sits in one
cell of each of the T tables, so lambda is at most T (the bound theta's step 1.5 / (T + 1) is sized by);
the covariance is centred, and tables of weakly dependent features do not add up: on Adult's 105
tables lambda is 29-45, on a random network's 78 tables 14-27 (``docs/explain/maxent.md``, "mu's step from
the tables' coupling").
The estimate reads the persistent chains (power iteration, two vectorised passes over the chains' table
slots per product); finite chains bias it upwards (a cell seen once couples fully with the chain's other
cells), which errs on the safe side.
"""

from __future__ import annotations

import numpy as np

COUPLING_CHAINS = 2000  # chains the estimate reads
COUPLING_EVERY = 25  # PCD steps between estimates (the coupling grows as the fit moves off its start)


def mu_coupling(slots: np.ndarray, n_slots: int, start: np.ndarray | None = None, iters: int = 30,
                rtol: float = 1e-3) -> tuple[float, np.ndarray]:
    """The largest eigenvalue of the count-scaled covariance of the cell indicators, from chain states.

    Parameters
    ----------
    slots : numpy.ndarray
        The chains' slot in every table, shape (T, chains) (``MaxEntLayout.slots_by_table``).
    n_slots : int
        Number of slots (cells) over all tables.
    start : numpy.ndarray, optional
        Starting vector (the previous estimate's eigenvector: a warm start needs a few products).
    iters : int
        Most matrix-vector products.
    rtol : float
        Stop when the Rayleigh quotient changes by less than this fraction.

    Returns
    -------
    (float, numpy.ndarray)
        lambda, clipped to [1, T], and the unit vector it was read from.

    Examples
    --------
    Two tables over the same feature, one a copy of the other, couple fully (lambda = 2 = T); two
    independent features do not (lambda = 1):

    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.integers(0, 3, 5000), rng.integers(0, 3, 5000)
    >>> round(mu_coupling(np.stack([a, a + 3]), 6)[0], 2)
    2.0
    >>> round(mu_coupling(np.stack([a, b + 3]), 6)[0], 1)
    1.0
    """
    T, n = slots.shape
    flat = slots.ravel()
    m = np.bincount(flat, minlength=n_slots) / n
    root = 1.0 / np.sqrt(np.maximum(m, 1.0 / n))  # the step's preconditioner floors a cell's count at one chain

    def product(v: np.ndarray) -> np.ndarray:
        u = root * v
        per_chain = u[slots].sum(axis=0)
        second = np.bincount(flat, weights=np.tile(per_chain, T), minlength=n_slots) / n
        return root * (second - m * float(m @ u))

    v = np.random.default_rng(0).standard_normal(n_slots) if start is None or start.shape != (n_slots,) else start.copy()
    v /= np.linalg.norm(v)
    lam = 0.0
    for _ in range(int(iters)):
        h = product(v)
        new = float(v @ h)
        norm = float(np.linalg.norm(h))
        if norm == 0.0:
            break
        v = h / norm
        if abs(new - lam) <= rtol * abs(new):
            lam = new
            break
        lam = new
    return float(np.clip(lam, 1.0, T)), v
