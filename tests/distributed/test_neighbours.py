"""Mixing over padded neighbour lists equals the dense product with W, in every method."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D

METHODS = {
    "ds_admm": lambda: D.ds_admm(D.LeastSquares(), D.L1()),
    "pg_extra": lambda: D.pg_extra(D.LeastSquares(), D.L1()),
    "nids": lambda: D.nids(D.LeastSquares(), D.L1()),
    "dgd": lambda: D.dgd(D.LeastSquares(), D.L1()),
    "decentralized_admm": lambda: D.decentralized_admm(D.LeastSquares(), D.L1()),
}


def _lasso(n, d, dtype=jnp.float64, adjacency=None):
    A, b = D.sparse_binary(jax.random.key(1), n, 8, d)
    A, b = A.astype(dtype), b.astype(dtype)
    W = D.metropolis_hastings(D.ring(n) if adjacency is None else adjacency)
    return D.make_problem((A, b), W, 0.05, neighbours=True), D.make_problem(
        (A, b), W, 0.05, neighbours=False
    )


def test_lists_mix_like_the_dense_product_with_isolated_and_empty_rows():
    rng = np.random.default_rng(0)
    a = D.erdos_renyi(jax.random.key(4), 12, 0.3)
    W = D.metropolis_hastings(a)
    # agent 3 cut off (self-loop only: row e_3), agent 7 an all-zero row
    W[3, :], W[:, 3], W[3, 3] = 0.0, 0.0, 1.0
    W[7, :], W[:, 7] = 0.0, 0.0
    nb = D.neighbour_lists(W)
    assert nb.index.shape == (12, int((W != 0).sum(1).max()))
    assert list(np.asarray(nb.index[3])) == [3] * nb.index.shape[1]
    np.testing.assert_array_equal(np.asarray(nb.weight[7]), 0.0)
    Z = jnp.asarray(rng.standard_normal((12, 5)))
    dense = W @ np.asarray(Z)
    np.testing.assert_allclose(D.Simulated().mix(nb, Z), dense, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(np.asarray(D.Simulated().mix(nb, Z))[3], np.asarray(Z)[3])
    # the adjacency without self-loops (decentralized ADMM's mixing), same lists
    adj = (W != 0) & ~np.eye(12, dtype=bool)
    np.testing.assert_allclose(D.Simulated().mix(nb.adjacency(), Z), adj @ Z, atol=1e-15)
    # a matrix of zeros: one padded entry per row
    zero = D.neighbour_lists(np.zeros((4, 4)))
    assert zero.index.shape == (4, 1)
    np.testing.assert_array_equal(D.Simulated().mix(zero, Z[:4]), 0.0)


def test_make_problem_uses_the_lists_for_sparse_graphs_only():
    A, b = D.sparse_binary(jax.random.key(1), 64, 4, 3)
    ring = D.make_problem((A, b), D.metropolis_hastings(D.ring(64)), 0.1)
    assert ring.neighbours.index.shape == (64, 3) and ring.mixing is ring.neighbours
    np.testing.assert_array_equal(np.asarray(ring.neighbours.index[0]), [0, 1, 63])  # column order
    dense = D.metropolis_hastings(D.erdos_renyi(jax.random.key(2), 64, 0.5))
    assert D.make_problem((A, b), dense, 0.1).neighbours is None
    assert D.make_problem((A, b), dense, 0.1, neighbours=True).neighbours.index.shape[1] > 8
    forced = D.make_problem((A, b), D.metropolis_hastings(D.ring(64)), 0.1, neighbours=False)
    assert forced.neighbours is None and forced.mixing is forced.W
    with pytest.raises(ValueError, match="neighbours must be"):
        D.make_problem((A, b), dense, 0.1, neighbours="yes")
    # a traced W is not inspected: the dense product
    ring_w = jnp.asarray(D.metropolis_hastings(D.ring(64)))
    assert jax.eval_shape(lambda W: D.make_problem((A, b), W, 0.1).neighbours, ring_w) is None
    with pytest.raises(ValueError, match="concrete"):
        jax.eval_shape(lambda W: D.make_problem((A, b), W, 0.1, neighbours=True), ring_w)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_equals_the_dense_mixing(method):
    """Iterates, per-step errors and ledgers of 150 steps, under jit, to 1e-13."""
    sparse, dense = _lasso(16, 6, adjacency=D.grid(4, 4))
    solver = METHODS[method]()
    run = jax.jit(
        lambda pr: jaxsolve.solve(solver, jnp.zeros((16, 6)), pr, max_steps=150, loop="fixed")
    )
    s, d = run(sparse), run(dense)
    np.testing.assert_allclose(s.x, d.x, rtol=0, atol=1e-13)
    np.testing.assert_allclose(s.history, d.history, rtol=0, atol=1e-13)
    assert [int(v) for v in s.state.ledger] == [int(v) for v in d.state.ledger]
    assert float(jnp.max(jnp.abs(d.x))) > 1e-2  # the iterates moved from x0 = 0


def test_vmap_over_starts_and_problems():
    sparse, dense = _lasso(8, 4)
    solver = D.ds_admm(D.LeastSquares(), D.L1())
    x0s = jax.random.normal(jax.random.key(0), (3, 8, 4))
    run = lambda x0, pr: jaxsolve.solve(solver, x0, pr, max_steps=100, tol=0.0).x
    s = jax.vmap(run, in_axes=(0, None))(x0s, sparse)
    d = jax.vmap(run, in_axes=(0, None))(x0s, dense)
    np.testing.assert_allclose(s, d, rtol=0, atol=1e-13)
    # a batch of problems (the weights scaled by a batched regularizer weight)
    stack = lambda pr: jax.tree.map(lambda *v: jnp.stack(v), pr, pr._replace(reg=pr.reg * 2))
    sb = jax.vmap(lambda pr: run(x0s[0], pr))(stack(sparse))
    db = jax.vmap(lambda pr: run(x0s[0], pr))(stack(dense))
    np.testing.assert_allclose(sb, db, rtol=0, atol=1e-13)
    assert float(jnp.max(jnp.abs(sb[0] - sb[1]))) > 1e-3


def test_float32():
    sparse, dense = _lasso(16, 6, jnp.float32)
    assert sparse.neighbours.weight.dtype == jnp.float32
    solver = D.ds_admm(D.LeastSquares(), D.L1())
    x0 = jnp.zeros((16, 6), jnp.float32)
    s = jaxsolve.solve(solver, x0, sparse, max_steps=200, tol=0.0)
    d = jaxsolve.solve(solver, x0, dense, max_steps=200, tol=0.0)
    assert s.x.dtype == jnp.float32
    np.testing.assert_allclose(s.x, d.x, rtol=0, atol=1e-5)
    assert float(jnp.max(jnp.abs(s.x))) > 1e-2


def test_mesh_accepts_a_problem_with_lists():
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    sparse, dense = _lasso(16, 4)
    solver = D.ds_admm(D.LeastSquares(), D.L1())
    kw = dict(tol=0.0, max_steps=50)
    mesh = D.solve_on_mesh(solver, jnp.zeros((16, 4)), sparse, **kw)
    sim = jaxsolve.solve(solver, jnp.zeros((16, 4)), sparse, **kw)
    np.testing.assert_allclose(mesh.x, sim.x, rtol=0, atol=1e-13)
