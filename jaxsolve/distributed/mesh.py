r"""Agents and clients on devices: the same ``step`` sharded over a 1-D device mesh.

The agents are cut into contiguous blocks, one block per device of a 1-D mesh
(axis ``"agents"``); each device holds its agents' rows of ``x0``, of the data and
of $W$. A round of neighbour exchange $MZ$ is, on device $p$,

$$
(MZ)_{\text{block } p} = \sum_{k \in S} M_{p,\,p+k}\, Z_{p+k},
$$

where $S$ is the set of device offsets $k$ for which some block $W_{p, p+k}$ is nonzero
(found once, on the host, from $W$): the block $Z_{p+k}$ arrives by one
``lax.ppermute`` per offset. A ring of agents on a ring of devices needs only
$S = \{0, \pm1\}$; a dense graph needs every offset. Network-wide sums (the stopping
test's monitoring) are ``lax.psum``. The solver's ledger counts the algorithm's
messages per agent, as in the simulation, so the two ledgers are identical.

Multi-host: start every process with the same program, call
``jax.distributed.initialize()`` (coordinator address, process count and id, or
nothing on Slurm / Cloud TPU) before touching devices, then build the mesh over
``jax.devices()`` (all hosts' devices) with `agent_mesh` and call
`solve_on_mesh` as on one host.

Federated clients (`solve_clients_on_mesh`) need no neighbour exchange: every per-client
computation is a ``vmap`` over the client axis, and the server's sums and its gather of
the sampled $m$ clients are the only cross-client operations. So the federated solvers
run unchanged under ``jax.jit`` with their client data (and the per-client state it
induces: SAGA tables, snapshots, control variates) sharded over the ``"clients"`` axis,
and XLA's SPMD partitioner turns the client sums into all-reduces and the gather into a
collective: one copy of each method's logic, no second, device-aware version. What the
partitioner does with it (checked in the compiled HLO of RG-SAGA and SCAFFOLD on 8 CPU
devices): the all-client work (the start's full sync, the snapshots, the monitoring
$\|\nabla f\|$) runs on the devices that hold the clients, $n/8$ each; the $m$
sampled clients' data are gathered and their work (RG-SAGA's $2m$ gradients, SCAFFOLD's
local steps) runs replicated on every device, which is what a simulation with $m \ll n$
costs least communication for; per-client steps on the owning device would need
``shard_map`` and a device-aware sampling step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float

import jaxsolve
from jaxsolve.core.driver import Solution
from jaxsolve.core.protocol import run_check_args
from jaxsolve.distributed.base import DecentralizedSolver, Simulated
from jaxsolve.distributed.baselines import DGD, NIDS, PGExtra, default_stepsize
from jaxsolve.distributed.ds_admm import DSADMM, default_beta, spectral_gap
from jaxsolve.distributed.graphs import check_mixing
from jaxsolve.distributed.problems import Problem

__all__ = ["MeshComm", "agent_mesh", "block_shifts", "solve_on_mesh", "solve_clients_on_mesh"]


@dataclasses.dataclass(frozen=True)
class MeshComm:
    """Neighbour exchange inside ``shard_map``: one ``ppermute`` per device offset.

    Attributes:
        axis_name: the mesh axis the agents are sharded over.
        num_devices: its size.
        shifts: the nonzero device offsets $k$ with a nonzero block $W_{p, p+k}$.
    """

    axis_name: str
    num_devices: int
    shifts: tuple[int, ...]

    def mix(self, M, Z):
        n_loc = Z.shape[0]
        p = jax.lax.axis_index(self.axis_name)
        nd = self.num_devices

        def block(k):
            start = ((p + k) % nd) * n_loc
            return jax.lax.dynamic_slice_in_dim(M, start, n_loc, axis=1)

        out = jnp.tensordot(block(0), Z, axes=1)
        for k in self.shifts:
            perm = [((i + k) % nd, i) for i in range(nd)]  # device i receives block i + k
            out = out + jnp.tensordot(block(k), jax.lax.ppermute(Z, self.axis_name, perm), axes=1)
        return out

    def total(self, z):
        return jax.lax.psum(jnp.sum(z, axis=0), self.axis_name)

    def eye_rows(self, M):
        n_loc, n = M.shape
        first = jax.lax.axis_index(self.axis_name) * n_loc
        rows = first + jnp.arange(n_loc)
        return (rows[:, None] == jnp.arange(n)[None, :]).astype(M.dtype)


def agent_mesh(devices: Any = None, axis_name: str = "agents") -> Mesh:
    """A 1-D mesh over ``devices`` (default: all of ``jax.devices()``)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.array(devices), (axis_name,))


