r"""Ratio Cut on the RIM manifold (Yuan, Xie, Nie, Li, ICLR 2026) or the doubly stochastic one.

Ratio Cut of a graph with affinity ``W`` (symmetric, nonnegative) and Laplacian
``L = diag(W 1) - W``, relaxed over a soft indicator ``F`` (``n x c``)::

    min_F  tr( (F^T L F) (F^T F)^{-1} ),

whose Euclidean gradient is ``2 [L F (F^T F)^{-1} - F (F^T F)^{-1} (F^T L F) (F^T F)^{-1}]``
(Yuan et al. 2026, section 5; only ``c x c`` inverses). ``F`` lives on

* ``manifold="rim"``: `jaxsolve.manifolds.RIM` ``(n, c, lower, upper)``, rows summing
  to one, column sums in ``[lower, upper]``; every manifold operation is ``O(nc)``;
* ``manifold="doubly_stochastic"``: the baseline of the paper, ``F = Z B`` with ``Z`` on
  `jaxsolve.manifolds.DoublyStochastic` ``(n)`` (Fisher metric, ``O(n^3)``
  operations) and ``B`` a fixed 0/1 matrix assigning the ``n`` columns of ``Z`` to ``c``
  groups of sizes as equal as possible, so that ``F 1 = 1`` and ``F^T 1`` = the group
  sizes (the transportation polytope that ``RIM(n, c, n/c, n/c)`` also describes).

Any Riemannian solver of `jaxsolve.riemannian` runs on either (autodiff gradients).
Labels are ``argmax`` of the rows of ``F``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Solution, Status, solve
from jaxsolve.core.validation import check_finite, check_floating, check_not_half

__all__ = ["ratio_cut", "RatioCutState", "ratio_cut_cost", "laplacian", "spectral_start"]

_SOLVERS = ("cg", "gd", "trust_region")


def laplacian(w):
    """``L = diag(W 1) - W``."""
    return jnp.diag(jnp.sum(w, axis=1)) - w


def ratio_cut_cost(f, w):
    """``tr((F^T L F)(F^T F)^{-1})`` with ``L F = (W 1) * F - W F`` (no ``n x n`` Laplacian formed).

    ``w``: the affinity matrix, or its neighbour lists ``(idx, val, degree)`` as built
    for sparse graphs by the solvers (``L F`` then costs ``O(n k c)``).
    """
    if isinstance(w, tuple):
        idx, val, deg = w
        lf = deg[:, None] * f - jnp.sum(val[:, :, None] * f[idx], axis=1)
    else:
        lf = jnp.sum(w, axis=1)[:, None] * f - w @ f
    return jnp.trace(jnp.linalg.solve(f.T @ f, f.T @ lf))


def _graph(w):
    """The graph the solvers see: ``w`` itself, or, when it is sparse (at most ``n / 8``
    neighbours per row, e.g. a k-NN graph), its rows as padded neighbour lists
    ``(idx, val, degree)`` (``n x k``; padding has weight 0). ``L F`` then costs
    ``O(n k c)`` instead of ``O(n^2 c)``; on a k-NN graph of a few thousand points the
    dense products, not the manifold, would otherwise be the bulk of a RIM step (our
    implementation choice; the value is the same up to rounding)."""
    arr = np.asarray(w)
    n = arr.shape[0]
    nnz = np.count_nonzero(arr, axis=1)
    k = int(nnz.max()) if n else 0
    if k == 0 or 8 * k > n:
        return w
    rows, cols = np.nonzero(arr)  # row-major: each row's entries are contiguous
    pos = np.arange(rows.size) - np.repeat(np.cumsum(nnz) - nnz, nnz)
    idx = np.zeros((n, k), np.int32)
    val = np.zeros((n, k), arr.dtype)
    idx[rows, pos] = cols
    val[rows, pos] = arr[rows, cols]
    return jnp.asarray(idx), jnp.asarray(val), jnp.sum(w, axis=1)


def _ds_cost(z, args):
    """The Ratio Cut cost of ``F = Z B`` for the doubly stochastic baseline."""
    g, b = args
    return ratio_cut_cost(z @ b, g)


def _group_matrix(n, c, dtype):
    """``B``: column ``j`` of ``Z`` assigned to group ``j mod c`` (0/1, ``n x c``)."""
    groups = np.arange(n) % c
    b = np.zeros((n, c))
    b[np.arange(n), groups] = 1.0
    return jnp.asarray(b, dtype)


def _check_affinity(w, name="W"):
    w = jnp.asarray(w)
    check_floating(name, w, real=True)
    check_not_half(name, w, "the spectral start's eigensolver runs in float32 or float64 only")
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {w.shape}")
    check_finite(name, w)
    arr = np.asarray(w)
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name} contains Inf")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be nonnegative (an affinity matrix), min entry {arr.min()}")
    scale = max(float(np.max(np.abs(arr))), 1e-300)
    asym = float(np.max(np.abs(arr - arr.T)))
    if asym > 1e-10 * scale * max(1, arr.shape[0]):
        raise ValueError(f"{name} must be symmetric, max |W - W^T| = {asym:.3e}")
    return w


def spectral_start(w, n_clusters: int, manifold, *, key, iters: int = 50, temperature=0.2):
    r"""A point of ``manifold`` (`jaxsolve.manifolds.RIM`) from the spectral embedding.

    The Ratio Cut relaxation over the Stiefel manifold is solved by the ``c`` eigenvectors
    ``E`` of the smallest eigenvalues of ``L = diag(W 1) - W`` (von Luxburg 2007); we get
    them as the top ones of ``2 I - L`` (``W`` normalized to a largest degree of 1, so the
    spectrum of ``L`` lies in ``[0, 2]``) by LOBPCG (``iters`` iterations, ``O(n^2 c)`` each
    for a dense ``W``; a dense ``eigh`` for ``n < 400``). The rows of ``E``, normalized, are
    clustered by Lloyd from a farthest-first seeding, and the soft assignment
    ``softmax_k(-||e_i - m_k||^2 / temperature)`` is scaled on rows and columns (Sinkhorn)
    into the manifold: a strictly positive, interior start near the spectral clustering.
    (Our choice; Yuan et al. 2026 start at random, which on the 1797-point digits graph leaves
    ``F^T F`` nearly singular and costs Riemannian CG hundreds of steps.)
    """
    return _spectral_start(w, n_clusters, manifold, key, iters, temperature)


@partial(jax.jit, static_argnums=(1, 2, 4))
def _spectral_start(w, n_clusters, manifold, key, iters, temperature):
    # one compiled program: op by op, the eigensolve, Lloyd, Sinkhorn and the projection
    # would compile as dozens of small programs
    from jax.experimental.sparse.linalg import lobpcg_standard

    from jaxsolve.cluster._problem import farthest_first, lloyd
    from jaxsolve.manifolds.rim import sinkhorn_scale

    n = w.shape[0]
    c = n_clusters
    deg = jnp.sum(w, axis=1)
    k = min(c + 5, n)
    if n < 400 or 5 * k > n:
        _, vecs = jnp.linalg.eigh(jnp.diag(deg) - w)
        e = vecs[:, :c]
    else:
        x0 = jax.random.normal(key, (n, k), w.dtype)
        _, vecs, _ = lobpcg_standard(lambda v: 2.0 * v - (deg[:, None] * v - w @ v), x0, m=iters)
        e = vecs[:, :c]
    rows = e / jnp.maximum(jnp.linalg.norm(e, axis=1, keepdims=True), jnp.finfo(w.dtype).tiny)
    _, centres = lloyd(rows, farthest_first(rows, c), 30)
    d = jnp.sum((rows[:, None, :] - centres[None, :, :]) ** 2, axis=-1)
    f0 = jax.nn.softmax(-d / temperature, axis=1)
    a, lo, hi = manifold.constraint_arrays(w.dtype)
    tol = jnp.asarray(1e-10 if w.dtype == jnp.float64 else 1e-5, w.dtype)
    return _onto(manifold, sinkhorn_scale(f0, jnp.zeros_like(f0), a, lo, hi, tol, 10_000), tol)


def _onto(manifold, x, tol):
    r"""``x`` (rows exact, columns nearly in the slab) finished onto ``manifold``.

    Sinkhorn's scaling converges slowly when the soft assignment is nearly hard (well
    separated clusters: entries near 0 and 1): its column sums can stay above the start
    check of the Riemannian solvers (``10 sqrt(eps)``, 1.5e-7 in float64), which would
    then end BREAKDOWN at step 0.
    When the columns are off by more than ``tol``, the Euclidean projection (Dykstra,
    `jaxsolve.manifolds.rim_project`) finishes the job: from such a near point it is a
    uniform shift of each column (a few sweeps), rows and signs exact; otherwise ``x`` is
    returned unchanged.
    """
    from jaxsolve.manifolds.rim import constraint_violation, dykstra_project

    a, lo, hi = manifold.constraint_arrays(x.dtype)
    n = x.shape[0]
    # Dykstra leaves the column sums within n * its tolerance of the slab
    project = lambda y: dykstra_project(y, a, lo, hi, tol / n, 1000)
    return jax.lax.cond(constraint_violation(x, a, lo, hi) > tol, project, lambda y: y, x)


def _check_start(manifold, x0, what):
    """Raise when ``x0`` is not a point of ``manifold`` by the Riemannian solvers' own
    start check: off it they end BREAKDOWN at step 0 without taking a step."""
    from jaxsolve.riemannian import start_status

    if int(start_status(manifold, x0)) == Status.SUCCESS:
        return
    bound = lambda t: f"{t[0]:g}" if len(set(t)) == 1 else str(list(t))
    raise ValueError(
        f"{what} is not a point of the RIM manifold (entries >= 0, rows summing to 1, "
        f"column sums in [lower, upper] = [{bound(manifold.lower)}, {bound(manifold.upper)}]): "
        f"residual {float(manifold.residual(x0)):.3e}"
    )


def _make_solver(solver, cost, manifold):
    """The Riemannian solver named by ``solver`` (or built by it, when callable)."""
    from jaxsolve import riemannian

    if callable(solver):
        return solver(cost, manifold)
    if solver == "cg":
        return riemannian.conjugate_gradient(cost, manifold)
    if solver == "gd":
        return riemannian.gradient_descent(cost, manifold)
    if solver == "trust_region":
        return riemannian.trust_region(cost, manifold)
    raise ValueError(
        f"solver must be one of {_SOLVERS} or a factory(cost, manifold), got {solver!r}"
    )


def ratio_cut(
    W: Any,
    n_clusters: int,
    *,
    manifold: str = "rim",
    solver: Any = "cg",
    key: Any = None,
    lower: Any = None,
    upper: Any = None,
    retraction: str = "dykstra",
    max_steps: int = 300,
    tol: float | None = None,
    init: Any = "spectral",
) -> Solution:
    r"""Ratio Cut clustering of an affinity matrix by Riemannian optimization.

    Yuan, Xie, Nie and Li, "Riemannian optimization on relaxed indicator matrix
    manifold" (ICLR 2026): minimize ``tr((F^T L F)(F^T F)^{-1})`` over the RIM manifold
    (or the doubly stochastic baseline); see the module docstring.

    Args:
        W: symmetric nonnegative affinity ``(n, n)`` (e.g. a symmetrized k-NN graph).
        n_clusters: ``c``, between 1 and ``n``.
        manifold: ``"rim"`` or ``"doubly_stochastic"``.
        solver: ``"cg"`` (Riemannian conjugate gradient, default), ``"gd"``,
            ``"trust_region"``, or a factory ``solver(cost, manifold) -> Solver``.
        key: ``jax.random`` key for the random start (default ``key(0)``).
        lower: RIM lower column-sum bound (default ``lower = upper = n / c``, the setting
            of the paper's Table 4).
        upper: RIM upper column-sum bound (default ``n`` when only ``lower`` is given).
        retraction: RIM retraction (``"dykstra"``, ``"dual"``, ``"sinkhorn"``).
        max_steps: step budget of `jaxsolve.solve`.
        tol: tolerance on the Riemannian gradient norm (default ``1e-6`` in float64,
            ``1e-4`` in float32). When the relaxed optimum has entries at 0 (the closed
            set's boundary, common for Ratio Cut) that norm does not vanish and the solve
            ends at ``max_steps`` (the cost then changes little between steps).
        init: RIM start: ``"spectral"`` (default, `spectral_start`), ``"random"``
            (the paper's: a random point of the manifold) or an ``(n, c)`` point of it.
            The doubly stochastic baseline always starts at random.

    Returns:
        A `jaxsolve.Solution` whose ``x`` is the soft indicator ``F`` ``(n, c)``
        and whose ``state`` is a `RatioCutState`: ``sol.state.labels`` (``argmax`` of
        each row of ``F``) and ``sol.state.relaxation`` (the Solution of the manifold
        solve, None for ``n_clusters = 1``); ``status``, ``num_steps`` and ``error`` are
        the relaxation's.
    """
    from jaxsolve.manifolds import RIM, DoublyStochastic

    w = _check_affinity(W)
    n = w.shape[0]
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, int | np.integer):
        raise TypeError(f"n_clusters must be an int, got {type(n_clusters).__name__}")
    c = int(n_clusters)
    if not 1 <= c <= n:
        raise ValueError(f"n_clusters must be between 1 and n={n}, got {n_clusters}")
    if manifold not in ("rim", "doubly_stochastic"):
        raise ValueError(f"manifold must be 'rim' or 'doubly_stochastic', got {manifold!r}")
    if c == 1:
        return _result(jnp.ones((n, 1), w.dtype), None)
    key = jax.random.key(0) if key is None else key
    if tol is None:
        tol = 1e-6 if w.dtype == jnp.float64 else 1e-4
    # Normalize the graph so that the cost (and the tolerance) do not scale with W.
    w = w / jnp.maximum(jnp.max(jnp.sum(w, axis=1)), jnp.finfo(w.dtype).tiny)
    if manifold == "rim":
        lo = n / c if lower is None else lower
        hi = lo if upper is None and lower is None else (n if upper is None else upper)
        m = RIM(n, c, lo, hi, retraction=retraction)
        if isinstance(init, str):
            if init == "spectral":
                x0 = spectral_start(w, c, m, key=key)
            elif init == "random":
                tol0 = jnp.asarray(1e-10 if w.dtype == jnp.float64 else 1e-5, w.dtype)
                x0 = _onto(m, m.random_point(key, w.dtype), tol0)
            else:
                raise ValueError(f"init must be 'spectral', 'random' or an array, got {init!r}")
            _check_start(m, x0, f"the {init} start for lower={lo}, upper={hi}")
        else:
            x0 = jnp.asarray(init, w.dtype)
            if x0.shape != (n, c):
                raise ValueError(f"init must have shape ({n}, {c}), got {x0.shape}")
            check_finite("init", x0)
            _check_start(m, x0, "init")
        g = _graph(w)
        sol = solve(_make_solver(solver, ratio_cut_cost, m), x0, g, tol=tol, max_steps=max_steps)
        f = sol.x
    else:
        if lower is not None or upper is not None:
            raise ValueError("lower/upper apply to manifold='rim' only")
        m = DoublyStochastic(n)
        b = _group_matrix(n, c, w.dtype)
        z0 = m.random_point(key, w.dtype)
        args = (_graph(w), b)  # the same graph products as RIM
        sol = solve(_make_solver(solver, _ds_cost, m), z0, args, tol=tol, max_steps=max_steps)
        f = sol.x @ b
    return _result(f, sol)


class RatioCutState(NamedTuple):
    """``Solution.state`` of `ratio_cut`.

    Attributes:
        x: the soft indicator ``F`` ``(n, c)`` (``Solution.x``).
        iter_num: int32 scalar, the manifold solve's ``num_steps`` (0 for one cluster).
        error: the manifold solve's ``error`` (0 for one cluster).
        status: int32 `Status`, the manifold solve's (``SUCCESS`` for one cluster).
        labels: int32 labels ``(n,)``, the row-wise ``argmax`` of ``F``.
        relaxation: the `jaxsolve.Solution` of the manifold solve (``x`` is ``F`` on
            RIM, the doubly stochastic ``Z`` for the baseline), or None.
    """

    x: Any
    iter_num: Any
    error: Any
    status: Any
    labels: Any
    relaxation: Any


def _result(f, relaxation) -> Solution:
    """The `Solution` of `ratio_cut` for the soft indicator ``f``."""
    if relaxation is None:
        status, steps, error = jnp.int32(Status.SUCCESS), jnp.int32(0), jnp.zeros((), f.dtype)
    else:
        status, steps, error = relaxation.status, relaxation.num_steps, relaxation.error
    labels = jnp.argmax(f, axis=1).astype(jnp.int32)
    state = RatioCutState(f, steps, error, status, labels, relaxation)
    return Solution(x=f, state=state, status=status, num_steps=steps, error=error)
