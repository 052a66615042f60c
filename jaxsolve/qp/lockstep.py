r"""Lockstep batches of FlexQP: many QPs stepped together, in cache-sized chunks.

On a CPU one small QP's ADMM iteration is a handful of tiny matrix-vector products
whose cost is XLA's per-operation overhead, not arithmetic. Stepping a chunk of lanes
together (``vmap``) shares that overhead; keeping the chunk small keeps its data in
cache. A batch of ``B`` QPs of one shape runs as:

1. ``init`` chunk by chunk (Ruiz scaling, first factorization), the batch padded to
   a multiple of ``chunk`` lanes with copies of its last problem (dropped at the end);
   warm-started lanes that start near a solution get finalize's polish first (a
   warm start with the right active set ends there, as at the single-QP loop's first
   in-loop polish);
2. rounds: the running lanes are gathered into chunks; a chunk steps in lockstep until
   at most ``1/keep`` of the lanes it started with still run, and its iterates are
   written back. One step is ``check_every`` ADMM iterations as batched products.
   FlexQP's refactorization (``lax.cond`` on a rho change) is taken when *any*
   running lane of the chunk needs it (``lax.pmax`` over the lanes axis, so it stays a
   branch instead of becoming a select that runs on every step) and each lane applies
   only its own result. Lanes left running are re-chunked in the next round, so a
   slow lane does not keep a chunk of finished ones busy;
3. when at most ``tail`` lanes still run, they finish one at a time with the ordinary
   single-QP loop (real branches, in-loop polish: a slow lane costs only itself);
4. ``finalize`` (polish, status) chunk by chunk.

Each lane follows its own single-QP iteration (its own rho, elastic weight and
checks) and gets its own status; it may stop at a different step than a single solve
with in-loop polishing, since lockstep rounds polish only in ``finalize``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxsolve.core.batch import _put, _take  # the lane gather/scatter of solve_batch(compact=)
from jaxsolve.core.driver import _advance, _done, _final
from jaxsolve.core.protocol import Solver
from jaxsolve.qp.flexqp import WarmStart

__all__ = ["solve_lockstep"]

_LANES = "lanes"
_NEAR = 1e-2  # starting error below which a lane is polished before its first step


def _select(mask, new, old):
    """Per-lane ``where`` over a batched pytree (``mask`` has shape ``(lanes,)``)."""

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - 1))
        return jnp.where(m, a, b)

    return jax.tree.map(pick, new, old)


def _steps(solver: Solver):
    """The solver's step vmapped over a chunk in lockstep (lane-uniform branches)."""
    step_fn, hp = solver.step.fn, solver.step.hp
    opts = solver.step._static.call_options

    def lane_step(state, args, active):
        return step_fn(state, args, hp=hp, lanes=_LANES, active=active, **opts)

    return jax.vmap(lane_step, axis_name=_LANES)


