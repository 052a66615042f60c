r"""Grid building blocks for quadratic-cost optimal transport, all pure and jit/vmap-able.

* `legendre` - the discrete Legendre transform $u^*(x) = \max_y\, x\cdot y - u(y)$
  over the grid's cell centres ``y``, separable (one 1D transform per axis) and linear time
  per line (lower convex hull by a monotone stack, then a merge with the sorted slopes), with
  an $O(n^2)$-per-line brute force kept for tests; it lives in `jaxsolve.ot.legendre` and is
  re-exported here.
* `c_transform` - $f^c(x) = \min_y \tfrac12|x-y|^2 - f(y) = q(x) - (q - f)^*(x)$,
  $q = \tfrac12|x|^2$.
* `transport_map` - $T = \nabla (q - f)^*$, the map of $f^c$
  ($T(x) = x - \nabla f^c(x)$), by finite differences of the conjugate at sub-cell corners.
* `pushforward` - $T_\#\mu$ of a grid histogram, mass conserving (cloud-in-cell).
* `inverse_laplacian` - $(-\Delta)^{-1}$ with Neumann boundary conditions by DCT.

These are the operators of the back-and-forth method (Jacobs & Léger, Numer. Math. 2020) used
by Sobolev gradient ascent (Kim, Zhou, Zhu & Chen, "Sobolev Gradient Ascent for Optimal
Transport: Barycenter Optimization and Convergence Analysis", ICLR 2026, arXiv:2505.13660).
"""

from __future__ import annotations

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxsolve.core.validation import float_dtype
from jaxsolve.ot.grid import Grid
from jaxsolve.ot.legendre import AUTO_BRUTE_MAX, legendre, lower_hull

__all__ = [
    "legendre",
    "c_transform",
    "transport_map",
    "pushforward",
    "inverse_laplacian",
    "neumann_eigenvalues",
]


def half_sq_norm(grid, dtype, queries="centres", sub=1):
    r"""$q(x) = \tfrac12 |x|^2$ at the cell centres, or the ``sub``-refined grid's corners."""
    axes = []
    for n in grid.shape:
        if queries == "centres":
            axes.append((jnp.arange(n, dtype=dtype) + 0.5) / n)
        else:
            axes.append(jnp.arange(sub * n + 1, dtype=dtype) / (sub * n))
    q = 0.0
    for a, x in enumerate(axes):
        shape = [1] * grid.ndim
        shape[a] = -1
        q = q + 0.5 * x.reshape(shape) ** 2
    return q


@partial(jax.jit, static_argnames=("grid", "method"))
def c_transform(
    f: Float[Array, " *grid"], grid: Grid | None = None, *, method: str = "auto"
) -> Float[Array, " *grid"]:
    r"""Discrete c-transform for $c(x, y) = \tfrac12 |x - y|^2$ on the grid's cell centres.

    $f^c(x) = \min_y \tfrac12|x - y|^2 - f(y) = q(x) - (q - f)^*(x)$ with
    $q = \tfrac12|\cdot|^2$: one `legendre` transform (linear time per line).
    """
    grid = Grid(f.shape) if grid is None else grid
    q = half_sq_norm(grid, f.dtype)
    return q - legendre(q - f, grid, method=method)


@partial(jax.jit, static_argnames=("grid", "sub", "method"))
def transport_map(
    f: Float[Array, " *grid"], grid: Grid | None = None, *, sub: int = 1, method: str = "auto"
) -> Float[Array, " *fine d"]:
    r"""The map $T = \nabla (q - f)^*$ of $f^c$ ($T(x) = x - \nabla f^c(x)$).

    The conjugate $\psi = (q - f)^*$ is evaluated at the corners of a ``sub``-times
    refined grid and $T$ at each sub-cell centre is the gradient of the multilinear
    interpolant of $\psi$ there (as in the back-and-forth method). Where the sub-cell lies
    inside one cell of the power diagram, $T$ is exactly a cell centre; across a
    boundary it interpolates between the two, which the cloud-in-cell deposit of
    `pushforward` turns into the fraction of the sub-cell on each side.

    Returns an array of shape ``(*[sub * n_a], d)`` of image points.
    """
    grid = Grid(f.shape) if grid is None else grid
    q = half_sq_norm(grid, f.dtype)
    psi = legendre(q - f, grid, queries="corners", sub=sub, method=method)
    return map_from_conjugate(psi, grid, sub)


