"""Bad input to regret matching (issue 23): starts off the simplex are projected onto it
(x0 = 0 ended SUCCESS off the simplex), NaN ends NONFINITE, bad arguments are named."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status
from jaxsolve.regret import regret_matching

_Y = jnp.array([0.3, -0.2, 0.9, 0.1])


def _dist(x, y):
    return 0.5 * jnp.sum((x - y) ** 2)


def _ref():
    # the projection of y onto the simplex (sorted threshold, by hand)
    u = np.sort(np.asarray(_Y))[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u * np.arange(1, 5) > css - 1)[0][-1]
    return np.maximum(np.asarray(_Y) - (css[k] - 1) / (k + 1), 0)


@pytest.mark.parametrize(
    "case,x0",
    [
        ("zeros", jnp.zeros(4)),
        ("negative", jnp.array([-1.0, 2.0, 0.5, 0.0])),
        ("unnormalized", jnp.full(4, 3.0)),
    ],
)
def test_start_off_the_simplex_is_projected_and_the_answer_is_on_it(case, x0):
    sol = jaxsolve.solve(regret_matching(_dist), x0, _Y, tol=1e-4, max_steps=20000)
    x = np.asarray(sol.x)
    assert abs(x.sum() - 1) <= 1e-12 and x.min() >= 0
    assert int(sol.status) == Status.SUCCESS
    assert np.max(np.abs(x - _ref())) <= 1e-2


def test_nan_start_is_not_success():
    sol = jaxsolve.solve(regret_matching(_dist), jnp.full(4, jnp.nan), _Y, max_steps=50)
    assert int(sol.status) == Status.NONFINITE


@pytest.mark.parametrize(
    "call,err,match",
    [
        (lambda: regret_matching("f"), TypeError, "fun"),
        (lambda: regret_matching(_dist, variant="x"), ValueError, "variant"),
        (lambda: regret_matching(_dist, alternating=1), TypeError, "alternating"),
        (
            lambda: jaxsolve.solve(regret_matching(_dist), jnp.arange(4), _Y),
            TypeError,
            "x0",
        ),
    ],
)
def test_bad_arguments_are_named(call, err, match):
    with pytest.raises(err, match=match):
        call()
