r"""The structured Riemannian Hessian of the log-barrier K-means cost and its reduced KKT system.

The cost (`jaxsolve.cluster.kmeans_newton`) on the product manifold ``V x O_r`` of
`jaxsolve.cluster.kmeans_manifold`, ``U = phi(V, Q) = [1/sqrt(n), V] Q``::

    f(V, Q) = -||X^T V||_F^2 - w * sum_ij log U_ij,    w = mu / (n r).

In tangent coordinates ``(Xi, omega)`` (``Xi`` an ``n x (r-1)`` centred matrix
orthogonal to ``V``; ``Q-dot = Omega Q`` with ``Omega = sum_k omega_k E_k`` in an
orthonormal basis of skew(r)), the Riemannian Hessian is

* block diagonal in the rows of ``Xi``: ``B_i = Q_1 diag(w / U_i^2) Q_1^T - (<V, G_V>/(K-1)) I``
  (the barrier's Hessian pulled back through ``phi``, plus the sphere's Weingarten term);
* plus a rank ``d (r-1)`` data term ``-2 X X^T`` acting on each column of ``Xi``;
* plus a border of ``r(r-1)/2`` columns coupling ``Xi`` and ``omega`` (and the small
  ``omega`` block with the orthogonal group's Weingarten term), obtained by
  ``r(r-1)/2`` Hessian-vector products;
* and linear constraints: ``1^T Xi = 0``, ``<V, Xi> = 0`` (the tangent space) and the
  ``(r-1)(r-2)/2`` horizontality conditions below.

Quotient (horizontal) steps. ``phi([1, V R] diag(1, R^T) Q) = phi(V, Q)`` for ``R`` in
``O_{r-1}``, so the cost is constant along the vertical directions
``(V A, -diag(0, A) Q)``, ``A`` skew. Along them the Hessian's quadratic form equals
``-<grad f, gamma''>``: zero at critical points but of either sign elsewhere, so a
Newton model on the full tangent space sees spurious negative curvature. The
subproblem is therefore solved on the horizontal space (the tangent space of the
quotient manifold; the lifted Hessian of a Riemannian submersion is the horizontal
projection of the Hessian): the vertical directions enter the KKT system as ``m_v``
more constraints.

For a shift ``lam`` the KKT system of ``(Hess f + lam I) p = -g`` is reduced by block
elimination (Woodbury) to a dense system of size
``(d+1)(r-1) + r(r-1)/2 + 1 + m_v + k``. Its data block
``sum_i xbar_i xbar_i^T (x) (B_i + lam)^{-1}`` is one GEMM over the symmetric index
pairs (``xbar_i xbar_i^T`` precomputed once per step): ``O(n d^2 r^2 / 4)`` flops per
``lam`` at BLAS speed. Positive definiteness on the horizontal space is decided exactly
from the inertia (Haynsworth's additivity, Cholesky of the reduced blocks). ``B + lam I``
itself may be indefinite; up to ``k`` of its smallest eigenvalues are moved into the
low-rank part (see `factor_eigen`), so ``lam`` can go to 0. Building the structure
costs ``O(n (r^3 + d^2 r^2))``: linear in the number of points.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.cluster._problem import lift, lift_basis, skew_basis
from jaxsolve.small_linalg import eigh_small, small_einsum, sym_pairs


def barrier_weight(mu, v, q):
    """``w = mu / (n r)``: the barrier's weight per entry of ``U``, so ``mu`` is its total."""
    n = v.shape[0]
    return mu / (n * q.shape[0])


def barrier_cost(x, data, mu):
    """``f(V, Q) = -||X^T V||^2 - mu/(n r) sum log phi(V, Q)``; ``+inf`` where ``phi <= 0``."""
    v, q = x
    u = lift(v, q)
    ok = jnp.all(u > 0)
    logs = jnp.log(jnp.where(u > 0, u, 1.0))
    val = -jnp.sum((data.T @ v) ** 2) - barrier_weight(mu, v, q) * jnp.sum(logs)
    return jnp.where(ok, val, jnp.inf)


