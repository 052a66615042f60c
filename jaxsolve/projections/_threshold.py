r"""The workhorse of the weighted projections: an exact root of a monotone threshold sum.

For weights $w_i \ge 0$, bounds $l_i \le u_i$ and segments $s(i)$,
find one multiplier $\tau_g$ per segment with

$$
\phi_g(\tau_g) = \sum_{i \in g} w_i \operatorname{clip}(x_i - \tau_g w_i, l_i, u_i) = c_g
$$

(``nonneg=False``, an equality constraint), or the smallest $\tau_g \ge 0$ with
$\phi_g(\tau_g) \le c_g$ (``nonneg=True``, an inequality). This is the KKT system
of $\min \tfrac12\|y - x\|^2$ over $\{l \le y \le u,\ w^\top y\ (=|\le)\ c\}$,
solved segment by segment (e.g. Helgason, Kennington and Lall, Math. Prog. 1980;
Kiwiel, J. Optim. Theory Appl. 2008, for the breakpoint view).

Method: $\phi_g$ is piecewise linear and non-increasing. Bisection on
$\tau$ (not differentiated) shrinks the bracket to machine precision; the
coordinates are then split into those at $l$, at $u$ and free, and

$$
\tau_g = \frac{\sum_{\text{free}} w_i x_i + \sum_{\text{at } u} w_i u_i + \sum_{\text{at } l} w_i l_i - c_g}{\sum_{\text{free}} w_i^2}
$$

is evaluated in closed form. The closed form is the exact root of the linear piece
(so the result matches a QP solver to rounding), and it is what autodiff sees, so
the gradient is the Jacobian of the projection without differentiating a loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsolve.projections._common import clamp_keep_grad


def _num_bisections(dtype) -> int:
    """Bisection steps: each halving gains a bit, so the mantissa bits plus a margin
    reach adjacent floats from any bracket the data defines."""
    return int(jnp.finfo(dtype).nmant) + 8


def threshold(x, w, lo, hi, c, *, segments=None, num_segments: int = 1, nonneg: bool = False):
    """Solve the threshold equation above; returns ``(y, tau)``.

    ``x, w, lo, hi``: 1-D arrays of one length (``w >= 0``; ``hi`` may be ``+inf``
    only when ``nonneg``; ``lo`` finite). ``c``: shape ``(num_segments,)``.
    ``segments``: int array of segment ids (None = one segment). The caller checks
    feasibility (``sum w lo <= c``, and ``c <= sum w hi`` for an equality).
    """
    if segments is None:
        seg_sum = lambda v: jnp.sum(v)[None]
        seg_max = lambda v: jnp.max(v)[None]
        seg_min = lambda v: jnp.min(v)[None]
        spread = lambda t: t[0]
    else:
        seg_sum = lambda v: jax.ops.segment_sum(v, segments, num_segments)
        seg_max = lambda v: jax.ops.segment_max(v, segments, num_segments)
        seg_min = lambda v: jax.ops.segment_min(v, segments, num_segments)
        spread = lambda t: t[segments]

    # the bracketing works on constants (no derivative flows through the bisection)
    xs, ws, ls, us, cs = (jax.lax.stop_gradient(a) for a in (x, w, lo, hi, c))
    pos = ws > 0
    wpos = jnp.where(pos, ws, 1)

    def phi(tau):
        return seg_sum(ws * jnp.clip(xs - spread(tau) * ws, ls, us))

    # Bracket: phi(high) = sum w*lo <= c; phi(low) = sum w*hi >= c (or low = 0).
    high = seg_max(jnp.where(pos, (xs - ls) / wpos, -jnp.inf))
    high = jnp.where(jnp.isfinite(high), high, 0)
    if nonneg:
        need = phi(jnp.zeros_like(cs)) > cs
        low = jnp.zeros_like(high)
        high = jnp.maximum(high, 0)
    else:
        need = jnp.ones(cs.shape, bool)
        low = seg_min(jnp.where(pos, (xs - us) / wpos, jnp.inf))
        low = jnp.where(jnp.isfinite(low), low, high)

    def body(_, bracket):
        a, b = bracket
        m = 0.5 * (a + b)
        above = phi(m) > cs
        return jnp.where(above, m, a), jnp.where(above, b, m)

    a, b = jax.lax.fori_loop(0, _num_bisections(xs.dtype), body, (low, high))
    mid = jnp.where(need, 0.5 * (a + b), 0)
    width = jnp.where(need, b - a, 0)

    # Active set at the bracketed multiplier.
    z = xs - spread(mid) * ws
    at_hi = z >= us
    at_lo = (z <= ls) & ~at_hi
    free = ~(at_hi | at_lo)
    bound = jnp.where(at_hi, jnp.where(at_hi, hi, 0), jnp.where(at_lo, lo, 0))

    # Exact multiplier on that active set (differentiable in x, w, lo, hi, c).
    num = seg_sum(jnp.where(free, w * x, 0) + jnp.where(free, 0, w * bound)) - c
    den = seg_sum(jnp.where(free, w * w, 0))
    ok = den > 0
    tau_exact = num / jnp.where(ok, den, 1)
    eps = jnp.finfo(xs.dtype).eps
    slack = 4 * width + 16 * eps * (jnp.abs(mid) + jnp.abs(jax.lax.stop_gradient(tau_exact)))
    trusted = ok & (jnp.abs(jax.lax.stop_gradient(tau_exact) - mid) <= slack)
    # Keep the closed form's derivative; fall back to the bracket's value only if
    # rounding put the closed form off its piece (a degenerate tie).
    tau = jnp.where(trusted, tau_exact, tau_exact + jax.lax.stop_gradient(mid - tau_exact))
    tau = jnp.where(ok, tau, jax.lax.stop_gradient(mid))
    tau = jnp.where(need, tau, 0)

    y = jnp.where(free, x - spread(tau) * w, bound)
    return clamp_keep_grad(y, lo, hi), tau
