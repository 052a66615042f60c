"""Riemannian gradient descent with Armijo backtracking (Absil, Mahony, Sepulchre 2008, 4.2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_positive
from jaxsolve.manifolds import Manifold, Product
from jaxsolve.riemannian._common import (
    backtrack,
    next_head,
    secant_step,
    start,
    validate,
    value_and_rgrad,
)

__all__ = ["gradient_descent", "GradientDescent", "GDState", "GDInfo"]


class GDState(NamedTuple):
    x: Any
    iter_num: jax.Array
    error: jax.Array  # Riemannian gradient norm at x
    status: jax.Array
    f: jax.Array
    grad: Any  # Riemannian gradient at x
    prev_f: jax.Array  # cost before the last step, per block (NaN before the first step)


class GDInfo(NamedTuple):
    f: jax.Array
    step_size: jax.Array  # ||alpha d||, summed over blocks
    evaluations: jax.Array  # cost evaluations of the line search(es)


def _initial_alpha(f0, prev_f, df0, norm_d, optimism, initial_step):
    # pymanopt/Manopt: the first trial step doubles the previous decrease ("optimism")
    # and falls back to initial_step / ||d|| on the first iteration.
    guess = optimism * 2.0 * (f0 - prev_f) / df0
    fallback = initial_step / norm_d
    return jnp.where(jnp.isfinite(guess) & (guess > 0), guess, fallback)


class GradientDescent(AbstractSolver):
    """Riemannian gradient descent (see `gradient_descent`).

    Static: ``cost``, ``manifold``, ``max_linesearch``, ``alternating``. Traced:
    ``initial_step``, ``contraction``, ``sufficient_decrease``, ``optimism``.
    """

    cost: Callable = eqx.field(static=True)
    manifold: Manifold = eqx.field(static=True)
    initial_step: Any = 1.0
    contraction: Any = 0.5
    sufficient_decrease: Any = 1e-4
    optimism: Any = 2.0
    max_linesearch: int = eqx.field(static=True, default=25)
    alternating: bool = eqx.field(static=True, default=False)

    def init(self, x0, args) -> GDState:
        head, f, _, g = start(self.cost, self.manifold, x0, args)
        nblocks = len(self.manifold) if self.alternating else 1
        return GDState(*head, f, g, jnp.full((nblocks,), jnp.nan, f.dtype))

    def step(self, state: GDState, args) -> tuple[GDState, GDInfo]:
        cost, manifold = self.cost, self.manifold
        c, contraction, optimism, initial_step = hyper(
            (self.sufficient_decrease, self.contraction, self.optimism, self.initial_step),
            state.x,
        )
        ls = dict(c=c, contraction=contraction, max_iter=self.max_linesearch)
        if not self.alternating:
            x, f0, g = state.x, state.f, state.grad
            norm_d = manifold.norm(x, g)
            d = optax.tree.scale(-1.0, g)
            df0 = -(norm_d**2)
            alpha0 = _initial_alpha(f0, state.prev_f[0], df0, norm_d, optimism, initial_step)
            alpha, x_new, f_new, evals, ok, strict = backtrack(
                cost, manifold, x, args, d, f0, df0, alpha0, **ls
            )
            alpha, x_new, f_new = jax.lax.cond(
                ok & ~strict,  # decrease below the rounding error of f: use derivatives
                lambda: secant_step(cost, manifold, x, args, d, df0, alpha),
                lambda: (alpha, x_new, f_new),
            )
            prev_f = state.prev_f.at[0].set(f0)
            step = alpha * norm_d
            failed = ~ok
        else:
            # Block Gauss-Seidel: one Armijo step per factor, the others held at their
            # latest values (the alternating scheme of weight-normalized sensing (arXiv 2510.01175)).
            x = list(state.x)
            f_cur = state.f
            prev_f, step, evals, failed = state.prev_f, 0.0, jnp.int32(0), jnp.asarray(False)
            for i, mi in enumerate(manifold.manifolds):

                def block_cost(xi, a, i=i, x=tuple(x)):
                    return cost(x[:i] + (xi,) + x[i + 1 :], a)

                fi, _, gi = value_and_rgrad(block_cost, mi, x[i], args)
                norm_d = mi.norm(x[i], gi)
                df0 = -(norm_d**2)
                alpha0 = _initial_alpha(fi, prev_f[i], df0, norm_d, optimism, initial_step)
                di = optax.tree.scale(-1.0, gi)
                alpha, xi, f_cur, k, ok, strict = backtrack(
                    block_cost, mi, x[i], args, di, fi, df0, alpha0, **ls
                )
                alpha, xi, f_cur = jax.lax.cond(
                    ok & ~strict,
                    lambda bc=block_cost, mi=mi, xi0=x[i], di=di, df0=df0, alpha=alpha: secant_step(
                        bc, mi, xi0, args, di, df0, alpha
                    ),
                    lambda alpha=alpha, xi=xi, f_cur=f_cur: (alpha, xi, f_cur),
                )
                # a block already stationary may legitimately not move
                failed = failed | (~ok & (norm_d > 0))
                prev_f = prev_f.at[i].set(fi)
                x[i] = xi
                step = step + alpha * norm_d
                evals = evals + k
            x_new, f_new = tuple(x), f_cur
            failed = failed & (step == 0)
        f_new, _, g_new = value_and_rgrad(cost, manifold, x_new, args)
        status = jnp.where(failed, jnp.int32(Status.BREAKDOWN), state.status)
        new = GDState(*next_head(state, manifold, x_new, g_new, status), f_new, g_new, prev_f)
        return new, GDInfo(f_new, step, evals)


def gradient_descent(
    cost,
    manifold,
    *,
    initial_step=1.0,
    contraction=0.5,
    sufficient_decrease=1e-4,
    optimism=2.0,
    max_linesearch: int = 25,
    alternating: bool = False,
) -> GradientDescent:
    r"""Riemannian steepest descent with Armijo backtracking.

    ``x_{k+1} = R_{x_k}(-alpha_k grad f(x_k))`` where ``grad f`` is the manifold's
    ``egrad_to_rgrad`` of the JAX gradient of ``cost(x, args)`` and ``alpha_k`` is the
    first of ``alpha0, contraction*alpha0, ...`` (at most ``max_linesearch`` trials,
    a bounded ``lax.while_loop``) with the Armijo decrease
    ``f(R(-alpha g)) <= f - sufficient_decrease * alpha * ||g||^2`` (Absil, Mahony and
    Sepulchre 2008, Algorithm 1). The first trial follows Manopt/pymanopt's
    ``linesearch``: ``alpha0 = optimism * 2 (f_k - f_{k-1}) / (-||g||^2)``, and
    ``initial_step / ||g||`` at the first step (and always when ``optimism=0``: that
    rule divides two cost differences, so its last digits follow the rounding of ``f``;
    ``optimism=0`` makes runs reproducible to the last bit across batched/unbatched
    evaluation). Near the minimizer, where the decrease
    falls below the rounding error of ``f`` (pymanopt stops there, at about
    ``sqrt(eps |f| L)`` in gradient norm), a step accepted only within a few ulps of slack
    is replaced by the secant root of the directional derivative, so the method keeps
    converging to small gradient norms.

    ``alternating=True`` (for a `Product`): one Armijo step
    per factor in turn, each with the others fixed at their newest values (block
    Gauss-Seidel, as the alternating updates of weight-normalized sensing (arXiv 2510.01175)).

    ``error`` is the Riemannian gradient norm. A line search that cannot decrease the
    cost sets ``Status.BREAKDOWN``.

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
    check_positive("optimism", optimism, strict=False)
    if isinstance(contraction, float) and contraction >= 1:
        raise ValueError(f"contraction must be in (0, 1), got {contraction}")
    if not isinstance(max_linesearch, int) or max_linesearch < 1:
        raise ValueError(f"max_linesearch must be a positive int, got {max_linesearch!r}")
    if alternating and not isinstance(manifold, Product):
        raise ValueError("alternating=True needs a Product manifold (one block per factor)")
    return GradientDescent(
        cost=cost,
        manifold=manifold,
        initial_step=initial_step,
        contraction=contraction,
        sufficient_decrease=sufficient_decrease,
        optimism=optimism,
        max_linesearch=int(max_linesearch),
        alternating=bool(alternating),
    )