def value_and_grad(x, data, mu):
    """``f(V, Q)`` and its Euclidean gradient ``(G_V, G_Q)``."""
    return jax.value_and_grad(barrier_cost)(x, data, mu)


def barrier_hvp_q(x, mu, dqs):
    """Hessian-vector products of ``f`` along ``(0, dQ_k)`` for a stack ``dqs`` (m, r, r).

    With ``U = Ybar Q``, ``Ybar = [1/sqrt(n), V]`` and ``G_U = -w / U`` (the barrier's
    gradient in ``U``; the data term does not depend on ``Q``): ``dU = Ybar dQ``,
    ``dG_U = w dU / U^2``, so ``d(df/dQ) = Ybar^T dG_U`` and
    ``d(df/dV) = (dG_U Q^T + G_U dQ^T)[:, 1:]``. Written out instead of
    forward-over-reverse autodiff: the same numbers in fewer kernels.
    """
    v, q = x
    ybar = lift_basis(v)
    u = ybar @ q
    w = barrier_weight(mu, v, q)
    du = small_einsum("ia,kab->kib", ybar, dqs)
    dgu = w * du / (u * u)
    hvp_q = jnp.einsum("ia,kib->kab", ybar, dgu)
    hvp_v = small_einsum("kib,ab->kia", dgu, q) - w * small_einsum("ib,kab->kia", 1.0 / u, dqs)
    return hvp_v[:, :, 1:], hvp_q


def hess_form(x, data, mu, xi, pq):
    """``<p, D^2 f[p]>`` (Euclidean) along ``p = (Xi, dQ)``, written out.

    ``U(t) = [1/sqrt(n), V + t Xi] (Q + t dQ)`` has ``U' = [0, Xi] Q + Ybar dQ`` and
    ``U'' = 2 [0, Xi] dQ``; the barrier ``-w sum log U`` contributes
    ``sum w U'^2 / U^2 - 2 w sum [0, Xi] dQ / U`` and the data term ``-2 ||X^T Xi||^2``.
    """
    v, q = x
    n = v.shape[0]
    ybar = lift_basis(v)
    u = ybar @ q
    w = barrier_weight(mu, v, q)
    xi0 = jnp.concatenate([jnp.zeros((n, 1), v.dtype), xi], axis=1)
    du = xi0 @ q + ybar @ pq
    return (
        -2.0 * jnp.sum((data.T @ xi) ** 2)
        + w * jnp.sum((du / u) ** 2)
        - 2.0 * w * jnp.sum((xi0 @ pq) / u)
    )


def riemannian_gradient(x, g, basis):
    """Riemannian gradient in tangent coordinates: (Xi_g, omega_g)."""
    v, q = x
    grad_v, grad_q = g
    rho2 = jnp.sum(v * v)
    grad_v_centred = grad_v - jnp.mean(grad_v, axis=0, keepdims=True)
    xi = grad_v_centred - (jnp.sum(v * grad_v_centred) / rho2) * v
    om = jnp.einsum("kab,ab->k", basis, grad_q @ q.T)
    return xi, om


def _k_smallest(a, k: int):
    """`jaxsolve.small_linalg.top_k_smallest` (``k`` rounds of argmin, ties to the lower
    index; returns ``(-values, int32 indices)``) as a loop: the same numbers, and one
    round compiled instead of ``k`` unrolled ones (each ~4 kernels: argmin, gather,
    scatter, copy)."""

    def round_(j, c):
        a, vals, idxs = c
        i = jnp.argmin(a)
        return a.at[i].set(jnp.inf), vals.at[j].set(-a[i]), idxs.at[j].set(i.astype(jnp.int32))

    init = (a, jnp.zeros((k,), a.dtype), jnp.zeros((k,), jnp.int32))
    _, vals, idxs = jax.lax.fori_loop(0, k, round_, init)
    return vals, idxs


