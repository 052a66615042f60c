"""Test densities with closed-form barycenters and exact (LP) scoring helpers."""

from __future__ import annotations

import numpy as np
import ot

from jaxsolve.ot import Grid


def coverage(grid: Grid, inside, sup: int = 8) -> np.ndarray:
    """Fraction of each cell inside ``inside(points) -> bool`` (anti-aliased raster)."""
    fine = Grid(tuple(sup * n for n in grid.shape))
    pts = fine.points_flat()
    v = inside(pts).astype(float).reshape(fine.shape)
    for a in range(grid.ndim):
        v = v.reshape(*v.shape[:a], grid.shape[a], sup, *v.shape[a + 1 :]).mean(axis=a + 1)
    return v


def ball(grid: Grid, centre, radius, sup: int = 8) -> np.ndarray:
    c = np.asarray(centre, float)
    return coverage(grid, lambda p: np.sum((p - c) ** 2, axis=1) <= radius**2, sup)


def gaussian(grid: Grid, mean, std) -> np.ndarray:
    p = grid.points_flat()
    z = np.sum(((p - np.asarray(mean)) / np.asarray(std)) ** 2, axis=1)
    return np.exp(-0.5 * z).reshape(grid.shape)


def w2sq(a, b, grid: Grid, thresh: float = 0.0) -> float:
    """Exact squared W2 between histograms on the cell centres (POT emd2 on the supports)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    a = np.maximum(a, 0) / np.maximum(a, 0).sum()
    b = np.maximum(b, 0) / np.maximum(b, 0).sum()
    ia = np.flatnonzero(a > thresh)
    ib = np.flatnonzero(b > thresh)
    pts = grid.points_flat()
    M = ot.dist(pts[ia], pts[ib])
    wa, wb = a[ia] / a[ia].sum(), b[ib] / b[ib].sum()
    return float(ot.emd2(wa, wb, M, numItermax=10**8))


def functional(bar, densities, weights, grid: Grid) -> float:
    """sum_i w_i W2^2(mu_i, bar), exactly (LP)."""
    return sum(w * w2sq(mu, bar, grid) for w, mu in zip(weights, densities, strict=True))
