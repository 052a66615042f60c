"""Regular grids on the unit cube, with cell-centred points."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import float_dtype

__all__ = ["Grid"]


@dataclasses.dataclass(frozen=True)
class Grid:
    r"""A regular grid of ``shape`` cells on the unit cube $[0, 1]^d$, ``d`` = 1, 2 or 3.

    Cell ``(i_1, ..., i_d)`` has centre $((i_1 + 1/2) h_1, \dots, (i_d + 1/2) h_d)$ with
    spacing $h_a = 1/n_a$; axes may have different sizes (non-square grids). A grid
    density is an array of this ``shape``: a histogram (nonnegative masses of the cells) in
    the public functions, which normalize it to unit mass. Internally the solvers use the
    density with respect to Lebesgue measure on the cube, ``hist * grid.size`` (mean 1), as in
    the back-and-forth method (Jacobs & Léger 2020) and SGA (Kim, Zhou, Zhu & Chen, ICLR 2026).

    A ``Grid`` is hashable and static: it is never traced.
    """

    shape: tuple[int, ...]

    def __init__(self, shape):
        if isinstance(shape, int | np.integer):
            shape = (int(shape),)
        try:
            shape = tuple(int(s) for s in shape)
        except TypeError:
            raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
        if not 1 <= len(shape) <= 3:
            raise ValueError(f"shape must have 1, 2 or 3 axes, got {shape}")
        if any(s < 2 for s in shape):
            raise ValueError(f"every axis of shape needs at least 2 cells, got {shape}")
        object.__setattr__(self, "shape", shape)

    @property
    def ndim(self) -> int:
        """Number of axes ``d``."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of cells ``N``."""
        return int(np.prod(self.shape))

    @property
    def spacing(self) -> tuple[float, ...]:
        """Cell widths ``(1/n_1, ..., 1/n_d)``."""
        return tuple(1.0 / n for n in self.shape)

    def axes(self, dtype=None) -> list:
        """Cell-centre coordinates ``(i + 1/2)/n`` of each axis (``dtype``: default float64
        under x64, else float32)."""
        dtype = float_dtype(dtype)
        return [(jnp.arange(n, dtype=dtype) + 0.5) / n for n in self.shape]

    def points(self, dtype=None):
        """Cell centres as an array of shape ``(*shape, d)``."""
        return jnp.stack(jnp.meshgrid(*self.axes(dtype), indexing="ij"), axis=-1)

    def points_flat(self, dtype=np.float64) -> np.ndarray:
        """Cell centres as a NumPy ``(N, d)`` array (row-major order, for reference solvers)."""
        axes = [(np.arange(n, dtype=dtype) + 0.5) / n for n in self.shape]
        return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, self.ndim)
