r"""The K-means SDP, its Burer-Monteiro factor and the lift to ``V x O_r`` (shared helpers).

Peng and Wei's SDP relaxation of K-means (SIAM J. Optim. 2007) for centred data
``X`` (``n x d``, one point per row) with ``A = X X^T``::

    max <A, Z>  s.t.  Z >= 0 (entrywise), Z PSD, Z 1 = 1, tr Z = K.

Burer-Monteiro: ``Z = U U^T`` with ``U`` in ``R^{n x r}``, ``U >= 0``. Xu, Hou, Chen and
Zhang (ICLR 2026, Theorem 2) lift ``{U : U U^T 1 = 1, tr(U U^T) = K}`` to the product
of the centred sphere ``{V : 1^T V = 0, ||V||_F^2 = K - 1}`` (``n x (r-1)``) and the
orthogonal group ``O_r`` through ``U = phi(V, Q) = [1/sqrt(n), V] Q``: then
``U U^T = 11^T/n + V V^T``, so both equality constraints hold by construction and
the data term depends on ``V`` only: ``<A, U U^T> = ||X^T V||_F^2`` for centred ``X``.

Scaling used throughout (documented choice): ``X`` is centred and divided by its
Frobenius norm, so ``||X^T V||^2 / 1`` is the fraction of the total sum of squares
explained by the clustering (in ``[0, 1]``); the K-means objective (inertia) is
``||X_raw - centred||^2 * (1 - <A, Z>)``.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.cluster.centred_sphere import CentredSphere
from jaxsolve.manifolds import Orthogonal, Product

__all__ = [
    "kmeans_manifold",
    "prepare_data",
    "lift",
    "feasible_point",
    "round_candidates",
    "round_labels",
    "lloyd",
    "inertia",
    "skew_basis",
]


def kmeans_manifold(n: int, n_clusters: int, rank: int) -> Product:
    """``CentredSphere(n, rank - 1, sqrt(K - 1)) x Orthogonal(rank)``.

    The lift's manifold (Xu et al. 2026, Theorem 2).
    """
    return Product(
        CentredSphere(n, max(rank - 1, 1), math.sqrt(max(n_clusters - 1, 1e-300))),
        Orthogonal(rank),
    )


def prepare_data(x):
    """Centre the rows' mean away and scale to unit Frobenius norm: ``(X - mean) / ||X - mean||``."""
    xc = x - jnp.mean(x, axis=0, keepdims=True)
    scale = jnp.sqrt(jnp.sum(xc * xc))
    return xc / jnp.where(scale > 0, scale, 1.0), scale


def lift_basis(v):
    """``Ybar = [1/sqrt(n), V]``: the lift is ``U = Ybar Q``."""
    n = v.shape[0]
    return jnp.concatenate([jnp.full((n, 1), 1.0 / math.sqrt(n), v.dtype), v], axis=1)


def lift(v, q):
    """``U = [1/sqrt(n), V] Q`` (the submersion ``phi`` of Xu et al. 2026)."""
    return lift_basis(v) @ q


def skew_basis(r: int, dtype) -> jax.Array:
    """Orthonormal basis ``E_k = (e_i e_j^T - e_j e_i^T)/sqrt(2)``, ``i < j``, of skew(r)."""
    pairs = [(i, j) for i in range(r) for j in range(i + 1, r)]
    b = np.zeros((max(len(pairs), 1), r, r))
    for k, (i, j) in enumerate(pairs):
        b[k, i, j] = 1.0 / math.sqrt(2.0)
        b[k, j, i] = -1.0 / math.sqrt(2.0)
    return jnp.asarray(b[: len(pairs)], dtype)


def _householder_with_first_row(q0):
    """An orthogonal ``H`` whose first row is the unit vector ``q0`` (``H e_1 = q0``)."""
    r = q0.shape[0]
    e1 = jnp.zeros_like(q0).at[0].set(1.0)
    v = q0 - e1
    v_sq = jnp.sum(v * v)
    safe = jnp.where(v_sq > 0, v_sq, 1.0)
    h = jnp.eye(r, dtype=q0.dtype) - 2.0 * jnp.outer(v, v) / safe
    return jnp.where(v_sq > 0, h, jnp.eye(r, dtype=q0.dtype))