def map_from_conjugate(psi, grid, sub):
    """Gradient of the multilinear interpolant of corner values ``psi`` at sub-cell centres."""
    comps = []
    for a in range(grid.ndim):
        g = jnp.diff(psi, axis=a) * (sub * grid.shape[a])
        for b in range(grid.ndim):
            if b != a:
                lo = jax.lax.slice_in_dim(g, 0, g.shape[b] - 1, axis=b)
                hi = jax.lax.slice_in_dim(g, 1, g.shape[b], axis=b)
                g = 0.5 * (lo + hi)
        comps.append(g)
    return jnp.stack(comps, axis=-1)


def refine_histogram(hist, sub):
    """``hist`` on the ``sub``-refined grid, each cell's mass split evenly over its sub-cells."""
    out = hist
    for a in range(hist.ndim):
        out = jnp.repeat(out, sub, axis=a)
    return out / (sub**hist.ndim)


@partial(jax.jit, static_argnames=("grid",))
def pushforward(
    hist: Float[Array, " *grid"], points: Float[Array, " *fine d"], grid: Grid | None = None
) -> Float[Array, " *grid"]:
    r"""Push a grid histogram forward by a map given at (sub-)cell centres; mass conserving.

    ``points`` has shape ``(*[sub * n_a], d)``: the image of each sub-cell centre (``sub = 1``:
    of each cell centre). Each sub-cell carries ``hist[cell] / sub**d`` and deposits it on the
    ``2**d`` nearest cell centres of ``grid`` with multilinear (cloud-in-cell) weights, which sum
    to one: total mass is conserved exactly, an image point on a cell centre lands entirely in
    that cell (so integer-cell translations are exact), and points outside the cube are clipped
    to the boundary cells.
    """
    grid = Grid(hist.shape) if grid is None else grid
    d = grid.ndim
    if points.ndim != d + 1 or points.shape[-1] != d:
        raise ValueError(f"points must have shape (*refined grid, {d}), got {points.shape}")
    sub = points.shape[0] // grid.shape[0]
    if sub < 1 or tuple(points.shape[:-1]) != tuple(sub * n for n in grid.shape):
        raise ValueError(
            f"points must have shape (sub*n_a ..., d) for grid {grid.shape}, got {points.shape}"
        )
    mass = refine_histogram(hist, sub).reshape(-1)
    pts = points.reshape(-1, d)
    idx, frac = [], []
    for a, n in enumerate(grid.shape):
        p = jnp.clip(pts[:, a] * n - 0.5, 0.0, n - 1.0)
        i = jnp.clip(jnp.floor(p), 0, n - 2).astype(jnp.int32)
        idx.append(i)
        frac.append(p - i)
    strides = [int(np.prod(grid.shape[a + 1 :])) for a in range(d)]
    out = jnp.zeros((grid.size,), hist.dtype)
    for corner in itertools.product((0, 1), repeat=d):
        flat = sum((idx[a] + c) * strides[a] for a, c in enumerate(corner))
        w = mass
        for a, c in enumerate(corner):
            w = w * (frac[a] if c else 1.0 - frac[a])
        out = out.at[flat].add(w)
    return out.reshape(grid.shape)


def neumann_eigenvalues(grid: Grid, dtype=None):
    r"""Eigenvalues $\lambda_k = \sum_a 2 n_a^2 (1 - \cos(\pi k_a / n_a))$ of the
    Neumann 2d+1-point Laplacian $-\Delta_h$ (spacing $1/n_a$), in DCT-II order
    (``dtype``: default float64 under x64, else float32)."""
    dtype = float_dtype(dtype)
    lam = 0.0
    for a, n in enumerate(grid.shape):
        shape = [1] * grid.ndim
        shape[a] = -1
        k = jnp.arange(n, dtype=dtype)
        lam = lam + (2.0 * n * n * (1.0 - jnp.cos(jnp.pi * k / n))).reshape(shape)
    return lam


def _periodic_eigenvalues(grid: Grid, dtype):
    """Eigenvalues of the periodic Laplacian on the mirrored grid, in ``rfftn`` layout."""
    lam = 0.0
    d = grid.ndim
    for a, n in enumerate(grid.shape):
        shape = [1] * d
        shape[a] = -1
        k = jnp.arange(n + 1 if a == d - 1 else 2 * n, dtype=dtype)
        lam = lam + (2.0 * n * n * (1.0 - jnp.cos(jnp.pi * k / n))).reshape(shape)
    return lam


