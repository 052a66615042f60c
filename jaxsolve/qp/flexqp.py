r"""FlexQP: OSQP-style ADMM on the exact l1 (elastic) relaxation of a QP.

Paper: Oshin, Ghosh, Saravanos, Theodorou, "Deep FlexQP: accelerated nonlinear
programming via deep unfolding", arXiv:2512.01565 (ICLR 2026). The relaxation and its
exactness theorem (Thm 3.1) are the paper's; the iteration below is the OSQP splitting
(Stellato et al., 2020) with the constraint projection replaced by the proximal map of
the l1 distance to the bounds, which is how the paper describes its update ("analogous
to OSQP, soft thresholding in the relaxation block"). The exact residuals, penalty rules
and polishing of the paper could not be read (research notes qp.md 1.4, GUESS); the
choices here are derived from first principles and documented on `flexqp`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.scipy.linalg import cho_solve, solve_triangular

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.qp.certify import RADIUS_FACTOR, exclusion_radius
from jaxsolve.qp.problem import QP, interval_distance, with_constraint_rows

__all__ = ["flexqp", "FlexQP", "FlexQPState", "FlexQPInfo", "WarmStart", "kkt_residual"]

_RHO_MIN, _RHO_MAX = 1e-6, 1e6
#: Penalty multiplier of equality rows (OSQP: equality rows get 1e3 * rho).
EQ_RHO_WEIGHT = 1e3
#: Penalty of free rows (both bounds infinite).
FREE_ROW_RHO = 1e-6
_MIN_SCALING, _MAX_SCALING = 1e-4, 1e4


class WarmStart(NamedTuple):
    """A starting point carrying duals and penalties (see `warm_start_from`).

    Pass it as ``x0`` to `jaxsolve.solve` / ``solve_qp``. ``y`` and ``z`` are in
    the user's units (OSQP sign convention), ``rho`` the scaled ADMM penalty and
    ``mu`` the elastic weight (user units) of a previous solve.
    """

    x: jax.Array
    y: jax.Array
    z: jax.Array
    rho: jax.Array
    mu: jax.Array


class Scaled(NamedTuple):
    """Ruiz-equilibrated data: ``Pb = c D P D``, ``qb = c D q``, ``Ab = E A D``."""

    P: jax.Array
    q: jax.Array
    A: jax.Array
    l: jax.Array
    u: jax.Array
    D: jax.Array
    E: jax.Array
    c: jax.Array
    lo: jax.Array  # unscaled bounds (for violations)
    up: jax.Array
    eq: jax.Array  # bool: equality rows
    free: jax.Array  # bool: rows with both bounds infinite
    sigma: jax.Array  # the x-update's proximal weight (K(rho) = P + sigma I + A' R A)
    anorm: jax.Array  # ||a_i||_inf of each row of the user's A (the row's own scale)


class FlexQPState(NamedTuple):
    """State of `flexqp` (user units unless the name ends in ``s``).

    Attributes:
        x: primal iterate.
        iter_num: number of steps taken (one step = ``check_every`` ADMM iterations).
        error: relative KKT residual of the relaxed problem, plus the remaining
            constraint violation while the elastic weight can still grow.
        status: solver-declared status (``UNBOUNDED``; after finalize ``INFEASIBLE``
            when certified, ``MAX_STEPS`` when converged at ``mu_max`` with rows violated
            but no certificate).
        y: multipliers of the rows of A, OSQP convention (``y > 0``: upper bound
            active, ``y < 0``: lower bound active); ``|y| <= mu``.
        z: the relaxed copy of ``A x`` (outside ``[l, u]`` only on violated rows).
        viol: per-row violation ``dist(A x, [l, u])``.
        rho: scaled ADMM penalty (scalar).
        mu: elastic weight in user units (``|y_i| <= mu``), adapted upward.
        kkt: relative KKT residual of the relaxed problem alone.
        admm_iters: ADMM iterations performed.
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    y: jax.Array
    z: jax.Array
    viol: jax.Array
    rho: jax.Array
    mu: jax.Array
    kkt: jax.Array
    admm_iters: jax.Array
    xs: jax.Array
    zs: jax.Array
    ys: jax.Array
    mu_level: jax.Array
    unb_count: jax.Array
    L: jax.Array
    data: Scaled


class FlexQPInfo(NamedTuple):
    kkt: jax.Array
    rho: jax.Array
    mu: jax.Array
    rho_changed: jax.Array


def _amax(v):
    return jnp.max(jnp.abs(v), initial=0.0)


def _limit(v):
    return jnp.where(v < _MIN_SCALING, 1.0, jnp.minimum(v, _MAX_SCALING))


def _ruiz(P, q, A, iters):
    """Modified Ruiz equilibration of [P A'; A 0] plus cost scaling (as OSQP).

    Returns the factors ``(D, E, c)`` (``Pb = c D P D``, ``Ab = E A D``). Only the
    magnitudes of the scaled matrices enter the factors, and ``|a b| = |a| |b|`` holds
    exactly in floating point, so the passes scale ``|P|`` and ``|A|`` (taken once) with
    the same products in the same order as scaling ``P`` and ``A`` themselves: the
    result is bit-for-bit that of the textbook loop, without an ``abs`` pass over both
    matrices in every Ruiz pass (measured ~2x faster on batches of small QPs).
    """
    n, m = P.shape[0], A.shape[0]
    D = jnp.ones((n,), P.dtype)
    E = jnp.ones((m,), P.dtype)
    c = jnp.ones((), P.dtype)
    aP, aA = jnp.abs(P), jnp.abs(A)

    def body(_, carry):
        aP, aA, q, D, E, c = carry
        col = jnp.maximum(jnp.max(aP, axis=0), jnp.max(aA, axis=0, initial=0.0))
        row = jnp.max(aA, axis=1, initial=0.0)
        dx = 1.0 / jnp.sqrt(_limit(col))
        dz = 1.0 / jnp.sqrt(_limit(row))
        aP = dx[:, None] * aP * dx[None, :]
        aA = dz[:, None] * aA * dx[None, :]
        q = dx * q
        D, E = D * dx, E * dz
        cost = jnp.maximum(jnp.mean(jnp.max(aP, axis=0)), _amax(q))
        ct = 1.0 / _limit(cost)
        return aP * ct, aA, q * ct, D, E, c * ct

    carry = jax.lax.fori_loop(0, iters, body, (aP, aA, q, D, E, c))
    return carry[3:]


def _rho_vec(data: Scaled, rho):
    return jnp.where(data.free, FREE_ROW_RHO, jnp.where(data.eq, EQ_RHO_WEIGHT * rho, rho))


def _split_inverse(dtype) -> bool:
    """Whether an inverse factor is kept as ``L^-1`` (two matrix-vector products per
    solve) rather than ``K^-1`` (one): in float32, see `_factor`."""
    return dtype == jnp.float32


