"""Bad input to the manifolds (issue 23): constructors and checks name the argument, a
point off the manifold has a positive residual (what the solvers' start check reads)."""

import jax
import jax.numpy as jnp
import pytest

from jaxsolve.manifolds import (
    RIM,
    DoublyStochastic,
    Oblique,
    Product,
    Sphere,
    Stiefel,
    check_gradient,
    sinkhorn,
)

ERRORS = [
    ("sphere 0", lambda: Sphere(0), ValueError, "shape"),
    ("sinkhorn zero y", lambda: sinkhorn(jnp.zeros((3, 3))), ValueError, "y must be positive"),
    ("sinkhorn negative y", lambda: sinkhorn(-jnp.ones((3, 3))), ValueError, "y must be positive"),
    ("sinkhorn max_iter 0", lambda: sinkhorn(jnp.ones((3, 3)), max_iter=0), ValueError, "max_iter"),
    ("sinkhorn tol nan", lambda: sinkhorn(jnp.ones((3, 3)), tol=jnp.nan), ValueError, "tol"),
    ("stiefel p > n", lambda: Stiefel(2, 3), ValueError, "p <= n"),
    ("stiefel float n", lambda: Stiefel(3.0, 2), ValueError, "n must"),
    ("doubly stochastic 0", lambda: DoublyStochastic(0), ValueError, "n must"),
    ("rim lower > upper", lambda: RIM(10, 3, 5.0, 1.0), ValueError, "lower"),
    ("product empty", lambda: Product(()), ValueError, "at least one"),
    ("product member", lambda: Product((Sphere(3), 4)), TypeError, r"manifolds\[1\]"),
    (
        "random_point int dtype",
        lambda: Sphere(3).random_point(jax.random.key(0), jnp.int32),
        TypeError,
        "dtype",
    ),
    (
        "check_gradient x shape",
        lambda: check_gradient(lambda x, a: x @ x, Sphere(3), jnp.zeros(4)),
        ValueError,
        "x must have shape",
    ),
    (
        "check_gradient manifold",
        lambda: check_gradient(lambda x, a: x @ x, "sphere", jnp.zeros(3)),
        TypeError,
        "manifold",
    ),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()


@pytest.mark.parametrize(
    "manifold,x",
    [
        (Sphere(3), jnp.zeros(3)),
        (Sphere(3), jnp.array([2.0, 0.0, 0.0])),
        (Stiefel(3, 2), jnp.ones((3, 2))),
        (Oblique(3, 2), jnp.zeros((3, 2))),
        (DoublyStochastic(3), jnp.zeros((3, 3))),
    ],
)
def test_points_off_the_manifold_have_a_positive_residual(manifold, x):
    assert float(manifold.residual(x)) >= 0.5
    assert float(manifold.residual(manifold.random_point(jax.random.key(0)))) <= 1e-9
