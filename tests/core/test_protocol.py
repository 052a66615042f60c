"""Protocol v2: user-written solvers (a Module and plain functions) pass the whole contract.

The Module solver is the one ``docs/guide.md`` shows; it is read from the page and
executed here, so the documented example cannot drift from what runs.
"""

import functools
import pathlib
import re
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import testing
from jaxsolve.core import driver

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)


@functools.cache
def _guide_namespace() -> dict:
    ns: dict = {}
    exec(_blocks("guide.md")[1], ns)  # the "write one as an equinox Module" example
    return ns


def test_guide_example_runs_and_is_short():
    code = _blocks("guide.md")[1]
    cls = code[code.index("class GradientDescent") : code.index("fun = lambda")]
    assert len([ln for ln in cls.splitlines() if ln.strip()]) <= 25
    ns = _guide_namespace()
    sol = ns["sol"]
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    np.testing.assert_allclose(sol.x, np.full(3, 0.5), atol=1e-7)


def test_contributing_example_runs():
    ns: dict = {}
    exec(_blocks("contributing.md")[0], ns)
    fun = lambda x, a: jnp.sum((x - a) ** 2)
    sol = jaxsolve.solve(ns["my_method"](fun, stepsize=0.25), jnp.zeros(4), jnp.arange(4.0))
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    np.testing.assert_allclose(sol.x, np.arange(4.0), atol=1e-7)


# --- both shapes through the contract -----------------------------------------------------


class _S(NamedTuple):
    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


def _quad(x, args):
    A, b = args
    return 0.5 * x @ A @ x - b @ x


def _plain_solver(lr=0.3):
    """Gradient descent of two plain functions closing over a Python float."""

    def init(x0, args):
        A, b = args
        return _S(x0, jnp.int32(0), jnp.linalg.norm(A @ x0 - b), jnp.int32(0))

    def step(s, args):
        A, b = args
        x = s.x - jnp.asarray(lr, s.x.dtype) * (A @ s.x - b)
        return _S(x, s.iter_num + 1, jnp.linalg.norm(A @ x - b), s.status), {"step": lr}

    def optimality(x, args):
        A, b = args
        return A @ x - b

    return jaxsolve.Solver(init, step, optimality=optimality)


def _module_solver(stepsize=0.3):
    return _guide_namespace()["GradientDescent"](_quad, stepsize)


def _problem(key, dtype):
    k1, k2 = jax.random.split(key)
    M = jax.random.normal(k1, (5, 5), dtype)
    A = M @ M.T / 5 + jnp.eye(5, dtype=dtype)
    b = jax.random.normal(k2, (5,), dtype) * (1 + 10 * jax.random.uniform(k2, (), dtype))
    return jnp.zeros(5, dtype), (A, b)


def _reference(args):
    A, b = args
    return np.linalg.solve(np.asarray(A), np.asarray(b))


def _gradient_case(make):
    def gradient(args):
        A, b = args

        def implicit(bb):
            return jnp.sum(jaxsolve.solve(make(), jnp.zeros(5), (A, bb), tol=1e-13).x ** 2)

        def unrolled(bb):
            sol = jaxsolve.solve(
                make(),
                jnp.zeros(5),
                (A, bb),
                tol=1e-13,
                max_steps=400,
                adjoint=jaxsolve.Unrolled(),
            )
            return jnp.sum(sol.x**2)

        return b, implicit, unrolled

    return gradient


def _bad_inputs(make):
    return (
        lambda: jaxsolve.solve(
            make(), jnp.zeros(5, jnp.int32), _problem(jax.random.key(0), jnp.float64)[1]
        ),
        lambda: jaxsolve.solve(make(), jnp.zeros(5), None, max_steps=0),
        lambda: jaxsolve.solve(object(), jnp.zeros(5)),
    )