# Inverses of order above 2 * _INV_BASE are taken by halves (see _spd_inverse), down to
# blocks of order at most _INV_BASE (Cholesky and one triangular solve against the
# identity); smaller ones directly. Measured (float64, 2-core CPU): 1024 SPD matrices in
# chunks of 32 lanes, n = 40, 64, 100, 150: leaves of at most 16 took 0.62x, 0.56x,
# 0.51x, 0.46x the time of the direct inverse (leaves of 8 or 32 were slower); at n = 20
# the split inverse alone took 0.73x but a batch of 1024 random QPs 1.02x the time (a
# lane's refactorization after a rho change, one lane at a time, pays per operation).
_INV_BASE = 16


def _tri_inverse(L, halves=True):
    """``L^-1`` of a lower-triangular ``L``, by halves above ``_INV_BASE``
    (``halves=False``: directly).

    ``[[L11, 0], [L21, L22]]^-1 = [[L11^-1, 0], [-L22^-1 L21 L11^-1, L22^-1]]``: two
    half-size inverses and two matrix products, where one triangular solve against the
    identity (a LAPACK trsm per lane on XLA:CPU, the slowest kernel of a batched
    factorization) costs ~2x as much. Same residual ``||L^-1 L - I||`` (measured, float32).
    """
    n = L.shape[-1]
    if n <= _INV_BASE or not halves:
        return solve_triangular(L, jnp.eye(n, dtype=L.dtype), lower=True)
    h = n // 2
    i11, i22 = _tri_inverse(L[:h, :h]), _tri_inverse(L[h:, h:])
    i21 = -(i22 @ L[h:, :h]) @ i11
    return jnp.block([[i11, jnp.zeros((h, n - h), L.dtype)], [i21, i22]])


def _spd_inverse(K, halves=True):
    r"""``K^-1`` of a symmetric positive definite ``K``, by halves above ``_INV_BASE``
    (``halves=False``: directly).

    With ``K = [[A, B], [B', C]]``, ``W = A^-1 B`` and the Schur complement
    ``S = C - B'W`` (positive definite when ``K`` is),

    $$
    K^{-1} = \begin{pmatrix} A^{-1} + W S^{-1} W' & -W S^{-1} \\
    -S^{-1} W' & S^{-1} \end{pmatrix},
    $$

    the two half-size inverses recursively and four matrix products: block Cholesky
    done by products, which XLA:CPU runs batched far faster than per-lane LAPACK
    triangular solves (0.51x the time of ``L^-T L^-1`` at n = 100, 0.62x at n = 40;
    same residual ``||K^-1 K - I||``). At the base, ``L^-T L^-1`` (exactly symmetric);
    the diagonal blocks are symmetrized. A ``K`` that is not positive definite has a
    leaf block (``A``, or a nested Schur complement) that is not, whose Cholesky gives
    NaN: the caller's finiteness check sees it as it saw the unsplit Cholesky's.
    """
    n = K.shape[-1]
    if n <= _INV_BASE or not halves:
        # L^-T L^-1: one triangular solve and a product, 1.45x faster batched on XLA:CPU
        # than cho_solve's two solves against the identity (32 lanes at n = 20: 178 vs
        # 261 us), same residual ||K X - I||
        Li = _tri_inverse(jnp.linalg.cholesky(K), False)
        return Li.T @ Li
    h = n // 2
    A, B, C = K[:h, :h], K[:h, h:], K[h:, h:]
    Ai = _spd_inverse(A)
    W = Ai @ B
    S = C - B.T @ W
    Si = _spd_inverse(0.5 * (S + S.T))
    X12 = -W @ Si
    X11 = Ai - X12 @ W.T
    return jnp.block([[0.5 * (X11 + X11.T), X12], [X12.T, Si]])


def _factor(data: Scaled, rho, inverse=False):
    """Factor ``K(rho) = P + sigma I + A' R A`` with ``R = diag(_rho_vec(data, rho))``.

    ``K`` is formed here from the scaled data (one ``n x m x n`` product) rather than
    kept as ``K0 + rho C`` from ``init``: ``init`` then forms one product instead of two
    and the state holds no ``n x n`` parts, and a refactorization is rare (0.16 per lane
    on 1024 random QPs at n = 20, none at n = 100). ``R`` is the ADMM's own row weights.

    ``inverse``: an explicit inverse factor instead of the Cholesky factor:
    matrix-vector products per iteration instead of two triangular solves (much faster
    batched on CPU/GPU); ADMM tolerates it, polishing restores accuracy. float64 keeps
    ``K^-1`` (`_spd_inverse`), float32 ``L^-1`` (`_tri_inverse`) and applies
    ``K^-1 b = L^-T (L^-1 b)``: its residual ``||b - K x|| / (|K| |x|)`` stays at the
    Cholesky solve's ~1e-8, where ``K^-1`` rounded to float32 (even from float64) leaves
    ~eps cond(K) (equality rows weigh 1e3 rho: 4e-6 on an equality-constrained QP whose
    ADMM then never converged; its relative KKT error stayed ~1).
    """
    A = data.A
    K = data.P + data.sigma * jnp.eye(A.shape[1], dtype=A.dtype)
    K = K + A.T @ (_rho_vec(data, rho)[:, None] * A)
    if not inverse:
        return jnp.linalg.cholesky(K)
    halves = K.shape[-1] > 2 * _INV_BASE
    if _split_inverse(K.dtype):
        return _tri_inverse(jnp.linalg.cholesky(K), halves)
    return _spd_inverse(K, halves)


def _solve_kkt(L, rhs, inverse, lt=None):
    """``K^-1 rhs`` from `_factor`'s output (``lt``: ``L.T``, when the caller made
    it once outside a loop)."""
    if not inverse:
        return cho_solve((L, True), rhs)
    if _split_inverse(L.dtype):
        return (L.T if lt is None else lt) @ (L @ rhs)
    return L @ rhs


def _prox(v, lo, up, t):
    """Prox of ``t * dist(., [lo, up])``: shrink toward the interval by at most ``t``."""
    return jnp.where(v > up, jnp.maximum(up, v - t), jnp.where(v < lo, jnp.minimum(lo, v + t), v))


def relaxed_update(zh, y, rv, mv, lo, up, ri=None):
    """``z = prox_{(mu/rho) dist}(v)``, ``y = rho (v - z)`` with ``v = zh + y/rho``.

    Written without forming ``v - mu/rho``: with large elastic weights ``v`` and
    ``mu/rho`` are huge and nearly cancel on violated rows; here a violated row gets
    ``z = zh + (y - mu)/rho`` and ``y = mu`` exactly. ``ri``: ``1 / rv`` taken once
    by the caller (lockstep batches: a multiply instead of three divides per row and
    iteration; equal to the division form up to rounding).
    """
    over = (lambda a: a / rv) if ri is None else (lambda a: a * ri)  # noqa: E731
    v = zh + over(y)
    above, below = v > up, v < lo
    z_up = zh + over(y - mv)
    z_lo = zh + over(y + mv)
    sat_up, sat_lo = above & (z_up >= up), below & (z_lo <= lo)
    z = jnp.where(
        sat_up, z_up, jnp.where(above, up, jnp.where(sat_lo, z_lo, jnp.where(below, lo, v)))
    )
    y_new = jnp.where(
        sat_up,
        mv,
        jnp.where(
            above,
            y + rv * (zh - up),
            jnp.where(sat_lo, -mv, jnp.where(below, y + rv * (zh - lo), 0.0)),
        ),
    )
    return z, y_new


