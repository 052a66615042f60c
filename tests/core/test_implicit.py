import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.core import custom_fixed_point, custom_root, linear_solve

from ._toy import gd


def _spd(n=4, seed=0):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n, n))
    return jnp.asarray(M @ M.T + n * np.eye(n))


@pytest.mark.parametrize("method", ["dense", "cg", "gmres"])
def test_custom_root_of_iterative_solver_matches_inverse(method):
    A = _spd()

    def optimality(x, A, b):
        return A @ x - b

    @custom_root(optimality, solve=method)
    def solver(x0, A, b):
        return jaxsolve.solve(gd(0.05), x0, (A, b), tol=1e-13, max_steps=20000).x

    b = jnp.arange(1.0, 5.0)
    x0 = jnp.zeros(4)
    # d/db sum(x*(b)) with x = A^{-1} b: A^{-T} 1
    g = jax.grad(lambda bb: jnp.sum(solver(x0, A, bb)))(b)
    np.testing.assert_allclose(g, np.linalg.solve(np.asarray(A).T, np.ones(4)), rtol=1e-9)
    # d/dA of c'x = -x c'A^{-1} ... check against finite differences via jvp
    dA = jnp.asarray(np.random.default_rng(1).normal(size=(4, 4)))
    _, jv = jax.jvp(lambda AA: solver(x0, AA, b), (A,), (dA,))
    x = np.linalg.solve(A, b)
    np.testing.assert_allclose(jv, -np.linalg.solve(A, dA @ x), rtol=1e-8)


def test_custom_fixed_point_known_derivative_and_aux():
    # x = cos(theta * x): dx/dtheta = -x sin(theta x) / (1 + theta sin(theta x))
    T = lambda x, theta: jnp.cos(theta * x)

    @custom_fixed_point(T, has_aux=True)
    def fp(x0, theta):
        def body(carry):
            x, k = carry
            return T(x, theta), k + 1

        x, k = jax.lax.while_loop(lambda c: c[1] < 200, body, (x0, 0))
        return x, {"iters": k}

    theta = jnp.asarray(0.7)
    (x, aux) = fp(jnp.asarray(0.5), theta)
    assert int(aux["iters"]) == 200
    expected = -x * jnp.sin(theta * x) / (1 + theta * jnp.sin(theta * x))
    g = jax.grad(lambda t: fp(jnp.asarray(0.5), t)[0])(theta)
    np.testing.assert_allclose(g, expected, rtol=1e-10)
    # and it agrees with central finite differences of the forward solver
    eps = 1e-6
    fd = (fp(jnp.asarray(0.5), theta + eps)[0] - fp(jnp.asarray(0.5), theta - eps)[0]) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_linear_solve_is_transposable():
    A = _spd(5, 3) + jnp.triu(jnp.ones((5, 5)))  # non-symmetric
    b = jnp.ones(5)
    f = lambda bb: jnp.sum(linear_solve(lambda v: A @ v, bb, method="gmres") ** 2)
    g = jax.grad(f)(b)
    x = np.linalg.solve(A, b)
    np.testing.assert_allclose(g, 2 * np.linalg.solve(np.asarray(A).T, x), rtol=1e-7)


def test_implicit_equals_unrolled_on_gd():
    A = _spd()

    @custom_root(lambda x, b: A @ x - b, solve="cg", symmetric=True)
    def implicit(x0, b):
        return jaxsolve.solve(gd(0.05), x0, (A, b), tol=1e-13, max_steps=20000).x

    unrolled = lambda b: (
        jaxsolve.solve(gd(0.05), jnp.zeros(4), (A, b), loop="fixed", max_steps=3000).x
    )
    b = jnp.asarray([1.0, -2.0, 0.5, 3.0])
    w = jnp.asarray([0.3, 1.0, -1.0, 2.0])
    g1 = jax.grad(lambda bb: w @ implicit(jnp.zeros(4), bb))(b)
    g2 = jax.grad(lambda bb: w @ unrolled(bb))(b)
    np.testing.assert_allclose(g1, g2, rtol=1e-9)
