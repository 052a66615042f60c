r"""Sequential quadratic programming whose subproblems are always feasible (FlexQP).

Problem (``fun``, ``eq``, ``ineq`` smooth; ``lb``/``ub`` optional bounds on ``x``):

$$
\min_x f(x) \quad\text{s.t.}\quad c_E(x) = 0,\quad c_I(x) \le 0,\quad lb \le x \le ub .
$$

Iteration (line-search SQP; Nocedal and Wright, *Numerical Optimization*, 2nd ed.,
ch. 18; the subproblem solver of Oshin et al., "Deep FlexQP", ICLR 2026): at $x_k$
with a positive definite model $B_k$ of the Lagrangian's Hessian, the step $d$
solves the QP

$$
\min_d\ \tfrac12 d^\top B_k d + \nabla f^\top d \quad\text{s.t.}\quad
c_E + J_E d = 0,\quad c_I + J_I d \le 0,\quad lb - x_k \le d \le ub - x_k
$$

by FlexQP, which minimizes the exact $\ell_1$ (elastic) relaxation of the QP. When
the linearization is infeasible (a start inside an obstacle, a rank-deficient
$J_E$) the subproblem does not abort: $d$ is the step of least $\ell_1$ violation
of the linearized constraints, so the method keeps reducing the violation, the
elastic mode of SNOPT without a mode switch.

* Merit and line search: the $\ell_1$ merit $\phi_\nu(x) = f(x) + \nu V(x)$,
  $V(x) = \|c_E\|_1 + \|c_I^+\|_1 + \|(lb - x)^+\|_1 + \|(x - ub)^+\|_1$, and
  Armijo backtracking $\phi_\nu(x + t d) \le \phi_\nu(x) + \eta\, t\, D$ with
  $D = \nabla f^\top d - \nu\,(V(x) - V_{\mathrm{lin}}(d))$, the directional
  derivative of the merit's linear model. Penalty: $\nu \leftarrow
  \max(\nu, 1.1 \|y\|_\infty)$ with $y$ the subproblem's multipliers. Why this
  suffices, in one line: $d$ minimizes the strongly convex relaxed model
  $\nabla f^\top d + \tfrac12 d^\top B d + \mu V_{\mathrm{lin}}(d)$ with $\mu \ge
  \|y\|_\infty$, so comparing with $d = 0$ gives $D \le -d^\top B d < 0$ whenever
  $\nu \ge \mu$ or the subproblem is feasible; a trial point where $f$ or a
  constraint is NaN is rejected like an increase.
* Hessian model: ``"bfgs"`` (default), Powell's damped BFGS update of $B$ with
  $s = x_{k+1} - x_k$, $r = \nabla_x L(x_{k+1}, y) - \nabla_x L(x_k, y)$ (damping
  keeps $B$ positive definite: $\theta = 1$ if $s^\top r \ge 0.2\, s^\top B s$,
  else $0.8\, s^\top B s / (s^\top B s - s^\top r)$, $r \leftarrow \theta r +
  (1-\theta) B s$); ``"exact"``, the Lagrangian's Hessian $H$ convexified along the
  active constraints, $H + \rho J_A^\top J_A$ (which leaves the subproblem's
  solution unchanged where $H$ is positive definite on the null space of $J_A$, so
  Newton's local rate is kept; $\rho = 10 \max(1, \|H\|_{\max}) /
  \|J_A^\top J_A\|_{\max}$), then its eigenvalues replaced by
  $\max(|\lambda|, \delta)$, $\delta = 10^{-8} \max(1, \max|\lambda|)$. A callable
  ``hessian(x, y, args) -> B`` gives a user model (e.g. Gauss-Newton $J_r^\top J_r$);
  it must be positive definite.
* Multipliers: the subproblem's $y$ (OSQP's sign convention, rows ordered
  $[E; I; \text{bounds}]$: $\nabla f + J^\top y = 0$, $y_I \ge 0$, bound rows
  positive at an active upper bound).
* ``error``, the KKT residual (absolute, in the problem's units):
  $\max(\|\nabla f + J_E^\top y_E + J_I^\top y_I + y_B\|_\infty,\ \|V\|_\infty,\
  \max_i |y_{I,i}\, c_{I,i}|,\ \max_i (-y_{I,i})^+,\ \text{bound complementarity})$,
  so ``SUCCESS`` means a KKT point to ``tol``: feasible, stationary, complementary.
  An infeasible problem can never end ``SUCCESS``: it ends ``INFEASIBLE`` when the
  subproblem certifies its linearization infeasible and the step has vanished (a
  stationary point of the violation, returned as the least-violation point), else
  ``MAX_STEPS``. A line search without an acceptable step ends ``BREAKDOWN``.

Warm starts: each subproblem starts from the previous one's multipliers, ADMM
penalty and elastic weight (`jaxsolve.qp.WarmStart`). Everything runs in one
compiled program, so ``jax.vmap`` over problem data solves a batch.

One module: the subproblem's assembly, the merit line search and the KKT residual are
methods over the same user functions, bounds and violation measure (`SQP._values`,
`_bounds`, `_violation`) and the `SQPState` layout; split, each would import the others'
internals. The Hessian models are pure functions in `jaxsolve.nlp.hessian`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Solution, Status, solve
from jaxsolve.core.compile_options import LOOP_EMITTERS_O1
from jaxsolve.core.driver import default_tol
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_floating, check_not_half, is_concrete
from jaxsolve.nlp.hessian import convexified_hessian, damped_bfgs_update
from jaxsolve.qp import QP, WarmStart, single_qp_solver
from jaxsolve.qp.solve import solve_lanewise

__all__ = ["SQP", "SQPState", "SQPInfo", "sqp", "minimize_sqp"]

_HESSIANS = ("bfgs", "exact")


class SQPState(NamedTuple):
    r"""State of `sqp`.

    Attributes:
        x: the iterate ``(n,)`` (inside the bounds exactly: clipped).
        iter_num: int32 scalar, SQP iterations taken.
        error: the KKT residual (module docstring) at ``x`` with multipliers ``y``.
        status: int32 `Status`, set by `SQP.step`: ``BREAKDOWN`` when the line search
            found no acceptable step (and the step was not negligible), ``INFEASIBLE``
            when the subproblem certified its linearization infeasible, the step has
            vanished and ``x`` still violates the constraints; else ``SUCCESS``.
        f: objective value $f(x)$, real scalar.
        grad: its gradient $\nabla f(x)$, ``(n,)``.
        ce: the equality constraint values $c_E(x)$, ``(m_E,)`` (``ce = 0`` wanted).
        ci: the inequality constraint values $c_I(x)$, ``(m_I,)`` (``ci <= 0`` wanted).
        je: the Jacobian $J_E$ of ``ce`` at ``x``, ``(m_E, n)``.
        ji: the Jacobian $J_I$ of ``ci`` at ``x``, ``(m_I, n)``.
        y: multipliers of the rows ``[E; I; bounds]`` (OSQP sign convention).
        hess: the positive definite Hessian model $B$.
        penalty: the merit's $\nu$.
        violation: $\|V\|_\infty$ at ``x``.
        warm: the subproblem's warm start (multipliers, ADMM penalty, elastic weight).
        recent: ``(memory, 2)`` objective values and l1 violations of the last
            ``memory`` iterates (the nonmonotone line search's reference).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    f: jax.Array
    grad: jax.Array
    ce: jax.Array
    ci: jax.Array
    je: jax.Array
    ji: jax.Array
    y: jax.Array
    hess: jax.Array
    penalty: jax.Array
    violation: jax.Array
    warm: WarmStart
    recent: jax.Array


class SQPInfo(NamedTuple):
    """Per-step diagnostics of `sqp`.

    Attributes:
        step_size: the accepted step length $t \\in (0, 1]$ along $d$ (0 when the line
            search found none).
        trials: int32, merit evaluations of the line search (1 when the full step was
            accepted; ``max_linesearch`` when none was).
        qp_status: int32 `Status` of the QP subproblem's solve (``SUCCESS`` without
            constraints, where no subproblem is solved).
        qp_steps: int32, the subproblem solver's steps (0 without constraints).
        merit: the $\\ell_1$ merit $\\phi_\\nu(x) = f(x) + \\nu V(x)$ at the step's start,
            with the step's raised penalty $\\nu$.
    """

    step_size: jax.Array
    trials: jax.Array
    qp_status: jax.Array
    qp_steps: jax.Array
    merit: jax.Array


class _Eval(NamedTuple):
    f: jax.Array
    g: jax.Array
    ce: jax.Array
    ci: jax.Array
    je: jax.Array
    ji: jax.Array


def _real_output(name: str, value, dtype):
    """A user function's output as ``dtype``, refusing complex (and non-numeric) values."""
    value = jnp.asarray(value)
    if not (jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer)):
        raise TypeError(f"{name} must return real values, got dtype {value.dtype}")
    return value.astype(dtype)


