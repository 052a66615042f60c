r"""Lockstep batches of FlexQP: many QPs stepped together, in cache-sized chunks.

On a CPU one small QP's ADMM iteration is a handful of tiny matrix-vector products
whose cost is XLA's per-operation overhead, not arithmetic. Stepping a chunk of lanes
together (``vmap``) shares that overhead; keeping the chunk small keeps its data in
cache. A batch of ``B`` QPs of one shape runs as:

1. ``init`` in chunks (Ruiz scaling, first factorization; up to ~8 MB of problem
   data per chunk, as init has no branches to share), the batch padded to a multiple
   of ``chunk`` lanes with copies of its last problem (dropped at the end);
   warm-started lanes that start near a solution get finalize's polish first (a
   warm start with the right active set ends there, as at the single-QP loop's first
   in-loop polish);
2. rounds. First the lanes whose error fell below their polish threshold
   (``polish_at``, then 10x below the error each polish left), or that reached their
   polish checkpoint (32 steps, then 16 more after each polish there: a lane whose
   ADMM error stalls above the threshold, as float32 infeasible QPs do, is still
   polished, as the single-QP loop polishes at fixed steps), are polished, gathered
   in chunks, with the rule of the single-QP in-loop polish (kept when 10x better and
   below 1e-3): most lanes end there, with their active set right, long before the
   ADMM iterate itself meets ``tol``. Then the running lanes are gathered into chunks; a chunk
   steps in lockstep until at most ``1/keep`` of the lanes it started with still run
   (a lane below its polish threshold waits for the next round's polish), and its
   iterates are written back. One step is ``check_every`` ADMM iterations as batched
   products. A rho change refactors only the lanes that moved rho (the step defers
   it; the lanes are gathered ``refactor_lanes`` at a time), not the whole chunk.
   Lanes left running are re-chunked in the next round, so a slow lane does not keep
   a chunk of finished ones busy;
3. when at most ``tail`` lanes still run, they finish one at a time with the ordinary
   single-QP loop (real branches, in-loop polish: a slow lane costs only itself);
4. ``finalize``: its polish runs, gathered, on the converged lanes that did not end at
   a polish of step 2, then ``finalize`` without polish (status) chunk by chunk.

The generic parts are the core's (`jaxsolve.core.batch`: the rounds of chunked
lockstep with frozen lanes and re-chunking, ``lockstep_rounds``; the gathered work
between rounds, ``apply_gathered``; the single-lane tail, ``run_tail``; the chunked
finalize); what is FlexQP's comes
from the solver's hooks (`FlexQP`: ``polish_step``,
``final_polish``, ``refactor`` and the step's run-time options).

Each lane follows its own FlexQP iteration (its own rho, elastic weight and checks)
and gets its own status; where it stops depends on the polish points (step 2), so it
may take other steps than a single solve, whose in-loop polish runs at fixed steps.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core.batch import (
    apply_gathered,
    by_chunks,
    final_by_chunks,
    lane_select,
    lockstep_rounds,
    run_tail,
    tree_take,
)
from jaxsolve.core.compile_options import options_jit
from jaxsolve.core.driver import is_done
from jaxsolve.qp.flexqp import FlexQP, WarmStart

__all__ = ["solve_lockstep"]

_LANES = "lanes"
_NEAR_ERROR = 1e-2  # starting error below which a lane is polished before its first step
# Polish checkpoints (in steps of tail_solver): a lane is first polished at
# _FIRST_CHECKPOINT steps and then every _CHECKPOINT_EVERY steps after each polish there,
# even when its error stalls above its polish threshold.
_FIRST_CHECKPOINT, _CHECKPOINT_EVERY = 32, 16


class _Pool(NamedTuple):
    """Per-lane bookkeeping of the rounds (every leaf has the lane axis first).

    Attributes:
        state: the lane's `FlexQPState` without its constant ``data`` (``None`` there).
        steps: int32, steps taken, counted in steps of ``tail_solver``.
        polish_below: the error below which the lane pauses for the next round's
            polish (``-1``: never).
        polished_done: bool, the lane ended at an in-round polish (``finalize`` does not
            polish it again).
        checkpoint: int32, the step count at which the lane is polished next whatever
            its error.
    """

    state: Any
    steps: jax.Array
    polish_below: jax.Array
    polished_done: jax.Array
    checkpoint: jax.Array


def _steps(solver: FlexQP, defer_refactor: bool = False):
    """The solver's step vmapped over a chunk in lockstep (lane-uniform branches), by
    the step's run-time options (`FlexQP`)."""

    def lane_step(state, args, active):
        options = {"lanes": _LANES, "active": active, "defer_refactor": defer_refactor}
        return solver.step(state, args, options=options)

    return jax.vmap(lane_step, axis_name=_LANES)


