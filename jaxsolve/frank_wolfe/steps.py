r"""Step-size rules for Frank-Wolfe-type updates $x^+ = x + \gamma d$, $0 \le \gamma \le \gamma_{\max}$.

All rules see the *slope* $s = -\langle \nabla f(x), d\rangle \ge 0$ (the FW gap for a
FW direction) and $\|d\|^2$; each returns 0 when $s \le 0$ or $d = 0$
(nothing to gain: the step must be 0, never NaN).

* ``open_loop``: $\gamma_t = \min(\ell/(t+\ell), \gamma_{\max})$, $\ell = 2$
  (Dunn & Harshbarger 1978).
* ``short``: $\gamma = \min(s/(L\|d\|^2), \gamma_{\max})$, the minimizer of the
  smoothness upper bound $f(x) - \gamma s + \gamma^2 L\|d\|^2/2$ (Demyanov-Rubinov).
* ``backtracking``: the adaptive rule of Pedregosa, Négiar, Askari & Jaggi, "Linearly
  convergent Frank-Wolfe with backtracking line-search" (AISTATS 2020), Alg. 2: start
  from $\eta L_{t-1}$ and double $L$ until the sufficient-decrease test
  $f(x + \gamma d) \le f(x) - \gamma s + \gamma^2 L \|d\|^2/2$ holds.
* ``exact``: exact line search for quadratic ``f``: $\gamma = \min(s / d^\top H d,
  \gamma_{\max})$ with $d^\top H d$ from one Hessian-vector product (for a
  non-quadratic ``f`` this is a Newton step on $\gamma$, not a line search).
* ``primal_dual``: the generalized (primal-dual) short step, `primal_dual_short_step`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "STEP_RULES",
    "open_loop_step",
    "short_step",
    "primal_dual_short_step",
    "exact_quadratic_step",
    "backtracking_step",
]

STEP_RULES = ("open_loop", "short", "backtracking", "exact", "primal_dual")


def _safe_div(a, b):
    return jnp.where(b > 0, a / jnp.where(b > 0, b, 1.0), 0.0)


def open_loop_step(t, max_step=1.0, ell=2.0):
    r"""Open-loop step $\min(\ell/(t + \ell), \gamma_{\max})$ at iteration ``t`` (from 0)."""
    t = jnp.asarray(t)
    ell = jnp.asarray(ell, jnp.result_type(max_step, float))
    return jnp.minimum(ell / (t.astype(ell.dtype) + ell), max_step)


def short_step(slope, sq_norm, lipschitz, max_step=1.0):
    r"""Short step $\mathrm{clip}(s/(L\|d\|^2), 0, \gamma_{\max})$ (Demyanov & Rubinov 1970)."""
    return jnp.clip(_safe_div(slope, lipschitz * sq_norm), 0.0, max_step)


def primal_dual_short_step(gap, fw_gap, slope, sq_norm, lipschitz, max_step=1.0):
    r"""Generalized (primal-dual) short step.

    Martínez-Rubio & Pokutta, "Beyond Short Steps in Frank-Wolfe Algorithms" (ICLR 2026),
    propose steps that shrink a *computable primal-dual gap* rather than only the primal
    value. Our reconstruction (derived here; the paper's pseudo-code was not available):
    keep a lower bound $W \le f^\star$ that moves as
    $W^+ = (1-\gamma) W + \gamma (f(x) - g_{FW}(x))$ (a convex combination of valid
    lower bounds, since $f(x) - g_{FW}(x) = \min_v f(x) + \langle\nabla f(x), v - x\rangle$),
    and let $G = f(x) - W$. For any feasible direction $d$ with slope
    $s = -\langle\nabla f(x), d\rangle$, $L$-smoothness gives

    $$
    G^+ \le (1-\gamma) G + \gamma (g_{FW} - s) + \tfrac{\gamma^2}{2} L \|d\|^2,
    $$

    whose minimizer is $\gamma = (G - g_{FW} + s) / (L\|d\|^2)$, clipped to
    $[0, \min(1, \gamma_{\max})]$. For a Frank-Wolfe direction ($s = g_{FW}$)
    this is $G/(L\|d\|^2)$: the classical short step with the FW gap replaced by the
    primal-dual gap, a *longer* step whenever $G > g_{FW}$, and it yields
    $G_t \le 2 L D^2/(t+2)$ by the same induction as the open-loop rule. For a
    projected-gradient direction $d = \Pi(x - \eta\nabla f) - x$ the same formula
    applies (``slope`` <= ``fw_gap`` there), which is how the rule transfers to gradient
    descent.
    """
    cap = jnp.minimum(max_step, 1.0)
    num = jnp.where(slope > 0, gap - fw_gap + slope, 0.0)
    return jnp.clip(_safe_div(num, lipschitz * sq_norm), 0.0, cap)


def exact_quadratic_step(fun, x, d, args, slope, max_step=1.0):
    r"""Exact line search for a quadratic: $\mathrm{clip}(s / d^\top \nabla^2 f(x) d, 0, \gamma_{\max})$."""
    grad = jax.grad(fun)
    _, hess_d = jax.jvp(lambda z: grad(z, args), (x,), (d,))
    leaves = zip(jax.tree.leaves(d), jax.tree.leaves(hess_d), strict=True)
    curv = sum(jnp.vdot(a, b) for a, b in leaves)
    gamma = jnp.where(curv > 0, _safe_div(slope, curv), max_step)
    return jnp.where(slope > 0, jnp.clip(gamma, 0.0, max_step), 0.0)


def backtracking_step(
    fun, x, d, args, f, slope, sq_norm, lipschitz, max_step, *, eta, tau, max_tries=50
):
    r"""Adaptive step of Pedregosa, Négiar, Askari & Jaggi (AISTATS 2020): returns ``(gamma, L, f(x + gamma d), evals)``.

    Starting from $L = \eta L_{t-1}$, take $\gamma = \min(s/(L\|d\|^2), \gamma_{\max})$
    and accept once $f(x+\gamma d) \le f(x) - \gamma s + \gamma^2 L\|d\|^2/2$;
    otherwise $L \leftarrow \tau L$. After ``max_tries`` rejections the step is 0
    (no progress is better than an unverified step).
    """
    dtype = jnp.result_type(f)

    def trial(L):
        gamma = short_step(slope, sq_norm, L, max_step)
        x_trial = jax.tree.map(lambda a, b: a + gamma * b, x, d)
        f_trial = fun(x_trial, args)
        bound = f - gamma * slope + 0.5 * gamma**2 * L * sq_norm + 1e-12 * jnp.abs(f)
        return gamma, f_trial, f_trial <= bound

    L0 = jnp.maximum(eta * lipschitz, jnp.finfo(dtype).tiny)
    gamma0, f0, ok0 = trial(L0)

    def cond(carry):
        _, _, _, ok, tries = carry
        return ~ok & (tries < max_tries)

    def body(carry):
        L, _, _, _, tries = carry
        L = L * tau
        gamma, f_trial, ok = trial(L)
        return L, gamma, f_trial, ok, tries + 1

    L, gamma, f_trial, ok, n = jax.lax.while_loop(cond, body, (L0, gamma0, f0, ok0, jnp.int32(1)))
    no_move = (slope <= 0) | (sq_norm <= 0) | ~ok
    gamma = jnp.where(no_move, 0.0, gamma)
    f_trial = jnp.where(no_move, f, f_trial)
    L = jnp.where((slope <= 0) | (sq_norm <= 0), lipschitz, L)
    return gamma.astype(dtype), L.astype(dtype), f_trial, n
