"""Building blocks of jaxsolve.ot, each against a brute-force or exact reference."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.ot import (
    Grid,
    c_transform,
    inverse_laplacian,
    legendre,
    pushforward,
    transport_map,
)

SHAPES = [(33,), (16, 9), (6, 5, 4)]


def _brute_c_transform(f, grid):
    """O(N^2) reference: f^c(x) = min_y 1/2 |x - y|^2 - f(y) over all pairs of cell centres."""
    p = grid.points_flat()
    cost = 0.5 * np.sum((p[:, None, :] - p[None, :, :]) ** 2, axis=-1)
    return np.min(cost - np.ravel(f)[None, :], axis=1).reshape(grid.shape)


@pytest.mark.parametrize("shape", SHAPES)
def test_c_transform_matches_brute_force(shape):
    grid = Grid(shape)
    rng = np.random.default_rng(0)
    f = rng.normal(size=shape) * 0.05
    ref = _brute_c_transform(f, grid)
    for method in ("hull", "brute"):
        got = c_transform(jnp.asarray(f), grid, method=method)
        np.testing.assert_allclose(np.asarray(got), ref, atol=1e-13, rtol=0)
    got32 = c_transform(jnp.asarray(f, jnp.float32), grid)
    assert got32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got32), ref, atol=2e-6, rtol=0)


@pytest.mark.parametrize("shape", SHAPES)
def test_legendre_hull_equals_brute_on_refined_corners(shape):
    grid = Grid(shape)
    rng = np.random.default_rng(1)
    u = jnp.asarray(rng.normal(size=(2, *shape)))  # a batch of two, folded into the lines
    a = legendre(u, grid, queries="corners", sub=3)
    b = legendre(u, grid, queries="corners", sub=3, method="brute")
    assert a.shape == (2, *[3 * n + 1 for n in shape])
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-13, rtol=0)


def test_legendre_exact_on_quadratics():
    """(q + a.y + b)^* = q(x - a) - b where x - a is a grid point; q is self-conjugate."""
    grid = Grid((20, 12))
    y = grid.points()
    q = 0.5 * jnp.sum(y**2, -1)
    np.testing.assert_allclose(np.asarray(legendre(q, grid)), np.asarray(q), atol=1e-15)
    shift = jnp.asarray([3 / 20, -2 / 12])
    u = q + y @ shift + 0.3
    got = np.asarray(legendre(u, grid))
    want = np.asarray(0.5 * jnp.sum((y - shift) ** 2, -1) - 0.3)
    np.testing.assert_allclose(got[3:, :10], want[3:, :10], atol=1e-14)


def test_c_transform_is_c_concave_projection():
    """f^cc >= f and f^ccc = f^c (a c-transform is c-concave)."""
    grid = Grid((12, 10))
    f = jnp.asarray(np.random.default_rng(2).normal(size=grid.shape) * 0.05)
    fc = c_transform(f, grid)
    fcc = c_transform(fc, grid)
    assert np.all(np.asarray(fcc) >= np.asarray(f) - 1e-14)
    np.testing.assert_allclose(np.asarray(c_transform(fcc, grid)), np.asarray(fc), atol=1e-14)


def test_legendre_jit_vmap():
    grid = Grid((9, 7))
    u = jnp.asarray(np.random.default_rng(3).normal(size=(5, 9, 7)))
    batched = jax.jit(jax.vmap(lambda v: legendre(v, grid)))(u)
    loop = jnp.stack([legendre(v, grid) for v in u])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(loop), atol=1e-15)


@pytest.mark.parametrize("shape", SHAPES)
def test_pushforward_identity_translation_and_mass(shape):
    grid = Grid(shape)
    rng = np.random.default_rng(4)
    hist = jnp.asarray(rng.random(shape))
    hist = hist / hist.sum()
    pts = grid.points()
    np.testing.assert_allclose(
        np.asarray(pushforward(hist, pts, grid)), np.asarray(hist), atol=1e-15
    )
    # integer-cell translation of a density supported away from the far boundary: exact
    shift = [1] * grid.ndim
    h = (
        jnp.zeros(shape)
        .at[tuple(slice(0, n - 1) for n in shape)]
        .set(hist[tuple(slice(0, n - 1) for n in shape)])
    )
    moved = pushforward(h, pts + jnp.asarray(grid.spacing), grid)
    np.testing.assert_allclose(
        np.asarray(moved), np.roll(np.asarray(h), shift, axis=tuple(range(grid.ndim))), atol=1e-15
    )
    # arbitrary maps, including points outside the cube, on a refined sub-grid: mass conserved
    sub = 2
    rand_pts = jnp.asarray(rng.uniform(-0.2, 1.2, size=(*[sub * n for n in shape], grid.ndim)))
    out = pushforward(hist, rand_pts, grid)
    assert float(jnp.min(out)) >= 0.0
    np.testing.assert_allclose(float(out.sum()), 1.0, atol=1e-14)


def test_pushforward_splits_by_distance():
    """A point between two cell centres is split linearly (cloud in cell)."""
    grid = Grid((4,))
    hist = jnp.asarray([0.0, 1.0, 0.0, 0.0])
    pts = grid.points()
    pts = pts.at[1, 0].set(0.375 + 0.25 * 0.25)  # a quarter of the way from cell 1 to cell 2
    np.testing.assert_allclose(
        np.asarray(pushforward(hist, pts, grid)), [0, 0.75, 0.25, 0], atol=1e-15
    )


def test_transport_map_of_a_translation_potential():
    """f(y) = s.y gives T(x) = x + s (integer cells), exactly, away from the far boundary."""
    grid = Grid((16, 12))
    y = grid.points()
    s = jnp.asarray([2 / 16, 3 / 12])
    f = y @ s
    for sub in (1, 2):
        T = transport_map(f, grid, sub=sub)
        fine = Grid((16 * sub, 12 * sub)).points()
        # the image of the sub-cell centre is the centre of the shifted parent cell
        parent = (jnp.floor(fine * jnp.asarray(grid.shape)) + 0.5) / jnp.asarray(grid.shape)
        want = parent + s
        inner = (slice(0, sub * 12), slice(0, sub * 8))
        np.testing.assert_allclose(np.asarray(T[inner]), np.asarray(want[inner]), atol=1e-13)


def _neumann_laplacian(u, grid):
    """-Delta_h u with reflecting boundaries (ghost cells mirror the boundary cell)."""
    out = np.zeros_like(u)
    for a, n in enumerate(grid.shape):
        padded = np.concatenate([np.take(u, [0], axis=a), u, np.take(u, [n - 1], axis=a)], axis=a)
        lo = np.take(padded, range(0, n), axis=a)
        hi = np.take(padded, range(2, n + 2), axis=a)
        out += (2 * u - lo - hi) * n * n
    return out


@pytest.mark.parametrize("shape", [(40,), (24, 17), (8, 6, 10)])
def test_inverse_laplacian_residual(shape):
    grid = Grid(shape)
    r = np.random.default_rng(5).normal(size=shape)
    u = np.asarray(inverse_laplacian(jnp.asarray(r), grid))
    assert abs(u.mean()) < 1e-12
    res = _neumann_laplacian(u, grid) - (r - r.mean())
    assert np.max(np.abs(res)) < 1e-10


def test_grid_validation_and_points():
    g = Grid((4, 6))
    assert g.ndim == 2 and g.size == 24 and g.spacing == (0.25, 1 / 6)
    np.testing.assert_allclose(np.asarray(g.points())[1, 2], [0.375, 2.5 / 6])
    assert Grid(5).shape == (5,)
    for bad in [(1, 4), (2, 2, 2, 2), ()]:
        with pytest.raises(ValueError):
            Grid(bad)
    with pytest.raises(ValueError, match="shape"):
        legendre(jnp.zeros((4, 5)), g)
    with pytest.raises(ValueError, match="method"):
        c_transform(jnp.zeros((4, 6)), g, method="fast")
    with pytest.raises(ValueError, match="points"):
        pushforward(jnp.zeros((4, 6)), jnp.zeros((4, 6, 3)), g)


def test_c_transform_linear_time_scaling():
    """The hull transform does O(n) work per line: its compiled cost grows ~linearly with n."""
    costs = []
    for n in (256, 1024):
        grid = Grid((n,))
        u = jnp.zeros((n,))
        compiled = jax.jit(lambda v, grid=grid: legendre(v, grid, method="hull")).lower(u).compile()
        flops = compiled.cost_analysis()
        flops = flops[0] if isinstance(flops, list | tuple) else flops
        costs.append(flops.get("flops", 0.0) if flops else 0.0)
    if costs[0] > 0:  # XLA reports the scan body once; the per-line table of `brute` is n x n
        assert costs[1] / costs[0] < 8.0


def test_brute_is_quadratic_reference():
    grid = Grid((7,))
    u = jnp.asarray(np.random.default_rng(6).normal(size=7))
    x = (np.arange(7) + 0.5) / 7
    ref = np.max(x[:, None] * x[None, :] - np.asarray(u)[None, :], axis=1)
    for method in ("hull", "brute"):
        np.testing.assert_allclose(np.asarray(legendre(u, grid, method=method)), ref, atol=1e-15)


_ = itertools
