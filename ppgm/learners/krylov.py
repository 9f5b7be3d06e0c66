"""Truncated Newton building blocks shared by the learners' solvers: preconditioned conjugate
gradients and the Fisher-information product of an exponential family through its marginals.

The Hessian of log Z at theta is the covariance of the sufficient statistics (the Fisher
information F), and F v is the directional derivative of the marginals along v: here one extra
calibration per product (a forward difference), never the matrix itself. It loses about half the
digits, so exact models use the junction tree's own product (:meth:`ppgm.JunctionTree.fisher`);
this one serves loopy (Bethe) marginals.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

FD_STEP = 1e-6  # the largest parameter change of a forward-difference Fisher product


def fisher_product(marginals: Callable[[np.ndarray], np.ndarray], x: np.ndarray, mu: np.ndarray, v: np.ndarray) -> np.ndarray:
    """F(x) v, the derivative of the marginals at ``x`` along ``v``, by a forward difference.

    Parameters
    ----------
    marginals : callable
        Flat parameters -> flat marginals (one calibration).
    x, mu : numpy.ndarray
        The point and its marginals.
    v : numpy.ndarray
        The direction.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> softmax = lambda x: np.exp(x) / np.exp(x).sum()
    >>> x = np.array([0.0, 1.0]); mu = softmax(x)
    >>> exact = (np.diag(mu) - np.outer(mu, mu)) @ np.array([1.0, 0.0])
    >>> bool(np.allclose(fisher_product(softmax, x, mu, np.array([1.0, 0.0])), exact, atol=1e-6))
    True
    """
    top = float(np.abs(v).max())
    if top == 0:
        return np.zeros_like(v)
    h = FD_STEP / top
    return (marginals(x + h * v) - mu) / h


def pcg(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray, precondition: Callable[[np.ndarray], np.ndarray],
        max_iter: int, rtol: float, enough: Callable[[np.ndarray], bool] | None = None) -> tuple[np.ndarray, int]:
    """Preconditioned conjugate gradients for ``A p = b`` (A symmetric positive definite on the
    space the preconditioner maps into), stopped at ``||r|| <= rtol ||b||``, when ``enough(r)``
    holds, after ``max_iter`` products, or at a direction of non-positive curvature.

    Parameters
    ----------
    matvec : callable
        v -> A v.
    b : numpy.ndarray
    precondition : callable
        r -> M^-1 r (symmetric positive semi-definite).
    max_iter : int
    rtol : float
    enough : callable, optional
        ``r -> bool`` on the residual ``b - A p``: the caller's own test that the step is good enough (a
        Newton step whose residual, the gradient its quadratic model predicts, already passes a loose
        stopping test needs no more products).

    Returns
    -------
    p : numpy.ndarray
        The approximate solution (the preconditioned right-hand side if no step was taken).
    products : int
        Products with A used.

    Examples
    --------
    >>> A = np.array([[4.0, 1.0], [1.0, 3.0]]); b = np.array([1.0, 2.0])
    >>> p, k = pcg(lambda v: A @ v, b, lambda r: r / np.diag(A), 10, 1e-12)
    >>> bool(np.allclose(p, np.linalg.solve(A, b))), k
    (True, 2)
    """
    p = np.zeros_like(b)
    r = b.copy()
    z = precondition(r)
    direction, rz = z, float(r @ z)
    stop = rtol * float(np.sqrt(b @ b))
    k = 0
    while k < max_iter and rz > 0:
        hd = matvec(direction)
        k += 1
        curv = float(direction @ hd)
        if curv <= 0:
            break
        a = rz / curv
        p += a * direction
        r -= a * hd
        if float(np.sqrt(r @ r)) <= stop or (enough is not None and enough(r)):
            break
        z = precondition(r)
        rz_new = float(r @ z)
        direction, rz = z + (rz_new / rz) * direction, rz_new
    return (p if p.any() else precondition(b)), k
