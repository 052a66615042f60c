"""Contract cases of the decentralized solvers (6 agents, d = 4: compile time).

DS-ADMM's linearized (gradient) u-step is the same solver class with another static
option; it is exercised by the family tests (test_ds_admm, test_mesh).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import distributed as D
from jaxsolve.testing import SolverCase
from tests.distributed import _reference as ref

N, M, DIM = 6, 5, 4
LAM = 0.5
W = D.metropolis_hastings(D.erdos_renyi(jax.random.key(0), N, 0.5))


def _lasso_problem(key, dtype, homogeneous=False):
    k1, k2 = jax.random.split(key)
    A = jax.random.normal(k1, (N, M, DIM), dtype)
    b = jax.random.normal(k2, (N, M), dtype) + 0.5
    if homogeneous:
        A, b = jnp.broadcast_to(A[:1], A.shape), jnp.broadcast_to(b[:1], b.shape)
    return jnp.zeros((N, DIM), dtype), D.make_problem((A, b), W, LAM)


def _logistic_problem(key, dtype):
    k1, k2 = jax.random.split(key)
    A = jax.random.normal(k1, (N, M, DIM), dtype)
    b = jnp.sign(jax.random.normal(k2, (N, M), dtype) + A[..., 0])
    return jnp.zeros((N, DIM), dtype), D.make_problem((A, b), W, LAM)


def _lasso_ref(problem):
    A, b = problem.data
    return np.broadcast_to(ref.lasso(A, b, LAM), (N, DIM))


def _logistic_ref(problem):
    A, b = problem.data
    return np.broadcast_to(ref.logistic_l2(A, b, LAM), (N, DIM))


def _nan(problem):
    A, b = problem.data
    return problem._replace(data=(A, b.at[0, 0].set(jnp.nan)))


def _bad_inputs(factory, hp):
    A = jnp.ones((N, M, DIM))
    b = jnp.ones((N, M))
    return (
        lambda: factory(D.LeastSquares(), D.L1(), **{hp: 0.0}),
        lambda: factory(D.LeastSquares(), D.L1(), **{hp: -1.0}),
        lambda: factory("least squares"),
        lambda: D.make_problem((A[:5], b[:5]), W, LAM),
        lambda: D.make_problem((A, b), np.asarray(W) * 0.9, LAM),
        lambda: D.make_problem((A, b), np.kron(np.eye(2), np.full((3, 3), 1 / 3)), LAM),
    )


def _case(name, factory, hp, values, loss, reg, problem, reference, **kw):
    return SolverCase(
        name=f"distributed.{name}",
        make_solver=lambda **h: factory(loss, reg, **h),
        make_problem=problem,
        reference=reference,
        tol=1e-10,
        max_steps=4000,
        accuracy=1e-7,
        hyper_variants=tuple({hp: v} for v in values),
        nan_args=_nan,
        bad_inputs=_bad_inputs(factory, hp),
        float32_tol=1e-4,
        **kw,
    )


CASES = [
    _case(
        "ds_admm", D.ds_admm, "beta", (0.5, 1.0, 2.0), D.LeastSquares(), D.L1(),
        _lasso_problem, _lasso_ref,
    ),
    _case(
        "pg_extra", D.pg_extra, "stepsize", (0.05, 0.1), D.LeastSquares(), D.L1(),
        _lasso_problem, _lasso_ref,
    ),
    _case(
        "nids", D.nids, "stepsize", (0.05, 0.1), D.Logistic(), D.L2Squared(),
        _logistic_problem, _logistic_ref,
    ),
    _case(
        "decentralized_admm", D.decentralized_admm, "penalty", (0.5, 1.0), D.LeastSquares(),
        D.L1(), _lasso_problem, _lasso_ref,
    ),
    _case(
        "dgd", D.dgd, "stepsize", (0.05, 0.1), D.LeastSquares(), D.L1(),
        lambda key, dtype: _lasso_problem(key, dtype, homogeneous=True), _lasso_ref,
    ),
]  # fmt: skip
