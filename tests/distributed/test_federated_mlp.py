"""The digits MLP federated problem (non-IID split) and the Hessian-vector constants."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D

N, M = 10, 3
LOSS = D.DigitsMLP()


@pytest.fixture(scope="module")
def problem():
    data = D.digits_mlp(N, seed=0)
    x0 = LOSS.init(jax.random.key(0))
    return data, x0


def _mean_loss(x, data):
    return float(jnp.mean(jax.vmap(LOSS, in_axes=(None, 0))(x, data)))


def test_split_is_non_iid_and_loss_matches_numpy(problem):
    (X, y), x0 = problem
    assert X.shape == (N, 178, 64) and y.shape == (N, 178) and x0.shape == (LOSS.dim,)
    assert LOSS.dim == 65 * 16 + 17 * 10
    counts = np.stack([np.bincount(np.asarray(yi), minlength=10) for yi in y])
    top2 = np.sort(counts, axis=1)[:, -2:].sum(1) / counts.sum(1)
    assert np.all(top2 >= 0.85), top2  # each client: mostly one or two classes
    assert np.all((counts > 0).sum(1) <= 4)
    assert np.all(counts.sum(0) > 0)  # every class is somewhere
    assert float(X.min()) == 0.0 and float(X.max()) == 1.0
    # the loss against a NumPy forward pass on the unravelled parameters
    p = {k: np.asarray(v) for k, v in LOSS.unravel(x0).items()}
    Xi, yi = np.asarray(X[3]), np.asarray(y[3])
    z = np.tanh(Xi @ p["W1"] + p["c1"]) @ p["W2"] + p["c2"]
    zmax = z.max(1, keepdims=True)
    lse = (zmax + np.log(np.exp(z - zmax).sum(1, keepdims=True)))[:, 0]
    want = np.mean(lse - z[np.arange(len(yi)), yi]) + 0.5e-4 * np.sum(np.asarray(x0) ** 2)
    assert float(LOSS(x0, (X[3], y[3]))) == pytest.approx(want, rel=1e-12)
    np.testing.assert_array_equal(jax.flatten_util.ravel_pytree(LOSS.unravel(x0))[0], x0)


def test_hessian_constants_equal_the_exact_ones_on_a_quadratic():
    data = D.log_sum_quadratic(jax.random.key(0), 8, 20, 5)
    quad = lambda x, d: 0.5 * jnp.mean(jnp.sum(d[0] * (x - d[1]) ** 2, axis=-1))
    est = D.hessian_constants(quad, data, jnp.zeros(20), iters=300)
    exact = D.log_sum_constants(data)
    for k in ("delta", "delta1", "l_max"):
        assert est[k] == pytest.approx(exact[k], rel=1e-6), k


def _replay_local_steps(seed, p, steps, max_local):
    key = jax.random.key(seed)
    total = 0
    for _ in range(steps):
        key, k_local, _ = jax.random.split(key, 3)
        total += int(jnp.minimum(jax.random.geometric(k_local, p, dtype=jnp.int32), max_local))
    return total


def test_rg_saga_and_scaffold_decrease_the_loss_with_exact_ledgers(problem):
    """20 rounds from the Glorot start (f = 2.46, chance accuracy): RG-SAGA with the
    practical parameters at the Hessian constants of x0 reaches f = 2.02, SCAFFOLD
    (5 local steps of 0.5 / L_max) f = 1.06."""
    data, x0 = problem
    consts = D.hessian_constants(LOSS, data, x0, iters=30)
    assert 2.0 < consts["delta"] < 3.5 and 2.5 < consts["delta1"] < 4.0
    assert 4.0 < consts["l_max"] < 6.0
    params = D.practical_parameters(N, M, **consts)
    f0, steps = _mean_loss(x0, data), 20
    assert f0 == pytest.approx(2.4613, abs=1e-3)
    rg = D.rg_saga(LOSS, M, seed=0, **params)
    sol = jaxsolve.solve(rg, x0, data, tol=0.0, max_steps=steps)
    assert _mean_loss(sol.x, data) < f0 - 0.3
    led = sol.state.ledger
    local = _replay_local_steps(0, params["p"], steps, rg.max_local)
    assert [int(v) for v in led] == [math.ceil(N / M), steps, steps, N + local + 2 * M * steps]
    assert float(D.ledger_cost(led, 10.0, 1.0)) == 10 * math.ceil(N / M) + 2 * steps
    sc = D.scaffold(LOSS, M, local_lr=0.5 / consts["l_max"], local_steps=5)
    sol = jaxsolve.solve(sc, x0, data, tol=0.0, max_steps=steps)
    assert _mean_loss(sol.x, data) < f0 - 1.0
    assert [int(v) for v in sol.state.ledger] == [0, steps, 0, 5 * M * steps]


def test_float32_mlp_runs_in_float32(problem):
    data64, _ = problem
    data = D.digits_mlp(N, seed=0, dtype=jnp.float32)
    assert data[0].dtype == jnp.float32 and data[1].dtype == jnp.int32
    x0 = LOSS.init(jax.random.key(0), jnp.float32)
    consts = D.hessian_constants(LOSS, data, x0, iters=30)
    sol = jaxsolve.solve(
        D.rg_saga(LOSS, M, **D.practical_parameters(N, M, **consts)),
        x0, data, tol=0.0, max_steps=20,
    )  # fmt: skip
    assert sol.x.dtype == sol.state.table.dtype == jnp.float32
    f0 = _mean_loss(x0.astype(jnp.float64), data64)
    assert _mean_loss(sol.x.astype(jnp.float64), data64) < f0 - 0.3
