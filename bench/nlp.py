"""SQP benchmark: unicycle obstacle avoidance, FlexQP subproblems against OSQP ones and SLSQP.

Problems: `jaxsolve.nlp.problems.unicycle` (horizon T = 30: 150 variables, 90 dynamics
equalities, 30 obstacle inequalities per obstacle, boxed inputs), random scenarios
from `unicycle_data` (2 obstacles near the straight line from start to goal), all
started from the reference inputs' rollout nudged sideways (omega = 0.3).

Methods, all to a KKT residual of 1e-6 (float64):

* ``sqp+flexqp``: `jaxsolve.nlp.sqp` (exact Hessian, convexified), one compiled call;
* ``sqp+osqp``: the same outer loop (same class, same merit, line search and Hessian)
  with each subproblem solved by OSQP 1.x on the host (``jax.pure_callback``; eps
  1e-6 with polish, which makes a solution exact once its active set is right; at
  eps 1e-9 OSQP took 20k iterations per subproblem and solved 2 of 10). An infeasible linearization makes OSQP return no step, where
  FlexQP returns the least-violation one: this is the comparison the paper makes;
* ``slsqp``: SciPy's SLSQP (``ftol`` 1e-10) on the same functions (jitted values and
  gradients).

Success: SUCCESS status (for SLSQP its ``success``) and a trajectory whose dynamics
residual and obstacle penetration are at most 1e-6. Wall time: median over the
problems of a solve after compilation (the compile time apart).
``--n``: number of scenarios (default 100; ``--quick``: 10).

``--batch B`` (issue 26's batch clause): B scenarios as one ``jax.jit(jax.vmap(...))``
call of ``sqp+flexqp``: its compile time, its wall time (per problem: divided by B),
its solved count, and every lane against the single solve of the same scenario
(status, step count, largest difference in ``x``). A vmapped while loop runs every
lane until the slowest one ends (finished lanes frozen), so the batch costs
B x (the slowest lane's steps) of batched work.
"""

from __future__ import annotations

import argparse
import datetime
import time
from typing import NamedTuple

from _util import optional, setup, write_results

setup(threads=None)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import peers.osqp  # noqa: E402
from jaxsolve import Status, solve, solve_batch  # noqa: E402
from jaxsolve.core.protocol import AbstractSolver  # noqa: E402
from jaxsolve.nlp import problems, sqp  # noqa: E402

osqp = optional("osqp")
from scipy.optimize import minimize  # noqa: E402

T = 30
TOL = 1e-6


class _OSQPState(NamedTuple):
    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    y: jax.Array
    z: jax.Array
    rho: jax.Array
    mu: jax.Array


def _osqp_host(P, q, A, l, u):
    r = peers.osqp.solve_qp(
        (P, q, A, l, u), eps_abs=1e-6, eps_rel=1e-6, polish=True, max_iter=10000
    )
    ok = r.info.status_val in (1, 2)  # solved, solved inaccurate
    x = np.asarray(r.x) if ok else np.full(np.shape(q), np.nan)
    y = np.asarray(r.y) if ok else np.zeros(np.shape(l))
    status = Status.SUCCESS if ok else Status.INFEASIBLE
    return x, y, np.int32(status)


class OSQPSubproblem(AbstractSolver):
    """A QP 'solver' for `jaxsolve.nlp.sqp` that calls OSQP on the host in ``init``."""

    def init(self, x0, qp):
        dt = qp.q.dtype
        shapes = (
            jax.ShapeDtypeStruct(qp.q.shape, dt),
            jax.ShapeDtypeStruct(qp.l.shape, dt),
            jax.ShapeDtypeStruct((), jnp.int32),
        )
        x, y, status = jax.pure_callback(_osqp_host, shapes, qp.P, qp.q, qp.A, qp.l, qp.u)
        return _OSQPState(
            x=x,
            iter_num=jnp.int32(0),
            error=jnp.zeros((), dt),
            status=status,
            y=y,
            z=qp.A @ jnp.where(jnp.isfinite(x), x, 0),
            rho=jnp.asarray(0.1, dt),
            mu=jnp.zeros((), dt),
        )

    def step(self, state, qp):
        return state, None


