"""Flat manifolds: Euclidean space and symmetric matrices."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxsolve.manifolds.base import Manifold, check_int, default_float, sym

__all__ = ["Euclidean", "Symmetric"]


def normalize_shape(shape) -> tuple[int, ...]:
    """``shape`` (given as ints or as one tuple/list) as a nonempty tuple of checked ints."""
    if len(shape) == 1 and isinstance(shape[0], tuple | list):
        shape = tuple(shape[0])
    if not shape:
        raise ValueError("shape must name at least one dimension")
    return tuple(check_int(f"shape[{i}]", s) for i, s in enumerate(shape))


@dataclasses.dataclass(frozen=True, init=False)
class Euclidean(Manifold):
    """``R^{shape}`` with the Frobenius metric: ``proj = id``, ``R_x(u) = x + u``.

    ``Hess f(x)[u] = nabla^2 f(x)[u]``: no curvature term.
    """

    shape: tuple[int, ...]

    def __init__(self, *shape):
        object.__setattr__(self, "shape", normalize_shape(shape))

    def proj(self, x, u):
        return u

    def ehess_to_rhess(self, x, g, h, u):
        return h

    def retract(self, x, u):
        return x + u

    def dist(self, x, y):
        return jnp.linalg.norm((x - y).ravel())

    def residual(self, x):
        return jnp.zeros((), jnp.result_type(x))

    def random_point(self, key, dtype=None):
        return jax.random.normal(key, self.shape, default_float(dtype))

    @property
    def dim(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def point_shape(self):
        return self.shape


@dataclasses.dataclass(frozen=True)
class Symmetric(Manifold):
    """Symmetric ``n x n`` matrices ``S^n`` (a linear subspace, Frobenius metric).

    ``proj(u) = sym(u) = (u + u^T)/2``, ``R_x(u) = x + u``, ``Hess f(x)[u] = sym(h)``.
    The magnitude factor ``Theta`` of weight-normalized matrix sensing
    (``jaxsolve.sensing.weight_normalized``) lives here.
    """

    n: int

    def __post_init__(self):
        check_int("n", self.n)

    def proj(self, x, u):
        return sym(u)

    def ehess_to_rhess(self, x, g, h, u):
        return sym(h)

    def retract(self, x, u):
        return x + sym(u)

    def dist(self, x, y):
        return jnp.linalg.norm(x - y)

    def residual(self, x):
        return jnp.linalg.norm(x - x.T)

    def random_point(self, key, dtype=None):
        return sym(jax.random.normal(key, (self.n, self.n), default_float(dtype)))

    @property
    def dim(self) -> int:
        return self.n * (self.n + 1) // 2

    @property
    def point_shape(self):
        return (self.n, self.n)