def _check_bounds(lb, ub) -> None:
    """lb/ub: real, NaN-free, lb <= ub (values checked when concrete)."""
    for name, v in (("lb", lb), ("ub", ub)):
        if v is None:
            continue
        dtype = jnp.result_type(v)
        if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
            raise TypeError(f"{name} must be real, got dtype {dtype}")
        if jnp.ndim(v) > 1:
            raise ValueError(f"{name} must be a scalar or a vector (n,), got shape {jnp.shape(v)}")
        if is_concrete(v) and np.any(np.isnan(np.asarray(v, np.float64))):
            raise ValueError(f"{name} contains NaN")
    if lb is not None and ub is not None and is_concrete((lb, ub)):
        lo, up = np.asarray(lb, np.float64), np.asarray(ub, np.float64)
        if lo.shape == up.shape or lo.ndim == 0 or up.ndim == 0:
            if np.any(lo > up):
                raise ValueError("lb must be <= ub (an empty box has no feasible point)")


def _check_scalar(name, value, low, high=None, *, allow_none=False):
    """A concrete hyperparameter in (low, high) (open), naming it; tracers pass."""
    if value is None and allow_none:
        return
    if not is_concrete(value):
        return
    arr = np.asarray(value)
    bad = (
        arr.shape != () or not np.isfinite(arr) or arr <= low or (high is not None and arr >= high)
    )
    if bad:
        where = f"in ({low}, {high})" if high is not None else f"> {low}"
        raise ValueError(f"{name} must be a finite scalar {where}, got {value!r}")