def inverse_laplacian_batched(r, grid):
    """`inverse_laplacian` (Neumann, zero mean) of ``r`` on ``grid``, unjitted and batched.

    Batched over leading axes; the grid axes are the trailing ``grid.ndim`` axes.
    """
    d = grid.ndim
    axes = tuple(range(r.ndim - d, r.ndim))
    ext = r
    for a in axes:  # even (half-sample) reflection: the DCT-II of r is the FFT of ext
        ext = jnp.concatenate([ext, jnp.flip(ext, a)], axis=a)
    lam = _periodic_eigenvalues(grid, r.dtype)
    c = jnp.fft.rfftn(ext, axes=axes)
    c = jnp.where(lam > 0, c / jnp.where(lam > 0, lam, 1.0), 0.0)
    out = jnp.fft.irfftn(c, s=ext.shape[r.ndim - d :], axes=axes)
    for a, n in zip(axes, grid.shape, strict=True):
        out = jax.lax.slice_in_dim(out, 0, n, axis=a)
    return out.astype(r.dtype)


@partial(jax.jit, static_argnames=("grid",))
def inverse_laplacian(
    r: Float[Array, " *grid"], grid: Grid | None = None
) -> Float[Array, " *grid"]:
    r"""Solve $-\Delta_h u = r - \bar r$ with Neumann boundary conditions, $\bar u = 0$.

    $\Delta_h$ is the standard (2d+1)-point Laplacian with spacing $1/n_a$ and
    reflecting (Neumann) boundaries, diagonalized by the DCT-II (eigenvalues
    `neumann_eigenvalues`; the constant mode is dropped). The DCT-II of ``r`` is computed
    as the real FFT of its even reflection (``2n_a`` points per axis), on which the Neumann
    Laplacian is the periodic one with the same eigenvalues
    $2 n_a^2 (1 - \cos(\pi k_a / n_a))$; this is several times faster than
    ``jax.scipy.fft.dctn`` on CPU. $O(N \log N)$. This is the Riesz map of the
    homogeneous Sobolev space $\dot H^1$ used by SGA/BFM.
    """
    grid = Grid(r.shape) if grid is None else grid
    return inverse_laplacian_batched(r, grid)


def _laguerre_intervals_1d(u):
    r"""Right ends $s_j$ (``j < n - 1``) of the Laguerre intervals of the atoms.

    The set of ``x`` whose maximizer of $x y_k - u_k$ lies among ``y_0..y_j`` is
    $[0, s_j]$, $s_j$ the slope of the lower convex hull of ``u`` over
    $[y_j, y_{j+1}]$ (the hull is linear between consecutive atoms), clipped to
    $[0, 1]$: $s_j = \max_{a \le j} \min_{b > j} (u_b - u_a)/(y_b - y_a)$
    (the hull edge over the gap is the tangent from its left end to the right points,
    and any other left point is above it). ``u`` has shape ``(L, n)``. Up to
    ``AUTO_BRUTE_MAX`` points this dense $O(n^2)$ form (compiles and runs fast,
    as the brute Legendre transform), beyond it the hull's vertices. Differentiable in
    ``u`` (the active pair is a constant of the derivative).
    """
    L, n = u.shape
    pos = jnp.arange(n)
    if n <= AUTO_BRUTE_MAX:
        gap = pos[None, :] - pos[:, None]  # b - a
        safe = jnp.where(gap > 0, gap, 1).astype(u.dtype)
        slope = jnp.where(gap > 0, (u[:, None, :] - u[:, :, None]) * n / safe, jnp.inf)
        right = jax.lax.cummin(slope, axis=2, reverse=True)[:, :, 1:]  # [a, j]: min_{b > j}
        left_ok = pos[:, None] <= pos[None, :-1]  # a <= j
        s = jnp.max(jnp.where(left_ok, right, -jnp.inf), axis=1)
        return jnp.clip(s, 0.0, 1.0)
    stack, top = lower_hull(jax.lax.stop_gradient(u))
    slot = jnp.where(pos[None, :] < top[:, None], stack, n)  # unused slots -> a dummy column
    vertex = jnp.zeros((L, n + 1), bool).at[jnp.arange(L)[:, None], slot].set(True)[:, :n]
    left = jax.lax.cummax(jnp.where(vertex, pos, -1), axis=1)[:, :-1]  # last vertex <= j
    right = jax.lax.cummin(jnp.where(vertex, pos, n), axis=1, reverse=True)[:, 1:]  # > j
    du = jnp.take_along_axis(u, right, axis=1) - jnp.take_along_axis(u, left, axis=1)
    return jnp.clip(du * n / (right - left).astype(u.dtype), 0.0, 1.0)


