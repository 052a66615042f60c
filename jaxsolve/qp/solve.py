r"""``solve_qp``: one call from a `QP` to a `Solution`.

Adds to `jaxsolve.solve` with `flexqp`: validation before
tracing, batches (a QP with a leading batch axis is vmapped), warm starts from a
previous solution, and implicit derivatives of ``x`` (and ``y``) with respect to
``P, q, A, l, u`` through the KKT conditions at the solution.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Solution, solve, solve_batch
from jaxsolve.core.adjoint import implicit_solution
from jaxsolve.core.compile_options import at_top_level
from jaxsolve.core.validation import check_floating, is_concrete
from jaxsolve.qp.flexqp import FlexQP, FlexQPState, WarmStart, flexqp, kkt_residual
from jaxsolve.qp.lockstep import solve_lockstep
from jaxsolve.qp.problem import QP, validate_qp

# Starting ADMM penalty of a batch (a single QP starts at flexqp's default, 0.1, as OSQP).
# The data are Ruiz-equilibrated with cost scaling, so P and A'A have unit-size entries
# and rho = 1 weighs them alike: batches of small QPs need fewer ADMM iterations with it,
# while single solves of harder problems (Maros-Meszaros) do better from 0.1.
_BATCH_RHO = 1.0
# Ruiz passes for a batch (a single QP keeps flexqp's 10, as OSQP): the passes are a
# large part of a batch's init, and on batches of small QPs 5 give the same statuses at
# about the same iteration counts.
_BATCH_SCALING = 5
# In-loop polish schedule of a single QP (steps 1, 2, 4, ... and every 5th); also that of
# a lockstep batch's last lanes, which run one at a time with real branches.
_SINGLE_POLISH_EVERY = 5

__all__ = ["solve_qp", "kkt_residual", "warm_start_from"]  # kkt_residual: from flexqp


def warm_start_from(previous) -> WarmStart:
    """A `WarmStart` from a previous `Solution` or ``FlexQPState``."""
    state = previous.state if isinstance(previous, Solution) else previous
    if not isinstance(state, FlexQPState):
        raise TypeError(
            "warm_start must be a Solution of solve_qp/flexqp or a FlexQPState, "
            f"got {type(previous).__name__}"
        )
    return WarmStart(state.x, state.y, state.z, state.rho, state.mu)


@partial(jax.jit, static_argnames=("batch_axes",))
def _attach(solver, qp, sol, batch_axes=None):
    """The driver's implicit rule on a computed solution, compiled (run eagerly, its
    many small operations would cost a visible share of a batch's time)."""
    return implicit_solution(solver, qp, sol, batch_axes=batch_axes)


def _solve_one(solver, x0, qp, tol, max_steps, loop, implicit, history):
    """One QP through the driver: ``loop="fixed"`` unrolled, else the while loop."""
    if loop == "fixed":
        return solve(solver, x0, qp, tol=tol, max_steps=max_steps, loop="fixed")
    # the driver differentiates FlexQP implicitly (FlexQP.optimality at the solution)
    tol = jnp.asarray(tol, qp.q.dtype)
    return solve(solver, x0, qp, tol=tol, max_steps=max_steps, history=history)


@partial(jax.jit, static_argnames=("tol", "max_steps", "loop", "implicit", "history"))
def _solve_map(solver, x0, qp, *, tol, max_steps, loop, implicit, history):
    """A batch one problem after another (``lax.map``) in one compiled call."""
    one = lambda xa: _solve_one(solver, *xa, tol, max_steps, loop, implicit, history)  # noqa: E731
    return jax.lax.map(one, (x0, qp))


def _lockstep_chunk(qp: QP) -> int:
    """Lanes per lockstep chunk: about 1 MB of per-lane matrices (P, A, the KKT factor
    and its two parts), 4 to 32 lanes, so that a chunk's data stays in cache."""
    n, m = qp.q.shape[-1], qp.l.shape[-1]
    per_lane = (4 * n * n + m * n) * jnp.dtype(qp.q.dtype).itemsize
    g = 4
    while g < 32 and 2 * g * per_lane <= 2**20:
        g *= 2
    return g


def _auto_batch(qp: QP) -> str:
    """``batch="auto"``: ``"lockstep"`` on a CPU backend, ``"vmap"`` elsewhere (on CPU
    the lockstep batch is the fastest path at every size `bench/qp.py` runs)."""
    if qp.q.ndim != 2:
        return "vmap"
    return "lockstep" if jax.default_backend() == "cpu" else "vmap"


