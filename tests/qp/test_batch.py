"""Lockstep batches (jaxsolve.qp.lockstep, ``solve_qp(batch="lockstep")``, the CPU default):
per-lane answers and statuses against OSQP and HiGHS (a batch hides no failure), warm
starts and implicit gradients of a whole batch.

One batch of 40 lanes: padded to two chunks of 32, several lockstep rounds, and the
last 8 lanes finished one at a time, so every part of the lockstep driver runs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.core import Status
from jaxsolve.qp import QP, WarmStart, problems, solve_qp
from tests.qp._refs import min_l1_violation, osqp_ref, rel

N, M = 6, 10
N_FEAS, N_INF = 34, 6


def _lane(qp, i):
    return QP(*(np.asarray(v[i], np.float64) for v in qp))


@pytest.fixture(scope="module")
def mixed():
    """34 random feasible QPs and 6 infeasible ones in one batch, solved in lockstep."""
    feas = [problems.random_qp(jax.random.key(s), N, M) for s in range(N_FEAS)]
    # infeasible_qp appends k = 2 conflicting rows: M - 2 base rows give the same shape
    inf = [problems.infeasible_qp(jax.random.key(50 + s), N, M - 2, k=2) for s in range(N_INF)]
    qp = QP(*(jnp.stack(v) for v in zip(*(feas + inf), strict=True)))
    # The cold start written as a WarmStart (x = y = 0, z = clip(0, l, u), the default
    # rho, the smallest elastic weight: exactly what init does from x0 = 0), so that the
    # warm-start test below reuses this compilation (compile time is most of the cost).
    B = qp.q.shape[0]
    f64 = jnp.float64
    cold = WarmStart(
        jnp.zeros((B, N), f64),
        jnp.zeros((B, M), f64),
        jnp.clip(jnp.zeros((B, M), f64), qp.l, qp.u),
        jnp.full((B,), 0.1, f64),
        jnp.zeros((B,), f64),
    )
    sol = solve_qp(qp, cold, tol=1e-9, max_steps=3000, batch="lockstep")
    return qp, sol, cold


@pytest.mark.slow  # the mixed batch (feasible, infeasible) against OSQP and HiGHS (18 s set-up)
def test_lockstep_statuses_and_answers_against_osqp_and_highs(mixed):
    qp, sol, _ = mixed
    status = np.asarray(sol.status)
    assert sol.x.shape == (N_FEAS + N_INF, N)
    assert sol.counts() == {"SUCCESS": N_FEAS, "INFEASIBLE": N_INF}
    for i in range(N_FEAS):
        assert status[i] == Status.SUCCESS
        x_ref, _, _ = osqp_ref(_lane(qp, i))
        assert rel(sol.x[i], x_ref) <= 1e-6, i
    for i in range(N_FEAS, N_FEAS + N_INF):
        assert status[i] == Status.INFEASIBLE
        value, v_lp = min_l1_violation(_lane(qp, i))
        viol = np.asarray(sol.state.viol[i])
        assert abs(viol.sum() - value) <= 1e-6 * value
        np.testing.assert_array_equal(np.nonzero(viol > 1e-7)[0], np.nonzero(v_lp > 1e-7)[0])
    assert np.all(np.isfinite(np.asarray(sol.x)))


@pytest.mark.slow  # shares the mixed batch
def test_lockstep_warm_start(mixed):
    """Warm-started from the batch's solution after a small change of q: the same
    statuses, the answers of OSQP, at most half the ADMM iterations."""
    qp, cold, _ = mixed
    moved = qp._replace(q=qp.q * 1.001)
    warm = solve_qp(moved, tol=1e-9, max_steps=3000, warm_start=cold, batch="lockstep")
    np.testing.assert_array_equal(np.asarray(warm.status), np.asarray(cold.status))
    for i in range(0, N_FEAS, 7):
        assert rel(warm.x[i], osqp_ref(_lane(moved, i))[0]) <= 1e-6
    assert int(jnp.sum(warm.state.admm_iters)) <= 0.5 * int(jnp.sum(cold.state.admm_iters))


@pytest.mark.slow  # shares the mixed batch (8 s)
def test_lockstep_implicit_gradient(mixed):
    """jax.grad through a lockstep batch (implicit KKT derivatives, lane by lane) against
    central differences of the batch along a random direction of q."""
    qp, _, x0 = mixed
    d = jax.random.normal(jax.random.key(7), qp.q.shape)

    def loss(q):
        # x0: the fixture's cold start, so the two differences reuse its compilation
        x = solve_qp(qp._replace(q=q), x0, tol=1e-9, max_steps=3000, batch="lockstep").x
        return jnp.sum(jnp.sin(x[:N_FEAS]))

    g = jax.grad(loss)(qp.q)
    assert np.all(np.isfinite(np.asarray(g)))
    eps = 1e-6
    fd = (float(loss(qp.q + eps * d)) - float(loss(qp.q - eps * d))) / (2 * eps)
    assert abs(float(jnp.sum(g * d)) - fd) <= 1e-5 * max(1.0, abs(fd)), (float(jnp.sum(g * d)), fd)


def test_batch_option_validation():
    qp = problems.random_qp(jax.random.key(0), 3, 4)
    with pytest.raises(ValueError, match="batch must be"):
        solve_qp(qp, batch="parallel")


@pytest.mark.parametrize("n", [37, 70])
def test_inverses_by_halves(n):
    """The batched KKT inverses above order 32 (linalg.spd_inverse, tri_inverse: by
    halves, recursively, uneven halves at odd orders) equal the direct ones; a matrix that
    is not positive definite gives NaN, as the unsplit Cholesky did (the refactorization
    drops a non-finite factor)."""
    from jaxsolve.qp.linalg import spd_inverse, tri_inverse

    rng = np.random.default_rng(n)
    M = rng.standard_normal((n, n))
    K = M @ M.T + 1e-2 * np.eye(n)  # condition number ~1e5
    K_inv = np.linalg.inv(K)
    X = np.asarray(spd_inverse(jnp.asarray(K)))
    assert np.linalg.norm(X - K_inv) <= 1e-9 * np.linalg.norm(K_inv)
    np.testing.assert_array_equal(X, X.T)
    L = np.linalg.cholesky(K)
    Li = np.asarray(tri_inverse(jnp.asarray(L)))
    assert np.linalg.norm(Li - np.linalg.inv(L)) <= 1e-9 * np.linalg.norm(Li)
    assert np.all(np.triu(Li, 1) == 0)
    # float32 (the batched float32 path keeps L^-1)
    L32 = np.linalg.cholesky(M @ M.T + n * np.eye(n)).astype(np.float32)
    Li32 = np.asarray(tri_inverse(jnp.asarray(L32)))
    assert Li32.dtype == np.float32
    assert np.linalg.norm(Li32 @ L32 - np.eye(n)) <= 1e-5
    # indefinite: the trailing Schur complement (not the leading block) fails
    bad = K.copy()
    bad[-1, -1] = -1.0
    assert np.all(np.isnan(np.asarray(spd_inverse(jnp.asarray(bad)))[-1]))


@pytest.mark.slow  # batches above the split order compile the block inverses (14 s)
def test_lockstep_batch_above_split_order():
    """A batch with n = 40 > 32 runs its KKT inverse by halves: same answers as OSQP."""
    n, m = 40, 60
    qps = [problems.random_qp(jax.random.key(100 + s), n, m) for s in range(4)]
    qp = QP(*(jnp.stack(v) for v in zip(*qps, strict=True)))
    sol = solve_qp(qp, tol=1e-9, max_steps=3000, batch="lockstep")
    assert sol.counts() == {"SUCCESS": 4}
    for i in range(4):
        x_ref, _, _ = osqp_ref(_lane(qp, i))
        assert rel(sol.x[i], x_ref) <= 1e-6, i
