"""8 fake CPU devices (tests/conftest.py): federated clients sharded over a mesh equal one device."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxsolve
from jaxsolve import distributed as D

N, DIM, M = 16, 40, 4
LOSS = D.LogSumQuadratic()


@pytest.fixture(scope="module")
def problem():
    data = D.log_sum_quadratic(jax.random.key(0), N, DIM, 5)
    return data, D.practical_parameters(N, M, **D.log_sum_constants(data))


def test_rg_saga_on_eight_devices_equals_one_device(problem):
    """Same iterates (the per-step ||grad f(x^t)|| and the final x, g, SAGA table) to
    1e-12 and the same ledger; each device holds 2 clients' data and table rows."""
    data, params = problem
    solver = D.rg_saga(LOSS, M, seed=3, **params)
    x0 = jnp.zeros(DIM)
    kw = dict(tol=0.0, max_steps=30, history=True)
    one = jaxsolve.solve(solver, x0, data, **kw)
    mesh = D.agent_mesh(jax.devices()[:8], axis_name="clients")
    dev = D.solve_clients_on_mesh(solver, x0, data, mesh=mesh, **kw)
    assert dev.state.table.sharding.spec == P("clients")
    assert len(dev.state.table.sharding.device_set) == 8
    assert dev.state.table.addressable_shards[0].data.shape == (N // 8, DIM)
    for a, b in ((dev.x, one.x), (dev.state.g, one.state.g), (dev.state.table, one.state.table)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12)
    np.testing.assert_allclose(dev.history, one.history, rtol=1e-12, atol=0)
    assert [int(v) for v in dev.state.ledger] == [int(v) for v in one.state.ledger]
    assert int(one.state.ledger.local_grads) > N + 2 * M * 30
    assert float(one.history[-1]) < 0.5 * float(one.history[0])


def test_clients_must_split_evenly(problem):
    data, params = problem
    mesh = D.agent_mesh(jax.devices()[:3], axis_name="clients")
    with pytest.raises(ValueError, match="split evenly"):
        D.solve_clients_on_mesh(D.rg_saga(LOSS, M, **params), jnp.zeros(DIM), data, mesh=mesh)


BASELINES = {
    "fed_gd": lambda p: D.fed_gd(LOSS, M, stepsize=0.01),
    "scaffold": lambda p: D.scaffold(LOSS, M, local_lr=1e-3, local_steps=3, seed=1),
    "fedavg": lambda p: D.fedavg(LOSS, M, stepsize=1e-3, local_steps=3, seed=1),
    "rg_svrg": lambda p: D.rg_svrg(LOSS, M, q=0.3, seed=1, **p),
    "saber_full": lambda p: D.saber_full(LOSS, M, stepsize=0.005, q=0.3, seed=1),
}


@pytest.mark.parametrize("method", sorted(BASELINES))
def test_baselines_on_eight_devices_equal_one_device(problem, method):
    """The other methods through the same placement: per-client state (SCAFFOLD's controls,
    RG-SVRG's snapshot) sharded, iterates equal to 1e-12, ledgers equal."""
    data, params = problem
    solver = BASELINES[method](params)
    x0 = jnp.zeros(DIM)
    kw = dict(tol=0.0, max_steps=10, history=True)
    one = jaxsolve.solve(solver, x0, data, **kw)
    mesh = D.agent_mesh(jax.devices()[:8], axis_name="clients")
    dev = D.solve_clients_on_mesh(solver, x0, data, mesh=mesh, **kw)
    np.testing.assert_allclose(np.asarray(dev.x), np.asarray(one.x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(dev.history, one.history, rtol=1e-12, atol=0)
    assert [int(v) for v in dev.state.ledger] == [int(v) for v in one.state.ledger]
    for name in ("controls", "snapshot"):
        if hasattr(dev.state, name):
            assert getattr(dev.state, name).sharding.spec == P("clients")
    assert float(one.history[-1]) < float(one.history[0])
