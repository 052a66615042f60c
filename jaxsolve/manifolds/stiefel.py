"""Orthonormal frames: the Stiefel manifold and the orthogonal group."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxsolve.manifolds.base import Manifold, check_int, default_float, sym

__all__ = ["Stiefel", "Orthogonal"]

_RETRACTIONS = ("polar", "qr")


def polar_factor(y):
    """The orthonormal polar factor ``U V^T`` of ``y = U S V^T`` (closest orthonormal frame)."""
    u, _, vt = jnp.linalg.svd(y, full_matrices=False)
    return u @ vt


def qr_factor(y):
    """``Q`` of ``y = QR`` with ``diag(R) >= 0`` (the sign fix makes it a retraction)."""
    q, r = jnp.linalg.qr(y)
    s = jnp.sign(jnp.diagonal(r))
    s = jnp.where(s == 0, 1, s).astype(q.dtype)
    return q * s


def _stiefel_proj(x, u):
    """``U - X sym(X^T U)``: the projection onto ``T_X St``."""
    return u - x @ sym(x.T @ u)


def _stiefel_rhess(x, g, h, u):
    # Embedded metric: Hess f(X)[U] = proj_X(H - U sym(X^T G)) (Absil, Mahony, Trumpf 2013).
    return _stiefel_proj(x, h - u @ sym(x.T @ g))


@dataclasses.dataclass(frozen=True)
class Stiefel(Manifold):
    """``St(n, p) = {X in R^{n x p} : X^T X = I_p}`` with the embedded (Euclidean) metric.

    * ``proj_X(U) = U - X sym(X^T U)``
    * ``Hess f(X)[U] = proj_X(H - U sym(X^T G))``
    * retraction ``"polar"`` (default): ``R_X(U) = (X + U)(I + U^T U)^{-1/2}`` computed as the
      polar factor of ``X + U`` (second order); ``"qr"``: the Q factor of ``X + U`` with
      a non-negative diagonal of R (first order only).
    """

    n: int
    p: int
    retraction: str = "polar"

    def __post_init__(self):
        check_int("n", self.n)
        check_int("p", self.p)
        if self.p > self.n:
            raise ValueError(f"Stiefel needs p <= n, got n={self.n}, p={self.p}")
        if self.retraction not in _RETRACTIONS:
            raise ValueError(f"retraction must be one of {_RETRACTIONS}, got {self.retraction!r}")

    def proj(self, x, u):
        return _stiefel_proj(x, u)

    def ehess_to_rhess(self, x, g, h, u):
        return _stiefel_rhess(x, g, h, u)

    def retract(self, x, u):
        if self.retraction == "qr":
            return qr_factor(x + u)
        return polar_factor(x + u)

    def residual(self, x):
        return jnp.linalg.norm(x.T @ x - jnp.eye(x.shape[1], dtype=x.dtype))

    def random_point(self, key, dtype=None):
        return qr_factor(jax.random.normal(key, (self.n, self.p), default_float(dtype)))

    @property
    def dim(self) -> int:
        return self.n * self.p - self.p * (self.p + 1) // 2

    @property
    def typical_dist(self) -> float:
        return math.sqrt(self.p)

    @property
    def point_shape(self):
        return (self.n, self.p)


@dataclasses.dataclass(frozen=True)
class Orthogonal(Manifold):
    """The orthogonal group ``O(n) = {Q : Q^T Q = I}`` as a submanifold of ``R^{n x n}``.

    Tangent vectors are ambient matrices ``U = Q Omega`` with ``Omega`` skew:
    ``proj_Q(U) = skew(U Q^T) Q = Q skew(Q^T U)``; retraction: polar factor of ``Q + U``
    (``((Q + U)(Q + U)^T)^{-1/2} (Q + U)``, second order); ``Hess`` as for ``St(n, n)``.
    ``dist`` is not offered (it needs a matrix logarithm).
    """

    n: int

    def __post_init__(self):
        check_int("n", self.n)

    def proj(self, x, u):
        return _stiefel_proj(x, u)

    def ehess_to_rhess(self, x, g, h, u):
        return _stiefel_rhess(x, g, h, u)

    def retract(self, x, u):
        return polar_factor(x + u)

    def residual(self, x):
        return jnp.linalg.norm(x.T @ x - jnp.eye(self.n, dtype=x.dtype))

    def random_point(self, key, dtype=None):
        return qr_factor(jax.random.normal(key, (self.n, self.n), default_float(dtype)))

    @property
    def dim(self) -> int:
        return self.n * (self.n - 1) // 2

    @property
    def typical_dist(self) -> float:
        return math.pi * math.sqrt(self.n)

    @property
    def point_shape(self):
        return (self.n, self.n)
