"""Contract cases for jaxsolve.qp.flexqp (run by tests/test_contract.py)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.qp import QP, flexqp, problems, solve_qp
from jaxsolve.testing import SolverCase
from tests.qp._refs import osqp_ref

N, M = 4, 6
TOL = np.float64(1e-9)  # a NumPy scalar is not weakly typed: the same jit signature as
# solve_qp's jnp.asarray(tol, float64), so both entry points share one compilation


def _problem(key, dtype):
    qp = problems.random_qp(key, N, M, dtype=dtype)
    return jnp.zeros((N,), dtype), qp


def _reference(qp):
    return osqp_ref(qp)[0]


def _nan(qp):
    return qp._replace(P=qp.P.at[0, 0].set(jnp.nan))


def _gradient(qp):
    def loss_implicit(q):
        # flexqp()'s own defaults (polish_every=0, rho_every=3) and tol as a float64
        # scalar: the very configuration the other contract checks solve with, so the
        # finite-difference solves reuse their compilation
        sol = solve_qp(qp._replace(q=q), tol=TOL, max_steps=500, polish_every=0, rho_every=3)
        return jnp.sum(jnp.sin(sol.x))

    def loss_unrolled(q):
        # Deep-unfolding configuration: fixed rho, no in-loop polish, finalize's polish
        # without its fine stage. rho is a stop_gradient constant of every step anyway;
        # its refactorization branch, the in-loop polish and the fine stage made the
        # reverse pass through the 60 unrolled steps 3x slower to compile (22 s -> 7.6 s
        # on this machine) for the same derivative (equal to the implicit one to 1e-16).
        # The default-options unrolled derivative is checked in the slow
        # tests/qp/test_flexqp.py::test_gradients_all_leaves_implicit_unrolled_fd.
        qp_q = qp._replace(q=q)
        sol = solve_qp(
            qp_q, loop="fixed", max_steps=60, polish_every=0, polish_fine=0, adaptive_rho=False
        )
        return jnp.sum(jnp.sin(sol.x))

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
        tol=TOL,
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
