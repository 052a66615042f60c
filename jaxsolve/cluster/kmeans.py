"""``jaxsolve.cluster.kmeans``: K-means through the SDP relaxation on a manifold (paper 12)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.cluster._problem import (
    centers_of,
    feasible_point,
    inertia,
    lift,
    lloyd,
    prepare_data,
    round_candidates,
)
from jaxsolve.cluster.kmeans_newton import kmeans_newton
from jaxsolve.cluster.nlr import nlr, nlr_start
from jaxsolve.core import Solution, Status, solve
from jaxsolve.core.validation import check_finite, check_floating, check_nonempty

__all__ = ["kmeans"]


def _check_k(name, k, n):
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(k).__name__}")
    if not 1 <= int(k) <= n:
        raise ValueError(f"{name} must be between 1 and the number of points {n}, got {k}")
    return int(k)


@partial(jax.jit, static_argnames=("k", "polish"))
def _finish(x, u, k, polish):
    def refine(labels):
        if polish:
            labels, _ = lloyd(x, centers_of(x, labels, k), polish)
        centers = centers_of(x, labels, k)
        return labels, centers, inertia(x, labels, centers)

    # u is (n, r) for both methods; Z X is formed in the data's own units
    labels, centers, obj = jax.vmap(refine)(round_candidates(u, x.astype(u.dtype), k))
    best = jnp.argmin(obj)
    return labels[best], centers[best]


def kmeans(
    X: Any,
    n_clusters: int,
    *,
    key: Any,
    rank: int | None = None,
    mu: float = 0.03,
    max_steps: int | None = None,
    method: str = "newton",
    tol: float | None = None,
    polish: int = 20,
    **solver_options: Any,
) -> tuple[Any, Any, Any]:
    r"""K-means clustering through the Burer-Monteiro factor of the Peng-Wei SDP.

    ``method="newton"`` (default): Xu, Hou, Chen and Zhang, "Scalable second-order
    Riemannian optimization for K-means clustering" (ICLR 2026): the factor
    ``U = [1/sqrt(n), V] Q`` on the product of the centred sphere and ``O_r``, the
    log-barrier ``-mu/(n r) sum log U_ij`` for ``U > 0``, cubic-regularized Riemannian
    Newton with a linear-time subproblem (:func:`jaxsolve.cluster.kmeans_newton`).
    ``method="nlr"``: the first-order baseline of Zhuang et al. (ICLR 2024),
    :func:`jaxsolve.cluster.nlr` with our tuned defaults, from the lift of Newton's
    feasible start; ``**nlr_reference_options(X)`` (and ``max_steps=50_000``) gives the
    reference code's step and penalty (:func:`jaxsolve.cluster.nlr_reference_options`).

    The relaxed solution ``Z = U U^T`` is rounded to labels three ways
    (:func:`jaxsolve.cluster.round_candidates`: clustering the normalized rows of ``U``,
    its raw rows, and the denoised points ``Z X``; all exact when ``Z`` is the
    block-diagonal cluster matrix, paper 12, Lemma 1), ``polish`` Lloyd iterations in the
    data space refine each (``polish=0``: the roundings as they are), and the partition
    with the lowest K-means objective is returned.

    Args:
        X: data, ``(n, d)`` floating, one point per row.
        n_clusters: ``K``, between 1 and ``n``.
        key: a ``jax.random`` key (the random start).
        rank: ``r``; default ``K + 1`` for Newton (``r > K`` is needed for a strictly
            positive start), ``2K`` for NLR (the reference code's choice).
        mu: barrier weight (Newton only); the data term is scaled to ``[-1, 0]``.
        max_steps: step budget (default 500 for Newton, 200000 for NLR).
        method: ``"newton"`` or ``"nlr"``.
        tol: tolerance on the solver's error (default ``1e-6`` in float64 (Newton: the
            barrier's round-off floor on the gradient is near ``1e-7``), ``1e-4`` in
            float32). In float32 the floor rises as ``mu`` falls: the lift's absolute
            rounding on its smallest entries (``~1e-5`` at ``mu = 1e-3``) is amplified by
            the barrier's curvature ``mu/(n r U^2)``; on a 150-point mixture the gradient
            norm stalls near ``3e-3`` at ``mu = 1e-3`` (the solve then ends
            ``MAX_STEPS`` with the right partition) and converges at ``mu = 0.03``.
        polish: Lloyd iterations after rounding.
        **solver_options: passed to the solver factory.

    Returns:
        ``(labels, centers, solution)``: int labels ``(n,)``, centers ``(K, d)`` (means of
        the clusters) and the :class:`jaxsolve.Solution` of the relaxation (``x`` is
        ``(V, Q)`` for Newton, ``U`` for NLR).
    """
    if method not in ("newton", "nlr"):
        raise ValueError(f"method must be 'newton' or 'nlr', got {method!r}")
    X = jnp.asarray(X)
    check_floating("X", X)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n, d), got {X.shape}")
    check_nonempty("X", X)
    check_finite("X", X)
    if np.any(np.isinf(np.asarray(X))):
        raise ValueError("X contains Inf")
    n = X.shape[0]
    k = _check_k("n_clusters", n_clusters, n)
    if not (isinstance(polish, int) and polish >= 0):
        raise ValueError(f"polish must be a non-negative int, got {polish!r}")
    dt = X.dtype
    if k == 1:
        labels = jnp.zeros((n,), jnp.int32)
        sol = Solution(
            x=None,
            state=None,
            status=jnp.int32(Status.SUCCESS),
            num_steps=jnp.int32(0),
            error=jnp.zeros((), dt),
        )
        return labels, jnp.mean(X, axis=0, keepdims=True), sol
    if rank is None:
        rank = k + 1 if method == "newton" else 2 * k
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer):
        raise TypeError(f"rank must be an int, got {type(rank).__name__}")
    rank = int(rank)
    if method == "newton" and not k < rank <= n:
        raise ValueError(
            f"rank must satisfy n_clusters < rank <= n for the barrier (a strictly "
            f"positive factor exists only when rank > n_clusters); got rank={rank}, "
            f"n_clusters={k}, n={n}"
        )
    if method == "nlr" and not 1 <= rank <= n:
        raise ValueError(f"rank must be between 1 and n={n}, got {rank}")
    if method == "newton" and not (isinstance(mu, int | float) and mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be a positive number, got {mu!r}")
    if tol is None:
        tol = 1e-6 if dt == jnp.float64 else 1e-4
    data, _ = prepare_data(X)
    if method == "newton":
        x0 = feasible_point(key, n, k, rank, dt)
        solver = kmeans_newton(mu=mu, **solver_options)
        sol = solve(solver, x0, data, tol=tol, max_steps=max_steps or 500)
        u = lift(*sol.x)
    else:
        x0 = nlr_start(key, n, k, rank, dt)
        sol = solve(nlr(**solver_options), x0, data, tol=tol, max_steps=max_steps or 200_000)
        u = sol.x
    labels, centers = _finish(X, u, k, polish)
    return labels, centers, sol
