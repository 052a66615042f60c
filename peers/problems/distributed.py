"""Centralized references for the decentralized problems (``jaxsolve.distributed``),
shared by ``tests/distributed`` and ``bench/distributed.py``.

Problems are stacked per agent: ``A`` ``(n_agents, m, d)``, ``b`` ``(n_agents, m)``, and
the objective is the average loss over all ``n_agents * m`` rows plus the regularizer.
"""

from __future__ import annotations

import numpy as np


def stack(A, b):
    """The agents' rows as one problem: ``(X, y, m)``, ``X`` ``(n_agents * m, d)`` (float64)."""
    A, b = np.asarray(A, np.float64), np.asarray(b, np.float64)
    n, m, d = A.shape
    return A.reshape(n * m, d), b.reshape(n * m), m


def lasso(A, b, lam, *, iterations: int = 20000):
    """argmin sum_i 1/(2m)||A_i x - b_i||^2 + lam ||x||_1, to machine precision: proximal
    gradient until the support settles (``iterations`` steps of 1/L), then the exact solve
    on that support and sign pattern, checked by the KKT conditions (an AssertionError
    when the support had not settled)."""
    X, y, m = stack(A, b)
    H, g = X.T @ X / m, X.T @ y / m
    L = np.linalg.eigvalsh(H)[-1]
    x = np.zeros(X.shape[1])
    for _ in range(iterations):
        z = x - (H @ x - g) / L
        x = np.sign(z) * np.maximum(np.abs(z) - lam / L, 0.0)
    S = np.flatnonzero(x)
    xs = np.zeros_like(x)
    xs[S] = np.linalg.solve(H[np.ix_(S, S)], g[S] - lam * np.sign(x[S]))
    grad = H @ xs - g
    off = np.setdiff1d(np.arange(len(x)), S)
    assert np.all(np.sign(xs[S]) == np.sign(x[S]))
    assert np.max(np.abs(grad[S] + lam * np.sign(xs[S])), initial=0) < 1e-12
    assert np.max(np.abs(grad[off]), initial=0) <= lam * (1 + 1e-12)
    return xs


def logistic_l2(A, b, lam):
    """argmin sum_i 1/m sum_j log(1 + exp(-b_ij a_ij^T x)) + lam/2 ||x||^2 by Newton's
    method (quadratic convergence: machine precision in a few steps)."""
    X, y, m = stack(A, b)
    x = np.zeros(X.shape[1])
    for _ in range(50):
        t = y * (X @ x)
        s = 1.0 / (1.0 + np.exp(t))  # sigmoid(-t)
        grad = X.T @ (-y * s) / m + lam * x
        hess = (X * (s * (1 - s))[:, None]).T @ X / m + lam * np.eye(len(x))
        dx = np.linalg.solve(hess, grad)
        x = x - dx
        if np.linalg.norm(dx) < 1e-15 * max(1.0, np.linalg.norm(x)):
            break
    assert np.linalg.norm(grad) < 1e-11
    return x
