"""Multi-device: a batch sharded over 8 fake CPU devices equals the one-device answer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.core.batch import batch_mesh, solve_batch

from ._toy import gd


def _batch(B, n=6, seed=0):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(B, n, n))
    A = np.einsum("bij,bkj->bik", M, M) / n + np.eye(n)
    b = rng.normal(size=(B, n)) * rng.uniform(0.01, 100, size=(B, 1))
    return jnp.asarray(A), jnp.asarray(b)


def test_eight_fake_devices_present():
    assert jax.device_count() == 8, "tests/conftest.py must set 8 fake CPU devices before jax loads"


@pytest.mark.parametrize("B", [16, 13])  # 13: padded to a multiple of 8
def test_sharded_batch_equals_single_device(B):
    A, b = _batch(B)
    solver = gd(0.3)
    x0 = jnp.zeros((B, 6))
    one = solve_batch(solver, x0, (A, b), tol=1e-10, max_steps=3000)
    mesh = batch_mesh()
    many = solve_batch(solver, x0, (A, b), tol=1e-10, max_steps=3000, mesh=mesh)
    assert many.x.shape == (B, 6)
    np.testing.assert_allclose(many.x, one.x, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(many.num_steps, one.num_steps)
    np.testing.assert_array_equal(many.status, one.status)
    np.testing.assert_allclose(
        many.x, np.linalg.solve(A, b[..., None])[..., 0], rtol=1e-8, atol=1e-8
    )
    # the computation really ran on all devices
    if B == 16:
        assert len(jax.tree.leaves(many.x)[0].sharding.device_set) == 8
    # and one single solve agrees with its lane
    k = B // 2
    single = jaxsolve.solve(solver, x0[k], (A[k], b[k]), tol=1e-10, max_steps=3000)
    np.testing.assert_allclose(many.x[k], single.x, rtol=1e-12, atol=1e-14)
    assert int(many.num_steps[k]) == int(single.num_steps)


def test_shared_start_and_bad_batches():
    A, b = _batch(8)
    sol = solve_batch(gd(0.3), jnp.zeros(6), (A, b), in_axes=(None, 0), tol=1e-8, max_steps=3000)
    assert sol.x.shape == (8, 6) and np.all(np.asarray(sol.status) == 0)
    with pytest.raises(ValueError, match="empty batch"):
        solve_batch(gd(0.3), jnp.zeros((0, 6)), (A[:0], b[:0]))
    with pytest.raises(ValueError, match="disagree"):
        solve_batch(gd(0.3), jnp.zeros((8, 6)), (A[:4], b[:4]))


def _straggler_batch(B, n=6, seed=1):
    """Most lanes well conditioned, a few with a tiny eigenvalue (slow for gradient descent)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(B, n, n)))
    eig = rng.uniform(1.0, 2.0, size=(B, n))
    eig[:: max(1, B // 3), 0] = 0.05  # stragglers: condition number ~40
    A = np.einsum("bij,bj,bkj->bik", Q, eig, Q)
    b = rng.normal(size=(B, n))
    return jnp.asarray(A), jnp.asarray(b)


@pytest.mark.parametrize("sharded", [False, True])
def test_compaction_equals_plain_batch(sharded):
    """compact= shrinks the batch to the running lanes without changing any lane's answer."""
    B = 40
    A, b = _straggler_batch(B)
    solver = gd(0.45)
    x0 = jnp.zeros((B, 6))
    mesh = batch_mesh() if sharded else None
    plain = solve_batch(solver, x0, (A, b), tol=1e-10, max_steps=2500)
    comp = solve_batch(solver, x0, (A, b), tol=1e-10, max_steps=2500, compact=20, mesh=mesh)
    steps = np.asarray(plain.num_steps)
    assert steps.max() > 20 * np.median(steps)  # the batch really has stragglers
    np.testing.assert_array_equal(comp.num_steps, plain.num_steps)
    np.testing.assert_array_equal(comp.status, plain.status)
    np.testing.assert_allclose(comp.x, plain.x, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(
        comp.x, np.linalg.solve(A, b[..., None])[..., 0], rtol=1e-7, atol=1e-8
    )
    # a budget that stops the stragglers gives MAX_STEPS on exactly those lanes
    short = solve_batch(solver, x0, (A, b), tol=1e-10, max_steps=100, compact=30, mesh=mesh)
    np.testing.assert_array_equal(short.status, np.where(steps > 100, 1, 0))
    np.testing.assert_array_equal(short.num_steps, np.minimum(steps, 100))


def test_compaction_rejects_bad_use():
    A, b = _straggler_batch(8)
    with pytest.raises(ValueError, match="compact"):
        solve_batch(gd(0.3), jnp.zeros((8, 6)), (A, b), compact=0)
    with pytest.raises(ValueError, match="while"):
        solve_batch(gd(0.3), jnp.zeros((8, 6)), (A, b), compact=5, loop="fixed")
    with pytest.raises(ValueError, match="jit"):
        jax.jit(lambda A: solve_batch(gd(0.3), jnp.zeros((8, 6)), (A, b), compact=5))(A)