class Structure(NamedTuple):
    """What `structure` computes once per step: the Hessian's blocks and border, and the
    ``lam``-independent parts of every `factor_eigen` (``k`` moved eigenvalues, ``P``
    eigenvector pairs, ``m`` the reduced system's size)."""

    evals: jax.Array  # (n, p) eigenvalues of the diagonal blocks B_i = D_i - c_v I
    evecs: jax.Array  # (n, p, p)
    xbar: jax.Array  # (n, d+1) = [X, 1]
    xpairs: jax.Array  # (n, (d+1)(d+2)/2): xbar_ia xbar_ib for a <= b (lam-independent)
    rgen: jax.Array  # (m_w + 1 + m_v, n, p): border rows C_k, V and vertical rows V A_k
    h_om: jax.Array  # (m_w, m_w)
    vcoup: jax.Array  # (m_w, m_v): omega part of the vertical directions (m_v may be 0)
    # lam-independent pieces of every factorization (see factor_eigen), computed once a step:
    moved: jax.Array  # (n, p) bool: the k smallest eigenvalues (order of evals + lam)
    ev_sel: jax.Array  # (k,) those eigenvalues
    lam_b: jax.Array  # () max(0, -(k+1)-th smallest eigenvalue): left end of the search
    epairs: jax.Array  # (n, P, p): evecs[i, a, b] evecs[i, a', b] for the pairs a <= a'
    t_r: jax.Array  # (m_w + 1 + m_v, n, p): the border rows in eigen coordinates
    sel_idx: jax.Array  # (k,) flat (n p) positions of the moved eigenvalues
    f0: jax.Array  # (m, m): lam-independent part of the permuted reduced matrix
    t_rt: jax.Array  # (n p, m_w + 1 + m_v): t_r flattened and transposed, for the search's G block


def structure(x, g, data, mu, basis, horizontal=True):
    """The `Structure` of the Hessian at ``x = (V, Q)`` with Euclidean gradient ``g``.

    ``basis`` is the skew basis ``(m_w, r, r)``; ``horizontal=False`` drops the
    vertical constraints (the subproblem on the full tangent space).
    """
    v, q = x
    grad_v, grad_q = g
    n, p = v.shape
    dtype = v.dtype
    w = barrier_weight(mu, v, q)
    u = lift(v, q)
    dmat = w / (u * u)
    q1 = q[1:]
    c_v = jnp.sum(v * grad_v) / jnp.sum(v * v)
    blocks = jnp.einsum("ar,ir,br->iab", q1, dmat, q1) - c_v * jnp.eye(p, dtype=dtype)
    evals, evecs = eigh_small(blocks)

    # Border: D^2 f[(0, E_k Q)], written out (checked against autodiff in the tests).
    dirs = basis @ q  # (m_w, r, r)
    hvp_v, hvp_q = barrier_hvp_q(x, mu, dirs)
    sym_s = 0.5 * (q.T @ grad_q + grad_q.T @ q)
    h_om = jnp.einsum("lab,kab->kl", dirs, hvp_q) - jnp.einsum("lab,kac,cb->kl", dirs, dirs, sym_s)
    h_om = 0.5 * (h_om + h_om.T)
    if horizontal:
        xis, cs = vertical(v, basis)
    else:
        xis, cs = jnp.zeros((0, n, p), dtype), jnp.zeros((0, basis.shape[0]), dtype)
    rgen = jnp.concatenate([hvp_v, v[None], xis], axis=0)
    xbar = jnp.concatenate([data, jnp.ones((n, 1), dtype)], axis=1)
    ia, ib = np.triu_indices(xbar.shape[1])
    xpairs = xbar[:, ia] * xbar[:, ib]
    m_w, m_v = basis.shape[0], cs.shape[0]
    # The order of evals + lam does not depend on lam: the k moved eigenvalues (see
    # factor_eigen) and the search's left end are fixed for the whole step.
    kmax = min(p + 1 + m_v, 8, n * p)
    kb = min(kmax + 1, n * p)
    flat = evals.reshape(-1)
    neg, idx = _k_smallest(flat, kb)
    lam_b = jnp.maximum(neg[-1], 0.0)
    idx = idx[:kmax]
    moved = jnp.zeros((n * p,), bool).at[idx].set(True).reshape(n, p)
    # A moved eigenvector w_j (column c of block i) is the unit vector e_(i, c) in the
    # eigen coordinates z_i = E_i^T xi_i: factor_eigen uses it through its index idx_j.
    t_r = small_einsum("jia,iab->jib", rgen, evecs)
    pa, pb, _ = sym_pairs(p)
    epairs = evecs[:, pa, :] * evecs[:, pb, :]
    maps = layout(xbar.shape[1], p, m_w, m_v, kmax)
    cvals = jnp.concatenate(
        [jnp.full((1,), 0.5, dtype), h_om.reshape(-1), cs.T.reshape(-1), jnp.zeros((1,), dtype)]
    )
    f0 = cvals[maps.f0_map]
    return Structure(
        evals,
        evecs,
        xbar,
        xpairs,
        rgen,
        h_om,
        cs.T,
        moved,
        -neg[:kmax],
        lam_b,
        epairs,
        t_r,
        idx.astype(jnp.int32),
        f0,
        t_r.reshape(t_r.shape[0], -1).T,
    )