def feasible_point(key, n: int, n_clusters: int, rank: int, dtype=None, *, labels=None):
    r"""A strictly feasible start ``(V, Q)``: ``phi(V, Q) > 0`` entrywise (needs ``rank > K``).

    See `_feasible_point` for the construction; compiled once per shape, because an
    eager call would re-trace its Sinkhorn scan every time.
    """
    dtype = jnp.result_type(float) if dtype is None else jnp.dtype(dtype)
    if labels is not None and not isinstance(labels, jax.core.Tracer):
        lab = np.asarray(labels)
        if lab.shape != (n,) or not np.issubdtype(lab.dtype, np.integer):
            raise ValueError(f"labels must be {n} ints, got shape {lab.shape}, dtype {lab.dtype}")
        used = np.unique(lab)
        if used.size != rank or used[0] != 0 or used[-1] != rank - 1:
            # with fewer than r groups the Sinkhorn-scaled U has trace < K, and stretching
            # it to K pushes entries negative: no strictly feasible point of this form
            raise ValueError(
                f"labels must use every group 0..{rank - 1} (rank = {rank}): a strictly "
                f"positive start near a partition needs rank nonempty groups; got groups "
                f"{used.tolist()}"
            )
    return _feasible_jit(key, labels, n=n, n_clusters=n_clusters, rank=rank, dtype=dtype)


@partial(jax.jit, static_argnames=("n", "n_clusters", "rank", "dtype"))
def _feasible_jit(key, labels, *, n, n_clusters, rank, dtype):
    return _feasible_point(key, n, n_clusters, rank, dtype, labels=labels)


def _feasible_point(key, n: int, n_clusters: int, rank: int, dtype=None, *, labels=None):
    r"""A strictly feasible start ``(V, Q)``: ``phi(V, Q) > 0`` entrywise (needs ``rank > K``).

    Construction (derived here; Xu et al. 2026 only state such points exist iff ``r > K``):
    assign the points at random to ``r`` balanced groups ``j(i)`` and set
    ``U_i = a e_{j(i)} + b 1`` with ``a = sqrt((K-1) r / ((r-1) n))`` and
    ``b = (sqrt(r/n) - a)/r > 0``; for equal group sizes this satisfies
    ``U U^T 1 = 1`` and ``tr(U U^T) = K`` exactly. Unequal sizes are corrected by a
    symmetric Sinkhorn scaling ``U <- diag(s) U`` (``s * (U U^T s) = 1``), after which
    ``q_0 = U^T 1/||U^T 1||``, ``Q`` is a Householder completion with first row ``q_0``,
    ``V = U Q[1:]^T`` re-centred and rescaled to ``||V||^2 = K - 1``.

    ``labels`` (ints in ``[0, rank)``, every group used) replaces the random groups: a
    warm start near a known partition.
    """
    dtype = jnp.result_type(float) if dtype is None else jnp.dtype(dtype)
    k = n_clusters
    if labels is None:
        groups = jax.random.permutation(key, jnp.arange(n) % rank)
    else:
        groups = jnp.asarray(labels)
    a = math.sqrt((k - 1) * rank / ((rank - 1) * n))
    b = (math.sqrt(rank / n) - a) / rank
    u = a * jax.nn.one_hot(groups, rank, dtype=dtype) + b

    s = sym_sinkhorn(u, 60)
    return factor_lift(s[:, None] * u, math.sqrt(max(k - 1, 0)))


def sym_sinkhorn(u, sweeps: int):
    r"""Symmetric Sinkhorn scaling of a positive ``U``: ``s > 0`` with ``s * (U U^T s) = 1``.

    Then ``diag(s) U`` has ``(diag(s) U)(diag(s) U)^T 1 = 1`` (the SDP's row sums), and
    it stays positive. Fixed-point sweeps ``s <- sqrt(s / (U U^T s))`` from ``s = 1``,
    ``O(n r)`` each (used by `feasible_point` and the K-means Newton solver's
    positive retraction).
    """

    def sweep(s, _):
        return jnp.sqrt(s / (u @ (u.T @ s))), None

    s, _ = jax.lax.scan(sweep, jnp.ones(u.shape[:1], u.dtype), None, length=sweeps)
    return s


