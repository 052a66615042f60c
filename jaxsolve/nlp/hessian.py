r"""Positive definite Hessian models for SQP: Powell's damped BFGS and the convexified Hessian.

Both keep the subproblem's matrix positive definite, so the QP step is a descent
direction of the merit function (`jaxsolve.nlp.sqp`). Pure functions of arrays: any
quasi-Newton or SQP method may use them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["damped_bfgs_update", "convexified_hessian"]


def damped_bfgs_update(B: jax.Array, s: jax.Array, r: jax.Array) -> jax.Array:
    r"""Powell's damped BFGS update of ``B`` with the step ``s`` and gradient change ``r``.

    $\theta = 1$ if $s^\top r \ge 0.2\, s^\top B s$, else
    $0.8\, s^\top B s / (s^\top B s - s^\top r)$; $r \leftarrow \theta r +
    (1-\theta) B s$, then the BFGS update $B - B s s^\top B / s^\top B s +
    r r^\top / s^\top r$, symmetrized (Nocedal and Wright, procedure 18.2). Damping keeps
    ``B`` positive definite; when $s^\top B s$ or $s^\top r$ is not above the dtype's
    ``tiny``, or ``r`` is not finite, ``B`` is returned unchanged.
    """
    dtype = s.dtype
    Bs = B @ s
    sBs = jnp.dot(s, Bs)
    sr = jnp.dot(s, r)
    theta = jnp.where(sr >= 0.2 * sBs, 1.0, 0.8 * sBs / jnp.where(sBs - sr > 0, sBs - sr, 1))
    r = theta * r + (1 - theta) * Bs
    sr = jnp.dot(s, r)
    ok = (sBs > jnp.finfo(dtype).tiny) & (sr > jnp.finfo(dtype).tiny) & jnp.all(jnp.isfinite(r))
    upd = B - jnp.outer(Bs, Bs) / jnp.where(ok, sBs, 1) + jnp.outer(r, r) / jnp.where(ok, sr, 1)
    return jnp.where(ok, (upd + upd.T) / 2, B)


def convexified_hessian(H: jax.Array, JA: jax.Array) -> jax.Array:
    r"""A positive definite model of the Lagrangian's Hessian ``H`` near the active rows ``JA``.

    ``H`` is symmetrized and convexified along the active constraints first,
    $H + \rho J_A^\top J_A$ with $\rho = 10 \max(1, \|H\|_{\max}) /
    \|J_A^\top J_A\|_{\max}$: on $\{J_A d = -c_A\}$ the added term is constant, so
    the subproblem's solution is unchanged where ``H`` is positive definite on the null
    space of $J_A$ (Newton's local rate is kept). Then its eigenvalues are replaced by
    $\max(|\lambda|, \delta)$, $\delta = 10^{-8} \max(1, \max|\lambda|)$.
    Rows of ``JA`` that are zero do not count (inactive rows may be masked to zero).
    """
    H = (H + H.T) / 2
    G = JA.T @ JA
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(H)))
    gnorm = jnp.max(jnp.abs(G))
    rho = jnp.where(gnorm > 0, 10 * scale / jnp.where(gnorm > 0, gnorm, 1), 0)
    w, V = jnp.linalg.eigh(H + rho * G)
    delta = 1e-8 * jnp.maximum(1.0, jnp.max(jnp.abs(w)))
    return (V * jnp.maximum(jnp.abs(w), delta)) @ V.T
