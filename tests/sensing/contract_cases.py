"""Contract cases for the sensing solvers (weight_normalized, burer_monteiro) on tiny problems."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.sensing import (
    burer_monteiro,
    initial_point,
    make_problem,
    small_initial_point,
    weight_normalized,
)
from jaxsolve.testing import SolverCase

M, RA = 5, 2


def _truth(args):
    # A is recovered exactly; its Gram-form measurements determine it (gram is invertible on
    # symmetric matrices), so the reference solves the normal equations directly.
    g = np.asarray(args.gram, np.float64)
    b = np.asarray(args.adj_y, np.float64).reshape(-1)
    z = np.linalg.lstsq(g, b, rcond=None)[0].reshape(M, M)
    return 0.5 * (z + z.T)


def _wn_problem(key, dtype):
    k1, k2 = jax.random.split(key)
    meas, _ = make_problem(k1, M, RA, 400, 3.0, chunk=100, form="gram", dtype=dtype)
    return initial_point(k2, M, M, dtype), meas


def _bm_problem(key, dtype):
    k1, k2 = jax.random.split(key)
    meas, _ = make_problem(k1, M, RA, 400, 3.0, chunk=100, form="gram", dtype=dtype)
    return small_initial_point(k2, M, RA, scale=0.1, dtype=dtype), meas


def _solve_bad(solver, x0):
    import jaxsolve

    meas, _ = make_problem(jax.random.key(0), M, RA, 400, 3.0, chunk=100, form="gram")
    jaxsolve.solve(solver, x0, meas)  # x0 sized for M + 1: must raise before running


def _nan(meas):
    return meas._replace(adj_y=meas.adj_y.at[0, 0].set(jnp.nan))


CASES = [
    SolverCase(
        name="sensing.weight_normalized",
        make_solver=lambda **h: weight_normalized(**({"direction_step": 1.0} | h)),
        make_problem=_wn_problem,
        reference=_truth,
        compare=lambda x: x[0] @ x[1] @ x[0].T,
        tol=1e-10,
        max_steps=400,
        accuracy=1e-8,
        hyper_variants=({"direction_step": 1.0}, {"direction_step": 0.8}),
        nan_args=_nan,
        bad_inputs=(
            lambda: weight_normalized(direction_step=0.0),
            lambda: _solve_bad(weight_normalized(), initial_point(jax.random.key(0), M + 1, M)),
        ),
    ),
    SolverCase(
        name="sensing.burer_monteiro",
        make_solver=lambda **h: burer_monteiro(**({"stepsize": 0.5} | h)),
        make_problem=_bm_problem,
        reference=_truth,
        compare=lambda y: y @ y.T,
        tol=1e-10,
        max_steps=3000,
        accuracy=1e-8,
        hyper_variants=({"stepsize": 0.5}, {"stepsize": 0.4}),
        nan_args=_nan,
        bad_inputs=(
            lambda: burer_monteiro(stepsize=-1.0),
            lambda: _solve_bad(burer_monteiro(), jnp.ones((M + 1, RA))),
        ),
    ),
]
