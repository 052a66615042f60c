"""Bad input to the Riemannian solvers (issue 23): a start off the manifold, NaN, a wrong
shape, integer or bad hyperparameters end in an error naming the argument or an honest
non-SUCCESS status (x0 = 0 on the sphere was SUCCESS with |x| = 0)."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status, riemannian
from jaxsolve.manifolds import Sphere, Stiefel

_A = jnp.diag(jnp.arange(1.0, 6.0))
FACTORIES = [
    riemannian.gradient_descent,
    riemannian.trust_region,
    riemannian.conjugate_gradient,
    riemannian.cubic_newton,
]


def _rayleigh(x, a):
    return x @ (a @ x)


def _brockett(x, a):
    return jnp.trace(x.T @ a @ x)


# (name, manifold, cost, x0): starts off the manifold or not finite
OFF = [
    ("sphere x0=0", Sphere(5), _rayleigh, jnp.zeros(5)),
    ("sphere nan", Sphere(5), _rayleigh, jnp.full(5, jnp.nan)),
    ("stiefel not orthonormal", Stiefel(5, 2), _brockett, jnp.ones((5, 2)) / np.sqrt(5)),
]


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("case,manifold,cost,x0", OFF, ids=[c[0] for c in OFF])
def test_start_off_the_manifold_is_not_success(factory, case, manifold, cost, x0):
    sol = jaxsolve.solve(factory(cost, manifold), x0, _A, tol=1e-8, max_steps=50)
    assert int(sol.status) in (Status.BREAKDOWN, Status.NONFINITE), Status(int(sol.status)).name


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
def test_start_on_the_manifold_still_solves(factory):
    x0 = jnp.ones(5) / jnp.sqrt(5.0)
    sol = jaxsolve.solve(factory(_rayleigh, Sphere(5)), x0, _A, tol=1e-7, max_steps=500)
    assert abs(float(_rayleigh(sol.x, _A)) - 1.0) <= 1e-10
    assert abs(float(jnp.linalg.norm(sol.x)) - 1.0) <= 1e-12


ERRORS = [
    ("x0 shape", lambda f: jaxsolve.solve(f(_rayleigh, Sphere(5)), jnp.ones(4) / 2, _A), "x0"),
    ("cost", lambda f: f("not callable", Sphere(5)), "cost"),
    ("manifold", lambda f: f(_rayleigh, "sphere"), "manifold"),
    # complex starts reached jax.grad's raw 'requires real-valued outputs'
    ("x0 complex", lambda f: jaxsolve.solve(f(_rayleigh, Sphere(5)), jnp.ones(5) + 0j, _A), "x0"),
]


def test_sixteen_bit_start_promoted_by_the_data_names_x0():
    """A float16 x0 with float64 data: the step promotes State.x, which the loop cannot
    carry (a raw while_loop carry-type error before); the driver names it and x0."""
    x0 = (jnp.ones(5) / jnp.sqrt(5.0)).astype(jnp.float16)
    solver = riemannian.gradient_descent(_rayleigh, Sphere(5))
    with pytest.raises(TypeError, match=r"State\.x from float16.*x0"):
        jaxsolve.solve(solver, x0, _A)


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("case,call,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments_raise_naming_them(factory, case, call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(factory)
