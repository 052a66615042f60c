"""Bad input to the second-order solvers (issue 23), and the minimum-norm promise of
Gauss-Newton with ``damping=0`` on a rank-deficient Jacobian (it returned a least-squares
point that was not the minimum-norm one)."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status
from jaxsolve.second_order import gauss_newton, gn_precondition, gradient_regularized_newton

_rng = np.random.default_rng(0)
# rank 2, 6 x 4 (m > n: the primal form) and its transpose-shaped 3 x 5 (kernel form)
_A = _rng.normal(size=(6, 2)) @ _rng.normal(size=(2, 4))
_A2 = _rng.normal(size=(3, 2)) @ _rng.normal(size=(2, 5))


def _lin(x, args):
    A, b = args
    return A @ x - b


@pytest.mark.parametrize("A", [_A, _A2], ids=["primal", "kernel"])
def test_damping_zero_gives_the_minimum_norm_step(A):
    b = _rng.normal(size=A.shape[0])
    args = (jnp.asarray(A), jnp.asarray(b))
    solver = gauss_newton(_lin, damping=0.0, adaptive=False)
    sol = jaxsolve.solve(solver, jnp.zeros(A.shape[1]), args, tol=1e-10, max_steps=3)
    x_ref = np.linalg.lstsq(A, b, rcond=None)[0]  # the minimum-norm least-squares point
    np.testing.assert_allclose(sol.x, x_ref, rtol=1e-9, atol=1e-10)
    assert int(sol.status) == Status.SUCCESS


@pytest.mark.parametrize("form", ["primal", "kernel"])
def test_precondition_mu_zero_is_the_pseudo_inverse(form):
    J = jnp.asarray(_A)
    u = J.T @ jnp.asarray(_rng.normal(size=6))
    d = gn_precondition(J, u, 0.0, form=form)
    np.testing.assert_allclose(d, np.linalg.pinv(_A.T @ _A) @ np.asarray(u), rtol=1e-8)


ERRORS = [
    ("damping < 0", lambda: gauss_newton(_lin, damping=-1.0), "damping"),
    ("damping 0 adaptive", lambda: gauss_newton(_lin, damping=0.0), "damping"),
    ("residual_fn", lambda: gauss_newton("r"), "residual_fn"),
    (
        "empty residual",
        lambda: jaxsolve.solve(gauss_newton(lambda x, a: x[:0]), jnp.zeros(2), None),
        "residual_fn returned an empty residual",
    ),
    ("gamma0", lambda: gradient_regularized_newton(lambda x, a: x @ x, gamma0=-1.0), "gamma0"),
]


@pytest.mark.parametrize("case,call,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments_are_named(case, call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_nan_start_is_not_success():
    args = (jnp.asarray(_A), jnp.ones(6))
    sol = jaxsolve.solve(gauss_newton(_lin), jnp.full(4, jnp.nan), args, max_steps=5)
    assert int(sol.status) == Status.NONFINITE
    grn = gradient_regularized_newton(lambda x, a: jnp.sum((x - a) ** 4))
    sol = jaxsolve.solve(grn, jnp.full(3, jnp.nan), jnp.ones(3), max_steps=5)
    assert int(sol.status) == Status.NONFINITE


def test_nan_data_is_not_success():
    args = (jnp.asarray(_A), jnp.full(6, jnp.nan))
    sol = jaxsolve.solve(gauss_newton(_lin), jnp.zeros(4), args, max_steps=5)
    assert int(sol.status) != Status.SUCCESS
