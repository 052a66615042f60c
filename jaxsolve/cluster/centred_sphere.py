"""The centred ("projected") hypersphere of the K-means lift (Xu, Hou, Chen, Zhang, ICLR 2026)."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxsolve.manifolds.base import Manifold, check_int, default_float

__all__ = ["CentredSphere"]


def _centre(u):
    """``C U = U - 1 1^T U / n``: the columns centred."""
    return u - jnp.mean(u, axis=0, keepdims=True)


@dataclasses.dataclass(frozen=True)
class CentredSphere(Manifold):
    r"""``{V in R^{n x p} : 1^T V = 0, ||V||_F = radius}`` with the embedded metric.

    The first factor of the K-means product manifold ``V x O_r`` of Xu, Hou, Chen and
    Zhang, "Scalable second-order Riemannian optimization for K-means clustering"
    (ICLR 2026, Theorem 2), where ``p = r - 1`` and ``radius = sqrt(K - 1)``: a sphere in
    the linear subspace of column-centred matrices, hence

    * ``proj_V(U) = C U - <V, C U> V / radius^2`` with ``C U = U - 1 1^T U / n``;
    * ``R_V(U) = radius * C(V + U) / ||C(V + U)||`` (second order: a sphere retraction);
    * ``Hess f(V)[U] = proj_V(H) - <V, G> U / radius^2`` (the sphere's Weingarten term).

    Every operation costs ``O(n p)``.
    """

    n: int
    p: int
    radius: float = 1.0

    def __post_init__(self):
        check_int("n", self.n, 2)
        check_int("p", self.p)
        if not (isinstance(self.radius, int | float) and self.radius > 0):
            raise ValueError(f"radius must be a positive number, got {self.radius!r}")

    def proj(self, x, u):
        cu = _centre(u)
        return cu - (jnp.sum(x * cu) / self.radius**2) * x

    def ehess_to_rhess(self, x, g, h, u):
        return self.proj(x, h) - (jnp.sum(x * g) / self.radius**2) * u

    def retract(self, x, u):
        y = _centre(x + u)
        return (self.radius / jnp.linalg.norm(y)) * y

    def residual(self, x):
        return jnp.maximum(
            jnp.abs(jnp.linalg.norm(x) - self.radius), jnp.max(jnp.abs(jnp.sum(x, axis=0)))
        )

    def random_point(self, key, dtype=None):
        z = _centre(jax.random.normal(key, (self.n, self.p), default_float(dtype)))
        return (self.radius / jnp.linalg.norm(z)) * z

    @property
    def dim(self) -> int:
        return (self.n - 1) * self.p - 1

    @property
    def typical_dist(self) -> float:
        return math.pi * self.radius

    @property
    def point_shape(self):
        return (self.n, self.p)
