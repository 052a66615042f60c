"""One driver for every solver: ``jaxsolve.solve``.

The loop is compiled once per solver structure and problem shape. Termination and
the final status follow one rule for every solver (see `solve`).

One module: the compiled while and fixed loops, the host-driven progress loop and the
implicit-adjoint wrapper all run the same stepping and finalization (`step_until_done`,
`final_solution`, public so that the batching engines of `jaxsolve.core.batch` run
them too), so that one rule is written once.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.adjoint import Implicit, Unrolled, implicit_solution, resolve_adjoint
from jaxsolve.core.compile_options import options_cache_size, options_jit
from jaxsolve.core.implicit import custom_root
from jaxsolve.core.protocol import Packed, check_solver, pack, run_check_args, solver_attr
from jaxsolve.core.status import Status, status_counts, status_message
from jaxsolve.core.validation import check_floating, check_nonempty, check_tol, is_concrete

__all__ = [
    "Solution",
    "solve",
    "default_tol",
    "SolverError",
    "run_steps",
    "is_done",
    "step_until_done",
    "final_solution",
]

_DEFAULT_TOL = {
    np.dtype(np.float64): 1e-8,
    np.dtype(np.float32): 1e-4,
    np.dtype(np.float16): 1e-2,
    np.dtype(jnp.bfloat16): 1e-2,
}


def default_tol(x) -> float:
    """Default tolerance for the dtype of ``x`` (a pytree or a dtype).

    float64 -> 1e-8, float32 -> 1e-4, 16-bit floats -> 1e-2: roughly the accuracy an
    optimality measure can reach in that precision, so float32 runs do not stall
    at a float64 tolerance.
    """
    if isinstance(x, np.dtype | type) or hasattr(x, "itemsize") and not hasattr(x, "shape"):
        dtype = np.dtype(x)
    else:
        leaves = [
            leaf
            for leaf in jax.tree.leaves(x)
            if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)
        ]
        dtype = np.dtype(jnp.result_type(*leaves)) if leaves else np.dtype(jnp.float32)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        dtype = np.dtype(jnp.finfo(dtype).dtype)
    return _DEFAULT_TOL.get(dtype, float(math.sqrt(jnp.finfo(dtype).eps)))


class SolverError(RuntimeError):
    """Raised by ``solve(..., throw=True)`` when a solve ends with a failure status."""


class Solution(NamedTuple):
    """The result of `solve`.

    Attributes:
        x: the final iterate (``state.x``, after the solver's ``finalize``).
        state: the solver's final state (multipliers, penalties, ... live here).
        status: int32 `Status` code (an array under ``vmap``).
        num_steps: number of ``step`` calls made (int32).
        error: the solver's optimality measure at the end.
        history: per-step ``error`` (length ``max_steps``, NaN after the last step)
            when requested with ``history=True`` or with ``loop="fixed"``, else None.
        info: the per-step ``Info`` the solver's ``step`` returned, as a pytree whose
            leaves have a leading ``max_steps`` axis (NaN, or 0 for integer leaves,
            after the last step), recorded with ``history=True`` or ``loop="fixed"``;
            else None.
    """

    x: Any
    state: Any
    status: jax.Array
    num_steps: jax.Array
    error: jax.Array
    history: Any = None
    info: Any = None

    @property
    def message(self):
        """Human-readable meaning of ``status`` (a list for a batch)."""
        return status_message(self.status)

    @property
    def success(self):
        return self.status == Status.SUCCESS

    def counts(self) -> dict[str, int]:
        """Status counts over a batch: a batched solve must not hide failures."""
        return status_counts(self.status)


def _tree_isfinite(x) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(x)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def is_done(state, tol):
    """Whether the driver stops at ``state``: ``error <= tol``, not SUCCESS, or a NaN/inf error."""
    return (state.error <= tol) | (state.status != Status.SUCCESS) | ~jnp.isfinite(state.error)


def _init(solver, x0, args):
    """``solver.init`` with the State checked at trace time (a clear error, not a
    failure deep inside ``lax.while_loop``)."""
    state = solver.init(x0, args)
    missing = [f for f in ("x", "iter_num", "error", "status") if not hasattr(state, f)]
    if missing or not hasattr(state, "_replace"):
        raise TypeError(
            "init must return a NamedTuple State with fields x, iter_num, error, status "
            f"(got {type(state).__name__}, missing {missing or 'the NamedTuple _replace'})"
        )
    for name in ("iter_num", "error", "status"):
        v = getattr(state, name)
        if not isinstance(v, jax.Array | jax.core.Tracer) or jnp.ndim(v) != 0:
            raise TypeError(
                f"State.{name} must be a 0-d JAX array (e.g. jnp.asarray(...)), got "
                f"{type(v).__name__} of shape {jnp.shape(v)}"
            )
    if not jnp.issubdtype(state.error.dtype, jnp.floating):
        raise TypeError(f"State.error must be a real floating scalar, got {state.error.dtype}")
    return state


def _step(solver, state, args, options):
    """One step, with the run-time ``options`` (a `Packed` or None) if any; a State whose
    structure, shapes or dtypes the step changes is named at trace time (the loops
    would otherwise fail with a raw carry-type error)."""
    if options is None:
        new, info = solver.step(state, args)
    else:
        new, info = solver.step(state, args, options=options.unpack())
    _check_same_types(state, new)
    return new, info


def _weakly_typed(a) -> bool:
    return bool(getattr(getattr(a, "aval", a), "weak_type", False))


def _check_same_types(before, after) -> None:
    leaves, tree = jax.tree_util.tree_flatten_with_path(before)
    new_leaves, new_tree = jax.tree_util.tree_flatten_with_path(after)
    if tree != new_tree:
        raise TypeError(
            f"step must return a State of the structure init returned; got {new_tree}, "
            f"expected {tree}"
        )
    for (path, a), (_, b) in zip(leaves, new_leaves, strict=True):
        if not hasattr(a, "dtype"):
            continue
        # the loops promote weakly typed carries themselves
        same_dtype = _weakly_typed(a) or a.dtype == jnp.result_type(b)
        if jnp.shape(a) != jnp.shape(b) or not same_dtype:
            where = "State" + jax.tree_util.keystr(path)
            hint = ""
            if jnp.issubdtype(a.dtype, jnp.inexact):
                hint = (
                    " Data, constants or the solver's arithmetic of another dtype promoted "
                    "it: pass x0 and the problem data in one dtype (float32 or float64 "
                    "where a solver does not keep 16-bit floats)."
                )
            raise TypeError(
                f"step changed {where} from {a.dtype}{list(jnp.shape(a))} to "
                f"{jnp.result_type(b)}{list(jnp.shape(b))}; a step must keep the types "
                f"init gave the State.{hint}"
            )


def final_solution(solver, state, args, tol, num_steps, history, info=None) -> Solution:
    """The `Solution` of a run that ended at ``state``: the driver's one end-of-run rule.

    Calls the solver's ``finalize(state, args, converged)`` (if it has one) with
    ``converged = error <= tol``, then sets the final status: ``NONFINITE`` if ``x``
    or ``error`` is not finite, else the solver's own status when it is not
    ``SUCCESS`` (e.g. ``INFEASIBLE``), else ``SUCCESS`` if ``error <= tol`` and
    ``MAX_STEPS`` otherwise; that status is also written into the returned state.
    ``tol`` is a scalar in the dtype of ``state.error``, ``num_steps`` the number of
    steps taken (int32), ``history``/``info`` the per-step records or None. For one
    problem (vmap it over lanes); traceable, no host synchronization.
    """
    converged = state.error <= tol
    finalize = getattr(solver, "finalize", None)
    if finalize is not None:
        state = finalize(state, args, converged)
    nonfinite = ~(_tree_isfinite(state.x) & jnp.isfinite(state.error))
    status = jnp.where(
        nonfinite,
        Status.NONFINITE,
        jnp.where(
            state.status != Status.SUCCESS,
            state.status,
            jnp.where(state.error <= tol, Status.SUCCESS, Status.MAX_STEPS),
        ),
    ).astype(jnp.int32)
    state = state._replace(status=status)
    return Solution(
        state.x, state, status, jnp.asarray(num_steps, jnp.int32), state.error, history, info
    )


def _info_buffer(solver, state, args, options, length):
    """Per-step Info storage: NaN for floating leaves, zeros otherwise."""
    info = jax.eval_shape(lambda: _step(solver, state, args, options)[1])

    def empty(leaf):
        fill = jnp.nan if jnp.issubdtype(leaf.dtype, jnp.inexact) else 0
        return jnp.full((length,) + leaf.shape, fill, leaf.dtype)

    return jax.tree.map(empty, info)


def step_until_done(solver, state, args, tol, k, limit, hist, options=None):
    """Step ``state`` while ``k < limit`` and not `is_done`; returns ``(state, k, hist)``.

    The driver's one stepping loop (a ``lax.while_loop``; every mode of `solve` and
    the batching engines run it). ``k`` is the int32 number of steps already taken,
    ``limit`` the step count to stop at (both scalars, may be traced), ``tol`` a
    scalar in the dtype of ``state.error``; a state that is already done is returned
    unchanged, so a resumed or vmapped lane that finished stays frozen. ``hist`` is
    None or a pair ``(errors, infos)`` of per-step buffers indexed by ``k``; ``options``
    the run-time options (a `Packed` or None) passed to ``step``.
    """

    def cond(carry):
        s, j, _ = carry
        return (j < limit) & ~is_done(s, tol)

    def body(carry):
        s, j, h = carry
        s, info = _step(solver, s, args, options)
        if h is not None:
            errs, infos = h
            errs = errs.at[j].set(s.error.astype(errs.dtype))
            infos = jax.tree.map(lambda buf, v: buf.at[j].set(v), infos, info)
            h = (errs, infos)
        return s, j + 1, h

    return jax.lax.while_loop(cond, body, (state, k, hist))


def _run_while(solver, x0, args, tol, max_steps_dyn, options, max_steps, record):
    state = _init(solver, x0, args)
    tol = jnp.asarray(tol, state.error.dtype)
    hist = None
    if record:
        errs = jnp.full((max_steps,), jnp.nan, state.error.dtype)
        hist = (errs, _info_buffer(solver, state, args, options, max_steps))
    state, k, hist = step_until_done(
        solver, state, args, tol, jnp.int32(0), max_steps_dyn, hist, options
    )
    errs, infos = (None, None) if hist is None else hist
    return final_solution(solver, state, args, tol, k, errs, infos)


def _run_fixed(solver, x0, args, tol, options, max_steps, freeze, checkpoint):
    """``max_steps`` steps by ``lax.scan``; ``freeze``: a finished solve stops changing
    (the while loop's iterates, but reverse-differentiable)."""
    state = _init(solver, x0, args)
    tol = jnp.asarray(tol, state.error.dtype)

    def body(carry, _):
        s, k = carry
        new, info = _step(solver, s, args, options)
        if freeze:
            done = is_done(s, tol)
            new = jax.tree.map(lambda a, b: jnp.where(done, a, b), s, new)
            k = k + jnp.where(done, 0, 1).astype(jnp.int32)
        else:
            k = k + 1
        return (new, k), (new.error, info)

    if checkpoint:
        body = jax.checkpoint(body)
    (state, k), (errs, infos) = jax.lax.scan(body, (state, jnp.int32(0)), None, length=max_steps)
    if freeze:  # as the while loop records them: NaN after the last step
        live = jnp.arange(max_steps) < k
        errs = jnp.where(live, errs, jnp.nan)
    return final_solution(solver, state, args, tol, k, errs, infos)


def _solve_while_program(
    solver, x0, args, tol, max_steps_dyn, options, *, max_steps, record, adjoint
):
    # the implicit rule sits inside the compiled program: one dispatch per solve
    def run(sv, x, a, extra):
        t, limit, opts = extra
        return _run_while(sv, x, a, t, limit, opts, max_steps, record)

    extra = (tol, max_steps_dyn, options)
    if adjoint is None:
        return run(solver, x0, args, extra)
    return _with_implicit(adjoint, run, solver, x0, args, extra)


def _solve_fixed_program(
    solver, x0, args, tol, options, *, max_steps, freeze=False, checkpoint=False
):
    return _run_fixed(solver, x0, args, tol, options, max_steps, freeze, checkpoint)


_WHILE_STATIC = ("max_steps", "record", "adjoint")
_FIXED_STATIC = ("max_steps", "freeze", "checkpoint")
_solve_while = jax.jit(_solve_while_program, static_argnames=_WHILE_STATIC)
_solve_fixed = jax.jit(_solve_fixed_program, static_argnames=_FIXED_STATIC)


def _compiled(solver, program, plain, static):
    """``plain`` (the jitted ``program``), or the same program compiled with the XLA
    options the solver's class declares in ``compiler_options`` (a dict;
    `jaxsolve.core.compile_options`): they change how XLA compiles it, not what it
    computes. Inside a user's ``jit`` either is inlined into the outer program."""
    options = solver_attr(solver, "compiler_options")
    if not options:
        return plain
    return options_jit(program, options, static_argnames=static)


def solve_while_cache_size() -> int:
    """Compilations of the driver's while-loop program, with or without a solver's
    ``compiler_options`` (for tests that check a sweep does not recompile)."""
    return _solve_while._cache_size() + options_cache_size(_solve_while_program)


def _with_implicit(adjoint: Implicit, run, solver, x0, args, extra) -> Solution:
    """``run(solver, x0, args, extra) -> Solution`` whose ``x`` has implicit derivatives.

    ``extra`` (tolerance, step limit, options) is passed, not closed over: a
    ``custom_jvp`` inside ``jit`` must not capture the outer trace's values. The
    optimality condition does not depend on it, so its derivative is zero.
    A solver with the ``implicit_root`` hook (`jaxsolve.core.adjoint`) is run on
    constant inputs and differentiated at its final state instead.
    """
    if solver_attr(solver, "implicit_root") is not None:
        sg = jax.lax.stop_gradient
        return implicit_solution(solver, args, run(sg(solver), sg(x0), sg(args), extra), adjoint)

    def optimality(x, solver, args, extra):
        return solver.optimality(x, args)

    @custom_root(
        optimality,
        has_aux=True,
        solve=adjoint.solve,
        symmetric=adjoint.symmetric,
        tol=adjoint.tol,
    )
    def solved(x0, solver, args, extra):
        sol = run(solver, x0, args, extra)
        return sol.x, sol

    x, sol = solved(x0, solver, args, extra)
    return sol._replace(x=x)


@jax.jit
def _init_jit(solver, x0, args):
    return _init(solver, x0, args)


@jax.jit
def _chunk_jit(solver, state, args, tol, k, limit, options):
    tol = jnp.asarray(tol, state.error.dtype)
    state, k, _ = step_until_done(solver, state, args, tol, k, limit, None, options)
    return state, k, is_done(state, tol)


@jax.jit
def _final_jit(solver, state, args, tol, k):
    return final_solution(solver, state, args, jnp.asarray(tol, state.error.dtype), k, None)


def run_steps(solver, state, args, num_steps: int):
    """Apply ``step`` exactly ``num_steps`` times (uncompiled helper for tests/debugging)."""
    for _ in range(num_steps):
        state, _ = solver.step(state, args)
    return state


_TQDM_WARNED = []


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        if not _TQDM_WARNED:
            _TQDM_WARNED.append(True)
            warnings.warn(
                "progress=True needs tqdm (pip install tqdm); running without a bar",
                stacklevel=3,
            )
        return None
    try:  # the notebook bar needs ipywidgets; without it tqdm.auto warns, the text bar does not
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        pass
    return tqdm(total=total, unit="step", leave=True)


def _solve_progress(solver, x0, args, tol, max_steps, chunk, callback, show, options):
    if not (is_concrete(x0) and is_concrete(args)):
        raise ValueError(
            "progress=True / callback= drive the loop from Python and cannot run under "
            "jit/vmap/grad; use the compiled loop (progress=False) there"
        )
    state = _init_jit(solver, x0, args)
    k = jnp.int32(0)
    bar = _progress_bar(max_steps, show)
    try:
        while int(k) < max_steps:
            limit = jnp.int32(min(int(k) + chunk, max_steps))
            prev = int(k)
            state, k, done = _chunk_jit(solver, state, args, tol, k, limit, options)
            if bar is not None:
                bar.update(int(k) - prev)
                bar.set_postfix(error=f"{float(state.error):.3e}")
            if bool(done):
                break
            if callback is not None and callback(state, int(k)):
                break
    finally:
        if bar is not None:
            bar.total = int(k)  # the bar ends where the solve stopped, full
            bar.refresh()
            bar.close()
    return _final_jit(solver, state, args, tol, k)


def solve(
    solver: Any,
    x0: Any,
    args: Any = None,
    *,
    tol: float | jax.Array | None = None,
    max_steps: int = 1000,
    loop: str = "while",
    throw: bool = False,
    progress: bool = False,
    callback: Callable | None = None,
    chunk: int | None = None,
    history: bool = False,
    adjoint: Implicit | Unrolled | None = None,
    options: dict | None = None,
) -> Solution:
    r"""Run ``solver`` from ``x0`` on problem data ``args``.

    Termination and status, the same for every solver:

    * the loop stops when ``state.error <= tol``, when the solver declares a terminal
      condition (``state.status != SUCCESS``), when ``error`` is not finite, or after
      ``max_steps`` steps;
    * then ``solver.finalize`` runs if the solver has one;
    * the final status is ``NONFINITE`` if ``x`` or ``error`` holds NaN/Inf, else the
      solver-declared status if any, else ``SUCCESS`` if ``error <= tol``, else
      ``MAX_STEPS``.

    Args:
        solver: anything with ``init(x0, args)`` and ``step(state, args)``: a
            `AbstractSolver` (an ``equinox`` Module), a
            `Solver` of plain functions, a family's factory output.
        x0: initial iterate (any pytree of floating arrays).
        args: problem data (a pytree of arrays; vmapped, sharded, differentiated).
            A solver's optional ``check_args(x0, args)`` hook sees them first, in
            Python, before compilation (`jaxsolve.core.protocol`).
        tol: tolerance on ``state.error``; default by dtype (`default_tol`).
        max_steps: step budget (a Python int >= 1).
        loop: ``"while"`` (``lax.while_loop``; under ``vmap`` finished lanes are frozen,
            so a batched solve equals the loop of single solves lane for lane) or
            ``"fixed"`` (``lax.scan`` for exactly ``max_steps`` steps, reverse-mode
            differentiable: deep unfolding).
        throw: raise `SolverError` on a failure status (under ``jit`` through
            ``equinox.error_if``, reliable on CPU).
        progress: run jitted chunks of ``chunk`` steps from Python with a progress bar;
            returns the same Solution as the compiled loop.
        callback: ``callback(state, num_steps) -> bool | None`` called after each chunk
            (implies host-driven chunks); returning True stops early.
        chunk: steps per chunk for ``progress``/``callback`` (default ``max(1, max_steps // 50)``).
        history: record the per-step ``error`` in ``Solution.history`` and the per-step
            ``Info`` in ``Solution.info``.
        adjoint: how ``Solution.x`` is differentiated (`jaxsolve.core.adjoint`):
            `Implicit` (the solver's ``optimality`` condition at the
            solution), `Unrolled` (through the iterations), or None:
            ``Implicit()`` for a ``while`` loop of a solver that declares
            ``optimality``, plain autodiff of the loop otherwise.
        options: run-time options, passed to ``step`` as ``step(state, args,
            options=options)`` (only when given). Arrays in it are traced, other
            values are static.

    Returns:
        A `Solution`.
    """
    check_solver(solver)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    max_steps = int(max_steps)
    if loop not in ("while", "fixed"):
        raise ValueError(f"loop must be 'while' or 'fixed', got {loop!r}")
    check_nonempty("x0", x0)
    check_floating("x0", x0)
    run_check_args(solver, x0, args)
    check_tol(tol)
    if tol is None:
        tol = default_tol(x0)
    if (progress or callback is not None) and loop == "fixed":
        raise ValueError("progress/callback run the 'while' loop in chunks; use loop='while'")
    if options is not None and not isinstance(options, dict | Packed):
        raise TypeError(f"options must be a dict, got {type(options).__name__}")
    adjoint = resolve_adjoint(adjoint, solver, loop)
    packed = pack(solver)
    opts = None if options is None else pack(options)

    if progress or callback is not None:
        chunk = max(1, max_steps // 50) if chunk is None else int(chunk)
        if chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk}")
        sol = _solve_progress(packed, x0, args, tol, max_steps, chunk, callback, progress, opts)
    else:
        if loop == "fixed" or isinstance(adjoint, Unrolled):
            sol = _compiled(packed, _solve_fixed_program, _solve_fixed, _FIXED_STATIC)(
                packed,
                x0,
                args,
                tol,
                opts,
                max_steps=max_steps,
                freeze=loop != "fixed",
                checkpoint=loop != "fixed" and adjoint.checkpoint,
            )
        else:
            sol = _compiled(packed, _solve_while_program, _solve_while, _WHILE_STATIC)(
                packed,
                x0,
                args,
                tol,
                np.int32(max_steps),
                opts,
                max_steps=max_steps if history else 0,
                record=history,
                adjoint=adjoint if isinstance(adjoint, Implicit) else None,
            )
    if throw:
        sol = raise_on_failure(sol)
    return sol


def raise_on_failure(sol: Solution) -> Solution:
    """``solve(..., throw=True)``'s check: raise `SolverError` naming the first non-SUCCESS
    status (and the status counts of a batch) when the status is concrete; under ``jit``,
    ``equinox.error_if`` on ``x`` raises at run time instead."""
    if is_concrete(sol.status):
        codes = np.asarray(sol.status)
        if np.any(codes != Status.SUCCESS):
            counts = status_counts(codes)
            first = Status(int(codes.ravel()[np.argmax(codes.ravel() != 0)]))
            raise SolverError(
                f"solve failed: {first.name}: {first.message} (status counts {counts})"
            )
        return sol
    x = eqx.error_if(sol.x, sol.status != Status.SUCCESS, "jaxsolve.solve: failure status")
    return sol._replace(x=x)
