r"""The cubic subproblem of K-means Newton: the secular search for ``lam = sigma ||p(lam)||``.

ARC's model ``m(p) = <g, p> + 1/2 <p, Hess f[p]> + sigma/3 ||p||^3`` on the horizontal
tangent space is minimized through its optimality condition ``(Hess f + lam I) p = -g``,
``lam = sigma ||p||``, ``Hess f + lam I`` positive definite there (Nesterov and Polyak
2006). ``||p(lam)||`` is monotone in ``lam`` (Xu et al. 2026, Lemma 2), so the root is
bracketed and found by bisection with safeguarded Newton steps on two concave
increasing secular functions; each trial ``lam`` is one factorization of the reduced
KKT system (`jaxsolve.cluster._newton_system.factor_eigen`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.cluster._newton_system import factor_eigen, from_eigen, to_eigen


class Search(NamedTuple):
    """Carry of the secular search (scalars unless noted).

    Attributes:
        lam: the next trial shift ``lam``.
        lo, hi: the bracket of the root (``hi = inf`` until a trial lands right of it).
        xi: ``(n, r - 1)`` the step's ``Xi`` part (eigen coordinates) at the last trial
            whose system was positive definite.
        om: ``(r(r-1)/2,)`` its ``omega`` coordinates.
        found: bool, some trial ``lam`` gave a positive definite system.
        done: bool, ``lam`` (or the step) is accurate to ``rtol``.
        iters: int32, factorizations so far.
        best_lam: the ``lam`` of the kept step ``(xi, om)``.
    """

    lam: jax.Array
    lo: jax.Array
    hi: jax.Array
    xi: jax.Array
    om: jax.Array
    found: jax.Array
    done: jax.Array
    iters: jax.Array
    best_lam: jax.Array


def cubic_subproblem(system, grad_v, grad_om, gnorm, sigma, max_inner, rtol, guess=None):
    """Minimize the cubic model: the root ``lam`` of ``lam = sigma ||p(lam)||``.

    ``p(lam)`` solves ``(Hess + lam) p = -g`` on the horizontal space (`factor_eigen`
    on the step's `structure`); ``grad_v`` is the Euclidean gradient's ``V`` part
    ``(n, r - 1)``, ``grad_om`` the Riemannian gradient's ``omega`` coordinates, ``guess``
    a warm start for ``lam``. Stops once ``lam`` (or ``p`` itself) is accurate to
    ``rtol`` or after ``max_inner`` factorizations. Returns
    ``(xi, omega, lam, found, factorizations)``, ``found`` False when no trial
    ``lam`` gave a positive definite system (the step is then rejected).
    """
    dtype = grad_v.dtype
    # B + lam may keep up to k negative eigenvalues (see factor_eigen): the bound is the
    # (k + 1)-th smallest one, the search's left end (the Newton step when the Hessian
    # is positive definite). Both secular functions below are concave and increasing:
    # from the left Newton's iterates increase monotonically to the root. The search
    # starts at max(left end, guess): a guess right of the root becomes the bracket's
    # right end, and Newton's step from there lands left of the root (the tangent of a
    # concave function lies above it), or bisection takes over if it leaves the bracket.
    lo0 = system.lam_b * (1 + 1e-12) + jnp.finfo(dtype).tiny
    # the search runs in eigen coordinates (see factor_eigen)
    grad_eigen = to_eigen(system, grad_v)
    lam0 = lo0 if guess is None else jnp.maximum(lo0, guess)
    inf = jnp.asarray(jnp.inf, dtype)

    def cond(search):
        return (~search.done) & (search.iters < max_inner)

    def body(search):
        ok, solve = factor_eigen(system, search.lam)
        xi, om = solve(grad_eigen, grad_om)
        p_norm = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        ok = ok & jnp.isfinite(p_norm)
        psi = search.lam - sigma * p_norm
        conv = ok & (jnp.abs(psi) <= rtol * search.lam)
        lo = jnp.where(~ok | (psi < 0), search.lam, search.lo)
        hi = jnp.where(ok & (psi >= 0), search.lam, search.hi)
        # Newton on phi(lam) = 1/||p|| - sigma/lam and on psi(lam) = lam/sigma - ||p||
        # (same root, both concave increasing: each Newton point lies left of the root,
        # so the larger one is the better and still safe); dp/dlam = -(H + lam)^{-1} p.
        # phi is nearly linear when ||p|| is large (near -lambda_min), psi when lam is
        # near 0 (where phi's -sigma/lam term makes its Newton step only double lam).
        dxi, dom = solve(-xi, -om)
        dp_norm = -(jnp.sum(xi * dxi) + jnp.sum(om * dom)) / jnp.maximum(
            p_norm, jnp.finfo(dtype).tiny
        )
        # The step itself may be accurate before lam is: ||p|| at the root differs from
        # ||p(lam)|| by about |dp_norm psi| / psi' (one Newton step on psi; psi' = 1 - sigma
        # dp_norm >= 1). Below rtol ||p||, p(lam) is the ARC step to that accuracy: near a
        # minimizer (lam << the Hessian's eigenvalues) the search ends at its first
        # factorization.
        conv = conv | (ok & (jnp.abs(dp_norm * psi) <= rtol * p_norm * (1.0 - sigma * dp_norm)))
        phi = 1.0 / p_norm - sigma / search.lam
        dphi = -dp_norm / p_norm**2 + sigma / search.lam**2
        lam_newton_psi = search.lam - (search.lam / sigma - p_norm) / (1.0 / sigma - dp_norm)
        lam_newton = jnp.maximum(search.lam - phi / dphi, lam_newton_psi)
        # Fallback when Newton's candidate leaves (lo, hi): bisection, geometric while the
        # bracket spans decades (a warm start may lie far right of the root).
        mid = jnp.where(lo > hi / 64, 0.5 * (lo + hi), hi / 8)
        lam_bisect = jnp.where(jnp.isfinite(hi), mid, 2.0 * lo + jnp.sqrt(sigma * gnorm))
        use_newton = ok & jnp.isfinite(lam_newton) & (lam_newton > lo) & (lam_newton < hi)
        lam_next = jnp.where(use_newton, lam_newton, lam_bisect)
        return Search(
            lam=lam_next,
            lo=lo,
            hi=hi,
            xi=jnp.where(ok, xi, search.xi),
            om=jnp.where(ok, om, search.om),
            found=search.found | ok,
            done=conv,
            iters=search.iters + 1,
            best_lam=jnp.where(ok, search.lam, search.best_lam),
        )

    init = Search(
        lam=lam0,
        lo=lo0,
        hi=inf,
        xi=jnp.zeros_like(grad_v),
        om=jnp.zeros_like(grad_om),
        found=jnp.asarray(False),
        done=jnp.asarray(False),
        iters=jnp.int32(0),
        best_lam=lam0,
    )
    out = jax.lax.while_loop(cond, body, init)
    return from_eigen(system, out.xi), out.om, out.best_lam, out.found, out.iters
