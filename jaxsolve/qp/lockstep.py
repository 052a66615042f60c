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
from jaxsolve.core.driver import is_done
from jaxsolve.qp.flexqp import FlexQP, WarmStart

__all__ = ["solve_lockstep"]

_LANES = "lanes"
_NEAR = 1e-2  # starting error below which a lane is polished before its first step


class _Pool(NamedTuple):
    """Per-lane bookkeeping of the rounds: the state (without its constant ``data``),
    the step count, the polish threshold, whether the lane ended at a polish, and its
    next polish checkpoint."""

    s: Any
    k: jax.Array
    thr: jax.Array
    fresh: jax.Array
    nxt: jax.Array


def _steps(solver: FlexQP, defer_refactor: bool = False):
    """The solver's step vmapped over a chunk in lockstep (lane-uniform branches), by
    the step's run-time options (`FlexQP`)."""

    def lane_step(state, args, active):
        options = {"lanes": _LANES, "active": active, "defer_refactor": defer_refactor}
        return solver.step(state, args, options=options)

    return jax.vmap(lane_step, axis_name=_LANES)


def _refactor(solver: FlexQP, s, need, rho_new, h):
    """Factor ``K(rho_new)`` for the lanes in ``need`` only, ``h`` lanes at a time.

    In lockstep a rho change of one lane used to refactor the whole chunk (the
    ``lax.cond`` is shared by the lanes); here the lanes that moved rho are gathered
    (about 6 of 32 per such step on random QPs at n = 20), factored, and written back.
    A factor with a non-finite entry is not taken (the lane keeps its rho), as in the
    step's own refactorization.
    """
    order = jnp.argsort(~need, stable=True)
    n_groups = (jnp.sum(need) + h - 1) // h

    def group(j, carry):
        L, rho = carry
        idx = jax.lax.dynamic_slice(order, (j * h,), (h,))
        Lnew = jax.vmap(solver.refactor)(tree_take(s.data, idx), rho_new[idx])
        ok = need[idx] & jnp.all(jnp.isfinite(Lnew), axis=(-2, -1))
        L = L.at[idx].set(jnp.where(ok[:, None, None], Lnew, L[idx]))
        rho = rho.at[idx].set(jnp.where(ok, rho_new[idx], rho[idx]))
        return L, rho

    L, rho = jax.lax.fori_loop(0, n_groups, group, (s.L, s.rho))
    return s._replace(L=jax.lax.stop_gradient(L), rho=jax.lax.stop_gradient(rho))


