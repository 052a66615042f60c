r"""Cubic-regularized Riemannian Newton for the K-means SDP (Xu, Hou, Chen, Zhang, ICLR 2026).

Problem (paper 12, eq. 13) on the product manifold ``V x O_r`` of
`jaxsolve.cluster.kmeans_manifold`, with ``U = phi(V, Q) = [1/sqrt(n), V] Q``::

    min_{V, Q}  f(V, Q) = -||X^T V||_F^2 - w * sum_ij log U_ij,    w = mu / (n r),

for centred, unit-Frobenius-norm data ``X`` (``n x d``); the first term is ``-<X X^T, U U^T>``
and the log-barrier keeps ``U > 0`` (the nonnegativity of the Burer-Monteiro factor).
Scaling ``w`` by ``1/(n r)`` makes ``mu`` the barrier's total weight against a data term
in ``[-1, 0]`` (documented choice; the paper does not fix a scaling we could read).

Each step is an ARC step (adaptive cubic regularization; Agarwal, Boumal, Bullins and
Cartis 2021) on the manifold: the model
``m(p) = <g, p> + 1/2 <p, Hess f[p]> + sigma/3 ||p||^3`` over the tangent space is
minimized through its optimality condition ``(Hess f + lam I) p = -g`` with
``lam = sigma ||p||`` and ``Hess f + lam I`` positive definite on the tangent space
(Nesterov and Polyak 2006). The root of the secular equation ``lam = sigma ||p(lam)||``
is bracketed and found by bisection (paper 12: monotone in ``lam``, Lemma 2), with
safeguarded Newton steps on ``phi(lam) = 1/||p|| - sigma/lam`` (increasing and concave,
so Newton's iterates approach the root monotonically from the left after at most one
step: 1-7 factorizations per step, measured; the search also ends once ``p`` itself is
accurate to ``inner_rtol``, see `_cubic_subproblem`).

Linear-time structure. In tangent coordinates ``(Xi, omega)`` (``Xi`` an ``n x (r-1)``
centred matrix orthogonal to ``V``; ``Q-dot = Omega Q`` with ``Omega = sum_k omega_k E_k``
in an orthonormal basis of skew(r)), the Riemannian Hessian is

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
Newton model on the full tangent space sees spurious negative curvature and ARC pays
with a large ``lam`` (gradient-like steps). The subproblem is therefore solved on the
horizontal space (the tangent space of the quotient manifold; the lifted Hessian of a
Riemannian submersion is the horizontal projection of the Hessian): the vertical
directions enter the KKT system as ``m_v`` more constraints.

For each trial ``lam`` the KKT system is reduced by block elimination (Woodbury) to a
dense system of size ``(d+1)(r-1) + r(r-1)/2 + 1 + m_v + k``. Its data block
``sum_i xbar_i xbar_i^T (x) (B_i + lam)^{-1}`` is one GEMM over the symmetric index
pairs (``xbar_i xbar_i^T`` precomputed once per step): ``O(n d^2 r^2 / 4)`` flops per
``lam`` at BLAS speed. Positive definiteness on the horizontal space is decided exactly
from the inertia (Haynsworth's additivity, Cholesky of the reduced blocks). ``B + lam I``
itself may be indefinite (one negative eigenvalue at the mixtures' solutions, where the
horizontal Hessian's smallest eigenvalue is 0.38): up to ``k`` (at most ``p + 1 + m_v``,
capped at 8) of its smallest eigenvalues are moved into the low-rank part (see
`_factor_t`), so ``lam`` can go to 0 and the end game is Newton's (quadratic).
A step costs ``O(n (r^3 + d^2 r^2))``: linear in the number of points.

The iterate stays strictly feasible: a trial point with some ``U_ij <= 0`` has cost
``+inf``, is rejected and ``sigma`` grows, so ``log`` never sees a non-positive entry.
The step is taken along ``U exp(t dU / U)`` (``path="multiplicative"``, see
`kmeans_newton`), where the straight line ``U + t dU`` would have to stop short of
the first entry it drives to zero: half the steps on the bench's datasets.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.cluster._problem import (
    kmeans_manifold,
    lift,
    lift_basis,
    positive_retract,
    skew_basis,
)
from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_positive

__all__ = ["kmeans_newton", "KMeansNewton", "NewtonState", "NewtonInfo", "barrier_cost"]


class NewtonState(NamedTuple):
    x: tuple  # (V, Q)
    iter_num: jax.Array
    error: jax.Array  # Riemannian gradient norm
    status: jax.Array
    value: jax.Array  # f(V, Q)
    grad: tuple  # Euclidean gradient (G_V, G_Q)
    sigma: jax.Array  # cubic regularization weight
    mu: jax.Array  # current barrier weight (continuation down to the target mu)
    plen: jax.Array  # length of the last model minimizer (0 before the first)


class NewtonInfo(NamedTuple):
    rho: jax.Array
    lam: jax.Array
    accepted: jax.Array
    inner_steps: jax.Array
    step_fraction: jax.Array


def _weight(mu, v, q):
    n = v.shape[0]
    return mu / (n * q.shape[0])


def barrier_cost(x, data, mu):
    """``f(V, Q) = -||X^T V||^2 - mu/(n r) sum log phi(V, Q)``; ``+inf`` where ``phi <= 0``."""
    v, q = x
    u = lift(v, q)
    ok = jnp.all(u > 0)
    logs = jnp.log(jnp.where(u > 0, u, 1.0))
    val = -jnp.sum((data.T @ v) ** 2) - _weight(mu, v, q) * jnp.sum(logs)
    return jnp.where(ok, val, jnp.inf)


def _value_and_grad(x, data, mu):
    return jax.value_and_grad(barrier_cost)(x, data, mu)


def _barrier_hvp_q(x, mu, dqs):
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
    w = _weight(mu, v, q)
    du = _small_einsum("ia,kab->kib", ybar, dqs)
    dgu = w * du / (u * u)
    hq = jnp.einsum("ia,kib->kab", ybar, dgu)
    hv = _small_einsum("kib,ab->kia", dgu, q) - w * _small_einsum("ib,kab->kia", 1.0 / u, dqs)
    return hv[:, :, 1:], hq


def _hess_form(x, data, mu, xi, pq):
    """``<p, D^2 f[p]>`` (Euclidean) along ``p = (Xi, dQ)``, written out.

    ``U(t) = [1/sqrt(n), V + t Xi] (Q + t dQ)`` has ``U' = [0, Xi] Q + Ybar dQ`` and
    ``U'' = 2 [0, Xi] dQ``; the barrier ``-w sum log U`` contributes
    ``sum w U'^2 / U^2 - 2 w sum [0, Xi] dQ / U`` and the data term ``-2 ||X^T Xi||^2``.
    """
    v, q = x
    n = v.shape[0]
    ybar = lift_basis(v)
    u = ybar @ q
    w = _weight(mu, v, q)
    xi0 = jnp.concatenate([jnp.zeros((n, 1), v.dtype), xi], axis=1)
    du = xi0 @ q + ybar @ pq
    return (
        -2.0 * jnp.sum((data.T @ xi) ** 2)
        + w * jnp.sum((du / u) ** 2)
        - 2.0 * w * jnp.sum((xi0 @ pq) / u)
    )


def _rgrad(x, g, basis):
    """Riemannian gradient in tangent coordinates: (Xi_g, omega_g)."""
    v, q = x
    gv, gq = g
    rho2 = jnp.sum(v * v)
    gvc = gv - jnp.mean(gv, axis=0, keepdims=True)
    xi = gvc - (jnp.sum(v * gvc) / rho2) * v
    om = jnp.einsum("kab,ab->k", basis, gq @ q.T)
    return xi, om


class _Structure(NamedTuple):
    evals: jax.Array  # (n, p) eigenvalues of the diagonal blocks B_i = D_i - c_v I
    evecs: jax.Array  # (n, p, p)
    xbar: jax.Array  # (n, d+1) = [X, 1]
    xpairs: jax.Array  # (n, (d+1)(d+2)/2): xbar_ia xbar_ib for a <= b (lam-independent)
    rgen: jax.Array  # (m_w + 1 + m_v, n, p): border rows C_k, V and vertical rows V A_k
    h_om: jax.Array  # (m_w, m_w)
    vcoup: jax.Array  # (m_w, m_v): omega part of the vertical directions (m_v may be 0)
    # lam-independent pieces of every factorization (see _factor_t), computed once a step:
    moved: jax.Array  # (n, p) bool: the k smallest eigenvalues (order of evals + lam)
    ev_sel: jax.Array  # (k,) those eigenvalues
    lam_b: jax.Array  # () max(0, -(k+1)-th smallest eigenvalue): left end of the search
    epairs: jax.Array  # (n, P, p): evecs[i, a, b] evecs[i, a', b] for the pairs a <= a'
    t_r: jax.Array  # (m_w + 1 + m_v, n, p): the border rows in eigen coordinates
    sel_idx: jax.Array  # (k,) flat (n p) positions of the moved eigenvalues
    f0: jax.Array  # (m, m): lam-independent part of the permuted reduced matrix
    t_rt: jax.Array  # (n p, m_w + 1 + m_v): t_r flattened and transposed, for the search's G block


def _eigh_small(blocks):
    """Eigen-decomposition of ``n`` small symmetric blocks: ``(evals (n, p), evecs (n, p, p))``.

    For ``p <= 3`` (K <= 3): cyclic Jacobi (Jacobi 1846; Golub and Van Loan, Matrix
    Computations, Alg. 8.5.3, the ``sym.schur2`` rotation) with a fixed number of sweeps,
    vectorized over the blocks as elementwise arithmetic on the ``p(p+1)/2 + p^2`` entry
    arrays. The batched LAPACK ``eigh`` runs one small ``syevd`` per block, ~4x slower at
    n = 150-300 (measured). Cyclic Jacobi converges quadratically: on 2000 random and
    graded 3 x 3 blocks 4 sweeps reach ``||E diag(e) E^T - B|| <= 2e-15 ||B||`` (3 sweeps:
    6e-6), so 4 sweeps are used (``p = 2``: one rotation is exact, 2 sweeps). A fifth
    sweep (the previous choice, for margin) cost far more than its share inside the
    compiled step: gmm300 took 1.2x the time with 5 (same step counts and iterates to
    1e-14), while ``_eigh_small`` alone took 1.14x. The
    eigenvalues come unsorted: only their global order matters (`_structure`).
    Larger blocks go to ``jnp.linalg.eigh``.
    """
    n, p, _ = blocks.shape
    if p > 3:
        return jnp.linalg.eigh(blocks)
    dt = blocks.dtype
    tiny = jnp.finfo(dt).tiny
    pairs = [(i, j) for i in range(p) for j in range(i + 1, p)]

    def rotate(a, v, i, j):
        # J = [[c, s], [-s, c]] on (i, j) zeroes a_ij: A <- J^T A J, V <- V J.
        aij = a[i][j]
        nz = jnp.abs(aij) > tiny
        tau = (a[j][j] - a[i][i]) / (2.0 * jnp.where(nz, aij, 1.0))
        t = jnp.where(tau >= 0, 1.0, -1.0) / (jnp.abs(tau) + jnp.sqrt(1.0 + tau * tau))
        t = jnp.where(nz, t, 0.0)
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
        a, v = av
        for i, j in pairs:
            a, v = rotate(a, v, i, j)
        return a, v

    a = [[blocks[:, i, j] for j in range(p)] for i in range(p)]
    v = [[jnp.full((n,), float(i == j), dt) for j in range(p)] for i in range(p)]
    # Unrolled (a Python loop, not fori_loop): the loop ran its ~40 small kernels per
    # sweep one after another; unrolled, XLA fuses across rotations (n = 300: 0.6x the
    # time of the loop, n = 1797: 0.77x; same results to rounding).
    for k in range(4 if p == 3 else 2):
        a, v = sweep(k, (a, v))
    evals = jnp.stack([a[i][i] for i in range(p)], axis=1)
    return evals, jnp.stack([jnp.stack(row, axis=1) for row in v], axis=1)


def _structure(x, g, data, mu, basis, horizontal=True):
    v, q = x
    gv, gq = g
    n, p = v.shape
    dt = v.dtype
    w = _weight(mu, v, q)
    u = lift(v, q)
    dmat = w / (u * u)
    q1 = q[1:]
    c_v = jnp.sum(v * gv) / jnp.sum(v * v)
    blocks = jnp.einsum("ar,ir,br->iab", q1, dmat, q1) - c_v * jnp.eye(p, dtype=dt)
    evals, evecs = _eigh_small(blocks)

    # Border: D^2 f[(0, E_k Q)], written out (checked against autodiff in the tests).
    dirs = basis @ q  # (m_w, r, r)
    hv, hq = _barrier_hvp_q(x, mu, dirs)
    sym_s = 0.5 * (q.T @ gq + gq.T @ q)
    h_om = jnp.einsum("lab,kab->kl", dirs, hq) - jnp.einsum("lab,kac,cb->kl", dirs, dirs, sym_s)
    h_om = 0.5 * (h_om + h_om.T)
    if horizontal:
        xis, cs = _vertical(v, basis)
    else:
        xis, cs = jnp.zeros((0, n, p), dt), jnp.zeros((0, basis.shape[0]), dt)
    rgen = jnp.concatenate([hv, v[None], xis], axis=0)
    xbar = jnp.concatenate([data, jnp.ones((n, 1), dt)], axis=1)
    ia, ib = np.triu_indices(xbar.shape[1])
    xpairs = xbar[:, ia] * xbar[:, ib]
    m_w, m_v = basis.shape[0], cs.shape[0]
    # The order of evals + lam does not depend on lam: the k moved eigenvalues (see
    # _factor_t) and the search's left end are fixed for the whole step.
    kmax = min(p + 1 + m_v, 8, n * p)
    kb = min(kmax + 1, n * p)
    flat = evals.reshape(-1)
    neg, idx = _top_k_smallest(flat, kb)
    lam_b = jnp.maximum(neg[-1], 0.0)
    idx = idx[:kmax]
    moved = jnp.zeros((n * p,), bool).at[idx].set(True).reshape(n, p)
    # A moved eigenvector w_j (column c of block i) is the unit vector e_(i, c) in the
    # eigen coordinates z_i = E_i^T xi_i: _factor_t uses it through its index idx_j.
    t_r = _small_einsum("jia,iab->jib", rgen, evecs)
    pa, pb, _ = _sym_pairs(p)
    epairs = evecs[:, pa, :] * evecs[:, pb, :]
    lay = _layout(xbar.shape[1], p, m_w, m_v, kmax)
    cvals = jnp.concatenate(
        [jnp.full((1,), 0.5, dt), h_om.reshape(-1), cs.T.reshape(-1), jnp.zeros((1,), dt)]
    )
    f0 = cvals[lay.f0_map]
    return _Structure(
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


def _top_k_smallest(a, k: int):
    """``lax.top_k(-a, k)`` for a small static ``k``: ``k`` rounds of argmin.

    XLA:CPU lowers ``top_k`` to a full comparator sort: 127 us of a ~1 ms Newton step
    for the 900 eigenvalues at n = 300, against a few us for nine argmin passes. Ties
    go to the lower index, as in ``top_k``.
    """
    vals, idxs = [], []
    for _ in range(k):
        i = jnp.argmin(a)
        vals.append(-a[i])
        idxs.append(i)
        a = a.at[i].set(jnp.inf)
    return jnp.stack(vals), jnp.stack(idxs).astype(jnp.int32)


def _sym_pairs(m: int):
    """Static maps between an ``m x m`` symmetric matrix and its upper-triangle pairs."""
    ia, ib = np.triu_indices(m)
    pos = np.zeros((m, m), np.int64)
    pos[ia, ib] = np.arange(ia.size)
    pos[ib, ia] = np.arange(ia.size)
    return ia, ib, pos


class _Layout(NamedTuple):
    perm: np.ndarray  # reduced-system order: the a-block (kept), then the c-block
    iperm: np.ndarray
    na: int
    s_map: np.ndarray  # (m, m) index into [ksym, kg, gg] of each permuted entry
    f0_map: np.ndarray  # (m, m) index into [1/2, h_om, vcoup, 0]
    lam_diag: np.ndarray  # (m,) 1 on the omega diagonal
    om0: int  # start of omega in the permuted order


def _layout(d1: int, p: int, m_w: int, m_v: int, kmax: int) -> _Layout:
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
    _, _, pos_x = _sym_pairs(d1)
    _, _, pos_p = _sym_pairs(p)
    n_pp = p * (p + 1) // 2
    n_ks = (d1 * (d1 + 1) // 2) * n_pp
    s_map = np.zeros((m, m), np.int64)
    kk = (pos_x[:, None, :, None] * n_pp + pos_p[None, :, None, :]).reshape(dk, dk)
    s_map[:dk, :dk] = kk
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
    return _Layout(
        perm, iperm, idx_a.size, s_map[perm][:, perm], f0_map[perm][:, perm], lam_diag, nd * p
    )


def _n_corrections(st) -> int:
    """Static number of eigenvalues of ``B + lam`` moved to the low-rank part.

    The inertia argument allows up to ``p + 1 + m_v`` (the number of constraints);
    more columns cost ``O(n p)`` each in every factorization, so at most 8 are kept:
    ``B + lam`` with more negative eigenvalues than that is rejected (``lam`` grows),
    a conservative answer that never accepts an indefinite model.
    """
    return st.ev_sel.shape[0]


def _factor_t(st, lam):
    """Assemble and factor the reduced KKT system at ``lam``, in eigen coordinates.

    Returns ``(ok, solve)`` with ``solve(tg, h_om) -> (z, omega)``: ``tg`` and ``z`` in
    the coordinates ``z_i = E_i^T xi_i`` of the blocks' eigenvectors (orthogonal per
    row, so norms and inner products are those of ``xi``).

    Shifted blocks. ``B + lam I`` may be indefinite while the Hessian plus ``lam`` is
    positive definite on the horizontal space: the constraints (``1^T Xi = 0`` among
    them) and the border lift it (at the mixtures' solutions ``B`` has one negative
    eigenvalue while the smallest horizontal eigenvalue of the Hessian is 0.38). By
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
    `_structure`: a factorization is a handful of fused ops (the per-op overhead,
    not the arithmetic, dominates at n = 150-300).
    """
    n, p = st.evals.shape
    dt = st.evals.dtype
    d1 = st.xbar.shape[1]
    m_w, m_v = st.vcoup.shape
    kmax = _n_corrections(st)
    lay = _layout(d1, p, m_w, m_v, kmax)
    e_l = st.evals + lam
    c0 = jnp.mean(jnp.abs(e_l)) + jnp.finfo(dt).tiny
    e_t = jnp.where(st.moved, jnp.maximum(e_l, 0.0) + c0, e_l)
    inv = 1.0 / e_t
    sel = st.ev_sel + lam
    e_diag = 1.0 / (jnp.maximum(sel, 0.0) + c0 - sel)
    # kron block: sum_i xbar_i xbar_i^T (x) B~_i^{-1}, index (a, c), (b, c'); one GEMM on
    # the symmetric pairs (a <= b) x (c <= c') (O(n d^2 p^2 / 4)), scattered by s_map.
    ksym = st.xpairs.T @ jnp.einsum("ijb,ib->ij", st.epairs, inv)
    # The low-rank part's columns: the border rows t_r (dense) and the k moved
    # eigenvectors w_j = e_(i_j, b_j) in eigen coordinates (one-hot: their products are
    # gathers, not n p-long passes).
    tin = st.t_r * inv  # (m0, n, p)
    rb = _small_einsum("jib,icb->jic", tin, st.evecs)  # B~^{-1} applied to the border rows
    kg_r = jnp.einsum("ia,jic->jac", st.xbar, rb).reshape(-1, d1 * p)  # (m0, d1 p)
    iw, bw = st.sel_idx // p, st.sel_idx % p
    inv_w = inv[iw, bw]  # (k,)
    kg_w = inv_w[:, None, None] * st.xbar[iw][:, :, None] * st.evecs[iw, :, bw][:, None, :]
    kg = jnp.concatenate([kg_r, kg_w.reshape(kmax, d1 * p)])  # (m_g, d1 p)
    gg_rw = st.t_r[:, iw, bw] * inv_w  # (m0, k)
    m0 = st.t_r.shape[0]
    gg0 = tin.reshape(m0, -1) @ st.t_rt
    gg = jnp.block([[gg0, gg_rw], [gg_rw.T, jnp.diag(inv_w)]])
    vals = jnp.concatenate([ksym.reshape(-1), kg.reshape(-1), gg.reshape(-1)])
    dvec = jnp.concatenate(
        [lam * lay.lam_diag.astype(dt), e_diag, jnp.zeros((lay.perm.size - lay.na,), dt)]
    )
    s = st.f0 - vals[lay.s_map] + jnp.diag(dvec)
    # a = data z (first d p), omega and the correction columns; c = the multipliers
    # nu (p, 1^T Xi = 0), eta (<V, Xi> = 0) and the vertical ones (m_v).
    na = lay.na
    s_aa, s_ac, s_cc = s[:na, :na], s[:na, na:], s[na:, na:]
    l_c = jnp.linalg.cholesky(-s_cc)
    t = jax.scipy.linalg.cho_solve((l_c, True), s_ac.T)  # (-S_cc)^{-1} S_ca
    schur = s_aa + s_ac @ t
    l_a = jnp.linalg.cholesky(0.5 * (schur + schur.T))
    ok = jnp.all(e_t > 0) & jnp.all(jnp.isfinite(l_c)) & jnp.all(jnp.isfinite(l_a))
    om0 = lay.om0

    def solve(tg, h_om):
        """Solve (Hess + lam) p = -g on the tangent space, eigen coordinates in and out."""
        tgi = tg * inv
        gb = _small_einsum("ib,icb->ic", tgi, st.evecs)
        bk = jnp.einsum("ia,ic->ac", st.xbar, gb).reshape(-1)
        bg = jnp.concatenate([jnp.einsum("jib,ib->j", st.t_r, tgi), tgi[iw, bw]])
        b = jnp.concatenate([bk, bg])[lay.perm]
        b_a = b[:na].at[om0 : om0 + m_w].add(-h_om)
        b_c = b[na:]
        # S y = b with S_cc negative definite: y_c = S_cc^{-1}(b_c - S_ca y_a)
        rhs_a = b_a + s_ac @ jax.scipy.linalg.cho_solve((l_c, True), b_c)
        y_a = jax.scipy.linalg.cho_solve((l_a, True), rhs_a)
        y_c = -jax.scipy.linalg.cho_solve((l_c, True), b_c - s_ac.T @ y_a)
        y = jnp.concatenate([y_a, y_c])[lay.iperm]
        yk = y[: d1 * p].reshape(d1, p)
        yg = y[d1 * p :]
        m0 = st.t_r.shape[0]
        ly = _small_einsum("ic,icb->ib", st.xbar @ yk, st.evecs) + jnp.einsum(
            "j,jib->ib", yg[:m0], st.t_r
        )
        ly = ly.at[iw, bw].add(yg[m0:])
        return -(tg + ly) * inv, y_a[om0 : om0 + m_w]

    return ok, solve


_UNROLL_MAX = 4  # contracted sizes up to this are unrolled (K <= 3: p <= 3, r <= 4)


def _expand(a, idx: str, out: str):
    """``a`` (indices ``idx``, a subset of ``out``) transposed and reshaped to broadcast
    against an array with indices ``out``."""
    order = sorted(range(len(idx)), key=lambda t: out.index(idx[t]))
    a = jnp.transpose(a, order)
    s = "".join(idx[t] for t in order)
    return a.reshape([a.shape[s.index(c)] if c in s else 1 for c in out])


def _small_einsum(spec: str, x, y):
    """``jnp.einsum(spec, x, y)`` for one contracted index of small static size, as
    that many broadcast multiply-adds.

    The Newton step's products with the per-row blocks (eigenvectors, ``Q``, the skew
    basis) contract an index of size ``p`` or ``r`` (at most ``K + 1``) and keep the
    ``n`` rows free. As einsums they are dot_generals that XLA:CPU runs as small
    library calls with layout copies around them; as multiply-adds they fuse with
    their neighbours into elementwise loops (gmm300: the whole step about 0.9x).
    Above ``_UNROLL_MAX`` terms the einsum is kept (digits, ``p = 10``: unrolled was
    1.06x the time).
    """
    ins, out = spec.split("->")
    sx, sy = ins.split(",")
    (c,) = [ch for ch in sx if ch in sy and ch not in out]
    if x.shape[sx.index(c)] > _UNROLL_MAX:
        return jnp.einsum(spec, x, y)
    total = None
    for k in range(x.shape[sx.index(c)]):
        xk = _expand(jnp.take(x, k, axis=sx.index(c)), sx.replace(c, ""), out)
        yk = _expand(jnp.take(y, k, axis=sy.index(c)), sy.replace(c, ""), out)
        total = xk * yk if total is None else total + xk * yk
    return total


def _to_eigen(st, xi):
    return _small_einsum("ia,iab->ib", xi, st.evecs)


def _from_eigen(st, z):
    return _small_einsum("ib,iab->ia", z, st.evecs)


def _factor(st, lam):
    """Assemble and factor the reduced KKT system at ``lam``; returns (ok, solve).

    ``solve(gx, h_om) -> (xi, omega)`` solves ``(Hess + lam) p = -g`` on the tangent
    (horizontal) space, ``gx`` the ambient ``(n, p)`` gradient part (see `_factor_t`).
    """
    ok, solve_t = _factor_t(st, lam)

    def solve(gx, h_om):
        z, om = solve_t(_to_eigen(st, gx), h_om)
        return _from_eigen(st, z), om

    return ok, solve


def _vertical(v, basis):
    """The vertical directions ``(V A_k, -diag(0, A_k) Q)`` in tangent coordinates."""
    r = basis.shape[1]
    dt = v.dtype
    small = skew_basis(r - 1, dt)
    big = jnp.zeros((small.shape[0], r, r), dt).at[:, 1:, 1:].set(-small)
    xis = _small_einsum("ia,kab->kib", v, small)  # V A_k
    cs = jnp.einsum("kab,lab->kl", big, basis)  # omega coordinates of -diag(0, A_k)
    return xis, cs


def _horizontal(v, xi, om, basis):
    r"""Remove the vertical part of a step (the symmetry of the lift).

    ``phi([1, V R] diag(1, R^T) Q) = phi(V, Q)`` for ``R`` in ``O_{r-1}``: the cost is constant
    along the directions ``(V A, -diag(0, A) Q)``, ``A`` skew, so the Hessian is singular
    there at critical points and a Newton step may carry a large, useless vertical part
    whose retraction error spoils the model. We project the step onto their orthogonal
    complement (the horizontal space of the quotient; ``O(n r^3)``).
    """
    xis, cs = _vertical(v, basis)
    if cs.shape[0] == 0:
        return xi, om
    gram = jnp.einsum("kia,lia->kl", xis, xis) + cs @ cs.T
    rhs = jnp.einsum("kia,ia->k", xis, xi) + cs @ om
    coef = jnp.linalg.solve(gram, rhs)
    return xi - jnp.einsum("k,kia->ia", coef, xis), om - coef @ cs


def _quadratic_form(x, g, data, mu, xi, omega):
    """``<p, Hess f(x)[p]>`` for ``p = (Xi, Omega Q)``: the Euclidean form plus the
    manifolds' Weingarten terms."""
    v, q = x
    gv, gq = g
    pq = omega @ q
    c_v = jnp.sum(v * gv) / jnp.sum(v * v)
    sym_s = 0.5 * (q.T @ gq + gq.T @ q)
    return _hess_form(x, data, mu, xi, pq) - c_v * jnp.sum(xi * xi) - jnp.sum(pq * (pq @ sym_s))


