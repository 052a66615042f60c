"""Riemannian solvers against numpy.linalg.eigh: Rayleigh quotient on the sphere and the
Brockett cost on Stiefel; ARC's iteration bound and second-order stationarity; vmap
equals a loop of runs; one compilation per shape; alternating block updates."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.core import driver
from jaxsolve.manifolds import Product, Sphere, Stiefel, hessian_spectrum
from jaxsolve.riemannian import conjugate_gradient, cubic_newton, gradient_descent, trust_region
from peers.problems.riemannian import (
    brockett,
    brockett_value,
    goe,
    planted,
    planted_brockett,
    rayleigh,
)

SOLVERS = {
    "gradient_descent": gradient_descent,
    "conjugate_gradient": conjugate_gradient,
    "trust_region": trust_region,
    "cubic_newton": cubic_newton,
}


def _solve(name, cost, manifold, x0, args, max_steps=3000):
    return jaxsolve.solve(SOLVERS[name](cost, manifold), x0, args, tol=1e-8, max_steps=max_steps)


def _check_rayleigh(sol, a):
    lam = np.linalg.eigvalsh(np.asarray(a))[0]
    assert int(sol.status) == 0, (int(sol.status), float(sol.error))
    assert float(sol.error) <= 1e-8
    assert abs(float(sol.state.f) - lam) <= 1e-10 * abs(lam)


@pytest.mark.parametrize("name", ["trust_region", "cubic_newton"])
def test_rayleigh_second_order_goe(name):
    n = 100
    a = jnp.asarray(goe(n, 0))
    x0 = Sphere(n).random_point(jax.random.key(0))
    sol = _solve(name, rayleigh, Sphere(n), x0, a, max_steps=200)
    _check_rayleigh(sol, a)
    if name == "cubic_newton":
        assert int(sol.num_steps) <= 30
        # ends where the Riemannian Hessian is positive semidefinite
        spec = hessian_spectrum(rayleigh, Sphere(n), sol.x, a)
        assert spec.min() >= -1e-8, spec.min()
        lam = np.linalg.eigvalsh(np.asarray(a))
        np.testing.assert_allclose(spec.min(), 2 * (lam[1] - lam[0]), rtol=1e-6)


@pytest.mark.parametrize("name", ["gradient_descent", "conjugate_gradient"])
def test_rayleigh_first_order(name):
    n = 100
    a = jnp.asarray(planted(n, 0))
    x0 = Sphere(n).random_point(jax.random.key(1))
    _check_rayleigh(_solve(name, rayleigh, Sphere(n), x0, a), a)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_brockett_stiefel(name):
    n, p = 40, 5
    a = jnp.asarray(planted_brockett(n, p, 0))
    args = (a, jnp.arange(p, 0, -1.0))
    x0 = Stiefel(n, p).random_point(jax.random.key(2))
    sol = _solve(name, brockett, Stiefel(n, p), x0, args)
    ref = brockett_value(np.asarray(a), p)
    assert int(sol.status) == 0 and float(sol.error) <= 1e-8
    assert abs(float(sol.state.f) - ref) <= 1e-10 * abs(ref)
    # the minimizer is the ordered eigenvector basis (up to column signs)
    _, v = np.linalg.eigh(np.asarray(a))
    np.testing.assert_allclose(np.abs(np.asarray(sol.x).T @ v[:, :p]), np.eye(p), atol=1e-7)
    if name == "cubic_newton":
        assert int(sol.num_steps) <= 30
        # second-order stationary: the Riemannian Hessian on the tangent space (dim 185)
        # is positive definite at the ordered eigenbasis (simple spectrum, distinct weights)
        spec = hessian_spectrum(brockett, Stiefel(n, p), sol.x, args)
        assert len(spec) == Stiefel(n, p).dim
        assert spec.min() >= 1e-3, spec.min()


def test_vmap_sixteen_starts_equals_runs_and_compiles_once():
    n = 30
    a = jnp.asarray(goe(n, 3))
    m = Sphere(n)
    x0s = jax.vmap(m.random_point)(jax.random.split(jax.random.key(4), 16))
    solver = trust_region(rayleigh, m)
    run = lambda x0: jaxsolve.solve(solver, x0, a, tol=1e-10, max_steps=100)
    batched = jax.jit(jax.vmap(run))(x0s)
    size = driver._solve_while._cache_size()
    steps = set()
    for i in range(16):
        single = run(x0s[i])
        assert int(single.num_steps) == int(batched.num_steps[i])
        np.testing.assert_allclose(np.asarray(batched.x[i]), np.asarray(single.x), atol=1e-12)
        steps.add(int(single.num_steps))
    assert len(steps) > 1
    # the 15 further single solves reused one compilation; new data and new
    # hyperparameters of the same shapes do not compile again
    assert driver._solve_while._cache_size() == size + 1
    jaxsolve.solve(trust_region(rayleigh, m, kappa=0.2), x0s[0], a + 1.0, tol=1e-10, max_steps=100)
    assert driver._solve_while._cache_size() == size + 1


def test_gd_first_trial_rule_matches_manopt():
    """Step sizes equal the Manopt/pymanopt backtracking rule, re-derived here in NumPy:
    alpha0 = 1/||g|| at the first step, then 2 * optimism (2) * (f_k - f_{k-1}) / (-||g||^2);
    halve while f(R(-alpha g)) > f - 1e-4 alpha ||g||^2 (at most 25 trials); step size
    alpha ||g||. Twelve steps, far above the round-off regime where ours adds a secant step
    (the rule amplifies rounding ~3x per step, so longer runs drift apart bit by bit: on
    one machine the 11th and 12th step sizes differed by 1.7e-8 relative, with XLA's
    code for that CPU; rtol 1e-6 keeps the check sharp, as a wrong rule moves a step by
    2x: the optimism factor, one halving more or less)."""
    n, steps = 8, 12
    a = planted(n, 2)
    x0 = np.asarray(Sphere(n).random_point(jax.random.key(3)))
    f = lambda x: x @ a @ x
    rgrad = lambda x: 2 * (a @ x - (x @ a @ x) * x)
    retract = lambda x, u: (x + u) / np.linalg.norm(x + u)
    x, prev, expected = x0, None, []
    for _ in range(steps):
        f0, g = f(x), rgrad(x)
        nd = np.linalg.norm(g)
        alpha = 1.0 / nd if prev is None else 2 * 2 * (f0 - prev) / (-(nd**2))
        y, trials = retract(x, -alpha * g), 1
        while f(y) > f0 - 1e-4 * alpha * nd**2 and trials <= 25:
            alpha *= 0.5
            y, trials = retract(x, -alpha * g), trials + 1
        expected.append(alpha * nd)
        prev, x = f0, y
    solver = gradient_descent(rayleigh, Sphere(n))
    step = jax.jit(solver.step)
    state, got = solver.init(jnp.asarray(x0), jnp.asarray(a)), []
    for _ in range(steps):
        state, info = step(state, jnp.asarray(a))
        got.append(float(info.step_size))
    assert min(expected) < 0.01 < max(expected)  # the step both shrinks and grows
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_alternating_blocks_on_product():
    """Block Gauss-Seidel on Sphere x Sphere for x^T A x + y^T B y + (x^T C y)^2 / 10."""
    n = 20
    a, b = jnp.asarray(planted(n, 5)), jnp.asarray(planted(n, 6))
    c = jnp.asarray(np.random.default_rng(7).standard_normal((n, n))) / n

    def cost(z, args):
        x, y = z
        a, b, c = args
        return x @ a @ x + y @ b @ y + (x @ c @ y) ** 2 / 10

    m = Product(Sphere(n), Sphere(n))
    z0 = m.random_point(jax.random.key(8))
    alt = jaxsolve.solve(
        gradient_descent(cost, m, alternating=True), z0, (a, b, c), tol=1e-8, max_steps=3000
    )
    ref = jaxsolve.solve(trust_region(cost, m), z0, (a, b, c), tol=1e-10, max_steps=200)
    assert int(alt.status) == 0 and int(ref.status) == 0
    assert abs(float(alt.state.f) - float(ref.state.f)) <= 1e-10 * abs(float(ref.state.f))
    with pytest.raises(ValueError, match="Product"):
        gradient_descent(cost, Sphere(3), alternating=True)


def test_bad_hyperparameters_raise():
    with pytest.raises(ValueError, match="kappa"):
        trust_region(rayleigh, Sphere(3), kappa=-1.0)
    with pytest.raises(ValueError, match="beta_rule"):
        conjugate_gradient(rayleigh, Sphere(3), beta_rule="dai_yuan")
    with pytest.raises(TypeError, match="manifold"):
        cubic_newton(rayleigh, np.eye(3))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOLVERS))
def test_issue_sizes(name):
    """The issue's sizes: Rayleigh on the sphere n=1000, Brockett on Stiefel 200x5 (slow: large
    compiled Krylov bases and thousands of HVPs on this 2-core machine)."""
    n = 1000
    a = jnp.asarray(
        planted(n, 0) if name in ("gradient_descent", "conjugate_gradient") else goe(n, 0)
    )
    sol = _solve(name, rayleigh, Sphere(n), Sphere(n).random_point(jax.random.key(0)), a)
    _check_rayleigh(sol, a)
    if name == "cubic_newton":
        assert int(sol.num_steps) <= 30
        # Hess = 2 (lambda_i - lambda_1) on the tangent space: smallest 2 (lambda_2 - lambda_1)
        lam = np.linalg.eigvalsh(np.asarray(a))
        spec = hessian_spectrum(rayleigh, Sphere(n), sol.x, a)
        np.testing.assert_allclose(spec.min(), 2 * (lam[1] - lam[0]), rtol=1e-6)
    b = jnp.asarray(planted_brockett(200, 5, 1))
    args = (b, jnp.arange(5, 0, -1.0))
    sol = _solve(
        name, brockett, Stiefel(200, 5), Stiefel(200, 5).random_point(jax.random.key(1)), args
    )
    ref = brockett_value(np.asarray(b), 5)
    assert int(sol.status) == 0 and abs(float(sol.state.f) - ref) <= 1e-10 * abs(ref)
    if name == "cubic_newton":
        assert int(sol.num_steps) <= 30
        spec = hessian_spectrum(brockett, Stiefel(200, 5), sol.x, args)
        assert spec.min() >= -1e-8