def block_shifts(W: Any, num_devices: int) -> tuple[int, ...]:
    """The nonzero device offsets $k$ such that some block $W_{p, p+k}$ is nonzero."""
    w = np.asarray(W)
    n = w.shape[0]
    if n % num_devices:
        raise ValueError(
            f"the {n} agents must split evenly over the {num_devices} devices of the mesh"
        )
    b = n // num_devices
    nz = np.abs(w).reshape(num_devices, b, num_devices, b).sum(axis=(1, 3)) > 0
    return tuple(
        k
        for k in range(1, num_devices)
        if any(nz[p, (p + k) % num_devices] for p in range(num_devices))
    )


def _with_defaults(solver, x0, problem):
    """Fill in the hyperparameters whose default needs global information (the spectral
    gap, the largest Lipschitz constant), computed here on the host as the simulation
    would in ``init``."""
    if isinstance(solver, DSADMM) and solver.beta is None:
        lips = jax.vmap(solver.loss.lipschitz)(problem.data)
        beta = default_beta(lips, spectral_gap(problem.W)).astype(x0.dtype)
        solver = dataclasses.replace(solver, beta=beta)
    if isinstance(solver, DGD | PGExtra | NIDS) and solver.stepsize is None:
        lips = jax.vmap(solver.loss.lipschitz)(problem.data)
        alpha = default_stepsize(type(solver), lips, problem.W).astype(x0.dtype)
        solver = dataclasses.replace(solver, stepsize=alpha)
    return solver


def _check_mesh(mesh) -> None:
    """A 1-D `jax.sharding.Mesh` (a list of devices failed on ``mesh.axis_names``)."""
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"mesh must be a jax.sharding.Mesh (agent_mesh(devices)), got {type(mesh).__name__}"
        )
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be 1-D, got axes {mesh.axis_names}")


