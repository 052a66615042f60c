"""Contract cases of the submodular relaxation solvers (AAPGA, PGA) on small SCMs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.submodular import SCM, aapga, cardinality, knapsack, pga
from jaxsolve.testing import SolverCase
from tests.submodular._problems import relaxation_reference

M_ROWS, N, K = 14, 8, 3


def _problem(key, dtype):
    # m > n and a dense positive M: F is strictly concave, the maximizer is unique
    k1, k2 = jax.random.split(key)
    M = jax.random.uniform(k1, (M_ROWS, N), dtype, 0.2, 2.0)
    w = jax.random.uniform(k2, (M_ROWS,), dtype, 0.5, 1.5)
    f = SCM(M, w, jnp.ones(M_ROWS, dtype), jaxsolve.submodular.log1p)
    c = cardinality(K)
    return c.start(N, dtype), (f, c)


def _ref(args):
    f, c = args
    A = np.ones((1, N))
    return relaxation_reference(f.M, f.weights, "log1p", A, np.array([float(c.k)]))


def _knap_problem(key, dtype):
    x0, (f, _) = _problem(key, dtype)
    costs = jnp.linspace(1.0, 2.5, N, dtype=dtype)
    c = knapsack(costs, 4.0)
    return c.start(N, dtype), (f, c)


def _knap_ref(args):
    f, c = args
    A = np.asarray(c.costs, np.float64)[None, :]
    return relaxation_reference(f.M, f.weights, "log1p", A, np.array([float(c.budget)]))


def _nan_M(args):
    f, c = args
    return f.__class__(f.M.at[0, 0].set(jnp.nan), f.weights, f.cap, f.phi), c


def _bad_inputs():
    _, args = _problem(jax.random.key(0), jnp.float64)
    return (
        lambda: aapga(delta=-1.0),
        lambda: aapga(shrink=1.5),
        lambda: aapga(increase=0.5),
        lambda: aapga(check_every=0),
        lambda: pga(lipschitz=0.0),
        lambda: jaxsolve.solve(aapga(), jnp.zeros(N + 1), args),
    )


CASES = [
    SolverCase(
        name="submodular.aapga",
        make_solver=lambda **hp: aapga(**hp),
        make_problem=_problem,
        reference=_ref,
        # a relative gap of 1e-9 is well above rounding: batched and single solves
        # (whose reductions round differently in the last bit) stop at the same step
        tol=1e-9,
        max_steps=3000,
        accuracy=2e-6,
        hyper_variants=({"delta": 1e-3, "shrink": 0.9}, {"delta": 1e-4, "shrink": 0.8}),
        nan_args=_nan_M,
        bad_inputs=_bad_inputs(),
        float32_tol=1e-4,
        vmap_rtol=1e-9,
    ),
    SolverCase(
        name="submodular.pga[knapsack]",
        make_solver=lambda **hp: pga(**hp),
        make_problem=_knap_problem,
        reference=_knap_ref,
        tol=1e-11,
        max_steps=5000,
        accuracy=1e-6,
        hyper_variants=({"shrink": 0.9}, {"shrink": 0.7, "increase": 3.0}),
        nan_args=_nan_M,
        float32_tol=1e-4,
    ),
]
