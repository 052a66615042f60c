"""References for the decentralized tests: the stacked ADMM and per-agent loops (the
centralized solutions are `peers.problems.distributed`'s).

Nothing here imports jaxsolve.distributed's solvers: these are the independent
computations the solvers are checked against.
"""

from __future__ import annotations

import numpy as np

# re-exported: the tests call the centralized references as ref.lasso, ref.stack, ...
from peers.problems.distributed import lasso, logistic_l2, stack  # noqa: F401


def consensus_distance(X, x_star):
    """||X - 1 x*^T||_F / (sqrt(n) ||x*||)."""
    X = np.asarray(X, np.float64)
    return float(np.linalg.norm(X - x_star[None]) / (np.sqrt(len(X)) * np.linalg.norm(x_star)))


def stacked_symmetric_admm(A, b, W, lam, x0, *, beta, r, s, tau, steps, f_step="prox"):
    """Generalized symmetric ADMM on min f(u) + g(v) s.t. [W; I]u - [I; W]v = 0, written
    with the dense Kronecker matrices and the subproblems solved as linear systems
    (least squares f, g = lam ||.||_1 shared as lam/n per agent). Returns the iterates
    (u, v) after each step, as (n, d) arrays."""
    A, b, W = (np.asarray(v, np.float64) for v in (A, b, W))
    n, m, d = A.shape
    I = np.eye(n * d)
    Wt = np.kron(W, np.eye(d))
    Am = np.vstack([Wt, I])
    Bm = np.vstack([I, Wt])
    Q = beta * ((1 + tau) * I - Wt @ Wt)
    H = np.zeros((n * d, n * d))
    for i in range(n):
        H[i * d : (i + 1) * d, i * d : (i + 1) * d] = A[i].T @ A[i] / m
    Atb = np.concatenate([A[i].T @ b[i] / m for i in range(n)])
    lips = np.repeat([np.linalg.norm(A[i], 2) ** 2 / m for i in range(n)], d)
    u = v = np.asarray(x0, np.float64).ravel()
    lamb = np.zeros(2 * n * d)
    M = beta * Bm.T @ Bm + Q
    c = M[0, 0]
    assert np.allclose(M, c * I, atol=1e-12)  # the proximal term makes the v-step separable
    out = []
    for _ in range(steps):
        rhs = Am.T @ lamb + beta * Am.T @ (Bm @ v) + Q @ u
        if f_step == "prox":
            u = np.linalg.solve(H + beta * Am.T @ Am + Q, rhs + Atb)
        else:  # f linearized at u with the curvature diag(L_i)
            grad = H @ u - Atb
            u = np.linalg.solve(np.diag(lips) + beta * Am.T @ Am + Q, rhs + lips * u - grad)
        lamb = lamb - r * beta * (Am @ u - Bm @ v)
        z = (Bm.T @ (beta * Am @ u - lamb) + Q @ v) / c
        v = np.sign(z) * np.maximum(np.abs(z) - lam / (n * c), 0.0)
        lamb = lamb - s * beta * (Am @ u - Bm @ v)
        out.append((u.reshape(n, d).copy(), v.reshape(n, d).copy()))
    return out


def stacked_plain_admm(A, b, W, lam, x0, *, beta, tau, steps):
    """Proximal ADMM (one dual update per iteration) on the same constraints and the
    same proximal term: what symmetric ADMM must reduce to at r = 0."""
    A, b, W = (np.asarray(v, np.float64) for v in (A, b, W))
    n, m, d = A.shape
    I = np.eye(n * d)
    Wt = np.kron(W, np.eye(d))
    Am, Bm = np.vstack([Wt, I]), np.vstack([I, Wt])
    Q = beta * ((1 + tau) * I - Wt @ Wt)
    H = np.zeros((n * d, n * d))
    for i in range(n):
        H[i * d : (i + 1) * d, i * d : (i + 1) * d] = A[i].T @ A[i] / m
    Atb = np.concatenate([A[i].T @ b[i] / m for i in range(n)])
    c = beta * (2 + tau)
    u = v = np.asarray(x0, np.float64).ravel()
    lamb = np.zeros(2 * n * d)
    out = []
    for _ in range(steps):
        u = np.linalg.solve(
            H + beta * Am.T @ Am + Q, Am.T @ lamb + beta * Am.T @ (Bm @ v) + Q @ u + Atb
        )
        z = (Bm.T @ (beta * Am @ u - lamb) + Q @ v) / c
        v = np.sign(z) * np.maximum(np.abs(z) - lam / (n * c), 0.0)
        lamb = lamb - beta * (Am @ u - Bm @ v)
        out.append((u.reshape(n, d).copy(), v.reshape(n, d).copy()))
    return out


