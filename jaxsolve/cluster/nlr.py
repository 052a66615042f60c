r"""NLR: the first-order nonnegative low-rank baseline for the K-means SDP (Zhuang et al. 2024).

Zhuang, Chen, Yang and Zhang, "Statistically optimal K-means clustering via nonnegative
low-rank semidefinite programming" (ICLR 2024), the baseline that Xu, Hou, Chen and
Zhang (ICLR 2026) compare K-means Newton with.
Burer-Monteiro factor ``U >= 0`` (``n x r``, ``||U||_F^2 = K``) of the Peng-Wei SDP, with
the row-sum constraint ``U U^T 1 = 1`` in an augmented Lagrangian::

    L(U, y) = <C, U U^T> + y^T (U U^T 1 - 1) + beta/2 ||U U^T 1 - 1||^2,   C = -X X^T.

One step (projected gradient on ``L``, then a dual step once the primal settles):

* ``grad_U L = 2 C U + y~ (1^T U) + 1 (y~^T U)``, ``y~ = y + beta (U U^T 1 - 1)``;
* ``U <- Pi(U - alpha/max(beta n, 1) grad_U L)`` (the penalty's curvature grows like
  ``beta n``, the data term's is at most 2 for unit-norm data): the positive part,
  rescaled to ``||U||_F = sqrt(K)``;
* if ``||U_new - U||_F / sqrt(K) < dual_gate``: ``y <- y + beta (U U^T 1 - 1)``.

``error = max(||U_new - U||_F / sqrt(K), ||U U^T 1 - 1|| / sqrt(n))`` (the reference code's
stopping rule). Data ``X`` is centred and of unit Frobenius norm, as for the Newton solver,
so ``alpha`` and ``beta`` are scale free. Each step costs ``O(n r d)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_positive

__all__ = ["nlr", "NLR", "NLRState", "nlr_start", "nlr_reference_options"]


class NLRState(NamedTuple):
    """State of `NLR`.

    Attributes:
        x: the factor ``U`` ``(n, r)``, ``U >= 0``, ``||U||_F^2 = K``.
        iter_num: int32, steps taken.
        error: ``max(||Delta U||_F / sqrt(K), ||U U^T 1 - 1|| / sqrt(n))`` (the
            change term counts as 1 before the first step).
        status: int32 `Status` (``SUCCESS`` throughout; the driver decides the rest).
        y: ``(n,)`` multipliers of the row-sum constraint ``U U^T 1 = 1``.
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    y: jax.Array


def _project(u, k):
    """``Pi(U)``: the positive part of ``U`` rescaled to ``||U||_F^2 = k``."""
    u = jnp.maximum(u, 0)
    norm = jnp.linalg.norm(u)
    return u * (jnp.sqrt(k) / jnp.where(norm > 0, norm, 1.0))


class NLR(AbstractSolver):
    r"""The NLR baseline as a solver Module; built by `nlr` (see its docstring for the math).

    ``x`` is the factor ``U`` (``n x r``, ``U >= 0``, ``||U||_F^2 = K``), ``args`` the
    centred unit-norm data ``(n, d)``; ``error`` is
    ``max(||Delta U|| / sqrt(K), ||U U^T 1 - 1|| / sqrt(n))``. No static fields: ``alpha``,
    ``beta``, ``dual_gate`` and ``fixed_step`` (`nlr`'s ``step``; 0: the relative step
    ``alpha / max(beta n, 1)``) are traced hyperparameters, so a sweep over them reuses
    one compilation.
    """

    alpha: Any = 0.5
    beta: Any = 0.01
    dual_gate: Any = 1e-3
    fixed_step: Any = 0.0

    def init(self, x0, args) -> NLRState:
        n = x0.shape[0]
        res = x0 @ (x0.T @ jnp.ones((n,), x0.dtype)) - 1.0
        # No step taken yet: the change term counts as 1 (so a feasible start still steps).
        err = jnp.maximum(jnp.linalg.norm(res) / jnp.sqrt(n), 1.0) + 0.0 * jnp.sum(args)
        return NLRState(
            x=x0,
            iter_num=jnp.int32(0),
            error=err,
            status=jnp.int32(Status.SUCCESS),
            y=jnp.zeros((n,), x0.dtype),
        )

    def step(self, state: NLRState, args) -> tuple[NLRState, None]:
        u = state.x
        dtype = u.dtype
        n = u.shape[0]
        k = jnp.sum(u * u)
        # Curvatures: the penalty's grows like beta n, the data term's is at most 2 (unit
        # norm). step > 0: an absolute step (the reference code's fixed alpha, rescaled to
        # unit data).
        beta = hyper(self.beta, dtype)
        rel = hyper(self.alpha, dtype) / jnp.maximum(beta * n, 1.0)
        alpha = jnp.where(jnp.asarray(self.fixed_step) > 0, hyper(self.fixed_step, dtype), rel)
        x = args
        ones = jnp.ones((n,), dtype)
        col_sums = u.T @ ones
        res = u @ col_sums - 1.0
        y_tilde = state.y + beta * res
        grad = -2.0 * x @ (x.T @ u) + jnp.outer(y_tilde, col_sums) + jnp.outer(ones, y_tilde @ u)
        u_new = _project(u - alpha * grad, k)
        change = jnp.linalg.norm(u_new - u) / jnp.sqrt(k)
        res_new = u_new @ (u_new.T @ ones) - 1.0
        gate = change < hyper(self.dual_gate, dtype)
        y = jnp.where(gate, state.y + beta * res_new, state.y)
        err = jnp.maximum(change, jnp.linalg.norm(res_new) / jnp.sqrt(n))
        return NLRState(u_new, state.iter_num + 1, err, state.status, y), None


