"""Batched and multi-device solves: ``vmap`` over problems, sharded over a device mesh.

``solve_batch`` is ``jax.vmap(jaxsolve.solve)`` in one compiled call, optionally
with the batch axis laid out over devices with ``NamedSharding`` (no ``pmap``):
each device runs its share of the lanes; finished lanes stay frozen, so the answer
is the same on one device or many.

A vmapped ``while_loop`` runs until its *slowest* lane stops, and every step costs
the whole batch. With ``compact=k`` the batch is run in rounds of ``k`` steps from
the host; after each round the lanes still running are gathered into a smaller
batch (widths ``B, B/8, B/64, ...``, so at most ``log8(B)`` extra
compilations), and the finished ones are left alone. A few
straggler lanes then cost a few lanes' work instead of the whole batch's. The
answer is unchanged lane for lane: each lane takes the same steps either way.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxsolve.core.driver import (
    Solution,
    default_tol,
    final_solution,
    is_done,
    solve,
    step_until_done,
)
from jaxsolve.core.protocol import check_solver, pack
from jaxsolve.core.validation import check_floating, is_concrete

__all__ = [
    "solve_batch",
    "batch_mesh",
    "compact_widths",
    "shrunk_width",
    "run_compacted",
    "lane_select",
    "by_chunks",
    "run_tail",
    "final_by_chunks",
    "apply_gathered",
    "lockstep_rounds",
]


def batch_mesh(devices=None, axis_name: str = "batch") -> Mesh:
    """A 1-D mesh over ``devices`` (default: all devices) for sharding a batch axis."""
    devs = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devs), (axis_name,))


def _batch_size(x0, args, in_axes) -> int:
    sizes = set()
    for tree, ax in zip((x0, args), in_axes, strict=True):
        if ax is None:
            continue
        for leaf in jax.tree.leaves(tree):
            if np.ndim(leaf) == 0:
                raise ValueError("batched arguments need a leading batch axis; got a scalar leaf")
            sizes.add(np.shape(leaf)[0])
    if not sizes:
        raise ValueError("solve_batch needs at least one batched argument (in_axes all None)")
    if len(sizes) > 1:
        raise ValueError(f"batched leaves disagree on the batch size: {sorted(sizes)}")
    (size,) = sizes
    if size == 0:
        raise ValueError("empty batch: the leading (batch) axis has size 0")
    return size


def _pad(tree, pad: int):
    return jax.tree.map(lambda v: jnp.concatenate([v, jnp.repeat(v[-1:], pad, axis=0)]), tree)


@partial(jax.jit, static_argnames=("in_axes", "opts"))
def _vsolve(solver, x0, args, tol, in_axes, opts):
    run = lambda x, a: solve(solver, x, a, tol=tol, **dict(opts))
    return jax.vmap(run, in_axes=in_axes)(x0, args)


@partial(jax.jit, static_argnames=("in_axes",))
def _vinit(solver, x0, args, in_axes):
    return jax.vmap(solver.init, in_axes=in_axes)(x0, args)


@partial(jax.jit, static_argnames=("args_axis",))
def _vchunk(solver, state, args, tol, k, limit, args_axis):
    def lane(s, a, kk):
        t = jnp.asarray(tol, s.error.dtype)
        s, kk, _ = step_until_done(solver, s, a, t, kk, limit, None)
        return s, kk, is_done(s, t)

    return jax.vmap(lane, in_axes=(0, args_axis, 0))(state, args, k)


@partial(jax.jit, static_argnames=("args_axis",))
def _vfinal(solver, state, args, tol, k, args_axis):
    def lane(s, a, kk):
        return final_solution(solver, s, a, jnp.asarray(tol, s.error.dtype), kk, None)

    return jax.vmap(lane, in_axes=(0, args_axis, 0))(state, args, k)


@jax.jit
def tree_take(tree, idx):
    """Every leaf of ``tree`` indexed by ``idx`` along its leading axis."""
    return jax.tree.map(lambda v: v[idx], tree)


@jax.jit
def _put(tree, part, idx):
    return jax.tree.map(lambda v, p: v.at[idx].set(p), tree, part)


_SHRINK = 8


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shrunk_width(width: int, shrink: int = _SHRINK, unit: int = 1) -> int:
    """The one width rule of straggler compaction: ``ceil(width / shrink)`` rounded up
    to a multiple of ``unit`` (the device count, so a sharded sub-batch splits evenly).
    Both engines (`solve_batch(compact=)` from the host, `run_compacted` in one program)
    step through the widths ``B, B/8, B/64, ...`` it gives, so at most ``log8(B)``
    widths, hence compilations, ever occur."""
    return _ceil_div(_ceil_div(width, shrink), unit) * unit


def _smaller_width(n_running: int, width: int, unit: int) -> int:
    """The narrowest `shrunk_width` step below ``width`` that still holds ``n_running``."""
    new = width
    while True:
        nxt = shrunk_width(new, unit=unit)
        if nxt >= new or nxt < n_running:
            return new
        new = nxt


def _solve_compact(solver, x0, args, tol, args_axis, in_axes, max_steps, rounds, place, unit):
    """Rounds of ``rounds`` steps from the host, shrinking the batch to the running lanes.

    ``state``/``k`` hold every lane; ``live`` lists the lanes of the sub-batch being
    stepped (its first ``n_live`` entries distinct, the rest padding copies whose
    results are dropped). A lane that stops inside a round is frozen by the
    while loop's condition, so each lane takes exactly the steps of a plain solve.
    """
    state = _vinit(solver, x0, args, in_axes)
    size = np.shape(state.error)[0]
    k = jnp.zeros((size,), jnp.int32)
    live, n_live = None, size  # None: the sub-batch is the full batch
    sub_state, sub_args, sub_k = state, args, k
    reached = 0
    while True:
        reached = min(reached + rounds, max_steps)
        sub_state, sub_k, done = _vchunk(
            solver, sub_state, sub_args, tol, sub_k, jnp.int32(reached), args_axis
        )
        if live is None:
            state, k, lanes = sub_state, sub_k, np.arange(size)
        else:
            lanes = live[:n_live]
            head = jnp.arange(n_live)
            state = _put(state, tree_take(sub_state, head), jnp.asarray(lanes))
            k = k.at[jnp.asarray(lanes)].set(sub_k[:n_live])
        if reached >= max_steps:
            break
        running = lanes[~np.asarray(done)[:n_live]]
        if running.size == 0:
            break
        width = size if live is None else live.size
        new = _smaller_width(running.size, width, unit)
        if new < width:
            n_live = running.size
            live = np.concatenate([running, np.repeat(running[-1:], new - n_live)])
            idx = jnp.asarray(live)
            sub_state = place(tree_take(state, idx))
            sub_k = place(k[idx])
            sub_args = args if args_axis is None else place(tree_take(args, idx))
    return _vfinal(solver, state, args, tol, k, args_axis)


# --- in-graph building blocks of chunked lockstep batches (jaxsolve.qp.lockstep) ----------


def lane_select(mask, new, old):
    """Per-lane ``where`` over a batched pytree (``mask`` has shape ``(lanes,)``): the
    lanes of ``new`` where ``mask``, of ``old`` elsewhere (frozen lanes)."""

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - 1))
        return jnp.where(m, a, b)

    return jax.tree.map(pick, new, old)


def by_chunks(fn, tree, g: int):
    """``fn`` (vmapped over ``g`` lanes) applied to ``tree`` (lane axis first, a
    multiple of ``g`` lanes) chunk by chunk (``lax.map``): a chunk's data stays in cache
    and its lanes share each operation's overhead."""
    size = jax.tree.leaves(tree)[0].shape[0]
    split = lambda v: v.reshape((size // g, g) + v.shape[1:])  # noqa: E731
    out = jax.lax.map(fn, jax.tree.map(split, tree))
    return jax.tree.map(lambda v: v.reshape((size,) + v.shape[2:]), out)


def run_tail(solver, state, args, k, tol, max_steps: int, running, tail: int):
    """The single-lane tail of a lockstep batch: the first ``tail`` lanes where
    ``running`` (the last stragglers) finish one after another with the driver's own
    loop (real branches: a slow lane costs only itself). ``state``, ``args`` and the
    step counts ``k`` have the lane axis first; returns the updated ``(state, k)``."""
    idx = jnp.argsort(~running, stable=True)[:tail]

    def one(a):
        s, a_, kk = a
        s, kk, _ = step_until_done(solver, s, a_, tol, kk, max_steps, None)
        return s, kk

    part, kk = jax.lax.map(one, (tree_take(state, idx), tree_take(args, idx), k[idx]))
    return _put(state, part, idx), k.at[idx].set(kk)


def final_by_chunks(solver, state, args, tol, k, g: int, size: int):
    """The driver's ``finalize`` and final status for every lane, chunk by chunk of
    ``g`` lanes, cut to the first ``size`` lanes (the batch without its padding)."""

    def final(chunk):
        one = lambda s, q, kk: final_solution(solver, s, q, tol, kk, None)  # noqa: E731
        return jax.vmap(one)(*chunk)

    sol = by_chunks(final, (state, args, k), g)
    return jax.tree.map(lambda v: v[:size], sol)


def _chunk_ids(order, c, g):
    return jax.lax.dynamic_slice(order, (c * g,), (g,))


def apply_gathered(fn, pool, const, want, g: int):
    """``fn(pool_chunk, const_chunk, want_chunk) -> pool_chunk`` on the lanes in
    ``want`` only, gathered ``g`` at a time (the first chunks hold them; a chunk's
    other lanes are padding whose results ``fn`` must leave unchanged), written back.
    ``pool`` (written back) and ``const`` (only read) have the lane axis first."""
    order = jnp.argsort(~want, stable=True)
    n = (jnp.sum(want) + g - 1) // g

    def each(c, pool):
        idx = _chunk_ids(order, c, g)
        return _put(pool, fn(tree_take(pool, idx), tree_take(const, idx), want[idx]), idx)

    return jax.lax.fori_loop(0, n, each, pool)


def lockstep_rounds(
    advance, pool, const, *, g: int, keep: int, tail: int, active, running, between=None
):
    """Chunked lockstep with frozen lanes and straggler re-chunking, in one compiled loop.

    Rounds, while more than ``tail`` lanes are ``active(pool)``: first the optional
    ``between = (want, fn)`` runs ``fn`` on the lanes ``want(pool)`` gathered
    (`apply_gathered`: a solver's work between rounds, e.g. a QP's polish); then
    the lanes ``running(pool)`` are gathered into chunks of ``g`` lanes, and each chunk
    steps in lockstep, ``pool_chunk = advance(pool_chunk, const_chunk, run)`` (which
    must leave the lanes not in ``run`` unchanged: frozen lanes), until at most
    ``1/keep`` of the lanes it started with still run; its lanes are written back, so
    a slow lane does not keep a chunk of finished ones busy. ``pool`` (per-lane state,
    step counts, a solver's per-lane bookkeeping) is written back, ``const`` (per-lane
    problem data) only read; both have the lane axis first, a multiple of ``g``
    lanes. The last ``tail`` lanes are left for `run_tail`. Returns ``pool``.
    """
    n_chunks = jax.tree.leaves(pool)[0].shape[0] // g

    def run_chunk(c, pool, order):
        idx = _chunk_ids(order, c, g)
        p, cst = tree_take(pool, idx), tree_take(const, idx)
        stop = jnp.sum(running(p)) // keep
        p = jax.lax.while_loop(
            lambda p: jnp.sum(running(p)) > stop, lambda p: advance(p, cst, running(p)), p
        )
        return _put(pool, p, idx)

    def round_(pool):
        if between is not None:
            want, fn = between
            pool = apply_gathered(fn, pool, const, want(pool), g)
        run = running(pool)
        order = jnp.argsort(~run, stable=True)  # running lanes first
        n_busy = (jnp.sum(run) + g - 1) // g

        def each(c, pool):
            return jax.lax.cond(c < n_busy, lambda p: run_chunk(c, p, order), lambda p: p, pool)

        return jax.lax.fori_loop(0, n_chunks, each, pool)

    return jax.lax.while_loop(lambda p: jnp.sum(active(p)) > tail, round_, pool)


def compact_widths(width: int, shrink: int = _SHRINK, smallest: int = 64) -> list[int]:
    """The batch widths of `run_compacted`: ``width``, then `shrunk_width` of the
    previous one while the previous one is at least ``smallest``."""
    sizes = [int(width)]
    while sizes[-1] >= smallest:
        sizes.append(shrunk_width(sizes[-1], shrink))
    return sizes


def run_compacted(phase, lanes, carry, shared, done, *, shrink: int = _SHRINK, smallest: int = 64):
    """Straggler compaction inside one compiled program (``solve_batch(compact=)``
    drives it from the host instead).

    ``phase(lanes, carry, shared, max_live) -> (carry, shared)`` steps the whole batch
    (``lanes``: per-lane data, ``carry``: per-lane state, both with the lane axis
    first; ``shared``: anything lane-independent, such as a step counter) until at
    most ``max_live`` lanes still run, and must leave finished lanes unchanged (frozen
    lanes). ``done(carry) -> bool[width]`` says which lanes have finished. After a
    phase the running lanes (and as many finished ones as fill the width) are gathered
    into a batch of ``1/shrink`` the width (`compact_widths`), so a few
    stragglers cost a few lanes' work; the last width runs until every lane is done
    (``max_live = 0``) and the results are scattered back. Each lane computes as it
    would in the full batch, so the answer does not depend on the compaction.
    Returns ``(carry, shared)``.
    """
    width = jax.tree.leaves(carry)[0].shape[0]
    sizes = compact_widths(width, shrink, smallest)
    stack = []
    for level in range(len(sizes)):
        last = level == len(sizes) - 1
        carry, shared = phase(lanes, carry, shared, 0 if last else sizes[level + 1])
        if not last:
            # the running lanes first (stable order), then as many done ones as fit
            idx = jnp.argsort(done(carry), stable=True)[: sizes[level + 1]]
            stack.append((idx, carry))
            lanes = jax.tree.map(lambda a, idx=idx: a[idx], lanes)
            carry = jax.tree.map(lambda a, idx=idx: a[idx], carry)
    for idx, outer in reversed(stack):
        carry = jax.tree.map(lambda a, c, idx=idx: a.at[idx].set(c), outer, carry)
    return carry, shared


def solve_batch(
    solver: Any,
    x0: Any,
    args: Any,
    *,
    in_axes: tuple = (0, 0),
    mesh: Mesh | None = None,
    tol: float | None = None,
    max_steps: int = 1000,
    loop: str = "while",
    history: bool = False,
    compact: int | None = None,
) -> Solution:
    """Solve a batch of problems in one compiled call, optionally sharded over devices.

    Args:
        solver: the `Solver` shared by all problems.
        x0: initial iterates (leading batch axis unless ``in_axes[0]`` is None).
        args: problem data; ``in_axes`` says which of ``(x0, args)`` carry a
            leading batch axis (``(None, 0)``: one shared start, batched data).
        in_axes: a pair of 0/None for ``(x0, args)``.
        mesh: a 1-D `jax.sharding.Mesh` (see `batch_mesh`). The batch is
            padded to a multiple of the number of devices (copies of the last
            problem, dropped from the result) and laid out with
            ``NamedSharding(mesh, PartitionSpec(axis))``.
        tol: as in `jaxsolve.solve`.
        max_steps: as in `jaxsolve.solve`.
        loop: as in `jaxsolve.solve`.
        history: as in `jaxsolve.solve`.
        compact: ``None`` (default): one compiled call. An int ``k``: run rounds of
            ``k`` steps from the host and, between rounds, gather the lanes still
            running into a smaller batch (see the module docstring), so stragglers
            stop costing the whole batch. Same answers lane for lane; needs concrete
            inputs (not under ``jit``/``grad``) and ``loop="while"`` without history.
            Worth it when iteration counts vary a lot across the batch.

    Returns:
        A `Solution` whose leaves have the batch axis first. Equal,
        lane for lane, to a loop of single solves.
    """
    check_solver(solver)
    solver = pack(solver)
    in_axes = tuple(in_axes)
    if len(in_axes) != 2 or any(a not in (0, None) for a in in_axes):
        raise ValueError(f"in_axes must be a pair of 0/None for (x0, args), got {in_axes}")
    check_floating("x0", x0)
    size = _batch_size(x0, args, in_axes)
    if tol is None:
        tol = default_tol(x0)
    opts = (("max_steps", int(max_steps)), ("loop", loop), ("history", bool(history)))
    if compact is not None:
        if isinstance(compact, bool) or not isinstance(compact, int | np.integer) or compact < 1:
            raise ValueError(f"compact must be None or a positive int, got {compact!r}")
        if loop != "while" or history:
            raise ValueError(
                "compact= runs the 'while' loop in rounds; use loop='while', history=False"
            )
        if not (is_concrete(x0) and is_concrete(args)):
            raise ValueError(
                "compact= drives the batch from Python and cannot run under jit/vmap/grad; "
                "use compact=None there"
            )
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    pad = 0
    unit = 1
    place_batch = lambda tree: tree  # noqa: E731
    if mesh is not None:
        if len(mesh.axis_names) != 1:
            raise ValueError("mesh must be one-dimensional (use batch_mesh())")
        ndev = mesh.devices.size
        pad = (-size) % ndev
        sharding = NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))
        replicated = NamedSharding(mesh, PartitionSpec())
        place = []
        for tree, ax in zip((x0, args), in_axes, strict=True):
            if ax is None:
                place.append(jax.device_put(tree, replicated))
            else:
                place.append(jax.device_put(_pad(tree, pad) if pad else tree, sharding))
        x0, args = place
        unit = ndev
        place_batch = lambda tree: jax.device_put(tree, sharding)  # noqa: E731
    if compact is not None:
        sol = _solve_compact(
            solver,
            x0,
            args,
            jnp.asarray(tol),
            in_axes[1],
            in_axes,
            int(max_steps),
            int(compact),
            place_batch,
            unit,
        )
    else:
        sol = _vsolve(solver, x0, args, jnp.asarray(tol), in_axes, opts)
    if pad:
        sol = jax.tree.map(lambda v: v[:size], sol)
    return sol
