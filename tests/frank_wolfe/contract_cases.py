"""Contract cases of ``frank_wolfe.conditional_gradient.frank_wolfe`` and
``frank_wolfe.optimistic.optimistic_frank_wolfe`` (tiny problems: compile time)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import peers.osqp
from jaxsolve.frank_wolfe import frank_wolfe, lmo, optimistic_frank_wolfe
from jaxsolve.testing import SolverCase

N = 6
SIMPLEX = lmo.probability_simplex()


def quad(x, args):
    Q, c = args
    return 0.5 * x @ (Q @ x) + c @ x


def _qp_problem(key, dtype):
    kB, kc = jax.random.split(key)
    B = jax.random.normal(kB, (10, N), dtype)
    Q = B.T @ B / 10 + 0.5 * jnp.eye(N, dtype=dtype)
    c = jax.random.normal(kc, (N,), dtype)
    return jnp.full((N,), 1.0 / N, dtype), (Q, c)


def _qp_reference(args):
    Q, c = (np.asarray(v, np.float64) for v in args)
    A = np.vstack([np.ones((1, N)), np.eye(N)])
    return peers.osqp.solve(
        Q, c, A, np.r_[1.0, np.zeros(N)], np.r_[1.0, np.full(N, np.inf)], eps_abs=1e-13,
        eps_rel=1e-13, polishing=True, max_iter=100000,
    ).x  # fmt: skip


def _nan_q(args):
    Q, c = args
    return Q.at[0, 0].set(jnp.nan), c


def _make_fw(lipschitz=8.0):
    return frank_wolfe(quad, SIMPLEX, step="short", variant="pairwise", lipschitz=lipschitz)


def dist(x, y):
    return 0.5 * jnp.sum((x - y) ** 2)


def _vertex_problem(key, dtype):
    """The projection of y onto the simplex is the vertex e_0 (y_0 - 1 exceeds every y_i)."""
    y = 0.3 * jax.random.normal(key, (N,), dtype)
    y = y.at[0].add(3.0)
    return jnp.full((N,), 1.0 / N, dtype), y


def _vertex_reference(y):
    return np.eye(N)[0]


CASES = [
    SolverCase(
        name="frank_wolfe.frank_wolfe[pairwise,short]",
        make_solver=_make_fw,
        make_problem=_qp_problem,
        reference=_qp_reference,
        tol=1e-14,
        max_steps=2000,
        accuracy=1e-6,
        hyper_variants=({"lipschitz": 8.0}, {"lipschitz": 12.0}),
        nan_args=_nan_q,
        bad_inputs=(
            lambda: frank_wolfe(quad, SIMPLEX, variant="bogus"),
            lambda: frank_wolfe(quad, SIMPLEX, step="short"),
            lambda: frank_wolfe(quad, SIMPLEX, step="short", lipschitz=-2.0),
        ),
    ),
    SolverCase(
        name="frank_wolfe.optimistic_frank_wolfe",
        make_solver=lambda: optimistic_frank_wolfe(dist, SIMPLEX),
        make_problem=_vertex_problem,
        reference=_vertex_reference,
        tol=1e-7,
        max_steps=20000,
        accuracy=1e-6,
        nan_args=lambda y: y.at[1].set(jnp.nan),
        float32_tol=1e-4,
        bad_inputs=(
            lambda: optimistic_frank_wolfe(dist, "simplex"),
            lambda: optimistic_frank_wolfe(None, SIMPLEX),
        ),
    ),
]
