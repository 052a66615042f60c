"""``jaxsolve.cluster.kmeans``: K-means through the SDP relaxation on a manifold.

The method of Xu, Hou, Chen and Zhang (ICLR 2026), or the NLR baseline, then rounding.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.cluster._problem import (
    ROUND_STEPS,
    candidate_points,
    centers_of,
    farthest_first,
    feasible_point,
    inertia,
    lift,
    lloyd,
    nearest_center,
    pad_columns,
    prepare_data,
)
from jaxsolve.cluster.kmeans_newton import kmeans_newton
from jaxsolve.cluster.nlr import nlr, nlr_start
from jaxsolve.core import Solution, Status, solve
from jaxsolve.core.compile_options import LOOP_EMITTERS, options_jit
from jaxsolve.core.protocol import pack
from jaxsolve.core.validation import (
    check_finite,
    check_floating,
    check_key,
    check_nonempty,
    check_not_half,
)

__all__ = ["kmeans", "KMeansState"]


class KMeansState(NamedTuple):
    """``Solution.state`` of `kmeans`: the partition and the relaxation behind it.

    Attributes:
        x: the centres ``(K, d)`` (``Solution.x``).
        iter_num: int32 scalar, the relaxation solve's ``num_steps`` (0 when none was
            needed: ``K = 1`` or ``K = n``).
        error: the relaxation solve's ``error`` (0 when none was needed).
        status: int32 `Status`, the relaxation solve's (``SUCCESS`` when none was
            needed); `kmeans` copies it, it does not judge the rounding.
        labels: int32 labels ``(n,)``.
        inertia: the K-means objective ``sum_i ||x_i - c_{label_i}||^2`` of the partition.
        relaxation: the `jaxsolve.Solution` of the relaxation (``x`` is ``(V, Q)`` for
            Newton, ``U`` for NLR), or None when none was solved.
    """

    x: Any
    iter_num: Any
    error: Any
    status: Any
    labels: Any
    inertia: Any
    relaxation: Any

    @property
    def centers(self):
        """The centres ``(K, d)`` (the same array as ``x``)."""
        return self.x

    def predict(self, X: Any) -> jax.Array:
        """Labels of new points ``X`` ``(m, d)``: the index of the nearest centre.

        As scikit-learn's ``KMeans.predict``; ``X`` may be a NumPy array.
        """
        X = jnp.asarray(X)
        check_floating("X", X)
        if X.ndim != 2 or X.shape[1] != self.x.shape[1]:
            raise ValueError(
                f"X must have shape (m, {self.x.shape[1]}) (the centres' dimension), got {X.shape}"
            )
        return nearest_center(X.astype(self.x.dtype), self.x)


def _check_k(name, k, n):
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(k).__name__}")
    if not 1 <= int(k) <= n:
        raise ValueError(f"{name} must be between 1 and the number of points {n}, got {k}")
    return int(k)


def _fill_empty(x, labels, k: int):
    """Give every empty cluster a point: the point farthest from its centre among the
    clusters of two or more points becomes a singleton (scikit-learn's relocation; it
    lowers the objective, or keeps it where that point sits on its centre). An empty
    cluster would otherwise get the invented centre 0 (as happens when points coincide)."""

    def body(_, labels):
        counts = jnp.bincount(labels, length=k)
        c = centers_of(x, labels, k)
        d = jnp.sum((x - c[labels]) ** 2, axis=1)
        d = jnp.where(counts[labels] >= 2, d, -1.0)
        i = jnp.argmax(d)
        empty = counts == 0
        j = jnp.argmax(empty)
        move = jnp.any(empty) & (d[i] >= 0)
        return jnp.where(move, labels.at[i].set(j.astype(labels.dtype)), labels)

    return jax.lax.fori_loop(0, k, body, labels)


@partial(jax.jit, static_argnames=("k", "polish"))
def _finish(x, u, k, polish):
    """Labels and centres of the best of the three roundings of ``U`` (`round_candidates`),
    each refined by ``polish`` Lloyd steps, by K-means objective."""
    # u is (n, r) for both methods; Z X is formed in the data's own units
    pts = candidate_points(u, x.astype(u.dtype))
    xw = pad_columns(x, pts.shape[2]).astype(pts.dtype)

    def refine(p):
        if polish:
            # Rounding and polish as one two-stage loop, so that Lloyd, its seeding and
            # _fill_empty are compiled once: stage 0 is round_candidates' Lloyd on the
            # candidate points from a farthest-first seeding, stage 1 the polish on the
            # data from the means of stage 0's partition; each stage ends by filling the
            # empty clusters (the same steps as rounding, fill, Lloyd, fill in sequence)
            def stage(i, labels):
                first = i == 0
                c0 = jax.lax.cond(
                    first, lambda: farthest_first(p, k), lambda: centers_of(xw, labels, k)
                )
                steps = jnp.where(first, ROUND_STEPS, polish)
                labels = lloyd(jnp.where(first, p, xw), c0, steps)[0]
                return _fill_empty(x, labels, k)

            labels = jax.lax.fori_loop(0, 2, stage, jnp.zeros(x.shape[:1], jnp.int32))
        else:
            labels = _fill_empty(x, lloyd(p, farthest_first(p, k), ROUND_STEPS)[0], k)
        centers = centers_of(x, labels, k)
        return labels, centers, inertia(x, labels, centers)

    labels, centers, obj = jax.vmap(refine)(pts)
    best = jnp.argmin(obj)
    return labels[best], centers[best]


def kmeans(
    X: Any,
    n_clusters: int,
    *,
    key: Any = None,
    rank: int | None = None,
    mu: float = 0.03,
    max_steps: int | None = None,
    method: str = "newton",
    tol: float | None = None,
    polish: int = 20,
    n_init: int = 1,
    **solver_options: Any,
) -> Solution:
    r"""K-means clustering through the Burer-Monteiro factor of the Peng-Wei SDP.

    ``method="newton"`` (default): Xu, Hou, Chen and Zhang, "Scalable second-order
    Riemannian optimization for K-means clustering" (ICLR 2026): the factor
    ``U = [1/sqrt(n), V] Q`` on the product of the centred sphere and ``O_r``, the
    log-barrier ``-mu/(n r) sum log U_ij`` for ``U > 0``, cubic-regularized Riemannian
    Newton with a linear-time subproblem (`jaxsolve.cluster.kmeans_newton`).
    ``method="nlr"``: the first-order baseline of Zhuang et al. (ICLR 2024),
    `jaxsolve.cluster.nlr` with our tuned defaults, from the lift of Newton's
    feasible start; ``**nlr_reference_options(X)`` (and ``max_steps=50_000``) gives the
    reference code's step and penalty (`jaxsolve.cluster.nlr_reference_options`).

    The relaxed solution ``Z = U U^T`` is rounded to labels three ways
    (`jaxsolve.cluster.round_candidates`: clustering the normalized rows of ``U``,
    its raw rows, and the denoised points ``Z X``; all exact when ``Z`` is the
    block-diagonal cluster matrix: Xu et al. 2026, Lemma 1), ``polish`` Lloyd iterations in the
    data space refine each (``polish=0``: the roundings as they are), and the partition
    with the lowest K-means objective is returned.

    Args:
        X: data, ``(n, d)`` floating, one point per row.
        n_clusters: ``K``, between 1 and ``n`` (``K = n``: every point its own cluster,
            no solve). An empty cluster after rounding gets the point farthest from its
            centre (as scikit-learn relocates), never an invented centre.
        key: a ``jax.random`` key (the random start); default ``jax.random.key(0)``, so
            a call without one is reproducible (scikit-learn's ``random_state=0``).
        rank: ``r``; default ``K + 1`` for Newton (``r > K`` is needed for a strictly
            positive start), ``2K`` for NLR (the reference code's choice).
        mu: barrier weight (Newton only); the data term is scaled to ``[-1, 0]``.
        max_steps: step budget (default 500 for Newton, 200000 for NLR).
        method: ``"newton"`` or ``"nlr"``.
        tol: tolerance on the solver's error (default ``1e-6`` in float64 (Newton: the
            barrier's round-off floor on the gradient is near ``1e-7``), ``1e-4`` in
            float32). In float32 the floor rises as ``mu`` falls: the lift's absolute
            rounding on its smallest entries is amplified by the barrier's curvature
            ``mu/(n r U^2)``, so at ``mu = 1e-3`` a float32 solve can stall above ``tol``
            and end ``MAX_STEPS`` (with the right partition), where the default
            ``mu = 0.03`` converges.
        polish: Lloyd iterations after rounding.
        n_init: runs, from ``key`` and ``jax.random.split(key, n_init - 1)`` (so more
            runs are never worse than one); the partition of lowest K-means objective
            among the runs that end SUCCESS (else among all) is returned, with its run's
            solution.
        **solver_options: passed to the solver factory.

    Returns:
        A `jaxsolve.Solution` whose ``x`` is the centers ``(K, d)`` (means of the
        clusters) and whose ``state`` is a `KMeansState`: ``sol.state.labels`` (int labels
        ``(n,)``), ``sol.state.inertia`` and ``sol.state.relaxation`` (the
        `jaxsolve.Solution` of the relaxation: ``x`` is ``(V, Q)`` for Newton, ``U``
        for NLR). ``status``, ``num_steps`` and ``error`` are the relaxation's.

    Compilation (time to first answer): each restart runs one compiled program (start,
    relaxation, rounding, polish, inertia), specialized on the shape and dtype of ``X``,
    ``n_clusters``, ``rank``, ``method``, ``max_steps``, ``polish`` and the solver's
    integer/string options; ``key``, ``tol``, ``mu`` and the other float options are
    traced, so ``n_init`` restarts, new keys and hyperparameter sweeps reuse it. Its
    first compilation dominates a first call (seconds: the Newton step's structured
    Hessian, secular search and retraction loops; compiled with XLA:CPU's loop emitters,
    `COMPILER_OPTIONS`, which halve it); later calls take milliseconds.

    A new number of points ``n`` compiles a new program. Padding ``X`` to a bucket of
    sizes is not offered: every row enters the relaxation itself (the lift's
    ``1/sqrt(n)``, the constraint ``U U^T 1 = 1``, the barrier on each entry of ``U``),
    so a padded row would change the problem unless the solver masked it throughout.
    To stop paying the compilation again in every new process (notebooks, test runs,
    scripts that see the same sizes), enable JAX's persistent compilation cache::

        jax.config.update("jax_compilation_cache_dir", "/path/to/cache")
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

    First-call times against scikit-learn: ``bench/results/compile.md``.
    """
    if method not in ("newton", "nlr"):
        raise ValueError(f"method must be 'newton' or 'nlr', got {method!r}")
    if key is None:
        key = jax.random.key(0)
    check_key("key", key)
    X = jnp.asarray(X)
    check_floating("X", X, real=True)
    if X.ndim != 2:
        raise ValueError(f"X must have shape (n, d), got {X.shape}")
    check_not_half("X", X, "the relaxation's eigen/QR steps run in float32 or float64 only")
    check_nonempty("X", X)
    check_finite("X", X)
    if np.any(np.isinf(np.asarray(X))):
        raise ValueError("X contains Inf")
    n = X.shape[0]
    k = _check_k("n_clusters", n_clusters, n)
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if not (isinstance(polish, int) and polish >= 0):
        raise ValueError(f"polish must be a non-negative int, got {polish!r}")
    dtype = X.dtype
    if k == 1:
        return _result(X, jnp.zeros((n,), jnp.int32), jnp.mean(X, axis=0, keepdims=True), None)
    if k == n:
        # every point its own cluster: inertia 0, the optimum (no relaxation to solve)
        return _result(X, jnp.arange(n, dtype=jnp.int32), X, None)
    if rank is None:
        # k + 1 (Newton) or 2 k (NLR), at most n (k < n here, so Newton's k < rank holds)
        rank = min(k + 1, n) if method == "newton" else min(2 * k, n)
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
        tol = 1e-6 if dtype == jnp.float64 else 1e-4
    if isinstance(n_init, bool) or not isinstance(n_init, int | np.integer) or n_init < 1:
        raise ValueError(f"n_init must be a positive int, got {n_init!r}")
    if method == "newton":
        solver, budget = kmeans_newton(mu=mu, **solver_options), max_steps or 500
    else:
        solver, budget = nlr(**solver_options), max_steps or 200_000
    # The solver's numeric hyperparameters and tol are traced (a sweep reuses the
    # program); shapes, k, rank, method, the step budget and polish are static.
    packed = pack(solver)
    best = None
    keys = [key] + (list(jax.random.split(key, int(n_init) - 1)) if n_init > 1 else [])
    for restart_key in keys:
        # one compiled program per restart (the same one for every key)
        labels, centers, obj, sol = _run(
            X,
            restart_key,
            packed,
            tol,
            k=k,
            rank=rank,
            method=method,
            max_steps=budget,
            polish=polish,
        )
        # a restart that ends SUCCESS wins over a failed one, then the lower objective
        rank_key = (int(sol.status) != Status.SUCCESS, float(obj))
        if best is None or rank_key < best[0]:
            best = (rank_key, labels, centers, obj, sol)
    return _result(X, best[1], best[2], best[4], best[3])


def _run_program(X, key, solver, tol, *, k, rank, method, max_steps, polish):
    """One restart as one program: start, relaxation, rounding and polish, inertia.

    Run eagerly, the data preparation, the lift and the inertia would be some 25 one-op
    programs, each compiled on the first call."""
    n, dtype = X.shape[0], X.dtype
    data, _ = prepare_data(X)
    if method == "newton":
        x0 = feasible_point(key, n, k, rank, dtype)
        sol = solve(solver, x0, data, tol=tol, max_steps=max_steps)
        u = lift(*sol.x)
    else:
        x0 = nlr_start(key, n, k, rank, dtype)
        sol = solve(solver, x0, data, tol=tol, max_steps=max_steps)
        u = sol.x
    labels, centers = _finish(X, u, k, polish)
    return labels, centers, inertia(X, labels, centers), sol


_STATIC = ("k", "rank", "method", "max_steps", "polish")

COMPILER_OPTIONS = LOOP_EMITTERS
"""XLA options of the restart program (`jaxsolve.core.compile_options.LOOP_EMITTERS`):
on CPU, XLA's loop emitters instead of its MLIR fusion emitters (`options_jit` gives
them on a CPU backend only, and compiles without them on an XLA that rejects them).