def _pos(v):
    return jnp.maximum(v, 0)


class SQP(AbstractSolver):
    """Line-search SQP with FlexQP subproblems (see the module docstring); built by `sqp`.

    Static: ``fun``, ``eq``, ``ineq``, ``hessian`` (a name or a callable),
    ``max_linesearch``, ``qp_max_steps``. Traced: ``lb``, ``ub`` (arrays or floats),
    ``armijo``, ``backtrack``, ``penalty`` (the initial $\\nu$), ``qp_tol`` and the
    subproblem solver's own hyperparameters (``qp_solver``, a FlexQP solver).
    """

    fun: Callable = eqx.field(static=True)
    qp_solver: Any
    eq: Callable | None = eqx.field(static=True, default=None)
    ineq: Callable | None = eqx.field(static=True, default=None)
    lb: Any = None
    ub: Any = None
    hessian: Any = eqx.field(static=True, default="bfgs")
    armijo: Any = 1e-4
    backtrack: Any = 0.5
    penalty: Any = 1.0
    qp_tol: Any = None
    qp_max_steps: int = eqx.field(static=True, default=200)
    max_linesearch: int = eqx.field(static=True, default=30)
    memory: int = eqx.field(static=True, default=4)

    # XLA options of the driver's program (the protocol's compiler_options hook, FlexQP's
    # set): the SQP program holds a whole FlexQP solve, so it compiles like FlexQP's.
    # Same-process A/B (2026-12-05, bench/results/compile.md): HS71 2.9-3.5 -> 1.4-1.6
    # CPU s, unicycle T = 30 5.5 -> 4.6-4.9; steady 0.97x, same steps, x to 5e-15.
    compiler_options: ClassVar[dict] = LOOP_EMITTERS_O1

    # --- evaluation ------------------------------------------------------------------

    def _values(self, x, args):
        """``(f, c_E, c_I)`` at ``x`` (empty vectors for absent constraints)."""
        dtype = x.dtype
        f = _real_output("fun", self.fun(x, args), dtype)
        if f.shape != ():
            raise TypeError(f"fun must return a real scalar f(x, args), got shape {f.shape}")
        ce = (
            jnp.zeros((0,), dtype)
            if self.eq is None
            else _real_output("eq", self.eq(x, args), dtype)
        )
        ci = (
            jnp.zeros((0,), dtype)
            if self.ineq is None
            else _real_output("ineq", self.ineq(x, args), dtype)
        )
        return f, jnp.reshape(ce, (-1,)), jnp.reshape(ci, (-1,))

    def _evaluate(self, x, args) -> _Eval:
        """Values, gradient and Jacobians at ``x`` from one evaluation of the functions."""

        def stacked(z):
            f, ce, ci = self._values(z, args)
            return jnp.concatenate([f[None], ce, ci]), (f, ce, ci)

        rows = jax.eval_shape(lambda z: stacked(z)[0], x).shape[0]
        # reverse mode when there are fewer outputs than variables
        jac_fn = jax.jacrev if rows < x.shape[0] else jax.jacfwd
        jac, (f, ce, ci) = jac_fn(stacked, has_aux=True)(x)
        me = ce.shape[0]
        return _Eval(f, jac[0], ce, ci, jac[1 : 1 + me], jac[1 + me :])

    def _bounds(self, x):
        """``(lb, ub)`` as ``(n,)`` arrays in ``x``'s dtype, or ``None`` without bounds."""
        if self.lb is None and self.ub is None:
            return None
        n, dtype = x.shape[0], x.dtype
        lb = -jnp.inf if self.lb is None else self.lb
        ub = jnp.inf if self.ub is None else self.ub
        for name, v in (("lb", lb), ("ub", ub)):
            if jnp.ndim(v) > 1 or jnp.shape(v) not in ((), (1,), (n,)):
                raise ValueError(
                    f"{name} must be a scalar or have shape ({n},) like x0, got {jnp.shape(v)}"
                )
        lb = jnp.broadcast_to(hyper(lb, dtype), (n,))
        ub = jnp.broadcast_to(hyper(ub, dtype), (n,))
        return lb, ub

    def _violation(self, x, ce, ci, ord_one: bool):
        bounds = self._bounds(x)
        parts = [jnp.abs(ce), _pos(ci)]
        if bounds is not None:
            lb, ub = bounds
            parts += [_pos(lb - x), _pos(x - ub)]
        v = jnp.concatenate(parts)
        if v.shape[0] == 0:
            return jnp.zeros((), x.dtype)
        return jnp.sum(v) if ord_one else jnp.max(v)

    def _lagrangian_grad(self, e: _Eval, y):
        me, mi = e.ce.shape[0], e.ci.shape[0]
        gl = e.g + e.je.T @ y[:me] + e.ji.T @ y[me : me + mi]
        if y.shape[0] > me + mi:
            gl = gl + y[me + mi :]
        return gl

    def _kkt(self, x, e: _Eval, y):
        """The KKT residual: stationarity, violation, complementarity, dual sign."""
        me, mi = e.ce.shape[0], e.ci.shape[0]
        terms = [
            jnp.max(jnp.abs(self._lagrangian_grad(e, y))),
            self._violation(x, e.ce, e.ci, ord_one=False),
        ]
        if mi:
            yi = y[me : me + mi]
            terms += [jnp.max(jnp.abs(yi * e.ci)), jnp.max(_pos(-yi))]
        bounds = self._bounds(x)
        if bounds is not None:
            lb, ub = bounds
            yb = y[me + mi :]
            # y_B > 0 at an active upper bound, < 0 at a lower one; a multiplier on an
            # infinite bound is itself the residual
            up = jnp.where(jnp.isfinite(ub), _pos(yb) * (ub - x), _pos(yb))
            lo = jnp.where(jnp.isfinite(lb), _pos(-yb) * (x - lb), _pos(-yb))
            terms += [jnp.max(jnp.abs(up)), jnp.max(jnp.abs(lo))]
        return jnp.max(jnp.stack(terms))

    def _model(self, x, e: _Eval, y, args):
        """The positive definite Hessian model at ``x`` for ``hessian != "bfgs"``."""
        if callable(self.hessian):
            B = _real_output("hessian", self.hessian(x, y, args), x.dtype)
            n = x.shape[0]
            if B.shape != (n, n):
                raise ValueError(
                    f"hessian must return a ({n}, {n}) matrix B(x, y, args), got shape {B.shape}"
                )
            return B
        me, mi = e.ce.shape[0], e.ci.shape[0]

        def lag(z):
            f, ce, ci = self._values(z, args)
            return f + jnp.dot(y[:me], ce) + jnp.dot(y[me : me + mi], ci)

        # the active rows: every equality, the inequalities with a positive multiplier
        active = jnp.concatenate([jnp.ones_like(e.ce), (y[me : me + mi] > 0).astype(x.dtype)])
        JA = jnp.concatenate([e.je, e.ji]) * active[:, None]
        return convexified_hessian(jax.hessian(lag)(x), JA)

    # --- protocol ----------------------------------------------------------------------

    def init(self, x0, args) -> SQPState:
        x0 = jnp.asarray(x0)
        check_floating("x0", x0)
        if jnp.issubdtype(x0.dtype, jnp.complexfloating):
            raise TypeError(f"x0 must be real, got dtype {x0.dtype}")
        check_not_half("x0", x0, "SQP's subproblems factorize with LAPACK, in float32 or float64")
        if x0.ndim != 1:
            raise ValueError(f"x0 must be a vector (n,), got shape {x0.shape}")
        if not (self.hessian in _HESSIANS or callable(self.hessian)):
            raise ValueError(
                f"hessian must be one of {_HESSIANS} or a callable, got {self.hessian!r}"
            )
        bounds = self._bounds(x0)
        x = x0 if bounds is None else jnp.clip(x0, *bounds)  # bounds are kept exactly
        dtype = x.dtype
        e = self._evaluate(x, args)
        m = e.ce.shape[0] + e.ci.shape[0] + (0 if bounds is None else x.shape[0])
        y = jnp.zeros((m,), dtype)
        n = x.shape[0]
        hess = jnp.eye(n, dtype=dtype) if self.hessian == "bfgs" else self._model(x, e, y, args)
        warm = WarmStart(
            x=jnp.zeros((n,), dtype),
            y=y,
            z=jnp.zeros((m,), dtype),
            rho=jnp.asarray(0.1, dtype),
            mu=jnp.zeros((), dtype),  # clipped up to the subproblem solver's initial weight
        )
        return SQPState(
            x=x,
            iter_num=jnp.int32(0),
            error=self._kkt(x, e, y),
            status=jnp.int32(Status.SUCCESS),
            f=e.f,
            grad=e.g,
            ce=e.ce,
            ci=e.ci,
            je=e.je,
            ji=e.ji,
            y=y,
            hess=hess,
            penalty=hyper(self.penalty, dtype),
            violation=self._violation(x, e.ce, e.ci, ord_one=False),
            warm=warm,
            recent=jnp.tile(
                jnp.stack([e.f, self._violation(x, e.ce, e.ci, ord_one=True)]), (self.memory, 1)
            ),
        )

    def _subproblem(self, state: SQPState):
        x, dtype, n = state.x, state.x.dtype, state.x.shape[0]
        rows = [state.je, state.ji]
        lo = [-state.ce, jnp.full_like(state.ci, -jnp.inf)]
        up = [-state.ce, -state.ci]
        bounds = self._bounds(x)
        if bounds is not None:
            lb, ub = bounds
            rows.append(jnp.eye(n, dtype=dtype))
            lo.append(lb - x)
            up.append(ub - x)
        A = jnp.concatenate(rows)
        qp = QP(P=state.hess, q=state.grad, A=A, l=jnp.concatenate(lo), u=jnp.concatenate(up))
        return qp

    def step(self, state: SQPState, args) -> tuple[SQPState, SQPInfo]:
        x, dtype, n = state.x, state.x.dtype, state.x.shape[0]
        e0 = _Eval(state.f, state.grad, state.ce, state.ci, state.je, state.ji)
        m = state.y.shape[0]
        if m:
            qp = self._subproblem(state)
            warm = state.warm._replace(x=jnp.zeros((n,), dtype), z=jnp.clip(0, qp.l, qp.u))
            qp_tol = None if self.qp_tol is None else hyper(self.qp_tol, dtype)
            # vmapped on CPU, the lanes' subproblems run one after another (solve_lanewise)
            tol_sub = jnp.asarray(default_tol(np.dtype(dtype)) if qp_tol is None else qp_tol, dtype)
            sub = solve_lanewise(self.qp_solver, warm, qp, tol_sub, self.qp_max_steps)
            d, y_qp = sub.x, sub.state.y
            qp_status, qp_steps = sub.status, sub.num_steps
            new_warm = WarmStart(sub.state.x, sub.state.y, sub.state.z, sub.state.rho, sub.state.mu)
            lin = qp.A @ d
            v_lin = jnp.sum(_pos(qp.l - lin) + _pos(lin - qp.u))
        else:  # unconstrained: the Newton-like step of the model
            d = -jnp.linalg.solve(state.hess, state.grad)
            y_qp = state.y
            qp_status, qp_steps = jnp.int32(Status.SUCCESS), jnp.int32(0)
            new_warm = state.warm
            v_lin = jnp.zeros((), dtype)
        d = jnp.where(jnp.isfinite(d), d, 0)
        ynorm = jnp.max(jnp.abs(y_qp)) if m else jnp.zeros((), dtype)
        nu = jnp.maximum(state.penalty, 1.1 * ynorm)
        v0 = self._violation(x, state.ce, state.ci, ord_one=True)
        phi0 = state.f + nu * v0
        # nonmonotone reference (Grippo, Lampariello and Lucidi 1986): the largest merit
        # of the last `memory` iterates at the current penalty, so a full step that the
        # l1 merit's curvature would reject near a solution (the Maratos effect) passes
        ref = jnp.maximum(phi0, jnp.max(state.recent[:, 0] + nu * state.recent[:, 1]))
        D = jnp.dot(state.grad, d) - nu * (v0 - v_lin)
        curv = jnp.dot(d, state.hess @ d)
        D = jnp.where(D < 0, D, -curv)  # rounding can make D >= 0 on a tiny step
        eta, shrink = hyper(self.armijo, dtype), hyper(self.backtrack, dtype)

        bounds = self._bounds(x)

        def advance(t):
            # the subproblem meets lb - x <= d <= ub - x only to its tolerance: clip, so
            # that every iterate keeps the bounds exactly (as documented)
            xt = x + t * d
            return xt if bounds is None else jnp.clip(xt, *bounds)

        def merit(t):
            xt = advance(t)
            f, ce, ci = self._values(xt, args)
            return f + nu * self._violation(xt, ce, ci, ord_one=True)

        def reject(t):
            return ~(merit(t) <= ref + eta * t * D)  # NaN rejects

        def cond(c):
            t, k, bad = c
            return bad & (k < self.max_linesearch)

        def body(c):
            t, k, _ = c
            t = t * shrink
            return t, k + 1, reject(t)

        one = jnp.ones((), dtype)
        t, trials, bad = jax.lax.while_loop(cond, body, (one, jnp.int32(1), reject(one)))
        tiny = jnp.max(jnp.abs(d)) <= 10 * jnp.finfo(dtype).eps * (1 + jnp.max(jnp.abs(x)))
        failed = bad & ~tiny
        t = jnp.where(bad, 0, t)
        x_new = advance(t)
        e = self._evaluate(x_new, args)
        y = y_qp
        if self.hessian == "bfgs":
            r = self._lagrangian_grad(e, y) - self._lagrangian_grad(e0, y)
            hess = damped_bfgs_update(state.hess, x_new - x, r)
        else:
            hess = self._model(x_new, e, y, args)
        viol = self._violation(x_new, e.ce, e.ci, ord_one=False)
        stuck = tiny | (
            t * jnp.max(jnp.abs(d)) <= 10 * jnp.finfo(dtype).eps * (1 + jnp.max(jnp.abs(x)))
        )
        infeasible = (qp_status == Status.INFEASIBLE) & stuck & (viol > 0)
        status = jnp.where(failed, jnp.int32(Status.BREAKDOWN), state.status)
        status = jnp.where(infeasible, jnp.int32(Status.INFEASIBLE), status)
        new = SQPState(
            x=x_new,
            iter_num=state.iter_num + 1,
            error=self._kkt(x_new, e, y),
            status=status.astype(jnp.int32),
            f=e.f,
            grad=e.g,
            ce=e.ce,
            ci=e.ci,
            je=e.je,
            ji=e.ji,
            y=y,
            hess=hess,
            penalty=nu,
            violation=viol,
            warm=new_warm,
            recent=jnp.concatenate(
                [
                    state.recent[1:],
                    jnp.stack([e.f, self._violation(x_new, e.ce, e.ci, ord_one=True)])[None],
                ]
            ),
        )
        info = SQPInfo(
            step_size=t,
            trials=trials,
            qp_status=jnp.asarray(qp_status, jnp.int32),
            qp_steps=jnp.asarray(qp_steps, jnp.int32),
            merit=phi0,
        )
        return new, info


