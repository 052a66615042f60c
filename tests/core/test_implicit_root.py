"""The ``implicit_root`` hook of ``jaxsolve.core.adjoint``: a condition in other unknowns
than ``x`` and at the final state, differentiated by the driver (grad, jvp, vmap)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.core.adjoint import implicit_solution


class _State(NamedTuple):
    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    w: jax.Array  # 2 x, carried as a second unknown
    scale: jax.Array  # a constant of the final state the condition uses


class _Sqrt(jaxsolve.AbstractSolver):
    """Newton for x^2 = a; the condition is in (x, w) with w = 2x."""

    def init(self, x0, a):
        return _State(x0, jnp.int32(0), jnp.abs(x0 * x0 - a), jnp.int32(0), 2 * x0, jnp.ones(()))

    def step(self, s, a):
        x = s.x - (s.x * s.x - a) / (2 * s.x)
        return s._replace(x=x, iter_num=s.iter_num + 1, error=jnp.abs(x * x - a), w=2 * x), None

    def implicit_root(self, state, a):
        z = jnp.stack([state.x, state.w])
        return z, lambda z: state._replace(x=z[0], w=z[1])

    def optimality(self, z, a, state):
        return state.scale * jnp.stack([z[0] * z[0] - a, z[1] - 2 * z[0]])


def _x(a):
    return jaxsolve.solve(_Sqrt(), jnp.asarray(1.0), a, tol=1e-12, max_steps=50).x


def test_grad_jvp_vmap_of_a_condition_in_two_unknowns():
    a = jnp.asarray(2.0)
    want = 0.5 / np.sqrt(2.0)
    assert abs(float(jax.grad(_x)(a)) - want) < 1e-9
    assert abs(float(jax.jvp(_x, (a,), (jnp.ones(()),))[1]) - want) < 1e-9
    w = lambda a: jaxsolve.solve(_Sqrt(), jnp.asarray(1.0), a, tol=1e-12, max_steps=50).state.w
    assert abs(float(jax.grad(w)(a)) - 2 * want) < 1e-9
    g = jax.jit(jax.vmap(jax.grad(_x)))(jnp.asarray([2.0, 4.0]))
    np.testing.assert_allclose(np.asarray(g), 0.5 / np.sqrt([2.0, 4.0]), rtol=1e-9)


def test_implicit_solution_attaches_to_a_batch_computed_elsewhere():
    a = jnp.asarray([2.0, 9.0])

    def batch(a):
        sol = jax.vmap(
            lambda a: jaxsolve.solve(_Sqrt(), jnp.asarray(1.0), a, tol=1e-12, max_steps=50)
        )(jax.lax.stop_gradient(a))
        return implicit_solution(_Sqrt(), a, sol, batch_axes=0).x

    np.testing.assert_allclose(np.asarray(jax.grad(lambda a: batch(a).sum())(a)), 0.5 / np.sqrt(a))
