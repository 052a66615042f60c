r"""Grid building blocks for quadratic-cost optimal transport, all pure and jit/vmap-able.

* :func:`legendre` - the discrete Legendre transform :math:`u^*(x) = \max_y\, x\cdot y - u(y)`
  over the grid's cell centres ``y``, separable (one 1D transform per axis) and linear time
  per line (lower convex hull by a monotone stack, then a merge with the sorted slopes), with
  an :math:`O(n^2)`-per-line brute force kept for tests.
* :func:`c_transform` - :math:`f^c(x) = \min_y \tfrac12|x-y|^2 - f(y) = q(x) - (q - f)^*(x)`,
  :math:`q = \tfrac12|x|^2`.
* :func:`transport_map` - :math:`T = \nabla (q - f)^*`, the map of :math:`f^c`
  (:math:`T(x) = x - \nabla f^c(x)`), by finite differences of the conjugate at sub-cell corners.
* :func:`pushforward` - :math:`T_\#\mu` of a grid histogram, mass conserving (cloud-in-cell).
* :func:`inverse_laplacian` - :math:`(-\Delta)^{-1}` with Neumann boundary conditions by DCT.

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
from jax.scipy.fft import dctn, idctn
from jaxtyping import Array, ArrayLike, Float

from jaxsolve.ot.grid import Grid

__all__ = [
    "legendre",
    "c_transform",
    "transport_map",
    "pushforward",
    "inverse_laplacian",
    "neumann_eigenvalues",
]

_METHODS = ("hull", "brute")


# ----------------------------------------------------------------------------- 1D transforms
def _hull_1d(u):
    """Lower convex hull of the points ``(j, u[:, j])`` of each line (rows of ``u``).

    Monotone stack in a ``lax.scan`` over the line (Andrew's chain), all lines at once:
    amortized O(n) per line. Returns ``(stack, top)``: the hull vertex indices of line
    ``l`` are ``stack[l, :top[l]]``, increasing.
    """
    L, n = u.shape
    lanes = jnp.arange(L)

    def push(carry, j):
        stack, top = carry
        uj = u[:, j]

        def non_convex(top):
            a = stack[lanes, jnp.maximum(top - 2, 0)]
            b = stack[lanes, jnp.maximum(top - 1, 0)]
            ua, ub = u[lanes, a], u[lanes, b]
            # b is not below the chord a -> j: slope(a, b) >= slope(b, j) (integer abscissae)
            bad = (ub - ua) * (j - b) >= (uj - ub) * (b - a)
            return (top >= 2) & bad

        top = jax.lax.while_loop(
            lambda t: jnp.any(non_convex(t)),
            lambda t: jnp.where(non_convex(t), t - 1, t),
            top,
        )
        stack = stack.at[lanes, top].set(j)
        return (stack, top + 1), None

    init = (jnp.zeros((L, n), jnp.int32), jnp.zeros((L,), jnp.int32))
    (stack, top), _ = jax.lax.scan(push, init, jnp.arange(n, dtype=jnp.int32))
    return stack, top


def _legendre_lines_hull(u, x0, dx, m):
    """``psi[l, i] = max_j x_i y_j - u[l, j]``, ``y_j = (j + 1/2)/n``, ``x_i = x0 + i dx``."""
    L, n = u.shape
    dtype = u.dtype
    stack, top = _hull_1d(u)
    lanes = jnp.arange(L)[:, None]
    k = jnp.arange(1, n)[None, :]  # edge k joins vertices k-1 and k
    v_prev = stack[:, :-1]
    v_next = stack[:, 1:]
    valid = k < top[:, None]
    dy = jnp.where(valid, (v_next - v_prev).astype(dtype), 1.0) / n
    slope = (u[lanes, v_next] - u[lanes, v_prev]) / dy
    # queries x_i < slope_k use a vertex before k; count them and merge by a cumsum (linear)
    first = jnp.clip(jnp.ceil((slope - x0) / dx), 0, m).astype(jnp.int32)
    first = jnp.where(valid, first, m)
    count = jnp.zeros((L, m + 1), jnp.int32).at[lanes, first].add(1)
    seg = jnp.cumsum(count, axis=1)[:, :m]
    v = jnp.take_along_axis(stack, seg, axis=1)
    x = x0 + dx * jnp.arange(m, dtype=dtype)
    y = (v.astype(dtype) + 0.5) / n
    return x[None, :] * y - jnp.take_along_axis(u, v, axis=1)


def _legendre_lines_brute(u, x0, dx, m):
    L, n = u.shape
    dtype = u.dtype
    y = (jnp.arange(n, dtype=dtype) + 0.5) / n
    x = x0 + dx * jnp.arange(m, dtype=dtype)
    return jax.lax.map(
        lambda row: jnp.max(x[:, None] * y[None, :] - row[None, :], axis=1),
        u,
        batch_size=max(1, min(L, (1 << 22) // max(1, m * n))),
    )


def _legendre_axis(u, axis, x0, dx, m, method):
    u = jnp.moveaxis(u, axis, -1)
    lead = u.shape[:-1]
    lines = u.reshape(-1, u.shape[-1])
    fn = _legendre_lines_hull if method == "hull" else _legendre_lines_brute
    out = fn(lines, jnp.asarray(x0, u.dtype), jnp.asarray(dx, u.dtype), m)
    return jnp.moveaxis(out.reshape(*lead, m), -1, axis)


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")


@partial(jax.jit, static_argnames=("grid", "queries", "sub", "method"))
def _legendre_jit(u, grid, queries, sub, method):
    return _legendre(u, grid, queries=queries, sub=sub, method=method)


def legendre(
    u: Float[ArrayLike, " ..."],
    grid: Grid | None = None,
    *,
    queries: str = "centres",
    sub: int = 1,
    method: str = "hull",
) -> Float[Array, " ..."]:
    r"""Discrete Legendre transform :math:`u^*(x) = \max_{y} \langle x, y\rangle - u(y)` on a grid.

    ``y`` runs over the cell centres of ``grid``; :math:`u^*` is computed separably,
    :math:`u^*(x) = \max_{y_1}[x_1 y_1 + \max_{y_2}[x_2 y_2 + \dots - u(y)]]`, one pass of 1D
    transforms per axis (negating in between). With ``method="hull"`` each 1D transform takes
    linear time (lower convex hull by a monotone stack, then merging the hull's edge slopes with
    the sorted queries: Lucet's linear-time Legendre transform, 1997); ``method="brute"`` is the
    :math:`O(n \cdot m)` maximum per line (reference for tests). Both are exact in exact
    arithmetic.

    Args:
        u: values at the cell centres, shape ``grid.shape`` or ``(*batch, *grid.shape)`` (a
            batch is folded into the lines of each pass, which is cheaper than ``vmap``).
        grid: the grid (default ``Grid(u.shape)``).
        queries: ``"centres"`` evaluates at the cell centres; ``"corners"`` at the corners of the
            sub-cells of a ``sub``-times refined grid, ``(sub * n_a + 1)`` points ``j/(sub n_a)``
            per axis (used by :func:`transport_map`).
        sub: refinement factor for ``"corners"``.
        method: ``"hull"`` (linear time) or ``"brute"``.
    """
    _check_method(method)
    if queries not in ("centres", "corners"):
        raise ValueError(f"queries must be 'centres' or 'corners', got {queries!r}")
    grid = Grid(u.shape) if grid is None else grid
    nb = jnp.ndim(u) - grid.ndim
    if nb < 0 or tuple(jnp.shape(u)[nb:]) != grid.shape:
        raise ValueError(
            f"u must have shape (*batch, {', '.join(map(str, grid.shape))}), got {tuple(jnp.shape(u))}"
        )
    return _legendre_jit(jnp.asarray(u), grid, queries, int(sub), method)


def _legendre(u, grid, *, queries="centres", sub=1, method="hull"):
    nb = u.ndim - grid.ndim
    if nb < 0 or tuple(u.shape[nb:]) != grid.shape:
        raise ValueError(
            f"u must have shape (*batch, {', '.join(map(str, grid.shape))}), got {tuple(u.shape)}"
        )
    out = u
    for step, gaxis in enumerate(reversed(range(grid.ndim))):
        axis = nb + gaxis
        n = grid.shape[gaxis]
        if queries == "centres":
            x0, dx, m = 0.5 / n, 1.0 / n, n
        elif queries == "corners":
            x0, dx, m = 0.0, 1.0 / (sub * n), sub * n + 1
        else:
            raise ValueError(f"queries must be 'centres' or 'corners', got {queries!r}")
        out = _legendre_axis(out if step == 0 else -out, axis, x0, dx, m, method)
    return out


def _half_sq_norm(grid, dtype, queries="centres", sub=1):
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
    f: Float[Array, " *grid"], grid: Grid | None = None, *, method: str = "hull"
) -> Float[Array, " *grid"]:
    r"""Discrete c-transform for :math:`c(x, y) = \tfrac12 |x - y|^2` on the grid's cell centres.

    :math:`f^c(x) = \min_y \tfrac12|x - y|^2 - f(y) = q(x) - (q - f)^*(x)` with
    :math:`q = \tfrac12|\cdot|^2`: one :func:`legendre` transform (linear time per line).
    """
    grid = Grid(f.shape) if grid is None else grid
    q = _half_sq_norm(grid, f.dtype)
    return q - legendre(q - f, grid, method=method)


@partial(jax.jit, static_argnames=("grid", "sub", "method"))
def transport_map(
    f: Float[Array, " *grid"], grid: Grid | None = None, *, sub: int = 1, method: str = "hull"
) -> Float[Array, " *fine d"]:
    r"""The map :math:`T = \nabla (q - f)^*` of :math:`f^c` (:math:`T(x) = x - \nabla f^c(x)`).

    The conjugate :math:`\psi = (q - f)^*` is evaluated at the corners of a ``sub``-times
    refined grid and :math:`T` at each sub-cell centre is the gradient of the multilinear
    interpolant of :math:`\psi` there (as in the back-and-forth method). Where the sub-cell lies
    inside one cell of the power diagram, :math:`T` is exactly a cell centre; across a
    boundary it interpolates between the two, which the cloud-in-cell deposit of
    :func:`pushforward` turns into the fraction of the sub-cell on each side.

    Returns an array of shape ``(*[sub * n_a], d)`` of image points.
    """
    grid = Grid(f.shape) if grid is None else grid
    q = _half_sq_norm(grid, f.dtype)
    psi = legendre(q - f, grid, queries="corners", sub=sub, method=method)
    return _map_from_conjugate(psi, grid, sub)


def _map_from_conjugate(psi, grid, sub):
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


def _refine(hist, sub):
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
    mass = _refine(hist, sub).reshape(-1)
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


def neumann_eigenvalues(grid: Grid, dtype=jnp.float64):
    r"""Eigenvalues :math:`\lambda_k = \sum_a 2 n_a^2 (1 - \cos(\pi k_a / n_a))` of the
    Neumann 2d+1-point Laplacian :math:`-\Delta_h` (spacing :math:`1/n_a`), in DCT-II order."""
    lam = 0.0
    for a, n in enumerate(grid.shape):
        shape = [1] * grid.ndim
        shape[a] = -1
        k = jnp.arange(n, dtype=dtype)
        lam = lam + (2.0 * n * n * (1.0 - jnp.cos(jnp.pi * k / n))).reshape(shape)
    return lam


@partial(jax.jit, static_argnames=("grid",))
def inverse_laplacian(
    r: Float[Array, " *grid"], grid: Grid | None = None
) -> Float[Array, " *grid"]:
    r"""Solve :math:`-\Delta_h u = r - \bar r` with Neumann boundary conditions, :math:`\bar u = 0`.

    :math:`\Delta_h` is the standard (2d+1)-point Laplacian with spacing :math:`1/n_a` and
    reflecting (Neumann) boundaries, diagonalized by the orthonormal DCT-II: divide the
    coefficients by :func:`neumann_eigenvalues` and drop the constant mode. :math:`O(N \log N)`.
    This is the Riesz map of the homogeneous Sobolev space :math:`\dot H^1` used by SGA/BFM.
    """
    grid = Grid(r.shape) if grid is None else grid
    lam = neumann_eigenvalues(grid, r.dtype)
    c = dctn(r, norm="ortho")
    c = jnp.where(lam > 0, c / jnp.where(lam > 0, lam, 1.0), 0.0)
    return idctn(c, norm="ortho").astype(r.dtype)
