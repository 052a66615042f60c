r"""The discrete Legendre transform on grids: separable, linear time per line, differentiable.

$u^*(x) = \max_y\, x\cdot y - u(y)$ over a grid's cell centres ``y``, one pass of 1D
transforms per axis. Each 1D transform is either the lower convex hull of the line (a
monotone stack, then a merge with the sorted query slopes: Lucet's linear-time Legendre
transform, 1997) or the dense $O(n m)$ maximum; both are exact in exact arithmetic.
Derivatives follow Danskin's theorem (a ``custom_jvp`` that gathers the maximizer's
tangent). `lower_hull` and ``AUTO_BRUTE_MAX`` are public because the 1D Laguerre cells in
`jaxsolve.ot.transforms` are read off the same hull, with the same dense/hull switch.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsolve.ot.grid import Grid

__all__ = ["legendre", "lower_hull", "AUTO_BRUTE_MAX"]

_METHODS = ("auto", "hull", "brute")
# "auto": the O(n m) brute force is a dense, vectorized max that beats the hull (a scan with a
# data-dependent inner while_loop) on CPU up to at least n = 512 (measured, float32 and 64);
# it also has no while_loop, which keeps vmap cheap
AUTO_BRUTE_MAX = 512


def lower_hull(u):
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


def _hull_index(u, x0, dx, m):
    """Maximizer ``v[l, i] = argmax_j x_i y_j - u[l, j]`` from the lower hull (linear time)."""
    L, n = u.shape
    dtype = u.dtype
    stack, top = lower_hull(u)
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
    return jnp.take_along_axis(stack, seg, axis=1)


def _brute_batch(L, n, m):
    return max(1, min(L, (1 << 22) // max(1, m * n)))


def _brute_rows(u, x0, dx, m, reduce):
    """``reduce(x_j y_k - u_k, axis=1)`` for every row of ``u``: the O(n m)-per-line brute
    force, over the ``m`` points ``x_j = x0 + j dx`` and the cell centres ``y_k``."""
    L, n = u.shape
    dtype = u.dtype
    y = (jnp.arange(n, dtype=dtype) + 0.5) / n
    x = x0 + dx * jnp.arange(m, dtype=dtype)
    return jax.lax.map(
        lambda row: reduce(x[:, None] * y[None, :] - row[None, :], axis=1),
        u,
        batch_size=_brute_batch(L, n, m),
    )


def _brute_index(u, x0, dx, m):
    return _brute_rows(u, x0, dx, m, lambda s, axis: jnp.argmax(s, axis=axis).astype(jnp.int32))


def _values_at(u, v, x0, dx, m):
    n = u.shape[-1]
    dtype = u.dtype
    x = x0 + dx * jnp.arange(m, dtype=dtype)
    y = (v.astype(dtype) + 0.5) / n
    return x[None, :] * y - jnp.take_along_axis(u, v, axis=1)


def _brute_values(u, x0, dx, m):
    return _brute_rows(u, x0, dx, m, jnp.max)


def _resolve(method, n):
    if method == "auto":
        return "brute" if n <= AUTO_BRUTE_MAX else "hull"
    return method


def _line_index(u, x0, dx, m, method):
    fn = _hull_index if _resolve(method, u.shape[-1]) == "hull" else _brute_index
    return fn(jax.lax.stop_gradient(u), x0, dx, m)


@partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3, 4))
def _legendre_lines(u, x0, dx, m, method):
    """``psi[l, i] = max_j x_i y_j - u[l, j]``, ``y_j = (j + 1/2)/n``, ``x_i = x0 + i dx``.

    Differentiable: by Danskin's theorem the derivative of a maximum of affine functions of
    ``u`` is that of the active one, ``d psi[l, i] = -du[l, v[l, i]]`` with ``v`` the maximizer
    (a subgradient at ties). The rule is a ``custom_jvp`` whose tangent is a gather, so JAX
    transposes it (reverse mode) and the index search (hull ``while_loop`` or brute ``argmax``)
    is never differentiated.
    """
    if _resolve(method, u.shape[-1]) == "brute":
        return _brute_values(u, x0, dx, m)
    return _values_at(u, _line_index(u, x0, dx, m, method), x0, dx, m)


@_legendre_lines.defjvp
def _legendre_lines_jvp(x0, dx, m, method, primals, tangents):
    (u,), (du,) = primals, tangents
    v = _line_index(u, x0, dx, m, method)
    return _values_at(u, v, x0, dx, m), -jnp.take_along_axis(du, v, axis=1)


def _legendre_axis(u, axis, x0, dx, m, method):
    u = jnp.moveaxis(u, axis, -1)
    lead = u.shape[:-1]
    lines = u.reshape(-1, u.shape[-1])
    out = _legendre_lines(lines, float(x0), float(dx), int(m), method)
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
    method: str = "auto",
) -> Float[Array, " ..."]:
    r"""Discrete Legendre transform $u^*(x) = \max_{y} \langle x, y\rangle - u(y)$ on a grid.

    ``y`` runs over the cell centres of ``grid``; $u^*$ is computed separably,
    $u^*(x) = \max_{y_1}[x_1 y_1 + \max_{y_2}[x_2 y_2 + \dots - u(y)]]$, one pass of 1D
    transforms per axis (negating in between). With ``method="hull"`` each 1D transform takes
    linear time (lower convex hull by a monotone stack, then merging the hull's edge slopes with
    the sorted queries: Lucet's linear-time Legendre transform, 1997); ``method="brute"`` is the
    $O(n \cdot m)$ maximum per line (reference for tests). Both are exact in exact
    arithmetic.

    Args:
        u: values at the cell centres, shape ``grid.shape`` or ``(*batch, *grid.shape)`` (a
            batch is folded into the lines of each pass, which is cheaper than ``vmap``).
        grid: the grid (default ``Grid(u.shape)``).
        queries: ``"centres"`` evaluates at the cell centres; ``"corners"`` at the corners of the
            sub-cells of a ``sub``-times refined grid, ``(sub * n_a + 1)`` points ``j/(sub n_a)``
            per axis (used by `transport_map`).
        sub: refinement factor for ``"corners"``.
        method: ``"auto"`` (brute force up to 512 points per line, else hull), ``"hull"``
            (linear time) or ``"brute"`` (O(n m) per line, dense and vectorized).
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


def _legendre(u, grid, *, queries="centres", sub=1, method="auto"):
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
