"""Shared helpers of the projections: input checks and gradient-safe elementwise ops.

Every projection identifies its active set with a non-differentiated, exact method
(a sort or a bisection on the multiplier run to machine precision) and then
recomputes the multiplier in closed form on that active set. The closed form is
what autodiff sees, so gradients are the exact (generalized) Jacobian of the
projection, and no gradient ever flows through a sort or a loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_floating, is_concrete


def as_point(name: str, x) -> jax.Array:
    """The point to project: a non-empty real floating array (integers and complex
    numbers are refused)."""
    x = jnp.asarray(x)
    check_floating(name, x, real=True)
    if x.ndim == 0 or x.size == 0:
        raise ValueError(
            f"{name} must be a non-empty array with at least one axis, got shape {x.shape}"
        )
    return x


def as_param(name: str, value, x: jax.Array, *, shape_like_x: bool = False) -> jax.Array:
    """A parameter of the set, cast to the dtype of ``x``.

    Scalars are always accepted; with ``shape_like_x`` an array must have the shape
    of ``x`` (no silent broadcasting of a wrong-length vector).
    """
    arr = jnp.asarray(value)
    if not jnp.issubdtype(arr.dtype, jnp.number) and arr.dtype != jnp.bool_:
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    arr = arr.astype(x.dtype)
    if shape_like_x:
        if arr.ndim != 0 and arr.shape != x.shape:
            raise ValueError(
                f"{name} must be a scalar or have the shape of x {x.shape}, got {arr.shape}"
            )
    elif arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    if is_concrete(arr) and np.any(np.isnan(np.asarray(arr))):
        raise ValueError(f"{name} contains NaN")
    return arr


def concrete(*values) -> bool:
    """Whether every value is concrete (not a tracer): the checks that read values run."""
    return all(is_concrete(v) for v in values)


def check_nonneg(name: str, value) -> None:
    """``ValueError`` if a concrete ``value`` has a negative entry."""
    if is_concrete(value) and np.any(np.asarray(value) < 0):
        raise ValueError(f"{name} must be non-negative, got {np.asarray(value)}")


def clamp_keep_grad(v, lo, hi):
    """Clip ``v`` to ``[lo, hi]`` (rounding-level feasibility) with the gradient of ``v``."""
    return v + jax.lax.stop_gradient(jnp.clip(v, lo, hi) - v)
