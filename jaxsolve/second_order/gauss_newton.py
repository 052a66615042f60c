r"""Gauss-Newton / Levenberg-Marquardt preconditioned gradient descent for least squares.

For $f(x) = \tfrac12\|r(x)\|^2$ with Jacobian $J = \partial r/\partial x$,

$$
x \leftarrow x - \eta\,(J^\top J + \mu I)^{-1} J^\top r
\;=\; x - \eta\,J^\top (J J^\top + \mu I)^{-1} r .
$$

Jiang, Voronin, Cyr, Southworth, *On the Convergence Behavior of Preconditioned
Gradient Descent Toward the Rich Learning Regime*, arXiv 2601.03162: under gradient
descent the error along the NTK eigenvector $i$ ($K = JJ^\top$) decays at
a rate proportional to $\lambda_i$, so high-frequency (small-eigenvalue) modes
are learned last (spectral bias); the preconditioned step scales mode $i$ by
$\lambda_i/(\lambda_i+\mu)\approx 1$, removing that bias. This module gives the
method twice: as a protocol solver (`gauss_newton`, adaptive LM damping) and as
an optax transformation for full-batch training (`scale_by_gauss_newton`).
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
from jaxsolve.core.validation import check_positive
from jaxsolve.second_order._linalg import cg_solve

__all__ = [
    "gauss_newton",
    "GaussNewton",
    "GNState",
    "GNInfo",
    "scale_by_gauss_newton",
    "gn_precondition",
]


def _flat_residual(residual_fn, unravel, args):
    return lambda u: jnp.ravel(residual_fn(unravel(u), args))


def gn_precondition(J, u, mu, *, scale=1.0, form="auto"):
    r"""Return $(c\,J^\top J + \mu I)^{-1} u$ for a dense Jacobian ``J`` (m x n).

    ``form="primal"`` solves the n x n system; ``"kernel"`` works with the m x m NTK
    Gram matrix $K = JJ^\top$ (cheaper when m < n), using

    $$
    (cJ^\top J + \mu I)^{-1} u = J^\top (cK + \mu I)^{-1} K^{-1} J u
    + \frac{1}{\mu}\big(u - J^\top K^{-1} J u\big),
    $$

    the second term (the part of ``u`` outside the row space of ``J``) only when
    $\mu > 0$. ``"auto"`` picks the smaller system. With $\mu = 0$ the
    minimum-norm Gauss-Newton step, by the pseudo-inverse of the Gram matrix in use
    (eigenvalues below ``max(m, n) eps`` of the largest dropped), also for a
    rank-deficient ``J``. With $\mu > 0$, LU solves (on CPU much faster than an
    eigendecomposition for these sizes).
    """
    m, n = J.shape
    dtype = J.dtype
    if form == "auto":
        form = "kernel" if m < n else "primal"
    eps = jnp.finfo(dtype).eps
    mu = jnp.asarray(mu, dtype)
    if form == "primal":
        G = scale * (J.T @ J)

        def damped(_):
            return jnp.linalg.solve(G + mu * jnp.eye(n, dtype=dtype), u)

        def min_norm(_):
            # mu = 0: the pseudo-inverse (eigenvalues below max(m, n) eps |G| dropped).
            # Not a tiny ridge: it amplifies the rounding of u outside the row space by
            # 1/ridge, so on a rank-deficient J the step is a least-squares step, not the
            # minimum-norm one.
            return jnp.linalg.pinv(G, hermitian=True) @ u

        return jax.lax.cond(mu > 0, damped, min_norm, None)
    K = J @ J.T
    eye = jnp.eye(m, dtype=dtype)

    def damped_k(_):
        ridge = m * eps * jnp.max(jnp.abs(jnp.diag(K)))
        a = jnp.linalg.solve(K + ridge * eye, J @ u)  # K^-1 J u
        main = J.T @ jnp.linalg.solve(scale * K + mu * eye, a)
        return main + (u - J.T @ a) / mu

    def min_norm_k(_):
        # (c J'J)^+ u = J' K^+ K^+ J u / c
        Kp = jnp.linalg.pinv(K, hermitian=True)
        return J.T @ (Kp @ (Kp @ (J @ u))) / scale

    return jax.lax.cond(mu > 0, damped_k, min_norm_k, None)


class GNState(NamedTuple):
    r"""State of `gauss_newton`.

    Attributes:
        x: the iterate, a pytree shaped like ``x0`` (unchanged by a rejected step).
        iter_num: int32 scalar, steps taken (accepted or not).
        error: $\|J^\top r(x)\|_2$, the norm of the gradient of $\tfrac12\|r\|^2$.
        status: int32 `Status`: ``SUCCESS``, or ``NONFINITE`` set by `GaussNewton.step`
            when ``adaptive=False`` and a step gave a non-finite residual or gradient
            (with ``adaptive=True`` such a step is rejected and the damping grows).
        value: $f(x) = \tfrac12\|r(x)\|^2$, real scalar.
        grad: the gradient $J^\top r$ as a flat vector ``(n,)`` (``x`` raveled).
        mu: the damping $\mu$ the next step uses (Nielsen's rule with ``adaptive=True``,
            kept in ``[min_damping, max/4]``; fixed at ``damping`` otherwise).
        nu: Nielsen's growth factor $\nu$: 2 after an accepted step, doubled after each
            rejection ($\mu \leftarrow \mu\nu$); constant with ``adaptive=False``.
    """

    x: object
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    value: jax.Array
    grad: jax.Array
    mu: jax.Array
    nu: jax.Array


class GNInfo(NamedTuple):
    r"""Per-step information of `gauss_newton`.

    Attributes:
        accepted: bool scalar, whether the step moved ``x`` (with ``adaptive=False``:
            whether it was finite).
        gain_ratio: $\rho$, actual over predicted decrease of $\tfrac12\|r\|^2$ (1
            where the decrease is too small to measure; only steers the damping when
            ``adaptive=True``).
        mu: the damping $\mu$ this step solved with (before its update).
    """

    accepted: jax.Array
    gain_ratio: jax.Array
    mu: jax.Array


class GaussNewton(AbstractSolver):
    """Gauss-Newton / Levenberg-Marquardt (see `gauss_newton`).

    Static: ``residual_fn``, ``adaptive``, ``linear_solver``, ``form``, ``cg_maxiter``.
    Traced: ``damping``, ``learning_rate``, ``cg_tol``, ``min_damping``.
    """

    residual_fn: Callable = eqx.field(static=True)
    damping: Any = 1e-3
    learning_rate: Any = 1.0
    cg_tol: Any = 1e-10
    min_damping: Any = 1e-12
    adaptive: bool = eqx.field(static=True, default=True)
    linear_solver: str = eqx.field(static=True, default="dense")
    form: str = eqx.field(static=True, default="auto")
    cg_maxiter: int = eqx.field(static=True, default=100)

    def init(self, x0, args) -> GNState:
        v, unravel = ravel_pytree(x0)
        r, vjp = jax.vjp(_flat_residual(self.residual_fn, unravel, args), v)
        if r.size == 0:  # a shape: known under tracing too
            raise ValueError(
                f"residual_fn returned an empty residual (shape {r.shape}): there is nothing to fit"
            )
        g = vjp(r)[0]
        dtype = v.dtype
        return GNState(
            x=x0,
            iter_num=jnp.int32(0),
            error=jnp.linalg.norm(g).astype(dtype),
            status=jnp.int32(Status.SUCCESS),
            value=(0.5 * jnp.sum(r * r)).astype(dtype),
            grad=g,
            mu=hyper(self.damping, dtype),
            nu=jnp.asarray(2.0, dtype),
        )

    def step(self, state: GNState, args) -> tuple[GNState, GNInfo]:
        v, unravel = ravel_pytree(state.x)
        dtype = v.dtype
        res = _flat_residual(self.residual_fn, unravel, args)
        g, mu = state.grad, state.mu
        lr = hyper(self.learning_rate, dtype)
        if self.linear_solver == "dense":
            r = res(v)
            J = jax.jacrev(res)(v) if r.shape[0] < v.shape[0] else jax.jacfwd(res)(v)
            d = -gn_precondition(J, g, mu, form=self.form)
        else:
            r, jvp_fn = jax.linearize(res, v)
            _, vjp_fn = jax.vjp(res, v)
            mv = lambda w: vjp_fn(jvp_fn(w))[0] + mu * w
            d = -cg_solve(mv, g, tol=hyper(self.cg_tol, dtype), maxiter=self.cg_maxiter)
        delta = lr * d
        r_new, vjp_new = jax.vjp(res, v + delta)
        f_new = 0.5 * jnp.sum(r_new * r_new)
        g_new = vjp_new(r_new)[0]
        # decrease predicted by the Gauss-Newton model L(s) = f + g^T s + 1/2 s^T J^T J s at
        # s = lr d, using d^T J^T J d = -g^T d - mu |d|^2 (from (J^T J + mu I) d = -g)
        gd = jnp.dot(g, d)
        pred = -lr * gd + 0.5 * lr * lr * (gd + mu * jnp.dot(d, d))
        # 1/2(|r|^2 - |r_new|^2) as 1/2 (r - r_new).(r + r_new): accurate even when the
        # decrease is far below the rounding of f itself (near convergence)
        actual = 0.5 * jnp.dot(r - r_new, r + r_new)
        rho = actual / jnp.where(pred > 0, pred, jnp.asarray(1.0, dtype))
        finite = jnp.isfinite(f_new) & jnp.all(jnp.isfinite(g_new))
        if self.adaptive:
            # float safeguard: a predicted decrease near the rounding noise of f (about
            # eps * |r| * |terms of r|, i.e. a few hundred eps * f for a 1% residual) cannot
            # be measured and rho is noise there; accept if the gradient norm falls
            unmeasurable = (pred <= 1e3 * jnp.finfo(dtype).eps * state.value) & (
                jnp.sum(g_new * g_new) < jnp.sum(g * g)
            )
            rho = jnp.where(unmeasurable, jnp.asarray(1.0, dtype), rho)
            accepted = (((rho > 0) & (pred > 0)) | unmeasurable) & finite
            shrink = jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            mu_new = jnp.where(accepted, mu * shrink, mu * state.nu)
            nu_new = jnp.where(accepted, jnp.asarray(2.0, dtype), 2.0 * state.nu)
            # stop the damping from underflowing or overflowing in long runs
            mu_new = jnp.clip(mu_new, hyper(self.min_damping, dtype), jnp.finfo(dtype).max / 4)
        else:
            accepted = finite
            mu_new, nu_new = mu, state.nu
        v_out = jnp.where(accepted, v + delta, v)
        g_out = jnp.where(accepted, g_new, g)
        f_out = jnp.where(accepted, f_new, state.value)
        # a fixed-damping step that produced NaN cannot be repaired by retrying
        status = state.status
        if not self.adaptive:
            status = jnp.where(finite, status, jnp.int32(Status.NONFINITE)).astype(jnp.int32)
        new = GNState(
            x=unravel(v_out),
            iter_num=state.iter_num + 1,
            error=jnp.linalg.norm(g_out).astype(dtype),
            status=status,
            value=f_out.astype(dtype),
            grad=g_out,
            mu=mu_new.astype(dtype),
            nu=nu_new.astype(dtype),
        )
        return new, GNInfo(accepted=accepted, gain_ratio=rho, mu=mu)

    def optimality(self, x, args):
        r"""The normal-equation gradient $J^\top r$ (structure of ``x``), zero at a
        stationary point of $\tfrac12\|r\|^2$: what ``adjoint=Implicit()``
        differentiates (its Jacobian is the Hessian of $\tfrac12\|r\|^2$,
        invertible at a strict local minimizer)."""
        r, vjp = jax.vjp(lambda z: jnp.ravel(self.residual_fn(z, args)), x)
        return vjp(r)[0]


def gauss_newton(
    residual_fn: Callable,
    *,
    damping: float = 1e-3,
    adaptive: bool = True,
    learning_rate: float = 1.0,
    linear_solver: str = "dense",
    form: str = "auto",
    cg_maxiter: int = 100,
    cg_tol: float = 1e-10,
    min_damping: float = 1e-12,
) -> GaussNewton:
    r"""Gauss-Newton / Levenberg-Marquardt for $\min_x \tfrac12\|r(x, \text{args})\|^2$.

    Each step solves $(J^\top J + \mu I)\,d = -J^\top r$ and moves
    $x \leftarrow x + \eta d$. With ``adaptive=True`` (Levenberg-Marquardt,
    Nielsen's rule) the step is accepted when the gain ratio
    $\rho = (f(x) - f(x+d)) / (L(0) - L(d)) > 0$, and then
    $\mu \leftarrow \mu\max(1/3, 1-(2\rho-1)^3)$; otherwise $x$ stays and
    $\mu \leftarrow \mu\nu,\ \nu \leftarrow 2\nu$. With ``adaptive=False`` the
    damping stays fixed and every step is taken: the preconditioned gradient descent
    of arXiv 2601.03162 (``damping=0``: plain Gauss-Newton with the minimum-norm step).
    ``state.error`` is $\|J^\top r\|$.

    ``x`` may be any pytree (e.g. ``eqx.filter(model, eqx.is_array)``); ``residual_fn(x,
    args)`` returns an array of residuals (any shape; raveled). ``linear_solver="dense"``
    forms $J$ and solves with the smaller of $J^\top J$ and $JJ^\top$
    (``form="auto"``; the NTK form when there are fewer residuals than parameters);
    ``"cg"`` is matrix-free CG with Jacobian-vector products.

    Args:
        residual_fn: ``residual_fn(x, args) -> residuals``.
        damping: initial $\mu \ge 0$ (``adaptive=True`` needs $\mu > 0$).
        learning_rate: $\eta$ (1 for LM/GN proper).
        min_damping: floor for the adaptive $\mu$.

    Returns:
        A `GaussNewton` solver (state `GNState`); run it with `jaxsolve.solve`.
    """
    if not callable(residual_fn):
        raise TypeError(f"residual_fn must be callable, got {type(residual_fn).__name__}")
    if linear_solver not in ("dense", "cg"):
        raise ValueError(f"linear_solver must be 'dense' or 'cg', got {linear_solver!r}")
    if form not in ("auto", "primal", "kernel"):
        raise ValueError(f"form must be 'auto', 'primal' or 'kernel', got {form!r}")
    check_positive("damping", damping, strict=adaptive)
    check_positive("learning_rate", learning_rate)
    check_positive("cg_tol", cg_tol)
    check_positive("min_damping", min_damping)
    if isinstance(cg_maxiter, bool) or not isinstance(cg_maxiter, int) or cg_maxiter < 1:
        raise ValueError(f"cg_maxiter must be a positive int, got {cg_maxiter!r}")
    return GaussNewton(
        residual_fn=residual_fn,
        damping=damping,
        learning_rate=learning_rate,
        cg_tol=cg_tol,
        min_damping=min_damping,
        adaptive=bool(adaptive),
        linear_solver=linear_solver,
        form=form,
        cg_maxiter=cg_maxiter,
    )


class ScaleByGaussNewtonState(NamedTuple):
    """Empty: the preconditioner is rebuilt from the Jacobian at every step."""


def scale_by_gauss_newton(
    residual_fn: Callable,
    *,
    damping: float = 1e-6,
    scale: float | None = None,
    linear_solver: str = "dense",
    form: str = "auto",
    cg_maxiter: int = 100,
    cg_tol: float = 1e-10,
) -> optax.GradientTransformationExtraArgs:
    r"""optax transformation: precondition the incoming updates by $(cJ^\top J + \mu I)^{-1}$.

    For full-batch least-squares training (arXiv 2601.03162). ``residual_fn(params,
    batch)`` gives the residuals at ``params`` on the batch passed to ``update`` as an
    extra argument::

        tx = optax.chain(scale_by_gauss_newton(residual_fn, damping=1e-6),
                         optax.scale_by_learning_rate(1.0))
        updates, state = tx.update(grads, state, params, batch=(x, y))

    $c$ (``scale``) must make $cJ^\top J$ the Gauss-Newton matrix of *your*
    loss: for $L = \frac{1}{2m}\sum_i r_i^2$ (the default, ``scale=None`` gives
    $c = 1/m$), for ``mean(r**2)`` pass ``scale=2/m``, for $\frac12\sum r_i^2$
    ``scale=1``. With learning rate 1 and $\mu \to 0$ the chain then takes the
    Gauss-Newton step; with $\mu>0$ the Levenberg-Marquardt step with fixed
    damping. Works on any params pytree (equinox models: pass
    ``eqx.filter(model, eqx.is_array)`` and rebuild the model inside ``residual_fn``).

    Args:
        residual_fn: ``residual_fn(params, batch) -> residuals``.
        damping: $\mu \ge 0$ (``optax.inject_hyperparams`` can schedule it).
        scale: $c$ (default ``1/m`` with ``m`` the number of residuals).
        linear_solver: ``"dense"`` (Jacobian + a solve with the smaller Gram matrix) or ``"cg"`` (matrix-free; needs ``damping > 0`` or a full-rank J).

    Returns:
        An ``optax.GradientTransformationExtraArgs``; ``update`` needs ``params`` and
        the keyword ``batch``.
    """
    if not callable(residual_fn):
        raise TypeError(f"residual_fn must be callable, got {type(residual_fn).__name__}")
    if linear_solver not in ("dense", "cg"):
        raise ValueError(f"linear_solver must be 'dense' or 'cg', got {linear_solver!r}")
    if form not in ("auto", "primal", "kernel"):
        raise ValueError(f"form must be 'auto', 'primal' or 'kernel', got {form!r}")
    check_positive("damping", damping, strict=False)
    check_positive("scale", scale, allow_none=True)

    def init_fn(params):
        del params
        return ScaleByGaussNewtonState()

    def update_fn(updates, state, params=None, *, batch=None, **extra):
        del extra
        if params is None:
            raise ValueError("scale_by_gauss_newton needs params (the Jacobian is taken there)")
        v, unravel = ravel_pytree(params)
        u, unravel_u = ravel_pytree(updates)
        dtype = v.dtype
        res = lambda w: jnp.ravel(residual_fn(unravel(w), batch))
        r = res(v)
        c = (1.0 / r.shape[0]) if scale is None else scale
        mu = jnp.asarray(damping, dtype)
        if linear_solver == "dense":
            J = jax.jacrev(res)(v) if r.shape[0] < v.shape[0] else jax.jacfwd(res)(v)
            p = gn_precondition(J, u.astype(dtype), mu, scale=c, form=form)
        else:
            _, jvp_fn = jax.linearize(res, v)
            _, vjp_fn = jax.vjp(res, v)
            mv = lambda w: c * vjp_fn(jvp_fn(w))[0] + mu * w
            p = cg_solve(mv, u.astype(dtype), tol=cg_tol, maxiter=cg_maxiter)
        return unravel_u(p.astype(u.dtype)), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)
