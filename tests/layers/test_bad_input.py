"""Bad input to the Pinet projection layer (issue 23): errors that name the argument or
honest statuses; a badly scaled row no longer hides a violated bound behind the polish
(SUCCESS came with x = 1.0056 above its bound 1), and an equality-only polytope polishes
(it crashed with a zero-size reduction)."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve.layers import Polytope, project

_rng = np.random.default_rng(0)
_N, _M = 6, 4
_C = _rng.normal(size=(_M, _N))
_Y = 3 * _rng.normal(size=(8, _N))


def _box_poly(scale):
    s = np.ones(_M)
    s[0] = scale
    return Polytope(
        C=jnp.asarray(_C * s[:, None]),
        l=jnp.asarray(-s),
        u=jnp.asarray(s),
        lb=-jnp.ones(_N),
        ub=jnp.ones(_N),
    )


def _violation(x):
    cx = np.asarray(x) @ _C.T
    rows = np.maximum(cx - 1, 0) + np.maximum(-1 - cx, 0)
    return max(rows.max(), np.maximum(np.abs(np.asarray(x)) - 1, 0).max())


@pytest.mark.parametrize("polish", [True, False])
def test_row_scaled_1e8_success_is_feasible_and_equals_the_unscaled_projection(polish):
    x_ref = project(jnp.asarray(_Y), _box_poly(1.0)).x
    sol = project(jnp.asarray(_Y), _box_poly(1e8), polish=polish)
    x = sol.x
    ok = np.asarray(sol.status) == Status.SUCCESS
    assert ok.all()
    assert _violation(x) <= 1e-6
    np.testing.assert_allclose(np.asarray(x), np.asarray(x_ref), atol=1e-5)


def test_equality_only_polytope_polishes():
    A = _rng.normal(size=(2, _N))
    sol = project(jnp.asarray(_Y), Polytope(A=jnp.asarray(A), b=jnp.ones(2)))
    x = sol.x
    assert (np.asarray(sol.status) == Status.SUCCESS).all()
    # the projection onto an affine set in closed form
    ref = _Y - (_Y @ A.T - 1) @ np.linalg.solve(A @ A.T, A)
    np.testing.assert_allclose(np.asarray(x), ref, atol=1e-10)


ERRORS = [
    ("lb > ub", lambda: Polytope(lb=jnp.ones(3), ub=jnp.zeros(3)), ValueError, "lb|ub"),
    ("l > u", lambda: Polytope(C=jnp.eye(3), l=jnp.ones(3), u=jnp.zeros(3)), ValueError, "l|u"),
    ("b without A", lambda: Polytope(b=jnp.ones(2)), ValueError, "A"),
    ("nan C", lambda: Polytope(C=jnp.full((2, 3), jnp.nan), u=jnp.ones(2)), ValueError, "C"),
    ("short b", lambda: Polytope(A=jnp.eye(3), b=jnp.ones(2)), ValueError, "b"),
    ("y shape", lambda: project(jnp.ones((2, 5)), _box_poly(1.0)), ValueError, "y"),
    ("int y", lambda: project(jnp.ones((2, _N), jnp.int32), _box_poly(1.0)), TypeError, "y"),
    ("not a polytope", lambda: project(jnp.ones((2, _N)), "box"), TypeError, "polytope"),
    (
        "float16 C",
        lambda: Polytope(C=jnp.ones((1, 3), jnp.float16), l=-jnp.ones(1), u=jnp.ones(1)),
        TypeError,
        "C has dtype float16",
    ),
    ("complex A", lambda: Polytope(A=jnp.ones((1, 3), complex), b=jnp.ones(1)), TypeError, "A"),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_nan_y_is_not_success_and_other_lanes_are_kept():
    y = jnp.asarray(_Y).at[0, 0].set(jnp.nan)
    sol = project(y, _box_poly(1.0))
    st = np.asarray(sol.status)
    assert st[0] != Status.SUCCESS
    assert (st[1:] == Status.SUCCESS).all()


def test_infeasible_polytope_is_not_success():
    P = Polytope(
        C=jnp.ones((1, _N)),
        l=jnp.asarray([100.0]),
        u=jnp.asarray([200.0]),
        lb=-jnp.ones(_N),
        ub=jnp.ones(_N),
    )
    sol = project(jnp.asarray(_Y), P)
    assert (np.asarray(sol.status) != Status.SUCCESS).all()
