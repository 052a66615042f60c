"""A toy solver on the protocol, for testing the driver itself."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core import make_solver


class GDState(NamedTuple):
    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


def _init(x0, args, *, hp):
    A, b = args
    g = A @ x0 - b
    return GDState(x0, jnp.int32(0), jnp.linalg.norm(g), jnp.int32(0))


def _step(state, args, *, hp):
    A, b = args
    x = state.x - hp["lr"].astype(state.x.dtype) * (A @ state.x - b)
    err = jnp.linalg.norm(A @ x - b)
    return GDState(x, state.iter_num + 1, err, state.status), None


def gd(lr=0.1):
    """Gradient descent on 1/2 x'Ax - b'x (A SPD)."""
    return make_solver(_init, _step, hp={"lr": lr})