class _Search(NamedTuple):
    lam: jax.Array
    lo: jax.Array
    hi: jax.Array
    xi: jax.Array
    om: jax.Array
    found: jax.Array
    done: jax.Array
    it: jax.Array
    best_lam: jax.Array


def _cubic_subproblem(st, gv, g_om, gnorm, sigma, max_inner, rtol, guess=None):
    dt = gv.dtype
    # B + lam may keep up to k negative eigenvalues (see _factor_t): the bound is the
    # (k + 1)-th smallest one, the search's left end (the Newton step when the Hessian
    # is positive definite). Both secular functions below are concave and increasing:
    # from the left Newton's iterates increase monotonically to the root. The search
    # starts at max(left end, guess): a guess right of the root becomes the bracket's
    # right end, and Newton's step from there lands left of the root (the tangent of a
    # concave function lies above it), or bisection takes over if it leaves the bracket.
    lo0 = st.lam_b * (1 + 1e-12) + jnp.finfo(dt).tiny
    tg = _to_eigen(st, gv)  # the search runs in eigen coordinates (see _factor_t)
    lam0 = lo0 if guess is None else jnp.maximum(lo0, guess)
    inf = jnp.asarray(jnp.inf, dt)

    def cond(c):
        return (~c.done) & (c.it < max_inner)

    def body(c):
        ok, solve = _factor_t(st, c.lam)
        xi, om = solve(tg, g_om)
        pn = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        ok = ok & jnp.isfinite(pn)
        psi = c.lam - sigma * pn
        conv = ok & (jnp.abs(psi) <= rtol * c.lam)
        lo = jnp.where(~ok | (psi < 0), c.lam, c.lo)
        hi = jnp.where(ok & (psi >= 0), c.lam, c.hi)
        # Newton on phi(lam) = 1/||p|| - sigma/lam and on psi(lam) = lam/sigma - ||p||
        # (same root, both concave increasing: each Newton point lies left of the root,
        # so the larger one is the better and still safe); dp/dlam = -(H + lam)^{-1} p.
        # phi is nearly linear when ||p|| is large (near -lambda_min), psi when lam is
        # near 0 (where phi's -sigma/lam term makes its Newton step only double lam).
        qx, qo = solve(-xi, -om)
        dpn = -(jnp.sum(xi * qx) + jnp.sum(om * qo)) / jnp.maximum(pn, jnp.finfo(dt).tiny)
        # The step itself may be accurate before lam is: ||p|| at the root differs from
        # ||p(lam)|| by about |dpn psi| / psi' (one Newton step on psi; psi' = 1 - sigma
        # dpn >= 1). Below rtol ||p||, p(lam) is the ARC step to that accuracy. Near a
        # minimizer (lam << the Hessian's eigenvalues) this ends the search at its first
        # factorization instead of its second: gmm300 317 -> 265 factorizations in all,
        # digits 0.67x the time, step counts within +-3 on the bench's six datasets.
        conv = conv | (ok & (jnp.abs(dpn * psi) <= rtol * pn * (1.0 - sigma * dpn)))
        phi = 1.0 / pn - sigma / c.lam
        dphi = -dpn / pn**2 + sigma / c.lam**2
        cand_psi = c.lam - (c.lam / sigma - pn) / (1.0 / sigma - dpn)
        cand = jnp.maximum(c.lam - phi / dphi, cand_psi)
        # Fallback when Newton's candidate leaves (lo, hi): bisection, geometric while the
        # bracket spans decades (lam0 may be 100x the root: halving took 8-15 solves).
        mid = jnp.where(lo > hi / 64, 0.5 * (lo + hi), hi / 8)
        bis = jnp.where(jnp.isfinite(hi), mid, 2.0 * lo + jnp.sqrt(sigma * gnorm))
        use_newton = ok & jnp.isfinite(cand) & (cand > lo) & (cand < hi)
        nxt = jnp.where(use_newton, cand, bis)
        keep = ok
        return _Search(
            lam=nxt,
            lo=lo,
            hi=hi,
            xi=jnp.where(keep, xi, c.xi),
            om=jnp.where(keep, om, c.om),
            found=c.found | ok,
            done=conv,
            it=c.it + 1,
            best_lam=jnp.where(keep, c.lam, c.best_lam),
        )

    init = _Search(
        lam=lam0,
        lo=lo0,
        hi=inf,
        xi=jnp.zeros_like(gv),
        om=jnp.zeros_like(g_om),
        found=jnp.asarray(False),
        done=jnp.asarray(False),
        it=jnp.int32(0),
        best_lam=lam0,
    )
    out = jax.lax.while_loop(cond, body, init)
    return _from_eigen(st, out.xi), out.om, out.best_lam, out.found, out.it