def _sigma(hp, dtype):
    return jnp.maximum(hp.sigma, 50 * jnp.finfo(dtype).eps)


def prepare_scaled(qp: QP, hp, scaling_iters):
    """The Ruiz-equilibrated `Scaled` data of ``qp`` (row masks, sigma, norms) FlexQP runs on."""
    P, q, A = qp.P, qp.q, qp.A
    D, E, c = jax.lax.stop_gradient(_ruiz(*jax.lax.stop_gradient((P, q, A)), scaling_iters))
    return scaled_with(qp, hp, D, E, c)


def scaled_with(qp: QP, hp, D, E, c):
    """`Scaled` data of ``qp`` for given Ruiz factors ``(D, E, c)`` (computed once by a
    caller that carries them, as Deep FlexQP does)."""
    P, q, A, l, u = qp
    dtype = q.dtype
    # Rescale with the (constant) factors so derivatives flow to the data (unrolling).
    Ps = c * D[:, None] * P * D[None, :]
    qs = c * D * q
    As = E[:, None] * A * D[None, :]
    ls, us = E * l, E * u
    eq = jnp.isfinite(l) & jnp.isfinite(u) & (jnp.abs(u - l) <= 1e-4 * jnp.maximum(1.0, jnp.abs(u)))
    free = ~jnp.isfinite(l) & ~jnp.isfinite(u)
    anorm = jax.lax.stop_gradient(_amax_rows(A))
    return Scaled(Ps, qs, As, ls, us, D, E, c, l, u, eq, free, _sigma(hp, dtype), anorm)


def _amax_rows(A):
    return jnp.max(jnp.abs(A), axis=-1, initial=0.0)


class _Res(NamedTuple):
    kkt: Any
    sat: Any
    error: Any
    rp: Any
    rd: Any
    np_: Any
    nd: Any
    Ax: Any


def kkt_residuals(d: Scaled, x, z, y, pending_on):
    """Residuals and error at scaled ``(x, z, y)``; ``y=None`` stands for ``y = 0`` (a
    cold start: the two passes over ``A`` for ``A'y`` and ``|A|'|y|`` are skipped)."""
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
    rp_u = _amax(Ax_u - z_u)
    rd_u = _amax(Px_u + q_u + Dinv * Aty / d.c)
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
            rp_u / (1.0 + jnp.maximum(_amax(Ax_u), _amax(z_u))),
            rd_u / (1.0 + jnp.maximum(jnp.maximum(_amax(Px_u), _amax(Aty_u)), _amax(q_u))),
        ),
        gap,
    )
    # Each row also against its own scale (||a_i|| ||x||, |a_i'x|, |z_i|): relative to
    # the largest row alone, a row scaled by 1e8 would hide another row's violation
    # (issue 23: SUCCESS with a row violated by 0.02). SUCCESS means every row of the
    # problem as given meets tol relative to its own size.
    row = 1.0 + jnp.maximum(jnp.maximum(jnp.abs(Ax_u), jnp.abs(z_u)), d.anorm * _amax(d.D * x))
    kkt = jnp.maximum(kkt, _amax(jnp.abs(Ax_u - z_u) / row))
    sat_abs = _amax(interval_distance(z_u, d.lo, d.up))
    sat = jnp.maximum(sat_abs / (1.0 + _amax(z_u)), _amax(interval_distance(z_u, d.lo, d.up) / row))
    error = jnp.maximum(kkt, jnp.where(pending_on, sat, 0.0))
    rp = _amax(Ax - z)
    rd = _amax(Px + d.q + Aty)
    np_ = jnp.maximum(_amax(Ax), _amax(z))
    nd = jnp.maximum(jnp.maximum(_amax(Px), _amax(Aty)), _amax(d.q))
    return _Res(kkt, sat, error, rp, rd, np_, nd, Ax)


def _violation(d: Scaled, Ax):
    """Per-row violation ``dist(A x, [l, u])`` from the scaled product ``Ax = E A D xs``."""
    return interval_distance(Ax / d.E, d.lo, d.up)


def _mu_vec(d: Scaled, level):
    return level / d.E


def unscale(d: Scaled, xs, zs, ys):
    """Scaled ``(x, z, y)`` back in the problem's units: ``(D x, z / E, E y / c)``."""
    return d.D * xs, zs / d.E, d.E * ys / d.c


def _psd(P):
    """Whether ``P`` is positive semidefinite up to rounding (Cholesky of ``P`` shifted by
    ``sqrt(eps) (1 + max|P|)``, as `jaxsolve.qp.problem.validate_qp` checks a
    concrete ``P``): under tracing an indefinite ``P`` stops the run at once with
    ``BREAKDOWN`` (FlexQP is a convex method; its stationary point is no minimum)."""
    P = jax.lax.stop_gradient(P)
    shift = jnp.sqrt(jnp.finfo(P.dtype).eps) * (1.0 + _amax(P))
    L = jnp.linalg.cholesky(P + shift * jnp.eye(P.shape[-1], dtype=P.dtype))
    return jnp.all(jnp.isfinite(L))


def _init(solver: FlexQP, x0, qp: QP) -> FlexQPState:
    dtype = qp.q.dtype
    hp = solver.hyper(dtype)
    kkt_inverse = solver.kkt_inverse
    d = prepare_scaled(qp, hp, solver.scaling_iters)
    if isinstance(x0, WarmStart):
        x0v = jnp.asarray(x0.x, dtype)
        xs = x0v / d.D
        ys = jnp.asarray(x0.y, dtype) * d.c / d.E
        zs = jnp.asarray(x0.z, dtype) * d.E
        rho = jnp.clip(jnp.asarray(x0.rho, dtype), _RHO_MIN, _RHO_MAX)
        level = jnp.clip(jnp.asarray(x0.mu, dtype) * d.c, hp.mu, hp.mu_max)
    else:
        x0v = jnp.asarray(x0, dtype)
        xs = x0v / d.D
        zs = jnp.clip(d.A @ xs, d.l, d.u)
        ys = jnp.zeros_like(zs)
        rho = jnp.clip(hp.rho, _RHO_MIN, _RHO_MAX)
        level = jnp.minimum(hp.mu, hp.mu_max)
    L = _factor(d, rho, kkt_inverse)
    cold = not isinstance(x0, WarmStart)
    res = kkt_residuals(d, xs, zs, None if cold else ys, level < hp.mu_max)
    x, z, y = unscale(d, xs, zs, ys)
    return FlexQPState(
        x=x,
        iter_num=jnp.int32(0),
        error=res.error,
        status=jnp.where(_psd(qp.P), jnp.int32(Status.SUCCESS), jnp.int32(Status.BREAKDOWN)).astype(
            jnp.int32
        ),
        y=y,
        z=z,
        viol=_violation(d, res.Ax),
        rho=rho,
        mu=level / d.c,
        kkt=res.kkt,
        admm_iters=jnp.int32(0),
        xs=xs,
        zs=zs,
        ys=ys,
        mu_level=level,
        unb_count=jnp.int32(0),
        L=L,
        data=d,
    )


