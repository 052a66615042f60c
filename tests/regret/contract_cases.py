"""Contract case of ``regret.regret_matching.regret_matching`` (alternating RM+)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.regret import regret_matching
from jaxsolve.testing import SolverCase


def dist(x, y):
    return 0.5 * sum(jnp.sum((x[k] - y[k]) ** 2) for k in x)


def _problem(key, dtype):
    ka, kb = jax.random.split(key)
    y = {"p": jax.random.normal(ka, (2, 4), dtype), "q": jax.random.normal(kb, (3,), dtype)}
    x0 = {"p": jnp.full((2, 4), 0.25, dtype), "q": jnp.full((3,), 1 / 3, dtype)}
    return x0, y


def _proj_simplex(v):
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u * np.arange(1, v.size + 1) > css - 1)[0][-1]
    return np.maximum(v - (css[k] - 1) / (k + 1), 0)


def _reference(y):
    """Blockwise Euclidean projection (sort-based, NumPy): the minimizer of ||x - y||^2."""
    p = np.stack([_proj_simplex(row) for row in np.asarray(y["p"], np.float64)])
    return {"p": p, "q": _proj_simplex(np.asarray(y["q"], np.float64))}


CASES = [
    SolverCase(
        name="regret.regret_matching[rm+,alternating]",
        # its eager step compiles every inner loop on each call (10-34 s)
        slow_checks=("jit_equals_eager",),
        make_solver=lambda: regret_matching(dist, variant="rm+", alternating=True),
        make_problem=_problem,
        reference=_reference,
        tol=1e-12,
        max_steps=20000,
        accuracy=1e-6,
        nan_args=lambda y: {"p": y["p"].at[0, 0].set(jnp.nan), "q": y["q"]},
        bad_inputs=(
            lambda: regret_matching(dist, variant="cfr+"),
            lambda: regret_matching(dist, alternating="yes"),
        ),
    ),
]
