"""The unit sphere and the oblique manifold (unit-norm columns)."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxsolve.manifolds.base import Manifold, check_int, default_float
from jaxsolve.manifolds.euclidean import normalize_shape

__all__ = ["Sphere", "Oblique"]


def _chordal_to_angle(c):
    # 2 asin(c/2) is accurate for tiny distances, where arccos(<x, y>) is not.
    return 2.0 * jnp.arcsin(jnp.clip(c / 2.0, 0.0, 1.0))


@dataclasses.dataclass(frozen=True, init=False)
class Sphere(Manifold):
    """Unit Frobenius-norm arrays ``{x : ||x||_F = 1}`` of a given shape (Manopt ``spherefactory``).

    * ``proj_x(u) = u - <x, u> x``
    * ``R_x(u) = (x + u) / ||x + u||`` (second order)
    * ``Hess f(x)[u] = proj_x(h) - <x, g> u`` (the Weingarten term of the sphere)
    * ``dist(x, y) = 2 asin(||x - y|| / 2)`` (the great-circle angle)
    """

    shape: tuple[int, ...]

    def __init__(self, *shape):
        object.__setattr__(self, "shape", normalize_shape(shape))
        if self.size < 2:
            raise ValueError(f"Sphere needs at least 2 entries, got shape {self.shape}")

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def proj(self, x, u):
        return u - jnp.sum(x * u) * x

    def ehess_to_rhess(self, x, g, h, u):
        return self.proj(x, h) - jnp.sum(x * g) * u

    def retract(self, x, u):
        y = x + u
        return y / jnp.linalg.norm(y.ravel())

    def exp(self, x, u):
        """The exponential map ``cos(|u|) x + sin(|u|) u/|u|``."""
        t = jnp.linalg.norm(u.ravel())
        safe = jnp.where(t > 0, t, 1.0)
        y = jnp.cos(t) * x + jnp.where(t > 0, jnp.sin(t) / safe, 1.0) * u
        return y / jnp.linalg.norm(y.ravel())

    def dist(self, x, y):
        return _chordal_to_angle(jnp.linalg.norm((x - y).ravel()))

    def residual(self, x):
        return jnp.abs(jnp.linalg.norm(x.ravel()) - 1.0)

    def random_point(self, key, dtype=None):
        z = jax.random.normal(key, self.shape, default_float(dtype))
        return z / jnp.linalg.norm(z.ravel())

    @property
    def dim(self) -> int:
        return self.size - 1

    @property
    def typical_dist(self) -> float:
        return math.pi

    @property
    def point_shape(self):
        return self.shape


@dataclasses.dataclass(frozen=True)
class Oblique(Manifold):
    """``m x n`` matrices with unit-norm columns (a product of ``n`` spheres in ``R^m``).

    * ``proj_X(U) = U - X diag(diag(X^T U))``
    * ``R_X(U)`` normalizes the columns of ``X + U`` (second order)
    * ``Hess f(X)[U] = proj_X(H) - U diag(diag(X^T G))``
    """

    m: int
    n: int

    def __post_init__(self):
        check_int("m", self.m, 2)
        check_int("n", self.n)

    def proj(self, x, u):
        return u - x * jnp.sum(x * u, axis=0, keepdims=True)

    def ehess_to_rhess(self, x, g, h, u):
        return self.proj(x, h) - u * jnp.sum(x * g, axis=0, keepdims=True)

    def retract(self, x, u):
        y = x + u
        return y / jnp.linalg.norm(y, axis=0, keepdims=True)

    def dist(self, x, y):
        return jnp.linalg.norm(_chordal_to_angle(jnp.linalg.norm(x - y, axis=0)))

    def residual(self, x):
        return jnp.max(jnp.abs(jnp.linalg.norm(x, axis=0) - 1.0))

    def random_point(self, key, dtype=None):
        z = jax.random.normal(key, (self.m, self.n), default_float(dtype))
        return z / jnp.linalg.norm(z, axis=0, keepdims=True)

    @property
    def dim(self) -> int:
        return (self.m - 1) * self.n

    @property
    def typical_dist(self) -> float:
        return math.pi * math.sqrt(self.n)

    @property
    def point_shape(self):
        return (self.m, self.n)
