r"""AAPGA and PGA: (accelerated) projected gradient ascent on the concave extension.

Problem: $\max_{x \in P} F(x)$ for the concave extension $F$ of an `SCM` and one of
the polytopes of `jaxsolve.submodular.constraints` (Lv, Wang, Xu and Yang,
"Efficient Submodular Maximization for Sums of Concave over Modular Functions",
ICLR 2026; the relaxation of Bai et al., NeurIPS 2018). `args` is the pair
`(f, constraint)`: both are pytrees, so a batch of instances is a `vmap`.

AAPGA (`aapga`), FISTA in ascent form with approximate projections:

$$y_t = \Pi_{[0,1]^n}\Big(x_t + \tfrac{\alpha_t - 1}{\alpha_{t+1}}(x_t - x_{t-1})\Big),\qquad
x_{t+1} \in P'_L(y_t) = \{x \in P : \|x - \Pi_P(y_t + g(y_t)/L)\| \le \delta_t\},$$

$\alpha_1 = 1$, $\alpha_{t+1} = (1 + \sqrt{1 + 4\alpha_t^2})/2$, $g$ the supergradient.
Choices the paper leaves open, made here:

* the extrapolated point is clipped to the box, because $F$ is only defined for
  $Mx \ge 0$ ($\sqrt{\cdot}$ and $\log(1 + \cdot)$ are not defined below $0$); the box
  contains $P$, so the projection step is unchanged in kind;
* backtracking: $L$ starts at `shrink` times the previous value (so the estimate can
  come down; `shrink = 1` is the paper's non-decreasing
  $L = 2^{i_t} L_{t-1}$) and is multiplied by `increase` until
  the ascent surrogate holds,
  $F(x_{t+1}) \ge F(y_t) + \langle g(y_t), x_{t+1} - y_t\rangle - \tfrac L2 \|x_{t+1} - y_t\|^2$;
  the first $L$ comes from a finite difference of $g$ along $g$. That is the curvature
  in the steepest direction, an overestimate along the projected steps: on
  probabilistic coverage ($n = 5000$) the first $L$ is ~15 while $L \approx 1$ is still
  accepted at the end, and every trial passes at once. With the default `shrink` 0.9
  it took ~25 steps to bring $L$ down (26-27 steps at $k = 500$); with 0.7 the solves
  to the same gap take about half the steps (13-14; 10-16 for $k$ from 10 to 2000,
  knapsack and partition matroid alike), at the cost of a rejected trial now and then,
  so `maximize` runs `aapga(shrink=0.7)` by default. `first_lipschitz="step"` (what
  `maximize` runs) then replaces that first $L$ by the secant along the first
  projected step, $\|g(x_s) - g(x_0)\|/\|x_s - x_0\|$ with
  $x_s = \Pi_P(x_0 + g(x_0)/L)$ (one more supergradient): a curvature along a
  direction the steps actually take, ~6x below the steepest-direction estimate on
  coverage (n = 5000: 2.8 vs 17 at $k = 500$), so the steps no longer spend 5-7
  shrinks bringing $L$ down (to a $10^{-3}$ gap at $k = 500$: 9 -> 5 steps on the
  ER instance of `bench/submodular.py`, 12 -> 8 on the SBM one; 4-8 for $k$ from
  10 to 2000, where it was 7-12). `aapga` itself keeps 0.9 and `"gradient"`: with a
  smaller `shrink`, more trials sit at the acceptance boundary, and a `vmap`ped solve to
  a $10^{-9}$ gap on a small dense instance (the solver contract's test) no longer
  follows the single solves step for step (its batched products round differently in
  the last bit, which then flips a trial);
* projection error schedule $\delta_t = \delta_0 \sqrt n/(t+1)^3$ (Theorem 1 asks
  $\delta = O(1/T^3)$ for $T$ steps; the $\sqrt n$ is the box's diameter), reached by
  bisection on the projection's multiplier (see `constraints`), capped at machine
  precision; `inexact=False` uses the exact projections;
* momentum restart when $F(x_{t+1}) < F(x_t)$ (O'Donoghue and Candes 2015),
  `restart=False` to switch it off.

PGA (`pga`) is the same step with $y_t = x_t$ and exact projections (the baseline).

`error`: the relative Frank-Wolfe gap at `x`,
$\mathrm{gap}(x)/F(x)$ with $\mathrm{gap}(x) = \max_{s \in P}\langle g(x), s - x\rangle$.
By concavity $\max_P F \le F(x) + \mathrm{gap}(x)$, so `error <= tol` certifies
$F(x) \ge \max_P F / (1 + \mathrm{tol})$; the state keeps the bound as `upper`. (At
kinks of $\phi$, e.g. $\min(z, c)$, the right-derivative supergradient may keep the
gap from vanishing: such solves end with `MAX_STEPS`, never a false `SUCCESS`.)
With `check_every = r > 1`, AAPGA computes the gap (one more product with $M^\top$)
only every $r$-th step, and `x` is the last checked iterate (so `error` is always
the gap of the returned `x`).

`bound="extrapolated"` (what `maximize` runs) bounds $\max_P F$ from the extrapolated
point instead: the line search already has $F(y_t)$ and $g(y_t)$, and concavity gives
$\max_P F \le F(y_t) + \max_{s \in P}\langle g(y_t), s - y_t\rangle$ for every $y_t$ in
the box (in $P$ or not), so `upper` is the smallest of these over the steps, at the
cost of one support function, no product. `x` is then the best iterate so far and
`error` $= (\mathrm{upper} - F(x))/F(x)$, so `error <= tol` certifies the same
$F(x) \ge \max_P F/(1 + \mathrm{tol})$. This bound trails the iterate's own gap by
about a step (on probabilistic coverage, $n = 5000$, $k = 500$, it is 1.2-2.5x the gap
of $x_{t+1}$), so once it is within `certify_below` of `x`'s value the step also
computes the iterate's gap (one product with $M^\top$) and keeps the smaller bound:
the solve stops at the same step as with the iterate's gap (13 / 14 steps at
$k = 500$ on the ER / SBM instances of `bench/submodular.py`) with 2-4 of those
products instead of one per step (~0.5 ms each there). `maximize` sets
`certify_below = 10 tol`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.core.status import Status
from jaxsolve.core.validation import is_concrete

__all__ = ["AAPGA", "AAPGAState", "AAPGAInfo", "aapga", "pga", "frank_wolfe_gap"]

sg = jax.lax.stop_gradient


class AAPGAState(NamedTuple):
    """State of `aapga` / `pga`.

    Attributes:
        x: the last certified iterate ``(n,)`` (in $P$; with ``check_every > 1`` the last
            iterate whose gap was computed; with ``bound="extrapolated"`` the best
            iterate so far).
        iter_num: int32 scalar, steps taken.
        error: relative Frank-Wolfe gap of `x`, $\\mathrm{gap}(x)/F(x)$, or with
            ``bound="extrapolated"`` $(\\mathrm{upper} - F(x))/F(x)$ (see the module).
        status: int32 `Status`, set by `AAPGA.step`: ``BREAKDOWN`` if the line search ran
            out of trials at a finite value, else ``SUCCESS``.
        iterate: the method's current iterate $x_t$ ``(n,)``, in $P$.
        previous: the previous iterate $x_{t-1}$ (the momentum's other end; set to $x_t$
            on a restart, so the next extrapolation is zero).
        value: $F(x)$ at the certified ``x``, real scalar.
        upper: $F(x) + \\mathrm{gap}(x) \\ge \\max_P F$, the certified upper bound (with
            ``bound="extrapolated"`` the smallest bound met so far).
        iterate_value: $F(x_t)$ at ``iterate``.
        grad: the supergradient $g(x_t)$ ``(n,)`` (PGA steps from it); on AAPGA steps
            with ``check_every > 1`` that compute no gap it holds $g(y_t)$ at the
            extrapolated point instead (AAPGA does not read it).
        momentum: $\\alpha_t$ of the FISTA sequence (1 at the start and after a restart).
        lipschitz: the current $L$, the one the last line search accepted (the next
            search starts from ``shrink`` times it).
        num_grads: int32, supergradient evaluations so far.
        num_values: int32, function evaluations so far.
    """

    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    iterate: Any
    previous: Any
    value: jax.Array
    upper: jax.Array
    iterate_value: jax.Array
    grad: Any
    momentum: jax.Array
    lipschitz: jax.Array
    num_grads: jax.Array
    num_values: jax.Array


class AAPGAInfo(NamedTuple):
    """Per-step diagnostics of `aapga` / `pga`.

    Attributes:
        value: $F(x_{t+1})$ at the new iterate (not necessarily the certified ``x``).
        lipschitz: the $L$ the line search ended with (the accepted one, or the last
            tried when it ran out of trials).
        trials: int32, line-search trials this step (function evaluations).
        num_grads: int32, supergradient evaluations so far (the state's ``num_grads``).
    """

    value: jax.Array
    lipschitz: jax.Array
    trials: jax.Array
    num_grads: jax.Array


def frank_wolfe_gap(f, constraint, x, g=None):
    r"""$\max_{s \in P}\langle g(x), s - x\rangle \ge \max_P F - F(x)$ (the certificate).

    `x` must have shape `(n,)` (checked, naming `x`).
    """
    if jnp.shape(x) != (f.n,):
        raise ValueError(f"x must have shape ({f.n},) (one entry per item), got {jnp.shape(x)}")
    g = f.supergradient(x) if g is None else g
    return constraint.support(g) - jnp.dot(g, x)


def _relative(gap, value):
    tiny = jnp.finfo(value.dtype).tiny
    return jnp.maximum(gap, 0) / jnp.maximum(value, tiny**0.5)


def _unpack(args):
    from jaxsolve.submodular.objectives import SCM

    if not (isinstance(args, tuple) and len(args) == 2 and isinstance(args[0], SCM)):
        raise TypeError(
            f"args must be the pair (f, constraint) with f an SCM, got {type(args).__name__}"
        )
    return args


def _check_start(x0, f) -> None:
    """x0: a real float vector over the ground set (shape/dtype only: fine under tracing)."""
    if jnp.shape(x0) != (f.n,):
        raise ValueError(f"x0 must have shape ({f.n},) (one entry per item), got {jnp.shape(x0)}")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        raise TypeError(f"x0 must be a real floating-point vector, got dtype {x0.dtype}")
    if x0.dtype != f.weights.dtype:
        raise TypeError(
            f"x0 has dtype {x0.dtype} but f is {f.weights.dtype}: pass x0.astype({f.weights.dtype})"
        )


class AAPGA(jaxsolve.AbstractSolver):
    """Accelerated approximate projected gradient ascent (or plain PGA): see the module.

    Build with `aapga(...)` or `pga(...)`; run with
    `jaxsolve.solve(solver, x0, (f, constraint))`.
    """

    accelerated: bool = eqx.field(static=True, default=True)
    inexact: bool = eqx.field(static=True, default=True)
    restart: bool = eqx.field(static=True, default=True)
    check_every: int = eqx.field(static=True, default=1)
    bound: str = eqx.field(static=True, default="iterate")
    first_lipschitz: str = eqx.field(static=True, default="gradient")
    max_trials: int = eqx.field(static=True, default=30)
    delta: float | jax.Array = 1e-3
    certify_below: float | jax.Array = 0.0
    shrink: float | jax.Array = 0.9
    increase: float | jax.Array = 2.0
    lipschitz: float | jax.Array | None = None

    def _project(self, constraint, y, t):
        if not self.inexact:
            return constraint.project(y)
        n = y.shape[0]
        delta = jaxsolve.hyper(self.delta, y) * jnp.sqrt(jnp.asarray(n, y.dtype))
        delta = delta / (t.astype(y.dtype) + 1) ** 3
        return constraint.project_approx(y, delta)

    def init(self, x0, args):
        f, constraint = _unpack(args)
        x0 = jnp.asarray(x0)
        _check_start(x0, f)
        dtype = x0.dtype
        x = constraint.project(x0)
        z = f.modular(x)
        value = f.value_from_z(z)
        g = f.grad_from_z(z)
        gap = frank_wolfe_gap(f, constraint, x, g)
        if self.lipschitz is None:
            gn = jnp.sqrt(jnp.dot(g, g))
            h = 1e-3 * jnp.sqrt(jnp.asarray(x.shape[0], dtype))
            v = g / jnp.where(gn > 0, gn, 1)
            xh = jnp.clip(x + h * v, 0, 1)
            dx = jnp.linalg.norm(xh - x)
            L = jnp.linalg.norm(f.supergradient(xh) - g) / jnp.where(dx > 0, dx, 1)
            ok = jnp.isfinite(L) & (L > jnp.finfo(dtype).tiny ** 0.5)
            L = jnp.where(ok, L, 1).astype(dtype)
            grads = 2
            if self.first_lipschitz == "step":
                # the secant along the first projected step (see the module)
                xs = constraint.project(x + g / L)
                ds = jnp.linalg.norm(xs - x)
                Ls = jnp.linalg.norm(f.supergradient(xs) - g) / jnp.where(ds > 0, ds, 1)
                use = jnp.isfinite(Ls) & (Ls > jnp.finfo(dtype).tiny ** 0.5) & (ds > 0)
                L = jnp.where(use, Ls, L).astype(dtype)
                grads = 3
        else:
            L = jaxsolve.hyper(self.lipschitz, x)
            grads = 1
        return AAPGAState(
            x=x,
            iter_num=jnp.int32(0),
            error=_relative(gap, value).astype(dtype),
            status=jnp.int32(Status.SUCCESS),
            iterate=x,
            previous=x,
            value=value.astype(dtype),
            upper=(value + jnp.maximum(gap, 0)).astype(dtype),
            iterate_value=value.astype(dtype),
            grad=g,
            momentum=jnp.ones((), dtype),
            lipschitz=sg(L),
            num_grads=jnp.int32(grads),
            num_values=jnp.int32(1),
        )

    def step(self, state, args):
        f, constraint = args
        x = state.iterate
        dtype = x.dtype
        t = state.momentum
        t_next = (1 + jnp.sqrt(1 + 4 * t * t)) / 2
        grads, values = state.num_grads, state.num_values
        if self.accelerated:
            y = jnp.clip(x + ((t - 1) / t_next) * (x - state.previous), 0, 1)
            zy = f.modular(y)
            f_y, g_y = f.value_from_z(zy), f.grad_from_z(zy)
            grads, values = grads + 1, values + 1
        else:
            y, f_y, g_y = x, state.iterate_value, state.grad
        eps = jnp.finfo(dtype).eps
        increase = jaxsolve.hyper(self.increase, x)

        def trial(L):
            xp = self._project(constraint, y + g_y / L, state.iter_num)
            zp = f.modular(xp)
            fp = f.value_from_z(zp)
            d = xp - y
            model = f_y + jnp.dot(g_y, d) - 0.5 * L * jnp.dot(d, d)
            noise = 100 * eps * jnp.maximum(jnp.abs(fp), jnp.abs(f_y))
            return xp, zp, fp, fp >= model - noise

        def cond(c):
            _, _, _, _, ok, k = c
            return (k == 0) | (~ok & (k < self.max_trials))

        def body(c):
            L, _, _, _, _, k = c
            L = jnp.where(k == 0, L, L * increase)
            xp, zp, fp, ok = trial(L)
            return L, xp, zp, fp, ok, k + 1

        L0 = jnp.maximum(
            state.lipschitz * jaxsolve.hyper(self.shrink, x), jnp.finfo(dtype).tiny ** 0.5
        )
        zeros_z = jnp.zeros(f.weights.shape, dtype)
        init = (L0, y, zeros_z, f_y, jnp.asarray(False), jnp.int32(0))
        L, x_new, z_new, f_new, ok, trials = jax.lax.while_loop(cond, body, init)
        values = values + trials
        status = jnp.where(ok | ~jnp.isfinite(f_new), state.status, jnp.int32(Status.BREAKDOWN))

        if self.accelerated and self.restart:
            # a decrease at rounding level is noise, not a reason to restart
            noise = 16 * eps * jnp.abs(state.iterate_value)
            restarted = f_new < state.iterate_value - noise
            t_next = jnp.where(restarted, 1, t_next)
            previous = jnp.where(restarted, x_new, x)
        else:
            previous = x

        def certify(_):
            g = f.grad_from_z(z_new)
            gap = frank_wolfe_gap(f, constraint, x_new, g)
            return x_new, _relative(gap, f_new), f_new, f_new + jnp.maximum(gap, 0), g

        def keep(_):
            return state.x, state.error, state.value, state.upper, g_y

        if self.accelerated and self.bound == "extrapolated":
            # the bound from y's supergradient, already computed for the line search (no
            # product with M^T); the iterate's own gap (one product) only once that bound
            # is within `certify_below` (see the module). x: the best iterate so far.
            gap_y = constraint.support(g_y) - jnp.dot(g_y, y)
            upper = jnp.minimum(state.upper, f_y + gap_y)
            better = f_new >= state.value
            cx = jnp.where(better, x_new, state.x)
            cval = jnp.where(better, f_new, state.value)
            below = jaxsolve.hyper(self.certify_below, x)
            do = ok & (_relative(upper - cval, cval) <= below)

            def own(_):
                g = f.grad_from_z(z_new)
                return f_new + jnp.maximum(frank_wolfe_gap(f, constraint, x_new, g), 0), g

            upper_x, g_new = jax.lax.cond(do, own, lambda _: (upper, g_y), None)
            upper = jnp.maximum(jnp.minimum(upper, upper_x), cval)  # never below the value
            err = _relative(upper - cval, cval)
            grads = grads + do.astype(jnp.int32)
        elif self.accelerated and self.check_every > 1:
            do = (state.iter_num + 1) % self.check_every == 0
            cx, err, cval, upper, g_new = jax.lax.cond(do, certify, keep, None)
            grads = grads + do.astype(jnp.int32)
        else:
            cx, err, cval, upper, g_new = certify(None)
            grads = grads + 1
        # a line search that runs out of trials ends in BREAKDOWN with its last, rejected
        # trial: not a point to report (with a tiny L it can even lie outside P, when the
        # projection of y + g/L cannot be resolved in the dtype). Report the last
        # certified point instead, which is in P and whose bound still holds.
        broke = ~ok & jnp.isfinite(f_new)
        cx, err, cval, upper = (
            jnp.where(broke, old, new)
            for old, new in zip(
                (state.x, state.error, state.value, state.upper),
                (cx, err, cval, upper),
                strict=True,
            )
        )
        new = AAPGAState(
            x=cx,
            iter_num=state.iter_num + 1,
            error=err.astype(dtype),
            status=status,
            iterate=x_new,
            previous=previous,
            value=cval.astype(dtype),
            upper=upper.astype(dtype),
            iterate_value=f_new.astype(dtype),
            grad=g_new,
            momentum=t_next.astype(dtype),
            lipschitz=sg(L).astype(dtype),
            num_grads=grads,
            num_values=values,
        )
        return new, AAPGAInfo(f_new.astype(dtype), L.astype(dtype), trials, grads)

    def optimality(self, x, args):
        r"""$x - \Pi_P(x + g(x))$: zero exactly at the maximizers of $F$ over $P$."""
        f, constraint = args
        return x - constraint.project(x + f.supergradient(x))


def _check(name, value, *, low=None, high=None, strict_low=True, strict_high=False):
    if value is None or not is_concrete(value):
        return
    arr = np.asarray(value)
    if arr.shape != ():
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
    v = float(arr)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if low is not None and (v <= low if strict_low else v < low):
        raise ValueError(f"{name} must be {'>' if strict_low else '>='} {low}, got {v}")
    if high is not None and (v >= high if strict_high else v > high):
        raise ValueError(f"{name} must be {'<' if strict_high else '<='} {high}, got {v}")


def _static_int(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _first_kind(kind):
    if kind not in ("gradient", "step"):
        raise ValueError(f"first_lipschitz must be 'gradient' or 'step', got {kind!r}")
    return kind


def _bound_kind(bound):
    if bound not in ("iterate", "extrapolated"):
        raise ValueError(f"bound must be 'iterate' or 'extrapolated', got {bound!r}")
    return bound


def aapga(
    *,
    delta: float | jax.Array = 1e-3,
    shrink: float | jax.Array = 0.9,
    increase: float | jax.Array = 2.0,
    lipschitz: float | jax.Array | None = None,
    inexact: bool = True,
    restart: bool = True,
    check_every: int = 1,
    bound: str = "iterate",
    certify_below: float | jax.Array = 0.0,
    first_lipschitz: str = "gradient",
    max_trials: int = 30,
) -> AAPGA:
    r"""Accelerated approximate projected gradient ascent (the module docstring has the math).

    Run it with `jaxsolve.solve(aapga(), x0, (f, constraint), tol=...)`, `f` an `SCM`
    and `constraint` from `cardinality` / `knapsack` / `partition_matroid` (`x0`, e.g.
    `constraint.start(n, dtype)`, is projected first; it must be a real vector of shape
    `(n,)` in `f`'s dtype, checked, naming `x0`). `tol` bounds the relative
    Frank-Wolfe gap.

    Args:
        delta: $\delta_0$ of the projection-error schedule $\delta_0\sqrt n/(t+1)^3$ (> 0).
        shrink: each step's first trial is `shrink * L` (in (0, 1]; 1: $L$ never decreases;
            `maximize` uses 0.7, see the module on why).
        increase: factor of a rejected trial (> 1).
        lipschitz: the first $L$ (> 0), or None to estimate it.
        inexact: approximate (True) or exact projections.
        restart: reset the momentum when $F$ decreases.
        check_every: compute the certificate every this many steps (static).
        bound: `"iterate"` (the gap of $x_{t+1}$, one product with $M^\top$ per step) or
            `"extrapolated"` (the bound from $y_t$'s supergradient; see the module).
        certify_below: with `bound="extrapolated"`, also compute the iterate's gap on
            steps where the relative bound is at most this (0: never; `maximize` uses
            10 tol).
        first_lipschitz: with `lipschitz=None`, how the first $L$ is estimated (static):
            `"gradient"` (a finite difference along $g$) or `"step"` (then the secant
            along the first projected step, one more supergradient; `maximize` uses
            it, see the module).
        max_trials: line-search trials per step (static); running out: `BREAKDOWN`.

    `delta`, `shrink`, `increase`, `lipschitz` and `certify_below` are traced
    hyperparameters (a sweep does not recompile).
    """
    _check("delta", delta, low=0)
    _check("shrink", shrink, low=0, high=1)
    _check("increase", increase, low=1)
    _check("lipschitz", lipschitz, low=0)
    _check("certify_below", certify_below, low=0, strict_low=False)
    return AAPGA(
        accelerated=True,
        inexact=bool(inexact),
        restart=bool(restart),
        check_every=_static_int("check_every", check_every),
        bound=_bound_kind(bound),
        first_lipschitz=_first_kind(first_lipschitz),
        max_trials=_static_int("max_trials", max_trials),
        delta=delta,
        certify_below=certify_below,
        shrink=shrink,
        increase=increase,
        lipschitz=lipschitz,
    )


def pga(
    *,
    shrink: float | jax.Array = 0.9,
    increase: float | jax.Array = 2.0,
    lipschitz: float | jax.Array | None = None,
    max_trials: int = 30,
) -> AAPGA:
    r"""Plain projected gradient ascent $x_{t+1} = \Pi_P(x_t + g(x_t)/L)$, exact projections.

    The baseline of `aapga`, with the same backtracking, certificate and `args`
    (see `aapga` for the arguments).
    """
    _check("shrink", shrink, low=0, high=1)
    _check("increase", increase, low=1)
    _check("lipschitz", lipschitz, low=0)
    return AAPGA(
        accelerated=False,
        inexact=False,
        restart=False,
        check_every=1,
        max_trials=_static_int("max_trials", max_trials),
        delta=1e-3,
        shrink=shrink,
        increase=increase,
        lipschitz=lipschitz,
    )