def _admm_block(d: Scaled, L, xs, zs, ys, rho, level, hp, k, inverse, recip=False, hoist=False):
    rv = _rho_vec(d, rho)
    mv = _mu_vec(d, level)
    sigma, alpha = _sigma(hp, xs.dtype), hp.alpha

    # Lockstep batches take 1 / rho once per block: no divide that XLA:CPU keeps as a
    # separate kernel (10 iterations of 32 lanes at n = 20: ~110 -> ~90 us).
    ri = 1.0 / rv if recip else None

    # hoist: the transposes the loop multiplies by (A^T, the float32 factor's L^T) made
    # once before it; in a single lane's loop XLA:CPU copied them in every iteration
    # (single Maros-Meszaros solves 0.85-0.93x the time). Lockstep chunks keep the
    # products as they were: hoisted there, 1024 random QPs took 0.91x the time at
    # n = 20 in float32 but 1.02-1.03x at n = 100 and in float64 (same-process A/B).
    at = d.A.T if hoist else None
    lt = L.T if hoist and inverse and _split_inverse(L.dtype) else None

    def body(_, carry):
        x, z, y = carry
        rhs = sigma * x - d.q + (d.A.T if at is None else at) @ (rv * z - y)
        xt = _solve_kkt(L, rhs, inverse, lt)
        zt = d.A @ xt
        xn = alpha * xt + (1 - alpha) * x
        zh = alpha * zt + (1 - alpha) * z
        zn, yn = relaxed_update(zh, y, rv, mv, d.l, d.u, ri)
        return xn, zn, yn

    return jax.lax.fori_loop(0, k, body, (xs, zs, ys))


def _step(
    solver: FlexQP, state: FlexQPState, qp: QP, options: dict | None
) -> tuple[FlexQPState, FlexQPInfo]:
    dtype = state.xs.dtype
    hp = solver.hyper(dtype)
    check_every, polish_every = solver.check_every, solver.polish_every
    polish_refine, polish_passes = solver.polish_refine, solver.polish_passes
    adaptive_rho, rho_every, kkt_inverse = solver.adaptive_rho, solver.rho_every, solver.kkt_inverse
    # lockstep batches (jaxsolve.qp.lockstep) pass the run-time options of LOCKSTEP_OPTIONS
    options = options or {}
    lanes = options.get("lanes")
    active = options.get("active")
    defer_refactor = bool(options.get("defer_refactor", False))
    d = state.data

    def uniform(pred):
        # Lockstep batches (jaxsolve.qp.lockstep) call this step under
        # vmap(axis_name=lanes): the branch is taken when any running lane needs it, so
        # the lax.cond stays a real branch; each lane still applies only its own pred.
        if lanes is None:
            return pred
        return jax.lax.pmax((pred & active).astype(jnp.int32), lanes) > 0

    xs, zs, ys = _admm_block(
        d,
        state.L,
        state.xs,
        state.zs,
        state.ys,
        state.rho,
        state.mu_level,
        hp,
        check_every,
        kkt_inverse,
        recip=lanes is not None,
        hoist=lanes is None,
    )
    level = state.mu_level
    res = kkt_residuals(d, xs, zs, ys, level < hp.mu_max)

    # Elastic weight: when the relaxed iteration has settled (KKT residual small against
    # the violation it keeps) and rows are still violated with saturated multipliers,
    # the weight is below the optimal multipliers (or the QP is infeasible): grow it.
    grow = (res.sat > 2.0 * res.kkt) & (level < hp.mu_max)
    new_level = jnp.where(grow, jnp.minimum(level * hp.mu_factor, hp.mu_max), level)
    # On an infeasible QP every multiplier of the relaxed solution grows like mu (they
    # form the certificate A'w ~ 0 with w = y/mu), so scale them all with the weight
    # instead of letting the dual ascent rebuild them.
    ys = jnp.where(grow, ys * (new_level / level), ys)

    # Adaptive rho (OSQP rule), refactor only when it moves by more than 5x.
    ratio = (res.rp / (res.np_ + 1e-30)) / (res.rd / (res.nd + 1e-30) + 1e-30)
    rho_new = jnp.clip(state.rho * jnp.sqrt(ratio), _RHO_MIN, _RHO_MAX)
    change = (rho_new > 5.0 * state.rho) | (rho_new < state.rho / 5.0)
    change = change & jnp.isfinite(rho_new) & adaptive_rho
    # ... and at most every rho_every steps: reacting to every check let rho ping-pong
    # between two values 8x apart (a lane of a random batch never converged).
    change = change & ((state.iter_num + 1) % rho_every == 0)

    def refactor(_):
        Lnew = _factor(d, rho_new, kkt_inverse)
        ok = jnp.all(jnp.isfinite(Lnew)) & change
        return jnp.where(ok, Lnew, state.L), jnp.where(ok, rho_new, state.rho)

    if defer_refactor:
        # Lockstep batches factor only the lanes that moved rho, after the step
        # (jaxsolve.qp.lockstep): the state keeps its factor, the info carries rho_new.
        L, rho = state.L, state.rho
    else:
        L, rho = jax.lax.cond(uniform(change), refactor, lambda _: (state.L, state.rho), None)
    L, rho = jax.lax.stop_gradient((L, rho))

    # Unboundedness certificate (OSQP dual infeasibility on the block's step
    # dx): P dx ~ 0, q'dx < 0, A dx in the recession cone of [l, u]. Then the relaxed
    # problem is unbounded for every elastic weight. Required on 3 consecutive checks.
    dxs = xs - state.xs
    dx = d.D * dxs
    ndx = _amax(dx)
    eps = hp.eps_unbounded * ndx
    Pdx = (d.P @ dxs) / (d.D * d.c)
    qdx = d.q @ dxs / d.c
    Adx = (d.A @ dxs) / d.E
    cone = jnp.all(
        jnp.where(jnp.isfinite(d.up), Adx <= eps, True)
        & jnp.where(jnp.isfinite(d.lo), Adx >= -eps, True)
    )
    cert = (ndx > 1e3 * jnp.finfo(dtype).tiny) & (_amax(Pdx) <= eps) & (qdx <= -eps) & cone
    unb = jnp.where(cert, state.unb_count + 1, 0).astype(jnp.int32)
    status = jnp.where(unb >= 3, jnp.int32(Status.UNBOUNDED), state.status).astype(jnp.int32)

    if polish_every > 0:
        # In-loop polishing: once the active set is right (after a warm start, usually at
        # once) the polished point ends the run. Kept only if it lowers the error; the
        # ADMM iterates continue from it otherwise unchanged. Under vmap the lax.cond
        # becomes a select, so batched users keep polish_every=0 (the default).
        pending = new_level < hp.mu_max
        err_now = jnp.maximum(res.kkt, jnp.where(pending, res.sat, 0.0))
        # steps 1, 2, 4, 8, ... (early: warm starts) and every polish_every-th step
        k = state.iter_num + 1
        attempt = (k % polish_every == 0) | ((k & (k - 1)) == 0)

        def try_polish(_):
            res_now = res._replace(error=err_now)
            return _polish_in_loop(
                d,
                xs,
                zs,
                ys,
                new_level,
                res_now,
                hp,
                polish_refine,
                polish_passes,
                pending,
                attempt,
            )

        xs, zs, ys, res = jax.lax.cond(
            uniform(attempt), try_polish, lambda _: (xs, zs, ys, res), None
        )

    error = jnp.maximum(res.kkt, jnp.where(new_level < hp.mu_max, res.sat, 0.0))
    x, z, y = unscale(d, xs, zs, ys)
    new = FlexQPState(
        x=x,
        iter_num=state.iter_num + 1,
        error=error.astype(dtype),
        status=status,
        y=y,
        z=z,
        viol=_violation(d, res.Ax),
        rho=rho,
        mu=new_level / d.c,
        kkt=res.kkt,
        admm_iters=state.admm_iters + check_every,
        xs=xs,
        zs=zs,
        ys=ys,
        mu_level=new_level,
        unb_count=unb,
        L=L,
        data=d,
    )
    if defer_refactor:
        rho_new = jax.lax.stop_gradient(jnp.where(change, rho_new, state.rho))
        return new, FlexQPInfo(res.kkt, rho_new, new_level / d.c, change)
    return new, FlexQPInfo(res.kkt, rho, new_level / d.c, change)