class Layout(NamedTuple):
    """Static (NumPy) index maps of the reduced KKT matrix, built by `layout`."""

    perm: np.ndarray  # reduced-system order: the a-block (kept), then the c-block
    iperm: np.ndarray  # the inverse permutation (back to the unpermuted order)
    na: int  # size of the a-block: data z, omega and the correction columns
    s_map: np.ndarray  # (m, m) index into [ksym, kg, gg] of each permuted entry
    f0_map: np.ndarray  # (m, m) index into [1/2, h_om, vcoup, 0]
    lam_diag: np.ndarray  # (m,) 1 on the omega diagonal
    om0: int  # start of omega in the permuted order


def layout(d1: int, p: int, m_w: int, m_v: int, kmax: int) -> Layout:
    """Static index maps of the reduced KKT matrix (numpy, at trace time).

    Unpermuted order: data ``z`` (``d p``), ``nu`` (``p``), ``omega`` (``m_w``), ``eta``
    (1), vertical multipliers (``m_v``), corrections (``k``). ``S = [[F_k - K, -K_g^T],
    [-K_g, F_g - G]]`` with ``K_{(a,c),(b,c')} = ksym[pos_x(a, b), pos_p(c, c')]``.
    """
    nd = d1 - 1
    m_g0 = m_w + 1 + m_v
    m_g = m_g0 + kmax
    dk = d1 * p
    m = dk + m_g
    _, _, pos_x = sym_pairs(d1)
    _, _, pos_p = sym_pairs(p)
    n_pp = p * (p + 1) // 2
    n_ks = (d1 * (d1 + 1) // 2) * n_pp
    s_map = np.zeros((m, m), np.int64)
    k_block = (pos_x[:, None, :, None] * n_pp + pos_p[None, :, None, :]).reshape(dk, dk)
    s_map[:dk, :dk] = k_block
    kg = n_ks + np.arange(m_g)[:, None] * dk + np.arange(dk)[None, :]  # kg[j, u]
    s_map[dk:, :dk] = kg
    s_map[:dk, dk:] = kg.T
    s_map[dk:, dk:] = n_ks + m_g * dk + np.arange(m_g * m_g).reshape(m_g, m_g)
    zero = 1 + m_w * m_w + m_w * m_v
    f0_map = np.full((m, m), zero, np.int64)
    f0_map[np.arange(nd * p), np.arange(nd * p)] = 0
    f0_map[dk : dk + m_w, dk : dk + m_w] = 1 + np.arange(m_w * m_w).reshape(m_w, m_w)
    vc = 1 + m_w * m_w + np.arange(m_w * m_v).reshape(m_w, m_v)
    f0_map[dk : dk + m_w, dk + m_w + 1 : dk + m_g0] = vc
    f0_map[dk + m_w + 1 : dk + m_g0, dk : dk + m_w] = vc.T
    idx_a = np.concatenate([np.arange(nd * p), dk + np.arange(m_w), dk + m_g0 + np.arange(kmax)])
    idx_c = np.concatenate([nd * p + np.arange(p), dk + m_w + np.arange(1 + m_v)])
    perm = np.concatenate([idx_a, idx_c])
    iperm = np.argsort(perm)
    lam_diag = np.zeros(nd * p + m_w)  # permuted order: data z, then omega
    lam_diag[nd * p :] = 1.0
    return Layout(
        perm, iperm, idx_a.size, s_map[perm][:, perm], f0_map[perm][:, perm], lam_diag, nd * p
    )


def n_corrections(system) -> int:
    """Static number of eigenvalues of ``B + lam`` moved to the low-rank part.

    The inertia argument allows up to ``p + 1 + m_v`` (the number of constraints);
    each column costs ``O(n p)`` in every factorization, so at most 8 are kept:
    ``B + lam`` with more negative eigenvalues than that is rejected (``lam`` grows),
    a conservative answer that never accepts an indefinite model.
    """
    return system.ev_sel.shape[0]


def factor_eigen(system, lam):
    """Assemble and factor the reduced KKT system at ``lam``, in eigen coordinates.

    Returns ``(ok, solve)`` with ``solve(tg, h_om) -> (z, omega)``: ``tg`` and ``z`` in
    the coordinates ``z_i = E_i^T xi_i`` of the blocks' eigenvectors (orthogonal per
    row, so norms and inner products are those of ``xi``).

    Shifted blocks. ``B + lam I`` may be indefinite while the Hessian plus ``lam`` is
    positive definite on the horizontal space: the constraints (``1^T Xi = 0`` among
    them) and the border lift it (at well-separated mixtures' solutions ``B`` has one
    negative eigenvalue while the horizontal Hessian is positive definite). By
    Haynsworth's inertia additivity the KKT matrix has the required inertia only if
    ``B + lam I`` has at most as many negative eigenvalues as there are constraints
    (``p + 1 + m_v``). So the ``k`` smallest eigenvalues ``e_j`` (eigenvector ``w_j``,
    supported on one row; the set does not depend on ``lam``) are replaced by
    ``b_j = max(e_j, 0) + c0 > 0`` (``c0`` = mean ``|e + lam|``, a scale) and the
    difference ``(e_j - b_j) w_j w_j^T`` joins the low-rank part as ``k`` extra columns
    with diagonal entry ``1 / (b_j - e_j) > 0`` (positive: the inertia count of the
    reduced system is unchanged). The Cholesky-based test is then exact whenever ``B~``
    is positive definite; ``B + lam`` with more than ``k`` negative eigenvalues is
    rejected (exact for ``k = p + 1 + m_v``, conservative for the cap ``k = 8``).

    Everything that does not depend on ``lam`` (the moved set, the border rows in eigen
    coordinates, the static index maps of the reduced matrix) comes from
    `structure`, so a factorization is a handful of fused ops: at a few hundred
    points the per-op overhead, not the arithmetic, dominates.
    """
    n, p = system.evals.shape
    dtype = system.evals.dtype
    d1 = system.xbar.shape[1]
    m_w, m_v = system.vcoup.shape
    kmax = n_corrections(system)
    maps = layout(d1, p, m_w, m_v, kmax)
    e_l = system.evals + lam
    c0 = jnp.mean(jnp.abs(e_l)) + jnp.finfo(dtype).tiny
    e_t = jnp.where(system.moved, jnp.maximum(e_l, 0.0) + c0, e_l)
    inv = 1.0 / e_t
    sel = system.ev_sel + lam
    e_diag = 1.0 / (jnp.maximum(sel, 0.0) + c0 - sel)
    # kron block: sum_i xbar_i xbar_i^T (x) B~_i^{-1}, index (a, c), (b, c'); one GEMM on
    # the symmetric pairs (a <= b) x (c <= c') (O(n d^2 p^2 / 4)), scattered by s_map.
    ksym = system.xpairs.T @ jnp.einsum("ijb,ib->ij", system.epairs, inv)
    # The low-rank part's columns: the border rows t_r (dense) and the k moved
    # eigenvectors w_j = e_(i_j, b_j) in eigen coordinates (one-hot: their products are
    # gathers, not n p-long passes).
    border_inv = system.t_r * inv  # (m0, n, p)
    # B~^{-1} applied to the border rows
    rb = small_einsum("jib,icb->jic", border_inv, system.evecs)
    kg_r = jnp.einsum("ia,jic->jac", system.xbar, rb).reshape(-1, d1 * p)  # (m0, d1 p)
    moved_row, moved_col = system.sel_idx // p, system.sel_idx % p
    inv_w = inv[moved_row, moved_col]  # (k,)
    kg_w = (
        inv_w[:, None, None]
        * system.xbar[moved_row][:, :, None]
        * system.evecs[moved_row, :, moved_col][:, None, :]
    )
    kg = jnp.concatenate([kg_r, kg_w.reshape(kmax, d1 * p)])  # (m_g, d1 p)
    gg_rw = system.t_r[:, moved_row, moved_col] * inv_w  # (m0, k)
    m0 = system.t_r.shape[0]
    gg0 = border_inv.reshape(m0, -1) @ system.t_rt
    gg = jnp.block([[gg0, gg_rw], [gg_rw.T, jnp.diag(inv_w)]])
    vals = jnp.concatenate([ksym.reshape(-1), kg.reshape(-1), gg.reshape(-1)])
    dvec = jnp.concatenate(
        [lam * maps.lam_diag.astype(dtype), e_diag, jnp.zeros((maps.perm.size - maps.na,), dtype)]
    )
    s = system.f0 - vals[maps.s_map] + jnp.diag(dvec)
    # a = data z (first d p), omega and the correction columns; c = the multipliers
    # nu (p, 1^T Xi = 0), eta (<V, Xi> = 0) and the vertical ones (m_v).
    na = maps.na
    s_aa, s_ac, s_cc = s[:na, :na], s[:na, na:], s[na:, na:]
    l_c = jnp.linalg.cholesky(-s_cc)
    t = jax.scipy.linalg.cho_solve((l_c, True), s_ac.T)  # (-S_cc)^{-1} S_ca
    schur = s_aa + s_ac @ t
    l_a = jnp.linalg.cholesky(0.5 * (schur + schur.T))
    ok = jnp.all(e_t > 0) & jnp.all(jnp.isfinite(l_c)) & jnp.all(jnp.isfinite(l_a))
    om0 = maps.om0

    def solve(tg, h_om):
        """Solve (Hess + lam) p = -g on the tangent space, eigen coordinates in and out."""
        tgi = tg * inv
        gb = small_einsum("ib,icb->ic", tgi, system.evecs)
        bk = jnp.einsum("ia,ic->ac", system.xbar, gb).reshape(-1)
        bg = jnp.concatenate([jnp.einsum("jib,ib->j", system.t_r, tgi), tgi[moved_row, moved_col]])
        b = jnp.concatenate([bk, bg])[maps.perm]
        b_a = b[:na].at[om0 : om0 + m_w].add(-h_om)
        b_c = b[na:]
        # S y = b with S_cc negative definite: y_c = S_cc^{-1}(b_c - S_ca y_a)
        rhs_a = b_a + s_ac @ jax.scipy.linalg.cho_solve((l_c, True), b_c)
        y_a = jax.scipy.linalg.cho_solve((l_a, True), rhs_a)
        y_c = -jax.scipy.linalg.cho_solve((l_c, True), b_c - s_ac.T @ y_a)
        y = jnp.concatenate([y_a, y_c])[maps.iperm]
        yk = y[: d1 * p].reshape(d1, p)
        yg = y[d1 * p :]
        m0 = system.t_r.shape[0]
        ly = small_einsum("ic,icb->ib", system.xbar @ yk, system.evecs) + jnp.einsum(
            "j,jib->ib", yg[:m0], system.t_r
        )
        ly = ly.at[moved_row, moved_col].add(yg[m0:])
        return -(tg + ly) * inv, y_a[om0 : om0 + m_w]

    return ok, solve


def to_eigen(system, xi):
    """Rows ``xi_i`` in the blocks' eigen coordinates ``z_i = E_i^T xi_i``."""
    return small_einsum("ia,iab->ib", xi, system.evecs)


def from_eigen(system, z):
    """Inverse of `to_eigen`."""
    return small_einsum("ib,iab->ia", z, system.evecs)


def factor(system, lam):
    """Assemble and factor the reduced KKT system at ``lam``; returns (ok, solve).

    ``solve(gx, h_om) -> (xi, omega)`` solves ``(Hess + lam) p = -g`` on the tangent
    (horizontal) space, ``gx`` the ambient ``(n, p)`` gradient part (see `factor_eigen`).
    """
    ok, solve_t = factor_eigen(system, lam)

    def solve(gx, h_om):
        z, om = solve_t(to_eigen(system, gx), h_om)
        return from_eigen(system, z), om

    return ok, solve


def vertical(v, basis):
    """The vertical directions ``(V A_k, -diag(0, A_k) Q)`` in tangent coordinates."""
    r = basis.shape[1]
    dtype = v.dtype
    small = skew_basis(r - 1, dtype)
    big = jnp.zeros((small.shape[0], r, r), dtype).at[:, 1:, 1:].set(-small)
    xis = small_einsum("ia,kab->kib", v, small)  # V A_k
    cs = jnp.einsum("kab,lab->kl", big, basis)  # omega coordinates of -diag(0, A_k)
    return xis, cs


def horizontal(v, xi, om, basis):
    r"""Remove the vertical part of a step (the symmetry of the lift).

    ``phi([1, V R] diag(1, R^T) Q) = phi(V, Q)`` for ``R`` in ``O_{r-1}``: the cost is constant
    along the directions ``(V A, -diag(0, A) Q)``, ``A`` skew, so the Hessian is singular
    there at critical points and a Newton step may carry a large, useless vertical part
    whose retraction error spoils the model. We project the step onto their orthogonal
    complement (the horizontal space of the quotient; ``O(n r^3)``).
    """
    xis, cs = vertical(v, basis)
    if cs.shape[0] == 0:
        return xi, om
    gram = jnp.einsum("kia,lia->kl", xis, xis) + cs @ cs.T
    rhs = jnp.einsum("kia,ia->k", xis, xi) + cs @ om
    # the Gram matrix of independent directions is positive definite: Cholesky (one
    # factorization, two triangular solves) rather than LU, whose pivots become a
    # permutation loop in the program
    coef = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(gram), True), rhs)
    return xi - jnp.einsum("k,kia->ia", coef, xis), om - coef @ cs


def quadratic_form(x, g, data, mu, xi, omega):
    """``<p, Hess f(x)[p]>`` for ``p = (Xi, Omega Q)``: the Euclidean form plus the
    manifolds' Weingarten terms."""
    v, q = x
    grad_v, grad_q = g
    pq = omega @ q
    c_v = jnp.sum(v * grad_v) / jnp.sum(v * v)
    sym_s = 0.5 * (q.T @ grad_q + grad_q.T @ q)
    return hess_form(x, data, mu, xi, pq) - c_v * jnp.sum(xi * xi) - jnp.sum(pq * (pq @ sym_s))