def _refactor(solver: FlexQP, state, need, rho_new, group_size):
    """Factor ``K(rho_new)`` for the lanes in ``need`` only, ``group_size`` lanes at a time.

    The step's own refactorization is a ``lax.cond`` shared by a chunk's lanes, so in
    lockstep a rho change of one lane would refactor the whole chunk; here only the
    lanes that moved rho are gathered, factored, and written back. A factor with a
    non-finite entry is not taken (the lane keeps its rho), as in the step's own
    refactorization.
    """
    order = jnp.argsort(~need, stable=True)
    n_groups = (jnp.sum(need) + group_size - 1) // group_size

    def group(j, carry):
        L, rho = carry
        idx = jax.lax.dynamic_slice(order, (j * group_size,), (group_size,))
        Lnew = jax.vmap(solver.refactor)(tree_take(state.data, idx), rho_new[idx])
        ok = need[idx] & jnp.all(jnp.isfinite(Lnew), axis=(-2, -1))
        L = L.at[idx].set(jnp.where(ok[:, None, None], Lnew, L[idx]))
        rho = rho.at[idx].set(jnp.where(ok, rho_new[idx], rho[idx]))
        return L, rho

    L, rho = jax.lax.fori_loop(0, n_groups, group, (state.L, state.rho))
    return state._replace(L=jax.lax.stop_gradient(L), rho=jax.lax.stop_gradient(rho))


