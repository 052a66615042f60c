r"""FlexQP: the solver, OSQP-style ADMM on the exact l1 (elastic) relaxation of a QP.

Paper: Oshin, Ghosh, Saravanos, Theodorou, "Deep FlexQP: accelerated nonlinear
programming via deep unfolding", arXiv:2512.01565 (ICLR 2026). The relaxation and its
exactness theorem (Thm 3.1) are the paper's; the iteration is the OSQP splitting
(Stellato et al., 2020) with the constraint projection replaced by the proximal map of
the l1 distance to the bounds ("analogous to OSQP, soft thresholding in the relaxation
block"). Its residuals, penalty rules and polishing are not taken from the paper: the
choices made here are derived from first principles and documented on `flexqp`.

This module holds the solver's state, step, finalize and factory; its parts live beside
it: `jaxsolve.qp.scaling` (Ruiz equilibration), `jaxsolve.qp.linalg` (the x-update's
factorizations), `jaxsolve.qp.admm` (the iteration and its penalty rules),
`jaxsolve.qp.residuals` (the error), `jaxsolve.qp.polish` (active-set polishing) and
`jaxsolve.qp.certify` (unboundedness and infeasibility certificates). It is longer than
those (about 750 lines) because it holds the solver's types, init, step and finalize
together with the factory `flexqp`, whose docstring is the method's reference: the
relaxation, the iteration and every choice made here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from jaxsolve.core import Status
from jaxsolve.core.compile_options import LOOP_EMITTERS_O1
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.qp.admm import (
    RHO_MAX,
    RHO_MIN,
    adapted_rho,
    admm_block,
    dist_prox,
    grown_weight,
    row_mu,
    row_rho,
)
from jaxsolve.qp.certify import RADIUS_FACTOR, UNBOUNDED_CHECKS, exclusion_radius, unbounded_step
from jaxsolve.qp.linalg import factor
from jaxsolve.qp.polish import at_rounding_level, polish, polish_in_loop
from jaxsolve.qp.problem import QP, with_constraint_rows
from jaxsolve.qp.residuals import kkt_residuals
from jaxsolve.qp.scaling import Scaled, amax, prepare_scaled, row_violation, unscale

__all__ = ["flexqp", "FlexQP", "FlexQPState", "FlexQPInfo", "WarmStart", "kkt_residual"]


class WarmStart(NamedTuple):
    """A starting point carrying duals and penalties (see `warm_start_from`).

    Pass it as ``x0`` to `jaxsolve.solve` / ``solve_qp``.

    Attributes:
        x: ``(n,)`` primal point.
        y: ``(m,)`` multipliers in the user's units (OSQP sign convention).
        z: ``(m,)`` relaxed copy of ``A x`` in the user's units.
        rho: scalar, the scaled ADMM penalty of a previous solve.
        mu: scalar, the elastic weight of a previous solve (user units).
    """

    x: jax.Array
    y: jax.Array
    z: jax.Array
    rho: jax.Array
    mu: jax.Array


class FlexQPState(NamedTuple):
    """State of `flexqp` (user units unless the name ends in ``s``; arrays in the QP's
    dtype unless noted; a batch adds a leading axis to every leaf).

    Attributes:
        x: ``(n,)`` primal iterate.
        iter_num: int32, number of steps taken (one step = ``check_every`` ADMM
            iterations).
        error: relative KKT residual of the relaxed problem, plus the remaining
            constraint violation while the elastic weight can still grow.
        status: int32 solver-declared status: ``SUCCESS`` (0) while running,
            ``BREAKDOWN`` from ``init`` when ``P`` is not positive semidefinite,
            ``UNBOUNDED`` when certified in ``step``; after ``finalize``
            ``INFEASIBLE`` when certified, ``MAX_STEPS`` when converged at ``mu_max``
            with rows violated but no certificate.
        y: ``(m,)`` multipliers of the rows of A, OSQP convention (``y > 0``: upper
            bound active, ``y < 0``: lower bound active); ``|y| <= mu``.
        z: ``(m,)`` the relaxed copy of ``A x`` (outside ``[l, u]`` only on violated
            rows).
        viol: ``(m,)`` per-row violation ``dist(A x, [l, u])``.
        rho: scalar scaled ADMM penalty.
        mu: scalar elastic weight in user units (``|y_i| <= mu``), adapted upward.
        kkt: relative KKT residual of the relaxed problem alone.
        admm_iters: int32, ADMM iterations performed.
        xs: ``(n,)`` the primal iterate in the scaled problem, ``x / D``; the iteration
            continues from the scaled iterate, ``x`` is its unscaled copy.
        zs: ``(m,)`` ``z`` in the scaled problem, ``E z``.
        ys: ``(m,)`` the multipliers in the scaled problem, ``c y / E``.
        mu_level: the elastic weight in the scaled cost's units (``mu = mu_level / c``).
        unbounded_streak: int32, consecutive steps whose ADMM block moved along a direction
            that passes the unboundedness test (`jaxsolve.qp.certify.unbounded_step`).
        polished: bool, the iterates are the point an in-loop polish kept (the last step's,
            or `FlexQP.polish_step`'s): ``finalize`` does not polish them again.
        L: ``(n, n)`` factor of ``P + sigma I + A'RA`` at ``rho``
            (`jaxsolve.qp.linalg.factor`).
        data: the `jaxsolve.qp.scaling.Scaled` problem the iteration runs on.
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
    unbounded_streak: jax.Array
    polished: jax.Array
    L: jax.Array
    data: Scaled


class FlexQPInfo(NamedTuple):
    """Per-step information of `flexqp` (scalars).

    Attributes:
        kkt: relative KKT residual of the relaxed problem after the step.
        rho: the ADMM penalty after the step (with ``defer_refactor``: the penalty the
            rule chose, which the caller applies by refactoring).
        mu: the elastic weight after the step, user units.
        rho_changed: bool, the adaptive rule moved rho in this step.
    """

    kkt: jax.Array
    rho: jax.Array
    mu: jax.Array
    rho_changed: jax.Array


def _psd(P):
    """Whether ``P`` is positive semidefinite up to rounding (Cholesky of ``P`` shifted by
    ``sqrt(eps) (1 + max|P|)``, as `jaxsolve.qp.problem.validate_qp` checks a
    concrete ``P``): under tracing an indefinite ``P`` stops the run at once with
    ``BREAKDOWN`` (FlexQP is a convex method; its stationary point is no minimum)."""
    P = jax.lax.stop_gradient(P)
    shift = jnp.sqrt(jnp.finfo(P.dtype).eps) * (1.0 + amax(P))
    L = jnp.linalg.cholesky(P + shift * jnp.eye(P.shape[-1], dtype=P.dtype))
    return jnp.all(jnp.isfinite(L))


def _init(solver: FlexQP, x0, qp: QP) -> FlexQPState:
    """The state at ``x0`` (an array, or a `WarmStart` with duals and penalties): the
    scaled data, the first factor and the residuals; ``BREAKDOWN`` if ``P`` is not PSD."""
    dtype = qp.q.dtype
    hparams = solver.hyper(dtype)
    kkt_inverse = solver.kkt_inverse
    d = prepare_scaled(qp, hparams, solver.scaling_iters)
    if isinstance(x0, WarmStart):
        x_start = jnp.asarray(x0.x, dtype)
        xs = x_start / d.D
        ys = jnp.asarray(x0.y, dtype) * d.c / d.E
        zs = jnp.asarray(x0.z, dtype) * d.E
        rho = jnp.clip(jnp.asarray(x0.rho, dtype), RHO_MIN, RHO_MAX)
        level = jnp.clip(jnp.asarray(x0.mu, dtype) * d.c, hparams.mu, hparams.mu_max)
    else:
        x_start = jnp.asarray(x0, dtype)
        xs = x_start / d.D
        zs = jnp.clip(d.A @ xs, d.l, d.u)
        ys = jnp.zeros_like(zs)
        rho = jnp.clip(hparams.rho, RHO_MIN, RHO_MAX)
        level = jnp.minimum(hparams.mu, hparams.mu_max)
    L = factor(d, row_rho(d, rho), kkt_inverse)
    cold = not isinstance(x0, WarmStart)
    res = kkt_residuals(d, xs, zs, None if cold else ys, level < hparams.mu_max)
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
        viol=row_violation(d, res.Ax),
        rho=rho,
        mu=level / d.c,
        kkt=res.kkt,
        admm_iters=jnp.int32(0),
        xs=xs,
        zs=zs,
        ys=ys,
        mu_level=level,
        unbounded_streak=jnp.int32(0),
        polished=jnp.zeros((), bool),
        L=L,
        data=d,
    )