def _classify(d: Scaled, zs, ys, sat_up, sat_lo):
    """Active set from a point: OSQP's rule ``u - z < y`` (upper) / ``z - l < -y`` (lower)."""
    sat = sat_up | sat_lo
    act_up = ~sat & (d.u - zs < ys)
    act_lo = ~sat & (zs - d.l < -ys)
    return act_up, act_lo


def _reclassify(d: Scaled, Ax, y, mv):
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
    sat_up, sat_lo = v > d.u + mv, v < d.l - mv
    return sat_up, sat_lo, *_classify(d, Ax, y, sat_up, sat_lo)


def _polish_once(d: Scaled, xs, ys, sat_up, sat_lo, act_up, act_lo, mv, delta, refine):
    """One active-set solve of the (relaxed) KKT system with iterative refinement."""
    dtype = xs.dtype
    sat = sat_up | sat_lo
    act = (act_up | act_lo | d.eq) & ~sat
    lower = act_lo & ~d.eq
    bnd = jnp.where(lower, d.l, d.u)
    b = jnp.where(act, bnd, 0.0)
    a = act.astype(dtype)
    ysat = jnp.where(sat_up, mv, jnp.where(sat_lo, -mv, 0.0))
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
    y = jnp.clip(y, -mv, mv)
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


def _polish(
    d: Scaled, xs, zs, ys, level, delta, refine, passes, pending, res0, *, fine=0, fine_refine=0
):
    """Active-set polishing, OSQP-style, repeated as a primal-dual active-set method.

    Rows are classified from the ADMM iterate: violated rows (``z`` outside the
    bounds) keep their saturated multiplier ``+-mu``; rows with ``u - z < y`` (or
    ``z - l < -y``) and equality rows are active; the rest are inactive (``y = 0``).
    The regularized KKT system is reduced to ``(P + dI + A_a'A_a/d) x = ...`` and
    used for iterative refinement of the exact KKT system, started at the ADMM point.
    Each further pass (``passes > 1``) re-classifies every row from the polished point
    (`_reclassify`: ``z = A x`` and the unclipped active multipliers; a
    primal-dual active-set step, Hintermueller, Ito & Kunisch 2002): a row that the ADMM
    iterate put on the wrong side of its bound is corrected, and so is a row it wrongly
    read as violated or as satisfied (an active row whose multiplier exceeds the elastic
    weight becomes violated; a violated row back inside its bounds, active or inactive).
    On 32 random infeasible QPs (n = 20, m = 40) this shortened five single solves
    (800 -> 325, 310 -> 220, 375 -> 250, 185 -> 120 and MAX_STEPS at 1000 -> 680 steps)
    and lengthened none; the Maros-Meszaros statuses did not change. The candidate with
    the smallest error (and the input point, ``res0``) wins, so polishing never makes it
    worse.

    ``fine`` further passes use ``delta / 100`` and ``fine_refine`` refinement steps.
    On a degenerate active set (an LP-like QP whose active rows leave directions of
    ``x`` or ``y`` undetermined) the refinement is a proximal-point iteration on a
    singular KKT system, which moves by about ``1/delta`` per step along those
    directions: with ``delta = 1e-6`` and a few steps it stops short (QBEACONF: dual
    residual and objective stuck at the ADMM point's 3.5e-6), with ``delta = 1e-8`` it
    lands on the vertex (KKT 1e-14). The small ``delta`` alone is less robust on
    ill-conditioned systems, hence a second stage started from the first stage's
    active set; the best candidate still wins.
    """
    mv = _mu_vec(d, level)
    sat_up, sat_lo = zs > d.u, zs < d.l
    act_up, act_lo = _classify(d, zs, ys, sat_up, sat_lo)

    def run(n_pass, dlt, ref, carry):
        def body(_, carry):
            x, y, act_up, act_lo, sat_up, sat_lo, best = carry
            x, z, y, ya, Ax, act = _polish_once(
                d, x, y, sat_up, sat_lo, act_up, act_lo, mv, dlt, ref
            )
            r = kkt_residuals(d, x, z, y, pending)
            ok = jnp.isfinite(r.error) & (r.error < best[3].error)
            best = jax.tree.map(lambda a, b: jnp.where(ok, a, b), (x, z, y, r), best)
            sat_up, sat_lo, act_up, act_lo = _reclassify(d, Ax, jnp.where(act, ya, y), mv)
            return x, y, act_up, act_lo, sat_up, sat_lo, best

        return jax.lax.fori_loop(0, n_pass, body, carry)

    carry = (xs, ys, act_up, act_lo, sat_up, sat_lo, (xs, zs, ys, res0))
    best = run(passes, delta, refine, carry)[6]
    if fine > 0:
        # Only when the first stage did not land on an exact point (error at rounding
        # level): restart from the best point so far (the input or a candidate).
        def run_fine(best):
            bx, bz, by, _ = best
            s_up, s_lo = bz > d.u, bz < d.l
            b_up, b_lo = _classify(d, bz, by, s_up, s_lo)
            # (not below 1e3 eps: in float32 the stage keeps delta, with more refinement)
            dfine = jnp.maximum(delta * 1e-2, 1e3 * jnp.finfo(xs.dtype).eps)
            return run(fine, dfine, fine_refine, (bx, by, b_up, b_lo, s_up, s_lo, best))[6]

        exact = best[3].error <= 1e3 * jnp.finfo(xs.dtype).eps
        best = jax.lax.cond(exact, lambda b: b, run_fine, best)
    return best


