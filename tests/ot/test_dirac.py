"""Dirac inputs (issue 23; POT's free-support barycenter tests): the 1D barycenter of
one-cell inputs is the one cell at the weighted mean location.

Before the exact 1D pushforward, the cloud-in-cell deposit of the finite-difference map
had a spurious fixed point: all pushforwards equal (error 0, SUCCESS at any tol) with the
mass split over cells 9 and 11 instead of 10 (and 13/14 instead of 14).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve.ot import barycenter


@pytest.mark.parametrize("weights,cell", [((0.5, 0.5), 10), ((0.3, 0.7), 14)])
def test_dirac_barycenter_is_the_weighted_mean_cell(weights, cell):
    with jax.enable_x64(True):
        dens = jnp.zeros((2, 21), jnp.float64).at[0, 0].set(1.0).at[1, 20].set(1.0)
        w = jnp.asarray(weights, jnp.float64)
        loose = barycenter(dens, w)
        assert int(loose.status) == Status.SUCCESS
        assert int(jnp.argmax(loose.x)) == cell and float(loose.x[cell]) >= 0.9
        tight = barycenter(dens, w, tol=1e-9, max_steps=200)
        assert int(tight.status) == Status.SUCCESS
        np.testing.assert_allclose(np.asarray(tight.x), np.eye(21)[cell], atol=1e-6)