@partial(
    jax.jit, static_argnames=("max_steps", "chunk", "keep", "tail", "polish_at", "refactor_lanes")
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
            often; 2 was the fastest on random QPs).
        tail: lanes finished one at a time at the end.
        polish_at: error below which a lane is first polished between rounds (then
            10x below the error it reached); 0 polishes only in finalize.
        refactor_lanes: lanes factored together after a rho change (a group of
            ``h`` slots factors ``h`` lanes even when fewer need it); 0 keeps the
            chunk-wide ``lax.cond`` of the step (every lane of the chunk refactors).
            1 factors only the lanes that need it: factorizations dominate the
            refactor's cost at larger n, and small n showed no difference.

    Returns:
        A batched `Solution` with a status per lane. Between polishes
        a lane takes the steps of its single solve with ``solver`` (same predicates;
        arithmetic equal up to rounding: the batched ADMM block multiplies by ``1/rho``
        where the single-QP one divides) until it ends, or until it is one of the last
        ``tail`` lanes and continues with ``tail_solver``.
    """
    size = jax.tree.leaves(qp)[0].shape[0]
    g = max(1, min(int(chunk), size))
    pad = (-size) % g
    if pad:
        x0, qp = jax.tree.map(lambda v: jnp.concatenate([v, jnp.repeat(v[-1:], pad, 0)]), (x0, qp))
    n_lanes = size + pad
    n_chunks = n_lanes // g
    tail = min(int(tail), n_lanes)

    tol = jnp.asarray(tol, qp.q.dtype)

    def start(a):
        # A warm start whose active set is already right ends at its first polish in
        # the single-QP loop (in-loop polish at step 1). Lockstep rounds polish a lane
        # only below polish_at, so warm-started lanes that start near a solution
        # (error <= _NEAR) get finalize's fuller polish here, chunk-wide when any lane is near; a lane whose polished
        # point meets tol ends at once, the others start from their own point.
        x0c, qc = a
        s = jax.vmap(solver.init)(x0c, qc)
        near = s.error <= _NEAR

        def polish(s):
            fin = jax.vmap(lambda lane, q: solver.finalize(lane, q, jnp.asarray(True)))(s, qc)
            good = near & (fin.error <= tol) & jnp.all(jnp.isfinite(fin.x), axis=-1)
            return lane_select(good, fin, s)

        if not isinstance(x0c, WarmStart):  # a cold start is never near: no polish traced
            return s
        return jax.lax.cond(jnp.any(near), polish, lambda s: s, s)

    # init has no lane-uniform branches to share: larger chunks (up to ~8 MB of problem
    # data) cut XLA's per-operation overhead of Ruiz's passes; same numbers per lane
    gi = g
    per_lane = sum(v[0].size * v.dtype.itemsize for v in jax.tree.leaves(qp))
    while n_chunks % (2 * gi // g) == 0 and 2 * gi * per_lane <= 8 * 2**20:
        gi *= 2
    pool = by_chunks(start, (x0, qp), gi)
    k = jnp.zeros((n_lanes,), jnp.int32)
    # per-lane polish threshold: a lane pauses when its error falls below it, is
    # polished between rounds, and its threshold drops below its (new) error
    thr = jnp.full((n_lanes,), polish_at if polish_at > 0 else -1.0, qp.q.dtype)
    h = min(int(refactor_lanes), g)
    # k counts steps of tail_solver: a round's step of check_every ADMM iterations counts
    # as check_every / tail's check_every of them (the same iteration budget)
    w = max(1, solver.check_every // tail_solver.check_every)
    step = _steps(solver, defer_refactor=h > 0)
    polish_one = solver.polish_step

    def active(s, k):
        return ~is_done(s, tol) & (k < max_steps)

    def running(p: _Pool):
        # a lane pauses (for the next round's polish) below its threshold or at its
        # polish checkpoint nxt, like the single-QP loop's polish at steps 1, 2, 4, ...:
        # a lane whose ADMM error stalls above the threshold (float32, infeasible QPs)
        # still gets polished, at 32 steps and every 16 steps after (32 float32
        # infeasible QPs at n = 20: 19 MAX_STEPS instead of 25, the lax.map path 18)
        return active(p.s, p.k) & ~(p.s.error <= p.thr) & (p.k < p.nxt)

    def advance(p: _Pool, const, run):
        data, args = const
        s = p.s._replace(data=data)
        new, info = step(s, args, run)
        # the scaled problem data is the same in both: select the iterates only
        # (and with deferred refactorization the step leaves the factor as it was)
        fixed = {"data": None, "L": None} if h > 0 else {"data": None}
        kept = lane_select(run, new._replace(**fixed), s._replace(**fixed))
        kept = kept._replace(data=s.data, L=s.L) if h > 0 else kept._replace(data=s.data)
        if h > 0:
            need = info.rho_changed & run
            kept = jax.lax.cond(
                jnp.any(need),
                lambda t: _refactor(solver, t, need, info.rho, h),
                lambda t: t,
                kept,
            )
        return p._replace(s=kept._replace(data=None), k=p.k + w * run.astype(jnp.int32))

    def polish(p: _Pool, const, want):
        data, args = const
        s = p.s._replace(data=data)
        new = jax.vmap(polish_one)(s, args)
        s = lane_select(want, new._replace(data=None), s._replace(data=None))
        t = jnp.where(want, 0.1 * jnp.minimum(p.thr, s.error), p.thr)
        # a lane that ends at this polish is not polished again in finalize
        f = p.fresh | (want & (s.error <= tol))
        nx = jnp.where(want & (p.k >= p.nxt), p.k + 16, p.nxt)
        return _Pool(s, p.k, t, f, nx)

    def polish_wanted(p: _Pool):
        return active(p.s, p.k) & ((p.s.error <= p.thr) | (p.k >= p.nxt))

    data = pool.data
    const = (data, qp)
    fresh = jnp.zeros((n_lanes,), bool)
    # polish checkpoints (in steps of tail_solver): none without in-round polishing
    nxt = jnp.full((n_lanes,), 32 if polish_at > 0 else max_steps, jnp.int32)
    lanes = _Pool(pool._replace(data=None), k, thr, fresh, nxt)
    lanes = lockstep_rounds(
        advance,
        lanes,
        const,
        g=g,
        keep=keep,
        tail=tail,
        active=lambda p: active(p.s, p.k),
        running=running,
        between=(polish_wanted, polish) if polish_at > 0 else None,
    )
    pool, k, fresh = lanes.s._replace(data=data), lanes.k, lanes.fresh

    if tail > 0:
        # the last lanes, one after another with real branches (the core's tail)
        pool, k = run_tail(tail_solver, pool, qp, k, tol, max_steps, active(pool, k), tail)

    if solver.polish:
        # finalize's polish, gathered: only the converged lanes that did not end at an
        # in-round polish (most lanes do); then finalize without polish, which gives
        # the same state as finalize with it on each lane
        fp = solver.final_polish

        def final_polish(s, const, want):
            data, args = const
            s = s._replace(data=data)
            new = jax.vmap(fp)(s, args, want)
            return lane_select(want, new._replace(data=None), s._replace(data=None))

        want = (pool.error <= tol) & ~fresh
        dyn = apply_gathered(final_polish, pool._replace(data=None), const, want, g)
        pool = dyn._replace(data=data)
        solver = dataclasses.replace(solver, polish=False)
    return final_by_chunks(solver, pool, qp, tol, k, g, size)