def _polish_in_loop(d: Scaled, xs, zs, ys, level, res, hp, refine, passes, pending, attempt=True):
    """The in-loop polish rule: polish, keep the polished point only if it is better.

    Relative errors saturate near 1 on poor points, so "lower" alone could swap a
    far-off ADMM iterate for a garbage one and derail the iteration: the polished point
    is kept only when it is an order of magnitude better than ``res.error`` and at most
    ``1e-3``, or when its error is at most ``hp.polish_accept`` (``solve_qp`` sets
    it to the tolerance: such a point ends the run, there is no iteration left to
    derail). Without that second rule a float32 lane at its precision floor (ADMM error
    2.8e-4 for 20000 iterations, tol 1e-4) rejected polished points of error 6.3e-5
    again and again: 4.5x better, not 10x. Returns the kept ``(xs, zs, ys, residuals)``.
    """
    delta = jnp.maximum(hp.delta, 1e3 * jnp.finfo(xs.dtype).eps)
    xp, zp, yp, rp = _polish(d, xs, zs, ys, level, delta, refine, passes, pending, res)
    better = (rp.error <= 0.1 * res.error) | (rp.error <= hp.polish_accept)
    ok = better & (rp.error <= 1e-3) & attempt
    pick = lambda a, b: jnp.where(ok, a, b)  # noqa: E731
    return pick(xp, xs), pick(zp, zs), pick(yp, ys), jax.tree.map(pick, rp, res)


def _at(state: FlexQPState, xs, zs, ys, error, kkt, **more) -> FlexQPState:
    """``state`` moved to the scaled iterates ``(xs, zs, ys)`` (and their user-unit
    ``x, z, y``) with the given error, KKT residual and further fields."""
    x, z, y = unscale(state.data, xs, zs, ys)
    return state._replace(
        x=x, y=y, z=z, xs=xs, zs=zs, ys=ys, error=error.astype(xs.dtype), kkt=kkt, **more
    )


def _residuals_now(solver: FlexQP, state: FlexQPState):
    """The hyperparameters in the state's dtype, whether the elastic weight can still
    grow, and the residuals at the state's own iterates."""
    hp = solver.hyper(state.xs)
    pending = state.mu_level < hp.mu_max
    return hp, pending, kkt_residuals(state.data, state.xs, state.zs, state.ys, pending)


def _polish_state(solver: FlexQP, state: FlexQPState, qp: QP) -> FlexQPState:
    """The in-loop polish of `_step` applied to a state on its own.

    Used by lockstep batches (`jaxsolve.qp.lockstep`) on the lanes whose error
    first falls below a threshold: the polished point replaces the iterate only when
    it is an order of magnitude better and below ``1e-3`` (the rule of the in-loop
    polish), so a lane whose active set is already right ends there, and the others
    continue their ADMM iteration from the same (or the polished) point.
    """
    hp, pending, res = _residuals_now(solver, state)
    d, xs, zs, ys = state.data, state.xs, state.zs, state.ys
    xs, zs, ys, res = _polish_in_loop(
        d, xs, zs, ys, state.mu_level, res, hp, solver.polish_refine, solver.polish_passes, pending
    )
    return _at(state, xs, zs, ys, res.error, res.kkt, viol=_violation(d, res.Ax))


def _final_polish(solver: FlexQP, state: FlexQPState, qp: QP, converged) -> FlexQPState:
    """The polish of `_finalize` alone: the state with the polished iterates.

    `_finalize` with ``polish`` is this followed by `_finalize` without it
    (the residuals at the kept point are recomputed there). Lockstep batches use it
    on the lanes that still need it: a lane that ended at an in-round polish
    (`_polish_state`) is not polished twice.
    """
    hp, pending_on, res = _residuals_now(solver, state)
    d, xs, zs, ys = state.data, state.xs, state.zs, state.ys
    delta = jnp.maximum(hp.delta, 1e3 * jnp.finfo(xs.dtype).eps)
    xp, zp, yp, rp = _polish(
        d,
        xs,
        zs,
        ys,
        state.mu_level,
        delta,
        solver.polish_refine,
        solver.polish_passes,
        pending_on,
        res,
        fine=solver.polish_fine,
        fine_refine=4 * solver.polish_refine,
    )
    ok = converged & jnp.isfinite(rp.error) & (rp.error < res.error)
    xs, zs, ys = (jnp.where(ok, a, b) for a, b in ((xp, xs), (zp, zs), (yp, ys)))
    return state._replace(xs=xs, zs=zs, ys=ys)


def _finalize(solver: FlexQP, state: FlexQPState, qp: QP, converged) -> FlexQPState:
    if solver.polish:
        # Polish only a converged run (as OSQP): it sharpens an answer, it does not
        # turn a stopped run into a success.
        state = _final_polish(solver, state, qp, converged)
    _, _, res = _residuals_now(solver, state)
    dtype = state.xs.dtype
    d, xs, zs, ys = state.data, state.xs, state.zs, state.ys
    x, z, y = unscale(d, xs, zs, ys)
    tiny = 1e3 * jnp.finfo(dtype).eps
    # Converged at the weight cap with rows still violated: the QP is infeasible, or
    # feasible with multipliers above mu_max (the relaxation is then inexact). Only a
    # certificate tells them apart (jaxsolve.qp.certify): INFEASIBLE needs no point
    # meeting the constraints within RADIUS_FACTOR * max(1, ||x||_inf) of x; otherwise
    # the run is reported MAX_STEPS with the violation in its error (raise mu_max).
    suspect = converged & (res.sat > jnp.maximum(10.0 * res.error, tiny))
    # w = y / mu in user units (= E ys / level): |w| <= 1, w in the subdifferential
    radius = exclusion_radius(d.A, d.l, d.u, xs, zs, ys / _mu_vec(d, state.mu_level), d.E, d.D)
    certified = radius >= RADIUS_FACTOR * jnp.maximum(1.0, _amax(x))
    infeasible = suspect & certified
    status = jnp.where(
        state.status != Status.SUCCESS,
        state.status,
        jnp.where(
            infeasible,
            jnp.int32(Status.INFEASIBLE),
            jnp.where(suspect, jnp.int32(Status.MAX_STEPS), jnp.int32(Status.SUCCESS)),
        ),
    ).astype(jnp.int32)
    error = jnp.where(suspect & ~certified, jnp.maximum(res.error, res.sat), res.error)
    return _at(state, xs, zs, ys, error, res.kkt, status=status, viol=qp.violation(x))


def kkt_residual(xy, qp: QP, mu):
    r"""KKT map of the elastic QP whose zero is the solution ``(x, y)``.

    $$
    F(x, y) = \begin{pmatrix} P x + q + A^\top y \\
    A x - \operatorname{prox}_{\mu\,\mathrm{dist}(\cdot, [l, u])}(A x + y) \end{pmatrix}
    $$

    The second block is the usual ``A x - proj_[l,u](A x + y)`` on rows whose
    multiplier is below ``mu`` and ``mu - |y|`` (fixed multiplier) on violated rows, so
    its Jacobian is the active-set KKT matrix of the relaxed problem (used for implicit
    differentiation, Amos & Kolter 2017 style, on the elastic problem).
    """
    x, y = xy
    P, q, A, l, u = qp
    Ax = A @ x
    return P @ x + q + A.T @ y, Ax - _prox(Ax + y, l, u, mu)


