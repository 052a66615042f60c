"""8 fake CPU devices (tests/conftest.py): shard_map + ppermute equal the simulation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D

N = 16


@pytest.fixture(scope="module")
def data():
    A, b = D.breast_cancer(N)
    return A[:, :, :10], b


SOLVERS = {
    "ds_admm": lambda: D.ds_admm(D.LeastSquares(), D.L1()),
    "ds_admm_gradient": lambda: D.ds_admm(D.Logistic(), D.L2Squared(), f_step="gradient"),
    "ds_admm_newton": lambda: D.ds_admm(D.Logistic(), D.L2Squared()),
    "pg_extra": lambda: D.pg_extra(D.LeastSquares(), D.L1()),
    "nids": lambda: D.nids(D.Logistic(), D.L2Squared()),
    "decentralized_admm": lambda: D.decentralized_admm(D.LeastSquares(), D.L1()),
    "dgd": lambda: D.dgd(D.Logistic(), D.L2Squared()),
}


def test_eight_devices_are_available():
    assert len(jax.devices()) >= 8


FAST = {("ds_admm", "ring")}
PAIRS = [
    pytest.param(name, graph, marks=() if (name, graph) in FAST else pytest.mark.slow)
    for name in sorted(SOLVERS)
    for graph in ("er", "ring")
]


@pytest.mark.parametrize(("name", "graph"), PAIRS)
def test_mesh_equals_simulation(data, name, graph):
    """Same iterates to 1e-12, same step count, status and ledger (the full matrix of
    solvers x graphs is slow: each pair compiles an 8-device program, and the ER graph
    needs all 7 device offsets; bench/distributed.py runs ER too)."""
    A, b = data
    adj = D.erdos_renyi(jax.random.key(2), N, 0.3) if graph == "er" else D.ring(N)
    problem = D.make_problem((A, b), D.metropolis_hastings(adj), 1.0)
    mesh = D.agent_mesh(jax.devices()[:8])
    x0 = jax.random.normal(jax.random.key(0), (N, A.shape[2]))
    solver = SOLVERS[name]()
    kw = dict(tol=1e-7, max_steps=150)
    sim = jaxsolve.solve(solver, x0, problem, **kw)
    dev = D.solve_on_mesh(solver, x0, problem, mesh=mesh, **kw)
    assert dev.x.sharding.spec == jax.sharding.PartitionSpec("agents")
    assert len(dev.x.sharding.device_set) == 8
    assert int(dev.num_steps) == int(sim.num_steps)
    assert int(dev.status) == int(sim.status)
    assert np.max(np.abs(np.asarray(dev.x) - np.asarray(sim.x))) <= 1e-12
    assert [int(v) for v in dev.state.ledger] == [int(v) for v in sim.state.ledger]
    assert int(sim.state.ledger.rounds) > 100


def test_ring_needs_only_neighbouring_devices():
    assert D.block_shifts(D.metropolis_hastings(D.ring(N)), 8) == (1, 7)
    full = D.block_shifts(D.metropolis_hastings(D.erdos_renyi(jax.random.key(2), N, 0.9)), 8)
    assert full == tuple(range(1, 8))


def test_mesh_bad_input(data):
    A, b = data
    W = D.metropolis_hastings(D.ring(N))
    problem = D.make_problem((A, b), W, 1.0)
    solver = D.ds_admm(D.LeastSquares(), D.L1())
    with pytest.raises(ValueError, match="split evenly"):
        D.solve_on_mesh(solver, jnp.zeros((N, 10)), problem, mesh=D.agent_mesh(jax.devices()[:3]))
    with pytest.raises(ValueError, match="x0"):
        D.solve_on_mesh(solver, jnp.zeros((N + 1, 10)), problem)
    # a list of devices for mesh failed with AttributeError on mesh.axis_names
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        D.solve_on_mesh(solver, jnp.zeros((N, 10)), problem, mesh=jax.devices()[:2])
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        D.solve_clients_on_mesh(solver, jnp.zeros(10), (A, b), mesh=jax.devices()[:2])
