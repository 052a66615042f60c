r"""The cubic subproblem of K-means Newton: the secular search for ``lam = sigma ||p(lam)||``.

ARC's model ``m(p) = <g, p> + 1/2 <p, Hess f[p]> + sigma/3 ||p||^3`` on the horizontal
tangent space is minimized through its optimality condition ``(Hess f + lam I) p = -g``,
``lam = sigma ||p||``, ``Hess f + lam I`` positive definite there (Nesterov and Polyak
2006). ``||p(lam)||`` is monotone in ``lam`` (paper 12, Lemma 2), so the root is
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
    """Carry of the secular search: the trial ``lam`` and its bracket ``(lo, hi)``, the
    last step ``(xi, om)`` of a positive definite factorization and its ``lam``."""

    lam: jax.Array
    lo: jax.Array
    hi: jax.Array
    xi: jax.Array
    om: jax.Array
    found: jax.Array
    done: jax.Array
    it: jax.Array
    best_lam: jax.Array


def cubic_subproblem(system, gv, g_om, gnorm, sigma, max_inner, rtol, guess=None):
    """Minimize the cubic model: the root ``lam`` of ``lam = sigma ||p(lam)||``.

    ``p(lam)`` solves ``(Hess + lam) p = -g`` on the horizontal space (`factor_eigen`
    on the step's `structure`); ``gv`` and ``g_om`` are the gradient's parts, ``guess``
    a warm start for ``lam``. Stops once ``lam`` (or ``p`` itself) is accurate to
    ``rtol`` or after ``max_inner`` factorizations. Returns
    ``(xi, omega, lam, found, factorizations)``, ``found`` False when no trial
    ``lam`` gave a positive definite system (the step is then rejected).
    """
    dt = gv.dtype
    # B + lam may keep up to k negative eigenvalues (see factor_eigen): the bound is the
    # (k + 1)-th smallest one, the search's left end (the Newton step when the Hessian
    # is positive definite). Both secular functions below are concave and increasing:
    # from the left Newton's iterates increase monotonically to the root. The search
    # starts at max(left end, guess): a guess right of the root becomes the bracket's
    # right end, and Newton's step from there lands left of the root (the tangent of a
    # concave function lies above it), or bisection takes over if it leaves the bracket.
    lo0 = system.lam_b * (1 + 1e-12) + jnp.finfo(dt).tiny
    tg = to_eigen(system, gv)  # the search runs in eigen coordinates (see factor_eigen)
    lam0 = lo0 if guess is None else jnp.maximum(lo0, guess)
    inf = jnp.asarray(jnp.inf, dt)

    def cond(c):
        return (~c.done) & (c.it < max_inner)

    def body(c):
        ok, solve = factor_eigen(system, c.lam)
        xi, om = solve(tg, g_om)
        pn = jnp.sqrt(jnp.sum(xi * xi) + jnp.sum(om * om))
        ok = ok & jnp.isfinite(pn)
        psi = c.lam - sigma * pn
        conv = ok & (jnp.abs(psi) <= rtol * c.lam)
        lo = jnp.where(~ok | (psi < 0), c.lam, c.lo)
        hi = jnp.where(ok & (psi >= 0), c.lam, c.hi)
        # Newton on phi(lam) = 1/||p|| - sigma/lam and on psi(lam) = lam/sigma - ||p||
        # (same root, both concave increasing: each Newton point lies left of the root,
        # so the larger one is the better and still safe); dp/dlam = -(H + lam)^{-1} p.
        # phi is nearly linear when ||p|| is large (near -lambda_min), psi when lam is
        # near 0 (where phi's -sigma/lam term makes its Newton step only double lam).
        qx, qo = solve(-xi, -om)
        dpn = -(jnp.sum(xi * qx) + jnp.sum(om * qo)) / jnp.maximum(pn, jnp.finfo(dt).tiny)
        # The step itself may be accurate before lam is: ||p|| at the root differs from
        # ||p(lam)|| by about |dpn psi| / psi' (one Newton step on psi; psi' = 1 - sigma
        # dpn >= 1). Below rtol ||p||, p(lam) is the ARC step to that accuracy: near a
        # minimizer (lam << the Hessian's eigenvalues) the search ends at its first
        # factorization.
        conv = conv | (ok & (jnp.abs(dpn * psi) <= rtol * pn * (1.0 - sigma * dpn)))
        phi = 1.0 / pn - sigma / c.lam
        dphi = -dpn / pn**2 + sigma / c.lam**2
        cand_psi = c.lam - (c.lam / sigma - pn) / (1.0 / sigma - dpn)
        cand = jnp.maximum(c.lam - phi / dphi, cand_psi)
        # Fallback when Newton's candidate leaves (lo, hi): bisection, geometric while the
        # bracket spans decades (a warm start may lie far right of the root).
        mid = jnp.where(lo > hi / 64, 0.5 * (lo + hi), hi / 8)
        bis = jnp.where(jnp.isfinite(hi), mid, 2.0 * lo + jnp.sqrt(sigma * gnorm))
        use_newton = ok & jnp.isfinite(cand) & (cand > lo) & (cand < hi)
        nxt = jnp.where(use_newton, cand, bis)
        keep = ok
        return Search(
            lam=nxt,
            lo=lo,
            hi=hi,
            xi=jnp.where(keep, xi, c.xi),
            om=jnp.where(keep, om, c.om),
            found=c.found | ok,
            done=conv,
            it=c.it + 1,
            best_lam=jnp.where(keep, c.lam, c.best_lam),
        )

    init = Search(
        lam=lam0,
        lo=lo0,
        hi=inf,
        xi=jnp.zeros_like(gv),
        om=jnp.zeros_like(g_om),
        found=jnp.asarray(False),
        done=jnp.asarray(False),
        it=jnp.int32(0),
        best_lam=lam0,
    )
    out = jax.lax.while_loop(cond, body, init)
    return from_eigen(system, out.xi), out.om, out.best_lam, out.found, out.it
