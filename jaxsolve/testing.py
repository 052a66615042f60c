"""The contract every jaxsolve solver passes (DESIGN.md, "Tests").

A family describes each public solver once as a `SolverCase`; the checks
below are applied to every registered case by ``tests/test_contract.py``. Users
writing their own solver on the protocol can run the same checks on it.

Checks (all in float64 unless said):

1. `check_converges` - reaches the reference solver's answer.
2. `check_state_stable` - ``init`` and ``step`` states agree in structure,
   shape and dtype.
3. `check_jit_equals_eager` and `check_no_recompile`.
4. `check_vmap_equals_loop` - lane for lane, with different iteration counts.
5. `check_gradients` - implicit = unrolled = central finite differences.
6. `check_float32` - runs and keeps its dtype.
7. `check_bad_input` - NaN gives ``NONFINITE``, ``max_steps=1`` gives
   ``MAX_STEPS``, malformed input raises before tracing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Solver, Status, solve
from jaxsolve.core import driver as _driver

__all__ = [
    "SolverCase",
    "CHECKS",
    "check_converges",
    "check_state_stable",
    "check_jit_equals_eager",
    "check_no_recompile",
    "check_vmap_equals_loop",
    "check_gradients",
    "check_float32",
    "check_bad_input",
    "rel_error",
]


@dataclasses.dataclass(frozen=True)
class SolverCase:
    """How to exercise one solver.

    Attributes:
        name: ``"<module>.<factory>"``, e.g. ``"first_order.projected_gradient"``.
        make_solver: ``make_solver(**hyper) -> Solver``; called with no arguments for
            the default solver and with each dict of ``hyper_variants``.
        make_problem: ``make_problem(key, dtype) -> (x0, args)``; different keys give
            problems of the same shapes (they are stacked for the vmap check).
        reference: ``reference(args) -> x_ref`` (NumPy) from a trusted solver
            (OSQP, SciPy, POT, ...), or None when ``make_problem`` has a closed form
            given by ``reference`` anyway.
        tol, max_steps: passed to `jaxsolve.solve` in float64.
        accuracy: bound on ``||x - x_ref|| / max(1, ||x_ref||)``.
        hyper_variants: numeric-hyperparameter changes that must not recompile.
        gradient: optional ``gradient(args) -> (theta, loss_implicit, loss_unrolled)``;
            ``loss_*(theta) -> scalar`` differentiate a function of the solution with
            respect to problem data ``theta`` (implicitly / by unrolling; the latter
            may be None).
        grad_rtol: relative tolerance of the gradient comparisons.
        nan_args: ``nan_args(args) -> args`` with a NaN planted in the data.
        bad_inputs: callables that must raise ``ValueError``/``TypeError`` (bad shapes,
            integer data, non-positive step sizes ...).
        float32_tol: tolerance for the float32 run (default: the float32 default tol).
        float32_must_succeed: require ``SUCCESS`` (not just a finite ``MAX_STEPS``).
        compare: ``compare(x) -> array`` extracts what is compared (default: ravel).
        distinct_steps: the vmap batch must contain different iteration counts.
        batch_size: number of problems in the vmap check.
        vmap_rtol: bound on the relative difference of a batched lane and its
            single solve (batched kernels round differently in the last bits).
        measure: optional ``measure(sol, args) -> float``: the documented optimality
            measure recomputed from the returned point for the problem as given (not
            the solver's own running ``error``); a SUCCESS must have it at most
            ``measure_slack * tol``.
        measure_slack: allowance for recomputing in another order of operations.
        slow_checks: names of checks (keys of `CHECKS`) that run only in the slow test
            tier for this case, because they take long here (the eager step of a
            solver with many inner loops compiles each loop on every call); they are
            still run, by ``make test-slow``.
    """

    name: str
    make_solver: Callable[..., Solver]
    make_problem: Callable[[jax.Array, Any], tuple[Any, Any]]
    reference: Callable[[Any], Any]
    tol: float = 1e-9
    max_steps: int = 2000
    accuracy: float = 1e-6
    hyper_variants: Sequence[dict] = ()
    gradient: Callable | None = None
    grad_rtol: float = 1e-5
    nan_args: Callable[[Any], Any] | None = None
    bad_inputs: Sequence[Callable[[], Any]] = ()
    float32_tol: float | None = None
    float32_must_succeed: bool = True
    compare: Callable[[Any], Any] | None = None
    distinct_steps: bool = True
    batch_size: int = 4
    vmap_rtol: float = 1e-9
    measure: Callable[[Any, Any], float] | None = None
    measure_slack: float = 1.0 + 1e-6
    slow_checks: Sequence[str] = ()

    def __str__(self) -> str:  # pytest ids
        return self.name


def _flat(case: SolverCase, x) -> np.ndarray:
    if case.compare is not None:
        x = case.compare(x)
    leaves = jax.tree.leaves(x)
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=np.float64)) for leaf in leaves])


def rel_error(x, ref) -> float:
    """``||x - ref|| / max(1, ||ref||)`` over flattened pytrees."""
    x = np.concatenate([np.ravel(np.asarray(v, np.float64)) for v in jax.tree.leaves(x)])
    ref = np.concatenate([np.ravel(np.asarray(v, np.float64)) for v in jax.tree.leaves(ref)])
    return float(np.linalg.norm(x - ref) / max(1.0, np.linalg.norm(ref)))


def _problem(case, seed=0, dtype=jnp.float64):
    return case.make_problem(jax.random.key(seed), dtype)


def check_converges(case: SolverCase, seed: int = 0) -> None:
    x0, args = _problem(case, seed)
    sol = solve(case.make_solver(), x0, args, tol=case.tol, max_steps=case.max_steps)
    assert int(sol.status) == Status.SUCCESS, (
        f"{case.name}: status {Status(int(sol.status)).name}, error {float(sol.error):.3e}"
    )
    if case.measure is not None:
        m = float(case.measure(sol, args))
        assert m <= case.measure_slack * case.tol, (
            f"{case.name}: SUCCESS, but the recomputed optimality measure is {m:.3e} "
            f"> tol {case.tol:.1e}"
        )
    ref = case.reference(args)
    err = rel_error(_flat(case, sol.x), _flat(case, ref) if case.compare is None else np.ravel(ref))
    assert err <= case.accuracy, f"{case.name}: relative error {err:.3e} > {case.accuracy:.1e}"


def _leaf_sig(tree):
    return jax.tree.structure(tree), [(v.shape, v.dtype) for v in jax.tree.leaves(tree)]


def check_state_stable(case: SolverCase) -> None:
    # shapes and dtypes only, so abstract evaluation (tracing, no execution) suffices
    x0, args = _problem(case)
    solver = case.make_solver()
    s0 = jax.eval_shape(solver.init, x0, args)
    for field in ("x", "iter_num", "error", "status"):
        assert hasattr(s0, field), f"{case.name}: State lacks field {field!r}"
    assert s0.iter_num.dtype == jnp.int32 and s0.status.dtype == jnp.int32
    assert s0.error.shape == ()
    s1, _ = jax.eval_shape(solver.step, s0, args)
    assert _leaf_sig(s0) == _leaf_sig(s1), (
        f"{case.name}: step changed the state's structure/shape/dtype"
    )


def check_jit_equals_eager(case: SolverCase) -> None:
    x0, args = _problem(case)
    solver = case.make_solver()
    s0 = jax.jit(solver.init)(x0, args)
    eager, _ = solver.step(s0, args)
    compiled, _ = jax.jit(solver.step)(s0, args)
    for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(compiled), strict=True):
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12, err_msg=case.name
        )


def check_no_recompile(case: SolverCase) -> None:
    if not case.hyper_variants:
        return
    x0, args = _problem(case)
    solve(case.make_solver(**case.hyper_variants[0]), x0, args, max_steps=3)
    size = _driver.solve_while_cache_size()
    for hyper in case.hyper_variants[1:]:
        solve(case.make_solver(**hyper), x0, args, max_steps=3)
    assert _driver.solve_while_cache_size() == size, (
        f"{case.name}: a numeric hyperparameter change recompiled"
    )


def check_vmap_equals_loop(case: SolverCase) -> None:
    problems = [_problem(case, seed) for seed in range(case.batch_size)]
    x0s = jax.tree.map(lambda *v: jnp.stack(v), *[p[0] for p in problems])
    argss = jax.tree.map(lambda *v: jnp.stack(v), *[p[1] for p in problems])
    solver = case.make_solver()
    run = lambda x0, args: solve(solver, x0, args, tol=case.tol, max_steps=case.max_steps)
    batched = jax.vmap(run)(x0s, argss)
    steps = []
    for i, (x0, args) in enumerate(problems):
        single = run(x0, args)
        bx = jax.tree.map(lambda v, i=i: v[i], batched.x)
        assert int(batched.num_steps[i]) == int(single.num_steps), (
            f"{case.name}: lane {i} steps differ"
        )
        assert int(batched.status[i]) == int(single.status), f"{case.name}: lane {i} status differs"
        err = rel_error(bx, single.x)
        assert err <= case.vmap_rtol, (
            f"{case.name}: lane {i} differs from the single solve by {err:.2e}"
        )
        steps.append(int(single.num_steps))
    if case.distinct_steps:
        assert len(set(steps)) > 1, (
            f"{case.name}: the batch did not exercise different iteration counts"
        )


def _directional_fd(f, theta, direction, eps=1e-6):
    plus = jax.tree.map(lambda t, d: t + eps * d, theta, direction)
    minus = jax.tree.map(lambda t, d: t - eps * d, theta, direction)
    return (float(f(plus)) - float(f(minus))) / (2 * eps)


def check_gradients(case: SolverCase) -> None:
    if case.gradient is None:
        return
    _, args = _problem(case)
    theta, loss_implicit, loss_unrolled = case.gradient(args)
    leaves, treedef = jax.tree.flatten(theta)
    keys = jax.random.split(jax.random.key(42), len(leaves))
    direction = jax.tree.unflatten(
        treedef,
        [
            jax.random.normal(k, jnp.shape(v), jnp.result_type(v))
            for k, v in zip(keys, leaves, strict=True)
        ],
    )
    dot = lambda g: sum(
        float(jnp.vdot(a, b))
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(direction), strict=True)
    )
    fd = _directional_fd(loss_implicit, theta, direction)
    scale = max(1.0, abs(fd))
    g_imp = dot(jax.grad(loss_implicit)(theta))
    assert abs(g_imp - fd) <= case.grad_rtol * scale, (
        f"{case.name}: implicit grad {g_imp} vs FD {fd}"
    )
    _, jvp_imp = jax.jvp(loss_implicit, (theta,), (direction,))
    assert abs(float(jvp_imp) - fd) <= case.grad_rtol * scale, (
        f"{case.name}: implicit jvp {float(jvp_imp)} vs FD {fd}"
    )
    if loss_unrolled is not None:
        g_unr = dot(jax.grad(loss_unrolled)(theta))
        assert abs(g_unr - fd) <= case.grad_rtol * scale, (
            f"{case.name}: unrolled grad {g_unr} vs FD {fd}"
        )


def check_float32(case: SolverCase) -> None:
    x0, args = _problem(case, dtype=jnp.float32)
    for leaf in jax.tree.leaves(x0):
        assert jnp.result_type(leaf) == jnp.float32, f"{case.name}: make_problem ignored dtype"
    tol = case.float32_tol if case.float32_tol is not None else 1e-4
    sol = solve(case.make_solver(), x0, args, tol=tol, max_steps=case.max_steps)
    for leaf in jax.tree.leaves(sol.x):
        assert jnp.result_type(leaf) == jnp.float32, (
            f"{case.name}: float32 in, {jnp.result_type(leaf)} out"
        )
    assert int(sol.status) != Status.NONFINITE, f"{case.name}: float32 gave NaN/Inf"
    if case.float32_must_succeed:
        assert int(sol.status) == Status.SUCCESS, (
            f"{case.name}: float32 status {Status(int(sol.status)).name}"
        )


def check_bad_input(case: SolverCase) -> None:
    x0, args = _problem(case)
    solver = case.make_solver()
    one = solve(solver, x0, args, tol=case.tol, max_steps=1)
    assert int(one.status) == Status.MAX_STEPS, (
        f"{case.name}: max_steps=1 gave {Status(int(one.status)).name}"
    )
    assert int(one.num_steps) == 1
    if case.nan_args is not None:
        bad = solve(solver, x0, case.nan_args(args), tol=case.tol, max_steps=case.max_steps)
        assert int(bad.status) == Status.NONFINITE, (
            f"{case.name}: NaN data gave {Status(int(bad.status)).name}"
        )
    nan_x0 = jax.tree.map(lambda v: jnp.full_like(v, jnp.nan), x0)
    bad = solve(solver, nan_x0, args, tol=case.tol, max_steps=case.max_steps)
    assert int(bad.status) != Status.SUCCESS, f"{case.name}: a NaN start reported SUCCESS"
    for bad_call in case.bad_inputs:
        try:
            bad_call()
        except (ValueError, TypeError):
            continue
        raise AssertionError(
            f"{case.name}: bad input {bad_call} did not raise ValueError/TypeError"
        )


CHECKS = {
    "converges": check_converges,
    "state_stable": check_state_stable,
    "jit_equals_eager": check_jit_equals_eager,
    "no_recompile": check_no_recompile,
    "vmap_equals_loop": check_vmap_equals_loop,
    "gradients": check_gradients,
    "float32": check_float32,
    "bad_input": check_bad_input,
}
