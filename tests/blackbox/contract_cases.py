"""Contract case of ``blackbox.cma_es_solver`` (a shifted sphere: the answer is the shift)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.blackbox import cma_es_solver
from jaxsolve.testing import SolverCase

N = 4


def _fun(x, c):
    return jnp.sum((x - c) ** 2 * jnp.arange(1.0, N + 1))


def _problem(key, dtype):
    c = jax.random.uniform(key, (N,), dtype, -1.0, 1.0) * (1 + 3 * jax.random.uniform(key, ()))
    return jnp.zeros(N, dtype), c


CASES = [
    SolverCase(
        name="blackbox.cma_es_solver",
        make_solver=lambda **hp: cma_es_solver(_fun, N, **{"sigma0": 0.5, **hp}),
        make_problem=_problem,
        reference=lambda c: np.asarray(c),
        tol=1e-9,
        max_steps=3000,
        accuracy=1e-7,
        hyper_variants=({"sigma0": 0.5}, {"sigma0": 0.3}),
        nan_args=lambda c: c.at[0].set(jnp.nan),
        bad_inputs=(
            lambda: cma_es_solver(_fun, 0),
            lambda: cma_es_solver("not callable", N),
            lambda: jaxsolve.solve(cma_es_solver(_fun, N), jnp.zeros(N, jnp.int32), jnp.ones(N)),
        ),
        measure=None,
        float32_tol=1e-3,
    )
]
