r"""Projections onto affine sets and half-spaces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxsolve.projections._common import as_param, as_point, concrete

__all__ = ["affine", "halfspace"]


def affine(
    x: Float[Array, " n"], A: Float[Array, "m n"], b: Float[Array, " m"]
) -> Float[Array, " n"]:
    r"""Euclidean projection onto the affine set $\{y : A y = b\}$.

    $$
    P(x) = x - A^{+}(A x - b),
    $$

    with $A^+$ the Moore-Penrose pseudo-inverse (so rank-deficient ``A`` with a
    consistent ``b`` is fine). Differentiable in ``x``, ``A`` and ``b``. For many
    projections onto one set, factor once and use $x - A^+(Ax - b)$ yourself.

    Args:
        x: point, shape ``(n,)``.
        A: matrix, shape ``(m, n)``.
        b: right-hand side, shape ``(m,)``; must lie in the range of ``A`` (checked
            when concrete: ``ValueError`` if the set is empty).
    """
    x = as_point("x", x)
    if x.ndim != 1:
        raise ValueError(f"x must be a vector, got shape {x.shape}")
    A = jnp.asarray(A)
    b = jnp.asarray(b)
    if A.ndim != 2 or A.shape[1] != x.shape[0]:
        raise ValueError(f"A must have shape (m, {x.shape[0]}), got {A.shape}")
    if b.shape != (A.shape[0],):
        raise ValueError(f"b must have shape ({A.shape[0]},), got {b.shape}")
    A = A.astype(x.dtype)
    b = b.astype(x.dtype)
    if concrete(A, b):
        An, bn = np.asarray(A, np.float64), np.asarray(b, np.float64)
        if np.any(np.isnan(An)) or np.any(np.isnan(bn)):
            raise ValueError("A and b must not contain NaN")
        resid = An @ (np.linalg.pinv(An) @ bn) - bn
        scale = max(
            1.0, np.linalg.norm(bn), np.linalg.norm(An) * np.linalg.norm(np.linalg.pinv(An) @ bn)
        )
        if np.linalg.norm(resid) > 1e3 * np.finfo(x.dtype).eps * scale * max(An.shape):
            raise ValueError("b must lie in the range of A (the affine set {y : A y = b} is empty)")
    return x - jnp.linalg.pinv(A) @ (A @ x - b)


def halfspace(
    x: Float[Array, " ..."], a: Float[Array, " ..."], b: float | jax.Array
) -> Float[Array, " ..."]:
    r"""Euclidean projection onto the half-space $\{y : a^\top y \le b\}$.

    $$
    P(x) = x - \frac{\max(a^\top x - b, 0)}{\|a\|^2}\, a.
    $$

    Args:
        x: point (any shape).
        a: normal, the shape of ``x``; ``a = 0`` is allowed when ``b >= 0`` (the whole
            space); ``a = 0`` with ``b < 0`` is an empty set (``ValueError``).
        b: offset (scalar).
    """
    x = as_point("x", x)
    a = jnp.asarray(a)
    if a.shape != x.shape:
        raise ValueError(f"a must have the shape of x {x.shape}, got {a.shape}")
    a = as_param("a", a, x, shape_like_x=True)
    b = as_param("b", b, x)
    if concrete(a, b) and not np.any(np.asarray(a)) and float(b) < 0:
        raise ValueError("a = 0 with b < 0: the half-space {y : a.y <= b} is empty")
    viol = jnp.vdot(a, x) - b
    a_sq = jnp.vdot(a, a)
    active = (viol > 0) & (a_sq > 0)
    coef = jnp.where(active, viol / jnp.where(active, a_sq, 1), 0)
    return x - coef * a
