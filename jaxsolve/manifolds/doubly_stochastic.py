"""Doubly stochastic matrices with the Fisher information metric (Douik and Hassibi 2019)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_floating, check_positive
from jaxsolve.manifolds.base import Manifold, check_int, default_float

__all__ = ["DoublyStochastic", "sinkhorn"]


def sinkhorn(y, *, tol=None, max_iter: int = 2000):
    """Sinkhorn-Knopp scaling of a positive matrix to a doubly stochastic one.

    Alternately divides rows and columns by their sums until the row sums are within
    ``tol`` of one (the column sums are exactly one after each sweep), at most
    ``max_iter`` sweeps (a ``lax.while_loop``: vmap-able). A concrete ``y`` must be
    strictly positive (a zero row would give NaN, a negative entry a matrix off the set),
    ``max_iter`` a positive int and ``tol`` non-negative.
    """
    y = jnp.asarray(y)
    check_floating("y", y, real=True)
    check_positive("y", y)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
    check_positive("tol", tol, allow_none=True, strict=False)
    return _sinkhorn(y, tol, max_iter)


def _sinkhorn(y, tol, max_iter):
    """`sinkhorn` without its input checks (the manifold's own calls: retraction, random
    point; a NaN there propagates to the residual)."""
    dtype = y.dtype
    tol = jnp.asarray(20 * jnp.finfo(dtype).eps * y.shape[0] if tol is None else tol, dtype)

    def cond(carry):
        _, k, err = carry
        return (k < max_iter) & (err > tol)

    def body(carry):
        z, k, _ = carry
        z = z / jnp.sum(z, axis=1, keepdims=True)
        z = z / jnp.sum(z, axis=0, keepdims=True)
        return z, k + 1, jnp.max(jnp.abs(jnp.sum(z, axis=1) - 1))

    z, _, _ = jax.lax.while_loop(cond, body, (y, jnp.int32(0), jnp.asarray(jnp.inf, dtype)))
    return z


def _solve_alpha_beta(x, b1, b2):
    """Solve ``[I X; X^T I] [a; b] = [b1; b2]`` (singular, consistent: 1^T b1 = 1^T b2).

    Eliminating ``a = b1 - X b`` gives ``(I - X^T X) b = b2 - X^T b1``; ``I - X^T X`` has the
    null vector ``1``, so we add ``11^T/n`` and return the zero-mean solution. Manopt uses
    matrix-free PCG for the same system; a dense solve is exact and batches well.
    """
    n = x.shape[0]
    rhs = b2 - x.T @ b1
    rhs = rhs - jnp.mean(rhs)
    a = jnp.eye(n, dtype=x.dtype) - x.T @ x + jnp.full((n, n), 1.0 / n, x.dtype)
    beta = jnp.linalg.solve(a, rhs)
    alpha = b1 - x @ beta
    return alpha, beta


@dataclasses.dataclass(frozen=True)
class DoublyStochastic(Manifold):
    """Positive ``n x n`` doubly stochastic matrices with the Fisher metric.

    The reference geometry of Douik and Hassibi (2019), "Manifold optimization over
    the set of doubly stochastic matrices: a second-order geometry" (IEEE TSP), as in
    Manopt's ``multinomialdoublystochasticfactory``:

    * metric ``<U, V>_X = sum_ij U_ij V_ij / X_ij``; tangent space ``{Z : Z1 = 0, Z^T 1 = 0}``;
    * ``proj_X(Z) = Z - (alpha 1^T + 1 beta^T) * X`` with ``[I X; X^T I][alpha; beta] =
      [Z1; Z^T 1]`` (orthogonal in the Fisher metric);
    * ``grad f(X) = proj_X(X * G)``;
    * ``Hess f(X)[U] = proj_X(dgrad - (grad * U) / (2X))``: the directional derivative of the
      gradient plus the Christoffel term of the Fisher metric ``sum dX^2 / X``;
    * retraction ``R_X(U) = Sinkhorn(X * exp(U / X))`` (first order only);
    * dimension ``(n - 1)^2``, typical distance ``n`` (as Manopt).

    The RIM manifold of the cluster family is compared against this one.
    """

    n: int
    max_sinkhorn: int = 2000

    def __post_init__(self):
        check_int("n", self.n, 2)
        check_int("max_sinkhorn", self.max_sinkhorn)

    def inner(self, x, u, v):
        return jnp.sum(u * v / x)

    def proj(self, x, z):
        alpha, beta = _solve_alpha_beta(x, jnp.sum(z, axis=1), jnp.sum(z, axis=0))
        return z - (alpha[:, None] + beta[None, :]) * x

    def egrad_to_rgrad(self, x, g):
        return self.proj(x, x * g)

    def ehess_to_rhess(self, x, g, h, u):
        gamma = g * x
        gamma_dot = h * x + g * u
        alpha, beta = _solve_alpha_beta(x, jnp.sum(gamma, 1), jnp.sum(gamma, 0))
        alpha_dot, beta_dot = _solve_alpha_beta(
            x, jnp.sum(gamma_dot, 1) - u @ beta, jnp.sum(gamma_dot, 0) - u.T @ alpha
        )
        s = alpha[:, None] + beta[None, :]
        delta = gamma - s * x  # the Riemannian gradient
        delta_dot = gamma_dot - (alpha_dot[:, None] + beta_dot[None, :]) * x - s * u
        return self.proj(x, delta_dot - 0.5 * delta * u / x)

    def retract(self, x, u):
        # X * exp(U/X), with each row rescaled by its max first (Sinkhorn is invariant to
        # diagonal scalings) so that large steps cannot overflow.
        dtype = x.dtype
        logy = jnp.log(x) + u / x
        logy = logy - jnp.max(logy, axis=1, keepdims=True)
        floor = jnp.finfo(dtype).tiny ** 0.25
        y = jnp.maximum(jnp.exp(logy), floor)
        return _sinkhorn(y, None, self.max_sinkhorn)

    def residual(self, x):
        return jnp.maximum(
            jnp.maximum(
                jnp.max(jnp.abs(jnp.sum(x, 1) - 1)),
                jnp.max(jnp.abs(jnp.sum(x, 0) - 1)),
            ),
            jnp.max(jnp.maximum(-x, 0)),
        )

    def random_point(self, key, dtype=None):
        z = jnp.abs(jax.random.normal(key, (self.n, self.n), default_float(dtype)))
        return _sinkhorn(z + 0.05, None, self.max_sinkhorn)

    @property
    def dim(self) -> int:
        return (self.n - 1) ** 2

    @property
    def typical_dist(self) -> float:
        return float(self.n)

    @property
    def point_shape(self):
        return (self.n, self.n)
