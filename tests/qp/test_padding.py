"""`QP.padded` and `bucket`: QPs of many sizes share a few compiled programs, same answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.core import Status
from jaxsolve.qp import QP, problems, solve_qp
from jaxsolve.qp.problem import bucket


def test_bucket_sizes():
    sizes = [bucket(k) for k in range(1, 5001)]
    assert all(b >= k for k, b in zip(range(1, 5001), sizes, strict=True))
    assert all(b < 1.25 * k for k, b in zip(range(9, 5001), sizes[8:], strict=True))
    assert sizes == sorted(sizes)  # monotone: a larger problem never gets a smaller bucket
    assert len(set(sizes[:1000])) == 36
    assert [bucket(k) for k in (1, 8, 9, 11, 13, 17, 100, 1000)] == [
        1,
        8,
        10,
        12,
        14,
        20,
        112,
        1024,
    ]


def test_padded_solution_equals_original():
    """Same x and y in the first n variables and m rows (float64, tol 1e-9); the padded
    variables solve to 0 and the padded rows carry no multiplier. (The padded solve has
    test_flexqp's single-solve shape, n = 8, m = 16, so the suite compiles it once.)"""
    qp = problems.random_qp(jax.random.key(3), 7, 13, dtype=jnp.float64)
    big = qp.padded()
    assert (big.n, big.m) == (7, 14)
    big = qp.padded(8, 16)
    a = solve_qp(qp, tol=1e-9, max_steps=3000)
    b = solve_qp(big, tol=1e-9, max_steps=3000)
    assert int(a.status) == int(b.status) == Status.SUCCESS
    np.testing.assert_allclose(b.x[:7], a.x, atol=1e-7)
    np.testing.assert_allclose(b.state.y[:13], a.state.y, atol=1e-6)
    assert float(jnp.max(jnp.abs(b.x[7:]))) <= 1e-12
    assert float(jnp.max(jnp.abs(b.state.y[13:]))) <= 1e-12
    # the padded point meets the original QP's constraints and stationarity
    x, y = b.x[:7], b.state.y[:13]
    assert float(jnp.max(qp.violation(x))) <= 1e-8
    assert float(jnp.max(jnp.abs(qp.P @ x + qp.q + qp.A.T @ y))) <= 1e-7


def test_two_sizes_one_program():
    """QPs of sizes (13, 27) and (14, 26) pad to one shape, so a jitted function of the
    QP (``solve_qp`` included) compiles once for both."""
    f = jax.jit(lambda qp: qp.objective(qp.q) + jnp.sum(qp.violation(qp.q)))
    one = problems.random_qp(jax.random.key(0), 13, 27, dtype=jnp.float64)
    two = problems.random_qp(jax.random.key(1), 14, 26, dtype=jnp.float64)
    for qp in (one, two):
        f(qp.padded())
    assert f._cache_size() == 1


def _same_values(qp, big, x):
    """The padded QP at x padded with zeros: same objective, same row violations, free
    padded rows."""
    n, m = qp.q.shape[-1], qp.l.shape[-1]
    xb = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, big.q.shape[-1] - n)])
    np.testing.assert_allclose(jax.vmap(QP.objective)(big, xb), jax.vmap(QP.objective)(qp, x))
    vb = jax.vmap(QP.violation)(big, xb)
    np.testing.assert_allclose(vb[:, :m], jax.vmap(QP.violation)(qp, x))
    assert float(jnp.max(vb[:, m:])) == 0.0


def test_padded_batch_and_unconstrained():
    """A batch pads along its last axes; ``QP(P, q)`` pads its one free row; the added
    variables are decoupled (``P_ii = 1``, zero cost and columns)."""
    qps = jax.vmap(lambda k: problems.random_qp(k, 5, 9, dtype=jnp.float64))(
        jax.random.split(jax.random.key(0), 3)
    )
    big = qps.padded(8, 12)
    assert big.P.shape == (3, 8, 8) and big.A.shape == (3, 12, 8) and big.l.shape == (3, 12)
    np.testing.assert_array_equal(big.P[:, 5:, 5:], jnp.broadcast_to(jnp.eye(3), (3, 3, 3)))
    assert float(jnp.max(jnp.abs(big.P[:, :5, 5:]))) == 0.0
    assert float(jnp.max(jnp.abs(big.A[:, :, 5:]))) == 0.0
    assert bool(jnp.all(big.l[:, 9:] == -jnp.inf)) and bool(jnp.all(big.u[:, 9:] == jnp.inf))
    _same_values(qps, big, jax.random.normal(jax.random.key(1), (3, 5)))
    free = QP(jnp.array([[2.0, 0.5], [0.5, 1.0]]), jnp.array([1.0, -1.0])).padded(3)
    assert free.A.shape == (1, 3) and float(free.l[0]) == -np.inf and float(free.u[0]) == np.inf


def test_padded_refuses_to_shrink():
    qp = problems.random_qp(jax.random.key(0), 6, 10, dtype=jnp.float64)
    with pytest.raises(ValueError, match="cannot shrink"):
        qp.padded(5, 10)
    with pytest.raises(ValueError, match="cannot shrink"):
        qp.padded(6, 9)
