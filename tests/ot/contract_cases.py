"""Contract cases for jaxsolve.ot (module sobolev: sobolev_barycenter)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import ot

from jaxsolve.ot import Grid, barycenter, sobolev_barycenter
from jaxsolve.testing import SolverCase

N1 = 32


def _problem(key, dtype):
    """Three smooth random 1D densities on 32 cells (bumps at random places and widths)."""
    k1, k2, k3 = jax.random.split(key, 3)
    x = (jnp.arange(N1) + 0.5) / N1
    centres = jax.random.uniform(k1, (3,), minval=0.25, maxval=0.75)
    widths = jax.random.uniform(k2, (3,), minval=0.06, maxval=0.12)
    dens = jnp.exp(-0.5 * ((x[None] - centres[:, None]) / widths[:, None]) ** 2) + 1e-3
    dens = dens / jnp.sum(dens, axis=1, keepdims=True)
    w = jax.random.dirichlet(k3, jnp.full((3,), 3.0))
    return jnp.zeros((3, N1), dtype), (dens.astype(dtype), w.astype(dtype))


def _lp_reference(args):
    dens, w = (np.asarray(a, np.float64) for a in args)
    pts = Grid((N1,)).points_flat()
    M = ot.dist(pts, pts)
    # the contract compares in `compare` space: the CDF of the exact LP barycenter
    return np.cumsum(ot.lp.barycenter(dens.T, M, weights=w / w.sum()))


def _cdf(x):
    return jnp.cumsum(jnp.ravel(x))


def _nan_args(args):
    dens, w = args
    return dens.at[0, 3].set(jnp.nan), w


def _bad_inputs():
    good = np.full((2, 8, 8), 1.0)
    return (
        lambda: barycenter(-good, [0.5, 0.5]),
        lambda: barycenter(good, [0.7, 0.7]),
        lambda: barycenter(good, [1.5, -0.5]),
        lambda: barycenter(np.zeros((2, 8, 8)), [0.5, 0.5]),
        lambda: barycenter([np.ones((8, 8)), np.ones((8, 9))], [0.5, 0.5]),
        lambda: barycenter(np.ones((2, 8, 8), np.int32), [0.5, 0.5]),
        lambda: barycenter(good, [0.5, 0.5], grid=Grid((8, 9))),
        lambda: sobolev_barycenter(stepsize=-1.0),
    )


CASES = [
    SolverCase(
        name="ot.sobolev_barycenter",
        # its eager step compiles every inner loop on each call (10-34 s)
        slow_checks=("jit_equals_eager",),
        make_solver=sobolev_barycenter,
        make_problem=_problem,
        reference=_lp_reference,
        tol=1e-4,
        max_steps=2000,
        # CDFs of the histograms (L2 over 32 cells, ~ W1). The LP barycenter of the 32 atoms
        # is a lumpy vertex, ours the barycenter of cell-uniform densities: they differ by
        # ~1.5e-2 (about one cell); the mixture of the inputs (a wrong answer) is off by ~0.3.
        accuracy=2.5e-2,
        compare=_cdf,
        hyper_variants=({"stepsize": 2.0}, {"stepsize": 1.5, "shrink": 0.6}),
        nan_args=_nan_args,
        bad_inputs=_bad_inputs(),
        float32_tol=2e-3,
    )
]
