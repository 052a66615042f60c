"""Adaptive regularization with cubics (ARC) on manifolds (Agarwal, Boumal, Bullins, Cartis 2021)."""

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

__all__ = [
    "cubic_newton",
    "CubicNewton",
    "ARCState",
    "ARCInfo",
    "solve_cubic_tridiagonal",
    "arc_ratio",
    "arc_sigma_update",
]


class ARCState(NamedTuple):
    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    f: jax.Array
    egrad: Any
    grad: Any
    sigma: jax.Array


class ARCInfo(NamedTuple):
    f: jax.Array
    rho: jax.Array
    accepted: jax.Array
    sigma: jax.Array
    inner_iterations: jax.Array
    model_gradnorm: jax.Array  # ||grad m(s)|| at the returned step


def arc_ratio(f, f_trial, model_change, slack):
    r"""ARC's ratio of actual to predicted decrease (Cartis, Gould, Toint 2011).

    ``rho = (f - f_trial + slack) / (-model_change + slack)``, where ``model_change`` is
    the change the quadratic model predicts for the step (``<g, s> + 1/2 <s, H s>``,
    negative for a decreasing step) and ``slack`` a few ulps of ``|f|`` so that a step
    whose decrease is below the rounding error of ``f`` is still judged. ``rho = -inf``
    where the predicted decrease is not positive (the step is rejected). Scalars.
    """
    num = f - f_trial + slack
    den = -model_change + slack
    den_ok = den > 0
    return jnp.where(den_ok, num / jnp.where(den_ok, den, 1.0), -jnp.inf)


def arc_sigma_update(sigma, rho, accepted, grown, *, eta2, shrink, sigma_min, may_shrink=True):
    r"""ARC's update of the cubic weight ``sigma`` after the ratio test.

    A very successful step (``rho >= eta2`` and ``may_shrink``) lowers it to
    ``max(sigma_min, shrink * sigma)``, an accepted one keeps it, a rejected one sets
    it to ``grown`` (``gamma2 * sigma`` in Cartis, Gould and Toint 2011; a caller may
    pass an interpolated value instead). Scalars.
    """
    very = (rho >= eta2) & may_shrink
    return jnp.where(
        very, jnp.maximum(sigma_min, shrink * sigma), jnp.where(accepted, sigma, grown)
    )


def solve_cubic_tridiagonal(t, gnorm, sigma, iters: int = 60):
    r"""Global minimizer of ``gnorm y_1 + 1/2 y^T T y + sigma/3 ||y||^3`` (symmetric ``T``).

    Optimality (Nesterov and Polyak 2006; Cartis, Gould, Toint 2011, Thm 3.1):
    ``(T + lambda I) y = -gnorm e_1`` with ``lambda = sigma ||y||`` and
    ``T + lambda I >= 0``. In the eigenbasis ``T = V diag(mu) V^T`` the secular equation
    ``||y(lambda)|| = lambda / sigma`` has one root right of ``max(0, -mu_min)``; it is
    found by Newton on ``1/||y(lambda)|| - sigma/lambda`` safeguarded by bisection
    (a fixed number of iterations, so it jit/vmaps). The Lanczos matrix here is small
    (the Krylov dimension), so a dense ``eigh`` is cheap.
    """
    mu, v = jnp.linalg.eigh(t)
    c = gnorm * v[0, :]
    dt = t.dtype
    tiny = jnp.finfo(dt).tiny
    lo = jnp.maximum(0.0, -mu[0])
    hi = lo + jnp.abs(mu[0]) + jnp.sqrt(sigma * jnp.sqrt(jnp.sum(c * c))) + 1.0

    def norm_y(lam):
        den = mu + lam
        den = jnp.where(den > 0, den, tiny)
        return jnp.sqrt(jnp.sum((c / den) ** 2))

    def phi_and_grad(lam):
        den = jnp.maximum(mu + lam, tiny)
        w2 = jnp.sum((c / den) ** 2)
        ny = jnp.sqrt(w2)
        # d||y||/dlam = -sum c^2/den^3 / ||y||
        dny = -jnp.sum(c**2 / den**3) / jnp.maximum(ny, tiny)
        phi = 1.0 / jnp.maximum(ny, tiny) - sigma / jnp.maximum(lam, tiny)
        dphi = -dny / jnp.maximum(w2, tiny) + sigma / jnp.maximum(lam, tiny) ** 2
        return phi, dphi

    def body(_, carry):
        lo, hi, lam = carry
        phi, dphi = phi_and_grad(lam)
        # phi is increasing; phi < 0 means the root is to the right
        lo = jnp.where(phi < 0, lam, lo)
        hi = jnp.where(phi >= 0, lam, hi)
        newton = lam - phi / jnp.where(dphi > 0, dphi, 1.0)
        ok = (dphi > 0) & (newton > lo) & (newton < hi)
        return lo, hi, jnp.where(ok, newton, 0.5 * (lo + hi))

    lam0 = 0.5 * (lo + hi)
    lo, hi, lam = jax.lax.fori_loop(0, iters, body, (lo, hi, lam0))
    den = jnp.maximum(mu + lam, tiny)
    y = -v @ (c / den)
    # hard case (gradient orthogonal to the lowest eigenvector): add that eigenvector
    # so that ||y|| = lambda / sigma still holds.
    gap = lam / sigma - norm_y(lam)
    hard = (mu[0] < 0) & (gap > 1e-8 * (1.0 + lam / sigma))
    y = (
        y
        + jnp.where(hard, jnp.sqrt(jnp.maximum(gap * (2 * norm_y(lam) + gap), 0.0)), 0.0) * v[:, 0]
    )
    return y