def _quality(prob, z, d):
    viol_dyn = float(np.max(np.abs(np.asarray(prob.eq(jnp.asarray(z), d)))))
    pen = float(np.max(np.asarray(prob.ineq(jnp.asarray(z), d))))
    return max(viol_dyn, pen)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--batch", type=int, default=0, help="vmapped batch size (0: skip)")
    ap.add_argument(
        "--compact", type=int, default=5, help="--batch: compaction rounds (0: skip that run)"
    )
    ap.add_argument("--horizon", type=int, default=T, help="--batch: the trajectories' horizon")
    a = ap.parse_args(argv)
    if a.batch:
        return batch_section(a.batch, a.out, a.compact, a.horizon)
    n = 10 if a.quick else a.n
    prob = problems.unicycle(T)
    scen = [problems.unicycle_data(jax.random.key(s)) for s in range(n)]
    starts = [problems.unicycle_rollout(d, d.u_ref.at[:, 1].set(0.3)) for d in scen]
    rows = {}

    def run_sqp(name, solver):
        run = jax.jit(lambda z0, d: solve(solver, z0, d, tol=TOL, max_steps=150))
        t0 = time.perf_counter()
        jax.block_until_ready(run(starts[0], scen[0]))
        compile_s = time.perf_counter() - t0
        times, ok, iters = [], 0, []
        for z0, d in zip(starts, scen, strict=True):
            t0 = time.perf_counter()
            sol = jax.block_until_ready(run(z0, d))
            times.append(time.perf_counter() - t0)
            good = int(sol.status) == Status.SUCCESS and _quality(prob, sol.x, d) <= TOL
            ok += good
            iters.append(int(sol.num_steps))
        rows[name] = (ok, np.median(times), compile_s, np.median(iters))
        print(f"{name}: {ok}/{n} solved, median {np.median(times):.3f} s", flush=True)

    base = dict(lb=prob.lb, ub=prob.ub, hessian="exact")
    run_sqp("sqp+flexqp", sqp(prob.fun, prob.eq, prob.ineq, **base))
    if osqp is not None:
        run_sqp("sqp+osqp", sqp(prob.fun, prob.eq, prob.ineq, qp_solver=OSQPSubproblem(), **base))

    f = jax.jit(prob.fun)
    g = jax.jit(jax.grad(prob.fun))
    ce, je = jax.jit(prob.eq), jax.jit(jax.jacfwd(prob.eq))
    ci, ji = jax.jit(prob.ineq), jax.jit(jax.jacfwd(prob.ineq))
    times, ok, iters = [], 0, []
    bounds = list(zip(prob.lb, prob.ub, strict=True))

    def slsqp(z0, d):
        cons = [
            dict(type="eq", fun=lambda z: np.asarray(ce(z, d)), jac=lambda z: np.asarray(je(z, d))),
            dict(
                type="ineq",
                fun=lambda z: -np.asarray(ci(z, d)),
                jac=lambda z: -np.asarray(ji(z, d)),
            ),
        ]
        return minimize(
            lambda z: float(f(z, d)),
            np.asarray(z0),
            jac=lambda z: np.asarray(g(z, d)),
            method="SLSQP",
            constraints=cons,
            bounds=bounds,
            options=dict(ftol=1e-10, maxiter=500),
        )

    for z0, d in zip(starts, scen, strict=True):
        t0 = time.perf_counter()
        r = slsqp(z0, d)
        times.append(time.perf_counter() - t0)
        ok += bool(r.success) and _quality(prob, r.x, d) <= TOL
        iters.append(r.nit)
    rows["slsqp"] = (ok, np.median(times[1:] or times), float("nan"), np.median(iters))
    print(f"slsqp: {ok}/{n} solved, median {np.median(times):.3f} s", flush=True)

    ref = rows["sqp+flexqp"][1]
    lines = [
        f"# SQP on unicycle obstacle avoidance (T = {T}, {n} scenarios)",
        "",
        f"`python bench/nlp.py --n {n}` on {datetime.date.today()}, float64, "
        f"{jax.device_count()} {jax.default_backend()} device(s); KKT tol {TOL}.",
        "",
        "| method | solved | median wall (s) | time / sqp+flexqp | compile (s) | median iterations |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (ok, t, c, it) in rows.items():
        lines.append(f"| {name} | {ok}/{n} | {t:.3f} | {t / ref:.2f} | {c:.1f} | {it:.0f} |")
    write_results("nlp", "\n".join(lines) + "\n", quick=a.quick, out=a.out)


def batch_section(B: int, out=None, compact: int = 5, horizon: int = T):
    """One jit(vmap) call over B scenarios against B single solves (see the module);
    ``compact`` > 0 also times `solve_batch(..., compact=compact)` (twice: its first call
    compiles every batch width), 0 skips it (the large batches). ``horizon``: the
    trajectories' T (the main table's 30 by default)."""
    prob = problems.unicycle(horizon)
    keys = jax.random.split(jax.random.key(0), B)
    scen = jax.vmap(lambda k: problems.unicycle_data(k, horizon))(keys)
    starts = jax.vmap(lambda d: problems.unicycle_rollout(d, d.u_ref.at[:, 1].set(0.3)))(scen)
    solver = sqp(prob.fun, prob.eq, prob.ineq, lb=prob.lb, ub=prob.ub, hessian="exact")
    one = lambda z0, d: solve(solver, z0, d, tol=TOL, max_steps=150)
    batched = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = batched.lower(starts, scen).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = jax.block_until_ready(compiled(starts, scen))
    wall = time.perf_counter() - t0
    # the same batch with straggler compaction (rounds of `compact` steps from the host,
    # the running lanes gathered into narrower batches): first call compiles every width
    compact_row = []
    if compact:
        run_c = lambda: solve_batch(solver, starts, scen, tol=TOL, max_steps=150, compact=compact)
        t0 = time.perf_counter()
        jax.block_until_ready(run_c())
        compact_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        sol_c = jax.block_until_ready(run_c())
        compact_wall = time.perf_counter() - t0
        compact_same = bool(
            np.array_equal(np.asarray(sol_c.num_steps), np.asarray(sol.num_steps))
            and np.array_equal(np.asarray(sol_c.status), np.asarray(sol.status))
        )
        compact_dx = float(jnp.max(jnp.abs(sol_c.x - sol.x)))
        compact_row = [
            f"| compacted batch (`solve_batch(..., compact={compact})`): wall, first call (s) | "
            f"{compact_wall:.2f}, {compact_first:.1f} |",
            f"| compacted: same statuses and steps as the plain batch; largest abs difference "
            f"in x | {compact_same}; {compact_dx:.1e} |",
        ]
    single = jax.jit(one)
    jax.block_until_ready(single(starts[0], jax.tree.map(lambda a: a[0], scen)))
    same_status = same_steps = solved = 0
    dx, dx_solved, loop_s = 0.0, 0.0, 0.0
    differ = []
    for i in range(B):
        d = jax.tree.map(lambda a, i=i: a[i], scen)
        t0 = time.perf_counter()
        s1 = jax.block_until_ready(single(starts[i], d))
        loop_s += time.perf_counter() - t0
        same_status += int(s1.status) == int(sol.status[i])
        same_steps += int(s1.num_steps) == int(sol.num_steps[i])
        dxi = float(jnp.max(jnp.abs(s1.x - sol.x[i])))
        dx = max(dx, dxi)
        both_ok = int(s1.status) == int(sol.status[i]) == Status.SUCCESS
        dx_solved = max(dx_solved, dxi) if both_ok else dx_solved
        if dxi > 1e-8 or int(s1.num_steps) != int(sol.num_steps[i]):
            differ.append(
                f"lane {i}: status {Status(int(sol.status[i])).name} / {Status(int(s1.status)).name}, "
                f"steps {int(sol.num_steps[i])} / {int(s1.num_steps)}, max |dx| {dxi:.1e}"
            )
        ok = int(sol.status[i]) == Status.SUCCESS and _quality(prob, sol.x[i], d) <= TOL
        solved += ok
    steps = np.asarray(sol.num_steps)
    lines = [
        f"# SQP batch: {B} unicycle scenarios in one jit(vmap) call (T = {horizon})",
        "",
        f"`python bench/nlp.py --batch {B}{'' if compact == 5 else f' --compact {compact}'}"
        f"{'' if horizon == T else f' --horizon {horizon}'}` on {datetime.date.today()}, float64, "
        f"{jax.device_count()} {jax.default_backend()} device(s); KKT tol {TOL}; "
        "scenarios `unicycle_data(split(key(0), B)[i])`, started as the main table's.",
        "",
        "| | value |",
        "|---|---:|",
        f"| solved (SUCCESS and violation <= {TOL}) | {solved}/{B} |",
        f"| compile (s) | {compile_s:.1f} |",
        f"| batch wall (s) | {wall:.2f} |",
        f"| per problem, batched (s) | {wall / B:.4f} |",
        f"| per problem, the same solves one by one (s) | {loop_s / B:.4f} |",
        *compact_row,
        f"| SQP steps: median / max | {np.median(steps):.0f} / {steps.max()} |",
        f"| lanes with the loop's status | {same_status}/{B} |",
        f"| lanes with the loop's step count | {same_steps}/{B} |",
        f"| largest abs difference in x, batch vs loop | {dx:.1e} |",
        f"| the same, over the lanes SUCCESS in both | {dx_solved:.1e} |",
        "",
        *(["Lanes that differ from the loop (batch / loop):", ""] if differ else []),
        *(f"* {d}" for d in differ),
        *([""] if differ else []),
    ]
    print("\n".join(lines), flush=True)
    write_results("nlp_batch", "\n".join(lines), quick=False, out=out)


if __name__ == "__main__":
    main()
