r"""Projections onto the knapsack polytope and the partition matroid polytope.

Both are boxes cut by linear inequalities with separable structure, so the projection
is a clipped shift of $x$ whose multipliers solve monotone piecewise-linear
equations (see `jaxsolve.projections._threshold`): bisection to machine
precision, then an exact closed-form step on the identified active set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxsolve.projections._common import as_param, as_point, check_nonneg, concrete
from jaxsolve.projections._threshold import threshold

__all__ = ["knapsack", "partition_matroid"]


def knapsack(
    x: Float[Array, " ..."],
    w: Float[Array, " ..."],
    budget: float | jax.Array,
    upper: float | jax.Array = 1.0,
) -> Float[Array, " ..."]:
    r"""Euclidean projection onto $\{0 \le y \le u,\ w^\top y \le B\}$ (``w >= 0``).

    KKT: $y_i = \operatorname{clip}(x_i - \tau w_i, 0, u_i)$ with $\tau \ge 0$,
    $\tau (w^\top y - B) = 0$. If $\operatorname{clip}(x, 0, u)$ already
    satisfies the budget, $\tau = 0$; otherwise $\tau > 0$ solves
    $\sum_i w_i \operatorname{clip}(x_i - \tau w_i, 0, u_i) = B$ (the continuous
    quadratic knapsack problem: Helgason, Kennington and Lall, Math. Prog. 1980;
    Kiwiel, JOTA 2008), found by bisection and recomputed in closed form on the
    active set (exact, differentiable in ``x``, ``w``, ``budget`` and ``upper``).
    Zero weights are allowed (those coordinates are simply clipped to the box).

    Args:
        x: point to project (any shape; the budget sums over all entries).
        w: non-negative weights, a scalar or the shape of ``x``.
        budget: ``B >= 0`` (a negative budget makes the set empty: ``ValueError``).
        upper: upper bounds ``u >= 0`` (scalar or the shape of ``x``; ``inf`` allowed).
    """
    x = as_point("x", x)
    w = as_param("w", w, x, shape_like_x=True)
    budget = as_param("budget", budget, x)
    upper = as_param("upper", upper, x, shape_like_x=True)
    check_nonneg("w", w)
    check_nonneg("upper", upper)
    if concrete(w) and not np.all(np.isfinite(np.asarray(w))):
        raise ValueError("w must be finite")
    if concrete(budget) and float(budget) < 0:
        raise ValueError(
            f"budget must be >= 0 (with w >= 0 the knapsack set is empty), got {float(budget)}"
        )
    v = x.ravel()
    out, _ = threshold(
        v,
        jnp.broadcast_to(w, x.shape).ravel(),
        jnp.zeros_like(v),
        jnp.broadcast_to(upper, x.shape).ravel(),
        budget[None],
        nonneg=True,
    )
    return out.reshape(x.shape)


def partition_matroid(
    x: Float[Array, " n"], groups: Int[Array, " n"], caps: Float[Array, " g"]
) -> Float[Array, " n"]:
    r"""Euclidean projection onto the partition matroid polytope.

    $$
    \{y : 0 \le y \le 1,\ \textstyle\sum_{i : g(i) = j} y_i \le c_j \text{ for each group } j\}.
    $$

    The groups decouple: in group $j$, $y_i = \operatorname{clip}(x_i - \tau_j, 0, 1)$
    with $\tau_j = 0$ if the clipped group already fits its cap, else the root of
    $\sum_{g(i)=j} \operatorname{clip}(x_i - \tau_j, 0, 1) = c_j$ (a capped-simplex
    projection per group, as used by the continuous relaxations of submodular
    maximization under matroid constraints, e.g. Calinescu, Chekuri, Pal and Vondrak,
    SIAM J. Comput. 2011). All groups are solved at once with segment sums, by
    bisection and an exact closed-form step.

    Args:
        x: point to project, shape ``(n,)``.
        groups: integer group id of each coordinate, shape ``(n,)``, values in
            ``[0, len(caps))``.
        caps: non-negative capacity of each group, shape ``(g,)``.
    """
    x = as_point("x", x)
    if x.ndim != 1:
        raise ValueError(f"x must be a vector, got shape {x.shape}")
    groups = jnp.asarray(groups)
    if not jnp.issubdtype(groups.dtype, jnp.integer):
        raise TypeError(f"groups must be an integer array of group ids, got dtype {groups.dtype}")
    if groups.shape != x.shape:
        raise ValueError(f"groups must have the shape of x {x.shape}, got {groups.shape}")
    caps = jnp.asarray(caps)
    if caps.ndim != 1 or caps.shape[0] == 0:
        raise ValueError(
            f"caps must be a non-empty vector (one cap per group), got shape {caps.shape}"
        )
    caps = as_param("caps", caps, x, shape_like_x=False) if caps.ndim == 0 else caps.astype(x.dtype)
    check_nonneg("caps", caps)
    if concrete(groups):
        g = np.asarray(groups)
        if g.min() < 0 or g.max() >= caps.shape[0]:
            raise ValueError(
                f"groups must hold ids in [0, {caps.shape[0]}) (one cap per group), "
                f"got values in [{g.min()}, {g.max()}]"
            )
    one = jnp.ones_like(x)
    out, _ = threshold(
        x,
        one,
        jnp.zeros_like(x),
        one,
        caps,
        segments=groups,
        num_segments=caps.shape[0],
        nonneg=True,
    )
    return out
