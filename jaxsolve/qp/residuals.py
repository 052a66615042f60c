r"""FlexQP's convergence measure: relative KKT residuals of the elastic relaxation.

At a scaled iterate ``(xs, zs, ys)`` (`jaxsolve.qp.scaling`) the residuals are measured
in the problem's own units, as OSQP 1.x measures them with ``eps_abs = eps_rel = tol``:
primal ``||A x - z||``, dual ``||P x + q + A'y||`` and the duality gap of the relaxed
problem, each relative to the size of its terms, and every row also relative to its
own scale. ``error`` adds the relative bound violation of ``z`` while the elastic weight
can still grow, so that ``SUCCESS`` means a point that meets the constraints.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.qp.problem import interval_distance
from jaxsolve.qp.scaling import Scaled, amax

__all__ = ["Residuals", "kkt_residuals"]


class Residuals(NamedTuple):
    """Residuals of one iterate (real scalars unless noted).

    Attributes:
        kkt: relative KKT residual of the relaxed problem (max of the relative primal
            and dual residuals, the relative duality gap and the per-row primal
            residuals), user units.
        violation: relative violation of the bounds by ``z`` (overall and per row).
        error: the solver's error, ``max(kkt, violation)`` while the elastic weight can
            still grow, ``kkt`` at its cap.
        primal, dual: ``||A xs - zs||_inf`` and ``||P xs + q + A'ys||_inf`` of the scaled
            problem (the adaptive rho rule's inputs).
        primal_scale, dual_scale: their scales ``max(||A xs||, ||zs||)`` and
            ``max(||P xs||, ||A'ys||, ||q||)`` (scaled, infinity norms).
        Ax: ``(m,)`` the scaled product ``A xs``.
    """

    kkt: jax.Array
    violation: jax.Array
    error: jax.Array
    primal: jax.Array
    dual: jax.Array
    primal_scale: jax.Array
    dual_scale: jax.Array
    Ax: jax.Array


def kkt_residuals(d: Scaled, x, z, y, pending_on) -> Residuals:
    """`Residuals` at scaled ``(x, z, y)`` of the data ``d``; ``pending_on`` (bool):
    the elastic weight is below its cap. ``y=None`` stands for ``y = 0`` (a cold start:
    the two passes over ``A`` for ``A'y`` and ``|A|'|y|`` are skipped)."""
    Px = d.P @ x
    Ax = d.A @ x
    if y is None:
        y, Aty, Aty_abs = jnp.zeros_like(z), jnp.zeros_like(x), jnp.zeros_like(x)
    else:
        Aty = d.A.T @ y
        # |A|'|y| measures the size of the terms of A'y: with large elastic weights they
        # nearly cancel (an infeasibility certificate A'w ~ 0), and a relative residual
        # against ||A'y|| alone would ask for more digits than floating point holds.
        Aty_abs = jnp.abs(d.A).T @ jnp.abs(y)
    Dinv, Einv = 1.0 / d.D, 1.0 / d.E
    # While the elastic weight can still grow (a feasible QP), the usual OSQP scale
    # ||A'y|| applies; the generous |A|'|y| only at the weight cap (infeasible QPs).
    Aty_n = jnp.where(pending_on, jnp.abs(Aty), Aty_abs)
    Px_u, Aty_u, q_u = Dinv * Px / d.c, Dinv * Aty_n / d.c, Dinv * d.q / d.c
    Ax_u, z_u = Einv * Ax, Einv * z
    rp_u = amax(Ax_u - z_u)
    rd_u = amax(Px_u + q_u + Dinv * Aty / d.c)
    # Duality gap of the relaxed problem: for (z, y) pairs built by the relaxed update
    # (y in mu * subdifferential of dist at z), gap = x'Px + q'x + y'z (as OSQP 1.x, it
    # makes SUCCESS imply an accurate objective, not only small residuals).
    # Relative to the size of the terms (|y|'|z|: they cancel at large elastic weights).
    xPx, qx, yz = x @ Px / d.c, d.q @ x / d.c, y @ z / d.c
    yz_abs = jnp.abs(y) @ jnp.abs(z) / d.c
    gap = jnp.abs(xPx + qx + yz) / (
        1.0 + jnp.maximum(jnp.maximum(jnp.abs(xPx), jnp.abs(qx)), yz_abs)
    )
    kkt = jnp.maximum(
        jnp.maximum(
            rp_u / (1.0 + jnp.maximum(amax(Ax_u), amax(z_u))),
            rd_u / (1.0 + jnp.maximum(jnp.maximum(amax(Px_u), amax(Aty_u)), amax(q_u))),
        ),
        gap,
    )
    # Each row also against its own scale (||a_i|| ||x||, |a_i'x|, |z_i|): relative to
    # the largest row alone, a row scaled by 1e8 would hide another row's violation.
    # SUCCESS means every row of the problem as given meets tol relative to its own size.
    row = 1.0 + jnp.maximum(jnp.maximum(jnp.abs(Ax_u), jnp.abs(z_u)), d.anorm * amax(d.D * x))
    kkt = jnp.maximum(kkt, amax(jnp.abs(Ax_u - z_u) / row))
    viol_abs = amax(interval_distance(z_u, d.lo, d.up))
    violation = jnp.maximum(
        viol_abs / (1.0 + amax(z_u)), amax(interval_distance(z_u, d.lo, d.up) / row)
    )
    error = jnp.maximum(kkt, jnp.where(pending_on, violation, 0.0))
    primal = amax(Ax - z)
    dual = amax(Px + d.q + Aty)
    primal_scale = jnp.maximum(amax(Ax), amax(z))
    dual_scale = jnp.maximum(jnp.maximum(amax(Px), amax(Aty)), amax(d.q))
    return Residuals(kkt, violation, error, primal, dual, primal_scale, dual_scale, Ax)
