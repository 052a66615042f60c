"""Contract cases of ``first_order.projected_gradient`` (tiny problems: compile time)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.first_order import minimize_projected, projected_gradient
from jaxsolve.projections import l1_ball, simplex
from jaxsolve.testing import SolverCase
from peers.problems.first_order import least_squares, osqp_ls, osqp_ls_l1

M, N = 8, 5


def _problem(key, dtype):
    kA, kb = jax.random.split(key)
    A = jax.random.normal(kA, (M, N), dtype)
    b = jax.random.normal(kb, (M,), dtype) + A @ jnp.full((N,), 0.3, dtype)
    return jnp.zeros(N, dtype), (A, b)


def _simplex_ref(args):
    A, b = (np.asarray(v, np.float64) for v in args)
    C = np.vstack([np.eye(N), np.ones((1, N))])
    return osqp_ls(A, b, C, np.r_[np.zeros(N), 1.0], np.r_[np.full(N, np.inf), 1.0])


_C = jnp.linspace(1.0, 2.0, N)


def _simplex_gradient(args):
    A, b = args
    x0 = jnp.zeros(N, b.dtype)

    def implicit(theta):
        sol = minimize_projected(
            least_squares,
            simplex,
            x0,
            (A, theta),
            tol=1e-13,
            max_steps=3000,
            implicit_solve="dense",
        )
        return jnp.vdot(_C, sol.x)

    solver = projected_gradient(least_squares, simplex)

    def unrolled(theta):
        sol = jaxsolve.solve(solver, x0, (A, theta), loop="fixed", max_steps=300)
        return jnp.vdot(_C, sol.x)

    return b, jax.jit(implicit), jax.jit(unrolled)


def _nan_b(args):
    A, b = args
    return A, b.at[0].set(jnp.nan)


def _bad_inputs():
    x0, args = _problem(jax.random.key(0), jnp.float64)
    solver = projected_gradient(least_squares, simplex)
    return (
        lambda: projected_gradient(least_squares, simplex, stepsize=0.0),
        lambda: projected_gradient(least_squares, simplex, stepsize=-0.1),
        lambda: projected_gradient(least_squares, simplex, shrink=1.5),
        lambda: projected_gradient(least_squares, simplex, restart="sometimes"),
        lambda: projected_gradient("not a function", simplex),
        lambda: minimize_projected(least_squares, simplex, jnp.zeros(N + 1), args),
        lambda: minimize_projected(least_squares, simplex, jnp.zeros(N, jnp.int32), args),
        lambda: jaxsolve.solve(solver, jnp.zeros(N, jnp.int32), args),
    )


# l1 ball with the radius in args (split_args): the set itself is problem data.
def _problem_l1(key, dtype):
    x0, args = _problem(key, dtype)
    return x0, (args, jnp.asarray(0.8, dtype))


def _l1_ref(args):
    (A, b), r = args
    return osqp_ls_l1(np.asarray(A, np.float64), np.asarray(b, np.float64), float(r))


def _l1_gradient(args):
    fargs, r = args
    x0 = jnp.zeros(N, r.dtype)
    opts = dict(split_args=True, stepsize=0.05, restart="function")

    def implicit(theta):
        sol = minimize_projected(
            least_squares,
            l1_ball,
            x0,
            (fargs, theta),
            tol=1e-13,
            max_steps=5000,
            implicit_solve="dense",
            **opts,
        )
        return jnp.vdot(_C, sol.x)

    solver = projected_gradient(least_squares, l1_ball, **opts)

    def unrolled(theta):
        sol = jaxsolve.solve(solver, x0, (fargs, theta), loop="fixed", max_steps=600)
        return jnp.vdot(_C, sol.x)

    return r, jax.jit(implicit), jax.jit(unrolled)


def _grad_map(projection, split):
    """``L ||x - P(x - grad f(x) / L)||`` recomputed from the returned point and its L."""

    def measure(sol, args):
        fargs, pargs = (args[0], args[1]) if split else (args, None)
        x = np.asarray(sol.x)
        L = float(sol.state.lipschitz)
        g = np.asarray(jax.grad(least_squares)(sol.x, fargs))
        z = jnp.asarray(x - g / L)
        p = np.asarray(projection(z, pargs) if split else projection(z))
        return L * np.linalg.norm(x - p)

    return measure


CASES = [
    SolverCase(
        name="first_order.projected_gradient",
        make_solver=lambda **hp: projected_gradient(least_squares, simplex, **hp),
        make_problem=_problem,
        reference=_simplex_ref,
        tol=1e-10,
        max_steps=3000,
        accuracy=1e-8,
        hyper_variants=({"shrink": 0.9, "increase": 2.0}, {"shrink": 0.7, "increase": 3.0}),
        gradient=_simplex_gradient,
        grad_rtol=1e-5,
        nan_args=_nan_b,
        bad_inputs=_bad_inputs(),
        measure=_grad_map(simplex, False),
    ),
    SolverCase(
        name="first_order.projected_gradient[l1_ball, fixed step, split args]",
        make_solver=lambda **hp: projected_gradient(
            least_squares, l1_ball, split_args=True, restart="function", **{"stepsize": 0.05, **hp}
        ),
        make_problem=_problem_l1,
        reference=_l1_ref,
        tol=1e-10,
        max_steps=5000,
        accuracy=1e-8,
        hyper_variants=({"stepsize": 0.05}, {"stepsize": 0.02}),
        gradient=_l1_gradient,
        grad_rtol=1e-5,
        nan_args=lambda args: ((args[0][0], args[0][1].at[1].set(jnp.nan)), args[1]),
        measure=_grad_map(l1_ball, True),
    ),
]
