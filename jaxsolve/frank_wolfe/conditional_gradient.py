r"""Frank-Wolfe (conditional gradient): vanilla, away-step and pairwise, with a certified gap.

For $\min_{x \in C} f(x)$, $f$ convex and smooth, $C$ compact convex given
by a linear minimization oracle (`jaxsolve.frank_wolfe.lmo`). Each step calls the
oracle once at the current gradient, $v_t = \mathrm{LMO}(\nabla f(x_t))$, which gives
the Frank-Wolfe gap $g_t = \langle\nabla f(x_t), x_t - v_t\rangle \ge f(x_t) - f^\star$
and the lower bound $f(x_t) - g_t \le f^\star$ (convexity). ``state.error`` is the
certified gap $f(x_t) - \max_{i \le t}(f(x_i) - g_i) \le g_t$: with an exact oracle and a
convex ``f`` it is never below $f(x_t) - f^\star$.

Variants (Lacoste-Julien & Jaggi, "On the global linear convergence of Frank-Wolfe
optimization variants", NeurIPS 2015):

* ``"vanilla"``: $x^+ = x + \gamma (v - x)$, $\gamma \in [0, 1]$ (Frank & Wolfe 1956).
* ``"away"``: also considers moving away from the active vertex
  $a = \arg\max_{u \in S} \langle\nabla f, u\rangle$, $d = x - a$,
  $\gamma_{\max} = \lambda_a/(1-\lambda_a)$, when its gap is larger.
* ``"pairwise"``: $d = v - a$, $\gamma_{\max} = \lambda_a$.

The active set (vertices and convex weights) lives in fixed-capacity arrays
(``capacity`` rows of the flattened iterate), so the whole method jits and vmaps;
``x0`` is its first atom (any feasible point). If a new vertex arrives when all
slots are used, the solver stops with ``Status.BREAKDOWN`` (raise ``capacity``).

``x0`` must lie in ``C``: it is checked (``LMO.violation(x0) <= 10 sqrt(eps) (1 +
max|x0|)``), not projected; an infeasible or non-finite start ends ``BREAKDOWN`` at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.frank_wolfe import steps as _steps

__all__ = ["frank_wolfe", "FrankWolfe", "FWState", "FWInfo"]

VARIANTS = ("vanilla", "away", "pairwise")


class FWState(NamedTuple):
    r"""State of `frank_wolfe`.

    Attributes:
        x: the iterate, a pytree shaped like ``x0`` (a convex combination of ``x0`` and
            oracle vertices, so it stays in $C$).
        iter_num: int32 scalar, steps taken.
        error: the certified bound $f(x_t) - \max_{i \le t}(f(x_i) - g_i)$ on
            $f(x_t) - f^\star$ (`certified_error`), at most ``fw_gap``.
        status: int32 `Status`: ``BREAKDOWN`` for an infeasible start or a full active
            set, else ``SUCCESS``.
        value: $f(x_t)$, real scalar.
        grad: $\nabla f(x_t)$, a pytree shaped like ``x``.
        vertex: the oracle's answer $v_t = \mathrm{LMO}(\nabla f(x_t))$, shaped like ``x``.
        fw_gap: the Frank-Wolfe gap $g_t = \langle\nabla f(x_t), x_t - v_t\rangle$.
        lower: the best certified lower bound on $f^\star$ so far, $\max_i (f(x_i) - g_i)$
            (and ``pd_lower`` with ``step="primal_dual"``).
        pd_lower: the lower bound $W$ the primal-dual short step moves
            (`jaxsolve.frank_wolfe.steps.primal_dual_short_step`); equals the first
            ``lower`` under the other rules.
        lipschitz: the smoothness estimate $L$ (updated by ``step="backtracking"``, the
            given constant otherwise; 0 when no rule needs it).
        weights: ``(capacity,)`` convex weights of the active atoms (away/pairwise; one
            slot holding 1 for ``"vanilla"``).
        atoms: ``(capacity, n)`` the active atoms, each a flattened iterate of size ``n``
            (``(1, 1)`` unused for ``"vanilla"``).
        num_oracle: int32, LMO calls so far.
        num_fun: int32, evaluations of ``fun`` (each with its gradient, or a value in
            the line search).
    """

    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    value: jax.Array
    grad: Any
    vertex: Any
    fw_gap: jax.Array
    lower: jax.Array
    pd_lower: jax.Array
    lipschitz: jax.Array
    weights: jax.Array
    atoms: jax.Array
    num_oracle: jax.Array
    num_fun: jax.Array


class FWInfo(NamedTuple):
    r"""Per-step diagnostics of `frank_wolfe` (``Solution.info`` with ``history=True``).

    Attributes:
        gamma: the step size taken, in $[0, \gamma_{\max}]$.
        kind: int32, the step taken: 0 Frank-Wolfe, 1 away, 2 pairwise.
        slope: $-\langle\nabla f(x_t), d\rangle \ge 0$ along the chosen direction $d$
            (the FW gap for a Frank-Wolfe step).
    """

    gamma: jax.Array
    kind: jax.Array
    slope: jax.Array


def certified_error(f, lower, gap):
    """``min(gap, f - lower)``, the certified bound on ``f - f*``; where ``f - lower`` is
    below the current gap, the rounding of the bounds ``f_i - g_i``,
    ``eps (|f| + |lower|)``, is added: at large ``|f|`` the difference ``f - (f - gap)``
    cancels to 0 and would fake convergence. At an exact optimum (``gap = 0``) it stays 0."""
    eps = jnp.finfo(jnp.result_type(f)).eps
    err = f - lower
    slack = jnp.where(err < gap, eps * (jnp.abs(f) + jnp.abs(lower)), 0)
    return jnp.minimum(gap, err + slack)


def _evaluate(fun, lmo, x, args):
    f, g = jax.value_and_grad(fun)(x, args)
    v = lmo(g)
    gap = optax.tree.vdot(g, optax.tree.sub(x, v))
    return f, g, v, gap


def start_status(lmo, x0, variant):
    """``SUCCESS`` when ``x0`` lies in the set, else ``BREAKDOWN``: Frank-Wolfe keeps its
    iterates in ``C`` only as convex combinations of a feasible start and vertices, and
    its certified gap is a bound only there (from an infeasible start it can read 0 at an
    infeasible ``x``). The start is checked, not projected;
    an LMO without a membership test (``LMO.violation`` is ``None``) is not checked."""
    viol = lmo.violation(x0)
    if viol is None:
        return jnp.int32(Status.SUCCESS)
    flat, _ = ravel_pytree(x0)
    threshold = 10.0 * jnp.sqrt(jnp.finfo(flat.dtype).eps) * (1.0 + jnp.max(jnp.abs(flat)))
    ok = viol <= threshold  # NaN: not ok
    return jnp.where(ok, jnp.int32(Status.SUCCESS), jnp.int32(Status.BREAKDOWN)).astype(jnp.int32)


class FrankWolfe(AbstractSolver):
    """Frank-Wolfe with a certified gap (see `frank_wolfe`).

    Static: ``fun``, ``lmo``, ``variant``, ``rule`` (the step rule), ``capacity``.
    Traced: ``lipschitz`` (0: estimate it, backtracking only), ``ell``, ``eta``, ``tau``.
    """

    fun: Callable = eqx.field(static=True)
    lmo: Callable = eqx.field(static=True)
    lipschitz: Any = 0.0
    ell: Any = 2.0
    eta: Any = 0.9
    tau: Any = 2.0
    variant: str = eqx.field(static=True, default="vanilla")
    rule: str = eqx.field(static=True, default="open_loop")
    capacity: int = eqx.field(static=True, default=256)

    def init(self, x0, args) -> FWState:
        try:
            f, g, v, gap = _evaluate(self.fun, self.lmo, x0, args)
        except (TypeError, ValueError) as err:
            shapes = jax.tree.map(jnp.shape, x0)
            raise ValueError(
                f"x0 (shapes {shapes}) does not fit fun(x, args) or the LMO: {err}"
            ) from err
        dtype = jnp.result_type(f)
        flat, _ = ravel_pytree(x0)
        variant = self.variant
        cap = self.capacity if variant != "vanilla" else 1
        atoms = jnp.zeros((cap, flat.shape[0] if variant != "vanilla" else 1), flat.dtype)
        weights = jnp.zeros((cap,), flat.dtype).at[0].set(1.0)
        if variant != "vanilla":
            atoms = atoms.at[0].set(flat)
        num_fun = jnp.int32(1)
        L = hyper(self.lipschitz, dtype)
        if self.rule == "backtracking":
            # Initial estimate (as FrankWolfe.jl and Pedregosa et al. 2020 do): a gradient
            # difference along the first FW direction; the factory's value, when given, wins.
            d = optax.tree.sub(v, x0)
            h = jnp.asarray(1e-3, dtype)
            g_probe = jax.grad(self.fun)(optax.tree.add_scale(x0, h, d), args)
            d_norm = jnp.sqrt(optax.tree.vdot(d, d))
            g_diff = optax.tree.sub(g_probe, g)
            est = jnp.sqrt(optax.tree.vdot(g_diff, g_diff)) / jnp.where(d_norm > 0, h * d_norm, 1.0)
            est = jnp.where(jnp.isfinite(est) & (est > 0), est, 1.0)
            L = jnp.where(L > 0, L, est)
            num_fun = num_fun + 1
        lower = f - gap
        return FWState(
            x=x0,
            iter_num=jnp.int32(0),
            error=certified_error(f, lower, gap).astype(dtype),
            status=start_status(self.lmo, x0, variant),
            value=f,
            grad=g,
            vertex=v,
            fw_gap=gap,
            lower=lower,
            pd_lower=lower,
            lipschitz=L,
            weights=weights,
            atoms=atoms,
            num_oracle=jnp.int32(1),
            num_fun=num_fun,
        )

    def _choose_gamma(self, state, args, d, slope, d_sq, gamma_max):
        fun, step = self.fun, self.rule
        dtype = jnp.result_type(state.value)
        L = state.lipschitz
        extra = jnp.int32(0)
        f_new = None
        if step == "open_loop":
            gamma = _steps.open_loop_step(state.iter_num, gamma_max, hyper(self.ell, dtype))
        elif step == "short":
            gamma = _steps.short_step(slope, d_sq, L, gamma_max)
        elif step == "exact":
            gamma = _steps.exact_quadratic_step(fun, state.x, d, args, slope, gamma_max)
        elif step == "primal_dual":
            G = state.value - state.pd_lower
            gamma = _steps.primal_dual_short_step(G, state.fw_gap, slope, d_sq, L, gamma_max)
        else:  # backtracking
            gamma, L, f_new, extra = _steps.backtracking_step(
                fun,
                state.x,
                d,
                args,
                state.value,
                slope,
                d_sq,
                L,
                gamma_max,
                eta=hyper(self.eta, dtype),
                tau=hyper(self.tau, dtype),
            )
        gamma = jnp.where(slope > 0, gamma, 0.0).astype(dtype)
        return gamma, L, extra

    def step(self, state: FWState, args) -> tuple[FWState, FWInfo]:
        fun, lmo, variant, step = self.fun, self.lmo, self.variant, self.rule
        x, g, v = state.x, state.grad, state.vertex
        dtype = jnp.result_type(state.value)
        fw_dir = optax.tree.sub(v, x)
        fw_gap = state.fw_gap
        status = state.status
        if variant == "vanilla":
            d, slope, gamma_max, kind = fw_dir, fw_gap, jnp.asarray(1.0, dtype), jnp.int32(0)
        else:
            flat_x, unravel = ravel_pytree(x)
            flat_g, _ = ravel_pytree(g)
            flat_v, _ = ravel_pytree(v)
            active = state.weights > 0
            scores = jnp.where(active, state.atoms @ flat_g, -jnp.inf)
            i_away = jnp.argmax(scores)
            weight_away = state.weights[i_away]
            away_gap = scores[i_away] - jnp.vdot(flat_g, flat_x)
            away_atom = state.atoms[i_away]
            if variant == "away":
                use_fw = fw_gap >= away_gap
                d_flat = jnp.where(use_fw, flat_v - flat_x, flat_x - away_atom)
                slope = jnp.where(use_fw, fw_gap, away_gap)
                away_max = jnp.where(
                    weight_away < 1,
                    weight_away / jnp.where(weight_away < 1, 1 - weight_away, 1.0),
                    0.0,
                )
                gamma_max = jnp.where(use_fw, 1.0, away_max).astype(dtype)
                kind = jnp.where(use_fw, 0, 1).astype(jnp.int32)
            else:
                d_flat = flat_v - away_atom
                slope = fw_gap + away_gap
                gamma_max = weight_away.astype(dtype)
                kind = jnp.int32(2)
            d = unravel(d_flat)
        d_sq = optax.tree.vdot(d, d)
        gamma, L, extra = self._choose_gamma(state, args, d, slope, d_sq, gamma_max)

        if variant == "vanilla":
            x_new = optax.tree.add_scale(x, gamma, d)
            weights, atoms = state.weights, state.atoms
        else:
            match = jnp.all(state.atoms == flat_v, axis=1) & active
            free = ~active
            found = jnp.any(match)
            i_vertex = jnp.where(found, jnp.argmax(match), jnp.argmax(free))
            full = ~found & ~jnp.any(free)
            needs_v = (kind != 1) & (gamma > 0)
            status = jnp.where(needs_v & full, jnp.int32(Status.BREAKDOWN), status)
            w = state.weights
            atoms = jnp.where(
                needs_v & ~found & ~full, state.atoms.at[i_vertex].set(flat_v), state.atoms
            )
            e_v = jax.nn.one_hot(i_vertex, w.shape[0], dtype=w.dtype)
            e_a = jax.nn.one_hot(i_away, w.shape[0], dtype=w.dtype)
            w_fw = (1 - gamma) * w + gamma * e_v
            w_away = (1 + gamma) * w - gamma * e_a
            w_pair = w + gamma * (e_v - e_a)
            w_new = jnp.where(kind == 0, w_fw, jnp.where(kind == 1, w_away, w_pair))
            # a drop step removes the away atom exactly; rounding must not leave dust
            at_max = (kind != 0) & (gamma >= gamma_max)
            w_new = jnp.where(at_max & (e_a > 0), 0.0, w_new)
            w_new = jnp.where(w_new > 0, w_new, 0.0)
            w_new = w_new / jnp.sum(w_new)
            ok = status == Status.SUCCESS
            weights = jnp.where(ok, w_new, w)
            atoms = jnp.where(ok, atoms, state.atoms)
            x_new = unravel(weights @ atoms)

        f, g_new, v_new, gap = _evaluate(fun, lmo, x_new, args)
        lower = jnp.maximum(state.lower, f - gap)
        pd_lower = state.pd_lower
        if step == "primal_dual":
            theta = jnp.minimum(gamma, 1.0)
            pd_lower = (1 - theta) * pd_lower + theta * (state.value - fw_gap)
            lower = jnp.maximum(lower, pd_lower)
        new = FWState(
            x=x_new,
            iter_num=state.iter_num + 1,
            error=certified_error(f, lower, gap).astype(dtype),
            status=status,
            value=f,
            grad=g_new,
            vertex=v_new,
            fw_gap=gap,
            lower=lower,
            pd_lower=pd_lower,
            lipschitz=L.astype(dtype),
            weights=weights,
            atoms=atoms,
            num_oracle=state.num_oracle + 1,
            num_fun=state.num_fun + 1 + extra,
        )
        return new, FWInfo(gamma=gamma, kind=kind, slope=slope)


def frank_wolfe(
    fun: Callable,
    lmo: Callable,
    *,
    step: str = "open_loop",
    variant: str = "vanilla",
    lipschitz: float | None = None,
    capacity: int = 256,
    ell: float = 2.0,
    eta: float = 0.9,
    tau: float = 2.0,
) -> FrankWolfe:
    r"""Frank-Wolfe with a certified optimality gap.

    Minimizes a convex, smooth ``fun(x, args)`` over the set of ``lmo`` (an
    `LMO` or any callable ``g -> argmin_{v in C} <g, v>``).
    ``state.error`` is $f(x_t) - \max_{i\le t}(f(x_i) - g_i)$, a certified upper
    bound on $f(x_t) - f^\star$ that is at most the current FW gap $g_t$
    (with ``step="primal_dual"`` the primal-dual lower bound is included as well).

    Args:
        fun: objective ``fun(x, args) -> scalar``, ``x`` any pytree.
        lmo: linear minimization oracle over the feasible set.
        step: ``"open_loop"`` ($\ell/(t+\ell)$), ``"short"`` (needs ``lipschitz``),
            ``"backtracking"`` (Pedregosa, Négiar, Askari & Jaggi, AISTATS 2020;
            ``lipschitz`` is the initial
            estimate, estimated from a gradient difference if omitted), ``"exact"``
            (quadratic ``fun``), ``"primal_dual"`` (the generalized short step of
            Martínez-Rubio & Pokutta, "Beyond Short Steps in Frank-Wolfe Algorithms",
            ICLR 2026, arXiv 2501.18773; needs ``lipschitz``); see
            `jaxsolve.frank_wolfe.steps`.
        variant: ``"vanilla"``, ``"away"`` or ``"pairwise"`` (the last two need a
            polytope oracle and converge linearly for strongly convex ``fun``;
            Lacoste-Julien & Jaggi 2015).
        lipschitz: smoothness constant $L$ of ``fun`` (a hyperparameter leaf).
        capacity: active-set slots for ``"away"``/``"pairwise"`` (static).
        ell: open-loop constant, step $\ell/(t+\ell)$ (hyperparameter leaf).
        eta: backtracking: each step first tries ``eta`` (``<= 1``) times the last $L$.
        tau: backtracking: factor ``> 1`` that increases $L$ after a rejection.

    Returns:
        A `FrankWolfe` solver (state `FWState`); run it with `jaxsolve.solve`.
    """
    if not callable(fun):
        raise TypeError("fun must be callable: fun(x, args) -> scalar")
    if not callable(lmo):
        raise TypeError("lmo must be callable: lmo(g) -> argmin_v <g, v>")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if step not in _steps.STEP_RULES:
        raise ValueError(f"step must be one of {_steps.STEP_RULES}, got {step!r}")
    if variant != "vanilla" and not getattr(lmo, "polytope", False):
        raise ValueError(
            f"variant={variant!r} needs an LMO over a polytope (lmo.polytope is True); "
            "use variant='vanilla' for this set"
        )
    if variant != "vanilla" and step == "open_loop":
        raise ValueError("away/pairwise steps need a step rule that uses the slope (not open_loop)")
    if step in ("short", "primal_dual") and lipschitz is None:
        raise ValueError(f"step={step!r} needs lipschitz (the smoothness constant L of fun)")
    if lipschitz is not None and not (float(lipschitz) > 0 and jnp.isfinite(lipschitz)):
        raise ValueError(f"lipschitz must be positive and finite, got {lipschitz}")
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 2:
        raise ValueError(f"capacity must be an int >= 2, got {capacity!r}")
    for name, val in (("ell", ell), ("eta", eta), ("tau", tau)):
        if not float(val) > 0:
            raise ValueError(f"{name} must be positive, got {val}")
    if not float(tau) > 1 or not float(eta) <= 1:
        raise ValueError("backtracking needs tau > 1 and eta <= 1")
    return FrankWolfe(
        fun=fun,
        lmo=lmo,
        lipschitz=0.0 if lipschitz is None else float(lipschitz),
        ell=float(ell),
        eta=float(eta),
        tau=float(tau),
        variant=variant,
        rule=step,
        capacity=capacity,
    )
