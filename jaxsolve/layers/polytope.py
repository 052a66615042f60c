r"""The constraint set of the projection layer and its one-time factorization.

A `Polytope` is $\{x \in \mathbb{R}^n : Ax = b,\; l \le Cx \le u,\;
lb \le x \le ub\}$; any of the three parts may be absent. ``A`` and ``C`` are the
*structure* (one matrix shared by a whole batch); ``b, l, u, lb, ub`` are the
*data* and may carry leading batch dimensions (one right-hand side per example).

Following Pinet (Grontas, Terpin, et al., arXiv 2508.10480, section 3), the set is
lifted to $w = (x, s) \in \mathbb{R}^{n+m}$ with

$$
\mathcal{A} = \{w : \underbrace{\begin{bmatrix} A & 0 \\ C & -I
\end{bmatrix}}_{M} w = \begin{bmatrix} b \\ 0 \end{bmatrix}\},\qquad
\mathcal{K} = [lb, ub] \times [l, u],
$$

so that the polytope is the $x$-part of $\mathcal{A} \cap \mathcal{K}$.
`factorize` computes, once per polytope, a Ruiz equilibration
$\tilde M = D_r M D_c$ and the orthogonal projector onto the affine set
$\tilde{\mathcal{A}}$ in the scaled variables $\tilde w = D_c^{-1} w$:
$\Pi_{\tilde{\mathcal A}}(v) = P v + W b$ with $P$ the projector onto
$\ker \tilde M$ and $W = \tilde M^{+}[:, :p]\,\mathrm{diag}(D_r[:p])$.
$P$ is applied in its cheapest exact form: $U(U^\top v)$ with an
orthonormal null-space basis $U$ when $\dim\ker\tilde M \le
\operatorname{rank}\tilde M$, else $v - R(R^\top v)$ with a row-space basis
$R$ (both from one SVD), i.e. $2(n+m)\min(k, r)$ flops per example and
step instead of the $(n+m)^2$ of a dense projector or the
$2(n+m)(p+m)$ of the pseudo-inverse form ``x - A^+(Ax - b)`` used by the
``pinet-hcnn`` package.

One module, just over 500 lines: the set and its factorization share the lift above (the
matrix $M$ that `Polytope` defines is the one `factorize` equilibrates and projects onto),
and split, each half would need this derivation again.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_finite, check_floating, check_not_half, is_concrete

__all__ = ["Polytope", "Factors", "factorize", "ruiz_equilibration"]


def ruiz_equilibration(M: jax.Array, iters: int = 25) -> tuple[jax.Array, jax.Array]:
    r"""Modified Ruiz equilibration (2-norm, rows then columns), as in Pinet.

    Repeats $M \leftarrow \mathrm{diag}(\|M_{i,:}\|^{-1/2}) M$, then
    $M \leftarrow M\,\mathrm{diag}(\|M_{:,j}\|^{-1/2})$ for ``iters`` rounds
    and keeps the scaling with the best balance criterion
    $\max(1 - \min_i\|M_{i,:}\|/\max_i\|M_{i,:}\|,\;
    1 - \min_j\|M_{:,j}\|/\max_j\|M_{:,j}\|)$, as the
    ``ruiz_equilibration`` of Pinet (arXiv 2508.10480, appendix on equilibration).
    Zero rows or columns keep the factor 1.

    Returns:
        The scalings ``(d_r, d_c)``: ``diag(d_r) @ M @ diag(d_c)`` is equilibrated.
    """
    rows, cols = M.shape
    d_r = jnp.ones((rows,), M.dtype)
    d_c = jnp.ones((cols,), M.dtype)
    if rows == 0 or iters == 0:
        return d_r, d_c

    def criterion(S):
        rn = jnp.linalg.norm(S, axis=1)
        cn = jnp.linalg.norm(S, axis=0)
        ratio = lambda v: jnp.min(jnp.where(v > 0, v, jnp.inf)) / jnp.max(v)
        return jnp.maximum(1 - ratio(rn), 1 - ratio(cn))

    def body(_, carry):
        S, d_r, d_c, best, best_r, best_c = carry
        rn = jnp.linalg.norm(S, axis=1)
        rf = jnp.where(rn > 0, jnp.sqrt(rn), 1.0)
        d_r = d_r / rf
        S = S / rf[:, None]
        cn = jnp.linalg.norm(S, axis=0)
        cf = jnp.where(cn > 0, jnp.sqrt(cn), 1.0)
        d_c = d_c / cf
        S = S / cf[None, :]
        crit = criterion(S)
        # Keep the best scaling; once below tol the iteration has converged, so
        # running all rounds (no data-dependent break) changes nothing and keeps
        # eager and jit-traced factorizations identical.
        better = crit < best
        best_r = jnp.where(better, d_r, best_r)
        best_c = jnp.where(better, d_c, best_c)
        return S, d_r, d_c, jnp.minimum(crit, best), best_r, best_c

    init = (M, d_r, d_c, criterion(M), d_r, d_c)
    *_, best_r, best_c = jax.lax.fori_loop(0, iters, body, init)
    return best_r, best_c


class Factors(eqx.Module):
    r"""What `factorize` computes once per polytope (shared by a whole batch).

    Attributes:
        d_c: column scaling $D_c$ of the lifted variables, shape ``(n + m,)``.
        basis: ``U`` (null space, mode ``"null"``), ``R`` (row space, mode ``"range"``)
            or the dense projector ``P`` (mode ``"dense"``, used when the rank is not
            known because ``A``/``C`` are traced).
        w_b: $\tilde M^{+}[:, :p]\,\mathrm{diag}(D_r[:p])$, shape ``(n + m, p)``:
            the affine offset is ``q = w_b @ b``.
        A, C: the original matrices (for the lifted start point and the consistency
            check of ``Ax = b``).
        null_a: orthonormal basis $Z$ of $\ker A$, ``(n, k_A)`` (the dense
            projector $P_A$ when ``A`` is traced); $P_A = ZZ^\top$.
        apinv_t: $(A^{+})^\top$, ``(p, n)``.
        rz: the rows $R = [I_n; C]$ of the inequalities and bounds, restricted to
            $\ker A$ and normalized, $\mathrm{diag}(g) R Z$, ``(n + m, k_A)``,
            with $g_i = 1/\|R_i Z\|$ (0 for a row fixed by ``Ax = b``): the
            Gram matrix $\mathrm{diag}(g) R P_A R^\top \mathrm{diag}(g)$ of the
            active-set (KKT) solves of `jaxsolve.layers.active` has unit diagonal.
        rz_scale: $g$, ``(n + m,)``.
        gram: $G = rz\, rz^\top$, ``(n + m, n + m)``, precomputed when
            $n + m \le 4096$ (else ``(0, 0)``: the solves then use two products
            with ``rz``).
        n, p, m, mode: static sizes and the form of the projector.
    """

    d_c: jax.Array
    basis: jax.Array
    w_b: jax.Array
    A: jax.Array
    C: jax.Array
    null_a: jax.Array
    apinv_t: jax.Array
    rz: jax.Array
    rz_scale: jax.Array
    gram: jax.Array
    n: int = eqx.field(static=True)
    p: int = eqx.field(static=True)
    m: int = eqx.field(static=True)
    mode: str = eqx.field(static=True)

    def proj_null(self, v: jax.Array) -> jax.Array:
        """$P v$: the orthogonal projection of ``v`` onto $\\ker \\tilde M$."""
        # Row-vector products: under vmap they become one (batch, N) x (N, k) GEMM;
        # the column form B @ (B.T @ v) batched inside a while loop ran 3.5x slower on CPU.
        B = self.basis.astype(v.dtype)
        if self.mode == "null":
            return (v @ B) @ B.T
        if self.mode == "range":
            return v - (v @ B) @ B.T
        return v @ B  # the dense projector is symmetric

    def offset(self, b: jax.Array) -> jax.Array:
        """$q = \\tilde M^{+} D_r [b; 0]$: the minimum-norm point of the scaled affine set."""
        if self.p == 0:
            return jnp.zeros((self.n + self.m,), b.dtype)
        return b @ self.w_b.astype(b.dtype).T

    def astype(self, dtype) -> Factors:
        cast = lambda a: a.astype(dtype)
        return Factors(
            cast(self.d_c),
            cast(self.basis),
            cast(self.w_b),
            cast(self.A),
            cast(self.C),
            cast(self.null_a),
            cast(self.apinv_t),
            cast(self.rz),
            cast(self.rz_scale),
            cast(self.gram),
            self.n,
            self.p,
            self.m,
            self.mode,
        )


def factorize(A: jax.Array, C: jax.Array, *, ruiz_iters: int = 25) -> Factors:
    r"""Equilibrate the lifted matrix and factor the affine projection (once per polytope).

    ``A`` is ``(p, n)``, ``C`` is ``(m, n)`` (either may have zero rows). One SVD of
    $\tilde M = D_r M D_c$ gives the rank $r$ (singular values above
    $\sigma_{\max}\max(p+m, n+m)\,\varepsilon$), the pseudo-inverse columns for
    ``b`` and the projector onto $\ker\tilde M$ in its cheapest form (see the
    module docstring). Costs $O((p+m)(n+m)^2)$ once; every projection step then
    costs $O((n+m)\min(r, n+m-r))$. The array work runs in two compiled
    functions cached per shape; only the choice of the basis (which needs the rank)
    happens outside them.
    """
    A = jax.lax.stop_gradient(jnp.asarray(A))
    C = jax.lax.stop_gradient(jnp.asarray(C))
    dtype = jnp.result_type(A, C)
    A, C = A.astype(dtype), C.astype(dtype)
    p, n = A.shape
    m = C.shape[0]
    N = n + m
    d_c, w_b, Vh, keep, Va, keep_a, apinv_t = _factor_core(A, C, int(ruiz_iters))
    concrete = is_concrete(Vh) and is_concrete(Va)
    if p == 0:
        Z = jnp.eye(n, dtype=dtype)
    elif concrete:
        Z = Va[int(np.sum(np.asarray(keep_a))) :].T
    else:
        mask = jnp.concatenate([~keep_a, jnp.ones((n - keep_a.shape[0],), bool)])
        Z = (Va.T * mask[None, :].astype(dtype)) @ Va
    kkt = (Z, apinv_t, *_kkt_tail(Z, C))
    if p + m == 0:
        basis = jnp.zeros((N, 0), dtype)
        return Factors(d_c, basis, w_b, A, C, *kkt, n, p, m, "range")
    if concrete:
        r = int(np.sum(np.asarray(keep)))
        k = N - r
        if k <= r:
            basis, mode = Vh[r:].T, "null"
        else:
            basis, mode = Vh[:r].T, "range"
    else:
        mask = jnp.concatenate([~keep, jnp.ones((N - keep.shape[0],), bool)])
        basis, mode = (Vh.T * mask[None, :].astype(dtype)) @ Vh, "dense"
    return Factors(d_c, basis, w_b, A, C, *kkt, n, p, m, mode)


@partial(jax.jit, static_argnums=(2,))
def _factor_core(A: jax.Array, C: jax.Array, ruiz_iters: int):
    r"""The rank-independent part of `factorize` (compiled once per shape).

    Returns ``(d_c, w_b, Vh, keep, Va, keep_a, apinv_t)``: the column scaling, the
    pseudo-inverse columns for ``b``, the right singular vectors of $\tilde M$
    and the mask of its singular values counted as rank; the same for ``A`` and
    $(A^{+})^\top$ (`_kkt_tail` finishes the active-set factors).
    """
    dtype = A.dtype
    p, n = A.shape
    m = C.shape[0]
    N = n + m
    rows = p + m
    M = jnp.concatenate(
        [
            jnp.concatenate([A, jnp.zeros((p, m), dtype)], axis=1),
            jnp.concatenate([C, -jnp.eye(m, dtype=dtype)], axis=1),
        ],
        axis=0,
    )
    d_r, d_c = ruiz_equilibration(M, ruiz_iters)
    if rows == 0:
        w_b, Vh, keep = jnp.zeros((N, 0), dtype), jnp.eye(N, dtype=dtype), jnp.zeros((0,), bool)
    else:
        Ms = d_r[:, None] * M * d_c[None, :]
        U, sv, Vh = jnp.linalg.svd(Ms, full_matrices=True)
        keep = sv > sv[0] * max(rows, N) * jnp.finfo(dtype).eps
        inv = jnp.where(keep, 1.0 / jnp.where(keep, sv, 1.0), 0.0)
        pinv = (Vh[: sv.shape[0]].T * inv[None, :]) @ U.T  # (N, rows)
        w_b = pinv[:, :p] * d_r[None, :p]
    if p == 0:
        Va, keep_a, apinv_t = (
            jnp.eye(n, dtype=dtype),
            jnp.zeros((0,), bool),
            jnp.zeros((0, n), dtype),
        )
    else:
        Ua, sva, Va = jnp.linalg.svd(A, full_matrices=True)
        keep_a = sva > sva[0] * max(p, n) * jnp.finfo(dtype).eps
        inv = jnp.where(keep_a, 1.0 / jnp.where(keep_a, sva, 1.0), 0.0)
        k = sva.shape[0]
        apinv_t = (Ua[:, :k] * inv[None, :]) @ Va[:k]  # (A^+)^T = U S^+ V^T, (p, n)
    return d_c, w_b, Vh, keep, Va, keep_a, apinv_t


@jax.jit
def _kkt_tail(Z: jax.Array, C: jax.Array):
    r"""``(diag(g) [Z; CZ], g, G)`` from $Z$ (a basis of $\ker A$, or the dense
    projector $P_A$ when ``A`` is traced; $P_A P_A^\top = P_A$), see
    `Factors`. $Z$ comes from one SVD of ``A`` in `_factor_core`
    (singular values above $\sigma_{\max}\max(p, n)\varepsilon$ count as rank).
    """
    dtype = Z.dtype
    n = Z.shape[0]
    RZ = jnp.concatenate([Z, C @ Z], axis=0)
    norms = jnp.linalg.norm(RZ, axis=1)
    # A row whose restriction to ker A vanishes (numerically) is fixed by Ax = b: it
    # never enters an active-set solve (g = 0).
    tiny = jnp.sqrt(jnp.finfo(dtype).eps) * jnp.maximum(
        1.0, jnp.concatenate([jnp.ones((n,), dtype), jnp.linalg.norm(C, axis=1)])
    )
    g = jnp.where(norms > tiny, 1.0 / jnp.where(norms > tiny, norms, 1.0), 0.0)
    rz = RZ * g[:, None]
    gram = rz @ rz.T if rz.shape[0] <= _GRAM_MAX else jnp.zeros((0, 0), dtype)
    return rz, g, gram


_GRAM_MAX = 4096


def _as_matrix(name, M):
    if M is None:
        return None
    if isinstance(M, list | tuple):
        M = np.asarray(M)
    check_floating(name, M, real=True)
    check_not_half(name, M, "the polytope's factorizations (LAPACK) run in float32 or float64 only")
    M = jnp.asarray(M)
    if M.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D matrix (rows, n) shared by the whole batch, got shape "
            f"{M.shape}; only b, l, u, lb, ub may carry batch dimensions"
        )
    if 0 in M.shape:
        raise ValueError(f"{name} has an empty axis (shape {M.shape}); pass None instead")
    if is_concrete(M) and not np.all(np.isfinite(np.asarray(M))):
        raise ValueError(f"{name} contains NaN or Inf")
    return M


def _as_vector(name, v, size, *, allow_inf):
    if v is None:
        return None
    if isinstance(v, list | tuple):
        v = np.asarray(v)
    check_floating(name, v)
    v = jnp.asarray(v)
    if v.ndim == 0 or v.shape[-1] != size:
        raise ValueError(
            f"{name} must have shape (..., {size}) (a leading batch shape is allowed), "
            f"got {v.shape}"
        )
    check_finite(name, v)
    if not allow_inf and is_concrete(v) and not np.all(np.isfinite(np.asarray(v))):
        raise ValueError(f"{name} contains Inf")
    return v


class Polytope(eqx.Module):
    r"""The convex set $\{x : Ax = b,\; l \le Cx \le u,\; lb \le x \le ub\}$.

    ``A`` (``(p, n)``) and ``C`` (``(m, n)``) are shared by a whole batch; ``b``
    (``(..., p)``), ``l``, ``u`` (``(..., m)``), ``lb``, ``ub`` (``(..., n)``) may carry
    leading batch dimensions (broadcast against each other and against the points
    projected). Missing bounds are infinite (``l=None`` means $-\infty$); use
    ``-jnp.inf``/``jnp.inf`` entries for one-sided rows. A pytree (equinox Module):
    it can be passed through ``jit`` and ``vmap``.

    Validated on construction (outside ``jit``): matrices 2-D, finite and floating;
    shapes consistent; ``b`` finite; ``l <= u`` and ``lb <= ub`` elementwise; no NaN.
    Errors name the argument. `factorize` returns a copy holding the
    one-time `Factors`, which `jaxsolve.layers.project` then reuses.
    """

    A: jax.Array | None
    b: jax.Array | None
    C: jax.Array | None
    l: jax.Array | None
    u: jax.Array | None
    lb: jax.Array | None
    ub: jax.Array | None
    factors: Factors | None

    def __init__(self, A=None, b=None, C=None, l=None, u=None, lb=None, ub=None, *, factors=None):
        A = _as_matrix("A", A)
        C = _as_matrix("C", C)
        if A is None and b is not None:
            raise ValueError("b was given without A (the equality rows Ax = b need both)")
        if A is not None and b is None:
            raise ValueError("A was given without b (the equality rows Ax = b need both)")
        if C is None and (l is not None or u is not None):
            raise ValueError("l/u were given without C (the rows l <= Cx <= u need C)")
        if C is not None and l is None and u is None:
            raise ValueError("C was given without l or u: give at least one bound of l <= Cx <= u")
        n = None
        for name, M in (("A", A), ("C", C)):
            if M is not None:
                if n is not None and M.shape[1] != n:
                    raise ValueError(
                        f"{name} has {M.shape[1]} columns but A has {n}: both act on the same x"
                    )
                n = M.shape[1]
        if n is None:
            for name, v in (("lb", lb), ("ub", ub)):
                if v is not None:
                    n = int(np.shape(v)[-1]) if np.ndim(v) else None
                    if n is None:
                        raise ValueError(f"{name} must have shape (..., n), got a scalar")
                    break
        if n is None:
            raise ValueError("Polytope needs at least one constraint: give A/b, C/l/u or lb/ub")
        b = _as_vector("b", b, A.shape[0], allow_inf=False) if A is not None else None
        l = _as_vector("l", l, C.shape[0], allow_inf=True) if C is not None else None
        u = _as_vector("u", u, C.shape[0], allow_inf=True) if C is not None else None
        lb = _as_vector("lb", lb, n, allow_inf=True)
        ub = _as_vector("ub", ub, n, allow_inf=True)
        for lo_name, lo, hi_name, hi in (("l", l, "u", u), ("lb", lb, "ub", ub)):
            if lo is None or hi is None:
                continue
            try:
                np.broadcast_shapes(lo.shape, hi.shape)
            except ValueError:
                raise ValueError(
                    f"{lo_name} {lo.shape} and {hi_name} {hi.shape} do not broadcast"
                ) from None
            if is_concrete((lo, hi)) and np.any(np.asarray(lo) > np.asarray(hi)):
                bad = np.broadcast_arrays(np.asarray(lo) > np.asarray(hi))[0]
                i = int(np.argmax(np.ravel(bad)))
                raise ValueError(
                    f"{lo_name} <= {hi_name} must hold elementwise; it fails at flat index {i}"
                )
        self.A, self.b, self.C, self.l, self.u, self.lb, self.ub = A, b, C, l, u, lb, ub
        self.factors = factors

    # -- sizes -----------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Dimension of x."""
        for M in (self.A, self.C):
            if M is not None:
                return int(M.shape[1])
        return int((self.lb if self.lb is not None else self.ub).shape[-1])

    @property
    def p(self) -> int:
        """Number of equality rows."""
        return 0 if self.A is None else int(self.A.shape[0])

    @property
    def m(self) -> int:
        """Number of two-sided inequality rows ``l <= Cx <= u``."""
        return 0 if self.C is None else int(self.C.shape[0])

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast batch shape of the data ``b, l, u, lb, ub``."""
        shapes = [v.shape[:-1] for v in (self.b, self.l, self.u, self.lb, self.ub) if v is not None]
        return tuple(np.broadcast_shapes(*shapes)) if shapes else ()

    # -- structure ---------------------------------------------------------------------------
    def matrices(self, dtype=None):
        """``(A, C)`` with zero-row matrices for absent parts."""
        dtype = dtype or jnp.result_type(
            *(v for v in (self.A, self.C, self.lb, self.ub) if v is not None)
        )
        A = self.A if self.A is not None else jnp.zeros((0, self.n), dtype)
        C = self.C if self.C is not None else jnp.zeros((0, self.n), dtype)
        return A.astype(dtype), C.astype(dtype)

    def factorize(self, *, ruiz_iters: int = 25) -> Polytope:
        """A copy holding the one-time `Factors` (Ruiz scaling + affine projector)."""
        A, C = self.matrices()
        return self._replace_factors(factorize(A, C, ruiz_iters=ruiz_iters))

    def _replace_factors(self, factors):
        return eqx.tree_at(lambda P: P.factors, self, factors, is_leaf=lambda x: x is None)

    def update(self, **data) -> Polytope:
        """A copy with new data (``b, l, u, lb, ub``), validated, keeping ``A``, ``C`` and the factors.

        This is how a training loop feeds per-example right-hand sides without
        refactorizing: ``poly.update(b=b_batch)``.
        """
        bad = set(data) - {"b", "l", "u", "lb", "ub"}
        if bad:
            raise ValueError(f"update() takes only b, l, u, lb, ub; got {sorted(bad)}")
        kw = {k: getattr(self, k) for k in ("A", "b", "C", "l", "u", "lb", "ub")}
        kw.update(data)
        return Polytope(**kw, factors=self.factors)

    # -- data ----------------------------------------------------------------------------
    def lifted_bounds(self, dtype):
        """``(lo, hi, b)``: lifted bounds on ``(x, s)`` of shape ``(..., n + m)`` and ``b``.

        Absent bounds become $\\mp\\infty$; ``b`` is ``(..., p)`` (``(0,)`` if absent).
        """
        n, m = self.n, self.m
        inf = jnp.asarray(jnp.inf, dtype)
        full = lambda v, size, fill: (
            jnp.full((size,), fill, dtype) if v is None else jnp.asarray(v, dtype)
        )
        lb, ub = full(self.lb, n, -inf), full(self.ub, n, inf)
        l, u = full(self.l, m, -inf), full(self.u, m, inf)
        bs_x = np.broadcast_shapes(lb.shape[:-1], ub.shape[:-1])
        bs_s = np.broadcast_shapes(l.shape[:-1], u.shape[:-1])
        bs = np.broadcast_shapes(bs_x, bs_s)
        cat = lambda a, c: jnp.concatenate(
            [jnp.broadcast_to(a, bs + a.shape[-1:]), jnp.broadcast_to(c, bs + c.shape[-1:])],
            axis=-1,
        )
        b = jnp.zeros((0,), dtype) if self.b is None else jnp.asarray(self.b, dtype)
        return cat(lb, l), cat(ub, u), b

    def violation(self, x: jax.Array) -> jax.Array:
        """Max constraint violation of ``x`` (``(..., n)``), per point, in the original units.

        $\\max(\\|Ax - b\\|_\\infty, \\|(l - Cx)_+\\|_\\infty, \\|(Cx - u)_+\\|_\\infty,
        \\|(lb - x)_+\\|_\\infty, \\|(x - ub)_+\\|_\\infty)$.
        """
        x = jnp.asarray(x)
        parts = [jnp.zeros(x.shape[:-1], x.dtype)]
        if self.A is not None:
            parts.append(jnp.max(jnp.abs(x @ self.A.T.astype(x.dtype) - self.b), axis=-1))
        if self.C is not None:
            Cx = x @ self.C.T.astype(x.dtype)
            if self.l is not None:
                parts.append(jnp.max(jnp.maximum(self.l - Cx, 0), axis=-1))
            if self.u is not None:
                parts.append(jnp.max(jnp.maximum(Cx - self.u, 0), axis=-1))
        if self.lb is not None:
            parts.append(jnp.max(jnp.maximum(self.lb - x, 0), axis=-1))
        if self.ub is not None:
            parts.append(jnp.max(jnp.maximum(x - self.ub, 0), axis=-1))
        out = parts[0]
        for v in parts[1:]:
            out = jnp.maximum(out, v)
        return out
