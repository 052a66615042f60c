"""Batched and multi-device solves: ``vmap`` over problems, sharded over a device mesh.

``solve_batch`` is ``jax.vmap(jaxsolve.solve)`` in one compiled call, optionally
with the batch axis laid out over devices with ``NamedSharding`` (no ``pmap``):
each device runs its share of the lanes; finished lanes stay frozen, so the answer
is the same on one device or many.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxsolve.core.driver import Solution, default_tol, solve
from jaxsolve.core.protocol import Solver
from jaxsolve.core.validation import check_floating

__all__ = ["solve_batch", "batch_mesh"]


def batch_mesh(devices=None, axis_name: str = "batch") -> Mesh:
    """A 1-D mesh over ``devices`` (default: all devices) for sharding a batch axis."""
    devs = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devs), (axis_name,))


def _batch_size(x0, args, in_axes) -> int:
    sizes = set()
    for tree, ax in zip((x0, args), in_axes, strict=True):
        if ax is None:
            continue
        for leaf in jax.tree.leaves(tree):
            if np.ndim(leaf) == 0:
                raise ValueError("batched arguments need a leading batch axis; got a scalar leaf")
            sizes.add(np.shape(leaf)[0])
    if not sizes:
        raise ValueError("solve_batch needs at least one batched argument (in_axes all None)")
    if len(sizes) > 1:
        raise ValueError(f"batched leaves disagree on the batch size: {sorted(sizes)}")
    (size,) = sizes
    if size == 0:
        raise ValueError("empty batch: the leading (batch) axis has size 0")
    return size


def _pad(tree, pad: int):
    return jax.tree.map(lambda v: jnp.concatenate([v, jnp.repeat(v[-1:], pad, axis=0)]), tree)


@partial(jax.jit, static_argnames=("in_axes", "opts"))
def _vsolve(solver, x0, args, tol, in_axes, opts):
    run = lambda x, a: solve(solver, x, a, tol=tol, **dict(opts))
    return jax.vmap(run, in_axes=in_axes)(x0, args)


def solve_batch(
    solver: Solver,
    x0: Any,
    args: Any,
    *,
    in_axes: tuple = (0, 0),
    mesh: Mesh | None = None,
    tol: float | None = None,
    max_steps: int = 1000,
    loop: str = "while",
    history: bool = False,
) -> Solution:
    """Solve a batch of problems in one compiled call, optionally sharded over devices.

    Args:
        solver: the :class:`~jaxsolve.Solver` shared by all problems.
        x0: initial iterates (leading batch axis unless ``in_axes[0]`` is None).
        args: problem data; ``in_axes`` says which of ``(x0, args)`` carry a
            leading batch axis (``(None, 0)``: one shared start, batched data).
        in_axes: a pair of 0/None for ``(x0, args)``.
        mesh: a 1-D :class:`jax.sharding.Mesh` (see :func:`batch_mesh`). The batch is
            padded to a multiple of the number of devices (copies of the last
            problem, dropped from the result) and laid out with
            ``NamedSharding(mesh, PartitionSpec(axis))``.
        tol: as in :func:`jaxsolve.solve`.
        max_steps: as in :func:`jaxsolve.solve`.
        loop: as in :func:`jaxsolve.solve`.
        history: as in :func:`jaxsolve.solve`.

    Returns:
        A :class:`~jaxsolve.Solution` whose leaves have the batch axis first. Equal,
        lane for lane, to a loop of single solves.
    """
    in_axes = tuple(in_axes)
    if len(in_axes) != 2 or any(a not in (0, None) for a in in_axes):
        raise ValueError(f"in_axes must be a pair of 0/None for (x0, args), got {in_axes}")
    check_floating("x0", x0)
    size = _batch_size(x0, args, in_axes)
    if tol is None:
        tol = default_tol(x0)
    opts = (("max_steps", int(max_steps)), ("loop", loop), ("history", bool(history)))
    pad = 0
    if mesh is not None:
        if len(mesh.axis_names) != 1:
            raise ValueError("mesh must be one-dimensional (use batch_mesh())")
        ndev = mesh.devices.size
        pad = (-size) % ndev
        sharding = NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))
        replicated = NamedSharding(mesh, PartitionSpec())
        place = []
        for tree, ax in zip((x0, args), in_axes, strict=True):
            if ax is None:
                place.append(jax.device_put(tree, replicated))
            else:
                place.append(jax.device_put(_pad(tree, pad) if pad else tree, sharding))
        x0, args = place
    sol = _vsolve(solver, x0, args, jnp.asarray(tol), in_axes, opts)
    if pad:
        sol = jax.tree.map(lambda v: v[:size], sol)
    return sol
