"""The four Frank-Wolfe reference problems, with f* from trusted solvers (shared by tests and bench).

* ``simplex_qp``: convex QP on the probability simplex, f* from OSQP (eps 1e-12, polished).
* ``l1_logistic``: l1-ball-constrained logistic regression on scikit-learn's
  breast_cancer (standardized), f* from SciPy SLSQP on the split form x = p - q.
* ``matrix_completion``: 50x40 rank-3 + noise, 40% observed, nuclear-norm ball, f* from
  FISTA with exact SVD projections (NumPy, 3000 iterations, converged to ~1e-12).
* ``ksparse_qp``: least squares over the K-sparse polytope, f* from OSQP on the split form.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

import peers.osqp
from jaxsolve.frank_wolfe import lmo as lmos


class Problem(NamedTuple):
    name: str
    fun: Any
    lmo: Any
    x0: Any
    args: Any
    fstar: float
    lipschitz: float
    diameter_sq: float


def _osqp(P, q, A, lo, hi):
    r = peers.osqp.solve(
        P, q, A, lo, hi, eps_abs=1e-12, eps_rel=1e-12, eps_prim_inf=1e-14, eps_dual_inf=1e-14,
        max_iter=200000, polishing=True,
    )  # fmt: skip
    return peers.osqp.solution(r, accept=("solved", "solved inaccurate"))


def quad(x, args):
    Q, c = args
    return 0.5 * x @ (Q @ x) + c @ x


def logistic(w, args):
    X, y = args
    return jnp.mean(jnp.logaddexp(0.0, -y * (X @ w)))


def completion(X, args):
    M, W = args
    return 0.5 * jnp.sum((W * (X - M)) ** 2)


def least_squares(x, args):
    A, b = args
    r = A @ x - b
    return 0.5 * jnp.dot(r, r) / A.shape[0]


@functools.lru_cache
def simplex_qp(n: int = 30, seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((40, n))
    Q = B.T @ B / 40
    c = -B.T @ rng.standard_normal(40) / 40
    A = np.vstack([np.ones((1, n)), np.eye(n)])
    xs = _osqp(Q, c, A, np.r_[1.0, np.zeros(n)], np.r_[1.0, np.full(n, np.inf)])
    xs = np.maximum(xs, 0)
    xs /= xs.sum()
    fstar = 0.5 * xs @ Q @ xs + c @ xs
    return Problem(
        "simplex_qp", quad, lmos.probability_simplex(), jnp.full(n, 1.0 / n),
        (jnp.asarray(Q), jnp.asarray(c)), float(fstar), float(np.linalg.eigvalsh(Q)[-1]), 2.0,
    )  # fmt: skip


@functools.lru_cache
def l1_logistic(radius: float = 5.0) -> Problem:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = np.where(y > 0, 1.0, -1.0)
    n, d = X.shape

    def fg(z):
        w = z[:d] - z[d:]
        m = -y * (X @ w)
        f = np.mean(np.logaddexp(0.0, m))
        s = 0.5 * (1 + np.tanh(0.5 * m))  # sigmoid(m)
        gw = X.T @ (-y * s) / n
        return f, np.r_[gw, -gw]

    cons = [{"type": "ineq", "fun": lambda z: radius - z.sum(), "jac": lambda z: -np.ones(2 * d)}]
    res = minimize(
        fg, np.full(2 * d, radius / (4 * d)), jac=True, method="SLSQP",
        bounds=[(0, None)] * (2 * d), constraints=cons, options={"ftol": 1e-16, "maxiter": 2000},
    )  # fmt: skip
    fstar = float(res.fun)
    L = float(np.linalg.eigvalsh(X.T @ X)[-1] / (4 * n))
    return Problem(
        "l1_logistic", logistic, lmos.l1_ball(radius), jnp.zeros(d),
        (jnp.asarray(X), jnp.asarray(y)), fstar, L, 4 * radius**2,
    )  # fmt: skip


def _proj_l1(s, t):
    if s.sum() <= t:
        return s
    u = np.sort(s)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u * np.arange(1, len(u) + 1) > (css - t))[0][-1]
    return np.maximum(s - (css[k] - t) / (k + 1), 0)


@functools.lru_cache
def matrix_completion(m: int = 50, n: int = 40, rank: int = 3, seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
    M += 0.1 * rng.standard_normal((m, n))
    W = (rng.uniform(size=(m, n)) < 0.4).astype(float)
    tau = 0.5 * np.linalg.svd(M, compute_uv=False).sum()

    def proj(Z):
        U, s, Vt = np.linalg.svd(Z, full_matrices=False)
        return (U * _proj_l1(s, tau)) @ Vt

    X = np.zeros((m, n))
    Y, t = X.copy(), 1.0
    for _ in range(3000):  # FISTA, L = 1
        Xn = proj(Y - W * (Y - M))
        tn = (1 + np.sqrt(1 + 4 * t * t)) / 2
        Y = Xn + (t - 1) / tn * (Xn - X)
        X, t = Xn, tn
    fstar = 0.5 * np.sum((W * (X - M)) ** 2)
    return Problem(
        "matrix_completion", completion, lmos.nuclear_ball(tau, steps=min(m, n)),
        jnp.zeros((m, n)), (jnp.asarray(M), jnp.asarray(W)), float(fstar), 1.0, 4 * tau**2,
    )  # fmt: skip


@functools.lru_cache
def ksparse_qp(m: int = 40, n: int = 60, k: int = 5, radius: float = 0.5, seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n))
    x_true = np.zeros(n)
    x_true[:8] = rng.uniform(-1, 1, 8)
    b = A @ x_true + 0.1 * rng.standard_normal(m)
    # split x = p - q, 0 <= p, q <= radius, sum(p + q) <= k * radius
    AA = np.hstack([A, -A])
    P = AA.T @ AA / m
    q = -AA.T @ b / m
    C = np.vstack([np.ones((1, 2 * n)), np.eye(2 * n)])
    z = _osqp(P, q, C, np.r_[-np.inf, np.zeros(2 * n)], np.r_[k * radius, np.full(2 * n, radius)])
    x = np.clip(z[:n], 0, radius) - np.clip(z[n:], 0, radius)
    fstar = 0.5 * np.sum((A @ x - b) ** 2) / m
    L = float(np.linalg.eigvalsh(A.T @ A)[-1] / m)
    return Problem(
        "ksparse_qp", least_squares, lmos.k_sparse(k, radius), jnp.zeros(n),
        (jnp.asarray(A), jnp.asarray(b)), float(fstar), L, 4 * k * radius**2,
    )  # fmt: skip


ALL = (simplex_qp, l1_logistic, matrix_completion, ksparse_qp)
