r"""FlexQP's certificates: unboundedness of a step, infeasibility by an exclusion radius.

Unboundedness (`unbounded_step`) is OSQP's dual-infeasibility test (Stellato et al.,
2020) on the step a block of ADMM iterations took. Infeasibility (`exclusion_radius`)
is derived below.

FlexQP ends an infeasible QP at its largest elastic weight $\mu$ with rows still
violated. The same happens on a *feasible* QP whose optimal multipliers exceed
$\mu$ (Maros-Meszaros QPCBOEI2: multipliers 1.3e8 against the cap 1.1e6): the
exact-penalty theorem (Oshin et al., 2025, Thm 3.1) then no longer applies and the
relaxed solution violates rows although the constraints can be met. So a converged
run with violated rows is only a *suspicion*; `exclusion_radius` turns the
relaxed solution into evidence.

Derivation. Let $V(z) = \sum_i \operatorname{dist}(z_i, [l_i, u_i])$ and let
$w \in \partial V(z)$ (componentwise: $w_i = 1$ above the upper bound,
$-1$ below the lower one, in $[0, 1]$ / $[-1, 0]$ on it, 0 strictly
inside). For any $x'$ with $l \le A x' \le u$, $V(A x') = 0$, and the
subgradient inequality gives $0 \ge V(z) + w^\top (A x' - z)$, i.e.

$$
V(z) - w^\top (z - A x) \;\le\; -(A^\top w)^\top (x' - x)
\;\le\; \|A^\top w\|_1\, \|x' - x\|_\infty .
$$

So no point satisfying the constraints lies within

$$
R = \frac{V(z) - w^\top (z - A x)}{\|A^\top w\|_1}
$$

of $x$ (infinity norm): a Farkas certificate ($A^\top w = 0$,
$u^\top w_+ - l^\top w_- < 0$ proves infeasibility outright) made quantitative,
so that it stays valid when $A^\top w$ is small but not zero. FlexQP's relaxed
solution supplies it for free: its multipliers satisfy $y \in \mu\,\partial V(z)$
by construction (the prox update, and the polish), so $w = y / \mu$, and
$A^\top w = -(P x + q) / \mu$. On a truly infeasible QP $R$ grows like
$\mu$ ($\approx 10^5 \max(1, \|x\|_\infty)$ on the test problems at the
default cap); on QPCBOEI2 it is $10^{-3} \|x\|_\infty$: feasible points may lie
right next to ``x``, the penalty is merely too small for the objective's gradient.

Why not the relative Farkas test (``||A'w|| <= eps ||A|| ||w||`` and
``u'w+ - l'w- < 0``, OSQP's primal-infeasibility check)? On QPCBOEI2 it passes
(``||A'w||_inf ~ 7 / mu ~ 6e-6``, ``u'w+ - l'w- ~ -f*/mu ~ -7``) although the QP is
feasible: the certificate holds only within a radius, and that radius (here
``~1``) is far smaller than the solution (``||x||_inf ~ 660``). The relative test
compares the wrong scales; $R$ compares distances in the units of ``x``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from jaxsolve.qp.scaling import Scaled, amax

__all__ = ["exclusion_radius", "RADIUS_FACTOR", "UNBOUNDED_CHECKS", "unbounded_step"]

#: ``UNBOUNDED`` needs `unbounded_step` on this many consecutive checks.
UNBOUNDED_CHECKS = 3

#: ``INFEASIBLE`` needs no feasible point within ``RADIUS_FACTOR * max(1, ||x||_inf)`` of
#: ``x``. The radius grows in proportion to ``mu_max`` on an infeasible QP and stays
#: below 1 on a feasible QP solved with too small a cap, so 10 separates the two with
#: room on both sides at the default cap.
RADIUS_FACTOR = 10.0


def exclusion_radius(
    A: ArrayLike,
    l: ArrayLike,
    u: ArrayLike,
    x: ArrayLike,
    z: ArrayLike,
    w: ArrayLike,
    row_scale: ArrayLike | None = None,
    col_scale: ArrayLike | None = None,
) -> jax.Array:
    r"""Radius around ``x`` (infinity norm) that contains no point with ``l <= A x' <= u``.

    Args:
        A: the constraint matrix, ``(m, n)``.
        l: lower bounds, ``(m,)`` (``-inf`` allowed).
        u: upper bounds, ``(m,)`` (``inf`` allowed).
        x: the center, ``(n,)``.
        z: a point of ``R^m`` at which ``w`` is a subgradient of the l1 distance
            ``V(z) = sum_i dist(z_i, [l_i, u_i])`` (FlexQP: the relaxed copy of ``A x``).
        w: its subgradient (FlexQP: ``y / mu``), clipped to ``[-1, 1]``. ``z`` is first
            moved to the nearest point at which ``w`` is an exact subgradient (on the
            bound for ``0 < |w| < 1``, into ``[l, u]`` for ``w = 0``, beyond the bound
            for ``|w| = 1``): a rounding-level offset of ``z`` changes ``V`` by as much,
            so the result is valid whatever ``z`` and ``w`` are.
        row_scale: optional positive row factors ``E`` (``(m,)``) of Ruiz-scaled data
            (``A = E A_u D``, ``l = E l_u``, ``u = E u_u``, ``z = E z_u``,
            ``x = x_u / D``): the radius is then that of the unscaled problem, in the
            unscaled variables, while ``z`` is compared with the bounds exactly on the
            scaled data (a row that FlexQP put on its bound stays on it). ``w`` is in
            the unscaled units (``|w| <= 1``).
        col_scale: optional positive column factors ``D`` (``(n,)``), as ``row_scale``.

    Returns:
        The radius ``R = (V(z) - w'(z - A x)) / ||A'w||_1`` (see the module docstring),
            ``inf`` when ``A'w = 0`` with a positive numerator (a Farkas certificate),
            and ``<= 0`` when ``z`` is feasible. The denominator is padded by
            ``10 eps ||(|A|' |w|)||_1`` so that rounding in ``A'w`` cannot inflate ``R``.
    """
    dtype = jnp.result_type(A, x)
    one = jnp.ones((), dtype)
    E = one if row_scale is None else row_scale
    D = one if col_scale is None else col_scale
    # Make (z, w) an exact subgradient pair by moving z, not w: w in (0, 1) needs z on
    # the upper bound, w = 1 at or above it, w = 0 within the bounds (and w of a sign
    # whose bound is infinite must be 0). A rounding-level offset of z then costs a
    # rounding-level change of V(z), where forcing w to +-1 would change A'w.
    w = jnp.clip(w, -1.0, 1.0).astype(dtype)
    w = jnp.where((w > 0) & ~jnp.isfinite(u) | (w < 0) & ~jnp.isfinite(l), 0.0, w)
    z = jnp.where(
        w >= 1.0,
        jnp.maximum(z, u),
        jnp.where(
            w <= -1.0,
            jnp.minimum(z, l),
            jnp.where(w > 0, u, jnp.where(w < 0, l, jnp.clip(z, l, u))),
        ),
    )
    above, below = z > u, z < l
    dist = (jnp.where(above, z - u, 0.0) + jnp.where(below, l - z, 0.0)) / E
    ws = w / E  # pairs with the scaled rows: w'(z_u - A_u x_u) = (w / E)'(z - A x)
    num = jnp.sum(dist) - jnp.sum(jnp.where(w != 0, ws * (z - A @ x), 0.0))
    Atw = (A.T @ ws) / D  # = A_u' w
    Atw_abs = (jnp.abs(A).T @ jnp.abs(ws)) / D
    den = jnp.sum(jnp.abs(Atw)) + 10 * jnp.finfo(dtype).eps * jnp.sum(Atw_abs)
    return jnp.where(num > 0, jnp.where(den > 0, num / den, jnp.inf), num)


def unbounded_step(d: Scaled, dxs, eps_unbounded) -> jax.Array:
    """Whether the scaled step ``dxs`` (``(n,)``) certifies an unbounded QP (bool).

    With ``dx = D dxs`` in user units: ``||P dx|| <= eps``, ``q'dx <= -eps`` and ``A dx``
    in the recession cone of ``[l, u]`` (``<= eps`` on rows with a finite upper bound,
    ``>= -eps`` on rows with a finite lower one), ``eps = eps_unbounded ||dx||_inf``,
    and ``dx`` not negligibly small. Then the objective decreases without bound along
    ``dx`` for every elastic weight.
    """
    dx = d.D * dxs
    ndx = amax(dx)
    eps = eps_unbounded * ndx
    Pdx = (d.P @ dxs) / (d.D * d.c)
    qdx = d.q @ dxs / d.c
    Adx = (d.A @ dxs) / d.E
    cone = jnp.all(
        jnp.where(jnp.isfinite(d.up), Adx <= eps, True)
        & jnp.where(jnp.isfinite(d.lo), Adx >= -eps, True)
    )
    return (ndx > 1e3 * jnp.finfo(dxs.dtype).tiny) & (amax(Pdx) <= eps) & (qdx <= -eps) & cone
