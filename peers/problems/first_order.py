"""Constrained least-squares problems and their references (OSQP / SciPy), for the
first-order tests and ``bench/first_order.py``."""

from __future__ import annotations

import numpy as np
import scipy.optimize

import peers.osqp


def least_squares(x, args):
    A, b = args
    r = A @ x - b
    return 0.5 * (r @ r)


def data(seed, m=12, n=6, dtype=np.float64):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, n))
    b = rng.normal(size=m) + A @ rng.normal(size=n)
    return A.astype(dtype), b.astype(dtype)


def osqp_ls(A, b, C, lo, hi, P_extra=None):
    """min 1/2||A x - b||^2 s.t. lo <= C x <= hi, by OSQP at 1e-10 with polishing."""
    settings = dict(eps_abs=1e-10, eps_rel=1e-10, polishing=True, max_iter=400000)
    res = peers.osqp.least_squares(A, b, C, lo, hi, raise_error=False, **settings)
    return peers.osqp.solution(res)


def osqp_ls_l1(A, b, r):
    """min 1/2||A y - b||^2 s.t. ||y||_1 <= r, by OSQP on the lift y = p - q, p, q >= 0,
    sum(p + q) <= r (tiny ridge on the lifted Hessian). Also the projections' l1-ball reference."""
    A = np.asarray(A, np.float64)
    b = np.asarray(b, np.float64)
    n = A.shape[1]
    C = np.vstack([np.eye(2 * n), np.ones((1, 2 * n))])
    lo, hi = np.r_[np.zeros(2 * n), -np.inf], np.r_[np.full(2 * n, np.inf), r]
    settings = dict(eps_abs=1e-12, eps_rel=1e-12, polishing=True, max_iter=400000)
    res = peers.osqp.least_squares(
        np.hstack([A, -A]), b, C, lo, hi, ridge=1e-13, raise_error=False, **settings
    )
    x = peers.osqp.solution(res)
    return x[:n] - x[n:]


def ls_l2_ball(A, b, r):
    """min 1/2||A x - b||^2 s.t. ||x|| <= r: x(lam) = (A'A + lam I)^-1 A'b, ||x(lam)|| = r."""
    A = np.asarray(A, np.float64)
    b = np.asarray(b, np.float64)
    H, c = A.T @ A, A.T @ b
    x0 = np.linalg.solve(H, c)
    if np.linalg.norm(x0) <= r:
        return x0
    n = H.shape[0]
    g = lambda lam: np.linalg.norm(np.linalg.solve(H + lam * np.eye(n), c)) - r
    hi = 1.0
    while g(hi) > 0:
        hi *= 2
    lam = scipy.optimize.brentq(g, 0.0, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    return np.linalg.solve(H + lam * np.eye(n), c)
