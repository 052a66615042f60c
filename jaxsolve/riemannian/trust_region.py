"""Riemannian trust-region method with truncated CG (Absil, Baker, Gallivan 2007; Manopt)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.manifolds import Manifold
from jaxsolve.riemannian._common import (
    accept_or_keep,
    hessian_operator,
    next_head,
    start,
    validate,
)

__all__ = ["trust_region", "TrustRegion", "TRState", "TRInfo", "TCG_STOP_REASONS"]

# Stop codes of the truncated CG subproblem solver (pymanopt's numbering).
NEGATIVE_CURVATURE, EXCEEDED_TR, TARGET_LINEAR, TARGET_SUPERLINEAR, MAX_INNER, MODEL_INCREASED = (
    range(6)
)
TCG_STOP_REASONS = (
    "negative curvature",
    "exceeded trust region",
    "reached target residual (linear)",
    "reached target residual (superlinear)",
    "maximum inner iterations",
    "model increased",
)


class TRState(NamedTuple):
    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    f: jax.Array
    egrad: Any
    grad: Any
    radius: jax.Array


class TRInfo(NamedTuple):
    f: jax.Array
    rho: jax.Array
    accepted: jax.Array
    inner_iterations: jax.Array
    inner_stop: jax.Array  # index into TCG_STOP_REASONS


def _tcg(manifold, x, g, hess, radius, theta, kappa, *, min_inner, max_inner):
    """Steihaug-Toint truncated CG on ``min <g, s> + 1/2 <s, H s>``, ``||s|| <= radius``.

    A line-for-line port of pymanopt's ``_truncated_conjugate_gradient`` (no
    preconditioner, zero start) as a bounded ``lax.while_loop``.
    """
    inner = lambda a, b: manifold.inner(x, a, b)
    zero = manifold.zero_tangent(x)
    r_r = inner(g, g)
    norm_r0 = jnp.sqrt(r_r)
    dt = r_r.dtype
    # carry: j, eta, Heta, r, z_r, delta, e_Pe, e_Pd, d_Pd, model, stop
    init = (
        jnp.int32(0),
        zero,
        zero,
        g,
        r_r,
        optax.tree.scale(-1.0, g),
        jnp.zeros((), dt),
        jnp.zeros((), dt),
        r_r,
        jnp.zeros((), dt),
        jnp.int32(-1),
    )

    def cond(c):
        return (c[0] < max_inner) & (c[-1] < 0)

    def body(c):
        j, eta, heta, r, z_r, delta, e_pe, e_pd, d_pd, model, _ = c
        hdelta = hess(delta)
        d_hd = inner(delta, hdelta)
        alpha = z_r / jnp.where(d_hd != 0, d_hd, 1.0)
        e_pe_new = jnp.where(d_hd != 0, e_pe + 2 * alpha * e_pd + alpha**2 * d_pd, e_pe)
        boundary = (d_hd <= 0) | (e_pe_new >= radius**2)
        tau = (-e_pd + jnp.sqrt(jnp.maximum(e_pd * e_pd + d_pd * (radius**2 - e_pe), 0))) / d_pd
        eta_b = optax.tree.add_scale(eta, tau, delta)
        heta_b = optax.tree.add_scale(heta, tau, hdelta)
        stop_b = jnp.where(d_hd <= 0, NEGATIVE_CURVATURE, EXCEEDED_TR)

        new_eta = optax.tree.add_scale(eta, alpha, delta)
        new_heta = optax.tree.add_scale(heta, alpha, hdelta)
        new_model = inner(new_eta, g) + 0.5 * inner(new_eta, new_heta)
        increased = new_model >= model
        r_new = optax.tree.add_scale(r, alpha, hdelta)
        rr_new = inner(r_new, r_new)
        norm_r = jnp.sqrt(rr_new)
        target = (j >= min_inner) & (norm_r <= norm_r0 * jnp.minimum(norm_r0**theta, kappa))
        stop_t = jnp.where(kappa < norm_r0**theta, TARGET_LINEAR, TARGET_SUPERLINEAR)
        beta = rr_new / z_r
        delta_new = manifold.proj(
            x, optax.tree.add_scale(optax.tree.scale(-1.0, r_new), beta, delta)
        )
        e_pd_new = beta * (e_pd + alpha * d_pd)
        d_pd_new = rr_new + beta * beta * d_pd

        interior = ~boundary & ~increased
        sel = lambda a, b: optax.tree.where(interior, a, b)
        eta_out = optax.tree.where(boundary, eta_b, sel(new_eta, eta))
        heta_out = optax.tree.where(boundary, heta_b, sel(new_heta, heta))
        stop = jnp.where(
            boundary, stop_b, jnp.where(increased, MODEL_INCREASED, jnp.where(target, stop_t, -1))
        ).astype(jnp.int32)
        return (
            j + 1,
            eta_out,
            heta_out,
            sel(r_new, r),
            jnp.where(interior, rr_new, z_r),
            sel(delta_new, delta),
            jnp.where(interior, e_pe_new, e_pe),
            jnp.where(interior, e_pd_new, e_pd),
            jnp.where(interior, d_pd_new, d_pd),
            jnp.where(interior, new_model, model),
            stop,
        )

    out = jax.lax.while_loop(cond, body, init)
    j, eta, heta, stop = out[0], out[1], out[2], out[-1]
    stop = jnp.where(stop < 0, MAX_INNER, stop).astype(jnp.int32)
    return eta, heta, j, stop


class TrustRegion(AbstractSolver):
    """Riemannian trust region with truncated CG (see `trust_region`).

    Static: ``cost``, ``manifold``, ``min_inner``, ``max_inner``. Traced:
    ``max_radius``, ``initial_radius``, ``kappa``, ``theta``, ``rho_prime``,
    ``rho_regularization``.
    """

    cost: Callable = eqx.field(static=True)
    manifold: Manifold = eqx.field(static=True)
    max_radius: Any
    initial_radius: Any
    kappa: Any = 0.1
    theta: Any = 1.0
    rho_prime: Any = 0.1
    rho_regularization: Any = 1e3
    min_inner: int = eqx.field(static=True, default=1)
    max_inner: int = eqx.field(static=True, default=1)

    def init(self, x0, args) -> TRState:
        head, f, eg, g = start(self.cost, self.manifold, x0, args)
        return TRState(*head, f, eg, g, hyper(self.initial_radius, x0))

    def step(self, state: TRState, args) -> tuple[TRState, TRInfo]:
        cost, manifold = self.cost, self.manifold
        theta, kappa, rho_reg, max_radius, rho_prime = hyper(
            (self.theta, self.kappa, self.rho_regularization, self.max_radius, self.rho_prime),
            state.x,
        )
        x, f, g, radius = state.x, state.f, state.grad, state.radius
        hess = hessian_operator(cost, manifold, x, args, state.egrad)
        eta, heta, nit, stop = _tcg(
            manifold,
            x,
            g,
            hess,
            radius,
            theta,
            kappa,
            min_inner=self.min_inner,
            max_inner=self.max_inner,
        )
        x_prop = manifold.retract(x, eta)
        f_prop = cost(x_prop, args)
        reg = jnp.maximum(1.0, jnp.abs(f)) * jnp.finfo(f.dtype).eps * rho_reg
        rhonum = f - f_prop + reg
        rhoden = -manifold.inner(x, g, eta) - 0.5 * manifold.inner(x, eta, heta) + reg
        model_decreased = rhoden >= 0
        rho = rhonum / rhoden
        shrink = (rho < 0.25) | ~model_decreased | jnp.isnan(rho)
        grow = (rho > 0.75) & ((stop == NEGATIVE_CURVATURE) | (stop == EXCEEDED_TR))
        radius = jnp.where(
            shrink, radius / 4, jnp.where(grow, jnp.minimum(2 * radius, max_radius), radius)
        )
        accept = model_decreased & (rho > rho_prime)
        x_new, f_new, eg_new, g_new = accept_or_keep(accept, cost, manifold, args, x_prop, state)
        # a radius that underflowed can never produce a step again
        status = jnp.where(radius <= jnp.finfo(f.dtype).tiny, Status.BREAKDOWN, state.status)
        new = TRState(
            *next_head(state, manifold, x_new, g_new, status), f_new, eg_new, g_new, radius
        )
        return new, TRInfo(f_new, rho, accept, nit, stop)


def trust_region(
    cost,
    manifold,
    *,
    max_radius=None,
    initial_radius=None,
    kappa=0.1,
    theta=1.0,
    rho_prime=0.1,
    rho_regularization=1e3,
    min_inner: int = 1,
    max_inner: int | None = None,
) -> TrustRegion:
    r"""Riemannian trust-region method (RTR) with a truncated-CG subproblem solver.

    Each step approximately solves ``min_s f + <g, s> + 1/2 <s, Hess f(x)[s]>`` over
    ``||s||_x <= Delta`` with Steihaug-Toint truncated CG (stops on negative curvature,
    at the boundary, when the model increases, or when ``||r|| <= ||r_0||
    min(||r_0||^theta, kappa)``: superlinear local rate for ``theta = 1``), then accepts
    ``R_x(s)`` if ``rho = (f - f(R_x(s))) / (model decrease) > rho_prime`` and updates
    ``Delta`` (``/4`` if ``rho < 1/4``; ``x2`` up to ``max_radius`` if ``rho > 3/4`` and
    the step hit the boundary). Absil, Baker and Gallivan (2007), "Trust-region methods
    on Riemannian manifolds", FoCM; the defaults and the ``rho`` regularization follow
    Manopt/pymanopt (``max_radius = typical_dist``, ``initial_radius = max_radius / 8``,
    ``max_inner = dim``). Hessian-vector products are ``jvp`` of ``jax.grad(cost)``,
    linearized once per outer step, mapped by ``ehess_to_rhess``.

    With a first-order retraction the model is second order only at critical points,
    so local superlinear convergence needs a second-order retraction (polar Stiefel,
    sphere normalization ...) or holds asymptotically.

    The start ``x0`` must lie on ``manifold``: it is checked, not projected (off it,
    ``manifold.residual(x0) > 10 sqrt(eps)``, e.g. ``x0 = 0`` on a sphere, the run ends
    ``BREAKDOWN`` at once).
    """
    validate(
        cost,
        manifold,
        max_radius=max_radius,
        initial_radius=initial_radius,
        kappa=kappa,
        theta=theta,
        rho_prime=rho_prime,
        rho_regularization=rho_regularization,
    )
    if max_radius is None:
        max_radius = manifold.typical_dist
    if initial_radius is None:
        initial_radius = max_radius / 8
    if max_inner is None:
        max_inner = manifold.dim
    for name, v in (("min_inner", min_inner), ("max_inner", max_inner)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return TrustRegion(
        cost=cost,
        manifold=manifold,
        max_radius=max_radius,
        initial_radius=initial_radius,
        kappa=kappa,
        theta=theta,
        rho_prime=rho_prime,
        rho_regularization=rho_regularization,
        min_inner=int(min_inner),
        max_inner=max(1, int(max_inner)),
    )
