r"""Factorizations and inverses of FlexQP's x-update matrix, tuned for batched XLA:CPU.

The ADMM x-update of `jaxsolve.qp.flexqp` solves ``K x = b`` with the symmetric
positive definite ``K = P + sigma I + A' R A`` (scaled data, ``R`` the row penalties).
`factor` keeps either its Cholesky factor or an explicit inverse factor; `solve_kkt`
applies it. The explicit inverses of order above ``2 * INV_BASE`` are built by halves
from matrix products, because XLA:CPU runs batched products far faster than the
per-lane LAPACK triangular solves a direct inverse needs.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular

from jaxsolve.qp.scaling import Scaled

__all__ = ["INV_BASE", "factor", "solve_kkt", "spd_inverse", "split_inverse", "tri_inverse"]

#: Inverses of order above ``2 * INV_BASE`` are taken by halves (`spd_inverse`,
#: `tri_inverse`) down to blocks of order at most ``INV_BASE`` (Cholesky and one
#: triangular solve against the identity); smaller ones directly. 16 is the fastest
#: leaf size on 2-core CPUs for n = 40 ... 150 (8 and 32 are slower).
INV_BASE = 16


def split_inverse(dtype) -> bool:
    """Whether an explicit inverse factor is kept as ``L^-1`` (two matrix-vector
    products per solve) rather than ``K^-1`` (one): in float32 (see `factor`)."""
    return dtype == jnp.float32


def tri_inverse(L, halves=True):
    """``L^-1`` of a lower-triangular ``L`` (``(n, n)``), by halves above `INV_BASE`
    (``halves=False``: directly).

    ``[[L11, 0], [L21, L22]]^-1 = [[L11^-1, 0], [-L22^-1 L21 L11^-1, L22^-1]]``: two
    half-size inverses and two matrix products, where one triangular solve against the
    identity (a LAPACK trsm per lane on XLA:CPU, the slowest kernel of a batched
    factorization) costs about twice as much; the residual ``||L^-1 L - I||`` is the same.
    """
    n = L.shape[-1]
    if n <= INV_BASE or not halves:
        return solve_triangular(L, jnp.eye(n, dtype=L.dtype), lower=True)
    h = n // 2
    i11, i22 = tri_inverse(L[:h, :h]), tri_inverse(L[h:, h:])
    i21 = -(i22 @ L[h:, :h]) @ i11
    return jnp.block([[i11, jnp.zeros((h, n - h), L.dtype)], [i21, i22]])


def spd_inverse(K, halves=True):
    r"""``K^-1`` of a symmetric positive definite ``K`` (``(n, n)``), by halves above
    `INV_BASE` (``halves=False``: directly).

    With ``K = [[A, B], [B', C]]``, ``W = A^-1 B`` and the Schur complement
    ``S = C - B'W`` (positive definite when ``K`` is),

    $$
    K^{-1} = \begin{pmatrix} A^{-1} + W S^{-1} W' & -W S^{-1} \\
    -S^{-1} W' & S^{-1} \end{pmatrix},
    $$

    the two half-size inverses recursively and four matrix products: block Cholesky
    done by products, with the same residual ``||K^-1 K - I||``. At the base,
    ``L^-T L^-1`` (one triangular solve and a product, exactly symmetric, cheaper
    batched than ``cho_solve``'s two solves against the identity); the diagonal blocks
    are symmetrized. A ``K`` that is not positive definite has a leaf block (``A``, or a
    nested Schur complement) that is not, whose Cholesky gives NaN: the caller's
    finiteness check sees it as it would the unsplit Cholesky's.
    """
    n = K.shape[-1]
    if n <= INV_BASE or not halves:
        Li = tri_inverse(jnp.linalg.cholesky(K), False)
        return Li.T @ Li
    h = n // 2
    A, B, C = K[:h, :h], K[:h, h:], K[h:, h:]
    Ai = spd_inverse(A)
    W = Ai @ B
    S = C - B.T @ W
    Si = spd_inverse(0.5 * (S + S.T))
    X12 = -W @ Si
    X11 = Ai - X12 @ W.T
    return jnp.block([[0.5 * (X11 + X11.T), X12], [X12.T, Si]])


def factor(data: Scaled, rho_rows, inverse=False):
    """Factor ``K = P + sigma I + A' diag(rho_rows) A`` of the scaled ``data``
    (``rho_rows``: ``(m,)`` row penalties, `jaxsolve.qp.admm.row_rho`).

    ``K`` is formed from the scaled data on every call (one ``n x m x n`` product)
    rather than kept as ``K0 + rho C``: refactorizations are rare and the state then
    holds no ``n x n`` parts besides the factor.

    Returns the lower Cholesky factor ``L`` (``K = L L'``), or with ``inverse`` an
    explicit inverse factor, applied by matrix-vector products instead of two
    triangular solves (much faster batched; ADMM tolerates its rounding, polishing
    restores accuracy): ``K^-1`` (`spd_inverse`) in float64, ``L^-1`` (`tri_inverse`) in
    float32. Applied as ``L^-T (L^-1 b)`` the float32 factor keeps the backward error of
    the Cholesky solve, where a rounded float32 ``K^-1`` leaves ``eps cond(K)``, too much
    for the ``1e3 rho`` weights of equality rows.
    """
    A = data.A
    K = data.P + data.sigma * jnp.eye(A.shape[1], dtype=A.dtype)
    K = K + A.T @ (rho_rows[:, None] * A)
    if not inverse:
        return jnp.linalg.cholesky(K)
    halves = K.shape[-1] > 2 * INV_BASE
    if split_inverse(K.dtype):
        return tri_inverse(jnp.linalg.cholesky(K), halves)
    return spd_inverse(K, halves)


def solve_kkt(L, rhs, inverse, L_t=None):
    """``K^-1 rhs`` from `factor`'s output ``L`` (``L_t``: ``L.T``, when the caller made
    it once outside a loop)."""
    if not inverse:
        return cho_solve((L, True), rhs)
    if split_inverse(L.dtype):
        return (L.T if L_t is None else L_t) @ (L @ rhs)
    return L @ rhs
