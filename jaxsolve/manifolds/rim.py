r"""The relaxed indicator matrix (RIM) manifold (Yuan, Xie, Nie, Li, ICLR 2026).

``RIM(n, c, lower, upper) = {X in R^{n x c} : X > 0, X 1_c = a, lower < X^T 1_n < upper}``
with ``a = 1`` by default ("Riemannian optimization on relaxed indicator matrix
manifold", arXiv 2503.20505). Special cases: ``lower <= 0``, ``upper >= n`` gives the
row-stochastic matrices (fuzzy K-means); ``lower = upper = r`` gives the transportation
polytope with column sums ``r`` (doubly stochastic for ``c = n``, ``r = 1``).

Geometry (Euclidean metric restricted; the paper's Lemmas 2-4): with the inequalities
open, the set is an open subset of the affine space ``{X 1 = a}``, hence *flat*:

* ``T_X = {U : U 1_c = 0}``; ``proj_X(U) = U - (U 1_c / c) 1_c^T`` (row centring, ``O(nc)``);
* ``grad f = proj(nabla f)`` and ``Hess f[U] = proj(nabla^2 f[U])`` (no curvature term);
* for ``lower = upper`` the tangent space also has ``U^T 1 = 0`` and ``proj`` is the double
  centring (rows, then columns). The paper's code keeps only the row condition and
  lets the retraction restore the column sums; then the Riemannian gradient keeps a
  component that the retraction undoes and never vanishes at a constrained optimum,
  which stalls the solvers' stopping tests (measured on Ratio Cut, ``bench/cluster.py``).

Retractions map ``Y = X + U`` back onto the set; all three cost ``O(nc)`` per sweep:

* ``"dykstra"`` (default; the paper's fast one): Dykstra's alternating projections onto
  ``{Y >= 0, Y 1 = a}`` (row-wise simplex projections,
  Michelot's algorithm, all rows at once) and the column-sum slab ``{lower <= Y^T 1 <= upper}``
  (a uniform shift of each violating column). It converges to the Euclidean projection of
  ``Y`` onto the closure of the set, so ``R_X(tU) = X + tU`` while that stays inside:
  straight lines, the geodesics of the flat manifold (the paper's Theorem 1).
* ``"dual"``: the same projection by dual ascent on the column multipliers ``beta``
  (rows are exact simplex projections of ``Y + 1 beta^T``; proximal ascent with step
  ``1/n`` on ``D(beta) = min_Y L + sum_j min(beta_j lower_j, beta_j upper_j)``).
* ``"sinkhorn"``: ``X * exp(U / X)`` scaled alternately on rows (to ``a``) and on columns
  (into ``[lower, upper]``); it stays strictly positive but is not a projection.

The projections may put entries at 0 (the boundary of the open set), exactly as the
paper's code does; use ``"sinkhorn"`` to stay strictly positive.

Memory traffic (what keeps the time linear in ``n`` in practice, not only the work): the
sweeps keep ``c``-vectors only (Dykstra's two correction arrays reduce to one column
vector, see `dykstra_project`; Sinkhorn keeps ``diag(rho) K diag(gamma)``), and every
row-local pass runs over cache-sized row blocks (Michelot's passes stay in the L2 cache),
so a sweep reads the ``n x c`` data once; the result is written over an intermediate
buffer (a fresh array of that size costs page faults worth several sweeps' reads).

Dimension: ``n(c - 1)`` for ``lower < upper`` and ``(n - 1)(c - 1)`` for ``lower = upper``
(the paper and its code state ``(n - 1)c``; counting the ``n`` independent row-sum
equations on ``n c`` entries gives ours, which the tests check against the rank of the
tangent projection).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from jaxsolve.manifolds.base import Manifold, check_int, default_float

__all__ = ["RIM", "rim_project"]

_RETRACTIONS = ("dykstra", "dual", "sinkhorn")


def _as_tuple(name, value, c):
    """``value`` (a number or ``c`` numbers) as a tuple of ``c`` floats (hashable)."""
    if isinstance(value, int | float):
        return (float(value),) * c
    try:
        vals = tuple(float(v) for v in value)
    except TypeError:
        raise TypeError(f"{name} must be a number or a sequence of {c} numbers") from None
    if len(vals) != c:
        raise ValueError(f"{name} must have {c} entries (one per column), got {len(vals)}")
    if any(math.isnan(v) for v in vals):
        raise ValueError(f"{name} contains NaN")
    return vals


def _rows_simplex(y, a):
    r"""Row-wise projection onto ``{z >= 0, sum z = a_i}``, all rows at once, ``O(nc)`` per pass.

    Michelot's algorithm (J. Optim. Theory Appl. 1986; Condat, Math. Program. 2016):
    ``tau <- (sum_{y_j > tau} y_j - a) / |{y_j > tau}|`` from ``tau = (sum y - a)/c``
    increases monotonically to the exact threshold and stops as soon as no row's support
    changes (at most ``c`` passes; 3-5 in practice). Elementwise passes over the whole
    ``n x c`` array replace the per-row sort of `jaxsolve.projections.simplex`
    (a sort per row is several times slower on CPU), with the same result to rounding.
    """
    tau, _ = _michelot_threshold(y, a)
    return jnp.maximum(y - tau[:, None], 0.0)


def _michelot_threshold(y, a):
    """Michelot's thresholds ``tau`` (one per row) and the number of passes taken.

    The pass count is the maximum over the rows of each row's count (at most ``c + 1``):
    the work per row does not grow with ``n`` (tests/manifolds/test_rim.py checks it).
    """
    c = y.shape[1]
    tau0 = (jnp.sum(y, axis=1) - a) / c

    def cond(carry):
        _, changed, k = carry
        return changed & (k < c + 1)

    def body(carry):
        tau, _, k = carry
        m = y > tau[:, None]
        new = (jnp.sum(jnp.where(m, y, 0.0), axis=1) - a) / jnp.maximum(jnp.sum(m, axis=1), 1)
        return new, jnp.any(new != tau), k + 1

    tau, _, k = jax.lax.while_loop(cond, body, (tau0, jnp.asarray(True), jnp.int32(0)))
    return tau, k


def _block_rows(n, c):
    """Rows per block of the row-local passes: about 32k entries (256 kB in float64, inside
    the L2 cache), so that Michelot's 3-6 passes over a block hit the cache and a sweep
    streams the ``n x c`` data from memory once, whatever ``n``."""
    return max(64, 32_768 // max(c, 1))


def _blocked(fn, arrays, init, *, write=False):
    r"""Fold ``fn`` over row blocks of ``arrays`` (a tuple, rows first): ``fn(blocks, acc) ->
    (acc, z_b)``, ``z_b`` of the shape of the first array's block.

    ``write=True``: each ``z_b`` overwrites its block of ``arrays[0]`` (loop-carried, so
    XLA updates it in place when the caller no longer needs it: no new ``n x c`` buffer;
    a fresh buffer costs page faults worth more than a sweep's read).
    Returns ``(acc, arrays[0] updated or None)``. Full blocks run in a ``fori_loop``
    (dynamic slices, no copy of the inputs), the remainder rows once more; ``n`` up to
    one block: one call.
    """
    n, c = arrays[0].shape
    b = _block_rows(n, c)
    nb = n // b
    if nb <= 1:
        acc, z = fn(arrays, init)
        return acc, (z if write else None)

    def body(i, carry):
        acc, buf = carry
        first = arrays[0] if buf is None else buf
        blocks = (first,) + arrays[1:]
        blocks = tuple(jax.lax.dynamic_slice_in_dim(v, i * b, b, 0) for v in blocks)
        acc, zb = fn(blocks, acc)
        if buf is not None:
            buf = jax.lax.dynamic_update_slice_in_dim(buf, zb, i * b, 0)
        return acc, buf

    acc, out = jax.lax.fori_loop(0, nb, body, (init, arrays[0] if write else None))
    if nb * b < n:
        first = arrays[0] if out is None else out
        acc, zt = fn(tuple(v[nb * b :] for v in (first,) + arrays[1:]), acc)
        if out is not None:
            out = jax.lax.dynamic_update_slice_in_dim(out, zt, nb * b, 0)
    return acc, out


def _rows_simplex_shifted(y, beta, a, *, write=False):
    """``Z = P_rows(Y + 1 beta^T)`` (row-wise simplex projections) and its column sums,
    by row blocks; ``Z`` itself is built (over ``y``'s buffer) only when ``write``."""

    def fn(blocks, acc):
        yb, ab = blocks
        zb = _rows_simplex(yb + beta[None, :], ab)
        return acc + jnp.sum(zb, axis=0), zb

    init = jnp.zeros((y.shape[1],), y.dtype)
    return _blocked(fn, (y, a), init, write=write)


def constraint_violation(y, a, lo, hi):
    """Largest violation by ``y`` of its row sums ``a`` and its column-sum slab ``[lo, hi]``."""
    s = jnp.sum(y, axis=0)
    return jnp.maximum(
        jnp.max(jnp.abs(jnp.sum(y, axis=1) - a)),
        jnp.maximum(jnp.max(jnp.maximum(lo - s, 0)), jnp.max(jnp.maximum(s - hi, 0))),
    )


def dykstra_project(y, a, lo, hi, tol, max_iter):
    r"""Dykstra's alternating projections onto the row set and the column slab, stored in
    one column vector.

    Dykstra's iteration ``z_k = P_rows(y_k + p_k)``, ``p_{k+1} = y_k + p_k - z_k``,
    ``y_{k+1} = P_cols(z_k + q_k)``, ``q_{k+1} = z_k + q_k - y_{k+1}``: the slab projection
    shifts each column uniformly, ``y_{k+1} = z_k + q_k + 1 delta_k^T`` with
    ``delta_k = (clip(s_k, lo, hi) - s_k) / n``, ``s_k`` the column sums of ``z_k + q_k``;
    so ``q_{k+1} = -1 delta_k^T`` and ``y_{k+1} + p_{k+1} = y_k + p_k + 1 (delta_k -
    delta_{k-1})^T`` telescopes to ``Y + 1 delta_k^T`` (derived here). The same iterates
    are therefore ``z_k = P_rows(Y + 1 delta_{k-1}^T)``, ``s_k = 1^T z_k - n delta_{k-1}``:
    a sweep reads ``Y`` once (in cache-sized row blocks) and keeps ``c`` numbers, instead
    of three ``n x c`` arrays. ``y_{k+1} - z_k = 1 (delta_k - delta_{k-1})^T``, so the
    stopping test ``max |delta_k - delta_{k-1}| <= tol`` is Dykstra's gap between the
    two sets (entrywise); then ``z`` has exact rows and signs and column sums within
    ``n tol`` of the slab, and is returned.
    """
    n = y.shape[0]

    def cond(carry):
        _, k, err = carry
        return (k < max_iter) & (err > tol)

    def body(carry):
        d_prev, k, _ = carry
        col_sums, _ = _rows_simplex_shifted(y, d_prev, a)
        s = col_sums - n * d_prev
        d = (jnp.clip(s, lo, hi) - s) / n
        return d, k + 1, jnp.max(jnp.abs(d - d_prev))

    d0 = jnp.zeros((y.shape[1],), y.dtype)
    d, _, _ = jax.lax.while_loop(cond, body, (d0, jnp.int32(0), jnp.asarray(jnp.inf, y.dtype)))
    return _rows_simplex_shifted(y, d, a, write=True)[1]


def _dual(y, a, lo, hi, tol, max_iter):
    """The Euclidean projection of ``y`` by dual ascent on the column multipliers (the
    ``"dual"`` retraction of the module docstring); same contract as `dykstra_project`."""
    n = y.shape[0]

    def cond(carry):
        _, k, err = carry
        return (k < max_iter) & (err > tol)

    def body(carry):
        # Proximal ascent on the dual D(beta) = h(beta) + sum_j min(beta_j lo_j, beta_j hi_j),
        # grad h = -s (the column sums of the row-wise projection of y + 1 beta^T).
        beta, k, _ = carry
        s, _ = _rows_simplex_shifted(y, beta, a)
        v = beta - s / n
        up, down = v + lo / n, v + hi / n
        new = jnp.where(up > 0, up, jnp.where(down < 0, down, 0.0))
        viol = jnp.clip(s, lo, hi) - s
        err = jnp.maximum(jnp.max(jnp.abs(viol)), n * jnp.max(jnp.abs(new - beta)))
        return new, k + 1, err

    beta0 = jnp.zeros((y.shape[1],), y.dtype)
    beta, _, _ = jax.lax.while_loop(
        cond, body, (beta0, jnp.int32(0), jnp.asarray(jnp.inf, y.dtype))
    )
    return _rows_simplex_shifted(y, beta, a, write=True)[1]


def sinkhorn_scale(x, u, a, lo, hi, tol, max_iter):
    r"""``X * exp(U / X)``, rows scaled to ``a``, then alternately columns (into the slab)
    and rows, kept as ``diag(rho) K diag(gamma)``: a sweep is one blocked read of ``K``
    (``rho = a / (K gamma)`` and the column sums ``gamma * (K^T rho)``); the result is
    written over ``K`` at the end."""
    dtype = x.dtype

    def start(blocks, acc):
        ub, xb, ab = blocks
        safe = jnp.maximum(xb, jnp.finfo(dtype).tiny)
        logy = jnp.log(safe) + ub / safe
        kb = jnp.exp(logy - jnp.max(logy, axis=1, keepdims=True))
        kb = jnp.maximum(kb, jnp.finfo(dtype).tiny ** 0.25)
        kb = kb * (ab / jnp.sum(kb, axis=1))[:, None]  # rows first: R_x(0) = x on the set
        return acc + jnp.sum(kb, axis=0), kb

    # K is written over U's buffer (block by block), the result over K's.
    s0, kmat = _blocked(start, (u, x, a), jnp.zeros((x.shape[1],), dtype), write=True)
    c = kmat.shape[1]

    def cond(carry):
        _, _, k, err = carry
        return (k < max_iter) & (err > tol)

    def body(carry):
        # s: column sums of diag(rho) K diag(gamma), rho = a / (K gamma)
        gamma, s, k, _ = carry
        gamma = gamma * (jnp.clip(s, lo, hi) / s)

        def fn(blocks, acc):
            kb, ab = blocks
            rho = ab / jnp.sum(kb * gamma[None, :], axis=1)
            return acc + jnp.sum(kb * rho[:, None], axis=0), kb

        ks, _ = _blocked(fn, (kmat, a), jnp.zeros_like(gamma))
        s = gamma * ks
        # rows are exact after the row scaling (up to rounding): the columns are what is left
        err = jnp.maximum(jnp.max(jnp.maximum(lo - s, 0)), jnp.max(jnp.maximum(s - hi, 0)))
        return gamma, s, k + 1, err

    init = (jnp.ones((c,), dtype), s0, jnp.int32(0), jnp.asarray(jnp.inf, dtype))
    gamma, _, _, _ = jax.lax.while_loop(cond, body, init)

    def scale(blocks, acc):
        kb, ab = blocks
        kg = kb * gamma[None, :]
        return acc, kg * (ab / jnp.sum(kg, axis=1))[:, None]

    return _blocked(scale, (kmat, a), jnp.zeros((), dtype), write=True)[1]


def rim_project(
    y: Any,
    lower: Any,
    upper: Any,
    row_sums: Any = None,
    *,
    tol: float | None = None,
    max_iter: int = 5000,
    method: str = "dykstra",
) -> jax.Array:
    r"""Euclidean projection of ``y`` (``n x c``) onto ``{Y >= 0, Y 1 = a, lower <= Y^T 1 <= upper}``.

    Dykstra's alternating projections (``method="dykstra"``) or dual ascent on the
    column multipliers (``"dual"``), see `RIM`. ``a = row_sums`` (default ones).
    With ``lower = upper`` this is the projection onto a transportation polytope.
    ``tol`` (default ``100 eps``-ish by dtype: ``1e-12`` in float64, ``1e-6`` in float32)
    bounds the constraint violation and the last change.
    """
    y = jnp.asarray(y)
    n, c = y.shape
    dtype = y.dtype
    a = (
        jnp.ones((n,), dtype)
        if row_sums is None
        else jnp.broadcast_to(jnp.asarray(row_sums, dtype), (n,))
    )
    lo = jnp.broadcast_to(jnp.asarray(lower, dtype), (c,))
    hi = jnp.broadcast_to(jnp.asarray(upper, dtype), (c,))
    if tol is None:
        tol = 1e-12 if dtype == jnp.float64 else 1e-6
    tol = jnp.asarray(tol, dtype)
    if method == "dykstra":
        return dykstra_project(y, a, lo, hi, tol, max_iter)
    if method == "dual":
        return _dual(y, a, lo, hi, tol, max_iter)
    raise ValueError(f"method must be 'dykstra' or 'dual', got {method!r}")


@dataclasses.dataclass(frozen=True, init=False)
class RIM(Manifold):
    r"""The relaxed indicator matrix manifold ``{X > 0, X 1 = a, lower < X^T 1 < upper}``.

    See the module docstring for the geometry (Yuan, Xie, Nie and Li, ICLR 2026).

    Args:
        n: number of points (rows).
        c: number of classes (columns), at least 2.
        lower: lower column-sum bound, a number or one per column.
        upper: upper column-sum bound (``lower = upper``: a transportation polytope).
        row_sums: ``a``, a number or one per row (default 1).
        retraction: ``"dykstra"`` (default), ``"dual"`` or ``"sinkhorn"``.
        max_iter: sweeps of the retraction's inner loop (a ``lax.while_loop``).
        tol: stopping tolerance of the retraction (default by dtype; a negative value
            runs exactly ``max_iter`` sweeps, for timing).
    """

    n: int
    c: int
    lower: tuple
    upper: tuple
    row_sums: tuple | None
    retraction: str
    max_iter: int
    tol: float | None

    def __init__(
        self,
        n: int,
        c: int,
        lower: Any,
        upper: Any,
        *,
        row_sums: Any = None,
        retraction: str = "dykstra",
        max_iter: int = 1000,
        tol: float | None = None,
    ):
        n = check_int("n", n, 1)
        c = check_int("c", c, 2)
        lo = _as_tuple("lower", lower, c)
        hi = _as_tuple("upper", upper, c)
        if any(l_ > h_ for l_, h_ in zip(lo, hi, strict=True)):
            raise ValueError("lower must be <= upper in every column")
        rs = None if row_sums is None else _as_tuple("row_sums", row_sums, n)
        total = float(n) if rs is None else sum(rs)
        if rs is not None and any(v <= 0 for v in rs):
            raise ValueError("row_sums must be positive")
        if not (
            sum(max(v, 0.0) for v in lo) <= total * (1 + 1e-12) + 1e-12
            and total <= sum(hi) * (1 + 1e-12) + 1e-12
        ):
            raise ValueError(
                f"the set is empty: the row sums total {total} but the column bounds "
                f"allow [{sum(lo)}, {sum(hi)}]"
            )
        if retraction not in _RETRACTIONS:
            raise ValueError(f"retraction must be one of {_RETRACTIONS}, got {retraction!r}")
        check_int("max_iter", max_iter, 1)
        for k, v in (("n", n), ("c", c), ("lower", lo), ("upper", hi), ("row_sums", rs)):
            object.__setattr__(self, k, v)
        object.__setattr__(self, "retraction", retraction)
        object.__setattr__(self, "max_iter", int(max_iter))
        object.__setattr__(self, "tol", None if tol is None else float(tol))

    # -- constants ------------------------------------------------------------------
    def constraint_arrays(self, dtype):
        """The set's data as arrays of ``dtype``: ``(row_sums (n,), lower (c,), upper (c,))``.

        A point ``X`` has ``X >= 0``, ``X 1 = row_sums`` (ones unless given) and column
        sums ``lower <= 1^T X <= upper``: the arguments the Sinkhorn scaling and the
        Dykstra projection of this module take.
        """
        a = (
            jnp.ones((self.n,), dtype)
            if self.row_sums is None
            else jnp.asarray(self.row_sums, dtype)
        )
        return a, jnp.asarray(self.lower, dtype), jnp.asarray(self.upper, dtype)

    def _tol(self, dtype):
        """The retraction's tolerance in ``dtype`` (``tol``, or 1e-10 / 1e-5 by dtype)."""
        if self.tol is not None:
            return jnp.asarray(self.tol, dtype)
        return jnp.asarray(1e-10 if dtype == jnp.float64 else 1e-5, dtype)

    @property
    def equality(self) -> bool:
        """True when ``lower == upper`` (a transportation polytope)."""
        return self.lower == self.upper

    # -- geometry -------------------------------------------------------------------
    def proj(self, x, u):
        u = u - jnp.mean(u, axis=1, keepdims=True)
        if self.equality:
            # lower = upper: the column sums are fixed too, T_X = {U 1 = 0, U^T 1 = 0};
            # the orthogonal projection is the double centring (still O(nc)).
            u = u - jnp.mean(u, axis=0, keepdims=True)
        return u

    def ehess_to_rhess(self, x, g, h, u):
        return self.proj(x, h)

    def retract(self, x, u):
        dtype = x.dtype
        a, lo, hi = self.constraint_arrays(dtype)
        tol = self._tol(dtype)
        if self.retraction == "sinkhorn":
            return sinkhorn_scale(x, u, a, lo, hi, tol, self.max_iter)
        if self.retraction == "dual":
            return _dual(x + u, a, lo, hi, tol, self.max_iter)
        return dykstra_project(x + u, a, lo, hi, tol, self.max_iter)

    def residual(self, x):
        a, lo, hi = self.constraint_arrays(x.dtype)
        return jnp.maximum(constraint_violation(x, a, lo, hi), jnp.max(jnp.maximum(-x, 0)))

    def random_point(self, key, dtype=None):
        dtype = default_float(dtype)
        a, lo, hi = self.constraint_arrays(dtype)
        z = jax.random.uniform(key, (self.n, self.c), dtype, 0.5, 1.5)
        z = z * (a / jnp.sum(z, axis=1))[:, None]
        return sinkhorn_scale(z, jnp.zeros_like(z), a, lo, hi, self._tol(dtype), 10 * self.max_iter)

    @property
    def dim(self) -> int:
        return (self.n - 1) * (self.c - 1) if self.equality else self.n * (self.c - 1)

    @property
    def typical_dist(self) -> float:
        return math.sqrt(self.n)

    @property
    def point_shape(self):
        return (self.n, self.c)