def _by_chunks(fn, tree, g):
    """``fn`` (vmapped over ``g`` lanes) applied chunk by chunk (``lax.map``)."""
    size = jax.tree.leaves(tree)[0].shape[0]
    split = lambda v: v.reshape((size // g, g) + v.shape[1:])  # noqa: E731
    out = jax.lax.map(fn, jax.tree.map(split, tree))
    return jax.tree.map(lambda v: v.reshape((size,) + v.shape[2:]), out)


@partial(jax.jit, static_argnames=("max_steps", "chunk", "keep", "tail"))
def solve_lockstep(
    solver: Solver,
    tail_solver: Solver,
    x0,
    qp,
    tol,
    *,
    max_steps: int,
    chunk: int = 32,
    keep: int = 4,
    tail: int = 8,
):
    """Solve a batch (leading axis on every leaf of ``x0`` and ``qp``) in lockstep chunks.

    Rounds: the running lanes are gathered into chunks of ``chunk`` lanes, each chunk
    runs in lockstep until at most ``1/keep`` of the lanes it started with still run
    (``lax.pmax`` keeps FlexQP's refactor/polish ``lax.cond`` real branches, see the
    module docstring); the lanes left over are re-chunked in the next round. When at
    most ``tail`` lanes still run, they finish one at a time with ``tail_solver``
    (real branches). ``finalize`` then runs chunk by chunk.

    Args:
        solver: a :func:`~jaxsolve.qp.flexqp` solver (its ``step`` takes ``lanes`` and
            ``active``).
        tail_solver: the solver for the last ``tail`` lanes (same hyperparameters, may
            differ in static options such as ``polish_every``).
        x0: batched starting points (arrays or a batched :class:`~jaxsolve.qp.WarmStart`).
        qp: a batched :class:`~jaxsolve.qp.QP`.
        tol: tolerance on FlexQP's error.
        max_steps: step budget per lane.
        chunk: lanes stepped together (the batch is padded to a multiple of it).
        keep: a chunk stops when no more than ``1/keep`` of its lanes still run.
        tail: lanes finished one at a time at the end.

    Returns:
        A batched :class:`~jaxsolve.Solution` with a status per lane. A lane takes the
        steps of its single solve with ``solver`` (same predicates; arithmetic equal up
        to the order of floating-point sums) until it ends, or until it is one of the
        last ``tail`` lanes and continues with ``tail_solver``.
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
        # the single-QP loop (in-loop polish at step 1). Lockstep rounds polish only in
        # finalize, so warm-started lanes that start near a solution (error <= _NEAR)
        # are polished here, chunk-wide when any lane is near; a lane whose polished
        # point meets tol ends at once, the others start from their own point.
        x0c, qc = a
        s = jax.vmap(solver.init)(x0c, qc)
        near = s.error <= _NEAR

        def polish(s):
            fin = jax.vmap(lambda st, q: solver.finalize(st, q, jnp.asarray(True)))(s, qc)
            good = near & (fin.error <= tol) & jnp.all(jnp.isfinite(fin.x), axis=-1)
            return _select(good, fin, s)

        if not isinstance(x0c, WarmStart):  # a cold start is never near: no polish traced
            return s
        return jax.lax.cond(jnp.any(near), polish, lambda s: s, s)

    pool = _by_chunks(start, (x0, qp), g)
    k = jnp.zeros((n_lanes,), jnp.int32)
    step = _steps(solver)

    def running(s, k):
        return ~_done(s, tol) & (k < max_steps)

    def run_chunk(c, carry, order):
        pool, k = carry
        idx = jax.lax.dynamic_slice(order, (c * g,), (g,))
        s, kk, args = _take(pool, idx), k[idx], _take(qp, idx)
        n0 = jnp.sum(running(s, kk))
        stop = n0 // keep

        def cond(inner):
            s, kk = inner
            return jnp.sum(running(s, kk)) > stop

        def body(inner):
            s, kk = inner
            run = running(s, kk)
            new, _ = step(s, args, run)
            # the scaled problem data is the same in both: select the iterates only
            kept = _select(run, new._replace(data=None), s._replace(data=None))
            return kept._replace(data=s.data), kk + run.astype(jnp.int32)

        s, kk = jax.lax.while_loop(cond, body, (s, kk))
        # the problem data never changes: write back the iterates only
        dyn = lambda t: t._replace(data=None)  # noqa: E731
        pool = _put(dyn(pool), dyn(s), idx)._replace(data=pool.data)
        return pool, k.at[idx].set(kk)

    def round_(carry):
        pool, k = carry
        run = running(pool, k)
        order = jnp.argsort(~run, stable=True)  # running lanes first
        n_busy = (jnp.sum(run) + g - 1) // g

        def each(c, carry):
            return jax.lax.cond(
                c < n_busy, lambda cr: run_chunk(c, cr, order), lambda cr: cr, carry
            )

        return jax.lax.fori_loop(0, n_chunks, each, (pool, k))

    pool, k = jax.lax.while_loop(lambda carry: jnp.sum(running(*carry)) > tail, round_, (pool, k))

    if tail > 0:
        # the last lanes, one after another with real branches
        idx = jnp.argsort(~running(pool, k), stable=True)[:tail]

        def one(a):
            s, args, kk = a
            s, kk, _ = _advance(tail_solver, s, args, tol, kk, max_steps, None)
            return s, kk

        part, kk = jax.lax.map(one, (_take(pool, idx), _take(qp, idx), k[idx]))
        pool, k = _put(pool, part, idx), k.at[idx].set(kk)

    final = lambda a: jax.vmap(lambda s, q, kk: _final(solver, s, q, tol, kk, None))(*a)  # noqa: E731
    sol = _by_chunks(final, (pool, qp, k), g)
    return jax.tree.map(lambda v: v[:size], sol)
