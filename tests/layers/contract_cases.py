"""Contract cases for ``jaxsolve.layers.pinet_projection`` (layers.pinet)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import solve
from jaxsolve.core import custom_fixed_point
from jaxsolve.layers import Polytope, pinet_projection, project, projection_args
from jaxsolve.layers.pinet import ProjectionArgs, dr_map
from jaxsolve.testing import SolverCase
from tests.layers._ref import exact_projection

_N, _P, _M = 6, 2, 3
_rng = np.random.default_rng(11)
_A = _rng.standard_normal((_P, _N))
_C = _rng.standard_normal((_M, _N))
_POLY = Polytope(
    A=jnp.asarray(_A), b=jnp.zeros(_P), C=jnp.asarray(_C), u=jnp.ones(_M), lb=-jnp.ones(_N)
).factorize()


def _make_problem(key, dtype):
    k1, k2 = jax.random.split(key)
    xf = 0.3 * jax.random.normal(k1, (_N,), jnp.float64)
    b = jnp.asarray(_A) @ xf
    y = xf + 2.0 * jax.random.normal(k2, (_N,), jnp.float64)
    args = projection_args(y.astype(dtype), _POLY.update(b=b.astype(dtype)))
    return y.astype(dtype), args


def _reference(args: ProjectionArgs):
    n = _N
    lo, hi = np.asarray(args.lo), np.asarray(args.hi)
    return exact_projection(args.y, A=_A, b=args.b, C=_C, l=lo[n:], u=hi[n:], lb=lo[:n], ub=hi[:n])


def _gradient(args: ProjectionArgs):
    f = args.factors
    w = jnp.linspace(-1.0, 1.0, _N)
    d = f.d_c
    solver = pinet_projection()
    sigma = 0.3 / jnp.mean(d[:_N] ** 2)

    def T(s, y, b):
        return dr_map(s, f.offset(b), y, args.lo / d, args.hi / d, f, sigma, 1.7)[3]

    @custom_fixed_point(T)
    def fixed_point(s0, y, b):
        sol = solve(solver, y, args._replace(y=y, b=b), tol=1e-13, max_steps=20000)
        return sol.state.s

    def loss_implicit(theta):
        y, b = theta
        s = fixed_point(jnp.zeros(_N + _M), y, b)
        z = f.proj_null(s) + f.offset(b)
        return jnp.vdot(w, d[:_N] * z[:_N])

    def loss_unrolled(theta):
        y, b = theta
        x = project(y, _POLY.update(b=b), max_steps=600, backward="unroll").x
        return jnp.vdot(w, x)

    return (args.y, args.b), loss_implicit, loss_unrolled


CASES = [
    SolverCase(
        name="layers.pinet_projection",
        make_solver=pinet_projection,
        make_problem=_make_problem,
        reference=_reference,
        tol=1e-10,
        max_steps=5000,
        accuracy=1e-6,
        hyper_variants=(
            {"sigma": 0.2},
            {"sigma": 0.5, "omega": 1.5},
            {"sigma": 0.3, "infeasible_tol": 1e-5},
        ),
        gradient=_gradient,
        grad_rtol=1e-5,
        nan_args=lambda a: a._replace(y=a.y.at[0].set(jnp.nan)),
        bad_inputs=(
            lambda: pinet_projection(omega=2.0),
            lambda: pinet_projection(sigma=-1.0),
            lambda: pinet_projection(start="middle"),
            lambda: Polytope(A=jnp.ones((2, 3)), b=jnp.ones(3)),
            lambda: projection_args(jnp.zeros(_N + 1), _POLY),
        ),
        float32_tol=1e-5,
    )
]
