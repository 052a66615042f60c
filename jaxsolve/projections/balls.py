r"""Projections onto the $\ell_1$ and $\ell_2$ balls."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxsolve.projections._common import as_param, as_point, check_nonneg
from jaxsolve.projections.simplex import project_simplex_flat

__all__ = ["l1_ball", "l2_ball"]


def l1_ball(x: Float[Array, " ..."], r: float | jax.Array = 1.0) -> Float[Array, " ..."]:
    r"""Euclidean projection onto the $\ell_1$ ball $\{y : \|y\|_1 \le r\}$.

    $$
    P(x) = x \text{ if } \|x\|_1 \le r, \text{ else } \operatorname{sign}(x) \odot P_{\Delta_r}(|x|)
    $$

    (Duchi, Shalev-Shwartz, Singer and Chandra, "Efficient projections onto the
    l1-ball for learning in high dimensions", ICML 2008), with the sort-based simplex
    projection of `jaxsolve.projections.simplex` (exact; differentiable through
    its closed-form threshold).

    Args:
        x: point to project (the norm runs over all entries; infinite entries give
            the limit, ``r`` spread evenly over them with their signs).
        r: radius, ``r >= 0`` (``ValueError`` for a negative radius).
    """
    x = as_point("x", x)
    r = as_param("r", r, x)
    check_nonneg("r", r)
    v = x.ravel()
    inside = jnp.sum(jnp.abs(v)) <= r
    out = jnp.where(inside, v, jnp.sign(v) * project_simplex_flat(jnp.abs(v), r))
    return out.reshape(x.shape)


def l2_ball(x: Float[Array, " ..."], r: float | jax.Array = 1.0) -> Float[Array, " ..."]:
    r"""Euclidean projection onto the $\ell_2$ ball $\{y : \|y\|_2 \le r\}$.

    $$
    P(x) = x \cdot \min(1,\ r / \|x\|_2).
    $$

    The norm is taken on a guarded input, so the gradient at ``x = 0`` is the identity
    (never NaN).

    Args:
        x: point to project (the norm runs over all entries; infinite entries give
            the limit, ``r`` spread evenly over them with their signs).
        r: radius, ``r >= 0`` (``ValueError`` for a negative radius).
    """
    x = as_point("x", x)
    r = as_param("r", r, x)
    check_nonneg("r", r)
    # infinite entries: the limit direction is that of the infinite entries alone
    # (x * r / inf would be NaN where it is infinite)
    big = jnp.isinf(x)
    # the norm of x / max|x|, times max|x|: sum(x * x) overflows from |x| ~ 1e154 (float64)
    # or 1e19 (float32), and x * (r / inf) = 0 is off the sphere; the scale is a constant
    # for autodiff, as the norm does not depend on it
    scale = jax.lax.stop_gradient(jnp.max(jnp.where(big, 0, jnp.abs(x))))
    scale = jnp.where(scale > 0, scale, 1).astype(x.dtype)
    sq = jnp.sum((x / scale) ** 2)
    outside = sq > (r / scale) ** 2
    norm = scale * jnp.sqrt(jnp.where(outside, sq, 1))
    n_big = jnp.sum(big)
    at_inf = jnp.where(big, jnp.sign(x) * r / jnp.sqrt(jnp.maximum(n_big, 1)).astype(x.dtype), 0)
    return jnp.where(n_big > 0, at_inf.astype(x.dtype), jnp.where(outside, x * (r / norm), x))
