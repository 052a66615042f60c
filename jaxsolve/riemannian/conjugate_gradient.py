"""Riemannian nonlinear conjugate gradients (Absil, Mahony, Sepulchre 2008, 8.3; pymanopt)."""

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
    backtrack,
    next_head,
    secant_step,
    start,
    validate,
    value_and_rgrad,
)

__all__ = ["conjugate_gradient", "ConjugateGradient", "CGState", "CGInfo", "BETA_RULES"]

BETA_RULES = ("hestenes_stiefel", "polak_ribiere", "fletcher_reeves")


class CGState(NamedTuple):
    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    f: jax.Array
    grad: Any
    direction: Any
    next_alpha: jax.Array  # suggested first trial of the next line search (NaN: none)


class CGInfo(NamedTuple):
    f: jax.Array
    step_size: jax.Array
    beta: jax.Array
    evaluations: jax.Array


class ConjugateGradient(AbstractSolver):
    """Riemannian nonlinear conjugate gradient (see `conjugate_gradient`).

    Static: ``cost``, ``manifold``, ``beta_rule``, ``max_linesearch``. Traced:
    ``initial_step``, ``contraction``, ``sufficient_decrease``.
    """

    cost: Callable = eqx.field(static=True)
    manifold: Manifold = eqx.field(static=True)
    initial_step: Any = 1.0
    contraction: Any = 0.5
    sufficient_decrease: Any = 0.5
    beta_rule: str = eqx.field(static=True, default="hestenes_stiefel")
    max_linesearch: int = eqx.field(static=True, default=10)

    def init(self, x0, args) -> CGState:
        head, f, _, g = start(self.cost, self.manifold, x0, args)
        return CGState(*head, f, g, optax.tree.scale(-1.0, g), jnp.asarray(jnp.nan, f.dtype))

    def step(self, state: CGState, args) -> tuple[CGState, CGInfo]:
        cost, manifold, beta_rule = self.cost, self.manifold, self.beta_rule
        initial_step, c, contraction = hyper(
            (self.initial_step, self.sufficient_decrease, self.contraction), state.x
        )
        x, f0, g, d = state.x, state.f, state.grad, state.direction
        gg = manifold.inner(x, g, g)
        df0 = manifold.inner(x, g, d)
        restart = df0 >= 0  # not a descent direction: restart along -grad
        d = optax.tree.where(restart, optax.tree.scale(-1.0, g), d)
        df0 = jnp.where(restart, -gg, df0)
        norm_d = manifold.norm(x, d)
        alpha0 = jnp.where(jnp.isnan(state.next_alpha), initial_step / norm_d, state.next_alpha)
        alpha, x_new, f_new, evals, ok, strict = backtrack(
            cost,
            manifold,
            x,
            args,
            d,
            f0,
            df0,
            alpha0,
            c=c,
            contraction=contraction,
            max_iter=self.max_linesearch,
        )
        # pymanopt's adaptive line search: keep pace after one backtrack, else speed up.
        next_alpha = jnp.where(evals == 2, alpha, 2.0 * alpha)
        # Below the rounding error of f (accepted only within the slack), the step comes
        # from directional derivatives instead (see secant_step).
        noisy = ok & ~strict
        alpha, x_new, f_new = jax.lax.cond(
            noisy,
            lambda: secant_step(cost, manifold, x, args, d, df0, alpha),
            lambda: (alpha, x_new, f_new),
        )
        f_new, _, g_new = value_and_rgrad(cost, manifold, x_new, args)
        gg_new = manifold.inner(x_new, g_new, g_new)
        g_old = manifold.transport(x, x_new, g)
        d_old = manifold.transport(x, x_new, d)
        if beta_rule == "fletcher_reeves":
            num, den = gg_new, gg
        else:
            diff = optax.tree.sub(g_new, g_old)
            num = manifold.inner(x_new, g_new, diff)
            den = manifold.inner(x_new, diff, d_old) if beta_rule == "hestenes_stiefel" else gg
        beta = jnp.where(den != 0, num / jnp.where(den != 0, den, 1.0), 0.0)
        beta = jnp.maximum(beta, 0.0) if beta_rule != "fletcher_reeves" else beta
        # A failed line search restarts from steepest descent once; failing along -grad
        # too is a breakdown.
        beta = jnp.where(ok, beta, 0.0)
        next_alpha = jnp.where(ok, next_alpha, jnp.nan)
        d_new = optax.tree.add_scale(optax.tree.scale(-1.0, g_new), beta, d_old)
        # d was -grad (the first step, or after a failure)
        steepest = restart | jnp.isnan(state.next_alpha)
        status = jnp.where(~ok & steepest, Status.BREAKDOWN, state.status)
        head = next_head(state, manifold, x_new, g_new, status)
        new = CGState(*head, f_new, g_new, d_new, next_alpha)
        return new, CGInfo(f_new, alpha * norm_d, beta, evals)


def conjugate_gradient(
    cost,
    manifold,
    *,
    beta_rule: str = "hestenes_stiefel",
    initial_step=1.0,
    contraction=0.5,
    sufficient_decrease=0.5,
    max_linesearch: int = 10,
) -> ConjugateGradient:
    r"""Riemannian nonlinear conjugate gradient (pymanopt ``ConjugateGradient`` semantics).

    ``d_{k+1} = -grad f(x_{k+1}) + beta_k T_{x_k -> x_{k+1}}(d_k)`` with the projection
    vector transport ``T`` of the manifold and ``beta`` by Hestenes-Stiefel (default,
    ``max(0, <g+, g+ - Tg> / <g+ - Tg, Td>)``), Polak-Ribiere+ or Fletcher-Reeves
    (Absil, Mahony and Sepulchre 2008, section 8.3; Sato 2021). A non-descent direction
    restarts along ``-grad``. The step is found by pymanopt's adaptive Armijo line
    search (``sufficient_decrease=0.5``, ``contraction=0.5``, at most
    ``max_linesearch`` trials; the next first trial is the accepted ``alpha`` after one
    backtrack, else ``2 alpha``). Below the rounding error of ``f`` the step comes from the secant root of
    the directional derivative instead (pymanopt stalls there). ``error`` is the Riemannian gradient norm; a failed
    line search along ``-grad`` sets ``Status.BREAKDOWN``.

    The start ``x0`` must lie on ``manifold``: it is checked, not projected (off it,
    ``manifold.residual(x0) > 10 sqrt(eps)``, e.g. ``x0 = 0`` on a sphere, the run ends
    ``BREAKDOWN`` at once).
    """
    validate(
        cost,
        manifold,
        initial_step=initial_step,
        contraction=contraction,
        sufficient_decrease=sufficient_decrease,
    )
    if beta_rule not in BETA_RULES:
        raise ValueError(f"beta_rule must be one of {BETA_RULES}, got {beta_rule!r}")
    if not isinstance(max_linesearch, int) or max_linesearch < 1:
        raise ValueError(f"max_linesearch must be a positive int, got {max_linesearch!r}")
    return ConjugateGradient(
        cost=cost,
        manifold=manifold,
        initial_step=initial_step,
        contraction=contraction,
        sufficient_decrease=sufficient_decrease,
        beta_rule=beta_rule,
        max_linesearch=int(max_linesearch),
    )
