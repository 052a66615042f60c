"""Kernels for many tiny dense arrays at once (sizes known at trace time), tuned for XLA:CPU.

A second-order step over ``n`` rows often works on ``n`` blocks of size 2-4: their
eigendecompositions, products with them, the few smallest of their eigenvalues. As
library calls (batched LAPACK, ``dot_general``, ``top_k``) each such operation is one
small kernel per block or a full sort; written as elementwise arithmetic on the
entries they fuse with their neighbours. Every function here returns what its
``jnp``/``lax`` counterpart returns, to rounding. Imports nothing from a family.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["UNROLL_MAX", "eigh_small", "small_einsum", "sym_pairs", "top_k_smallest"]

UNROLL_MAX = 4
"""Contracted sizes up to this are unrolled by `small_einsum`; larger ones use ``einsum``."""


def eigh_small(blocks):
    """Eigendecomposition of ``n`` small symmetric blocks ``(n, p, p)``.

    Returns ``(evals (n, p), evecs (n, p, p))`` with ``blocks[i] = evecs[i] diag(evals[i])
    evecs[i]^T``; the eigenvalues come unsorted. For ``p <= 3``: cyclic Jacobi (Jacobi
    1846; Golub and Van Loan, Matrix Computations, Alg. 8.5.3, the ``sym.schur2``
    rotation) with a fixed number of sweeps, vectorized over the blocks as elementwise
    arithmetic on the entry arrays, so that it fuses instead of running one small
    ``syevd`` per block. Cyclic Jacobi converges quadratically: 4 sweeps reach
    ``||E diag(e) E^T - B|| <= 2e-15 ||B||`` on random and graded 3 x 3 blocks
    (``p = 2``: one rotation is exact, 2 sweeps are used). Larger blocks go to
    ``jnp.linalg.eigh``.

    The sweeps are a ``fori_loop`` over one unrolled sweep, its carry the entries of
    ``A`` and ``V`` packed in one ``(2 p^2, n)`` array: the program holds 3 rotations,
    not 12 (Python-unrolled sweeps were a seventh of the K-means Newton program's ops
    and compile time), and the one-array carry keeps the loop's overhead to about 1%
    of a K-means Newton solve on iris (separate entry arrays in the carry cost 20%).
    """
    n, p, _ = blocks.shape
    if p > 3:
        return jnp.linalg.eigh(blocks)
    dtype = blocks.dtype
    tiny = jnp.finfo(dtype).tiny
    pairs = [(i, j) for i in range(p) for j in range(i + 1, p)]

    def rotate(a, v, i, j):
        # J = [[c, s], [-s, c]] on (i, j) zeroes a_ij: A <- J^T A J, V <- V J.
        aij = a[i][j]
        nonzero = jnp.abs(aij) > tiny
        tau = (a[j][j] - a[i][i]) / (2.0 * jnp.where(nonzero, aij, 1.0))
        t = jnp.where(tau >= 0, 1.0, -1.0) / (jnp.abs(tau) + jnp.sqrt(1.0 + tau * tau))
        t = jnp.where(nonzero, t, 0.0)
        c = 1.0 / jnp.sqrt(1.0 + t * t)
        s = t * c
        a = [row[:] for row in a]
        v = [row[:] for row in v]
        for k in range(p):
            if k not in (i, j):
                aki, akj = a[k][i], a[k][j]
                a[k][i] = a[i][k] = c * aki - s * akj
                a[k][j] = a[j][k] = s * aki + c * akj
        a[i][i], a[j][j] = a[i][i] - t * aij, a[j][j] + t * aij
        a[i][j] = a[j][i] = jnp.zeros_like(aij)
        for k in range(p):
            vki, vkj = v[k][i], v[k][j]
            v[k][i], v[k][j] = c * vki - s * vkj, s * vki + c * vkj
        return a, v

    def sweep(_, av):
        # av (2 p^2, n): the entries of A, then of V, row-major
        a = [[av[i * p + j] for j in range(p)] for i in range(p)]
        v = [[av[p * p + i * p + j] for j in range(p)] for i in range(p)]
        for i, j in pairs:
            a, v = rotate(a, v, i, j)
        return jnp.stack([x for row in a + v for x in row])

    eye = jnp.broadcast_to(jnp.eye(p, dtype=dtype).reshape(p * p, 1), (p * p, n))
    av = jnp.concatenate([blocks.reshape(n, p * p).T, eye])
    av = jax.lax.fori_loop(0, 4 if p == 3 else 2, sweep, av)
    return av[: p * p : p + 1].T, av[p * p :].reshape(p, p, n).transpose(2, 0, 1)


def top_k_smallest(a, k: int):
    """``lax.top_k(-a, k)`` for a 1-D ``a`` and a small static ``k``: ``k`` rounds of argmin.

    Returns ``(-values, int32 indices)`` as ``top_k`` does (ties to the lower index).
    XLA:CPU lowers ``top_k`` to a full comparator sort; ``k`` argmin passes are far
    cheaper when ``k`` is a handful.
    """
    vals, idxs = [], []
    for _ in range(k):
        i = jnp.argmin(a)
        vals.append(-a[i])
        idxs.append(i)
        a = a.at[i].set(jnp.inf)
    return jnp.stack(vals), jnp.stack(idxs).astype(jnp.int32)


def sym_pairs(m: int):
    """Static maps between an ``m x m`` symmetric matrix and its upper-triangle pairs.

    Returns NumPy ``(ia, ib, pos)``: pair ``t`` is ``(ia[t], ib[t])`` with
    ``ia <= ib`` (``np.triu_indices`` order) and ``pos[a, b] = pos[b, a]`` its index.
    """
    ia, ib = np.triu_indices(m)
    pos = np.zeros((m, m), np.int64)
    pos[ia, ib] = np.arange(ia.size)
    pos[ib, ia] = np.arange(ia.size)
    return ia, ib, pos


def _broadcast_to_out(a, idx: str, out: str):
    """``a`` (indices ``idx``, a subset of ``out``) transposed and reshaped to broadcast
    against an array with indices ``out``."""
    order = sorted(range(len(idx)), key=lambda t: out.index(idx[t]))
    a = jnp.transpose(a, order)
    s = "".join(idx[t] for t in order)
    return a.reshape([a.shape[s.index(c)] if c in s else 1 for c in out])


def small_einsum(spec: str, x, y) -> jax.Array:
    """``jnp.einsum(spec, x, y)`` for two operands and one contracted index of small size.

    The contraction is written as that many broadcast multiply-adds when the contracted
    size is at most `UNROLL_MAX`: XLA:CPU runs a ``dot_general`` that keeps a long free
    axis (``n`` rows times a ``p``-sized block) as a library call with layout copies
    around it, while multiply-adds fuse with their neighbours. Larger contractions keep
    the einsum. ``spec`` must contract exactly one index (e.g. ``"ia,iab->ib"``).
    """
    ins, out = spec.split("->")
    sx, sy = ins.split(",")
    (c,) = [ch for ch in sx if ch in sy and ch not in out]
    if x.shape[sx.index(c)] > UNROLL_MAX:
        return jnp.einsum(spec, x, y)
    total = None
    # static slices (lax.index_in_dim), not jnp.take: take's out-of-bounds handling adds
    # a gather, a compare and a select per term to the program
    for k in range(x.shape[sx.index(c)]):
        xk = jax.lax.index_in_dim(x, k, axis=sx.index(c), keepdims=False)
        yk = jax.lax.index_in_dim(y, k, axis=sy.index(c), keepdims=False)
        xk = _broadcast_to_out(xk, sx.replace(c, ""), out)
        yk = _broadcast_to_out(yk, sy.replace(c, ""), out)
        total = xk * yk if total is None else total + xk * yk
    return total