def _step(
    solver: FlexQP, state: FlexQPState, qp: QP, options: dict | None
) -> tuple[FlexQPState, FlexQPInfo]:
    """One step: ``check_every`` ADMM iterations, then the residuals, the elastic
    weight and rho rules, the unboundedness test and (``polish_every``) the in-loop
    polish."""
    dtype = state.xs.dtype
    hparams = solver.hyper(dtype)
    check_every, polish_every = solver.check_every, solver.polish_every
    polish_refine, polish_passes = solver.polish_refine, solver.polish_passes
    adaptive_rho, rho_every, kkt_inverse = solver.adaptive_rho, solver.rho_every, solver.kkt_inverse
    # run-time options of lockstep batches (jaxsolve.qp.lockstep; see FlexQP)
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

    xs, zs, ys = admm_block(
        d,
        state.L,
        state.xs,
        state.zs,
        state.ys,
        state.rho,
        state.mu_level,
        hparams,
        check_every,
        kkt_inverse,
        recip=lanes is not None,
        hoist=lanes is None,
    )
    level = state.mu_level
    res = kkt_residuals(d, xs, zs, ys, level < hparams.mu_max)

    new_level, ys = grown_weight(res, level, ys, hparams)
    rho_new, change = adapted_rho(res, state.rho, state.iter_num, rho_every, adaptive_rho)

    def refactor(_):
        Lnew = factor(d, row_rho(d, rho_new), kkt_inverse)
        ok = jnp.all(jnp.isfinite(Lnew)) & change
        return jnp.where(ok, Lnew, state.L), jnp.where(ok, rho_new, state.rho)

    if defer_refactor:
        # Lockstep batches factor only the lanes that moved rho, after the step
        # (jaxsolve.qp.lockstep): the state keeps its factor, the info carries rho_new.
        L, rho = state.L, state.rho
    else:
        L, rho = jax.lax.cond(uniform(change), refactor, lambda _: (state.L, state.rho), None)
    L, rho = jax.lax.stop_gradient((L, rho))

    # Unboundedness (OSQP's dual-infeasibility certificate on the block's step): the
    # relaxed problem is then unbounded for every elastic weight.
    streak = jnp.where(
        unbounded_step(d, xs - state.xs, hparams.eps_unbounded), state.unbounded_streak + 1, 0
    ).astype(jnp.int32)
    status = jnp.where(
        streak >= UNBOUNDED_CHECKS, jnp.int32(Status.UNBOUNDED), state.status
    ).astype(jnp.int32)

    if polish_every > 0:
        # In-loop polishing: once the active set is right (after a warm start, usually at
        # once) the polished point ends the run. Kept only if it lowers the error; the
        # ADMM iterates continue from it otherwise unchanged. Under vmap the lax.cond
        # becomes a select, so batched users keep polish_every=0 (the default).
        pending = new_level < hparams.mu_max
        err_now = jnp.maximum(res.kkt, jnp.where(pending, res.violation, 0.0))
        # steps 1, 2, 4, 8, ... (early: warm starts) and every polish_every-th step
        k = state.iter_num + 1
        attempt = (k % polish_every == 0) | ((k & (k - 1)) == 0)

        def try_polish(_):
            res_now = res._replace(error=err_now)
            return polish_in_loop(
                d,
                xs,
                zs,
                ys,
                new_level,
                res_now,
                hparams,
                polish_refine,
                polish_passes,
                pending,
                attempt,
            )

        xs, zs, ys, res, polished = jax.lax.cond(
            uniform(attempt), try_polish, lambda _: (xs, zs, ys, res, jnp.zeros((), bool)), None
        )
    else:
        polished = jnp.zeros((), bool)

    error = jnp.maximum(res.kkt, jnp.where(new_level < hparams.mu_max, res.violation, 0.0))
    x, z, y = unscale(d, xs, zs, ys)
    new = FlexQPState(
        x=x,
        iter_num=state.iter_num + 1,
        error=error.astype(dtype),
        status=status,
        y=y,
        z=z,
        viol=row_violation(d, res.Ax),
        rho=rho,
        mu=new_level / d.c,
        kkt=res.kkt,
        admm_iters=state.admm_iters + check_every,
        xs=xs,
        zs=zs,
        ys=ys,
        mu_level=new_level,
        unbounded_streak=streak,
        polished=polished,
        L=L,
        data=d,
    )
    if defer_refactor:
        rho_new = jax.lax.stop_gradient(jnp.where(change, rho_new, state.rho))
        return new, FlexQPInfo(res.kkt, rho_new, new_level / d.c, change)
    return new, FlexQPInfo(res.kkt, rho, new_level / d.c, change)


