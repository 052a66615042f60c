import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

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


def _pytree_root_problem():
    # F(x, theta) = 0 for a pytree iterate of mixed shapes. theta enters only F["w"], so
    # the right-hand side -dF/dtheta is identically zero in the "m" and "s" leaves; "m"
    # is decoupled (zero derivative), "s" is coupled to "w" (nonzero derivative).
    A = jnp.asarray([[3.0, 1.0], [1.0, 2.0]])
    C = jnp.asarray([[0.5, -1.0], [2.0, 0.3]])

    def F(x, theta):
        w, m, s = x["w"], x["m"], x["s"]
        return {
            "w": A @ w + 0.1 * jnp.tanh(w) + 0.2 * s - theta,
            "m": m + 0.1 * m**3 - C,
            "s": 2.0 * s + 0.1 * s**3 - jnp.sum(w**2),
        }

    def newton(x0, theta):
        flat0, unravel = ravel_pytree(x0)
        Fflat = lambda v: ravel_pytree(F(unravel(v), theta))[0]
        step = lambda _, v: v - jnp.linalg.solve(jax.jacfwd(Fflat)(v), Fflat(v))
        return unravel(jax.lax.fori_loop(0, 40, step, flat0))

    x0 = {"w": jnp.zeros(2), "m": jnp.ones((2, 2)), "s": jnp.asarray(0.0)}
    return F, newton, x0


def test_custom_root_pytree_with_identically_zero_leaf_of_dF_dtheta():
    # grad used to fail (AssertionError in custom_linear_solve's transpose): the zero
    # leaves of the right-hand side were constants, not linear in the tangents
    F, newton, x0 = _pytree_root_problem()
    solver = custom_root(F)(newton)
    loss = lambda t: sum(jnp.sum(leaf) for leaf in jax.tree.leaves(solver(x0, t)))

    eps = 1e-6

    @jax.jit  # one compilation: jvp, grad, and the solver at finite-difference points
    def derivatives(t, dt):
        # central finite differences of the plain solver along dt, e_1, e_2
        dirs = jnp.stack([dt, jnp.asarray([1.0, 0.0]), jnp.asarray([0.0, 1.0])])
        xs = jax.vmap(newton, in_axes=(None, 0))(
            x0, jnp.concatenate([t + eps * dirs, t - eps * dirs])
        )
        fd = jax.tree.map(lambda leaf: (leaf[:3] - leaf[3:]) / (2 * eps), xs)
        return jax.jvp(lambda t: solver(x0, t), (t,), (dt,))[1], jax.grad(loss)(t), fd

    jv, g, fd = derivatives(jnp.asarray([1.0, -0.5]), jnp.asarray([0.3, 0.7]))
    assert float(jnp.max(jnp.abs(fd["m"]))) == 0.0 and abs(float(fd["s"][0])) > 1e-2
    for k in ("w", "m", "s"):  # forward mode
        np.testing.assert_allclose(jv[k], fd[k][0], rtol=1e-6, atol=1e-10)
    fd_grad = sum(jnp.sum(leaf[1:].reshape(2, -1), axis=1) for leaf in jax.tree.leaves(fd))
    np.testing.assert_allclose(g, fd_grad, rtol=1e-6)  # reverse mode
