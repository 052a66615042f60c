r"""The batched forward of `project`: Pinet's own step on the whole batch, with checks and polish.

Every step is `PinetProjection.step` (`jaxsolve.layers.pinet`) vmapped over the lanes,
with the factors shared (one matrix-matrix product per step), and the start is its
``init`` vmapped, so the single solver and the batched layer run one iteration and one
infeasibility certificate. Every ``check_every`` steps each lane is checked (the
step's residual and certificate, and the active-set polish of
`jaxsolve.layers.active`); a lane that passes is frozen (`jaxsolve.core.batch.lane_select`),
so a batched call returns, lane for lane, what single calls return. The checks and the
final status are the layer's own, not the driver's (`jaxsolve.core.driver.final_solution`):
they run every ``check_every`` steps and accept a polished point. Stragglers are
gathered into smaller batches by the core's lane compaction
(`jaxsolve.core.batch.run_compacted`). The forward runs on constant inputs;
`jaxsolve.layers.project` attaches the derivatives.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Status
from jaxsolve.core.batch import lane_select, run_compacted
from jaxsolve.core.protocol import hyper
from jaxsolve.layers.active import cg_budget, gram_for, polish, refine
from jaxsolve.layers.pinet import PinetProjection, ProjectionArgs, State

__all__ = ["Config", "forward"]

# vmap over the lanes: the factors are shared, the rest of the data is per lane
_AXES = (0, ProjectionArgs(None, 0, 0, 0, 0))


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


class _Lanes(NamedTuple):
    """Per-example data of the batched forward (leading axis = lane)."""

    y: jax.Array
    b: jax.Array
    lo: jax.Array
    hi: jax.Array


class _Carry(NamedTuple):
    """Per-example loop state (leading axis = lane).

    ``run`` is the solver's state, stepped on every lane; ``out`` is what a lane
    returns, its `State` at the check where it finished (``x`` and ``error`` those of
    the polish when that was accepted, ``status`` the lane's final status), frozen
    from then on.
    """

    run: State
    out: State
    done: jax.Array
    act_prev: jax.Array  # active set at the previous check
    act_tried: jax.Array  # active set of the last polish attempt
    lam: jax.Array  # CG warm start


def forward(cfg: Config, y, b, lo, hi, s0, factors, solver: PinetProjection, tol) -> State:
    """Batched Douglas-Rachford with checks and polish (`project`'s docstring); leading axis = batch.

    Returns each lane's final `State` (``x``, ``s``, ``status``, ``iter_num`` = steps,
    ``error``, ``act``). The loop runs on the whole batch until at most 1/8 of the
    lanes are still running; those are then gathered into a batch of 1/8 the size (and
    so on: the core's straggler compaction, `jaxsolve.core.batch.run_compacted`), so
    that the stragglers do not cost full-batch matrix products. Lanes compute
    independently and on the same check schedule, so the result does not depend on
    the batch.
    """
    f = factors
    n, m = f.n, f.m
    dtype = y.dtype
    tol = hyper(tol, dtype)
    batch = y.shape[0]
    rows = n + m if cfg.bounds else m
    warm_start = cfg.start == "governing"
    gram = gram_for(f, cfg.bounds, dtype)
    init = jax.vmap(solver.init, in_axes=_AXES)
    step = jax.vmap(solver.step, in_axes=_AXES)

    # Statuses known before any step (`init`): inconsistent Ax = b, an empty box.
    start = init(s0, ProjectionArgs(f, y, b, lo, hi))
    infeasible = start.status == Status.INFEASIBLE
    finite0 = jnp.all(jnp.isfinite(start.s), axis=-1)
    status0 = jnp.where(
        infeasible, Status.INFEASIBLE, jnp.where(finite0, Status.MAX_STEPS, Status.NONFINITE)
    ).astype(jnp.int32)
    no_act = jnp.full(start.s.shape, 2, jnp.int8)  # matches no active set
    carry = _Carry(
        run=start,
        out=start._replace(status=status0),
        done=infeasible | ~finite0,
        act_prev=no_act,
        act_tried=no_act,
        lam=jnp.zeros((batch, rows), dtype),
    )

    def phase(lanes: _Lanes, carry: _Carry, k, j, max_live):
        y, b, lo, hi = lanes
        args = ProjectionArgs(f, y, b, lo, hi)
        size = y.shape[0]

        def lean(_, run):
            # between checks only the iterate is kept: XLA drops the step's residual,
            # certificate and active set, which nothing reads there
            new, _ = step(run, args)
            return run._replace(iter_num=new.iter_num, s=new.s, ps=new.ps, delta=new.delta)

        def cond(state):
            k, _, c = state
            return (k < cfg.steps) & (jnp.sum(~c.done) > max_live)

        def body(state):
            k, j, c = state
            nb = jnp.minimum(jnp.where(j == 0, 2, cfg.check_every), cfg.steps - k)
            run = jax.lax.fori_loop(0, nb - 1, lean, c.run)
            run, _ = step(run, args)
            # a running lane's status stays SUCCESS until the certificate fires
            certified = run.status == Status.INFEASIBLE
            act = run.act
            live = ~c.done
            ok_dr = run.error <= tol
            x_new, e_new, lam, act_tried = run.x, run.error, c.lam, c.act_tried
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
                    return run.x, lam, jnp.full((size,), jnp.inf, dtype)

                x_pol, lam_pol, e_pol = jax.lax.cond(jnp.any(want), attempt, skip, lam)
                # keep the warm start of lanes that did not ask for this polish, and drop
                # a diverged one (a wrong active set can make the masked system singular)
                good = want[:, None] & jnp.isfinite(lam_pol) & jnp.isfinite(e_pol)[:, None]
                lam = jnp.where(good, lam_pol, jnp.where(want[:, None], 0, lam))
                ok_pol = want & (e_pol <= tol)
                act_tried = jnp.where(want[:, None], act, act_tried)
                x_new = jnp.where(ok_pol[:, None], x_pol, run.x)
                e_new = jnp.where(ok_pol, e_pol, run.error)
                ok = ok_dr | ok_pol
            else:
                ok = ok_dr
            finite = jnp.isfinite(e_new) & jnp.all(jnp.isfinite(x_new), axis=-1)
            status = jnp.where(
                ~finite,
                Status.NONFINITE,
                jnp.where(
                    ok, Status.SUCCESS, jnp.where(certified, Status.INFEASIBLE, Status.MAX_STEPS)
                ),
            ).astype(jnp.int32)
            ended = run._replace(x=x_new, error=e_new, status=status)
            c = _Carry(
                run=run,
                out=lane_select(live, ended, c.out),
                done=c.done | (live & (status != Status.MAX_STEPS)),
                act_prev=act,
                act_tried=act_tried,
                lam=lam,
            )
            return k + nb, j + 1, c

        return jax.lax.while_loop(cond, body, (k, j, carry))

    def run_phase(lanes, carry, shared, max_live):
        k, j, carry = phase(lanes, carry, *shared, max_live)
        return carry, (k, j)

    shared = (jnp.int32(0), jnp.int32(0))
    carry, _ = run_compacted(run_phase, _Lanes(y, b, lo, hi), carry, shared, lambda c: c.done)
    out = carry.out
    if cfg.refine:
        x = out.x
        x_ref = refine(f, cfg.bounds, x, b, lo, hi, out.act, tol, cg_budget(rows))
        # a correction removes round-off: one that moves x by more than sqrt(eps) |x| (a
        # singular active-set system, say) is not one, and the lane keeps its x
        move = jnp.max(jnp.abs(x_ref - x), axis=-1)
        bound = float(np.sqrt(np.finfo(dtype).eps)) * jnp.maximum(1, jnp.max(jnp.abs(x), -1))
        ok = (out.status == Status.SUCCESS) & (move <= bound)
        out = out._replace(x=jnp.where(ok[:, None], x_ref, x))
    return out
