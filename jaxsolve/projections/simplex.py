r"""Projections onto the simplex and the capped simplex.

* `simplex`: $\{x \ge 0,\ \sum_i x_i = s\}$, sort-based (Held, Wolfe and
  Crowder 1974; Duchi, Shalev-Shwartz, Singer and Chandra, ICML 2008; Condat,
  Math. Prog. 2016).
* `capped_simplex`: $\{0 \le x \le 1,\ \sum_i x_i = k\}$ (Wang and Lu,
  "Projection onto the capped simplex", arXiv:1503.01002, 2015), by bisection on the
  multiplier followed by an exact closed-form step on the identified active set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxsolve.projections._common import (
    as_param,
    as_point,
    check_nonneg,
    clamp_keep_grad,
    concrete,
)
from jaxsolve.projections._threshold import threshold

__all__ = ["simplex", "capped_simplex"]


def project_simplex_flat(v: jax.Array, s: jax.Array) -> jax.Array:
    """Euclidean projection of the 1-D ``v`` onto the simplex ``{x >= 0, sum(x) = s}``."""
    # +inf entries: the projection's limit puts the whole mass s on them, split evenly
    # (the sort below would give inf - inf = NaN and then all zeros, off the simplex)
    # every entry -inf: no entry is above the others, the mass is split evenly too (the
    # sort would give all zeros, off the simplex)
    shares_mass = (v == jnp.inf) | jnp.all(v == -jnp.inf)
    n_inf = jnp.sum(shares_mass)
    out = _simplex_finite(jnp.where(shares_mass, 0.0, v).astype(v.dtype), s)
    at_inf = jnp.where(shares_mass, s / jnp.maximum(n_inf, 1).astype(v.dtype), 0.0).astype(v.dtype)
    return jnp.where(n_inf > 0, at_inf, out)


def _simplex_finite(v: jax.Array, s: jax.Array) -> jax.Array:
    """`project_simplex_flat` for a ``v`` without ``+inf`` entries."""
    # 0. the projection is shift-invariant, P(v) = P(v - c 1): shift the largest entry to 0,
    # or the sums below lose s next to entries of size s / eps (simplex([1e16, 0, 0])
    # would be 0 in float64, off the simplex); the shift cancels in the derivative. Only
    # for entries far above s, so that at ordinary scales no rounding is added and a
    # vmapped batch equals its loop bit for bit.
    top = jax.lax.stop_gradient(jnp.max(v))
    far = jnp.isfinite(top) & (jnp.abs(top) > 1024 * (jnp.abs(jax.lax.stop_gradient(s)) + 1))
    v = v - jnp.where(far, top, 0).astype(v.dtype)
    # 1. identify the support with the sort-based threshold (not differentiated).
    desc = jnp.sort(jax.lax.stop_gradient(v))[::-1]
    cumsum_minus_s = jnp.cumsum(desc) - jax.lax.stop_gradient(s)
    j = jnp.arange(1, v.shape[0] + 1, dtype=v.dtype)
    support_size = jnp.maximum(jnp.sum(desc - cumsum_minus_s / j > 0), 1)
    tau0 = cumsum_minus_s[support_size - 1] / support_size.astype(v.dtype)
    free = ~(v <= tau0)  # NaN counts as free, so it propagates to the output
    # 2. exact, differentiable multiplier on that support.
    count = jnp.sum(free).astype(v.dtype)
    tau = (jnp.sum(jnp.where(free, v, 0)) - s) / jnp.maximum(count, 1)
    out = jnp.where(free, v - tau, 0)
    return clamp_keep_grad(out, 0, jnp.inf)


def simplex(x: Float[Array, " ..."], s: float | jax.Array = 1.0) -> Float[Array, " ..."]:
    r"""Euclidean projection onto the simplex $\Delta_s = \{y \ge 0,\ \sum_i y_i = s\}$.

    $$
    P(x) = \max(x - \tau, 0), \qquad \tau \text{ such that } \textstyle\sum_i \max(x_i - \tau, 0) = s.
    $$

    The threshold comes from sorting $x$ (Held, Wolfe and Crowder 1974; Duchi et
    al., ICML 2008); then $\tau = (\sum_{i \in S} x_i - s)/|S|$ is recomputed on the
    support $S = \{x_i > \tau\}$, which is what autodiff differentiates: the
    Jacobian is $I_S - \mathbf{1}_S\mathbf{1}_S^\top/|S|$ (exact at generic points,
    an element of the generalized Jacobian at ties, never NaN).

    Args:
        x: point to project; the constraint sums over all entries (use ``jax.vmap`` for
            a batch of vectors). ``+inf`` entries share the mass ``s`` evenly (the
            limit of the projection), ``-inf`` entries get 0 (all ``-inf``: the mass
            is split evenly); NaN propagates.
        s: the simplex's total, finite and ``s >= 0`` (``s = 0`` gives the point ``0``).

    Returns:
        The projection, with the shape and dtype of ``x``.
    """
    x = as_point("x", x)
    s = as_param("s", s, x)
    check_nonneg("s", s)
    if concrete(s) and np.isinf(np.asarray(s)):
        raise ValueError(f"s must be finite, got {np.asarray(s)}")
    return project_simplex_flat(x.ravel(), s).reshape(x.shape)


def _finite_stand_in(v, k):
    """``v`` with ``+-inf`` replaced by ``+-(2 max|finite| + 2|k| + 2)``: the projection onto
    a set with unit caps does not change past that (an entry that far above the others is
    at its cap, or shares the total evenly with the other infinite ones), so the result is
    the limit of the projection; the bisection on inf would give a point off the set."""
    fin = jnp.isfinite(v)
    big = 2.0 * jnp.max(jnp.where(fin, jnp.abs(v), 0.0)) + 2.0 * jnp.abs(k) + 2.0
    big = jax.lax.stop_gradient(big).astype(v.dtype)
    return jnp.where(v == jnp.inf, big, jnp.where(v == -jnp.inf, -big, v))


def capped_simplex(x: Float[Array, " ..."], k: float | jax.Array) -> Float[Array, " ..."]:
    r"""Euclidean projection onto the capped simplex $\{0 \le y \le 1,\ \sum_i y_i = k\}$.

    $$
    P(x)_i = \operatorname{clip}(x_i - \tau, 0, 1), \qquad \textstyle\sum_i \operatorname{clip}(x_i - \tau, 0, 1) = k.
    $$

    (Wang and Lu, arXiv:1503.01002.) $\tau$ is bracketed by bisection to machine
    precision, the coordinates are split into those at 0, at 1 and free, and
    $\tau = (\sum_{\text{free}} x_i + |\{\text{at } 1\}| - k)/|\text{free}|$ is computed
    in closed form on that split (exact to rounding; differentiable).

    Args:
        x: point to project (the sum runs over all entries).
        k: the total, ``0 <= k <= x.size`` (``ValueError`` otherwise: the set is empty).

    Returns:
        The projection, with the shape and dtype of ``x``.
    """
    x = as_point("x", x)
    k = as_param("k", k, x)
    if concrete(k) and not (0 <= float(k) <= x.size):
        raise ValueError(
            f"k must satisfy 0 <= k <= x.size = {x.size} (the capped simplex is empty), got {float(k)}"
        )
    v = _finite_stand_in(x.ravel(), k)
    one = jnp.ones_like(v)
    out, _ = threshold(v, one, jnp.zeros_like(v), one, k[None], nonneg=False)
    return out.reshape(x.shape)
