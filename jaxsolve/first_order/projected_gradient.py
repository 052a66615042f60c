r"""Projected gradient descent with backtracking, FISTA acceleration and adaptive restart.

Problem: $\min_{x \in C} f(x)$ for a smooth $f$ and a closed convex set
$C$ with a Euclidean projection $P_C$ (e.g. from `jaxsolve.projections`).

Iteration (Beck and Teboulle, "A fast iterative shrinkage-thresholding algorithm for
linear inverse problems", SIAM J. Imaging Sci. 2009; Nesterov 1983):

$$
x_{k+1} = P_C\big(y_k - \tfrac{1}{L_k} \nabla f(y_k)\big), \quad
t_{k+1} = \tfrac{1 + \sqrt{1 + 4 t_k^2}}{2}, \quad
y_{k+1} = x_{k+1} + \tfrac{t_k - 1}{t_{k+1}} (x_{k+1} - x_k)
$$

(``accelerated=False``: $y_k = x_k$, plain projected gradient).

* Step size: fixed $1/L$ = ``stepsize``, or backtracking when ``stepsize=None``:
  each step first tries $L \cdot$ ``shrink`` (so the estimate can decrease) and
  accepts when the local curvature $\hat L \le L$, with
  $\hat L = 2\,(f(x_+) - f(y) - \langle \nabla f(y), d\rangle)/\|d\|^2$,
  $d = x_+ - y$ (the sufficient-decrease test of Beck and Teboulle), or, when that
  difference of function values is lost in rounding, the gradient form
  $\hat L = \langle \nabla f(x_+) - \nabla f(y), d\rangle / \|d\|^2$ (as TFOCS
  does: Becker, Candes and Grant, Math. Prog. Comput. 2011). A rejected trial sets
  $L \leftarrow \max(\hat L,\ \text{increase} \cdot L)$.
* Adaptive restart (O'Donoghue and Candes, "Adaptive restart for accelerated gradient
  schemes", Found. Comput. Math. 2015): ``restart="gradient"`` resets the momentum
  when $\langle y_k - x_{k+1}, x_{k+1} - x_k\rangle > 0$; ``"function"`` when
  $f(x_{k+1}) > f(x_k)$ (by more than rounding, $16\,\epsilon |f(x_k)|$); ``None`` never.
* ``error`` is the norm of the gradient mapping at the iterate,
  $\|G_{1/L}(x)\| = L\,\|x - P_C(x - \nabla f(x)/L)\|$, which is zero exactly at
  the solutions (first-order stationarity over $C$). It certifies only while $1/L$ is
  representable: a line search that needs $L > 10^{-3}/\text{tiny}$ (the smallest normal
  float; $1/L$ would be flushed to zero and the measure read 0) ends BREAKDOWN, as on an
  objective unbounded below near the boundary of its domain ($\sum_i \log x_i$ on a box
  around 0).

Differentiation: ``loop="fixed"`` unrolls the iteration (the step size and the
restart decisions are treated as constants, the line search is not differentiated);
`minimize_projected` differentiates the solution implicitly through the fixed
point $x = P_C(x - \nabla f(x)/L)$ (``adjoint=Implicit()``, the default of
``jaxsolve.solve`` for this solver, through `ProjectedGradient.optimality`).

One module, just over 500 lines: the line search (`_backtrack`), the restart tests and
the gradient-mapping measure share the step's private helpers (`_split`, `_project`,
`_value_and_grad`) and the `PGState` layout; split, each would import the others'
internals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsolve.core import Implicit, Solution, solve
from jaxsolve.core.implicit import known_value
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.status import Status
from jaxsolve.core.validation import check_floating, check_nonempty, is_concrete

__all__ = [
    "projected_gradient",
    "minimize_projected",
    "ProjectedGradient",
    "PGState",
    "PGInfo",
]

sg = jax.lax.stop_gradient


class PGState(NamedTuple):
    """State of `projected_gradient`.

    Attributes:
        x: the iterate (feasible: an output of the projection).
        iter_num: steps taken.
        error: gradient-mapping norm at ``x``.
        status: ``BREAKDOWN`` if a line search ran out of trials, else ``SUCCESS``.
        y: the extrapolated point (``x`` without acceleration).
        f_y: objective value at ``y`` (real scalar, the iterate's dtype).
        g_y: gradient at ``y`` (a pytree shaped like ``x``).
        f_x: objective value at ``x`` (what ``restart="function"`` compares).
        momentum: FISTA's $t_k$ (real scalar; 1 after a restart).
        lipschitz: the current estimate $L$ (the step size is $1/L$).
    """

    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    y: Any
    f_y: jax.Array
    g_y: Any
    f_x: jax.Array
    momentum: jax.Array
    lipschitz: jax.Array


class PGInfo(NamedTuple):
    """Per-step diagnostics of `projected_gradient` (``Solution.info`` with ``history=True``).

    Attributes:
        lipschitz: the $L$ the step used (accepted by the line search, or $1/$``stepsize``).
        trials: int32, the line-search trials the step took (1 with a fixed step).
        restarted: bool, whether the momentum was reset at this step.
    """

    lipschitz: jax.Array
    trials: jax.Array
    restarted: jax.Array


# --- pytree arithmetic: optax.tree --------------------------------------------------------


def _axpy(a, x, y):
    """``a * x + y`` over pytrees."""
    return optax.tree.add_scale(y, a, x)


def _dtype(x):
    return jnp.result_type(*jax.tree.leaves(x))


# --- the method ------------------------------------------------------------------------------


def _split(args, split_args):
    if split_args:
        if not (isinstance(args, tuple | list) and len(args) == 2):
            raise ValueError(
                "with split_args=True, args must be a pair (fun_args, projection_args)"
            )
        return args[0], args[1]
    return args, None


def _project(projection, z, pargs, split_args):
    return projection(z, pargs) if split_args else projection(z)


def _value_and_grad(fun, x, fargs, dtype):
    f, g = jax.value_and_grad(fun)(x, fargs)
    return jnp.asarray(f, dtype), g


def _grad_map_norm(projection, x, g, L, pargs, split_args):
    """``L * ||x - P(x - g/L)||``: the gradient-mapping norm (not differentiated)."""
    x, g, L = sg(x), sg(g), sg(L)
    p = _project(projection, _axpy(-1 / L, g, x), pargs, split_args)
    return L * optax.tree.norm(optax.tree.sub(x, p))


def _probe_lipschitz(fun, x, g, fargs, dtype):
    """Curvature along the gradient: ``||grad f(x + h v) - grad f(x)|| / h``, ``v = g/||g||``."""
    x, g = sg(x), sg(g)
    g_norm = optax.tree.norm(g)
    h = 1e-3 * (1 + optax.tree.norm(x))
    v = jax.tree.map(lambda u: u / jnp.where(g_norm > 0, g_norm, 1), g)
    _, g_probe = _value_and_grad(fun, _axpy(h, v, x), fargs, dtype)
    L = optax.tree.norm(optax.tree.sub(g_probe, g)) / h
    ok = jnp.isfinite(L) & (L > jnp.finfo(dtype).tiny ** 0.5) & (g_norm > 0)
    return jnp.where(ok, L, jnp.ones((), dtype)).astype(dtype)


def _backtrack(fun, projection, y, f_y, g_y, L0, fargs, pargs, increase, *, split_args, max_trials):
    """Find ``L`` with ``local curvature <= L`` at ``x+ = P(y - g/L)`` (not differentiated)."""
    y, f_y, g_y, L0 = sg(y), sg(f_y), sg(g_y), sg(L0)
    dtype = f_y.dtype
    eps = jnp.finfo(dtype).eps

    def trial(L):
        x_trial = _project(projection, _axpy(-1 / L, g_y, y), pargs, split_args)
        d = optax.tree.sub(x_trial, y)
        f_trial, g_trial = _value_and_grad(fun, x_trial, fargs, dtype)
        d_sq = optax.tree.norm(d, squared=True)
        d_sq_safe = jnp.where(d_sq > 0, d_sq, 1)
        delta = f_trial - f_y - optax.tree.vdot(g_y, d)
        reliable = jnp.abs(delta) >= 100 * eps * jnp.maximum(jnp.abs(f_trial), jnp.abs(f_y))
        local = jnp.where(
            reliable,
            2 * delta / d_sq_safe,
            optax.tree.vdot(optax.tree.sub(g_trial, g_y), d) / d_sq_safe,
        )
        # d = 0: y is already a fixed point of the step, nothing to check
        local = jnp.where(d_sq > 0, local, jnp.zeros_like(local))
        return x_trial, f_trial, g_trial, local

    # One traced copy of the trial (smaller program, faster compile): k = 0 is the first try.
    def cond(carry):
        L, _, _, _, local, k = carry
        return (k == 0) | ((local > L) & (k < max_trials))

    def body(carry):
        L, _, _, _, local, k = carry
        L = jnp.where(k == 0, L, jnp.maximum(local, increase * L))
        x_trial, f_trial, g_trial, local = trial(L)
        return L, x_trial, f_trial, g_trial, local, k + 1

    init = (L0, y, f_y, g_y, jnp.asarray(jnp.inf, dtype), jnp.int32(0))
    L, x_trial, f_trial, g_trial, local, k = jax.lax.while_loop(cond, body, init)
    failed = local > L  # NaN is not a failure of the search: the driver reports NONFINITE
    return L, x_trial, f_trial, g_trial, k, failed


class ProjectedGradient(AbstractSolver):
    """Projected gradient / FISTA (see the module docstring); built by `projected_gradient`.

    Fields: ``fun``, ``projection`` and the structural options are static;
    ``stepsize`` (None: backtracking), ``shrink`` and ``increase`` are traced
    hyperparameters, so a sweep over them reuses one compilation.
    """

    fun: Callable = eqx.field(static=True)
    projection: Callable = eqx.field(static=True)
    stepsize: Any = None
    shrink: Any = 0.9
    increase: Any = 2.0
    accelerated: bool = eqx.field(static=True, default=True)
    restart: str | None = eqx.field(static=True, default="gradient")
    split_args: bool = eqx.field(static=True, default=False)
    max_trials: int = eqx.field(static=True, default=30)
    implicit_solve: Any = eqx.field(static=True, default="gmres")

    def init(self, x0, args) -> PGState:
        fun, projection, split_args = self.fun, self.projection, self.split_args
        fargs, pargs = _split(args, split_args)
        dtype = _dtype(x0)
        x = _project(projection, x0, pargs, split_args)
        shape = lambda t: jax.tree.map(lambda v: jnp.shape(v), t)  # noqa: E731
        if jax.tree.structure(x) != jax.tree.structure(x0) or shape(x) != shape(x0):
            raise TypeError(
                f"projection must return a point shaped like x0 ({shape(x0)}), got {shape(x)}"
            )
        f, g = _value_and_grad(fun, x, fargs, dtype)
        if self.stepsize is None:
            L = _probe_lipschitz(fun, x, g, fargs, dtype)
        else:
            L = 1 / hyper(self.stepsize, dtype)
        err = _grad_map_norm(projection, x, g, L, pargs, split_args)
        return PGState(
            x=x,
            iter_num=jnp.int32(0),
            error=err.astype(dtype),
            status=jnp.int32(Status.SUCCESS),
            y=x,
            f_y=f,
            g_y=g,
            f_x=f,
            momentum=jnp.ones((), dtype),
            lipschitz=sg(L),
        )

    def step(self, state: PGState, args) -> tuple[PGState, PGInfo]:
        fun, projection, split_args = self.fun, self.projection, self.split_args
        accelerated, restart = self.accelerated, self.restart
        backtracking = self.stepsize is None
        fargs, pargs = _split(args, split_args)
        dtype = state.f_y.dtype
        y, g_y = state.y, state.g_y
        status = state.status
        if backtracking:
            L, x_trial, f_new, g_new, trials, failed = _backtrack(
                fun,
                projection,
                y,
                state.f_y,
                g_y,
                # floor: on a locally linear f the estimate may shrink for ever; 1/L must stay finite
                jnp.maximum(
                    state.lipschitz * hyper(self.shrink, dtype), jnp.finfo(dtype).tiny ** 0.5
                ),
                fargs,
                pargs,
                hyper(self.increase, dtype),
                split_args=split_args,
                max_trials=self.max_trials,
            )
            L = sg(L)
            # 1/L past the normal range: the gradient mapping is no certificate any more
            runaway = L > 1e-3 / jnp.finfo(dtype).tiny
            status = jnp.where(failed | runaway, jnp.int32(Status.BREAKDOWN), status)
        else:
            L = 1 / hyper(self.stepsize, dtype)
            trials = jnp.int32(1)
        # The differentiable update (the line search only chose L).
        z = _axpy(-1 / L, g_y, y)
        if backtracking:
            # the line search already projected z: its value, P's derivatives
            x_new = known_value(
                x_trial, partial(_project, projection, split_args=split_args), (z, pargs)
            )
        else:
            x_new = _project(projection, z, pargs, split_args)
        if not backtracking:
            if accelerated:
                f_new, g_new = _value_and_grad(fun, sg(x_new), fargs, dtype)
            else:
                f_new, g_new = _value_and_grad(fun, x_new, fargs, dtype)
        err = _grad_map_norm(projection, x_new, g_new, L, pargs, split_args)

        t = state.momentum
        if accelerated:
            t_next = (1 + jnp.sqrt(1 + 4 * t * t)) / 2
            if restart == "gradient":
                restarted = (
                    optax.tree.vdot(
                        sg(optax.tree.sub(y, x_new)), sg(optax.tree.sub(x_new, state.x))
                    )
                    > 0
                )
            elif restart == "function":
                # an increase at rounding level is noise, not a reason to restart
                noise = 16 * jnp.finfo(dtype).eps * jnp.abs(state.f_x)
                restarted = sg(f_new) - state.f_x > noise
            else:
                restarted = jnp.asarray(False)
            beta = jnp.where(restarted, 0, (t - 1) / t_next).astype(dtype)
            t_next = jnp.where(restarted, 1, t_next).astype(dtype)
            y_next = _axpy(beta, optax.tree.sub(x_new, state.x), x_new)
            f_y_next, g_y_next = _value_and_grad(fun, y_next, fargs, dtype)
        else:
            restarted = jnp.asarray(False)
            t_next = t
            y_next = x_new
            if backtracking:  # the line search's gradient is not differentiable: recompute
                f_y_next, g_y_next = _value_and_grad(fun, x_new, fargs, dtype)
            else:
                f_y_next, g_y_next = f_new, g_new
        new = PGState(
            x=x_new,
            iter_num=state.iter_num + 1,
            error=err.astype(dtype),
            status=status,
            y=y_next,
            f_y=f_y_next,
            g_y=g_y_next,
            f_x=sg(f_new),
            momentum=t_next,
            lipschitz=L.astype(dtype),
        )
        return new, PGInfo(lipschitz=L, trials=trials, restarted=restarted)

    def optimality(self, x, args):
        r"""The fixed-point residual $P_C(x - s\nabla f(x)) - x$, zero at a solution.

        $s$ is the fixed step, or $1/\hat L$ from a curvature probe at
        ``x`` (treated as a constant: at a fixed point the map does not depend on
        $s$ to first order, so any positive step gives the same derivatives).
        """
        fargs, pargs = _split(args, self.split_args)
        dtype = _dtype(x)
        f, g = _value_and_grad(self.fun, x, fargs, dtype)
        if self.stepsize is None:
            s = 1 / _probe_lipschitz(self.fun, x, g, fargs, dtype)
        else:
            s = hyper(sg(self.stepsize), dtype)
        z = _axpy(-s, g, x)
        return optax.tree.sub(_project(self.projection, z, pargs, self.split_args), x)


_RESTARTS = ("gradient", "function", None)


def _check_hyper(stepsize, shrink, increase, restart, max_trials):
    def concrete_value(name, v):
        if not is_concrete(v):
            return None
        arr = np.asarray(v)
        if arr.shape != ():
            raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
            raise TypeError(f"{name} must be a real number, got {v!r}")
        if not np.isfinite(arr):
            raise ValueError(f"{name} must be finite, got {v!r}")
        return float(arr)

    if stepsize is not None:
        s = concrete_value("stepsize", stepsize)
        if s is not None and s <= 0:
            raise ValueError(
                f"stepsize must be positive (or None for backtracking), got {stepsize!r}"
            )
    s = concrete_value("shrink", shrink)
    if s is not None and not 0 < s <= 1:
        raise ValueError(f"shrink must be in (0, 1], got {shrink!r}")
    s = concrete_value("increase", increase)
    if s is not None and not s > 1:
        raise ValueError(f"increase must be > 1, got {increase!r}")
    if restart not in _RESTARTS:
        raise ValueError(f"restart must be one of {_RESTARTS}, got {restart!r}")
    if (
        isinstance(max_trials, bool)
        or not isinstance(max_trials, int | np.integer)
        or max_trials < 1
    ):
        raise ValueError(f"max_trials must be a positive int, got {max_trials!r}")


def projected_gradient(
    fun: Callable,
    projection: Callable,
    *,
    stepsize: float | jax.Array | None = None,
    accelerated: bool = True,
    restart: str | None = "gradient",
    shrink: float | jax.Array = 0.9,
    increase: float | jax.Array = 2.0,
    max_trials: int = 30,
    split_args: bool = False,
) -> ProjectedGradient:
    r"""Projected gradient (FISTA with backtracking and adaptive restart) as a `Solver`.

    Minimizes ``fun(x, args)`` over the set whose Euclidean projection is ``projection``.
    See the module docstring for the iteration, the line search, the restart rules and
    the optimality measure ``error`` (gradient-mapping norm $L\|x - P(x - \nabla f(x)/L)\|$).

    Args:
        fun: smooth objective ``fun(x, fun_args) -> scalar`` (x any pytree of floats).
        projection: ``projection(x) -> x`` (``split_args=False``) or
            ``projection(x, projection_args) -> x`` (``split_args=True``), e.g. a function of
            `jaxsolve.projections`.
        stepsize: fixed step $1/L$ (> 0), or ``None`` for backtracking.
        accelerated: FISTA momentum (True) or plain projected gradient (False).
        restart: ``"gradient"`` (default), ``"function"`` or ``None``: adaptive restart
            of the momentum (O'Donoghue and Candes 2015).
        shrink: backtracking tries ``shrink * L`` first at every step (in (0, 1]; 1 keeps
            $L$ non-decreasing, as in Beck and Teboulle).
        increase: factor by which a rejected trial at least grows $L$ (> 1).
        max_trials: line-search trials per step (static); running out gives ``BREAKDOWN``.
        split_args: if True, ``args`` given to ``solve`` is a pair
            ``(fun_args, projection_args)`` and ``projection`` receives the second, so the
            set itself (a radius, a budget, bounds) can be batched or differentiated.

    ``stepsize``, ``shrink`` and ``increase`` are numeric hyperparameters (array leaves:
    changing them never recompiles ``jaxsolve.solve``); the rest is structural.

    Returns:
        A `Solver` whose state is `PGState`.
    """
    if not callable(fun):
        raise TypeError(f"fun must be callable fun(x, args), got {type(fun).__name__}")
    if not callable(projection):
        raise TypeError(f"projection must be callable, got {type(projection).__name__}")
    _check_hyper(stepsize, shrink, increase, restart, max_trials)
    return ProjectedGradient(
        fun=fun,
        projection=projection,
        stepsize=stepsize,
        shrink=shrink,
        increase=increase,
        accelerated=bool(accelerated),
        restart=restart,
        split_args=bool(split_args),
        max_trials=int(max_trials),
    )


def minimize_projected(
    fun: Callable,
    projection: Callable,
    x0: Any,
    args: Any = None,
    *,
    tol: float | jax.Array | None = None,
    max_steps: int = 1000,
    throw: bool = False,
    implicit_solve: str | Callable = "gmres",
    **options: Any,
) -> Solution:
    r"""Minimize ``fun`` over a set with `projected_gradient`; differentiable implicitly.

    Runs `jaxsolve.solve` with ``projected_gradient(fun, projection, **options)``,
    with ``adjoint=Implicit()``: at a solution,
    $x^\star = T(x^\star, \theta) = P_C(x^\star - s\nabla f(x^\star, \theta))$, and
    the implicit function theorem gives
    $(I - \partial_x T)\,\dot x = \partial_\theta T\,\dot\theta$
    (`ProjectedGradient.optimality`; ``jax.grad`` and ``jax.jvp`` both work and
    the iterations are not stored). A plain ``jaxsolve.solve`` of
    `projected_gradient` differentiates the same way by default. The Jacobian of the projection enters through
    autodiff of ``projection`` (exact for `jaxsolve.projections`). This needs the
    solution to be accurate (use a tight ``tol``) and, where the projection is
    piecewise linear, a point where the active set is locally constant.

    Args:
        fun: objective ``fun(x, fun_args) -> scalar``, as in `projected_gradient`.
        projection: as in `projected_gradient`.
        x0: starting point (a pytree of floating arrays).
        args: problem data (``(fun_args, projection_args)`` with ``split_args=True``).
        tol: tolerance on the gradient-mapping norm (passed to `jaxsolve.solve`).
        max_steps: step budget (passed to `jaxsolve.solve`).
        throw: raise on a failure status (passed to `jaxsolve.solve`).
        implicit_solve: linear solver of the implicit system (``"gmres"``, ``"dense"``,
            ``"bicgstab"`` or a callable, see `jaxsolve.core.linear_solve`).
        **options: keyword arguments of `projected_gradient`.

    Returns:
        A `Solution`.
    """
    check_nonempty("x0", x0)
    check_floating("x0", x0)
    split_args = bool(options.get("split_args", False))
    fargs, _ = _split(args, split_args)
    try:
        out = jax.eval_shape(fun, x0, fargs)
    except Exception as err:  # shape errors from the user's function, before tracing the solve
        raise ValueError(f"fun(x0, args) failed: x0 and args do not fit fun ({err})") from err
    if np.shape(out) != () or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(f"fun must return a real scalar, got {out.shape} {out.dtype}")
    solver = projected_gradient(fun, projection, **options)
    solver = dataclasses.replace(solver, implicit_solve=implicit_solve)
    return solve(solver, x0, args, tol=tol, max_steps=max_steps, throw=throw, adjoint=Implicit())