def kkt_lstsq(matvec, b):
    """Dense least-squares solve of the KKT system (FlexQP's ``implicit_solve``).

    The active-set KKT matrix is singular when active rows are dependent (duplicated
    rows, degenerate vertices); least squares gives the minimum-norm derivative there
    instead of NaN.
    """
    flat_b, unravel = ravel_pytree(b)
    J = jax.jacfwd(lambda v: ravel_pytree(matvec(unravel(v)))[0])(flat_b)
    return unravel(jnp.linalg.lstsq(J, flat_b)[0])


class _Hyper(NamedTuple):
    """FlexQP's numeric hyperparameters in one dtype (`FlexQP.hyper`)."""

    rho: Any
    sigma: Any
    alpha: Any
    mu: Any
    mu_max: Any
    mu_factor: Any
    delta: Any
    eps_unbounded: Any
    polish_accept: Any


class FlexQP(AbstractSolver):
    """FlexQP (see `flexqp`, which builds it and documents every field).

    Numeric hyperparameters (``rho`` ... ``polish_accept``) are traced fields: a sweep
    over them reuses one compilation. The iteration's structure is static.

    Run-time options (``step(state, args, options=...)``, the driver's ``options``
    channel) are used by lockstep batches (`jaxsolve.qp.lockstep`) only:
    ``lanes`` (the ``vmap`` axis name: lane-uniform ``lax.cond`` branches, taken when
    any running lane needs them), ``active`` (bool: this lane still runs) and
    ``defer_refactor`` (leave the factor as it is after a rho change and report the
    new rho in ``Info.rho`` with ``Info.rho_changed``: the batch refactors only those
    lanes, `refactor`).
    """

    rho: Any = 0.1
    sigma: Any = 1e-6
    alpha: Any = 1.6
    mu: Any = 1e4
    mu_max: Any = 1e6
    mu_factor: Any = 10.0
    delta: Any = 1e-6
    eps_unbounded: Any = 1e-5
    polish_accept: Any = 0.0
    check_every: int = eqx.field(static=True, default=10)
    scaling_iters: int = eqx.field(static=True, default=10)
    polish: bool = eqx.field(static=True, default=True)
    polish_refine: int = eqx.field(static=True, default=5)
    polish_passes: int = eqx.field(static=True, default=3)
    polish_fine: int = eqx.field(static=True, default=6)
    adaptive_rho: bool = eqx.field(static=True, default=True)
    rho_every: int = eqx.field(static=True, default=3)
    polish_every: int = eqx.field(static=True, default=0)
    kkt_inverse: bool = eqx.field(static=True, default=False)
    implicit_solve: Callable = eqx.field(static=True, default=kkt_lstsq)

    def hyper(self, like) -> _Hyper:
        """The numeric hyperparameters in the floating dtype of ``like``."""
        return hyper(
            _Hyper(
                self.rho,
                self.sigma,
                self.alpha,
                self.mu,
                self.mu_max,
                self.mu_factor,
                self.delta,
                self.eps_unbounded,
                self.polish_accept,
            ),
            like,
        )

    def init(self, x0, args: QP) -> FlexQPState:
        return _init(self, x0, with_constraint_rows(args))

    def step(self, state: FlexQPState, args: QP, options=None) -> tuple[FlexQPState, FlexQPInfo]:
        return _step(self, state, with_constraint_rows(args), options)

    def finalize(self, state: FlexQPState, args: QP, converged) -> FlexQPState:
        return _finalize(self, state, with_constraint_rows(args), converged)

    # --- implicit differentiation (jaxsolve.core.adjoint's implicit_root hook) ---------

    def implicit_root(self, state: FlexQPState, args: QP):
        """The primal-dual pair ``z = (x, y)`` as one vector; ``restore`` puts it back."""
        n = state.x.shape[-1]
        z = jnp.concatenate([state.x, state.y])
        return z, lambda z: state._replace(x=z[:n], y=z[n:])

    def optimality(self, z, args: QP, state: FlexQPState):
        r"""The KKT map of the elastic QP (`kkt_residual`) at the final elastic
        weight ``state.mu``: zero at the solution; its Jacobian is the active-set KKT
        matrix of the relaxed problem (violated rows enter with their fixed multiplier
        ``+-mu``), solved by least squares (`kkt_lstsq`)."""
        n = state.x.shape[-1]
        rx, ry = kkt_residual((z[:n], z[n:]), with_constraint_rows(args), state.mu)
        return jnp.concatenate([rx, ry])

    # --- hooks of lockstep batches (jaxsolve.qp.lockstep) -----------------------------

    def polish_step(self, state: FlexQPState, args: QP) -> FlexQPState:
        """The in-loop polish on its own (kept only when 10x better and below 1e-3)."""
        return _polish_state(self, state, args)

    def final_polish(self, state: FlexQPState, args: QP, converged) -> FlexQPState:
        """The polish of `finalize` alone (``finalize`` = this, then ``finalize``
        with ``polish=False``)."""
        return _final_polish(self, state, args, converged)

    def refactor(self, data: Scaled, rho) -> jax.Array:
        """The KKT factor of a state's ``data`` at penalty ``rho`` (after a deferred rho
        change: ``state.L`` for ``state.rho = rho``)."""
        return _factor(data, rho, self.kkt_inverse)