@partial(
    options_jit,
    options=FlexQP.compiler_options,
    static_argnames=("max_steps", "chunk", "keep", "tail", "polish_at", "refactor_lanes"),
)
def solve_lockstep(
    solver: FlexQP,
    tail_solver: FlexQP,
    x0,
    qp,
    tol,
    *,
    max_steps: int,
    chunk: int = 32,
    keep: int = 2,
    tail: int = 8,
    polish_at: float = 1e-3,
    refactor_lanes: int = 1,
):
    """Solve a batch (leading axis on every leaf of ``x0`` and ``qp``) in lockstep chunks.

    Rounds (see the module docstring): the lanes below their polish threshold are
    polished, gathered in chunks; the running lanes are gathered into chunks of
    ``chunk`` lanes, each chunk runs in lockstep until at most ``1/keep`` of the lanes
    it started with still run, refactoring only the lanes whose rho moved; the lanes
    left over are re-chunked in the next round. When at most ``tail`` lanes still run,
    they finish one at a time with ``tail_solver`` (real branches). ``finalize`` then
    polishes the converged lanes not yet polished and decides every status.

    Args:
        solver: a `flexqp` solver (its ``step`` takes ``lanes``,
            ``active`` and ``defer_refactor``).
        tail_solver: the solver for the last ``tail`` lanes (same hyperparameters, may
            differ in static options such as ``polish_every``); ``max_steps`` counts its
            steps (a step of ``solver`` counts as ``check_every`` of ``solver`` over
            that of ``tail_solver``).
        x0: batched starting points (arrays or a batched `WarmStart`).
        qp: a batched `QP`.
        tol: tolerance on FlexQP's error.
        max_steps: step budget per lane.
        chunk: lanes stepped together (the batch is padded to a multiple of it).
        keep: a chunk stops when no more than ``1/keep`` of its lanes still run (a
            larger ``keep`` steps more finished lanes, a smaller one re-chunks more
            often).
        tail: lanes finished one at a time at the end.
        polish_at: error below which a lane is first polished between rounds (then
            10x below the error it reached); 0 polishes only in finalize.
        refactor_lanes: lanes factored together after a rho change (a group of
            ``refactor_lanes`` slots factors that many lanes even when fewer need it);
            0 keeps the chunk-wide ``lax.cond`` of the step (every lane of the chunk
            refactors). The default 1 factors only the lanes that need it, because
            the factorizations themselves dominate a refactor's cost.

    Returns:
        A batched `Solution` with a status per lane. Between polishes
        a lane takes the steps of its single solve with ``solver`` (same predicates;
        arithmetic equal up to rounding: the batched ADMM block multiplies by ``1/rho``
        where the single-QP one divides) until it ends, or until it is one of the last
        ``tail`` lanes and continues with ``tail_solver``.

    Called at top level, the batch is compiled with FlexQP's XLA options
    (``FlexQP.compiler_options``, `jaxsolve.core.compile_options.options_jit`): a
    batch of 64 QPs (n = 20, m = 40) 10.7 -> 7.1 CPU s on its first call; inside a
    user's ``jit`` it is traced into that program and compiled with its options.
    """
    size = jax.tree.leaves(qp)[0].shape[0]
    chunk_lanes = max(1, min(int(chunk), size))
    pad = (-size) % chunk_lanes
    if pad:
        x0, qp = jax.tree.map(lambda v: jnp.concatenate([v, jnp.repeat(v[-1:], pad, 0)]), (x0, qp))
    n_lanes = size + pad
    n_chunks = n_lanes // chunk_lanes
    tail = min(int(tail), n_lanes)

    tol = jnp.asarray(tol, qp.q.dtype)

    def start(a):
        # A warm start whose active set is already right ends at its first polish in
        # the single-QP loop (in-loop polish at step 1). Lockstep rounds polish a lane
        # only below polish_at, so warm-started lanes that start near a solution
        # (error <= _NEAR_ERROR) get finalize's fuller polish here, chunk-wide when any
        # lane is near; a lane whose polished point meets tol ends at once, the others
        # start from their own point.
        x0_chunk, qp_chunk = a
        state = jax.vmap(solver.init)(x0_chunk, qp_chunk)
        near = state.error <= _NEAR_ERROR

        def polish(state):
            fin = jax.vmap(lambda lane, q: solver.finalize(lane, q, jnp.asarray(True)))(
                state, qp_chunk
            )
            good = near & (fin.error <= tol) & jnp.all(jnp.isfinite(fin.x), axis=-1)
            return lane_select(good, fin, state)

        if not isinstance(x0_chunk, WarmStart):  # a cold start is never near: no polish traced
            return state
        return jax.lax.cond(jnp.any(near), polish, lambda state: state, state)

    # init has no lane-uniform branches to share: larger chunks (up to ~8 MB of problem
    # data) cut XLA's per-operation overhead of Ruiz's passes; same numbers per lane
    init_lanes = chunk_lanes
    per_lane = sum(v[0].size * v.dtype.itemsize for v in jax.tree.leaves(qp))
    while (
        n_chunks % (2 * init_lanes // chunk_lanes) == 0 and 2 * init_lanes * per_lane <= 8 * 2**20
    ):
        init_lanes *= 2
    pool = by_chunks(start, (x0, qp), init_lanes)
    steps = jnp.zeros((n_lanes,), jnp.int32)
    # per-lane polish threshold: a lane pauses when its error falls below it, is
    # polished between rounds, and its threshold drops below its (new) error
    polish_below = jnp.full((n_lanes,), polish_at if polish_at > 0 else -1.0, qp.q.dtype)
    group_size = min(int(refactor_lanes), chunk_lanes)
    # steps count steps of tail_solver: a round's step of check_every ADMM iterations
    # counts as check_every / tail's check_every of them (the same iteration budget)
    step_weight = max(1, solver.check_every // tail_solver.check_every)
    step = _steps(solver, defer_refactor=group_size > 0)
    polish_one = solver.polish_step

    def active(state, steps):
        return ~is_done(state, tol) & (steps < max_steps)

    def running(p: _Pool):
        # a lane pauses (for the next round's polish) below its threshold or at its
        # polish checkpoint, like the single-QP loop's polish at steps 1, 2, 4, ...: a
        # lane whose ADMM error stalls above the threshold (float32, infeasible QPs)
        # still gets polished, at _FIRST_CHECKPOINT steps and every _CHECKPOINT_EVERY
        # after, which ends more of those lanes SUCCESS instead of MAX_STEPS
        return (
            active(p.state, p.steps) & ~(p.state.error <= p.polish_below) & (p.steps < p.checkpoint)
        )

    def advance(p: _Pool, const, run):
        data, args = const
        state = p.state._replace(data=data)
        new, info = step(state, args, run)
        # the scaled problem data is the same in both: select the iterates only
        # (and with deferred refactorization the step leaves the factor as it was)
        fixed = {"data": None, "L": None} if group_size > 0 else {"data": None}
        kept = lane_select(run, new._replace(**fixed), state._replace(**fixed))
        if group_size > 0:
            kept = kept._replace(data=state.data, L=state.L)
            need = info.rho_changed & run
            kept = jax.lax.cond(
                jnp.any(need),
                lambda t: _refactor(solver, t, need, info.rho, group_size),
                lambda t: t,
                kept,
            )
        else:
            kept = kept._replace(data=state.data)
        return p._replace(
            state=kept._replace(data=None), steps=p.steps + step_weight * run.astype(jnp.int32)
        )

    def polish(p: _Pool, const, want):
        data, args = const
        state = p.state._replace(data=data)
        new = jax.vmap(polish_one)(state, args)
        state = lane_select(want, new._replace(data=None), state._replace(data=None))
        below = jnp.where(want, 0.1 * jnp.minimum(p.polish_below, state.error), p.polish_below)
        # a lane that ends at this polish is not polished again in finalize
        done = p.polished_done | (want & (state.error <= tol))
        checkpoint = jnp.where(
            want & (p.steps >= p.checkpoint), p.steps + _CHECKPOINT_EVERY, p.checkpoint
        )
        return _Pool(state, p.steps, below, done, checkpoint)

    def polish_wanted(p: _Pool):
        return active(p.state, p.steps) & (
            (p.state.error <= p.polish_below) | (p.steps >= p.checkpoint)
        )

    data = pool.data
    const = (data, qp)
    polished_done = jnp.zeros((n_lanes,), bool)
    # polish checkpoints (in steps of tail_solver): none without in-round polishing
    checkpoint = jnp.full((n_lanes,), _FIRST_CHECKPOINT if polish_at > 0 else max_steps, jnp.int32)
    lanes = _Pool(pool._replace(data=None), steps, polish_below, polished_done, checkpoint)
    lanes = lockstep_rounds(
        advance,
        lanes,
        const,
        g=chunk_lanes,
        keep=keep,
        tail=tail,
        active=lambda p: active(p.state, p.steps),
        running=running,
        between=(polish_wanted, polish) if polish_at > 0 else None,
    )
    pool, steps, polished_done = lanes.state._replace(data=data), lanes.steps, lanes.polished_done

    if tail > 0:
        # the last lanes, one after another with real branches (the core's tail)
        pool, steps = run_tail(
            tail_solver, pool, qp, steps, tol, max_steps, active(pool, steps), tail
        )

    if solver.polish:
        # finalize's polish, gathered: only the converged lanes that did not end at an
        # in-round polish (most lanes do); then finalize without polish, which gives
        # the same state as finalize with it on each lane
        final_polish_one = solver.final_polish

        def final_polish(state, const, want):
            data, args = const
            state = state._replace(data=data)
            new = jax.vmap(final_polish_one)(state, args, want)
            return lane_select(want, new._replace(data=None), state._replace(data=None))

        want = (pool.error <= tol) & ~polished_done
        polished = apply_gathered(final_polish, pool._replace(data=None), const, want, chunk_lanes)
        pool = polished._replace(data=data)
        solver = dataclasses.replace(solver, polish=False)
    return final_by_chunks(solver, pool, qp, tol, steps, chunk_lanes, size)
