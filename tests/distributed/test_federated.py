"""Federated RG-SAGA: the SAGA estimator, the cost ledger, convergence, vmap, bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D

N, DIM, M = 10, 20, 3
LOSS = D.LogSumQuadratic()


@pytest.fixture(scope="module")
def problem():
    data = D.log_sum_quadratic(jax.random.key(0), N, DIM, 5)
    params = D.practical_parameters(N, M, **D.log_sum_constants(data))
    return data, params


def test_saga_estimate_is_unbiased():
    n, d, m, reps = 7, 3, 2, 10_000
    k1, k2 = jax.random.split(jax.random.key(3))
    table = jax.random.normal(k1, (n, d))
    fresh = jax.random.normal(k2, (n, d)) + 1.0
    bbar = table.mean(0)

    def one(key):
        idx = jax.random.permutation(key, n)[:m]
        return D.saga_estimate(table, bbar, fresh[idx], idx)[0]

    G = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(4), reps))
    se = np.asarray(G.std(0)) / math.sqrt(reps)
    gap = np.abs(np.asarray(G.mean(0) - fresh.mean(0)))
    assert np.all(gap < 3 * se), (gap, se)


def test_saga_table_is_full_gradient_once_every_client_is_sampled(problem):
    data, _ = problem
    x = jnp.linspace(0.0, 3.0, DIM)
    grads = jax.vmap(jax.grad(LOSS), in_axes=(None, 0))(x, data)
    table = jnp.zeros((N, DIM))
    bbar = jnp.zeros(DIM)
    seen = np.zeros(N, bool)
    key = jax.random.key(5)
    saga = jax.jit(D.saga_estimate)
    while not seen.all():
        key, sub = jax.random.split(key)
        idx = jax.random.permutation(sub, N)[:M]
        _, table, bbar = saga(table, bbar, grads[idx], idx)
        seen[np.asarray(idx)] = True
    np.testing.assert_allclose(table, grads, rtol=0, atol=0)
    np.testing.assert_allclose(bbar, D.full_gradient(LOSS, x, data), rtol=1e-12, atol=1e-10)


def _replay_local_steps(seed, p, steps, max_local):
    key = jax.random.key_data(jax.random.key(seed))
    total = 0
    for _ in range(steps):
        key, k_local, _ = jax.random.split(jax.random.wrap_key_data(key), 3)
        total += int(jnp.minimum(jax.random.geometric(k_local, p, dtype=jnp.int32), max_local))
        key = jax.random.key_data(key)
    return total


def test_ledger_replay_and_cost_formula(problem):
    data, params = problem
    solver = D.rg_saga(LOSS, M, seed=7, **params)
    x0 = jnp.zeros(DIM)
    run = [jaxsolve.solve(solver, x0, data, tol=0.0, max_steps=12) for _ in range(2)]
    led = run[0].state.ledger
    for a, b in zip(led, run[1].state.ledger, strict=True):
        assert int(a) == int(b)
    np.testing.assert_array_equal(run[0].x, run[1].x)
    steps = int(run[0].num_steps)
    assert steps == 12
    assert int(led.a_rounds) == math.ceil(N / M)  # one full sync at x0
    assert int(led.r_rounds) == int(led.d_rounds) == steps
    local = _replay_local_steps(7, params["p"], steps, solver.max_local)
    # K_t delegate gradients (grad f_1(x^t), then one per local step after the first) and
    # grad f_i(x^t), grad f_i(x^{t+1}) for the m sampled clients
    assert int(led.local_grads) == N + local + steps * 2 * M
    for c_a, c_r in ((1.0, 1.0), (10.0, 1.0), (2.5, 0.5)):
        want = c_a * math.ceil(N / M) + c_r * steps + steps
        assert float(D.ledger_cost(led, c_a, c_r)) == pytest.approx(want)

    gd = jaxsolve.solve(D.fed_gd(LOSS, M, stepsize=0.01), x0, data, tol=0.0, max_steps=5)
    assert int(gd.state.ledger.a_rounds) == 6 * math.ceil(N / M)
    assert int(gd.state.ledger.local_grads) == 6 * N
    sc = jaxsolve.solve(D.scaffold(LOSS, M, local_lr=1e-3), x0, data, tol=0.0, max_steps=5)
    assert int(sc.state.ledger.r_rounds) == 5
    assert int(sc.state.ledger.local_grads) == 5 * M * 10


def test_rg_saga_reaches_tolerance(problem):
    data, params = problem
    sol = jaxsolve.solve(D.rg_saga(LOSS, M, **params), jnp.zeros(DIM), data, tol=1e-2)
    assert int(sol.status) == int(jaxsolve.Status.SUCCESS)
    g = D.full_gradient(LOSS, sol.x, data)
    assert float(jnp.linalg.norm(g)) <= 1e-2
    assert float(sol.error) == pytest.approx(float(jnp.linalg.norm(g)))
    # cheaper than full-gradient descent at C_A = C_R = 1
    gd = jaxsolve.solve(D.fed_gd(LOSS, M, stepsize=1 / 100), jnp.zeros(DIM), data, tol=1e-2)
    assert int(gd.status) == 0
    assert float(D.ledger_cost(sol.state.ledger, 1.0, 1.0)) < float(
        D.ledger_cost(gd.state.ledger, 1.0, 1.0)
    )


def test_scaffold_reaches_tolerance(problem):
    data, _ = problem
    sol = jaxsolve.solve(
        D.scaffold(LOSS, M, local_lr=1e-3), jnp.zeros(DIM), data, tol=1e-2, max_steps=2000
    )
    assert int(sol.status) == 0
    assert float(jnp.linalg.norm(D.full_gradient(LOSS, sol.x, data))) <= 1e-2


def test_vmap_over_seeds_equals_loop(problem):
    data, params = problem
    x0 = jnp.zeros(DIM)

    def run(seed):
        sol = jaxsolve.solve(D.rg_saga(LOSS, M, seed=seed, **params), x0, data, max_steps=8)
        return sol.x, sol.state.ledger.local_grads

    xs, locs = jax.vmap(run)(jnp.arange(8))
    for s in range(8):
        x, loc = run(jnp.int32(s))
        np.testing.assert_allclose(xs[s], x, rtol=1e-12, atol=1e-12)
        assert int(locs[s]) == int(loc)
    assert len({float(v) for v in xs[:, 0]}) > 1  # the seeds differ


def test_bad_input(problem):
    data, params = problem
    x0 = jnp.zeros(DIM)
    with pytest.raises(ValueError, match="m .*at most the number of clients"):
        jaxsolve.solve(D.rg_saga(LOSS, N + 1, **params), x0, data, max_steps=2)
    with pytest.raises(ValueError, match="m "):
        D.rg_saga(LOSS, 0, **params)
    with pytest.raises(ValueError, match="m "):
        D.practical_parameters(N, N + 1, delta=1.0, delta1=1.0, l_max=1.0)
    with pytest.raises(ValueError, match="c_a"):
        D.ledger_cost(D.empty_client_ledger(), 0.0, 1.0)
    with pytest.raises(ValueError, match="c_r"):
        D.ledger_cost(D.empty_client_ledger(), 1.0, -1.0)
    with pytest.raises(ValueError, match="lam"):
        D.rg_saga(LOSS, M, **{**params, "lam": -1.0})
    with pytest.raises(ValueError, match="beta"):
        D.rg_saga(LOSS, M, **{**params, "beta": 2.0})
    with pytest.raises(ValueError, match="local_lr"):
        D.scaffold(LOSS, M, local_lr=0.0)
    with pytest.raises(TypeError, match="loss"):
        D.fed_gd("not a loss", M, stepsize=0.1)
    with pytest.raises(ValueError, match="data"):
        D.num_clients((jnp.ones((3, 2)), jnp.ones((4, 2))))
    A, B = data
    bad = (A.at[2, 0, 0].set(jnp.nan), B)
    sol = jaxsolve.solve(D.rg_saga(LOSS, M, **params), x0, bad, max_steps=5)
    assert int(sol.status) == int(jaxsolve.Status.NONFINITE)


def test_beta_zero_is_sarah(problem):
    """beta = 0: g^{t+1} = g^t + mean_S (grad f_i(x^{t+1}) - grad f_i(x^t)), written out."""
    data, params = problem
    params = {**params, "beta": 0.0}
    solver = D.rg_saga(LOSS, M, seed=2, **params)
    steps = 6
    sol = jaxsolve.solve(solver, jnp.zeros(DIM), data, tol=0.0, max_steps=steps)

    grad = jax.jit(jax.grad(LOSS))
    grads = jax.jit(jax.vmap(jax.grad(LOSS), in_axes=(None, 0)))
    data1 = jax.tree.map(lambda v: v[0], data)
    lam, L = params["lam"], params["local_l"]
    x = jnp.zeros(DIM)
    g = D.full_gradient(LOSS, x, data)
    key = jax.random.key(2)
    for _ in range(steps):
        key, k_local, k_sample = jax.random.split(key, 3)
        K = int(jax.random.geometric(k_local, params["p"], dtype=jnp.int32))
        y = x
        for _ in range(K):  # gradient steps on F_t(y)
            y = y - (grad(y, data1) - grad(x, data1) + g + lam * (y - x)) / (lam + L)
        idx = jax.random.permutation(k_sample, N)[:M]
        sub = jax.tree.map(lambda v, i=idx: v[i], data)
        g = g + jnp.mean(grads(y, sub) - grads(x, sub), axis=0)
        x = y
    np.testing.assert_allclose(sol.x, x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(sol.state.g, g, rtol=1e-10, atol=1e-10)
