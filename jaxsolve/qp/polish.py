r"""Active-set polishing of FlexQP iterates: OSQP's polish as a primal-dual active-set method.

On the elastic relaxation, from a scaled ADMM iterate (`jaxsolve.qp.scaling`), each
row is read as violated above or below (its multiplier fixed at ``+-mu``), active at a
bound, or inactive (``y = 0``); the regularized KKT system of that active set is solved
with iterative refinement, the rows are re-classified from the polished point
(Hintermueller, Ito & Kunisch, 2002) and the candidate with the smallest error wins.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from jaxsolve.qp.admm import row_mu
from jaxsolve.qp.residuals import kkt_residuals
from jaxsolve.qp.scaling import Scaled

__all__ = ["polish", "polish_in_loop"]

# A relative KKT error at most EXACT_EPS machine epsilons is at rounding level: polish
# passes stop there, and finalize does not polish such a point again (`at_rounding_level`).
EXACT_EPS = 100


def at_rounding_level(error, dtype):
    """Whether a relative KKT ``error`` is at rounding level (``<= EXACT_EPS eps``): no
    polish pass can improve such a point beyond rounding."""
    return error <= EXACT_EPS * jnp.finfo(dtype).eps


def _classify(d: Scaled, zs, ys, sat_up, sat_lo):
    """Active set from a point: OSQP's rule ``u - z < y`` (upper) / ``z - l < -y`` (lower)."""
    sat = sat_up | sat_lo
    act_up = ~sat & (d.u - zs < ys)
    act_lo = ~sat & (zs - d.l < -ys)
    return act_up, act_lo


def _reclassify(d: Scaled, Ax, y, mu_rows):
    """All five row states from a polished point (a primal-dual active-set step).

    With ``v = A x + y`` (``y``: the unclipped multiplier of an active row, ``+-mu`` on
    a violated one, 0 on an inactive one) a row is violated above when ``v > u + mu``
    (a violated row whose ``A x`` is still above ``u``, or an active row whose
    multiplier exceeds the elastic weight), active at ``u`` when ``u < v <= u + mu``,
    inactive inside, and likewise below: the optimality conditions of the relaxed
    problem, ``y = mu`` above ``u``, ``y in [0, mu]`` at ``u``, ``y = 0`` inside,
    read as one semismooth equation. A violated row that the ADMM iterate got wrong
    (its ``z`` outside the bounds by a rounding-level amount) is so corrected too.
    """
    v = Ax + y
    sat_up, sat_lo = v > d.u + mu_rows, v < d.l - mu_rows
    return sat_up, sat_lo, *_classify(d, Ax, y, sat_up, sat_lo)


def _polish_once(d: Scaled, xs, ys, sat_up, sat_lo, act_up, act_lo, mu_rows, delta, refine):
    """One active-set solve of the (relaxed) KKT system with iterative refinement."""
    dtype = xs.dtype
    sat = sat_up | sat_lo
    act = (act_up | act_lo | d.eq) & ~sat
    lower = act_lo & ~d.eq
    bnd = jnp.where(lower, d.l, d.u)
    b = jnp.where(act, bnd, 0.0)
    a = act.astype(dtype)
    ysat = jnp.where(sat_up, mu_rows, jnp.where(sat_lo, -mu_rows, 0.0))
    r1 = -d.q - d.A.T @ ysat
    Aa = d.A * a[:, None]
    n = xs.shape[0]
    H = d.P + delta * jnp.eye(n, dtype=dtype) + (Aa.T @ Aa) / delta
    Lh = jnp.linalg.cholesky(H)

    def solve(rx, ry):
        dx = cho_solve((Lh, True), rx + Aa.T @ ry / delta)
        return dx, (Aa @ dx - ry) / delta

    def refine_body(_, carry):
        x, ya = carry
        e1 = r1 - (d.P @ x + Aa.T @ ya)
        e2 = b - Aa @ x
        dx, dy = solve(e1, e2)
        return x + dx, ya + dy

    # Start the refinement (a proximal-point iteration on the exact KKT system) at the
    # given point: when the active set leaves x undetermined (LPs, degenerate rows)
    # this lands on the solution next to it, not on an arbitrary one.
    x, ya = jax.lax.fori_loop(0, refine + 1, refine_body, (xs, jnp.where(act, ys, 0.0)))
    y = jnp.where(act, ya, ysat)
    y = jnp.where(act_up & ~d.eq, jnp.maximum(y, 0.0), y)
    y = jnp.where(lower, jnp.minimum(y, 0.0), y)
    y = jnp.clip(y, -mu_rows, mu_rows)
    Ax = d.A @ x
    z = jnp.where(
        act,
        bnd,
        jnp.where(
            sat_up,
            jnp.maximum(Ax, d.u),
            jnp.where(sat_lo, jnp.minimum(Ax, d.l), jnp.clip(Ax, d.l, d.u)),
        ),
    )
    return x, z, y, ya, Ax, act