def solve_on_mesh(
    solver: DecentralizedSolver,
    x0: Float[Array, "n d"],
    problem: Problem,
    *,
    mesh: Mesh | None = None,
    **solve_kwargs: Any,
) -> Solution:
    """Run ``jaxsolve.solve(solver, x0, problem, **solve_kwargs)`` with the agents sharded
    over the devices of ``mesh`` and neighbour exchange by ``ppermute``.

    Args:
        solver: a decentralized solver built for simulation (``ds_admm(...)``,
            ``pg_extra(...)`` ...); its communicator is replaced by `MeshComm`.
        x0: ``(n, d)`` starting points, one row per agent.
        problem: the `jaxsolve.distributed.Problem` (concrete: $W$'s block
            pattern decides the exchanges); ``n`` must be a multiple of the device count.
        mesh: a 1-D mesh (default `agent_mesh` over all devices).
        **solve_kwargs: passed to `jaxsolve.solve` (``tol``, ``max_steps``,
            ``history`` ...).

    Returns:
        The `jaxsolve.Solution`, with per-agent arrays sharded over the mesh;
        equal to the simulated solve up to rounding.
    """
    mesh = agent_mesh() if mesh is None else mesh
    _check_mesh(mesh)
    axis = mesh.axis_names[0]
    if not isinstance(problem, Problem):
        raise TypeError(
            f"problem must be a jaxsolve.distributed.Problem, got {type(problem).__name__}"
        )
    if not isinstance(getattr(solver, "comm", None), Simulated):
        raise TypeError("solver must be a decentralized solver built for simulation (ds_admm, ...)")
    check_mixing(problem.W, name="problem.W")
    problem = problem._replace(neighbours=None)  # the mesh mixes by blocks of W
    n = problem.W.shape[0]
    if np.shape(x0)[0] != n or np.ndim(x0) != 2:
        raise ValueError(f"x0 must have shape ({n}, d), got {np.shape(x0)}")
    num_devices = mesh.shape[axis]
    shifts = block_shifts(problem.W, num_devices)
    run_check_args(solver, x0, problem)  # jaxsolve.solve below sees tracers only
    solver = _with_defaults(solver, x0, problem)
    local = dataclasses.replace(solver, comm=MeshComm(axis, num_devices, shifts))

    shapes = jax.eval_shape(lambda: jaxsolve.solve(solver, x0, problem, **solve_kwargs))
    agent = lambda leaf: P(axis) if leaf.ndim >= 1 and leaf.shape[0] == n else P()
    out_specs = shapes._replace(
        x=P(axis),
        state=jax.tree.map(agent, shapes.state),
        status=P(),
        num_steps=P(),
        error=P(),
        history=jax.tree.map(lambda _: P(), shapes.history),
        info=jax.tree.map(lambda _: P(), shapes.info),
    )
    in_specs = (
        P(axis),
        Problem(
            jax.tree.map(lambda _: P(axis), problem.data),
            P(axis, None),
            jax.tree.map(lambda _: P(), problem.reg),
        ),
    )

    def run(x0, problem):
        return jaxsolve.solve(local, x0, problem, **solve_kwargs)

    fn = jax.shard_map(run, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    return jax.jit(fn)(x0, problem)


def solve_clients_on_mesh(
    solver: Any, x0: Any, data: Any, *, mesh: Mesh | None = None, **solve_kwargs: Any
) -> Solution:
    """Run a federated solver (``rg_saga(...)``, ``scaffold(...)`` ...) as
    ``jaxsolve.solve(solver, x0, data, **solve_kwargs)`` with the clients sharded over the
    devices of ``mesh``.

    Every leaf of ``data`` is placed with its leading (client) axis split over the mesh
    axis; ``x0`` is replicated. The computation is then partitioned by XLA from those
    placements (see the module docstring): the all-client gradients are computed on
    the devices that hold the clients, the $m$ sampled ones replicated; the state's per-client arrays (its leaves of shape
    ``(n, ...)`` with at least two axes: the server iterate is one vector) are sharded the
    same way, the rest replicated.

    Args:
        solver: a federated solver from `jaxsolve.distributed.federated`.
        x0: the starting point (replicated on every device).
        data: the stacked client data, leaves ``(n, ...)``; ``n`` must be a multiple of
            the device count.
        mesh: a 1-D mesh (default ``agent_mesh(axis_name="clients")`` over all devices).
        **solve_kwargs: passed to `jaxsolve.solve`.

    Returns:
        The `jaxsolve.Solution`; equal to the single-device solve up to the order of the
        client sums' roundings.
    """
    from jaxsolve.distributed.federated import num_clients

    mesh = agent_mesh(axis_name="clients") if mesh is None else mesh
    _check_mesh(mesh)
    axis = mesh.axis_names[0]
    n, num_devices = num_clients(data), mesh.shape[axis]
    if n % num_devices:
        raise ValueError(
            f"the {n} clients must split evenly over the {num_devices} devices of the mesh"
        )
    run_check_args(solver, x0, data)  # jaxsolve.solve below sees tracers only
    rows = jax.sharding.NamedSharding(mesh, P(axis))
    whole = jax.sharding.NamedSharding(mesh, P())
    data = jax.tree.map(lambda v: jax.device_put(v, rows), data)
    x0 = jax.device_put(x0, whole)

    def run(x0, data):
        return jaxsolve.solve(solver, x0, data, **solve_kwargs)

    # per-client state ((n, ...) tables, snapshots, controls) lives with its clients, also
    # where nothing in the data forces it (SCAFFOLD's controls start as zeros)
    per_client = lambda leaf: rows if leaf.ndim >= 2 and leaf.shape[0] == n else whole
    shapes = jax.eval_shape(run, x0, data)
    out = jax.tree.map(lambda _: whole, shapes)._replace(
        state=jax.tree.map(per_client, shapes.state)
    )
    return jax.jit(run, out_shardings=out)(x0, data)