def factor_lift(u, radius):
    r"""A point ``(V, Q)`` of the product manifold whose lift is ``U`` when ``U U^T 1 = 1``.

    ``q_0 = U^T 1 / ||U^T 1||``, ``Q`` is a Householder completion with first row ``q_0``
    and ``V = U Q[1:]^T``, re-centred and rescaled to ``||V|| = radius`` (``sqrt(K - 1)``):
    ``(V, Q)`` is exactly on the manifold whatever ``U`` is; ``phi(V, Q) = U`` when
    ``U U^T 1 = 1`` and ``||U||^2 = K`` (then ``U q_0 = 1/sqrt(n)`` already).
    """
    m = jnp.sum(u, axis=0)
    q = _householder_with_first_row(m / jnp.linalg.norm(m))
    v = u @ q[1:].T
    v = v - jnp.mean(v, axis=0, keepdims=True)
    v = v * (radius / jnp.maximum(jnp.linalg.norm(v), jnp.finfo(u.dtype).tiny))
    return v, q


def positive_retract(u, rel, t, radius, sweeps: int = 30):
    r"""Multiplicative retraction: ``U(t) = U * exp(t dU / U)``, mapped back to the manifold.

    ``u`` is the lift ``U = phi(V, Q)`` of the current point (``radius = ||V||``),
    ``rel = dU / U`` for a tangent step with ``dU = D phi[Xi, Omega Q]``; the caller's
    ``U`` is reused across trial lengths ``t``. ``U * exp(t rel)`` is positive for every ``t``; a
    symmetric Sinkhorn scaling (`sym_sinkhorn`, ``sweeps`` sweeps, positive)
    restores the row sums and `factor_lift` returns ``(V, Q)`` on the manifold (its
    trace rescaling shrinks or stretches ``V`` by ``1 + O(t^2)``). For a tangent ``dU``
    the row sums and the trace change at second order only, so the curve starts at
    ``(V, Q)`` with velocity ``dU``: a first-order retraction (on the quotient by the
    lift's symmetry). Along it each entry moves geometrically, ``log U_ij`` linearly in
    ``t``: the geodesics of the log-barrier's Hessian metric ``sum (dU_ij / U_ij)^2``, so
    a step can shrink an entry a hundredfold where the straight line would leave the
    positive orthant.

    The result is positive when the scaling has converged and the trace rescaling
    shrinks ``V`` (then the lift is a convex combination of two positive matrices). For
    very long steps (entries changed by ``e^{+-20}``) neither need hold: callers check
    the lift (the K-means Newton solver halves ``t``, or falls back to its linear step).
    """
    ut = u * jnp.exp(t * rel)
    s = sym_sinkhorn(ut, sweeps)
    return factor_lift(s[:, None] * ut, radius)


def nearest_center(points, centers):
    """Index of the nearest centre (squared Euclidean) for each row of ``points``."""
    d = (
        jnp.sum(points * points, 1)[:, None]
        - 2.0 * points @ centers.T
        + jnp.sum(centers * centers, 1)[None, :]
    )
    return jnp.argmin(d, axis=1).astype(jnp.int32)


def lloyd(points, centers, steps):
    """``steps`` Lloyd iterations from ``centers`` (an empty cluster keeps its center).

    ``steps`` may be traced (a ``while`` loop then; a Python int gives a ``scan``)."""
    k = centers.shape[0]

    def body(carry, _):
        c, _, _ = carry
        labels = nearest_center(points, c)
        one_hot = jax.nn.one_hot(labels, k, dtype=points.dtype)
        counts = jnp.sum(one_hot, 0)
        new = (one_hot.T @ points) / jnp.maximum(counts, 1)[:, None]
        return (jnp.where(counts[:, None] > 0, new, c), c, labels), None

    # steps + 1 passes, the last one's update unused: the final assignment is the loop's
    # own, so the assignment is compiled once, not once more after the loop
    init = (centers, centers, jnp.zeros(points.shape[:1], jnp.int32))
    _, centers, labels = jax.lax.fori_loop(0, steps + 1, lambda _, c: body(c, None)[0], init)
    return labels, centers


