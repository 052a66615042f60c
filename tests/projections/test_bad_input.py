"""Bad input to the projections (issue 23): an error naming the argument, or a point on
the set (infinite entries: the projection's limit), or NaN that propagates (never a
point silently off the set)."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import projections as P

_INF = jnp.array([jnp.inf, 0.0, 0.1])

ERRORS = [
    ("simplex int", lambda: P.simplex(jnp.arange(3)), TypeError, "x"),
    ("simplex empty", lambda: P.simplex(jnp.zeros(0)), ValueError, "x must be a non-empty"),
    ("simplex scalar", lambda: P.simplex(jnp.float64(1.0)), ValueError, "x must"),
    ("simplex s<0", lambda: P.simplex(jnp.ones(3), -1.0), ValueError, "s must"),
    ("simplex s nan", lambda: P.simplex(jnp.ones(3), jnp.nan), ValueError, "s contains NaN"),
    ("l1 r<0", lambda: P.l1_ball(jnp.ones(3), -1.0), ValueError, "r must"),
    ("l2 r<0", lambda: P.l2_ball(jnp.ones(3), -1.0), ValueError, "r must"),
    ("l2 int", lambda: P.l2_ball(jnp.arange(3)), TypeError, "x"),
    ("box empty", lambda: P.box(jnp.zeros((0,))), ValueError, "x"),
    ("simplex complex", lambda: P.simplex(jnp.array([1 + 1j, 0j])), TypeError, "x must be real"),
    ("l2 complex", lambda: P.l2_ball(jnp.array([1 + 1j, 0j])), TypeError, "x must be real"),
    ("simplex s inf", lambda: P.simplex(jnp.ones(3), jnp.inf), ValueError, "s must be finite"),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_simplex_with_inf_is_on_the_simplex():
    """simplex([inf, 0, 0.1]) returned all zeros (inf - inf in the sort's threshold)."""
    np.testing.assert_array_equal(P.simplex(_INF), [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(P.simplex(jnp.array([jnp.inf, 1.0, jnp.inf]), 2.0), [1.0, 0, 1.0])
    np.testing.assert_allclose(P.simplex(jnp.array([-jnp.inf, 0.3, 0.1])), [0.0, 0.6, 0.4])
    # every entry -inf returned all zeros, off the simplex
    np.testing.assert_array_equal(P.simplex(jnp.full(4, -jnp.inf), 2.0), [0.5] * 4)


@pytest.mark.parametrize(
    "proj,args,expect",
    [
        (P.l1_ball, (1.0,), [1.0, 0.0, 0.0]),
        (P.l2_ball, (2.0,), [2.0, 0.0, 0.0]),
        (P.capped_simplex, (1.0,), [1.0, 0.0, 0.0]),
        (P.capped_simplex, (2.0,), [1.0, 0.45, 0.55]),
        (P.box, (0.0, 1.0), [1.0, 0.0, 0.1]),
    ],
)
def test_infinite_entries_give_the_limit_point(proj, args, expect):
    np.testing.assert_allclose(proj(_INF, *args), expect, atol=1e-12)


@pytest.mark.parametrize("proj", [P.simplex, P.l1_ball, P.l2_ball])
def test_nan_propagates(proj):
    out = np.asarray(proj(jnp.array([jnp.nan, 0.2, 0.3])))
    assert np.isnan(out).any()