def _check_warm_start(name, ws: WarmStart, qp: QP) -> None:
    """A warm start must come from a QP of the same shape (n variables, m rows)."""
    for field, want in (("x", qp.q.shape), ("y", qp.l.shape), ("z", qp.l.shape)):
        got = jnp.shape(getattr(ws, field))
        if got != want:
            raise ValueError(
                f"{name} comes from a QP of another size: its {field} has shape {got}, "
                f"this QP needs {want} (n={qp.n}, m={qp.m})"
            )


def _on_cpu() -> bool:
    return jax.default_backend() == "cpu"


def _vmappable_single(
    solver, x0, qp, tol, max_steps, implicit, batch_kw, history=False, lanes="lockstep"
):
    """One QP whose ``jax.vmap`` runs the lockstep batch (CPU), or with ``lanes="map"``
    the lanes one after another (`solve_lanewise`).

    A user's ``jax.jit(jax.vmap(lambda p: solve_qp(p)))`` would otherwise vmap the
    single-QP loop, and XLA:CPU then calls jaxlib's batched LAPACK kernels (Cholesky,
    triangular solves) with the whole batch inside the loop: jaxlib 0.10 splits such a
    call over the intra-op thread pool (``ParallelBatchMap``) and, called from a pool
    worker inside a while loop, its two concurrent calls can wait for ever on tasks no
    worker picks up (large batches hang). Here ``jax.vmap`` of a single solve runs the
    lockstep batch instead (its chunks of at most 32 lanes, the batch path ``solve_qp``
    takes for a batched QP on CPU): the same statuses and answers at ``tol``. With
    ``history=True`` (or per-lane tolerances) the lanes run one after another
    (``lax.map``) instead. Implicit derivatives stay exact: the solve runs on constant
    inputs and the driver's implicit rule (`jaxsolve.core.adjoint.implicit_solution`,
    `FlexQP.optimality`) differentiates the KKT conditions at its end, outside the
    ``custom_vmap``.
    """
    tol_a = jnp.asarray(tol, qp.q.dtype)
    # the solver's arrays are arguments, not closed over: inside an outer solver's
    # trace (SQP's subproblems) they are tracers, which a custom_vmap may not capture
    params, static = eqx.partition(solver, eqx.is_array)

    @jax.custom_batching.custom_vmap
    def primal(params, x0, qp, tol_a):
        s = eqx.combine(params, static)
        return solve(s, x0, qp, tol=tol_a, max_steps=max_steps, history=history)

    @primal.def_vmap
    def _rule(axis_size, in_batched, params, x0, qp, tol_a):
        def bcast(v, b):
            return v if b else jnp.broadcast_to(v, (axis_size,) + jnp.shape(v))

        pb = jax.tree.map(bcast, params, in_batched[0])
        x0b = jax.tree.map(bcast, x0, in_batched[1])
        qpb = jax.tree.map(bcast, qp, in_batched[2])
        if in_batched[3] or history or lanes == "map":
            # per-lane tolerances or a per-step history (the lockstep batch takes one tol
            # and records none): the lanes one after another (lax.map), each an unbatched
            # solve, so no batched LAPACK call is made inside the loop
            tb = tol_a if in_batched[3] else jnp.broadcast_to(tol_a, (axis_size,))

            def one(a):
                s = eqx.combine(a[0], static)
                return solve(s, a[1], a[2], tol=a[3], max_steps=max_steps, history=history)

            sol = jax.lax.map(one, (pb, x0b, qpb, tb))
        else:
            sol = solve_qp(
                qpb,
                x0b,
                tol=tol,
                max_steps=max_steps,
                implicit=False,
                batch="lockstep",
                **batch_kw,
            )
        return sol, jax.tree.map(lambda _: True, sol)

    if not implicit:
        return primal(params, x0, qp, tol_a)
    # the solve on constant inputs, then the driver's implicit rule at its end
    # (a jvp of the custom_vmap itself is never taken)
    p_const, x0_const, qp_const = jax.lax.stop_gradient((params, x0, qp))
    return _attach(solver, qp, primal(p_const, x0_const, qp_const, tol_a))


