"""Flattening helpers and curvature operators shared by the second-order solvers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree


def flat_fun(fun, x_like, args):
    """``(flat_fun, unravel)``: ``fun(x, args)`` as a function of the raveled iterate."""
    _, unravel = ravel_pytree(x_like)
    return (lambda v: fun(unravel(v), args)), unravel


def dense_from_matvec(matvec, n: int, dtype):
    """Materialize a symmetric linear operator column by column (n matvecs, vmapped)."""
    eye = jnp.eye(n, dtype=dtype)
    cols = jax.vmap(matvec)(eye)  # row i = A e_i = column i
    A = cols.T
    return 0.5 * (A + A.T)


def cg_solve(matvec, b, *, tol, maxiter: int):
    """Conjugate gradients for SPD ``matvec``; returns the iterate after at most maxiter steps."""
    x, _ = jax.scipy.sparse.linalg.cg(matvec, b, tol=tol, maxiter=maxiter)
    return x
