"""Polytope validation, Ruiz equilibration, violation measure and the solver's bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.layers import Polytope, ProjectionLayer, pinet_projection, project, ruiz_equilibration

A = jnp.asarray(np.random.default_rng(0).standard_normal((2, 4)))
C = jnp.asarray(np.random.default_rng(1).standard_normal((3, 4)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(A=A), "A was given without b"),
        (dict(b=jnp.ones(2)), "b was given without A"),
        (dict(C=C), "C was given without l or u"),
        (dict(l=jnp.ones(3)), "l/u were given without C"),
        (dict(A=A, b=jnp.ones(3)), r"b must have shape \(\.\.\., 2\)"),
        (dict(A=A[None], b=jnp.ones(2)), "A must be a 2-D matrix"),
        (dict(A=A, b=jnp.ones(2), C=C[:, :3], u=jnp.ones(3)), "C has 3 columns"),
        (dict(C=C, l=jnp.ones(3), u=jnp.zeros(3)), "l <= u"),
        (dict(lb=jnp.ones(4), ub=jnp.zeros(4)), "lb <= ub"),
        (dict(A=A, b=jnp.array([1.0, jnp.nan])), "b contains NaN"),
        (dict(A=A, b=jnp.array([1.0, jnp.inf])), "b contains Inf"),
        (dict(A=A.at[0, 0].set(jnp.nan), b=jnp.ones(2)), "A contains NaN or Inf"),
        (dict(lb=jnp.ones(4), ub=jnp.ones(5)), r"ub must have shape \(\.\.\., 4\)"),
        ({}, "at least one constraint"),
    ],
)
def test_polytope_validation_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Polytope(**kwargs)


def test_polytope_rejects_integer_data():
    with pytest.raises(TypeError, match="A"):
        Polytope(A=jnp.ones((2, 4), jnp.int32), b=jnp.ones(2))
    with pytest.raises(TypeError, match="lb"):
        Polytope(lb=jnp.zeros(4, jnp.int32))


def test_project_rejects_bad_input():
    poly = Polytope(A=A, b=jnp.ones(2), lb=-jnp.ones(4))
    y = jnp.zeros(4)
    for call, match in [
        (lambda: project(jnp.zeros(5), poly), r"y must have shape \(\.\.\., 4\)"),
        (lambda: project(jnp.zeros(4, jnp.int32), poly), "floating"),
        (lambda: project(y, poly, max_steps=0), "max_steps"),
        (lambda: project(y, poly, tol=-1.0), "tol"),
        (lambda: project(y, poly, omega=2.5), "omega"),
        (lambda: project(y, poly, sigma=0.0), "sigma"),
        (lambda: project(y, poly, backward="newton"), "backward"),
        (lambda: project(y, poly, warm_start=jnp.zeros(3)), "warm_start"),
        (lambda: project(jnp.zeros((3, 4)), poly.update(b=jnp.ones((2, 2)))), "broadcast"),
        (lambda: project(y, "not a polytope"), "Polytope"),
        (lambda: poly.update(A=A), "update"),
        (lambda: pinet_projection(omega=0.0), "omega"),
        (lambda: ProjectionLayer(A), "Polytope"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            call()


def test_batched_data_and_update_keep_the_factors():
    poly = Polytope(A=A, b=jnp.ones((5, 2)), C=C, u=jnp.ones(3), lb=-jnp.ones((5, 4))).factorize()
    assert (poly.n, poly.p, poly.m, poly.batch_shape) == (4, 2, 3, (5,))
    new = poly.update(b=jnp.zeros((7, 2)), lb=None)
    assert new.factors is poly.factors and new.batch_shape == (7,) and new.lb is None


def test_violation_measure():
    poly = Polytope(
        A=A, b=jnp.ones(2), C=C, l=-jnp.ones(3), u=jnp.ones(3), lb=-jnp.ones(4), ub=jnp.ones(4)
    )
    x = jnp.asarray(np.random.default_rng(3).standard_normal((6, 4))) * 2
    xn, An, Cn = np.asarray(x), np.asarray(A), np.asarray(C)
    want = np.max(
        np.concatenate(
            [
                np.abs(xn @ An.T - 1),
                np.maximum(-1 - xn @ Cn.T, 0),
                np.maximum(xn @ Cn.T - 1, 0),
                np.maximum(-1 - xn, 0),
                np.maximum(xn - 1, 0),
            ],
            axis=1,
        ),
        axis=1,
    )
    np.testing.assert_allclose(np.asarray(poly.violation(x)), want, rtol=1e-12)


def test_ruiz_balances_rows_and_columns():
    rng = np.random.default_rng(4)
    M = jnp.asarray(rng.standard_normal((30, 50)) * np.exp(rng.uniform(-4, 4, (30, 1))))
    d_r, d_c = ruiz_equilibration(M, 25)
    S = d_r[:, None] * M * d_c[None, :]
    rn, cn = jnp.linalg.norm(S, axis=1), jnp.linalg.norm(S, axis=0)
    assert float(rn.max() / rn.min()) < 1.05 and float(cn.max() / cn.min()) < 1.5
    assert float(jnp.linalg.norm(M, axis=1).max() / jnp.linalg.norm(M, axis=1).min()) > 100
    # eager and traced equilibration agree (no data-dependent early exit)
    d_r2, d_c2 = jax.jit(ruiz_equilibration, static_argnums=1)(M, 25)
    np.testing.assert_allclose(np.asarray(d_c2), np.asarray(d_c), rtol=1e-12)