def nlr(
    *, alpha: float = 0.5, beta: float = 0.01, dual_gate: float = 1e-3, step: float | None = None
) -> NLR:
    r"""The NLR baseline (projected gradient on the augmented Lagrangian), on the protocol.

    Paper: Zhuang, Chen, Yang, Zhang, ICLR 2024 (the first-order method of Xu et al. 2026's
    comparison). ``x`` is the factor ``U`` (``n x r``, ``U >= 0``, ``||U||_F^2 = K``; start
    from `jaxsolve.cluster.nlr_start`), ``args`` the centred unit-norm data.

    Args:
        alpha: primal step size, in units of ``1/max(beta n, 1)`` (the data has unit Frobenius
            norm). 0.5 leaves a margin: 0.7 diverges on the 1797 digits (K = 10), 0.8 on
            Gaussian mixtures.
        beta: augmented-Lagrangian penalty, relative to the unit-norm data term. The
            reference code's ``beta = 10`` acts on *raw* data, whose data term is
            ``S = ||X - mean||_F^2`` times ours (``S`` in the hundreds to thousands), so it
            corresponds to ``10 / S`` here (with its step ``1e-6`` as ``1e-6 S``:
            `nlr_reference_options`). The default 0.01 is the best of a grid
            ``beta in {0.003, ..., 30}`` x ``alpha in {0.3, ..., 0.9}`` on a 150-point
            mixture, iris, wine, breast_cancer and digits; ``beta = 10`` on unit-norm
            data over-weights the constraint and takes 10-100x more steps. Step counts
            against the reference settings: ``bench/results/cluster.md``.
        dual_gate: the dual step is taken once ``||Delta U|| / sqrt(K)`` drops below this.
        step: an absolute primal step size (replaces ``alpha / max(beta n, 1)``); used by
            `nlr_reference_options` to run the reference code's fixed step.
    """
    for name, val in (("alpha", alpha), ("beta", beta), ("dual_gate", dual_gate)):
        check_positive(name, val)
    if step is not None:
        check_positive("step", step)
    return NLR(
        alpha=alpha, beta=beta, dual_gate=dual_gate, fixed_step=0.0 if step is None else step
    )


def nlr_reference_options(X) -> dict:
    r"""The settings of the reference code ``BM_cluster.m`` (Zhuang et al.), on our scale.

    ``BM_cluster.m`` runs on the raw data ``X`` with ``r = 2K``, ``beta = 10``, a fixed
    step ``alpha = 1e-6``, the dual step once ``||Delta U||_F / sqrt(K) < 1e-3``, stop at
    ``max(||Delta U||_F / sqrt(K), ||U U^T 1 - 1|| / sqrt(n)) < 1e-6``, at most 50 000
    iterations (250 000 in a later version), from ``U = Pi(|randn(n, r)|)``. The solver
    works on ``X_c / sqrt(S)`` with ``S = ||X_c||_F^2`` (``X_c`` centred; the objective is
    unchanged by centring on the feasible set ``Z 1 = 1``). Dividing the raw augmented
    Lagrangian by ``S`` (and the multipliers ``y`` by ``S``) gives exactly our Lagrangian
    with ``beta / S`` and gradient ``1/S`` times the raw one, so the raw iteration is
    ours with ``beta = 10 / S`` and the absolute step ``1e-6 S``. Returns the keyword
    options of `nlr` (use ``rank = 2K``, ``max_steps = 50_000``, ``tol = 1e-6`` and
    `nlr_start` with ``kind="reference"``).
    """
    x = jnp.asarray(X)
    xc = x - jnp.mean(x, axis=0, keepdims=True)
    s = float(jnp.sum(xc * xc))
    if not s > 0:
        raise ValueError("X has no spread (all points equal): no reference scale")
    return {"beta": 10.0 / s, "step": 1e-6 * s}


def nlr_start(key, n: int, n_clusters: int, rank: int, dtype=None, *, kind: str = "feasible"):
    """A nonnegative start: ``U >= 0``, ``||U||_F^2 = K`` (``U U^T 1 = 1`` for ``"feasible"``).

    ``kind="reference"``: the reference code's ``U = Pi(|randn(n, r)|)`` (positive part,
    scaled to ``||U||_F^2 = K``; its row sums ``U U^T 1`` are about ``2K/pi``, not 1).

    For ``rank > K`` it is the lift of `jaxsolve.cluster.feasible_point` (random
    balanced groups, ``U_i = a e_{g(i)} + b 1``), the point the Newton solver starts
    from, so both methods start alike. (A uniform random ``U`` rescaled to
    ``||U||^2 = K`` has ``U U^T 1 ~ K``: on the 1797 digits the first penalty step then
    zeroes every entry.) For ``rank <= K``: uniform entries, rescaled to ``||U||^2 = K``.
    """
    from jaxsolve.cluster._problem import feasible_point, lift

    dtype = jnp.result_type(float) if dtype is None else jnp.dtype(dtype)
    if kind not in ("feasible", "reference"):
        raise ValueError(f"kind must be 'feasible' or 'reference', got {kind!r}")
    if kind == "reference":
        u = jnp.abs(jax.random.normal(key, (n, rank), dtype))
        return _project(u, jnp.asarray(n_clusters, dtype))
    if n_clusters < rank <= n:
        return lift(*feasible_point(key, n, n_clusters, rank, dtype))
    u = jax.random.uniform(key, (n, rank), dtype)
    return _project(u, jnp.asarray(n_clusters, dtype))
