"""Plain Burer-Monteiro gradient descent for overparameterized matrix sensing (the baseline)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_positive
from jaxsolve.sensing.problem import adjoint_residual, check_measurements, sensing_loss

__all__ = ["burer_monteiro", "BurerMonteiro", "BMState", "small_initial_point"]


class BMState(NamedTuple):
    x: jax.Array  # the factor Y (m x r)
    iter_num: jax.Array
    error: jax.Array  # gradient norm
    status: jax.Array
    f: jax.Array


class BurerMonteiro(AbstractSolver):
    """Gradient descent on the Burer-Monteiro factor (see `burer_monteiro`).

    Nothing static; ``stepsize`` is traced.
    """

    stepsize: Any = 0.25

    def init(self, y0, meas) -> BMState:
        if y0.ndim != 2:
            raise ValueError(f"y0 must be an (m, r) factor, got shape {y0.shape}")
        check_measurements(meas, y0.shape[0])
        s = adjoint_residual(y0 @ y0.T, meas)
        f = sensing_loss(y0 @ y0.T, meas)
        # Y = 0 is a stationary point (the gradient 2 A*(r) Y vanishes) that gradient
        # descent never leaves, with a gradient norm of 0 that would read as SUCCESS at
        # Z = 0. Such a start is refused as BREAKDOWN (use small_initial_point).
        ok = jnp.any(y0 != 0)
        status = jnp.where(ok, jnp.int32(Status.SUCCESS), jnp.int32(Status.BREAKDOWN))
        return BMState(y0, jnp.int32(0), jnp.linalg.norm(s @ y0), status.astype(jnp.int32), f)

    def step(self, state: BMState, meas) -> tuple[BMState, None]:
        y = state.x
        s = adjoint_residual(y @ y.T, meas)
        y = y - hyper(self.stepsize, y) * (s @ y)
        s = adjoint_residual(y @ y.T, meas)
        f = sensing_loss(y @ y.T, meas)
        return BMState(y, state.iter_num + 1, jnp.linalg.norm(s @ y), state.status, f), None


def burer_monteiro(*, stepsize=0.25) -> BurerMonteiro:
    r"""Gradient descent on the Burer-Monteiro factor: ``Y+ = Y - eta sym(M^*(M(YY^T) - y)) Y``.

    The gradient of ``f(Y) = 1/4 ||M(Y Y^T) - y||^2``. With overparameterization (``r``
    above the true rank) and small random initialization it converges only sublinearly
    (Xiong, Ding, Du, ICLR 2024: an ``Omega(1/T^2)`` lower bound), the baseline arXiv 2510.01175
    compares weight normalization against. ``error`` is the gradient norm.

    A zero start (a stationary point gradient descent never leaves) ends ``BREAKDOWN``.
    """
    check_positive("stepsize", stepsize)
    return BurerMonteiro(stepsize=stepsize)


def small_initial_point(key, m: int, r: int, scale: float = 1e-3, dtype=None):
    """``Y0 = scale * N(0, 1/m)``: the small initialization plain GD needs."""
    dtype = jnp.result_type(float) if dtype is None else dtype
    return scale * jax.random.normal(key, (m, r), dtype) / jnp.sqrt(m)