def polish(
    d: Scaled, xs, zs, ys, level, delta, refine, passes, pending, res0, *, fine=0, fine_refine=0
):
    """Active-set polishing of the scaled iterate ``(xs, zs, ys)`` at elastic weight
    ``level``; returns the best ``(xs, zs, ys, residuals)`` among the input (with its
    residuals ``res0``) and the candidates, so polishing never makes the point worse.

    Rows are classified from the ADMM iterate: violated rows (``z`` outside the
    bounds) keep their saturated multiplier ``+-mu``; rows with ``u - z < y`` (or
    ``z - l < -y``) and equality rows are active; the rest are inactive (``y = 0``).
    The regularized KKT system is reduced to ``(P + dI + A_a'A_a/d) x = ...`` and
    used for ``refine`` steps of iterative refinement of the exact KKT system, started
    at the ADMM point. Each further pass (``passes > 1``) re-classifies every row from
    the polished point (`_reclassify`, a primal-dual active-set step): a row that the
    ADMM iterate put on the wrong side of its bound is corrected, and so is a row it
    wrongly read as violated or as satisfied.

    ``fine`` further passes use ``delta / 100`` (not below ``1e3 eps``) and
    ``fine_refine`` refinement steps, started from the best point so far and run only
    when the first stage did not reach a rounding-level error. On a degenerate active
    set (an LP-like QP whose active rows leave directions of ``x`` or ``y``
    undetermined) the refinement is a proximal-point iteration on a singular KKT system
    that moves about ``1/delta`` per step along those directions, so a larger ``delta``
    stops short of the vertex; the small ``delta`` alone is less robust on
    ill-conditioned systems, hence the two stages.

    ``pending`` (bool): the elastic weight is below its cap (see
    `jaxsolve.qp.residuals.kkt_residuals`).
    """
    mu_rows = row_mu(d, level)
    sat_up, sat_lo = zs > d.u, zs < d.l
    act_up, act_lo = _classify(d, zs, ys, sat_up, sat_lo)
    # After the first pass, a best point at rounding level ends the passes: a further
    # pass can only swap it for another rounding-level point (the best is kept by
    # error), and each pass costs a factorization (in one solve the lax.cond skips it;
    # under vmap it is a select, as before). The first pass always runs: its active-set
    # solve is what unrolled derivatives of a polished point differentiate.

    def run(n_pass, delta_pass, refine_pass, carry):
        def one_pass(carry):
            x, y, act_up, act_lo, sat_up, sat_lo, best = carry
            x, z, y, ya, Ax, act = _polish_once(
                d, x, y, sat_up, sat_lo, act_up, act_lo, mu_rows, delta_pass, refine_pass
            )
            r = kkt_residuals(d, x, z, y, pending)
            ok = jnp.isfinite(r.error) & (r.error < best[3].error)
            best = jax.tree.map(lambda a, b: jnp.where(ok, a, b), (x, z, y, r), best)
            sat_up, sat_lo, act_up, act_lo = _reclassify(d, Ax, jnp.where(act, ya, y), mu_rows)
            return x, y, act_up, act_lo, sat_up, sat_lo, best

        def body(i, carry):
            done = (i > 0) & at_rounding_level(carry[6][3].error, xs.dtype)
            return jax.lax.cond(done, lambda c: c, one_pass, carry)

        return jax.lax.fori_loop(0, n_pass, body, carry)

    carry = (xs, ys, act_up, act_lo, sat_up, sat_lo, (xs, zs, ys, res0))
    best = run(passes, delta, refine, carry)[6]
    if fine > 0:

        def run_fine(best):
            best_x, best_z, best_y, _ = best
            sat_up, sat_lo = best_z > d.u, best_z < d.l
            act_up, act_lo = _classify(d, best_z, best_y, sat_up, sat_lo)
            # not below 1e3 eps: in float32 the stage keeps delta, with more refinement
            delta_fine = jnp.maximum(delta * 1e-2, 1e3 * jnp.finfo(xs.dtype).eps)
            carry = (best_x, best_y, act_up, act_lo, sat_up, sat_lo, best)
            return run(fine, delta_fine, fine_refine, carry)[6]

        exact = best[3].error <= 1e3 * jnp.finfo(xs.dtype).eps
        best = jax.lax.cond(exact, lambda b: b, run_fine, best)
    return best


def polish_in_loop(
    d: Scaled, xs, zs, ys, level, res, hparams, refine, passes, pending, attempt=True
):
    """The in-loop polish rule: polish, keep the polished point only if it is better.

    Returns the kept ``(xs, zs, ys, residuals)`` and whether the polished point was
    kept (bool). Relative errors saturate near 1 on
    poor points, so "lower" alone could swap a far-off ADMM iterate for a garbage one
    and derail the iteration: the polished point is kept only when it is an order of
    magnitude better than ``res.error`` and at most ``1e-3``, or when its error is at
    most ``hparams.polish_accept`` (`jaxsolve.qp.solve_qp` sets it to the tolerance: such a
    point ends the run, and a point near the float32 precision floor is rarely 10x
    better than the ADMM iterate). ``attempt`` (bool): polish at all.
    """
    delta = jnp.maximum(hparams.delta, 1e3 * jnp.finfo(xs.dtype).eps)
    x_pol, z_pol, y_pol, res_pol = polish(d, xs, zs, ys, level, delta, refine, passes, pending, res)
    better = (res_pol.error <= 0.1 * res.error) | (res_pol.error <= hparams.polish_accept)
    ok = better & (res_pol.error <= 1e-3) & attempt
    pick = lambda a, b: jnp.where(ok, a, b)  # noqa: E731
    kept = (pick(x_pol, xs), pick(z_pol, zs), pick(y_pol, ys), jax.tree.map(pick, res_pol, res))
    return *kept, ok
