r"""The batched forward of `project`: Douglas-Rachford on the whole batch, with checks and polish.

Pinet's step, start checks and infeasibility certificate (`jaxsolve.layers.pinet`) run
on a leading batch axis as matrix-matrix products with the shared factors; every
``check_every`` steps each lane is checked (residual, certificate, and the active-set
polish of `jaxsolve.layers.active`), and a lane that passes is frozen, so a batched
call returns, lane for lane, what single calls return. Stragglers are gathered into
smaller batches by the core's lane compaction (`jaxsolve.core.batch.run_compacted`).
The forward runs on constant inputs; `jaxsolve.layers.project` attaches the derivatives.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Status
from jaxsolve.core.batch import run_compacted
from jaxsolve.core.protocol import hyper
from jaxsolve.layers.active import cg_budget, gram_for, polish, refine
from jaxsolve.layers.pinet import (
    PinetProjection,
    dr_step,
    governing_start,
    infeasibility_certificate,
    relative_residual,
    resolve_sigma,
    scaled_infeasible_tol,
    start_infeasible,
)

__all__ = ["Config", "Out", "forward"]


class Config(NamedTuple):
    """The static configuration of `project` (one compilation per value)."""

    steps: int
    start: str
    backward: str
    backward_steps: int
    check_every: int = 5
    polish: bool = True
    bounds: bool = True
    refine: bool = False
    # the Douglas-Rachford backward solvers' tolerance (a static part of their solve)
    dr_tol: float | None = None


class Out(NamedTuple):
    """What the batched forward returns per lane (leading axis = lane)."""

    x: jax.Array
    s: jax.Array
    status: jax.Array
    steps: jax.Array
    error: jax.Array
    act: jax.Array


class _Lanes(NamedTuple):
    """Per-example data of the batched forward (leading axis = lane)."""

    y: jax.Array
    b: jax.Array
    lo: jax.Array
    hi: jax.Array
    q: jax.Array


class _Carry(NamedTuple):
    """Per-example loop state; the ``*_out`` fields are frozen once a lane is done."""

    s: jax.Array  # governing sequence
    ps: jax.Array  # P s of the last step
    delta: jax.Array  # t - z of the last step
    x_out: jax.Array
    s_out: jax.Array
    e_out: jax.Array
    st_out: jax.Array
    k_out: jax.Array
    done: jax.Array
    act_out: jax.Array
    act_prev: jax.Array  # active set at the previous check
    act_tried: jax.Array  # active set of the last polish attempt
    lam: jax.Array  # CG warm start


def forward(cfg: Config, y, b, lo, hi, s0, factors, solver: PinetProjection, tol) -> Out:
    """Batched Douglas-Rachford with checks and polish (`project`'s docstring); leading axis = batch.

    The loop runs on the whole batch until at most 1/8 of the lanes are still running;
    those are then gathered into a batch of 1/8 the size (and so on: the core's
    straggler compaction, `jaxsolve.core.batch.run_compacted`), so that the
    stragglers do not cost full-batch matrix products. Lanes compute independently and
    on the same check schedule, so the result does not depend on the batch.
    """
    f = factors
    n, m = f.n, f.m
    dtype = y.dtype
    d = f.d_c.astype(dtype)
    dx = d[:n]
    sigma, omega = resolve_sigma(solver.sigma, f, dtype), hyper(solver.omega, dtype)
    itol = scaled_infeasible_tol(solver.infeasible_tol, dtype)
    tol = hyper(tol, dtype)
    q = f.offset(b)
    s = governing_start(f, s0) if cfg.start == "point" else s0
    batch = y.shape[0]
    rows = n + m if cfg.bounds else m
    warm_start = cfg.start == "governing"
    gram = gram_for(f, cfg.bounds, dtype)

    # Statuses known before any step: inconsistent Ax = b, an empty box.
    infeasible = start_infeasible(f, q, b, lo / d, hi / d, itol)
    finite0 = jnp.all(jnp.isfinite(s), axis=-1)
    status0 = jnp.where(
        infeasible, Status.INFEASIBLE, jnp.where(finite0, Status.MAX_STEPS, Status.NONFINITE)
    ).astype(jnp.int32)
    big = jnp.asarray(jnp.finfo(dtype).max, dtype)
    no_act = jnp.full(s.shape, 2, jnp.int8)  # matches no active set
    carry = _Carry(
        s=s,
        ps=jnp.zeros_like(s),
        delta=jnp.zeros_like(s),
        x_out=dx * s[:, :n],
        s_out=s,
        e_out=jnp.where(finite0, big, jnp.nan).astype(dtype),
        st_out=status0,
        k_out=jnp.zeros((batch,), jnp.int32),
        done=infeasible | ~finite0,
        act_out=jnp.zeros(s.shape, jnp.int8),
        act_prev=no_act,
        act_tried=no_act,
        lam=jnp.zeros((batch, rows), dtype),
    )
    lanes = _Lanes(y, b, lo, hi, q)

    def phase(lanes: _Lanes, carry: _Carry, k, j, max_live):
        y, b, lo, hi, q = lanes
        size = y.shape[0]
        lo_s, hi_s = lo / d, hi / d

        def lean(_, c):
            step = dr_step(c[0], q, y, lo_s, hi_s, f, sigma, omega)
            return step.s, step.ps, step.t - step.z

        def cond(state):
            k, _, c = state
            return (k < cfg.steps) & (jnp.sum(~c.done) > max_live)

        def body(state):
            k, j, c = state
            nb = jnp.minimum(jnp.where(j == 0, 2, cfg.check_every), cfg.steps - k)
            s, ps_prev, delta_prev = jax.lax.fori_loop(0, nb - 1, lean, (c.s, c.ps, c.delta))
            ps, z, t, s_new, act = dr_step(s, q, y, lo_s, hi_s, f, sigma, omega)
            delta = t - z
            k_new = k + nb
            error = relative_residual(d, z, delta)
            x_dr = dx * z[:, :n]
            certified, _ = infeasibility_certificate(
                delta_prev, ps_prev, ps, q, lo_s, hi_s, omega, itol
            )
            certified = certified & (k_new >= 2)
            live = ~c.done
            ok_dr = error <= tol
            x_new, e_new, lam, act_tried = x_dr, error, c.lam, c.act_tried
            if cfg.polish:
                want = (
                    live
                    & ~ok_dr
                    # a warm start may polish at once; otherwise the active set must
                    # have survived a whole block unchanged
                    & (jnp.all(act == c.act_prev, axis=-1) | (warm_start & (j == 0)))
                    & jnp.any(act != c.act_tried, axis=-1)
                )

                def attempt(lam):
                    return polish(
                        f, cfg.bounds, y, b, lo, hi, act, lam, tol, cg_budget(rows), want, gram
                    )

                def skip(lam):
                    return x_dr, lam, jnp.full((size,), jnp.inf, dtype)

                x_pol, lam_pol, e_pol = jax.lax.cond(jnp.any(want), attempt, skip, lam)
                # keep the warm start of lanes that did not ask for this polish, and drop
                # a diverged one (a wrong active set can make the masked system singular)
                good = want[:, None] & jnp.isfinite(lam_pol) & jnp.isfinite(e_pol)[:, None]
                lam = jnp.where(good, lam_pol, jnp.where(want[:, None], 0, lam))
                ok_pol = want & (e_pol <= tol)
                act_tried = jnp.where(want[:, None], act, act_tried)
                x_new = jnp.where(ok_pol[:, None], x_pol, x_dr)
                e_new = jnp.where(ok_pol, e_pol, error)
                ok = ok_dr | ok_pol
            else:
                ok = ok_dr
            finite = jnp.isfinite(e_new) & jnp.all(jnp.isfinite(x_new), axis=-1)
            st = jnp.where(
                ~finite,
                Status.NONFINITE,
                jnp.where(
                    ok, Status.SUCCESS, jnp.where(certified, Status.INFEASIBLE, Status.MAX_STEPS)
                ),
            ).astype(jnp.int32)
            upd = live[:, None]
            c = _Carry(
                s=s_new,
                ps=ps,
                delta=delta,
                x_out=jnp.where(upd, x_new, c.x_out),
                s_out=jnp.where(upd, s_new, c.s_out),
                e_out=jnp.where(live, e_new, c.e_out),
                st_out=jnp.where(live, st, c.st_out),
                k_out=jnp.where(live, k_new, c.k_out),
                done=c.done | (live & (st != Status.MAX_STEPS)),
                act_out=jnp.where(upd, act, c.act_out),
                act_prev=act,
                act_tried=act_tried,
                lam=lam,
            )
            return k_new, j + 1, c

        return jax.lax.while_loop(cond, body, (k, j, carry))

    def run_phase(lanes, carry, shared, max_live):
        k, j, carry = phase(lanes, carry, *shared, max_live)
        return carry, (k, j)

    shared = (jnp.int32(0), jnp.int32(0))
    carry, _ = run_compacted(run_phase, lanes, carry, shared, lambda c: c.done)
    x = carry.x_out
    if cfg.refine:
        x_ref = refine(f, cfg.bounds, x, b, lo, hi, carry.act_out, tol, cg_budget(rows))
        # a correction removes round-off: one that moves x by more than sqrt(eps) |x| (a
        # singular active-set system, say) is not one, and the lane keeps its x
        move = jnp.max(jnp.abs(x_ref - x), axis=-1)
        bound = float(np.sqrt(np.finfo(dtype).eps)) * jnp.maximum(1, jnp.max(jnp.abs(x), -1))
        ok = (carry.st_out == Status.SUCCESS) & (move <= bound)
        x = jnp.where(ok[:, None], x_ref, x)
    return Out(x, carry.s_out, carry.st_out, carry.k_out, carry.e_out, carry.act_out)