def laguerre_pushforward_1d(u, hist):
    r"""Exact image of cell-uniform 1D densities under the semi-discrete map of ``u``.

    ``u = q - f`` (shape ``(L, n)``, values at the cell centres ``y_j``) and ``hist``
    (shape ``(L, n)``, masses of densities uniform on each cell). The map sends ``x`` to
    the maximizer of $x y_j - u_j$, so the image puts mass
    $F(s_j) - F(s_{j-1})$ on $y_j$ (`_laguerre_intervals_1d`; ``F`` the
    piecewise linear CDF of the density). This is the supergradient of the semi-discrete
    dual. A cloud-in-cell deposit of the finite-difference map (`pushforward`) equals it
    only where each sub-cell's image spans at most two neighbouring cells; elsewhere it
    collapses the sub-cell onto the cells around its mean image, which gave Dirac inputs
    a spurious fixed point (all pushforwards equal, on the wrong cells).
    """
    L, n = u.shape
    dtype = u.dtype
    t = _laguerre_intervals_1d(u) * n  # in cell units
    k = jnp.clip(jnp.floor(jax.lax.stop_gradient(t)), 0, n - 1).astype(jnp.int32)
    cdf = jnp.cumsum(hist, axis=1) - hist  # mass left of cell k
    G = jnp.take_along_axis(cdf, k, axis=1) + (t - k) * jnp.take_along_axis(hist, k, axis=1)
    G = jnp.concatenate([jnp.zeros((L, 1), dtype), G, jnp.sum(hist, axis=1, keepdims=True)], 1)
    return jnp.diff(G, axis=1)


def laguerre_plan_cost_1d(u, hist):
    r"""Cost $\int |x - T(x)|^2 d\mu(x)$ of the plan of `laguerre_pushforward_1d`.

    The exact semi-discrete cost for densities uniform on each cell (cell ``k``'s part in
    the Laguerre interval of ``y_j`` goes to ``y_j``). Shapes ``(L, n)``; returns ``(L,)``.
    """
    L, n = u.shape
    dtype = u.dtype
    s = _laguerre_intervals_1d(u)
    lo = jnp.concatenate([jnp.zeros((L, 1), dtype), s], axis=1)  # interval of y_j
    hi = jnp.concatenate([s, jnp.ones((L, 1), dtype)], axis=1)
    e0 = jnp.arange(n, dtype=dtype) / n  # cell k is [e0_k, e0_k + 1/n]
    a = jnp.maximum(e0[None, :, None], lo[:, None, :])  # (L, cell k, atom j)
    b = jnp.minimum(e0[None, :, None] + 1.0 / n, hi[:, None, :])
    y = (jnp.arange(n, dtype=dtype) + 0.5) / n
    moment = ((b - y) ** 3 - (a - y) ** 3) / 3 * n  # per unit mass of cell k
    return jnp.einsum("lk,lkj->l", hist, jnp.where(b > a, moment, 0.0))


def plan_cost(hist, pts, grid, sub):
    """Cost sum |c(x) - y|^2 of the cloud-in-cell plan from the cell centres c(x) of ``hist``."""
    d = grid.ndim
    mass = refine_histogram(hist, sub).reshape(-1)
    pts = pts.reshape(-1, d)
    centres = jnp.stack(
        jnp.meshgrid(
            *[(jnp.arange(sub * n, dtype=hist.dtype) // sub + 0.5) / n for n in grid.shape],
            indexing="ij",
        ),
        axis=-1,
    ).reshape(-1, d)
    idx, frac = [], []
    for a, n in enumerate(grid.shape):
        p = jnp.clip(pts[:, a] * n - 0.5, 0.0, n - 1.0)
        i = jnp.clip(jnp.floor(p), 0, n - 2)
        idx.append(i)
        frac.append(p - i)
    total = 0.0
    for corner in itertools.product((0, 1), repeat=d):
        w = mass
        dist2 = 0.0
        for a, c in enumerate(corner):
            w = w * (frac[a] if c else 1.0 - frac[a])
            y = (idx[a] + c + 0.5) / grid.shape[a]
            dist2 = dist2 + (centres[:, a] - y) ** 2
        total = total + jnp.sum(w * dist2)
    return total


def cell_potential(psi, grid, sub):
    r"""Cell averages of $f^c = q - \psi$ from corner values of $\psi$ on the
    ``sub``-refined grid (corner means per sub-cell, then sub-cell means per cell): the
    derivative of $\int f^c\, d\mu$ with respect to the mass of a cell-uniform density."""
    fc = half_sq_norm(grid, psi.dtype, "corners", sub) - psi
    for a in range(grid.ndim):
        lo = jax.lax.slice_in_dim(fc, 0, fc.shape[a] - 1, axis=a)
        hi = jax.lax.slice_in_dim(fc, 1, fc.shape[a], axis=a)
        fc = 0.5 * (lo + hi)
    for a, n in enumerate(grid.shape):
        fc = fc.reshape(*fc.shape[:a], n, sub, *fc.shape[a + 1 :]).mean(axis=a + 1)
    return fc