def farthest_first(points, k: int):
    """Deterministic seeding: start at the largest-norm point, then farthest-first traversal."""
    i0 = jnp.argmax(jnp.sum(points * points, 1))
    centers = jnp.zeros((k, points.shape[1]), points.dtype).at[0].set(points[i0])
    dmin = jnp.sum((points - points[i0]) ** 2, 1)

    def body(j, carry):
        c, dist_min = carry
        i = jnp.argmax(dist_min)
        c = c.at[j].set(points[i])
        return c, jnp.minimum(dist_min, jnp.sum((points - points[i]) ** 2, 1))

    centers, _ = jax.lax.fori_loop(1, k, body, (centers, dmin))
    return centers


def round_labels(u, k: int, steps: int = 30):
    r"""Hard labels from a factor ``U`` (``Z = U U^T``).

    For an exact solution ``Z = sum_k 1_{G_k} 1_{G_k}^T / |G_k|``, rows of ``U`` in one
    cluster coincide and rows of different clusters are orthogonal (Xu et al. 2026, Lemma 1),
    so the rows normalized to unit length are ``K`` orthonormal points: Lloyd with a
    farthest-first seeding recovers the clusters exactly, and is a stable rounding
    when ``Z`` is only near block-diagonal (barrier, finite ``mu``).
    """
    rows = u / jnp.maximum(jnp.linalg.norm(u, axis=1, keepdims=True), jnp.finfo(u.dtype).tiny)
    labels, _ = lloyd(rows, farthest_first(rows, k), steps)
    return labels


ROUND_STEPS = 30
"""Lloyd iterations of each rounding (`round_candidates`)."""


def round_candidates(u, x, k: int, steps: int = ROUND_STEPS):
    r"""Three roundings of ``Z = U U^T`` to labels, shape ``(3, n)``; all exact when ``Z``
    is the block-diagonal cluster matrix, they differ when it is only near it.

    Lloyd (farthest-first seeding, ``steps`` iterations) on (1) the normalized rows of
    ``U`` (`round_labels`), (2) the rows of ``U`` as they are, and (3) the denoised
    points ``Z X``: row ``i`` is the ``Z``-weighted mean of the data seen from point
    ``i`` (its cluster's mean for an exact ``Z``), the rounding of the K-means SDP by
    Mixon, Villar and Ward (2017). Where the relaxation is far from block-diagonal
    (scikit-learn's digits, K = 10, at the default barrier) the three differ, and which
    one ends best depends on rounding-level differences in the solution, so all three
    are tried: `jaxsolve.cluster.kmeans` keeps the candidate with the lowest K-means
    objective (its inertia against scikit-learn's: ``bench/results/cluster.md``).
    """

    def cluster(pts):
        return lloyd(pts, farthest_first(pts, k), steps)[0]

    # one batched Lloyd for the three (compiled once, not three times)
    return jax.vmap(cluster)(candidate_points(u, x))


def pad_columns(a, width: int):
    """``a`` ``(n, d)`` with zero columns appended to ``width``: no distance changes."""
    return jnp.pad(a, ((0, 0), (0, width - a.shape[1])))


def candidate_points(u, x):
    """The points `round_candidates` clusters, ``(3, n, max(r, d))``: the normalized rows
    of ``U``, its rows and ``Z X``, the narrower ones padded with zero columns."""
    rows = u / jnp.maximum(jnp.linalg.norm(u, axis=1, keepdims=True), jnp.finfo(u.dtype).tiny)
    zx = u @ (u.T @ x)
    width = max(u.shape[1], x.shape[1])
    return jnp.stack([pad_columns(rows, width), pad_columns(u, width), pad_columns(zx, width)])


def centers_of(x, labels, k: int):
    """The ``(k, d)`` means of the clusters of ``labels`` (0 for an empty cluster)."""
    one_hot = jax.nn.one_hot(labels, k, dtype=x.dtype)
    counts = jnp.sum(one_hot, 0)
    return (one_hot.T @ x) / jnp.maximum(counts, 1)[:, None]


def inertia(x, labels, centers):
    """K-means objective ``sum_i ||x_i - c_{label_i}||^2``."""
    return jnp.sum((x - centers[labels]) ** 2)
