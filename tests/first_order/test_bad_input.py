"""Projected gradient on hostile input: a clear error naming the argument, or an honest status."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve import projections as P
from jaxsolve.first_order import minimize_projected, projected_gradient


def _quad(x, a):
    return jnp.sum((x - jnp.arange(3.0)) ** 2)


def _box(x):
    return P.box(x, -1.0, 1.0)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: minimize_projected(_quad, _box, jnp.array([1, 0, 0])), TypeError, "x0 must be"),
        (lambda: minimize_projected(_quad, _box, jnp.zeros(0)), ValueError, "x0 has an empty"),
        (lambda: minimize_projected(lambda x, a: x**2, _box, jnp.zeros(3)), ValueError, "fun must"),
        (
            lambda: minimize_projected(_quad, lambda x: x[:2], jnp.zeros(3)),
            TypeError,
            "projection must return a point shaped like x0",
        ),
        (lambda: projected_gradient(_quad, _box, stepsize=-1.0), ValueError, "stepsize"),
        (lambda: projected_gradient(_quad, _box, shrink=1.5), ValueError, "shrink"),
        (lambda: projected_gradient(_quad, _box, restart="sometimes"), ValueError, "restart"),
        (
            lambda: minimize_projected(_quad, _box, jnp.zeros(3), tol=float("nan")),
            ValueError,
            "tol",
        ),
    ],
)
def test_bad_arguments_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_unbounded_near_the_domain_edge_is_not_success():
    """sum(log x) on a box around 0 is unbounded below as x -> 0+: the line search's L
    runs past 1/tiny, where the gradient mapping read 0 (1/L flushed to zero) and the
    solve used to end SUCCESS at x ~ 1e-154."""
    with jax.enable_x64(True):
        sol = minimize_projected(lambda x, a: jnp.sum(jnp.log(x)), _box, -0.5 * jnp.ones(3))
    assert int(sol.status) == Status.BREAKDOWN


def test_start_outside_the_set_is_projected_and_badly_scaled_rows_solve():
    with jax.enable_x64(True):
        target = jnp.array([0.5, 2.0, -3.0])
        sol = minimize_projected(
            lambda x, a: 1e8 * jnp.sum((x - target) ** 2), _box, jnp.full(3, 5.0)
        )
    assert int(sol.status) == Status.SUCCESS
    np.testing.assert_allclose(np.asarray(sol.x), [0.5, 1.0, -1.0], atol=1e-9)
