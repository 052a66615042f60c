"""Black-box family on hostile input: errors that name the argument."""

import warnings

import jax
import jax.numpy as jnp
import pytest

import jaxsolve
from jaxsolve import blackbox as B


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: jaxsolve.solve(
                B.cma_es_solver(lambda x, a: jnp.sum(x**2), 3), jnp.zeros(4), None, max_steps=5
            ),
            r"x0 must have shape \(3,\)",
        ),
        (lambda: B.UniformBox(jnp.ones(2), jnp.zeros(2)), "lower must be below upper"),
        (lambda: B.UniformBox(jnp.zeros(2), jnp.ones(3)), "lower and upper must have one shape"),
        (lambda: B.vendi_score(jnp.ones((4, 2)), 0.0), "bandwidth must be positive"),
        (lambda: B.vendi_score(jnp.ones((0, 2)), 1.0), "X must be a non-empty"),
        (
            lambda: B.fit_descriptors(jnp.ones((10, 3)), jnp.full(10, jnp.nan), 2),
            "fitness has no finite value",
        ),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_archive_default_dtype_follows_x64():
    """The default float is float32 without x64 (no truncation warning), float64 with."""
    archive = B.grid_archive(solution_dim=3, dims=(4, 4), ranges=[(0, 1), (0, 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with jax.enable_x64(False):
            assert archive.init().objective.dtype == jnp.float32
    with jax.enable_x64(True):
        assert archive.init().objective.dtype == jnp.float64
