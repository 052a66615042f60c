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


def test_pot_lp_vs_entropic_dirac_case_matches_the_exact_lp_barycenter():
    """POT's plot_barycenter_lp_vs_entropic "Dirac Data": Diracs at 10/20/30 (1/4, 1/2,
    1/4) and one at 80, weights 1/2: the exact barycenter (the LP's, and the 1D
    quantile average) puts 1/4, 1/2, 1/4 at cells 45, 50, 55. Before the exact 1D
    pushforward it landed W2^2 = 4 cells^2 away."""
    with jax.enable_x64(True):
        a = np.zeros((2, 100))
        a[0, [10, 20, 30]] = 0.25, 0.5, 0.25
        a[1, 80] = 1.0
        ref = np.zeros(100)
        ref[[45, 50, 55]] = 0.25, 0.5, 0.25
        t = np.linspace(0, 1, 4001)[1:-1]

        def w2sq(p, q):  # 1D: the squared L2 distance of the quantile functions
            quant = lambda m: np.searchsorted(np.cumsum(m) / np.sum(m), t)
            return float(np.mean((quant(p) - quant(q)) ** 2))

        w = jnp.array([0.5, 0.5])
        loose = barycenter(jnp.asarray(a), w)
        assert int(loose.status) == Status.SUCCESS
        assert w2sq(np.asarray(loose.x), ref) <= 0.05
        tight = barycenter(jnp.asarray(a), w, tol=1e-9, max_steps=300)
        assert int(tight.status) == Status.SUCCESS
        np.testing.assert_allclose(np.asarray(tight.x), ref, atol=1e-7)
