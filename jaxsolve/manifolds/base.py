"""The manifold interface shared by every Riemannian solver in jaxsolve.

A manifold is a *static, hashable* object (a frozen dataclass) that carries only
shape information and options (never arrays), so it can be passed to solver
factories as a static option and compared by value: two ``Stiefel(200, 5)`` are equal
and reuse one compilation. Points and tangent vectors are pytrees of arrays (an
array for the basic manifolds, a tuple for `Product`).
Every method is a pure JAX function of those pytrees, so it can be jitted and
vmapped over leading batch axes of the *points* (not of the manifold).

Methods (the Manopt / pymanopt consensus, Boumal 2023, "An introduction to
optimization on smooth manifolds", chapters 3, 5 and 7):

``inner(x, u, v)``, ``norm(x, u)``
    the Riemannian metric on the tangent space at ``x``.
``proj(x, u)``
    orthogonal projection (in the metric) of an ambient vector onto ``T_x M``.
``retract(x, u)``
    a retraction ``R_x(u)`` (``R_x(0) = x``, ``dR_x(0) = id``).
``egrad_to_rgrad(x, g)``
    Riemannian gradient from the Euclidean gradient ``g`` of a smooth extension.
``ehess_to_rhess(x, g, h, u)``
    Riemannian Hessian ``Hess f(x)[u]`` from the Euclidean gradient ``g`` and the
    Euclidean Hessian-vector product ``h = D(grad f)(x)[u]``; includes the
    Weingarten (curvature) terms.
``transport(x, y, u)``
    vector transport of ``u`` in ``T_x M`` to ``T_y M`` (projection based).
``random_point(key, dtype=None)``, ``random_tangent(key, x)``
    a random point and a random unit-norm tangent vector.
``zero_tangent(x)``, ``dim``, ``typical_dist``
    the zero vector at ``x``, the manifold dimension, a typical distance
    (the trust-region radius scale, as Manopt's ``typicaldist``).
``dist(x, y)``
    the Riemannian distance where it is cheap (raises ``NotImplementedError`` otherwise).
``residual(x)``
    how far an ambient point is from the manifold (0 on it); used by tests.

Writing a new manifold (e.g. the K-means manifold of the cluster family): subclass
`Manifold` as a ``@dataclasses.dataclass(frozen=True)`` with only hashable
fields, implement ``inner``, ``proj``, ``retract``, ``ehess_to_rhess``,
``random_point``, ``residual``, ``dim`` and ``typical_dist``; the defaults for the
rest (``norm``, ``egrad_to_rgrad = proj`` for an embedded metric, ``transport``,
``random_tangent``) are correct for a Riemannian submanifold of a Euclidean space.
Validate with `jaxsolve.manifolds.check_gradient` and
`check_hessian`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from jaxsolve.core.validation import check_int  # noqa: F401  (the manifolds import it from here)

__all__ = [
    "Manifold",
    "tree_add",
    "tree_sub",
    "tree_scale",
    "tree_axpy",
    "tree_vdot",
    "tree_zeros_like",
    "default_float",
]


def default_float(dtype=None):
    """``dtype`` or the default floating dtype (float64 when x64 is enabled)."""
    if dtype is None:
        return jnp.result_type(float)
    dtype = jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype (float32/float64), got {dtype}")
    return dtype


def tree_add(a, b):
    """``a + b`` leaf by leaf."""
    return jax.tree.map(jnp.add, a, b)


def tree_sub(a, b):
    """``a - b`` leaf by leaf."""
    return jax.tree.map(jnp.subtract, a, b)


def tree_scale(s, a):
    """``s * a`` for a scalar ``s``, keeping each leaf's dtype."""
    return jax.tree.map(lambda v: (s * v).astype(v.dtype), a)


def tree_axpy(s, a, b):
    """``s * a + b`` for a scalar ``s``, keeping each leaf's dtype."""
    return jax.tree.map(lambda u, v: (s * u + v).astype(v.dtype), a, b)


def tree_vdot(a, b):
    """Euclidean (Frobenius) inner product of two pytrees."""
    leaves = [jnp.sum(u * v) for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)]
    return sum(leaves[1:], leaves[0])


def tree_zeros_like(a):
    """Zeros of the structure, shapes and dtypes of the pytree ``a``."""
    return jax.tree.map(jnp.zeros_like, a)


@dataclasses.dataclass(frozen=True)
class Manifold:
    """Base class: a Riemannian submanifold of a Euclidean space (embedded metric).

    Subclasses override what differs; see the module docstring for the contract.
    """

    # -- metric -------------------------------------------------------------------
    def inner(self, x, u, v) -> jax.Array:
        """``<u, v>_x``; the embedded (Frobenius) metric by default."""
        return tree_vdot(u, v)

    def norm(self, x, u) -> jax.Array:
        """``||u||_x = sqrt(<u, u>_x)``."""
        return jnp.sqrt(jnp.maximum(self.inner(x, u, u), 0.0))

    # -- tangent spaces -------------------------------------------------------------
    def proj(self, x, u):
        """Orthogonal projection of the ambient vector ``u`` onto ``T_x M``."""
        raise NotImplementedError

    def egrad_to_rgrad(self, x, g):
        """``grad f(x) = proj_x(g)`` for an embedded metric."""
        return self.proj(x, g)

    def ehess_to_rhess(self, x, g, h, u):
        """``Hess f(x)[u]`` from ``g = nabla f(x)`` and ``h = nabla^2 f(x)[u]``."""
        raise NotImplementedError

    def transport(self, x, y, u):
        """Projection-based vector transport ``T_{x->y} u = proj_y(u)`` (Absil et al. 8.1.3)."""
        return self.proj(y, u)

    def zero_tangent(self, x):
        """The zero tangent vector at ``x``."""
        return tree_zeros_like(x)

    # -- points ---------------------------------------------------------------------
    def retract(self, x, u):
        """A retraction ``R_x(u)``."""
        raise NotImplementedError

    def dist(self, x, y) -> jax.Array:
        """Riemannian distance; only where it is cheap."""
        raise NotImplementedError(f"{type(self).__name__}.dist is not available (not cheap)")

    def residual(self, x) -> jax.Array:
        """Distance of the ambient point ``x`` from the manifold (0 on it)."""
        raise NotImplementedError

    def random_point(self, key, dtype=None):
        """A random point (the distribution is manifold specific)."""
        raise NotImplementedError

    def random_tangent(self, key, x):
        """A random tangent vector at ``x`` with unit norm: ``proj`` of a Gaussian."""
        leaves, treedef = jax.tree.flatten(x)
        keys = jax.random.split(key, len(leaves))
        z = jax.tree.unflatten(
            treedef,
            [jax.random.normal(k, v.shape, v.dtype) for k, v in zip(keys, leaves, strict=True)],
        )
        u = self.proj(x, z)
        return tree_scale(1.0 / self.norm(x, u), u)

    # -- sizes ----------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """The manifold's dimension."""
        raise NotImplementedError

    @property
    def typical_dist(self) -> float:
        """A typical distance (Manopt ``typicaldist``); default ``sqrt(dim)``."""
        return float(self.dim) ** 0.5

    @property
    def point_shape(self) -> Any:
        """Shape of a point (a tuple of ints, or a tuple of those for a product)."""
        raise NotImplementedError


def sym(a):
    """The symmetric part ``(a + a^T) / 2`` (over the last two axes)."""
    return 0.5 * (a + jnp.swapaxes(a, -1, -2))


def skew(a):
    """The skew-symmetric part ``(a - a^T) / 2`` (over the last two axes)."""
    return 0.5 * (a - jnp.swapaxes(a, -1, -2))