def sqp(
    fun: Callable,
    eq: Callable | None = None,
    ineq: Callable | None = None,
    *,
    lb: Any = None,
    ub: Any = None,
    hessian: str | Callable = "bfgs",
    qp_solver: Any = None,
    qp_tol: float | None = None,
    qp_max_steps: int = 200,
    armijo: float = 1e-4,
    backtrack: float = 0.5,
    penalty: float = 1.0,
    max_linesearch: int = 30,
) -> SQP:
    r"""SQP for $\min f(x)$ s.t. $c_E(x) = 0$, $c_I(x) \le 0$, $lb \le x \le ub$.

    Args:
        fun: ``fun(x, args) -> scalar``, smooth.
        eq: ``eq(x, args) -> (m_E,)``, the equality constraints ``eq(x) = 0``.
        ineq: ``ineq(x, args) -> (m_I,)``, the inequalities ``ineq(x) <= 0`` (note the
            sign: SciPy's ``"ineq"`` constraints are ``>= 0``).
        lb: lower bounds on ``x`` (a scalar or ``(n,)``; ``-inf`` where absent), kept
            exactly at every iterate (``x0`` is clipped into them). Checked: real,
            no NaN, ``lb <= ub`` (values when concrete).
        ub: upper bounds on ``x``, likewise (``inf`` where absent).
        hessian: ``"bfgs"`` (damped BFGS), ``"exact"`` (the Lagrangian's Hessian made
            positive definite) or ``hessian(x, y, args) -> B`` (positive definite).
        qp_solver: the subproblem solver (default `jaxsolve.qp.single_qp_solver`:
            FlexQP set up as `jaxsolve.qp.solve_qp` sets it up for one QP, in-loop
            polish every 5th step, a polished point meeting ``qp_tol`` accepted, rho
            adapted at every check); any FlexQP-state solver fits (a Deep FlexQP
            solver too).
        qp_tol: the subproblems' tolerance (default by dtype).
        qp_max_steps: the subproblems' step budget.
        armijo: the sufficient-decrease constant $\eta$.
        backtrack: the backtracking factor.
        penalty: the initial merit penalty $\nu$ (raised to $1.1 \|y\|_\infty$).
        max_linesearch: backtracking trials before ``BREAKDOWN``.

    Concrete hyperparameters are checked (``armijo``, ``backtrack`` in (0, 1),
    ``penalty > 0``, ``qp_tol >= 0``), and at trace time ``x0`` (a real float vector,
    not 16-bit), the outputs of ``fun``/``eq``/``ineq`` (real; ``fun`` a scalar) and a
    callable ``hessian``'s shape ``(n, n)``; errors name the argument.

    Returns:
        an `SQP` solver for `jaxsolve.solve`; ``x0`` is a vector, ``args`` whatever
        the functions take. State: `SQPState` (multipliers in ``state.y``).
    """
    if not callable(fun):
        raise TypeError(f"fun must be callable f(x, args) -> scalar, got {type(fun).__name__}")
    for name, fn in (("eq", eq), ("ineq", ineq)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be None or a callable {name}(x, args) -> vector")
    if not (hessian in _HESSIANS or callable(hessian)):
        raise ValueError(f"hessian must be one of {_HESSIANS} or a callable, got {hessian!r}")
    for name, v in (("qp_max_steps", qp_max_steps), ("max_linesearch", max_linesearch)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    _check_scalar("backtrack", backtrack, 0, 1)
    _check_scalar("armijo", armijo, 0, 1)
    _check_scalar("penalty", penalty, 0)
    if qp_tol is not None and is_concrete(qp_tol):
        t = np.asarray(qp_tol)
        if t.shape != () or not np.isfinite(t) or t < 0:
            raise ValueError(f"qp_tol must be a finite non-negative scalar, got {qp_tol!r}")
    _check_bounds(lb, ub)
    return SQP(
        fun=fun,
        qp_solver=single_qp_solver(1e-8 if qp_tol is None else qp_tol)
        if qp_solver is None
        else qp_solver,
        eq=eq,
        ineq=ineq,
        lb=lb,
        ub=ub,
        hessian=hessian,
        armijo=armijo,
        backtrack=backtrack,
        penalty=penalty,
        qp_tol=qp_tol,
        qp_max_steps=qp_max_steps,
        max_linesearch=max_linesearch,
    )


def _check_start(x0, lb, ub) -> None:
    if not is_concrete((x0, lb, ub)) or not jnp.issubdtype(jnp.result_type(x0), jnp.floating):
        return  # dtypes are named by SQP.init
    x = np.asarray(x0, np.float64)
    if np.any(np.isnan(x)):
        raise ValueError("x0 contains NaN")
    lo = -np.inf if lb is None else np.asarray(lb, np.float64)
    up = np.inf if ub is None else np.asarray(ub, np.float64)
    try:
        clipped = np.clip(x, lo, up)
    except ValueError:
        return  # misshapen bounds: named by SQP.init
    if not np.all(np.isfinite(clipped)):
        raise ValueError("x0 must be finite (an infinite entry is allowed only against a bound)")


def minimize_sqp(
    fun: Callable,
    x0: Any,
    args: Any = None,
    *,
    eq: Callable | None = None,
    ineq: Callable | None = None,
    lb: Any = None,
    ub: Any = None,
    tol: float | None = None,
    max_steps: int = 200,
    throw: bool = False,
    **options,
) -> Solution:
    r"""Solve $\min f(x)$ s.t. ``eq(x) = 0``, ``ineq(x) <= 0``, ``lb <= x <= ub`` by `sqp`.

    ``tol`` bounds the KKT residual (absolute; default by dtype: 1e-8 in float64,
    1e-4 in float32); ``options`` go to `sqp`. Returns a `jaxsolve.Solution`
    (``sol.state.y`` the multipliers, rows ``[eq; ineq; bounds]``). A concrete ``x0``
    must be finite once clipped into ``[lb, ub]`` (an infinite entry against a finite
    bound is allowed: it is clipped).
    """
    solver = sqp(fun, eq, ineq, lb=lb, ub=ub, **options)
    _check_start(x0, lb, ub)
    return solve(solver, jnp.asarray(x0), args, tol=tol, max_steps=max_steps, throw=throw)
