r"""Cubic-regularized Riemannian Newton for the K-means SDP (Xu, Hou, Chen, Zhang, ICLR 2026).

Problem (Xu err_trial al. 2026, eq. 13) on the product manifold ``V x O_r`` of
`jaxsolve.cluster.kmeans_manifold`, with ``U = phi(V, Q) = [1/sqrt(n), V] Q``::

    min_{V, Q}  f(V, Q) = -||X^T V||_F^2 - w * sum_ij log U_ij,    w = mu / (n r),

for centred, unit-Frobenius-norm data ``X`` (``n x d``); the first term is ``-<X X^T, U U^T>``
and the log-barrier keeps ``U > 0`` (the nonnegativity of the Burer-Monteiro factor).
Scaling ``w`` by ``1/(n r)`` makes ``mu`` the barrier's total weight against a data term
in ``[-1, 0]`` (our choice; the paper does not fix a scaling).

Each step is an ARC step (adaptive cubic regularization; Agarwal, Boumal, Bullins and
Cartis 2021) on the manifold: the model
``m(p) = <g, p> + 1/2 <p, Hess f[p]> + sigma/3 ||p||^3`` over the horizontal tangent
space is minimized through its optimality condition ``(Hess f + lam I) p = -g`` with
``lam = sigma ||p||`` and ``Hess f + lam I`` positive definite there (Nesterov and
Polyak 2006). The root of the secular equation ``lam = sigma ||p(lam)||`` is bracketed
and found by bisection (monotone in ``lam``: Xu err_trial al. 2026, Lemma 2) with safeguarded Newton
steps (`jaxsolve.cluster._cubic_subproblem`). Each trial ``lam`` factors the structured
Hessian's reduced KKT system in time linear in the number of points
(`jaxsolve.cluster._newton_system`); the step is accepted by ARC's ratio test
(`jaxsolve.riemannian.arc_ratio`, `jaxsolve.riemannian.arc_sigma_update`).

The iterate stays strictly feasible: a trial point with some ``U_ij <= 0`` has cost
``+inf``, is rejected and ``sigma`` grows, so ``log`` never sees a non-positive entry.
The step is taken along ``U exp(t dU / U)`` (``path="multiplicative"``, see
`kmeans_newton`), where the straight line ``U + t dU`` would have to stop short of
the first entry it drives to zero.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsolve.cluster._cubic_subproblem import cubic_subproblem
from jaxsolve.cluster._newton_system import (
    barrier_cost,
    horizontal,
    quadratic_form,
    riemannian_gradient,
    structure,
    value_and_grad,
)
from jaxsolve.cluster._problem import (
    kmeans_manifold,
    lift,
    lift_basis,
    positive_retract,
    skew_basis,
)
from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_positive
from jaxsolve.riemannian import arc_ratio, arc_sigma_update

__all__ = ["kmeans_newton", "KMeansNewton", "NewtonState", "NewtonInfo", "barrier_cost"]


class NewtonState(NamedTuple):
    """State of `KMeansNewton`.

    Attributes:
        x: the iterate ``(V, Q)``, ``(n, r - 1)`` and ``(r, r)``.
        iter_num: int32 steps taken.
        error: the Riemannian gradient norm at ``x`` for the current barrier weight, plus
            ``mu - target mu`` while the continuation has not reached the target.
        status: int32 `Status` (``SUCCESS`` throughout; the driver decides the rest).
        value: ``f(V, Q)`` at the current barrier weight.
        grad: its Euclidean gradient ``(G_V, G_Q)``.
        rgrad: the Riemannian gradient in tangent coordinates ``(Xi_g, omega_g)`` at ``x``
            (from ``grad``; kept so a step does not compute it again from the state).
        sigma: the cubic regularization weight.
        mu: the current barrier weight (continuation down to the target ``mu``).
        step_length: length of the last model minimizer (0 before the first): with ``sigma``
            it warm-starts the next secular search at ``lam = sigma * step_length``.
    """

    x: tuple
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    value: jax.Array
    grad: tuple
    rgrad: tuple
    sigma: jax.Array
    mu: jax.Array
    step_length: jax.Array


class NewtonInfo(NamedTuple):
    """Per-step diagnostics of `KMeansNewton`.

    Attributes:
        rho: ARC's ratio of actual to predicted decrease of the step taken.
        lam: the shift ``lam = sigma ||p||`` the secular search ended at.
        accepted: whether the step was taken.
        inner_steps: factorizations of the secular search.
        step_fraction: the fraction ``t`` of the ARC step taken (1 unless a safeguard cut it).
    """

    rho: jax.Array
    lam: jax.Array
    accepted: jax.Array
    inner_steps: jax.Array
    step_fraction: jax.Array


class KMeansNewton(AbstractSolver):
    r"""Cubic-regularized Riemannian Newton for log-barrier K-means; built by `kmeans_newton`.

    See `kmeans_newton` for the method and the meaning of each field. Static fields:
    ``max_inner`` (the cap on the secular-equation iterations), ``halvings`` (the
    multiplicative step's halvings) and ``path``. Every other field is a traced numeric
    hyperparameter (``mu``, ``sigma0``, ``sigma_min``, ``eta1``, ``eta2``, ``inner_rtol``,
    ``tau``, ``mu_start``, ``mu_factor``, ``centrality``, ``grow_max``, ``kappa``,
    ``gamma``; floats or arrays: a Python int is static, as the protocol treats ints): a
    sweep over them reuses one compilation. They meet the iterate's dtype
    through `jaxsolve.core.protocol.hyper`.
    """

    mu: Any = 1e-2
    sigma0: Any = 1.0
    sigma_min: Any = 1e-10
    eta1: Any = 0.1
    eta2: Any = 0.9
    inner_rtol: Any = 1e-2
    tau: Any = 0.9
    mu_start: Any = 1.0
    mu_factor: Any = 0.2
    centrality: Any = 1.0
    grow_max: Any = 100.0
    kappa: Any = 30.0
    gamma: Any = 3.0
    halvings: int = eqx.field(static=True, default=4)
    max_inner: int = eqx.field(static=True, default=40)
    path: str = eqx.field(static=True, default="multiplicative")

    def init(self, x0, args) -> NewtonState:
        dtype = x0[0].dtype
        mu = jnp.maximum(hyper(self.mu, dtype), hyper(self.mu_start, dtype))
        f, g = value_and_grad(x0, args, mu)
        basis = skew_basis(x0[1].shape[0], x0[0].dtype)
        xi, om = riemannian_gradient(x0, g, basis)
        err = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        err = jnp.where(jnp.isfinite(f), err, jnp.inf) + (mu - hyper(self.mu, dtype))
        return NewtonState(
            x=x0,
            iter_num=jnp.int32(0),
            error=err,
            status=jnp.int32(Status.SUCCESS),
            value=f,
            grad=g,
            rgrad=(xi, om),
            sigma=hyper(self.sigma0, dtype),
            mu=mu,
            step_length=jnp.zeros((), dtype),
        )

    def step(self, state: NewtonState, args) -> tuple[NewtonState, NewtonInfo]:
        max_inner, path = self.max_inner, self.path
        x = state.x
        v, q = x
        dtype = v.dtype
        mu = state.mu
        sigma = state.sigma
        n, r = v.shape[0], q.shape[0]
        basis = skew_basis(r, dtype)
        # Unit-radius copy of the lift; V is retracted as V = rho * R_{V/rho}(Xi/rho), rho = ||V||.
        sphere, orth = kmeans_manifold(n, 2, r).manifolds
        g = state.grad
        grad_xi, grad_om = state.rgrad
        gnorm = jnp.sqrt(jnp.sum(grad_xi * grad_xi) + jnp.sum(grad_om * grad_om))

        system = structure(x, g, args, mu, basis)
        # Warm start of the search: lam = sigma ||p_prev|| solves the secular equation at the
        # last step's length, and successive steps change little; the search brackets the
        # root from either side (see `cubic_subproblem`).
        xi, om, lam, found, inner = cubic_subproblem(
            system,
            g[0],
            grad_om,
            gnorm,
            sigma,
            max_inner,
            hyper(self.inner_rtol, dtype),
            sigma * state.step_length,
        )
        step_length = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        xi, om = horizontal(v, xi, om, basis)
        omega = jnp.einsum("k,kab->ab", om, basis)
        u = lift(v, q)
        ybar = lift_basis(v)
        du = (jnp.concatenate([jnp.zeros((n, 1), dtype), xi], axis=1) + ybar @ omega) @ q
        radius = jnp.linalg.norm(v)

        def evaluate(x_trial):
            f_trial, g_trial = value_and_grad(x_trial, args, mu)
            xi_trial, om_trial = riemannian_gradient(x_trial, g_trial, basis)
            norm = jnp.sqrt(jnp.sum(xi_trial * xi_trial) + jnp.sum(om_trial * om_trial))
            return f_trial, g_trial, norm

        def linear_point():
            # Fraction to the boundary (interior-point safeguard, our addition to ARC): shorten
            # the step to t p so that the linearized lift U + t dU keeps ``1 - tau`` of each
            # entry, then halve t until the retracted lift does (at most 30 halvings; the
            # retraction curves away from its linearization), so log never sees U <= 0.
            ratio = jnp.where(du < 0, -u / jnp.where(du < 0, du, -1.0), jnp.inf)
            t0 = jnp.minimum(1.0, hyper(self.tau, dtype) * jnp.min(ratio))

            def trial(t):
                # The manifold's own retractions (second order on both factors).
                v_new = radius * sphere.retract(v / radius, (t * xi) / radius)
                return v_new, orth.retract(q, (t * omega) @ q)

            # k = -1: the first trial (at t0) runs inside the loop, so `trial` is traced
            # (and compiled) once, not once more for the loop's initial carry.
            def cond(carry):
                _, k, x_trial = carry
                return (k < 0) | (
                    (k < 30) & ~jnp.all(lift(*x_trial) > (1 - hyper(self.tau, dtype)) * u)
                )

            def body(carry):
                t, k, _ = carry
                t = jnp.where(k < 0, t, 0.5 * t)
                return t, k + 1, trial(t)

            t, _, x_trial = jax.lax.while_loop(cond, body, (t0, jnp.int32(-1), (v, q)))
            return t, x_trial

        if path == "linear":
            t, x_new = linear_point()
            f_new, g_new, err_new = evaluate(x_new)
        else:
            # Multiplicative step (our addition; see ``path`` in kmeans_newton): along
            # U exp(t dU/U) every entry stays positive, so the step is not cut where the
            # straight line would cross U_ij = 0. Guard: the trial's gradient
            # norm must stay within ``gamma`` times max(||grad||, mu), since a log-barrier
            # whose entries collapsed toward 0 has a huge gradient and ARC takes many steps to
            # recover; else t halves, and after ``halvings`` the linear step is taken.
            rel = du / u
            gate = hyper(self.gamma, dtype) * jnp.maximum(gnorm, mu)

            halvings = self.halvings

            # Trials k = 0 .. halvings are multiplicative (t halving from t0); after the
            # last one fails, trial k = halvings + 1 is the linear step. One loop for both
            # kinds, so the cost and its gradient are traced (and compiled) once, not once
            # more for the linear fallback; k = -1 starts it with the point x in the carry.
            def trial_cond(carry):
                k, (*_, done) = carry
                return (k < 0) | ~done

            def trial_body(carry):
                k, (t, *_) = carry
                k = k + 1
                t = jnp.where(k == 0, t, 0.5 * t)
                t, x_trial = jax.lax.cond(
                    k <= halvings, lambda: (t, positive_retract(u, rel, t, radius)), linear_point
                )
                f_trial, g_trial, err_trial = evaluate(x_trial)
                ok = jnp.isfinite(f_trial) & (err_trial <= gate)
                return k, (t, x_trial, f_trial, g_trial, err_trial, ok | (k > halvings))

            t0 = jnp.minimum(1.0, hyper(self.kappa, dtype) / jnp.max(jnp.abs(rel)))
            start = (t0, x, state.value, g, gnorm, jnp.asarray(False))
            _, (t, x_new, f_new, g_new, err_new, _) = jax.lax.while_loop(
                trial_cond, trial_body, (jnp.int32(-1), start)
            )
        xi, om = t * xi, t * om

        grad_dot_step = jnp.sum(grad_xi * xi) + jnp.sum(grad_om * om)
        # The quadratic model of the step actually taken (horizontal, shortened): one HVP.
        model = grad_dot_step + 0.5 * quadratic_form(
            x, g, args, mu, xi, jnp.einsum("k,kab->ab", om, basis)
        )
        slack = 1e3 * jnp.finfo(dtype).eps * jnp.maximum(1.0, jnp.abs(state.value))
        rho = arc_ratio(state.value, f_new, model, slack)
        accept = found & jnp.isfinite(f_new) & (rho >= hyper(self.eta1, dtype)) & (model < 0)
        # A rejected step raises sigma to the value whose cubic model would have matched the
        # actual change (the interpolation rule of Gould, Porcelli and Toint 2012), clipped
        # to [2, grow_max] times sigma.
        step_norm3 = (jnp.sum(xi * xi) + jnp.sum(om * om)) ** 1.5
        fit = 3.0 * (f_new - state.value - model) / jnp.maximum(step_norm3, jnp.finfo(dtype).tiny)
        grown = jnp.clip(
            jnp.where(jnp.isfinite(fit), fit, 2.0 * sigma),
            2.0 * sigma,
            hyper(self.grow_max, dtype) * sigma,
        )
        # ARC's update, except that a shortened step (t < 1: cut by the boundary, or by the
        # multiplicative step's cap and guard) never shrinks sigma: there the safeguard, not
        # the model, limited the step, and a smaller sigma would let it collapse while every
        # step is cut.
        sigma = arc_sigma_update(
            sigma,
            rho,
            accept,
            grown,
            eta2=hyper(self.eta2, dtype),
            shrink=0.1,
            sigma_min=hyper(self.sigma_min, dtype),
            may_shrink=accept & (t >= 1),
        )
        x_out = jax.tree.map(lambda a, b: jnp.where(accept, a, b), x_new, x)
        g_out = jax.tree.map(lambda a, b: jnp.where(accept, a, b), g_new, g)
        f_out = jnp.where(accept, f_new, state.value)
        err = jnp.where(accept, err_new, gnorm)  # ||grad|| at x_out, from the trial or the start
        # Continuation (path following): once the iterate is centred for the current mu
        # (||grad|| <= centrality * mu), lower mu by mu_factor, down to the target.
        target = hyper(self.mu, dtype)
        centred = err <= hyper(self.centrality, dtype) * mu
        mu_next = jnp.where(
            centred & (mu > target), jnp.maximum(target, hyper(self.mu_factor, dtype) * mu), mu
        )
        # The data term does not depend on mu: rescale the barrier part of f and of G.
        data_value = -jnp.sum((args.T @ x_out[0]) ** 2)
        data_grad = -2.0 * args @ (args.T @ x_out[0])
        scale = mu_next / mu
        f_out = data_value + scale * (f_out - data_value)
        g_out = ((g_out[0] - data_grad) * scale + data_grad, g_out[1] * scale)
        grad_xi_out, grad_om_out = riemannian_gradient(x_out, g_out, basis)
        err = jnp.sqrt(jnp.sum(grad_xi_out * grad_xi_out) + jnp.sum(grad_om_out * grad_om_out)) + (
            mu_next - target
        )
        # A NaN in the data or the iterate must surface: it propagates into err.
        err = jnp.where(jnp.isfinite(f_out), err, jnp.nan)
        new = NewtonState(
            x=x_out,
            iter_num=state.iter_num + 1,
            error=err,
            status=state.status,
            value=f_out,
            grad=g_out,
            rgrad=(grad_xi_out, grad_om_out),
            sigma=sigma,
            mu=mu_next,
            step_length=jnp.where(found, step_length, state.step_length),
        )
        return new, NewtonInfo(rho, lam, accept, inner, t)


def kmeans_newton(
    *,
    mu: float = 1e-2,
    sigma0: float = 1.0,
    sigma_min: float = 1e-10,
    eta1: float = 0.1,
    eta2: float = 0.9,
    inner_rtol: float = 1e-2,
    max_inner: int = 40,
    tau: float = 0.9,
    mu_start: float = 1.0,
    mu_factor: float = 0.2,
    centrality: float = 1.0,
    grow_max: float = 100.0,
    path: str = "multiplicative",
    kappa: float = 30.0,
    gamma: float = 3.0,
    halvings: int = 4,
) -> KMeansNewton:
    r"""Cubic-regularized Riemannian Newton (ARC) for the log-barrier K-means problem.

    Paper: Xu, Hou, Chen and Zhang, "Scalable second-order Riemannian optimization for
    K-means clustering", ICLR 2026 (arXiv 2509.21675). See the module docstring for the
    cost, the product manifold and the linear-time subproblem.

    The iterate is ``x = (V, Q)`` on `jaxsolve.cluster.kmeans_manifold`
    (start from `jaxsolve.cluster.feasible_point`: ``phi(V, Q) > 0``); ``args`` is the
    centred, unit-norm data ``X`` (``n x d``, `jaxsolve.cluster.prepare_data`).
    ``error`` is the Riemannian gradient norm.

    Args:
        mu: barrier weight (total, against a data term in ``[-1, 0]``); smaller is closer
            to the SDP solution and more ill-conditioned (the paper: a sharp transition).
        sigma0: initial cubic weight.
        sigma_min: smallest cubic weight.
        eta1: acceptance threshold on the ratio ``rho`` (Manopt's ARC: 0.1; else ``sigma``
            grows, see ``grow_max``).
        eta2: very-successful threshold (0.9; then ``sigma`` shrinks by 10).
        grow_max: a rejected step raises ``sigma`` to the weight whose cubic model
            ``f + m(p) + sigma/3 ||p||^3`` would have matched the actual ``f(x + p)``
            (the interpolation update of Gould, Porcelli and Toint 2012), clipped to
            ``[2, grow_max] * sigma``; ``grow_max = 2`` is ARC's plain doubling. The
            interpolation recovers from a run of rejections in fewer steps.
        inner_rtol: relative accuracy of the secular equation ``lam = sigma ||p||``
            (looser saves factorizations; much looser changes the steps).
        max_inner: static cap on the bisection/Newton iterations on ``lam`` per step.
        mu_start: barrier continuation (our addition, a standard path-following scheme):
            start at ``max(mu, mu_start)`` and multiply the barrier weight by
            ``mu_factor`` whenever ``||grad|| <= centrality * mu_current``, down to ``mu``.
            ``mu_start <= mu`` gives the paper's fixed barrier. ``error`` adds
            ``mu_current - mu`` so the solve cannot stop before reaching the target.
        mu_factor: continuation factor (0.2).
        centrality: continuation gate (1.0).
        tau: fraction to the boundary: a step is shortened so that the linearized lift
            keeps at least ``1 - tau`` of every entry of ``U`` (interior-point safeguard).
        path: how the ARC step ``p`` (``dU = D phi[p]``) is taken. ``"linear"``: the
            manifold's retraction of ``t p``, ``t`` cut by ``tau`` (the straight line
            ``U + t dU`` may cross ``U_ij = 0``). ``"multiplicative"`` (default, our
            addition): the positive retraction ``U exp(t dU / U)`` then Sinkhorn and the
            factor (`jaxsolve.cluster._problem.positive_retract`; a first-order
            retraction along which ``log U`` is linear, the geodesics of the barrier's
            Hessian metric), from ``t = min(1, kappa / max |dU / U|)``, halved (at most
            ``halvings`` times) while the trial's gradient norm exceeds ``gamma``
            times ``max(||grad||, mu_current)`` (a guard against entries collapsing
            toward 0, where the barrier's gradient explodes), else the linear step. ARC's
            ratio test then judges the step taken as before. It takes fewer steps than
            ``"linear"`` to the same objective because the step is not cut at the first
            entry the straight line would drive to zero.
        kappa: the multiplicative step's largest log-change of an entry (it bounds
            ``exp`` only; the gradient guard decides).
        gamma: the multiplicative step's gradient guard (a looser guard lets entries
            collapse toward 0 and leaves long tails).
        halvings: the multiplicative step's halvings before the linear fallback (more
            halvings keep taking small steps that push entries toward 0).
    """
    for name, val in (
        ("mu", mu),
        ("sigma0", sigma0),
        ("sigma_min", sigma_min),
        ("mu_start", mu_start),
    ):
        check_positive(name, val)
    if not (isinstance(grow_max, int | float) and grow_max >= 2):
        raise ValueError(f"grow_max must be a number >= 2, got {grow_max!r}")
    if path not in ("multiplicative", "linear"):
        raise ValueError(f"path must be 'multiplicative' or 'linear', got {path!r}")
    for name, val in (("kappa", kappa), ("gamma", gamma)):
        check_positive(name, val)
    if not (isinstance(halvings, int) and halvings >= 0):
        raise ValueError(f"halvings must be a non-negative int, got {halvings!r}")
    if not (isinstance(max_inner, int) and max_inner >= 1):
        raise ValueError(f"max_inner must be a positive int, got {max_inner!r}")
    return KMeansNewton(
        mu=mu,
        sigma0=sigma0,
        sigma_min=sigma_min,
        eta1=eta1,
        eta2=eta2,
        inner_rtol=inner_rtol,
        tau=tau,
        mu_start=mu_start,
        mu_factor=mu_factor,
        centrality=centrality,
        grow_max=grow_max,
        kappa=kappa,
        gamma=gamma,
        halvings=halvings,
        max_inner=int(max_inner),
        path=path,
    )
