"""A toy solver on the protocol (an ``AbstractSolver`` Module), for testing the driver itself."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core import AbstractSolver, hyper


class GDState(NamedTuple):
    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


class GD(AbstractSolver):
    """Gradient descent on 1/2 x'Ax - b'x (A SPD); ``lr`` is traced."""

    lr: Any = 0.1

    def init(self, x0, args):
        A, b = args
        g = A @ x0 - b
        return GDState(x0, jnp.int32(0), jnp.linalg.norm(g), jnp.int32(0))

    def step(self, state, args):
        A, b = args
        x = state.x - hyper(self.lr, state.x) * (A @ state.x - b)
        err = jnp.linalg.norm(A @ x - b)
        return GDState(x, state.iter_num + 1, err, state.status), None


def gd(lr=0.1):
    """Gradient descent on 1/2 x'Ax - b'x (A SPD)."""
    return GD(lr=lr)
