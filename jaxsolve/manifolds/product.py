"""Products of manifolds: points are tuples, one entry per factor."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxsolve.manifolds.base import Manifold

__all__ = ["Product"]


@dataclasses.dataclass(frozen=True, init=False)
class Product(Manifold):
    """``M_1 x ... x M_k`` with the sum metric; a point is a tuple ``(x_1, ..., x_k)``.

    Every operation acts factor by factor; ``inner`` sums the factors' metrics, so
    ``Hess``, ``proj`` and ``retract`` are the factors' own. Factors may themselves be
    products (nested tuples). Used by weight-normalized sensing (``Stiefel x Symmetric``)
    and the K-means lift (``centred sphere x Orthogonal``). Solvers offer alternating
    (block) updates over the factors of a product.

    Build with ``Product(Stiefel(10, 5), Symmetric(5))`` or ``Product((m1, m2))``.
    """

    manifolds: tuple[Manifold, ...]

    def __init__(self, *manifolds):
        if len(manifolds) == 1 and isinstance(manifolds[0], tuple | list):
            manifolds = tuple(manifolds[0])
        if not manifolds:
            raise ValueError("Product needs at least one manifold")
        for i, m in enumerate(manifolds):
            if not isinstance(m, Manifold):
                raise TypeError(f"manifolds[{i}] must be a Manifold, got {type(m).__name__}")
        object.__setattr__(self, "manifolds", tuple(manifolds))

    def __len__(self):
        return len(self.manifolds)

    def _check(self, x):
        if not isinstance(x, tuple) or len(x) != len(self.manifolds):
            raise TypeError(
                f"a point of a Product of {len(self.manifolds)} manifolds is a tuple of "
                f"that length, got {type(x).__name__}"
            )

    def _map(self, name, x, *rest):
        self._check(x)
        return tuple(
            getattr(m, name)(*parts) for m, *parts in zip(self.manifolds, x, *rest, strict=True)
        )

    def inner(self, x, u, v):
        vals = self._map("inner", x, u, v)
        return sum(vals[1:], vals[0])

    def proj(self, x, u):
        return self._map("proj", x, u)

    def egrad_to_rgrad(self, x, g):
        return self._map("egrad_to_rgrad", x, g)

    def ehess_to_rhess(self, x, g, h, u):
        return self._map("ehess_to_rhess", x, g, h, u)

    def transport(self, x, y, u):
        return self._map("transport", x, y, u)

    def retract(self, x, u):
        return self._map("retract", x, u)

    def dist(self, x, y):
        d = jnp.stack(self._map("dist", x, y))
        return jnp.linalg.norm(d)

    def residual(self, x):
        return jnp.max(jnp.stack(self._map("residual", x)))

    def random_point(self, key, dtype=None):
        keys = jax.random.split(key, len(self.manifolds))
        return tuple(m.random_point(k, dtype) for m, k in zip(self.manifolds, keys, strict=True))

    def random_tangent(self, key, x):
        self._check(x)
        keys = jax.random.split(key, len(self.manifolds))
        parts = tuple(
            m.random_tangent(k, xi) for m, k, xi in zip(self.manifolds, keys, x, strict=True)
        )
        scale = 1.0 / math.sqrt(len(self.manifolds))  # each part has unit norm
        return jax.tree.map(lambda v: (scale * v).astype(v.dtype), parts)

    @property
    def dim(self) -> int:
        return sum(m.dim for m in self.manifolds)

    @property
    def typical_dist(self) -> float:
        return math.sqrt(sum(m.typical_dist**2 for m in self.manifolds))

    @property
    def point_shape(self):
        return tuple(m.point_shape for m in self.manifolds)