class KMeansNewton(AbstractSolver):
    r"""Cubic-regularized Riemannian Newton for log-barrier K-means; built by `kmeans_newton`.

    See `kmeans_newton` for the method and the meaning of each field. Static fields:
    ``max_inner`` (the cap on the secular-equation iterations), ``halvings`` (the
    multiplicative step's halvings) and ``path``. Every other field is a traced numeric
    hyperparameter (``mu``, ``sigma0``, ``sigma_min``, ``eta1``, ``eta2``, ``inner_rtol``,
    ``tau``, ``mu_start``, ``mu_factor``, ``centrality``, ``grow_max``, ``kappa``,
    ``gamma``; floats or arrays: a Python int is static, as the protocol treats ints): a
    sweep over them reuses one compilation. They meet the iterate's dtype
    through `jaxsolve.core.protocol.hyper`.
    """

    mu: Any = 1e-2
    sigma0: Any = 1.0
    sigma_min: Any = 1e-10
    eta1: Any = 0.1
    eta2: Any = 0.9
    inner_rtol: Any = 1e-2
    tau: Any = 0.9
    mu_start: Any = 1.0
    mu_factor: Any = 0.2
    centrality: Any = 1.0
    grow_max: Any = 100.0
    kappa: Any = 30.0
    gamma: Any = 3.0
    halvings: int = eqx.field(static=True, default=4)
    max_inner: int = eqx.field(static=True, default=40)
    path: str = eqx.field(static=True, default="multiplicative")

    def init(self, x0, args) -> NewtonState:
        dt = x0[0].dtype
        mu = jnp.maximum(hyper(self.mu, dt), hyper(self.mu_start, dt))
        f, g = _value_and_grad(x0, args, mu)
        basis = skew_basis(x0[1].shape[0], x0[0].dtype)
        xi, om = _rgrad(x0, g, basis)
        err = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        err = jnp.where(jnp.isfinite(f), err, jnp.inf) + (mu - hyper(self.mu, dt))
        return NewtonState(
            x=x0,
            iter_num=jnp.int32(0),
            error=err,
            status=jnp.int32(Status.SUCCESS),
            value=f,
            grad=g,
            sigma=hyper(self.sigma0, dt),
            mu=mu,
            plen=jnp.zeros((), dt),
        )

    def step(self, state: NewtonState, args) -> tuple[NewtonState, NewtonInfo]:
        max_inner, path = self.max_inner, self.path
        x = state.x
        v, q = x
        dt = v.dtype
        mu = state.mu
        sigma = state.sigma
        n, r = v.shape[0], q.shape[0]
        basis = skew_basis(r, dt)
        # Unit-radius copy of the lift; V is retracted as V = rho * R_{V/rho}(Xi/rho), rho = ||V||.
        sphere, orth = kmeans_manifold(n, 2, r).manifolds
        g = state.grad
        gxi, g_om = _rgrad(x, g, basis)
        gnorm = jnp.sqrt(jnp.sum(gxi * gxi) + jnp.sum(g_om * g_om))

        st = _structure(x, g, args, mu, basis)
        # Warm start of the search: lam = sigma ||p_prev|| solves the secular equation at the
        # last step's length; the search brackets it from either side (see
        # _cubic_subproblem). Factorizations in all, from the left end / from this guess:
        # gmm300 265 / 201, gmm150 243 / 172, iris 289 / 179, wine 162 / 141 (0.5 or 1.5
        # times the guess: more); the step counts stay within +-2.
        xi, om, lam, found, inner = _cubic_subproblem(
            st, g[0], g_om, gnorm, sigma, max_inner, hyper(self.inner_rtol, dt), sigma * state.plen
        )
        plen = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        xi, om = _horizontal(v, xi, om, basis)
        omega = jnp.einsum("k,kab->ab", om, basis)
        u = lift(v, q)
        ybar = lift_basis(v)
        du = (jnp.concatenate([jnp.zeros((n, 1), dt), xi], axis=1) + ybar @ omega) @ q
        radius = jnp.linalg.norm(v)

        def evaluate(xt):
            ft, gt = _value_and_grad(xt, args, mu)
            a, b = _rgrad(xt, gt, basis)
            return ft, gt, jnp.sqrt(jnp.sum(a * a) + jnp.sum(b * b))

        def linear_step():
            # Fraction to the boundary (interior-point safeguard, our addition to ARC): shorten
            # the step to t p so that the linearized lift U + t dU keeps ``1 - tau`` of each
            # entry, then halve t until the retracted lift does (at most 30 halvings; the
            # retraction curves away from its linearization), so log never sees U <= 0.
            ratio = jnp.where(du < 0, -u / jnp.where(du < 0, du, -1.0), jnp.inf)
            t0 = jnp.minimum(1.0, hyper(self.tau, dt) * jnp.min(ratio))

            def trial(t):
                # The manifold's own retractions (second order on both factors).
                v_new = radius * sphere.retract(v / radius, (t * xi) / radius)
                return v_new, orth.retract(q, (t * omega) @ q)

            def cond(c):
                _, k, xt = c
                return (k < 30) & ~jnp.all(lift(*xt) > (1 - hyper(self.tau, dt)) * u)

            def body(c):
                t, k, _ = c
                return 0.5 * t, k + 1, trial(0.5 * t)

            t, _, xt = jax.lax.while_loop(cond, body, (t0, jnp.int32(0), trial(t0)))
            return (t, xt) + evaluate(xt)

        if path == "linear":
            t, x_new, f_new, g_new, e_new = linear_step()
        else:
            # Multiplicative step (our addition; see ``path`` in kmeans_newton): along
            # U exp(t dU/U) every entry stays positive, so the step is not cut where the
            # straight line would cross U_ij = 0 (on the bench's mixtures that cut shortened
            # 36 consecutive steps to 1-10% of the ARC step). Guard: the trial's gradient
            # norm must stay within ``gamma`` times max(||grad||, mu), since a log-barrier
            # whose entries collapsed toward 0 has a huge gradient and ARC takes many steps to
            # recover; else t halves, and after ``halvings`` the linear step is taken.
            rel = du / u
            gate = hyper(self.gamma, dt) * jnp.maximum(gnorm, mu)

            def m_trial(t):
                xt = positive_retract(u, rel, t, radius)
                ft, gt, et = evaluate(xt)
                return t, xt, ft, gt, et, jnp.isfinite(ft) & (et <= gate)

            def m_cond(c):
                k, (*_, ok) = c
                return (k < self.halvings) & ~ok

            def m_body(c):
                k, (t, *_) = c
                return k + 1, m_trial(0.5 * t)

            t0 = jnp.minimum(1.0, hyper(self.kappa, dt) / jnp.max(jnp.abs(rel)))
            _, (*trial_m, ok) = jax.lax.while_loop(m_cond, m_body, (jnp.int32(0), m_trial(t0)))
            t, x_new, f_new, g_new, e_new = jax.lax.cond(ok, lambda: tuple(trial_m), linear_step)
        xi, om = t * xi, t * om

        gp = jnp.sum(gxi * xi) + jnp.sum(g_om * om)
        # The quadratic model of the step actually taken (horizontal, shortened): one HVP.
        model = gp + 0.5 * _quadratic_form(x, g, args, mu, xi, jnp.einsum("k,kab->ab", om, basis))
        reg = 1e3 * jnp.finfo(dt).eps * jnp.maximum(1.0, jnp.abs(state.value))
        rho = (state.value - f_new + reg) / (-model + reg)
        accept = found & jnp.isfinite(f_new) & (rho >= hyper(self.eta1, dt)) & (model < 0)
        sig_min = hyper(self.sigma_min, dt)
        # ARC's update (Cartis, Gould, Toint 2011), except that a shortened step (t < 1: cut
        # by the boundary, or by the multiplicative step's cap and guard) never shrinks sigma:
        # there the safeguard, not the model, limited the step, and a smaller sigma would
        # only lengthen the next (shortened) step. Measured against two
        # alternatives: shrinking as usual lets sigma collapse (1e-10) while every step is
        # cut to nothing; raising sigma to lam / ||t p|| after a cut (the previous rule)
        # makes steps gradient-like: 1.4-3x more steps on the bench's datasets.
        shrink = accept & (rho >= hyper(self.eta2, dt)) & (t >= 1)
        # A rejected step raises sigma to the value whose cubic model would have matched the
        # actual change (the interpolation rule of Gould, Porcelli and Toint 2012), at least
        # doubling and at most x100.
        pn3 = (jnp.sum(xi * xi) + jnp.sum(om * om)) ** 1.5
        fit = 3.0 * (f_new - state.value - model) / jnp.maximum(pn3, jnp.finfo(dt).tiny)
        grow = jnp.clip(
            jnp.where(jnp.isfinite(fit), fit, 2.0 * sigma),
            2.0 * sigma,
            hyper(self.grow_max, dt) * sigma,
        )
        sigma = jnp.where(shrink, jnp.maximum(sig_min, 0.1 * sigma), jnp.where(accept, sigma, grow))
        x_out = jax.tree.map(lambda a, b: jnp.where(accept, a, b), x_new, x)
        g_out = jax.tree.map(lambda a, b: jnp.where(accept, a, b), g_new, g)
        f_out = jnp.where(accept, f_new, state.value)
        err = jnp.where(accept, e_new, gnorm)  # ||grad|| at x_out, from the trial or the start
        # Continuation (path following): once the iterate is centred for the current mu
        # (||grad|| <= centrality * mu), lower mu by mu_factor, down to the target.
        target = hyper(self.mu, dt)
        centred = err <= hyper(self.centrality, dt) * mu
        mu_next = jnp.where(
            centred & (mu > target), jnp.maximum(target, hyper(self.mu_factor, dt) * mu), mu
        )
        # The data term does not depend on mu: rescale the barrier part of f and of G.
        data_v = -jnp.sum((args.T @ x_out[0]) ** 2)
        gdata = -2.0 * args @ (args.T @ x_out[0])
        scale = mu_next / mu
        f_out = data_v + scale * (f_out - data_v)
        g_out = ((g_out[0] - gdata) * scale + gdata, g_out[1] * scale)
        gxi2, g_om2 = _rgrad(x_out, g_out, basis)
        err = jnp.sqrt(jnp.sum(gxi2 * gxi2) + jnp.sum(g_om2 * g_om2)) + (mu_next - target)
        # A NaN in the data or the iterate must surface: it propagates into err.
        err = jnp.where(jnp.isfinite(f_out), err, jnp.nan)
        new = NewtonState(
            x=x_out,
            iter_num=state.iter_num + 1,
            error=err,
            status=state.status,
            value=f_out,
            grad=g_out,
            sigma=sigma,
            mu=mu_next,
            plen=jnp.where(found, plen, state.plen),
        )
        return new, NewtonInfo(rho, lam, accept, inner, t)