def _with_iterates(state: FlexQPState, xs, zs, ys, error, kkt, **more) -> FlexQPState:
    """``state`` moved to the scaled iterates ``(xs, zs, ys)`` (and their user-unit
    ``x, z, y``) with the given error, KKT residual and further fields."""
    x, z, y = unscale(state.data, xs, zs, ys)
    return state._replace(
        x=x, y=y, z=z, xs=xs, zs=zs, ys=ys, error=error.astype(xs.dtype), kkt=kkt, **more
    )


def _residuals_now(solver: FlexQP, state: FlexQPState):
    """The hyperparameters in the state's dtype, whether the elastic weight can still
    grow, and the residuals at the state's own iterates."""
    hparams = solver.hyper(state.xs)
    pending = state.mu_level < hparams.mu_max
    return hparams, pending, kkt_residuals(state.data, state.xs, state.zs, state.ys, pending)


def _polish_state(solver: FlexQP, state: FlexQPState, qp: QP) -> FlexQPState:
    """The in-loop polish of `_step` applied to a state on its own.

    Used by lockstep batches (`jaxsolve.qp.lockstep`) on the lanes whose error
    first falls below a threshold: the polished point replaces the iterate only when
    it is an order of magnitude better and below ``1e-3`` (the rule of the in-loop
    polish), so a lane whose active set is already right ends there, and the others
    continue their ADMM iteration from the same (or the polished) point.
    """
    hparams, pending, res = _residuals_now(solver, state)
    d, xs, zs, ys = state.data, state.xs, state.zs, state.ys
    xs, zs, ys, res, kept = polish_in_loop(
        d,
        xs,
        zs,
        ys,
        state.mu_level,
        res,
        hparams,
        solver.polish_refine,
        solver.polish_passes,
        pending,
    )
    return _with_iterates(
        state,
        xs,
        zs,
        ys,
        res.error,
        res.kkt,
        viol=row_violation(d, res.Ax),
        polished=state.polished | kept,
    )