def _lanczos_arc(manifold, x, g, gnorm, hess, sigma, theta, *, max_inner):
    """Lanczos with full reorthogonalization; the cubic model is minimized in the
    Krylov space after every step (Manopt ``arc_lanczos``) until
    ``||grad m(s)|| <= theta ||s||^2``, an invariant subspace, or ``max_inner``."""
    k = max_inner
    dt = gnorm.dtype
    q0 = optax.tree.scale(1.0 / gnorm, g)
    basis = jax.tree.map(lambda v: jnp.zeros((k,) + v.shape, v.dtype).at[0].set(v), q0)
    tmat = jnp.zeros((k, k), dt)
    idx = jnp.arange(k)
    coeffs = lambda r, basis: jax.vmap(lambda q: manifold.inner(x, q, r))(basis)

    def cond(c):
        j, _, _, _, _, done = c
        return (j < k) & ~done

    def body(c):
        j, basis, tmat, y, mgn, _ = c
        qj = jax.tree.map(lambda b: b[j], basis)
        hq = hess(qj)
        alpha = manifold.inner(x, qj, hq)
        # full reorthogonalization (twice is enough) in the manifold's metric
        r = hq
        for _ in range(2):
            cf = coeffs(r, basis)
            r = jax.tree.map(lambda v, b, cf=cf: v - jnp.tensordot(cf, b, axes=1), r, basis)
        r = manifold.proj(x, r)
        beta = manifold.norm(x, r)
        tmat = tmat.at[j, j].set(alpha)
        # Unused coordinates get a diagonal above every eigenvalue of the active block
        # (Gershgorin), so they decouple (zero right-hand side) without spoiling eigh's
        # normwise accuracy.
        bound = jnp.max(jnp.sum(jnp.abs(tmat), axis=1)) + 1.0
        y = solve_cubic_tridiagonal(tmat + jnp.diag(jnp.where(idx > j, bound, 0.0)), gnorm, sigma)
        mgn = beta * jnp.abs(y[j])  # Lanczos relation: ||grad m(Q y)|| = beta_j |y_j|
        ynorm2 = jnp.sum(y * y)
        breakdown = beta <= 1e-12 * jnp.maximum(1.0, jnp.abs(alpha))
        done = (mgn <= theta * ynorm2) | breakdown | (j + 1 >= k)
        nxt = jnp.minimum(j + 1, k - 1)
        write = ~done
        qn = optax.tree.scale(1.0 / jnp.where(breakdown, 1.0, beta), r)
        basis = jax.tree.map(lambda b, v: b.at[nxt].set(jnp.where(write, v, b[nxt])), basis, qn)
        tmat = tmat.at[j, nxt].set(jnp.where(write, beta, tmat[j, nxt]))
        tmat = tmat.at[nxt, j].set(jnp.where(write, beta, tmat[nxt, j]))
        return j + 1, basis, tmat, y, mgn, done

    init = (jnp.int32(0), basis, tmat, jnp.zeros((k,), dt), jnp.asarray(jnp.inf, dt), False)
    j, basis, _, y, mgn, _ = jax.lax.while_loop(cond, body, init)
    eta = jax.tree.map(lambda b: jnp.tensordot(y.astype(b.dtype), b, axes=1), basis)
    return manifold.proj(x, eta), j, mgn