def flexqp(
    *,
    rho: float = 0.1,
    sigma: float = 1e-6,
    alpha: float = 1.6,
    mu: float = 1e4,
    mu_max: float = 1e6,
    mu_factor: float = 10.0,
    delta: float = 1e-6,
    eps_unbounded: float = 1e-5,
    check_every: int = 10,
    scaling_iters: int = 10,
    polish: bool = True,
    polish_refine: int = 5,
    polish_passes: int = 3,
    polish_fine: int = 6,
    adaptive_rho: bool = True,
    rho_every: int = 3,
    polish_every: int = 0,
    kkt_inverse: bool = False,
    polish_accept: float = 0.0,
) -> FlexQP:
    r"""FlexQP: ADMM on the exact l1 (elastic) relaxation of a QP (Oshin et al., 2025).

    For ``QP(P, q, A, l, u)`` it solves the always-feasible relaxation

    $$
    \min_x\ \tfrac12 x^\top P x + q^\top x + \mu \sum_i \operatorname{dist}(a_i^\top x, [l_i, u_i]).
    $$

    Exactness (paper, Thm 3.1): if the QP is feasible and $\mu > \|y^\star\|_\infty$
    (its optimal multipliers), the relaxation has the same solution. If the QP is
    infeasible, large enough $\mu$ gives the point of least l1 violation (an exact
    penalty of the polyhedral violation) with few violated rows.

    Iteration (OSQP splitting, Stellato et al. 2020, with the projection onto
    $[l, u]$ replaced by the prox of $\mu\,\mathrm{dist}$), in the
    Ruiz-equilibrated problem:

    $$
    (P + \sigma I + A^\top R A)\,\tilde x = \sigma x^k - q + A^\top(R z^k - y^k),\quad
    \hat z = \alpha A\tilde x + (1-\alpha) z^k,\quad x^{k+1} = \alpha\tilde x + (1-\alpha)x^k,

    v = \hat z + R^{-1} y^k,\quad z^{k+1} = \operatorname{prox}_{\mu R^{-1}\mathrm{dist}}(v),
    \quad y^{k+1} = R (v - z^{k+1}),
    $$

    so $|y_i| \le \mu_i$ always: the elastic weight clips the dual box, as in
    the paper's soft-thresholding block. ``R = diag(rho)`` (equality rows ``1e3 rho``).

    Choices (GUESS where the paper's details were unreadable, derived here):

    * One ``step`` is ``check_every`` ADMM iterations followed by the checks, so
      nothing expensive hides behind a ``lax.cond`` that ``vmap`` would turn into a
      select: the Cholesky factor of ``P + sigma I + A'RA`` is computed in ``init``
      and recomputed (``lax.cond``) only when the OSQP rho rule moves rho by >5x.
    * Elastic weight: starts at ``mu`` (relative to the equilibrated cost) and is
      multiplied by ``mu_factor`` (uniformly on all rows, so the infeasible limit is the
      *unweighted* l1 violation) whenever the relaxed iteration has settled while rows
      stay violated with saturated multipliers; capped at ``mu_max``.
    * ``error`` = max of the relative relaxed KKT residuals and duality gap (OSQP 1.x's
      criteria with ``eps_abs = eps_rel = tol``) and, while ``mu < mu_max``, the relative violation.
      So ``SUCCESS`` always means a feasible point (to ``tol``); an infeasible QP
      converges only at ``mu_max``, with rows still violated.
    * ``INFEASIBLE`` needs evidence. Rows violated at ``mu_max`` also happen on a
      *feasible* QP whose optimal multipliers exceed ``mu_max`` (Thm 3.1 then does not
      apply; Maros-Meszaros QPCBOEI2). ``finalize`` computes, from the relaxed solution
      and ``w = y / mu`` (a subgradient of the l1 violation ``V`` at ``z``), the radius
      ``R = (V(z) - w'(z - A x)) / ||A'w||_1`` within which no point meets the
      constraints (`jaxsolve.qp.certify.exclusion_radius`), and declares
      ``INFEASIBLE`` only if ``R >= 10 max(1, ||x||_inf)``. Otherwise the run ends
      ``MAX_STEPS`` with the relative violation in its ``error``: the QP may be
      feasible with multipliers above ``mu_max``; raise ``mu_max`` (an infeasible QP's
      ``R`` grows in proportion to it).
    * ``finalize`` polishes (active-set KKT solve with ``polish_refine`` refinement
      steps, ``polish_passes`` primal-dual active-set passes, then ``polish_fine`` passes
      with a 100x smaller regularization when those did not reach a rounding-level
      error; kept only if it lowers the error) and decides ``INFEASIBLE`` only when
      the run converged and the certificate above holds.
    * ``UNBOUNDED``: OSQP's dual-infeasibility certificate on the step over a block, on
      three consecutive checks (the relaxed problem is then unbounded for every mu).

    Args:
        rho: initial ADMM penalty (scaled problem). sigma: proximal weight.
        alpha: over-relaxation in (0, 2). mu, mu_max, mu_factor: elastic weight
            schedule. delta: polish regularization. eps_unbounded: tolerance of the
            unboundedness certificate.
        check_every: ADMM iterations per ``step`` (static). scaling_iters: Ruiz passes.
        polish: polish in ``finalize``. polish_refine: refinement steps.
            polish_passes: primal-dual active-set passes of the polish.
            polish_fine: further passes in ``finalize`` with ``delta / 100`` and
            ``4 * polish_refine`` refinement steps, run only when the first passes did
            not reach a rounding-level KKT error (degenerate, LP-like active sets).
        adaptive_rho: use the OSQP rho rule.
        polish_every: also try polishing inside the loop at the first step and every
            ``polish_every`` steps (0: only in ``finalize``). Worth it for single,
            high-accuracy or warm-started solves; under ``vmap`` the attempt runs on every
            step (a ``lax.cond`` becomes a select), so keep 0 for batches.
        kkt_inverse: keep the explicit inverse of ``P + sigma I + A'RA`` instead of its
            Cholesky factor (one matmul per iteration; faster batched, less accurate on
            ill-conditioned problems). float32 keeps ``L^-1`` (``K = L L'``) and
            applies ``L^-T (L^-1 b)``: two products, with the backward accuracy of the
            Cholesky solve, where the rounded ``K^-1`` loses ``eps cond(K)``.
        polish_accept: an in-loop polished point whose error is at most this is kept
            even when it is not 10x better than the ADMM point (`solve_qp` sets
            it to ``tol``: the point then ends the run; 0: only the 10x rule).

    Returns:
        The solver: ``args`` is a `QP`, ``x0`` an ``(n,)`` array or a `WarmStart`.
    """
    for name, v in (
        ("rho", rho),
        ("sigma", sigma),
        ("mu", mu),
        ("mu_max", mu_max),
        ("delta", delta),
    ):
        if not isinstance(v, jax.Array) and not v > 0:
            raise ValueError(f"{name} must be positive, got {v}")
    if not isinstance(alpha, jax.Array) and not 0 < alpha < 2:
        raise ValueError(f"alpha must be in (0, 2), got {alpha}")
    if not isinstance(polish_accept, jax.Array) and not polish_accept >= 0:
        raise ValueError(f"polish_accept must be non-negative, got {polish_accept}")
    if not isinstance(mu_factor, jax.Array) and not mu_factor > 1:
        raise ValueError(f"mu_factor must be > 1, got {mu_factor}")
    for name, v in (
        ("check_every", check_every),
        ("scaling_iters", scaling_iters),
        ("polish_refine", polish_refine),
        ("polish_passes", polish_passes),
        ("polish_fine", polish_fine),
        ("polish_every", polish_every),
        ("rho_every", rho_every),
    ):
        if (
            isinstance(v, bool)
            or not isinstance(v, int)
            or v < 0
            or (name in ("check_every", "rho_every") and v < 1)
        ):
            raise ValueError(
                f"{name} must be a {'positive' if name in ('check_every', 'rho_every') else 'non-negative'} int, got {v!r}"
            )
    num = lambda v: float(v) if isinstance(v, int) else v  # noqa: E731 - ints would be static
    return FlexQP(
        rho=num(rho),
        sigma=num(sigma),
        alpha=num(alpha),
        mu=num(mu),
        mu_max=num(mu_max),
        mu_factor=num(mu_factor),
        delta=num(delta),
        eps_unbounded=num(eps_unbounded),
        polish_accept=num(polish_accept),
        check_every=int(check_every),
        scaling_iters=int(scaling_iters),
        polish=bool(polish),
        polish_refine=int(polish_refine),
        polish_passes=int(polish_passes),
        polish_fine=int(polish_fine),
        adaptive_rho=bool(adaptive_rho),
        rho_every=int(rho_every),
        polish_every=int(polish_every),
        kkt_inverse=bool(kkt_inverse),
    )