def _final_polish(solver: FlexQP, state: FlexQPState, qp: QP, converged) -> FlexQPState:
    """The polish of `_finalize` alone: the state with the polished iterates.

    `_finalize` with ``polish`` is this followed by `_finalize` without it
    (the residuals at the kept point are recomputed there). Lockstep batches use it
    on the lanes that still need it: a lane that ended at an in-round polish
    (`_polish_state`) is not polished twice.

    A state whose iterates an in-loop polish kept (``state.polished``) at a
    rounding-level error (`jaxsolve.qp.polish.at_rounding_level`) is returned as it
    is: polishing it again could only swap it for another rounding-level point, at the
    cost of a factorization (in a single SQP subproblem that ends at its first polish,
    a third of the solve). Its unrolled derivative is that of the in-loop polish. A
    polished point above rounding level is polished again: the fine stage
    (``polish_fine``) runs only here.
    """

    def run(state):
        hparams, pending_on, res = _residuals_now(solver, state)
        d, xs, zs, ys = state.data, state.xs, state.zs, state.ys
        delta = jnp.maximum(hparams.delta, 1e3 * jnp.finfo(xs.dtype).eps)
        x_pol, z_pol, y_pol, res_pol = polish(
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
        ok = converged & jnp.isfinite(res_pol.error) & (res_pol.error < res.error)
        xs, zs, ys = (jnp.where(ok, a, b) for a, b in ((x_pol, xs), (z_pol, zs), (y_pol, ys)))
        return state._replace(xs=xs, zs=zs, ys=ys)

    done = state.polished & at_rounding_level(state.error, state.xs.dtype)
    return jax.lax.cond(done, lambda s: s, run, state)


def _finalize(solver: FlexQP, state: FlexQPState, qp: QP, converged) -> FlexQPState:
    """The polish of a converged run, then the final status (``INFEASIBLE`` when
    certified, ``MAX_STEPS`` when rows stay violated without a certificate)."""
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
    suspect = converged & (res.violation > jnp.maximum(10.0 * res.error, tiny))
    # w = y / mu in user units (= E ys / level): |w| <= 1, w in the subdifferential
    radius = exclusion_radius(d.A, d.l, d.u, xs, zs, ys / row_mu(d, state.mu_level), d.E, d.D)
    certified = radius >= RADIUS_FACTOR * jnp.maximum(1.0, amax(x))
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
    error = jnp.where(suspect & ~certified, jnp.maximum(res.error, res.violation), res.error)
    return _with_iterates(state, xs, zs, ys, error, res.kkt, status=status, viol=qp.violation(x))


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
    return P @ x + q + A.T @ y, Ax - dist_prox(Ax + y, l, u, mu)


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

    # XLA options of the driver's program for FlexQP (the protocol's compiler_options
    # hook; solve_lockstep uses them too): XLA:CPU's loop emitters and LLVM -O1. One QP
    # (n = 20, m = 40, float64) compiles in 2.4 CPU s instead of 3.7 (its first call
    # 4.3 -> 2.6), and runs as fast (same-process A/B on Maros-Meszaros problems,
    # bench/results/compile.md) with the same statuses and steps, x and y to 2e-15.
    compiler_options: ClassVar[dict] = LOOP_EMITTERS_O1

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
        return factor(data, row_rho(data, rho), self.kkt_inverse)


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
    \begin{gathered}
    (P + \sigma I + A^\top R A)\,\tilde x = \sigma x^k - q + A^\top(R z^k - y^k),\quad
    \hat z = \alpha A\tilde x + (1-\alpha) z^k,\quad x^{k+1} = \alpha\tilde x + (1-\alpha)x^k,
    \\
    v = \hat z + R^{-1} y^k,\quad z^{k+1} = \operatorname{prox}_{\mu R^{-1}\mathrm{dist}}(v),
    \quad y^{k+1} = R (v - z^{k+1}),
    \end{gathered}
    $$

    so $|y_i| \le \mu_i$ always: the elastic weight clips the dual box, as in
    the paper's soft-thresholding block. ``R = diag(rho)`` (equality rows ``1e3 rho``).

    Choices made here (derived, not taken from the paper):

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
      apply). ``finalize`` computes, from the relaxed solution
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
      three consecutive checks (the relaxed problem is then unbounded for every mu;
      `jaxsolve.qp.certify.unbounded_step`).

    Args:
        rho: initial ADMM penalty of the scaled problem.
        sigma: proximal weight of the x-update (at least ``50 eps``).
        alpha: over-relaxation, in (0, 2).
        mu: initial elastic weight (equilibrated cost's units).
        mu_max: cap of the elastic weight.
        mu_factor: growth factor of the elastic weight (> 1).
        delta: regularization of the polish's KKT system.
        eps_unbounded: relative tolerance of the unboundedness certificate.
        check_every: ADMM iterations per ``step`` (static).
        scaling_iters: Ruiz equilibration passes.
        polish: polish in ``finalize``.
        polish_refine: iterative-refinement steps of each polish solve.
        polish_passes: primal-dual active-set passes of the polish.
        polish_fine: further passes in ``finalize`` with ``delta / 100`` and
            ``4 * polish_refine`` refinement steps, run only when the first passes did
            not reach a rounding-level KKT error (degenerate, LP-like active sets).
        adaptive_rho: use the OSQP rho rule.
        rho_every: move rho at most every ``rho_every`` steps.
        polish_every: also try polishing inside the loop at steps 1, 2, 4, 8, ... and
            every ``polish_every`` steps (0: only in ``finalize``). Worth it for single,
            high-accuracy or warm-started solves; under ``vmap`` the attempt runs on every
            step (a ``lax.cond`` becomes a select), so keep 0 for batches.
        kkt_inverse: keep an explicit inverse factor of ``P + sigma I + A'RA`` instead
            of its Cholesky factor (matrix-vector products per iteration; faster
            batched, less accurate on ill-conditioned problems; see
            `jaxsolve.qp.linalg.factor`).
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
