"""Small SCM instances and NumPy/SciPy references shared by the submodular tests."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

PHIS = {
    "sqrt": np.sqrt,
    "log1p": np.log1p,
    "coverage": lambda z: -np.expm1(-z),
}


def np_value(M, w, phi, S, cap=None):
    """f(S) computed directly from the definition (NumPy, no jaxsolve code)."""
    z = np.asarray(M)[:, np.asarray(S, bool)].sum(axis=1)
    if phi == "saturate":
        return float(np.sum(w * np.minimum(z, cap)))
    return float(np.sum(w * PHIS[phi](z)))


def random_scm(rng, m, n, density=0.4):
    M = rng.uniform(0.0, 1.0, (m, n)) * (rng.uniform(size=(m, n)) < density)
    w = rng.uniform(0.5, 1.5, m)
    return M, w


def all_masks(n):
    return np.array(list(itertools.product([0, 1], repeat=n)), dtype=np.float64)


def relaxation_reference(M, w, phi, A, b):
    """max_x sum_i w_i phi((Mx)_i) over {0 <= x <= 1, A x <= b} by SciPy's SLSQP."""
    M, w = np.asarray(M, np.float64), np.asarray(w, np.float64)
    n = M.shape[1]
    fun = {"log1p": (np.log1p, lambda z: 1 / (1 + z))}[phi]

    def neg(x):
        z = M @ x
        return -np.sum(w * fun[0](z)), -(M.T @ (w * fun[1](z)))

    cons = {"type": "ineq", "fun": lambda x: b - A @ x, "jac": lambda x: -A}
    x0 = np.full(n, 0.5 * min(1.0, float(np.min(b / A.sum(axis=1)))))
    res = minimize(
        neg,
        x0,
        jac=True,
        bounds=[(0, 1)] * n,
        constraints=[cons],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    return res.x


def as_jnp(*arrays, dtype=jnp.float64):
    return tuple(jnp.asarray(a, dtype) for a in arrays)