CASES = [
    testing.SolverCase(
        name=name,
        make_solver=make,
        make_problem=_problem,
        reference=_reference,
        tol=1e-11,
        max_steps=3000,
        accuracy=1e-9,
        hyper_variants=({"stepsize": 0.3}, {"stepsize": 0.2}) if name == "module" else (),
        gradient=_gradient_case(make),
        nan_args=lambda a: (a[0], a[1].at[0].set(jnp.nan)),
        bad_inputs=_bad_inputs(make),
        measure=lambda sol, args: float(np.linalg.norm(args[0] @ sol.x - args[1])),
    )
    for name, make in (("module", _module_solver), ("plain", _plain_solver))
]


@pytest.mark.parametrize("check", sorted(testing.CHECKS))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_user_solvers_pass_the_contract(case, check):
    testing.CHECKS[check](case)


def test_plain_solver_closure_sweep_recompiles_but_module_sweep_does_not():
    x0, args = _problem(jax.random.key(0), jnp.float64)
    jaxsolve.solve(_module_solver(0.1), x0, args, max_steps=3)
    size = driver._solve_while._cache_size()
    for lr in (0.11, 0.2, 0.25):
        jaxsolve.solve(_module_solver(lr), x0, args, max_steps=3)
    assert driver._solve_while._cache_size() == size
    # a hyperparameter given as an array is traced too
    jaxsolve.solve(_module_solver(jnp.asarray(0.2)), x0, args, max_steps=3)


def test_solve_inside_a_jitted_training_step_matches_finite_differences():
    x0, (A, b) = _problem(jax.random.key(1), jnp.float64)
    Solver = _guide_namespace()["GradientDescent"]

    for adjoint in (jaxsolve.Implicit(), jaxsolve.Unrolled(), None):

        @jax.jit
        def loss(bb, adjoint=adjoint):
            x = jaxsolve.solve(
                Solver(_quad, 0.3), x0, (A, bb), tol=1e-13, max_steps=600, adjoint=adjoint
            ).x
            return jnp.sum(jnp.sin(x))

        g = jax.jit(jax.grad(loss))(b) if adjoint is not None else None
        d = jnp.linspace(-1.0, 1.0, 5)
        eps = 1e-6
        fd = (loss(b + eps * d) - loss(b - eps * d)) / (2 * eps)
        _, jvp = jax.jvp(loss, (b,), (d,))
        np.testing.assert_allclose(float(jvp), float(fd), rtol=1e-6)
        if g is not None:
            np.testing.assert_allclose(float(g @ d), float(fd), rtol=1e-6)


def test_gradient_reaches_a_module_field():
    """Implicit derivatives flow to the solver's own arrays (an objective held as data)."""

    class Shifted(eqx.Module):
        target: jax.Array

        def __call__(self, x, args):
            return 0.5 * jnp.sum((x - self.target) ** 2)

    class GD(jaxsolve.AbstractSolver):
        fun: eqx.Module  # not static: its arrays are traced, so they get derivatives
        stepsize: float = 0.5

        def init(self, x0, args):
            g = jax.grad(self.fun)(x0, args)
            return _S(x0, jnp.int32(0), jnp.linalg.norm(g), jnp.int32(0))

        def step(self, s, args):
            g = jax.grad(self.fun)(s.x, args)
            x = s.x - self.stepsize * g
            return _S(
                x, s.iter_num + 1, jnp.linalg.norm(jax.grad(self.fun)(x, args)), s.status
            ), None

        def optimality(self, x, args):
            return jax.grad(self.fun)(x, args)

    def loss(t):
        x = jaxsolve.solve(GD(Shifted(t)), jnp.zeros(3), None, tol=1e-12).x
        return jnp.sum(x * jnp.arange(1.0, 4.0))

    g = jax.grad(loss)(jnp.asarray([0.5, -1.0, 2.0]))  # x* = t: d loss / dt = (1, 2, 3)
    np.testing.assert_allclose(g, [1.0, 2.0, 3.0], rtol=1e-10)