def solve_lanewise(solver, x0, qp: QP, tol, max_steps: int) -> Solution:
    """``solve(solver, x0, qp, tol=tol, max_steps=max_steps)`` for an outer loop (SQP's
    subproblems) whose ``jax.vmap`` on CPU solves the lanes one after another.

    Under ``vmap`` on CPU the lanes run as ``lax.map`` of the single solve, so each lane
    is the same program as one solve (a vmapped batch equals the loop lane for lane),
    keeps its own iteration count and real ``lax.cond`` branches, and makes no batched
    LAPACK call: jaxlib 0.10's batched kernels, called from a pool worker inside a while
    loop, can wait for ever (see `_vmappable_single`; a vmapped SQP batch of 16
    unicycle problems at T = 10 hung so). Elsewhere (GPU, or not vmapped) it is the
    driver's solve. Differentiated as the driver differentiates the solver: implicitly
    at the solution when it declares ``implicit_root`` and ``optimality`` (FlexQP);
    another subproblem solver (a host OSQP in ``bench/nlp.py``) runs as it is.
    """
    from jaxsolve.core.protocol import solver_attr

    if not _on_cpu():
        return solve(solver, x0, qp, tol=tol, max_steps=max_steps)
    implicit = all(solver_attr(solver, h) is not None for h in ("implicit_root", "optimality"))
    return _vmappable_single(solver, x0, qp, tol, max_steps, implicit, {}, lanes="map")


def _flexqp_settings(hyper: dict, batched: bool) -> dict:
    """`flexqp` hyperparameters as `solve_qp` sets them (the user's ``hyper`` wins)."""
    hyper = dict(hyper)
    # In-loop polishing pays off for single solves (warm starts end at the first
    # polish). In a batch the lax.cond becomes a select and the polish runs on every
    # step anyway, so it is attempted on every step with one pass: it ends the slow
    # lanes of a vmapped batch (whose loop runs until the slowest lane is done) once
    # their active set is right.
    hyper.setdefault("polish_every", 1 if batched else _SINGLE_POLISH_EVERY)
    if batched:
        hyper.setdefault("polish_passes", 1)
        # finalize's fine polish stage is a per-problem lax.cond; in a batch it becomes a
        # select that runs its passes on every lane (finalize several times slower):
        # batches skip it unless asked for (polish_fine=6)
        hyper.setdefault("polish_fine", 0)
    # rho adapted at every check: some single QPs (Maros-Meszaros QSCAGR7, QE226) need
    # it, and batches started at _BATCH_RHO do as well with it and end float32 lanes at
    # their precision floor that a change every third check left at MAX_STEPS.
    hyper.setdefault("rho_every", 1)
    if batched:
        hyper.setdefault("rho", _BATCH_RHO)
        hyper.setdefault("scaling_iters", _BATCH_SCALING)
    # The explicit inverse factor is faster batched than the Cholesky factor; float32
    # keeps the triangular L^-1, whose accuracy equality rows (1e3 rho) need
    # (jaxsolve.qp.linalg.factor).
    hyper.setdefault("kkt_inverse", batched)
    return hyper


def single_qp_solver(tol: float = 1e-8, **hyper: Any) -> FlexQP:
    """`flexqp` set up as `solve_qp` sets it up for one QP.

    In-loop polish at steps 1, 2, 4, ... and every 5th, a polished point whose error is
    at most ``tol`` accepted (it ends the run at its first good polish, with exact
    active-set multipliers), ``rho`` adapted at every check; ``**hyper`` overrides any
    of them. For an outer loop that solves QPs with `jaxsolve.solve` itself (SQP's
    subproblems): `solve_qp`'s own choice, without its input checks.
    """
    hyper = _flexqp_settings(hyper, batched=False)
    hyper.setdefault("polish_accept", tol)
    return flexqp(**hyper)


