r"""Ruiz equilibration of a QP and the scaled data FlexQP iterates on.

FlexQP (`jaxsolve.qp.flexqp`) runs on ``Pb = c D P D``, ``qb = c D q``, ``Ab = E A D``,
``lb = E l``, ``ub = E u`` with positive diagonal ``D`` (variables), ``E`` (rows) and a
cost scale ``c`` from modified Ruiz equilibration of the KKT matrix ``[P A'; A 0]``
(as OSQP, Stellato et al., 2020). A scaled iterate ``(xs, zs, ys)`` is
``(x / D, E z, c y / E)`` in the problem's units.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.qp.problem import QP, interval_distance

__all__ = [
    "Scaled",
    "amax",
    "prepare_scaled",
    "row_violation",
    "scaled_with",
    "sigma_floor",
    "unscale",
]

# Ruiz factors are clipped to [_MIN_SCALING, _MAX_SCALING]; a norm below the floor
# (an empty or zero row/column) is left unscaled.
_MIN_SCALING, _MAX_SCALING = 1e-4, 1e4


class Scaled(NamedTuple):
    """Ruiz-equilibrated data of one QP (leaves of shape ``(n, n)``, ``(n,)``, ``(m, n)``,
    ``(m,)`` or scalar, in the QP's dtype; a batch adds a leading axis).

    Attributes:
        P, q, A, l, u: the scaled problem ``c D P D``, ``c D q``, ``E A D``, ``E l``,
            ``E u``.
        D: ``(n,)`` variable scaling. E: ``(m,)`` row scaling. c: scalar cost scaling.
        lo, up: the user's bounds ``l``, ``u`` (violations are measured in user units).
        eq: bool ``(m,)``, equality rows (``|u - l| <= 1e-4 max(1, |u|)``).
        free: bool ``(m,)``, rows with both bounds infinite.
        sigma: the x-update's proximal weight (``K(rho) = P + sigma I + A' R A``).
        anorm: ``(m,)``, ``||a_i||_inf`` of each row of the user's ``A`` (the row's own
            scale in the residuals).
    """

    P: jax.Array
    q: jax.Array
    A: jax.Array
    l: jax.Array
    u: jax.Array
    D: jax.Array
    E: jax.Array
    c: jax.Array
    lo: jax.Array
    up: jax.Array
    eq: jax.Array
    free: jax.Array
    sigma: jax.Array
    anorm: jax.Array


def amax(v):
    """``max_i |v_i|`` (0 for an empty ``v``)."""
    return jnp.max(jnp.abs(v), initial=0.0)


def _limit(v):
    """Ruiz norms clipped to ``_MAX_SCALING``; those below ``_MIN_SCALING`` become 1."""
    return jnp.where(v < _MIN_SCALING, 1.0, jnp.minimum(v, _MAX_SCALING))


def _ruiz(P, q, A, iters):
    """Modified Ruiz equilibration of [P A'; A 0] plus cost scaling (as OSQP).

    Returns the factors ``(D, E, c)`` (``Pb = c D P D``, ``Ab = E A D``). Only the
    magnitudes of the scaled matrices enter the factors, and ``|a b| = |a| |b|`` holds
    exactly in floating point, so the passes scale ``|P|`` and ``|A|`` (taken once) with
    the same products in the same order as scaling ``P`` and ``A`` themselves: the
    result is bit-for-bit that of the textbook loop without an ``abs`` pass over both
    matrices in every Ruiz pass.
    """
    n, m = P.shape[0], A.shape[0]
    D = jnp.ones((n,), P.dtype)
    E = jnp.ones((m,), P.dtype)
    c = jnp.ones((), P.dtype)
    aP, aA = jnp.abs(P), jnp.abs(A)

    def body(_, carry):
        aP, aA, q, D, E, c = carry
        col = jnp.maximum(jnp.max(aP, axis=0), jnp.max(aA, axis=0, initial=0.0))
        row = jnp.max(aA, axis=1, initial=0.0)
        dx = 1.0 / jnp.sqrt(_limit(col))
        dz = 1.0 / jnp.sqrt(_limit(row))
        aP = dx[:, None] * aP * dx[None, :]
        aA = dz[:, None] * aA * dx[None, :]
        q = dx * q
        D, E = D * dx, E * dz
        cost = jnp.maximum(jnp.mean(jnp.max(aP, axis=0)), amax(q))
        ct = 1.0 / _limit(cost)
        return aP * ct, aA, q * ct, D, E, c * ct

    carry = jax.lax.fori_loop(0, iters, body, (aP, aA, q, D, E, c))
    return carry[3:]


def sigma_floor(hparams, dtype):
    """The proximal weight ``max(hparams.sigma, 50 eps)`` (``hparams``: FlexQP's hyperparameters),
    so that ``P + sigma I`` stays positive definite in ``dtype``."""
    return jnp.maximum(hparams.sigma, 50 * jnp.finfo(dtype).eps)


def prepare_scaled(qp: QP, hparams, scaling_iters):
    """The `Scaled` data of ``qp`` after ``scaling_iters`` Ruiz passes (``0``: ``D = E = 1``,
    ``c = 1``); ``hparams`` supplies ``sigma``. The factors carry no derivative."""
    P, q, A = qp.P, qp.q, qp.A
    D, E, c = jax.lax.stop_gradient(_ruiz(*jax.lax.stop_gradient((P, q, A)), scaling_iters))
    return scaled_with(qp, hparams, D, E, c)


def scaled_with(qp: QP, hparams, D, E, c):
    """`Scaled` data of ``qp`` for given Ruiz factors ``(D, E, c)`` (computed once by a
    caller that carries them, as Deep FlexQP does)."""
    P, q, A, l, u = qp
    dtype = q.dtype
    # Rescale with the (constant) factors so derivatives flow to the data (unrolling).
    Ps = c * D[:, None] * P * D[None, :]
    qs = c * D * q
    As = E[:, None] * A * D[None, :]
    ls, us = E * l, E * u
    eq = jnp.isfinite(l) & jnp.isfinite(u) & (jnp.abs(u - l) <= 1e-4 * jnp.maximum(1.0, jnp.abs(u)))
    free = ~jnp.isfinite(l) & ~jnp.isfinite(u)
    anorm = jax.lax.stop_gradient(_amax_rows(A))
    return Scaled(Ps, qs, As, ls, us, D, E, c, l, u, eq, free, sigma_floor(hparams, dtype), anorm)


def _amax_rows(A):
    """``||a_i||_inf`` of each row of ``A`` (0 for an empty row)."""
    return jnp.max(jnp.abs(A), axis=-1, initial=0.0)


def unscale(d: Scaled, xs, zs, ys):
    """Scaled ``(x, z, y)`` back in the problem's units: ``(D x, z / E, E y / c)``."""
    return d.D * xs, zs / d.E, d.E * ys / d.c


def row_violation(d: Scaled, Ax):
    """Per-row violation ``dist(A x, [l, u])`` in user units from the scaled product
    ``Ax = E A D xs``."""
    return interval_distance(Ax / d.E, d.lo, d.up)
