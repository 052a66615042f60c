r"""FlexQP's ADMM iteration on the elastic relaxation and its penalty rules.

The iteration is OSQP's splitting (Stellato et al., 2020) with the projection onto
``[l, u]`` replaced by the proximal map of ``mu dist(., [l, u])``, the soft-thresholding
block of FlexQP (Oshin, Ghosh, Saravanos, Theodorou, "Deep FlexQP", ICLR 2026,
arXiv:2512.01565), on the Ruiz-scaled data (`jaxsolve.qp.scaling`):

$$
(P + \sigma I + A^\top R A)\,\tilde x = \sigma x^k - q + A^\top(R z^k - y^k),\quad
\hat z = \alpha A\tilde x + (1-\alpha) z^k,\quad x^{k+1} = \alpha\tilde x + (1-\alpha)x^k,

z^{k+1} = \operatorname{prox}_{\mu R^{-1}\mathrm{dist}}(\hat z + R^{-1} y^k),
\quad y^{k+1} = y^k + R (\hat z - z^{k+1}).
$$

The penalty rules: ``R`` per row (`row_rho`), the adaptive rho rule (`adapted_rho`)
and the growth of the elastic weight (`grown_weight`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsolve.qp.linalg import solve_kkt, split_inverse
from jaxsolve.qp.residuals import Residuals
from jaxsolve.qp.scaling import Scaled, sigma_floor

__all__ = [
    "EQ_RHO_WEIGHT",
    "FREE_ROW_RHO",
    "RHO_MAX",
    "RHO_MIN",
    "adapted_rho",
    "admm_block",
    "dist_prox",
    "grown_weight",
    "relaxed_update",
    "row_mu",
    "row_rho",
]

#: Bounds of the scaled ADMM penalty rho.
RHO_MIN, RHO_MAX = 1e-6, 1e6
#: Penalty multiplier of equality rows (OSQP: equality rows get 1e3 * rho).
EQ_RHO_WEIGHT = 1e3
#: Penalty of free rows (both bounds infinite).
FREE_ROW_RHO = 1e-6


def row_rho(d: Scaled, rho):
    """``(m,)`` row penalties ``R``: ``rho``, ``EQ_RHO_WEIGHT * rho`` on equality rows,
    ``FREE_ROW_RHO`` on free rows."""
    return jnp.where(d.free, FREE_ROW_RHO, jnp.where(d.eq, EQ_RHO_WEIGHT * rho, rho))


def row_mu(d: Scaled, level):
    """``(m,)`` elastic weights of the scaled rows, ``level / E`` (``level``: the weight
    in the equilibrated cost's units; ``|ys_i| <= level / E_i``)."""
    return level / d.E


def dist_prox(v, lo, up, t):
    """Prox of ``t * dist(., [lo, up])``: shrink toward the interval by at most ``t``."""
    return jnp.where(v > up, jnp.maximum(up, v - t), jnp.where(v < lo, jnp.minimum(lo, v + t), v))


def relaxed_update(zh, y, rho_rows, mu_rows, lo, up, rho_inv=None):
    """``z = prox_{(mu/rho) dist}(v)``, ``y = rho (v - z)`` with ``v = zh + y/rho``, row
    by row (``rho_rows``, ``mu_rows``: ``(m,)`` penalties and elastic weights).

    Written without forming ``v - mu/rho``: with large elastic weights ``v`` and
    ``mu/rho`` are huge and nearly cancel on violated rows; here a violated row gets
    ``z = zh + (y - mu)/rho`` and ``y = mu`` exactly. ``rho_inv``: ``1 / rho_rows`` taken
    once by the caller (a multiply instead of three divides per row and iteration;
    equal to the division form up to rounding).
    """
    over = (lambda a: a / rho_rows) if rho_inv is None else (lambda a: a * rho_inv)  # noqa: E731
    v = zh + over(y)
    above, below = v > up, v < lo
    z_up = zh + over(y - mu_rows)
    z_lo = zh + over(y + mu_rows)
    sat_up, sat_lo = above & (z_up >= up), below & (z_lo <= lo)
    z = jnp.where(
        sat_up, z_up, jnp.where(above, up, jnp.where(sat_lo, z_lo, jnp.where(below, lo, v)))
    )
    y_new = jnp.where(
        sat_up,
        mu_rows,
        jnp.where(
            above,
            y + rho_rows * (zh - up),
            jnp.where(sat_lo, -mu_rows, jnp.where(below, y + rho_rows * (zh - lo), 0.0)),
        ),
    )
    return z, y_new


def admm_block(d: Scaled, L, xs, zs, ys, rho, level, hparams, k, inverse, recip=False, hoist=False):
    """``k`` ADMM iterations from the scaled ``(xs, zs, ys)`` at penalty ``rho`` and
    elastic weight ``level``, with the factor ``L`` of `jaxsolve.qp.linalg.factor`
    (``inverse``: it is an explicit inverse factor). Returns the new ``(xs, zs, ys)``.

    ``recip`` (lockstep batches): take ``1 / R`` once per block; XLA:CPU otherwise keeps
    the divides as a separate kernel in every iteration. ``hoist`` (single solves): form
    ``A'`` (and the float32 factor's ``L'``) once before the loop, which XLA:CPU would
    otherwise copy in every iteration of a single lane; lockstep chunks are not faster
    with it, so they keep the products as they are.
    """
    rho_rows = row_rho(d, rho)
    mu_rows = row_mu(d, level)
    sigma, alpha = sigma_floor(hparams, xs.dtype), hparams.alpha
    rho_inv = 1.0 / rho_rows if recip else None
    A_t = d.A.T if hoist else None
    L_t = L.T if hoist and inverse and split_inverse(L.dtype) else None

    def body(_, carry):
        x, z, y = carry
        rhs = sigma * x - d.q + (d.A.T if A_t is None else A_t) @ (rho_rows * z - y)
        xt = solve_kkt(L, rhs, inverse, L_t)
        zt = d.A @ xt
        xn = alpha * xt + (1 - alpha) * x
        zh = alpha * zt + (1 - alpha) * z
        zn, yn = relaxed_update(zh, y, rho_rows, mu_rows, d.l, d.u, rho_inv)
        return xn, zn, yn

    return jax.lax.fori_loop(0, k, body, (xs, zs, ys))


def grown_weight(res: Residuals, level, ys, hparams):
    """The elastic weight rule: ``(new_level, ys)`` after a block with residuals ``res``.

    When the relaxed iteration has settled (KKT residual small against the violation
    it keeps) and rows are still violated, the weight is below the optimal multipliers
    (or the QP is infeasible): multiply it by ``hparams.mu_factor``, capped at ``hparams.mu_max``.
    On an infeasible QP every multiplier of the relaxed solution grows like the weight
    (they form the certificate ``A'w ~ 0`` with ``w = y / mu``), so the multipliers are
    scaled with it instead of being rebuilt by the dual ascent.
    """
    grow = (res.violation > 2.0 * res.kkt) & (level < hparams.mu_max)
    new_level = jnp.where(grow, jnp.minimum(level * hparams.mu_factor, hparams.mu_max), level)
    return new_level, jnp.where(grow, ys * (new_level / level), ys)


def adapted_rho(res: Residuals, rho, iter_num, rho_every, adaptive):
    """OSQP's adaptive rho rule: ``(rho_new, change)``.

    ``rho_new = rho sqrt((||r_p|| / scale_p) / (||r_d|| / scale_d))`` clipped to
    ``[RHO_MIN, RHO_MAX]``; ``change`` (bool) when it moves rho by more than 5x, is
    finite, ``adaptive`` is set and step ``iter_num + 1`` is a multiple of ``rho_every``
    (reacting at every check can make rho alternate between two values and never
    converge).
    """
    ratio = (res.primal / (res.primal_scale + 1e-30)) / (
        res.dual / (res.dual_scale + 1e-30) + 1e-30
    )
    rho_new = jnp.clip(rho * jnp.sqrt(ratio), RHO_MIN, RHO_MAX)
    change = (rho_new > 5.0 * rho) | (rho_new < rho / 5.0)
    change = change & jnp.isfinite(rho_new) & adaptive
    change = change & ((iter_num + 1) % rho_every == 0)
    return rho_new, change