def kmeans_newton(
    *,
    mu: float = 1e-2,
    sigma0: float = 1.0,
    sigma_min: float = 1e-10,
    eta1: float = 0.1,
    eta2: float = 0.9,
    inner_rtol: float = 1e-2,
    max_inner: int = 40,
    tau: float = 0.9,
    mu_start: float = 1.0,
    mu_factor: float = 0.2,
    centrality: float = 1.0,
    grow_max: float = 100.0,
    path: str = "multiplicative",
    kappa: float = 30.0,
    gamma: float = 3.0,
    halvings: int = 4,
) -> KMeansNewton:
    r"""Cubic-regularized Riemannian Newton (ARC) for the log-barrier K-means problem.

    Paper: Xu, Hou, Chen and Zhang, "Scalable second-order Riemannian optimization for
    K-means clustering", ICLR 2026 (arXiv 2509.21675). See the module docstring for the
    cost, the product manifold and the linear-time subproblem.

    The iterate is ``x = (V, Q)`` on `jaxsolve.cluster.kmeans_manifold`
    (start from `jaxsolve.cluster.feasible_point`: ``phi(V, Q) > 0``); ``args`` is the
    centred, unit-norm data ``X`` (``n x d``, `jaxsolve.cluster.prepare_data`).
    ``error`` is the Riemannian gradient norm.

    Args:
        mu: barrier weight (total, against a data term in ``[-1, 0]``); smaller is closer
            to the SDP solution and more ill-conditioned (the paper: a sharp transition).
        sigma0: initial cubic weight.
        sigma_min: smallest cubic weight.
        eta1: acceptance threshold on the ratio ``rho`` (Manopt's ARC: 0.1; else ``sigma``
            grows, see ``grow_max``).
        eta2: very-successful threshold (0.9; then ``sigma`` shrinks by 10).
        grow_max: a rejected step raises ``sigma`` to the weight whose cubic model
            ``f + m(p) + sigma/3 ||p||^3`` would have matched the actual ``f(x + p)``
            (the interpolation update of Gould, Porcelli and Toint 2012), clipped to
            ``[2, grow_max] * sigma``; ``grow_max = 2`` is ARC's plain doubling. Measured
            against doubling: 5-19% fewer steps on the bench's mixtures and iris, wine and
            breast_cancer (a run of rejections after a 10x shrink took up to 7 steps).
        inner_rtol: relative accuracy of the secular equation ``lam = sigma ||p||``.
            1e-2 by measurement: on gmm150/300, iris, wine, breast_cancer and digits the
            same number of steps as 1e-3 with ~5% less time (fewer factorizations);
            3e-2 changed the step counts (gmm150 79 -> 84).
        max_inner: static cap on the bisection/Newton iterations on ``lam`` per step.
        mu_start: barrier continuation (our addition, a standard path-following scheme):
            start at ``max(mu, mu_start)`` and multiply the barrier weight by
            ``mu_factor`` whenever ``||grad|| <= centrality * mu_current``, down to ``mu``.
            ``mu_start <= mu`` gives the paper's fixed barrier. ``error`` adds
            ``mu_current - mu`` so the solve cannot stop before reaching the target.
        mu_factor: continuation factor (0.2).
        centrality: continuation gate (1.0).
        tau: fraction to the boundary: a step is shortened so that the linearized lift
            keeps at least ``1 - tau`` of every entry of ``U`` (interior-point safeguard).
        path: how the ARC step ``p`` (``dU = D phi[p]``) is taken. ``"linear"``: the
            manifold's retraction of ``t p``, ``t`` cut by ``tau`` (the straight line
            ``U + t dU`` may cross ``U_ij = 0``). ``"multiplicative"`` (default, our
            addition): the positive retraction ``U exp(t dU / U)`` then Sinkhorn and the
            factor (`jaxsolve.cluster._problem.positive_retract`; a first-order
            retraction along which ``log U`` is linear, the geodesics of the barrier's
            Hessian metric), from ``t = min(1, kappa / max |dU / U|)``, halved (at most
            ``halvings`` times) while the trial's gradient norm exceeds ``gamma``
            times ``max(||grad||, mu_current)`` (a guard against entries collapsing
            toward 0, where the barrier's gradient explodes), else the linear step. ARC's
            ratio test then judges the step taken as before. Measured, steps to
            ``||grad|| <= 1e-6`` over start keys 0-7 (linear -> multiplicative):
            mixtures n = 150 75-112 -> 36-77, n = 300 62-104 -> 38-56; iris 54-69 -> 27-42,
            wine 44-60 -> 19-32, breast_cancer 40-48 -> 22-30; the same final objective.
        kappa: the multiplicative step's largest log-change of an entry (30: it bounds
            ``exp`` only; the gradient guard decides).
        gamma: the multiplicative step's gradient guard (3; 10 left tails of 100+ steps).
        halvings: the multiplicative step's halvings before the linear fallback (4; with
            10 the small steps kept pushing entries toward 0: tails of 120-170 steps).
    """
    for name, val in (
        ("mu", mu),
        ("sigma0", sigma0),
        ("sigma_min", sigma_min),
        ("mu_start", mu_start),
    ):
        check_positive(name, val)
    if not (isinstance(grow_max, int | float) and grow_max >= 2):
        raise ValueError(f"grow_max must be a number >= 2, got {grow_max!r}")
    if path not in ("multiplicative", "linear"):
        raise ValueError(f"path must be 'multiplicative' or 'linear', got {path!r}")
    for name, val in (("kappa", kappa), ("gamma", gamma)):
        check_positive(name, val)
    if not (isinstance(halvings, int) and halvings >= 0):
        raise ValueError(f"halvings must be a non-negative int, got {halvings!r}")
    if not (isinstance(max_inner, int) and max_inner >= 1):
        raise ValueError(f"max_inner must be a positive int, got {max_inner!r}")
    return KMeansNewton(
        mu=mu,
        sigma0=sigma0,
        sigma_min=sigma_min,
        eta1=eta1,
        eta2=eta2,
        inner_rtol=inner_rtol,
        tau=tau,
        mu_start=mu_start,
        mu_factor=mu_factor,
        centrality=centrality,
        grow_max=grow_max,
        kappa=kappa,
        gamma=gamma,
        halvings=halvings,
        max_inner=int(max_inner),
        path=path,
    )