# --- the baselines as textbook per-agent loops (neighbour lists, one agent at a time) ---------


def _nbrs(W):
    W = np.asarray(W)
    return [[j for j in range(len(W)) if j != i and W[i, j] != 0] for i in range(len(W))]


def _mix(W, nb, X):
    W = np.asarray(W)
    return np.stack([W[i, i] * X[i] + sum(W[i, j] * X[j] for j in nb[i]) for i in range(len(X))])


def _ls_grad(A, b, x):
    return A.T @ (A @ x - b) / A.shape[0]


def _soft(z, t):
    return np.sign(z) * np.maximum(np.abs(z) - t, 0.0)


def loop_pg_extra(A, b, W, lam, x0, alpha, steps):
    """PG-EXTRA (Shi et al. 2015, Algorithm 1) per agent: x^{1/2} = W x^0 - a grad(x^0),
    then x^{k+3/2} = W x^{k+1} + x^{k+1/2} - W~ x^k - a (grad(x^{k+1}) - grad(x^k))."""
    A, b = np.asarray(A, np.float64), np.asarray(b, np.float64)
    n = len(A)
    nb = _nbrs(W)
    grad = lambda X: np.stack([_ls_grad(A[i], b[i], X[i]) for i in range(n)])
    prox = lambda Z: _soft(Z, alpha * lam / n)
    x_prev = np.asarray(x0, np.float64)
    z = _mix(W, nb, x_prev) - alpha * grad(x_prev)
    x = prox(z)
    out = [x]
    for _ in range(steps - 1):
        wt_prev = 0.5 * (x_prev + _mix(W, nb, x_prev))
        z = _mix(W, nb, x) + z - wt_prev - alpha * (grad(x) - grad(x_prev))
        x_prev, x = x, prox(z)
        out.append(x)
    return out


def loop_nids(A, b, W, lam, x0, alpha, steps):
    """NIDS (Li, Shi, Yan 2019) per agent: z^1 = x^0 - a grad(x^0), then
    z^{k+1} = z^k - x^k + W~(2x^k - x^{k-1} - a grad(x^k) + a grad(x^{k-1}))."""
    A, b = np.asarray(A, np.float64), np.asarray(b, np.float64)
    n = len(A)
    nb = _nbrs(W)
    grad = lambda X: np.stack([_ls_grad(A[i], b[i], X[i]) for i in range(n)])
    prox = lambda Z: _soft(Z, alpha * lam / n)
    x_prev = np.asarray(x0, np.float64)
    z = x_prev - alpha * grad(x_prev)
    x = prox(z)
    out = [x]
    for _ in range(steps - 1):
        y = 2 * x - x_prev - alpha * (grad(x) - grad(x_prev))
        z = z - x + 0.5 * (y + _mix(W, nb, y))
        x_prev, x = x, prox(z)
        out.append(x)
    return out


def loop_dgd(A, b, W, lam, x0, alpha, steps):
    A, b = np.asarray(A, np.float64), np.asarray(b, np.float64)
    n = len(A)
    nb = _nbrs(W)
    x = np.asarray(x0, np.float64)
    out = []
    for _ in range(steps):
        g = np.stack([_ls_grad(A[i], b[i], x[i]) for i in range(n)])
        x = _soft(_mix(W, nb, x) - alpha * g, alpha * lam / n)
        out.append(x)
    return out


def loop_dadmm(A, b, W, lam, x0, c, steps):
    """Decentralized ADMM (Shi et al. 2014) with the local loss linearized (DLM): agent i
    minimizes <grad f_i(x_i^k), x> + L_i/2 ||x - x_i^k||^2 + g(x)/n + <a_i, x>
    + c sum_j ||x - (x_i^k + x_j^k)/2||^2, then a_i += c (d_i x_i - sum_j x_j)."""
    A, b = np.asarray(A, np.float64), np.asarray(b, np.float64)
    n = len(A)
    nb = _nbrs(W)
    L = [np.linalg.norm(A[i], 2) ** 2 / A.shape[1] for i in range(n)]
    x = np.asarray(x0, np.float64).copy()
    dual = np.zeros_like(x)
    out = []
    for _ in range(steps):
        new = np.empty_like(x)
        for i in range(n):
            deg = len(nb[i])
            s = sum(x[j] for j in nb[i])
            w = L[i] + 2 * c * deg
            z = (L[i] * x[i] - _ls_grad(A[i], b[i], x[i]) - dual[i] + c * (deg * x[i] + s)) / w
            new[i] = _soft(z, lam / (n * w))
        x = new
        for i in range(n):
            dual[i] = dual[i] + c * (len(nb[i]) * x[i] - sum(x[j] for j in nb[i]))
        out.append(x.copy())
    return out