def test_history_records_info_and_options_reach_step():
    x0, args = _problem(jax.random.key(0), jnp.float64)
    sol = jaxsolve.solve(_plain_solver(), x0, args, tol=1e-10, max_steps=500, history=True)
    k = int(sol.num_steps)
    assert sol.info["step"].shape == (500,)
    np.testing.assert_allclose(sol.info["step"][:k], 0.3)
    assert np.all(np.isnan(np.asarray(sol.info["step"][k:])))

    seen = []

    def step(s, args, options):
        seen.append(sorted(options))
        x = s.x - options["lr"] * (args[0] @ s.x - args[1])
        return s._replace(
            x=x, iter_num=s.iter_num + 1, error=jnp.linalg.norm(args[0] @ x - args[1])
        ), None

    base = _plain_solver()
    solver = jaxsolve.Solver(base.init, step)
    sol = jaxsolve.solve(solver, x0, args, tol=1e-10, options={"lr": jnp.asarray(0.3)})
    assert int(sol.status) == jaxsolve.Status.SUCCESS and seen[0] == ["lr"]
    with pytest.raises(TypeError, match="options"):
        jaxsolve.solve(solver, x0, args, options=[1])


def test_bad_states_are_named():
    def init(x0, args):
        return _S(x0, jnp.int32(0), float("inf"), jnp.int32(0))

    with pytest.raises(TypeError, match="State.error"):
        jaxsolve.solve(jaxsolve.Solver(init, lambda s, a: (s, None)), jnp.zeros(2))
    with pytest.raises(TypeError, match="init\\(x0, args\\) and step"):
        jaxsolve.solve(jaxsolve.Solver(init, None), jnp.zeros(2))
    with pytest.raises(ValueError, match="optimality"):
        jaxsolve.solve(
            jaxsolve.Solver(_plain_solver().init, _plain_solver().step),
            jnp.zeros(5),
            _problem(jax.random.key(0), jnp.float64)[1],
            adjoint=jaxsolve.Implicit(),
        )


def test_readme_quickstart_runs():
    """The README's quickstart is the first code a user runs: it must run as printed."""
    readme = (DOCS.parent / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[0]
    code = code.replace("(1000, 30)", "(64, 30)")  # the same program on a smaller batch
    ns: dict = {}
    exec(code, ns)
    assert ns["sols"].counts() == {"SUCCESS": 64}
    assert np.all(np.isfinite(np.asarray(ns["grad"])))


def test_docs_home_example_runs():
    code = _blocks("index.md")[0].replace("(1000, 30)", "(64, 30)")
    ns: dict = {}
    exec(code, ns)
    assert ns["sols"].counts() == {"SUCCESS": 64}


def test_check_args_hook_runs_before_tracing_and_skips_tracers():
    """``check_args`` sees the user's concrete data before compilation (so a value
    check can raise), tracers inside a user's jit (it must skip them), and a solver
    without the hook (a plain `Solver`) is not touched."""
    from ._toy import GD

    seen = []

    class Checked(GD):
        def check_args(self, x0, args):
            concrete = jaxsolve.core.validation.is_concrete(args)
            seen.append(concrete)
            if concrete and np.any(np.linalg.eigvalsh(np.asarray(args[0])) <= 0):
                raise ValueError("args[0] must be positive definite")

    A, b = jnp.eye(3) * 2.0, jnp.ones(3)
    sol = jaxsolve.solve(Checked(lr=0.3), jnp.zeros(3), (A, b), tol=1e-6)
    np.testing.assert_allclose(sol.x, 0.5, atol=1e-5)
    with pytest.raises(ValueError, match=r"args\[0\] must be positive definite"):
        jaxsolve.solve(Checked(lr=0.3), jnp.zeros(3), (-A, b))
    jax.jit(lambda a: jaxsolve.solve(Checked(lr=0.3), jnp.zeros(3), (a, b)).x)(-A)
    assert seen == [True, True, False]
    x0, args = _problem(jax.random.key(0), jnp.float64)
    np.testing.assert_allclose(
        jaxsolve.solve(_plain_solver(), x0, args, tol=1e-10).x, _reference(args), rtol=1e-8
    )
