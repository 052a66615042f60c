r"""Projection onto a box $\{lo \le y \le hi\}$."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxsolve.projections._common import as_param, as_point, concrete

__all__ = ["box"]


def box(
    x: Float[Array, " ..."], lo: float | jax.Array = -jnp.inf, hi: float | jax.Array = jnp.inf
) -> Float[Array, " ..."]:
    r"""Euclidean projection onto the box $\{y : lo \le y \le hi\}$ (coordinatewise).

    $$
    P(x)_i = \min(\max(x_i, lo_i), hi_i).
    $$

    Written with ``where`` so the derivative is exactly 1 on free coordinates and 0 on
    clipped ones (flowing to ``lo``/``hi`` there), with no half-gradients at ties.

    Args:
        x: point to project (any shape).
        lo: lower bounds, a scalar or an array of the shape of ``x`` (``-inf`` allowed).
        hi: upper bounds, likewise; ``lo <= hi`` is required (``ValueError`` otherwise:
            the box is empty).

    Returns:
        The projection, with the shape and dtype of ``x``.
    """
    x = as_point("x", x)
    lo = as_param("lo", lo, x, shape_like_x=True)
    hi = as_param("hi", hi, x, shape_like_x=True)
    if concrete(lo, hi) and np.any(np.asarray(lo) > np.asarray(hi)):
        raise ValueError("lo must be <= hi everywhere (the box is empty)")
    return jnp.where(x < lo, lo, jnp.where(x > hi, hi, x))