class CubicNewton(AbstractSolver):
    """Riemannian adaptive regularization with cubics (see `cubic_newton`).

    Static: ``cost``, ``manifold``, ``max_inner``. Traced: ``sigma0``, ``sigma_min``,
    ``eta1``, ``eta2``, ``gamma1``, ``gamma2``, ``theta``, ``rho_regularization``.
    """

    cost: Callable = eqx.field(static=True)
    manifold: Manifold = eqx.field(static=True)
    sigma0: Any
    sigma_min: Any = 1e-7
    eta1: Any = 0.1
    eta2: Any = 0.9
    gamma1: Any = 0.1
    gamma2: Any = 2.0
    theta: Any = 0.5
    rho_regularization: Any = 1e3
    max_inner: int = eqx.field(static=True, default=30)

    def init(self, x0, args) -> ARCState:
        head, f, eg, g = start(self.cost, self.manifold, x0, args)
        return ARCState(*head, f, eg, g, hyper(self.sigma0, x0))

    def step(self, state: ARCState, args) -> tuple[ARCState, ARCInfo]:
        cost, manifold = self.cost, self.manifold
        theta, rho_reg, eta1, eta2, sigma_min, gamma1, gamma2 = hyper(
            (
                self.theta,
                self.rho_regularization,
                self.eta1,
                self.eta2,
                self.sigma_min,
                self.gamma1,
                self.gamma2,
            ),
            state.x,
        )
        x, f, g, sigma = state.x, state.f, state.grad, state.sigma
        gnorm = manifold.norm(x, g)
        hess = hessian_operator(cost, manifold, x, args, state.egrad)
        safe_g = jnp.where(gnorm > 0, gnorm, 1.0)
        eta, nit, mgn = _lanczos_arc(
            manifold, x, g, safe_g, hess, sigma, theta, max_inner=self.max_inner
        )
        heta = hess(eta)
        x_prop = manifold.retract(x, eta)
        f_prop = cost(x_prop, args)
        slack = jnp.maximum(1.0, jnp.abs(f)) * jnp.finfo(f.dtype).eps * rho_reg
        model_change = manifold.inner(x, eta, g) + 0.5 * manifold.inner(x, eta, heta)
        rho = arc_ratio(f, f_prop, model_change, slack)
        accept = rho >= eta1
        sigma = arc_sigma_update(
            sigma, rho, accept, gamma2 * sigma, eta2=eta2, shrink=gamma1, sigma_min=sigma_min
        )
        x_new, f_new, eg_new, g_new = accept_or_keep(accept, cost, manifold, args, x_prop, state)
        status = jnp.where(sigma >= jnp.finfo(f.dtype).max / 4, Status.BREAKDOWN, state.status)
        head = next_head(state, manifold, x_new, g_new, status)
        new = ARCState(*head, f_new, eg_new, g_new, sigma)
        return new, ARCInfo(f_new, rho, accept, sigma, nit, mgn)


def cubic_newton(
    cost,
    manifold,
    *,
    sigma0=None,
    sigma_min=1e-7,
    eta1=0.1,
    eta2=0.9,
    gamma1=0.1,
    gamma2=2.0,
    theta=0.5,
    rho_regularization=1e3,
    max_inner: int | None = None,
) -> CubicNewton:
    r"""Riemannian adaptive regularization with cubics (cubic-regularized Newton, ARC).

    Each step approximately minimizes the cubic model
    ``m(s) = f + <g, s> + 1/2 <s, Hess f(x)[s]> + sigma/3 ||s||^3`` on ``T_x M`` in a
    Lanczos (Krylov) subspace grown from the gradient, solving the small tridiagonal
    cubic problem exactly after every Lanczos step (`solve_cubic_tridiagonal`)
    and stopping when ``||grad m(s)|| <= theta ||s||^2`` (Manopt ``arc_lanczos``;
    Cartis, Gould, Toint 2011). The step ``R_x(s)`` is accepted when
    ``rho = (f - f(R_x(s))) / (-<g, s> - 1/2 <s, H s>) >= eta1``; then
    ``sigma <- max(sigma_min, gamma1 sigma)`` if ``rho >= eta2``, unchanged if
    successful, ``gamma2 sigma`` if not. Agarwal, Boumal, Bullins and Cartis (2021),
    "Adaptive regularization with cubics on manifolds", Math. Programming; defaults are
    Manopt ``arc.m``'s (``sigma0 = 100 / typical_dist``). Reaches approximate
    second-order critical points in ``O(eps^{-3/2})`` iterations.

    ``max_inner`` (static, default ``min(dim, 30)``) bounds the Krylov dimension: the
    basis is stored (``max_inner`` tangent vectors) and the step solves a
    ``max_inner x max_inner`` eigenproblem per Lanczos step.

    The start ``x0`` must lie on ``manifold``: it is checked, not projected (off it,
    ``manifold.residual(x0) > 10 sqrt(eps)``, e.g. ``x0 = 0`` on a sphere, the run ends
    ``BREAKDOWN`` at once).
    """
    validate(
        cost,
        manifold,
        sigma0=sigma0,
        sigma_min=sigma_min,
        eta1=eta1,
        eta2=eta2,
        gamma1=gamma1,
        gamma2=gamma2,
        theta=theta,
        rho_regularization=rho_regularization,
    )
    if sigma0 is None:
        sigma0 = 100.0 / manifold.typical_dist
    if max_inner is None:
        max_inner = min(manifold.dim, 30)
    if not isinstance(max_inner, int) or max_inner < 1:
        raise ValueError(f"max_inner must be a positive int, got {max_inner!r}")
    return CubicNewton(
        cost=cost,
        manifold=manifold,
        sigma0=sigma0,
        sigma_min=sigma_min,
        eta1=eta1,
        eta2=eta2,
        gamma1=gamma1,
        gamma2=gamma2,
        theta=theta,
        rho_regularization=rho_regularization,
        max_inner=int(max_inner),
    )