def solve_qp(
    qp: QP,
    x0: jax.Array | WarmStart | None = None,
    *,
    tol: float | None = None,
    max_steps: int = 1000,
    warm_start: Solution | FlexQPState | None = None,
    loop: str = "while",
    implicit: bool = True,
    throw: bool = False,
    history: bool = False,
    compact: int | None = 20,
    batch: str = "auto",
    **hyper: Any,
) -> Solution:
    r"""Solve ``min 1/2 x'Px + q'x  s.t.  l <= A x <= u`` with FlexQP.

    Returns a `Solution`: ``sol.x`` the primal solution,
    ``sol.state.y`` the multipliers of the rows of ``A`` (OSQP sign convention: ``Px + q +
    A'y = 0``, ``y > 0`` at an active upper bound), ``sol.state.viol`` the per-row
    violation, ``sol.status`` ``SUCCESS`` / ``INFEASIBLE`` (``x`` then minimizes the l1
    violation, few rows violated) / ``UNBOUNDED`` / ``MAX_STEPS`` / ``NONFINITE``.

    Args:
        qp: a `QP`; leaves with a leading batch axis solve a batch (``vmap``).
        x0: initial primal point (default zeros), or a `WarmStart`.
        tol: tolerance on FlexQP's relative KKT error (default by dtype: 1e-8 in
            float64, 1e-4 in float32).
        max_steps: step budget; one step is ``check_every`` (default 10) ADMM iterations.
        warm_start: a previous ``Solution`` (or ``FlexQPState``): starts from its primal,
            dual, relaxed copy, penalty and elastic weight (overrides ``x0``).
        loop: ``"while"`` (differentiated implicitly) or ``"fixed"`` (exactly
            ``max_steps`` steps, differentiated by unrolling: deep unfolding).
        implicit: with ``loop="while"``, attach implicit derivatives (the KKT system of the
            relaxed problem at the solution, solved densely by least squares); the
            derivative with respect to ``x0`` is zero.
        throw: raise `SolverError` on a failure status.
        history: record the per-step error.
        compact: for a batch given as concrete arrays (not under ``jit``/``grad``),
            solved with ``loop="while"`` and no history: run it through
            `jaxsolve.solve_batch` with ``compact=compact`` so the few slow
            problems of a batch stop costing the whole batch's work after
            ``compact`` steps (same answers lane for lane; the batch's compile time
            grows by the few smaller widths). ``None`` keeps one vmapped call.
        batch: how a batch runs: ``"lockstep"`` (`jaxsolve.qp.lockstep.solve_lockstep`:
            chunks of lanes stepped together with lane-uniform refactor branches, the
            running lanes re-chunked between rounds, the last few finished one at a
            time), ``"vmap"`` (one vmapped loop: the GPU/TPU way), ``"map"``
            (``lax.map``: one problem after another inside one compiled call) or
            ``"auto"`` (default: ``"lockstep"`` on a CPU backend, else ``"vmap"``).
            On CPU the lockstep batch is faster than ``"map"`` (``bench/qp.py``): its
            matrix-vector products are shared by a chunk's lanes (XLA's per-operation
            overhead dominates one small problem's iteration) while a chunk's data stays
            in cache. ``"lockstep"`` needs ``loop="while"`` without history (else
            ``"map"`` runs). Same answers and statuses either way (lanes may stop at a
            different step: lockstep rounds polish a lane, between rounds, when its
            error first falls below 1e-3 or at its polish checkpoints, and their step
            is ``check_every`` = 20 ADMM iterations with rho moved at any check, unless
            ``check_every`` or ``rho_every`` is given); all work under ``jit``,
            ``vmap`` and ``grad``.
        **hyper: hyperparameters of `flexqp`; ``polish_every``
            defaults to 5 for a single QP and 1 for a batch (``polish_passes`` 1 and
            ``polish_fine`` 0 there; a lockstep batch's last lanes, run one at a time,
            keep 5), ``rho_every`` to 1, ``rho`` to 0.1 for a single
            QP and 1 for a batch (``_BATCH_RHO``: fewer ADMM iterations on the
            equilibrated data of small QPs), ``scaling_iters`` to 5 for a batch
            (``_BATCH_SCALING``;
            10 for a single QP), ``polish_accept`` to ``tol``, ``kkt_inverse`` to True for
            a batch (float32 keeps ``L^-1`` and applies it twice, float64 keeps
            ``K^-1``: see `flexqp`).

    Implicit differentiation: with ``F`` from `kkt_residual`,
    $\partial_{(x,y)} F\, (\dot x, \dot y) = -\partial_\theta F\, \dot\theta$
    (Amos & Kolter, OptNet 2017; here on the elastic relaxation, so violated rows enter
    with their fixed multiplier ``+-mu``). Both ``jax.grad`` and ``jax.jvp`` work. It is
    the driver's adjoint (`jaxsolve.core.adjoint`): `FlexQP.optimality
    <jaxsolve.qp.flexqp.FlexQP.optimality>` is the condition, ``kkt_lstsq`` its linear
    solver, and the batch engines attach it with
    `implicit_solution`.
    """
    qp = validate_qp(qp)
    user_hyper = dict(hyper)
    if loop not in ("while", "fixed"):
        raise ValueError(f"loop must be 'while' or 'fixed', got {loop!r}")
    if batch not in ("auto", "vmap", "map", "lockstep"):
        raise ValueError(f"batch must be 'auto', 'vmap', 'map' or 'lockstep', got {batch!r}")
    batched = qp.q.ndim == 2
    batch_arg = batch
    if batch == "auto":
        batch = _auto_batch(qp)
    # the lockstep path runs the 'while' loop without history; otherwise lax.map
    if batch == "lockstep" and (loop != "while" or history):
        batch = "map"
    user_polish_every = "polish_every" in hyper
    user_checks = "check_every" in hyper or "rho_every" in hyper
    hyper = _flexqp_settings(hyper, batched)
    dtype = qp.q.dtype
    if tol is None:
        tol = 1e-8 if dtype == jnp.float64 else 1e-4
    elif is_concrete(tol) and not (np.all(np.asarray(tol) > 0) and np.all(np.isfinite(tol))):
        raise ValueError(f"tol must be positive and finite, got {tol}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    # a polished point that meets tol is kept (it ends the run): flexqp's polish_accept
    hyper.setdefault("polish_accept", tol)
    solver = flexqp(**hyper)
    if warm_start is not None:
        x0 = warm_start_from(warm_start)
        _check_warm_start("warm_start", x0, qp)
    elif isinstance(x0, WarmStart):
        _check_warm_start("x0", x0, qp)
    elif x0 is None:
        x0 = jnp.zeros(qp.q.shape, dtype)
    else:
        if not isinstance(x0, WarmStart):
            x0 = jnp.asarray(x0)
            check_floating("x0", x0)
            if x0.shape != qp.q.shape:
                raise ValueError(f"x0 must have shape {qp.q.shape}, got {x0.shape}")

    def one(x0, qp):
        return _solve_one(solver, x0, qp, tol, max_steps, loop, implicit, history)

    if batched and batch == "lockstep":
        # In lockstep an in-loop polish would be taken for the whole chunk as soon as
        # one lane attempts it, so the rounds' step does not polish: lanes are polished
        # between rounds, gathered, once their error is below 1e-3 (solve_lockstep's
        # polish_at); the last `tail` lanes (the slow ones, one at a time) keep the
        # batch's in-loop polish.
        lock_hyper = dict(hyper)
        if not user_polish_every:
            lock_hyper["polish_every"] = 0
        if not user_checks:
            # lockstep rounds check every 20 ADMM iterations (rho may move at each
            # check, rho_every=1 as above): the checks are a large part of a step's
            # overhead, and lanes end at an in-round polish, not at the last iterations
            lock_hyper["check_every"] = 20
        lock = flexqp(**lock_hyper) if lock_hyper != hyper else solver
        # The last `tail` lanes run one at a time with real branches: there an in-loop
        # polish costs only when it runs, so they polish as a single QP does (steps 1, 2,
        # 4, ... and every 5th), not at every step (a polish costs about two checks'
        # ADMM work, and the slowest lanes run long).
        tail = (
            flexqp(**{**hyper, "polish_every": _SINGLE_POLISH_EVERY})
            if not user_polish_every
            else solver
        )
        opts = (
            ("max_steps", int(max_steps)),
            ("chunk", _lockstep_chunk(qp)),
            ("tail", 8),
        )
        tol_a = jnp.asarray(tol, dtype)
        if implicit:  # the batch on constant inputs, the implicit rule lane by lane
            x0_const, qp_const = jax.lax.stop_gradient((x0, qp))
            sol = solve_lockstep(lock, tail, x0_const, qp_const, tol_a, **dict(opts))
            sol = _attach(lock, qp, sol, batch_axes=0)
        else:
            sol = solve_lockstep(lock, tail, x0, qp, tol_a, **dict(opts))
    elif batched and batch == "map":
        # tol is static here (the implicit rule keeps it out of differentiation)
        sol = _solve_map(
            solver,
            x0,
            qp,
            tol=float(tol),
            max_steps=max_steps,
            loop=loop,
            implicit=implicit,
            history=history,
        )
    elif (
        batched
        and compact is not None
        and loop == "while"
        and not history
        and is_concrete(qp)
        and is_concrete(x0)
    ):
        # Concrete inputs: nothing is being differentiated or traced, so the host may
        # drive the batch and drop finished lanes (implicit derivatives need tracers).
        sol = solve_batch(solver, x0, qp, tol=tol, max_steps=max_steps, compact=compact)
    elif batched:
        sol = jax.vmap(one)(x0, qp)
    elif loop == "while" and batch_arg in ("auto", "lockstep") and _on_cpu() and not at_top_level():
        # inside a user's transformation: a vmap of it must reach the lockstep batch.
        # At top level (no jit, vmap or grad) the driver's program runs as it is (the
        # same solve), compiled with FlexQP's XLA options (compiler_options: JAX takes
        # them on a top-level jit only, not inside the custom_vmap's trace).
        sol = _vmappable_single(
            solver, x0, qp, tol, max_steps, implicit, dict(user_hyper, compact=None), history
        )
    else:
        sol = one(x0, qp)
    if throw:
        from jaxsolve.core.driver import raise_on_failure

        sol = raise_on_failure(sol)
    return sol
