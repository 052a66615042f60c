"""Weight-normalized overparameterized matrix sensing with alternating Riemannian GD (arXiv 2510.01175)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_positive
from jaxsolve.manifolds import Stiefel
from jaxsolve.manifolds.base import sym
from jaxsolve.sensing.problem import adjoint_residual, check_measurements, sensing_loss

__all__ = ["weight_normalized", "WeightNormalized", "WNState", "WNInfo", "initial_point"]


class WNState(NamedTuple):
    x: Any  # (X, Theta): direction on St(m, r), symmetric magnitude r x r
    iter_num: jax.Array
    error: jax.Array  # Riemannian gradient norm of f on St(m, r) x S^r
    status: jax.Array
    f: jax.Array


class WNInfo(NamedTuple):
    f: jax.Array


def _grads(x, theta, meas):
    s = adjoint_residual(x @ theta @ x.T, meas)
    gx = s @ x @ theta
    gx = gx - x @ sym(x.T @ gx)  # Stiefel projection
    gt = 0.5 * sym(x.T @ s @ x)
    return gx, gt


def _gnorm(x, theta, meas):
    gx, gt = _grads(x, theta, meas)
    return jnp.sqrt(jnp.sum(gx * gx) + jnp.sum(gt * gt))


class WeightNormalized(AbstractSolver):
    """Alternating Riemannian GD for weight-normalized sensing (see `weight_normalized`).

    Nothing static; ``direction_step`` and ``magnitude_step`` are traced.
    """

    direction_step: Any = 0.5
    magnitude_step: Any = 2.0

    def init(self, x0, meas) -> WNState:
        if not isinstance(x0, tuple) or len(x0) != 2:
            raise ValueError("x0 must be a pair (X, Theta); see jaxsolve.sensing.initial_point")
        x, theta = x0
        if x.ndim != 2 or theta.shape != (x.shape[1], x.shape[1]):
            raise ValueError(
                f"x0 = (X, Theta) needs X (m, r) and Theta (r, r), got {x.shape}, {theta.shape}"
            )
        check_measurements(meas, x.shape[0])
        f = sensing_loss(x @ theta @ x.T, meas)
        # X must lie on the Stiefel manifold (checked, not projected): X = 0 (or any X with
        # non-orthonormal columns) has a zero or meaningless Riemannian gradient, so a run
        # from X = 0 would read SUCCESS at Z = 0. Off it: BREAKDOWN at once.
        eps = jnp.finfo(x.dtype).eps
        on = jnp.max(jnp.abs(x.T @ x - jnp.eye(x.shape[1], dtype=x.dtype))) <= 10 * jnp.sqrt(eps)
        status = jnp.where(on, jnp.int32(Status.SUCCESS), jnp.int32(Status.BREAKDOWN))
        return WNState(x0, jnp.int32(0), _gnorm(x, theta, meas), status.astype(jnp.int32), f)

    def step(self, state: WNState, meas) -> tuple[WNState, WNInfo]:
        x, theta = state.x
        eta, mu = hyper((self.direction_step, self.magnitude_step), x)
        gx, _ = _grads(x, theta, meas)
        # polar retraction: (X - eta G)(I + eta^2 G^T G)^{-1/2} (X^T G is skew)
        x_new = Stiefel(*x.shape).retract(x, -eta * gx)
        s = adjoint_residual(x_new @ theta @ x_new.T, meas)
        theta_new = theta - mu * 0.5 * sym(x_new.T @ s @ x_new)
        f = sensing_loss(x_new @ theta_new @ x_new.T, meas)
        err = _gnorm(x_new, theta_new, meas)
        new = WNState((x_new, theta_new), state.iter_num + 1, err, state.status, f)
        return new, WNInfo(f)


def weight_normalized(*, direction_step=0.5, magnitude_step=2.0) -> WeightNormalized:
    r"""Weight-normalized matrix sensing by alternating Riemannian gradient descent.

    Wei, Zhang, Li, He ("On the benefits of weight normalization for
    overparameterized matrix sensing", ICLR 2026, Algorithm 1). The Burer-Monteiro factor
    ``Y = X Theta^{1/2}`` is split into a direction ``X`` on the Stiefel manifold
    ``St(m, r)`` and a symmetric magnitude ``Theta in S^r``; with
    ``f(X, Theta) = 1/4 ||M(X Theta X^T) - y||^2`` and ``S = sym(M^*(M(X Theta X^T) - y))``:

    * ``G = proj_X(S X Theta)``, ``X+ = (X - eta G)(I + eta^2 G^T G)^{-1/2}`` (polar retraction),
    * ``Theta+ = Theta - mu/2 X+^T S(X+, Theta) X+`` (``mu = 2`` as in the paper's theorem).

    Problem data ``args`` is `GaussianMeasurements` or the
    memory-light `GramMeasurements`; ``x = (X, Theta)``
    (see `initial_point`). ``error`` is the Riemannian gradient norm on
    ``St(m, r) x S^r``. The paper proves a saddle-to-saddle phase followed by a linear
    rate that improves with the overparameterization ``r > r_A``; plain Burer-Monteiro GD
    (`burer_monteiro`) is sublinear there.

    Measured (``bench/sensing.py``, m = 10, r_A = 3): ``direction_step`` is stable up to
    about 2 for every ``r`` (best 1.9); the linear tail's rate is about
    ``direction_step * sigma_min(A)^2`` for every ``r < m``, so larger ``r`` shortens the
    saddle phase, not the tail; full rank ``r = m`` converges in a few steps. Plain GD from
    a tiny initialization (1e-6) has a rate ~ ``sigma_min(A)`` and can be faster.

    The start's direction ``X`` must have orthonormal columns: it is checked, not
    projected (off the Stiefel manifold, e.g. ``X = 0``, the run ends ``BREAKDOWN``).
    """
    check_positive("direction_step", direction_step)
    check_positive("magnitude_step", magnitude_step)
    return WeightNormalized(direction_step=direction_step, magnitude_step=magnitude_step)


def initial_point(key, m: int, r: int, dtype=None):
    """The initialization of Wei et al. (arXiv 2510.01175): ``X0 = Z (Z^T Z)^{-1/2}`` for Gaussian ``Z``, ``Theta0 = 0``."""
    if r > m:
        raise ValueError(f"r must be <= m, got r={r}, m={m}")
    x = Stiefel(m, r).random_point(key, dtype)
    return x, jnp.zeros((r, r), x.dtype)
