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
RECYCLE = 60  # conjugate directions a Recycler keeps (the newest): the last two or three solves of a refit


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


class Recycler:
    """The conjugate directions of earlier solves and their products, kept to precondition the next
    solve of a nearby system (a limited-memory preconditioner: Gratton, Sartenaer and Tshimanga 2011;
    Morales and Nocedal 2000 build the same from conjugate gradients' own iterates).

    With directions ``S`` (rows ``s_i``), their products ``Y`` (``y_i = A_old s_i``) and curvatures
    ``c_i = <s_i, y_i>``, a preconditioner ``M`` becomes
    ``P r = B' M B r + sum_i s_i <s_i, r> / c_i`` with ``B r = r - sum_i y_i <s_i, r> / c_i``:
    exact on the kept directions when ``A`` has not moved, ``M`` elsewhere, and symmetric positive
    semi-definite for any ``A`` (each term is), so a stale memory slows conjugate gradients at worst,
    never breaks them. Newton's later steps solve systems whose matrix moved little since the last:
    on AIM's grown junction trees, whose preconditioner (the scopes' spanning tree) leaves out every
    loop, the directions that preconditioner misses recur step after step.

    Parameters
    ----------
    keep : int
        The newest directions kept (``RECYCLE``).

    Examples
    --------
    >>> A = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]); b = np.ones(3)
    >>> memory = Recycler()
    >>> _, k1 = pcg(lambda v: A @ v, b, np.copy, 10, 1e-10, recycle=memory)
    >>> p, k2 = pcg(lambda v: A @ v, b, np.copy, 10, 1e-10, recycle=memory)   # the same system again: one product
    >>> k1, k2, bool(np.allclose(A @ p, b))
    (3, 1, True)
    """

    def __init__(self, keep: int = RECYCLE):
        self.keep = int(keep)
        self.S: np.ndarray | None = None  # directions, one per row
        self.Y: np.ndarray | None = None  # their products
        self.inv_c: np.ndarray | None = None  # 1 / curvature

    def wrap(self, precondition: Callable[[np.ndarray], np.ndarray], size: int) -> Callable[[np.ndarray], np.ndarray]:
        """``precondition`` corrected on the kept directions, for a system of ``size`` unknowns (a memory of
        another size is dropped)."""
        if self.S is None or self.S.shape[1] != size:
            self.S = self.Y = self.inv_c = None
            return precondition
        S, Y, inv_c = self.S, self.Y, self.inv_c

        def apply(r: np.ndarray) -> np.ndarray:
            a = inv_c * (S @ r)
            u = precondition(r - a @ Y)
            return u + (a - inv_c * (Y @ u)) @ S
        return apply

    def add(self, directions: list, products: list, curvatures: list) -> None:
        """Keep a solve's directions, products and curvatures (the newest ``keep`` of all kept)."""
        if not directions:
            return
        S, Y, c = np.array(directions), np.array(products), 1.0 / np.array(curvatures)
        if self.S is not None and self.S.shape[1] == S.shape[1]:
            S, Y, c = np.vstack([self.S, S]), np.vstack([self.Y, Y]), np.concatenate([self.inv_c, c])  # type: ignore[list-item]
        self.S, self.Y, self.inv_c = S[-self.keep:], Y[-self.keep:], c[-self.keep:]


def pcg(matvec: Callable[[np.ndarray], np.ndarray], b: np.ndarray, precondition: Callable[[np.ndarray], np.ndarray],
        max_iter: int, rtol: float, enough: Callable[[np.ndarray], bool] | None = None,
        recycle: Recycler | None = None) -> tuple[np.ndarray, int]:
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
    recycle : Recycler, optional
        Directions kept from earlier solves: ``precondition`` is corrected on them, and this solve's
        directions are kept in turn.

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
    if recycle is not None:
        precondition = recycle.wrap(precondition, b.size)
    kept_s: list = []  # this solve's directions, their products and curvatures, for the memory
    kept_y: list = []
    kept_c: list = []
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
        if recycle is not None:
            kept_s.append(direction)
            kept_y.append(hd)
            kept_c.append(curv)
        a = rz / curv
        p += a * direction
        r -= a * hd
        if float(np.sqrt(r @ r)) <= stop or (enough is not None and enough(r)):
            break
        z = precondition(r)
        rz_new = float(r @ z)
        direction, rz = z + (rz_new / rz) * direction, rz_new
    if recycle is not None:
        recycle.add(kept_s, kept_y, kept_c)
    return (p if p.any() else precondition(b)), k
