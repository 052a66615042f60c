"""Contract cases for jaxsolve.qp.flexqp (run by tests/test_contract.py)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.qp import QP, flexqp, problems, solve_qp
from jaxsolve.testing import SolverCase
from tests.qp._refs import osqp_ref

N, M = 4, 6


def _problem(key, dtype):
    qp = problems.random_qp(key, N, M, dtype=dtype)
    return jnp.zeros((N,), dtype), qp


def _reference(qp):
    return osqp_ref(qp)[0]


def _nan(qp):
    return qp._replace(P=qp.P.at[0, 0].set(jnp.nan))


def _gradient(qp):
    def loss_implicit(q):
        return jnp.sum(jnp.sin(solve_qp(qp._replace(q=q)).x))

    def loss_unrolled(q):
        # polish_every=0: no in-loop polish inside the differentiated scan (its branch
        # made the reverse pass of the 60 unrolled steps ~30% slower to compile); the
        # final polish in finalize is still differentiated through
        qp_q = qp._replace(q=q)
        return jnp.sum(jnp.sin(solve_qp(qp_q, loop="fixed", max_steps=60, polish_every=0).x))

    return qp.q, loss_implicit, loss_unrolled


def _qp64():
    return problems.random_qp(jax.random.key(0), N, M)


_BAD = (
    lambda: solve_qp(_qp64()._replace(P=_qp64().P.at[0, 1].add(1.0))),  # non-symmetric P
    lambda: solve_qp(_qp64()._replace(q=jnp.zeros(N + 1))),  # shape mismatch
    lambda: solve_qp(_qp64()._replace(l=_qp64().u + 1.0)),  # l > u
    lambda: solve_qp(QP(*(np.asarray(v).astype(np.int32) for v in _qp64()))),  # integer data
    lambda: solve_qp(_qp64(), x0=jnp.zeros(N + 2)),  # x0 shape
    lambda: flexqp(alpha=2.5),
    lambda: flexqp(rho=-1.0),
)

CASES = [
    SolverCase(
        name="qp.flexqp",
        make_solver=flexqp,
        make_problem=_problem,
        reference=_reference,
        tol=1e-9,
        max_steps=500,
        accuracy=1e-6,
        hyper_variants=({"rho": 0.1, "alpha": 1.6}, {"rho": 0.3, "alpha": 1.4, "mu": 1e2}),
        gradient=_gradient,
        grad_rtol=1e-5,
        nan_args=_nan,
        bad_inputs=_BAD,
        float32_tol=1e-4,
    )
]
