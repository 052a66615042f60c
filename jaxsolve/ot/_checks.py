"""Input checks of grid densities, grids and weights, shared by `barycenter` and `w2`.

Errors name the argument and, where the shape is ambiguous, say how the array was read.
Values are checked only when concrete (under tracing only shapes and dtypes are).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_not_half, is_concrete
from jaxsolve.ot.grid import Grid

__all__ = ["check_densities", "check_grid", "check_weights"]


def check_densities(name, densities, *, batch: bool):
    """``densities`` as a checked array: float32/64, a 1- to 3-d grid, finite, >= 0, mass > 0."""
    arr = jnp.asarray(densities)
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        raise TypeError(
            f"{name} must be a floating-point array, got dtype {arr.dtype}; convert it with "
            f"jnp.asarray({name}, dtype=jnp.float32) (or float64)"
        )
    check_not_half(name, arr, "the barycenter's FFT Poisson solves run in float32 or float64 only")
    lo = 2 if batch else 1
    if 0 in arr.shape:
        raise ValueError(f"{name} is empty (shape {arr.shape}): give at least one density")
    if not lo <= arr.ndim <= lo + 2:
        want = "(m, *grid_shape) with a 1-, 2- or 3-d grid" if batch else "a 1-, 2- or 3-d grid"
        raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if is_concrete(arr):
        a = np.asarray(arr)
        if np.any(np.isnan(a)) or np.any(np.isinf(a)):
            raise ValueError(f"{name} contains NaN or Inf")
        if np.any(a < 0):
            raise ValueError(f"{name} must be nonnegative (min {a.min():.3g})")
        mass = a.reshape(a.shape[0], -1).sum(1) if batch else np.asarray([a.sum()])
        if np.any(mass <= 0):
            which = int(np.argmin(mass))
            hint = ""
            if batch and arr.ndim == 2:
                hint = (
                    f" ({name} of shape {arr.shape} is read as {arr.shape[0]} 1-D densities "
                    f"of {arr.shape[1]} cells; for one 2-D density pass {name}[None], shape "
                    f"(1, {arr.shape[0]}, {arr.shape[1]}))"
                )
            raise ValueError(
                f"{name}[{which}] has zero total mass{hint}"
                if batch
                else f"{name} has zero total mass"
            )
    return arr


def check_grid(name, grid, shape):
    """``grid`` as a `Grid` (``Grid(shape)`` when None), checked to match ``shape``."""
    if grid is None:
        return Grid(shape)
    if not isinstance(grid, Grid):
        grid = Grid(grid)
    if grid.shape != tuple(shape):
        raise ValueError(
            f"{name} lives on a grid of shape {tuple(shape)}, but grid is {grid.shape}"
        )
    return grid


def check_weights(weights, m, dtype):
    """``weights`` as a checked ``(m,)`` probability vector in ``dtype`` (uniform when None)."""
    if weights is None:
        return jnp.full((m,), 1.0 / m, dtype)
    w = jnp.asarray(weights)
    if w.ndim != 1 or w.shape[0] != m:
        raise ValueError(f"weights must have shape ({m},) (one per density), got {w.shape}")
    if is_concrete(w):
        a = np.asarray(w, dtype=np.float64)
        if np.any(np.isnan(a)):
            raise ValueError("weights contain NaN")
        if np.any(a < 0):
            raise ValueError(f"weights must be nonnegative, got {a}")
        if abs(a.sum() - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to one, got sum {a.sum():.8g}")
    return w.astype(dtype)