The program is some 500 small kernels (the Newton step's structured Hessian, secular
search and retractions on ``n x r`` arrays), and LLVM's time on the fusion emitters'
code was most of a first call. Measured on iris (``bench/results/compile.md``, 2 cores,
float64, fresh processes): a first call 6.2 -> 3.6 CPU s (its compilation 6.0 -> 3.5),
and the steady-state call no slower (same-process A/B: iris 0.89x, wine 0.94x,
breast_cancer 1.01x); labels, inertia and step counts unchanged in float64, the
relaxation's iterate equal to 1e-12 (another reduction order). LLVM at ``-O1`` on top
(`LOOP_EMITTERS_O1`, FlexQP's set) saved only 0.3 of 2.8 CPU s here."""

_run = options_jit(_run_program, COMPILER_OPTIONS, static_argnames=_STATIC)


def _result(X, labels, centers, relaxation, obj=None) -> Solution:
    """The `Solution` of `kmeans` (``obj``: the inertia, computed when not given)."""
    if obj is None:
        obj = inertia(X, labels, centers)
    if relaxation is None:
        status, steps, error = jnp.int32(Status.SUCCESS), jnp.int32(0), jnp.zeros((), X.dtype)
    else:
        status, steps, error = relaxation.status, relaxation.num_steps, relaxation.error
    state = KMeansState(
        x=centers,
        iter_num=steps,
        error=error,
        status=status,
        labels=labels,
        inertia=obj,
        relaxation=relaxation,
    )
    return Solution(x=centers, state=state, status=status, num_steps=steps, error=error)
