"""Batched QP benchmark: FlexQP (lockstep batch) vs the OSQP loop, qpax (vmapped) and jaxopt BoxOSQP (vmapped).

1024 random QPs (``jaxsolve.qp.problems.random_qp``: P = MM' + 1e-2 I, sparse(0.15) data
stored dense, half the rows two-sided), at n=20, m=40 and n=100, m=150, in float32 and
float64, all at tolerance 1e-4. Compile time is reported apart from steady-state time
(median of repeated calls). Accuracy: ||x - x*|| / max(1, ||x*||) against OSQP at 1e-10
with polishing (max and median over the batch), plus the max violation. Per-instance status
counts for every solver: a batch must not hide failures. Wall time and the process's CPU
time are both reported: on a shared machine the CPU time is the steadier measure (XLA may
use both cores, so FlexQP's CPU time can exceed its wall time; OSQP runs on one).

    python bench/qp.py [--quick] [--one-core] [--out bench/results/qp.md]

``--one-core`` pins the whole process (every thread XLA starts too) to one CPU before
JAX starts: the OSQP loop runs on one core anyway, while XLA:CPU's second thread
measured ~0.02 s of extra CPU time on a 0.06 s batch (n = 20) for little wall time, and
on a 2-core machine the per-process wall time of the batch varied 0.056-0.09 s from
one process to the next; pinned, 0.062-0.065 s with CPU time equal to wall time. The
pinned run is the per-core throughput comparison; it writes ``qp_one_core.md``.

The Maros-Meszaros comparison is ``bench/maros_meszaros.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

from _util import setup, write_results

setup(x64=False)

import numpy as np  # noqa: E402

from peers.timing import compile_and_steady  # noqa: E402

TOL = 1e-4
FLEX_LABEL = "batch='auto': lockstep chunks on CPU"


def _have(mod):
    return importlib.util.find_spec(mod) is not None


def make_batch(B, n, m, dtype):
    import jax

    from jaxsolve.qp import problems

    keys = jax.random.split(jax.random.key(n * 1000 + m), B)
    return jax.vmap(lambda k: problems.random_qp(k, n, m, dtype=dtype))(keys)


def reference(qp_np):
    import peers.osqp

    P, q, A, l, u = qp_np
    xs = [
        peers.osqp.solve_qp(
            (P[i], q[i], A[i], l[i], u[i]),
            eps_abs=1e-10,
            eps_rel=1e-10,
            polishing=True,
            max_iter=200000,
        ).x
        for i in range(q.shape[0])
    ]
    return np.stack(xs)


def _accuracy(x, xref, qp_np):
    x = np.asarray(x, np.float64)
    keep = ~np.all(np.isnan(x), axis=1)  # lanes a peer did not run
    x, xref = x[keep], xref[keep]
    qp_np = tuple(v[keep] for v in qp_np)
    err = np.linalg.norm(x - xref, axis=1) / np.maximum(1.0, np.linalg.norm(xref, axis=1))
    _, _, A, l, u = qp_np
    ax = np.einsum("bmn,bn->bm", A, x)
    viol = np.max(np.maximum(ax - u, 0) + np.maximum(l - ax, 0), axis=1)
    return (
        float(np.nanmax(err)) if np.all(np.isfinite(err)) else float("nan"),
        float(np.median(err)),
        float(np.max(viol)),
    )


def _cpu_time(fn, repeat):
    """Median process CPU time of ``repeat`` calls (after the timed ones: compiled)."""
    import jax

    ts = []
    for _ in range(repeat):
        c0 = time.process_time()
        jax.block_until_ready(fn())
        ts.append(time.process_time() - c0)
    return float(np.median(ts))


def run_flexqp(qp, repeat, batch="auto"):
    from jaxsolve.qp import solve_qp

    # batch="auto": on a CPU backend the lockstep batch (jaxsolve.qp.lockstep: chunks of
    # lanes stepped together, re-chunked between rounds, stragglers one at a time);
    # "map" is the previous CPU default (lax.map, one problem after another).
    fn = lambda: solve_qp(qp, tol=TOL, max_steps=4000, batch=batch)  # noqa: E731
    sol, steady, compile_s = compile_and_steady(fn, repeat)
    cpu = _cpu_time(fn, repeat)
    its = np.asarray(sol.state.admm_iters)
    return (
        np.asarray(sol.x),
        steady,
        cpu,
        compile_s,
        sol.counts(),
        f"{its.mean():.0f} / {its.max():.0f}",
    )


def run_osqp_loop(qp_np):
    """One OSQP object set up once with a dense pattern, then update(P, q, A, l, u) + solve per problem."""
    import osqp
    import scipy.sparse as sp

    P, q, A, l, u = qp_np
    B, n = q.shape
    m = l.shape[1]
    iu = np.triu_indices(n)
    # full dense patterns so that update() can change every entry (column-major data order)
    Ppat = sp.csc_matrix(np.triu(np.ones((n, n))))
    Apat = sp.csc_matrix(np.ones((m, n)))
    rows_p, cols_p = Ppat.nonzero()
    order_p = np.lexsort((rows_p, cols_p))
    rows_p, cols_p = rows_p[order_p], cols_p[order_p]
    rows_a, cols_a = Apat.nonzero()
    order_a = np.lexsort((rows_a, cols_a))
    rows_a, cols_a = rows_a[order_a], cols_a[order_a]
    del iu
    big = lambda v, s: np.where(np.isinf(v), s * 1e30, v)
    s = osqp.OSQP()
    s.setup(
        sp.csc_matrix((P[0][rows_p, cols_p], (rows_p, cols_p)), shape=(n, n)),
        q[0],
        sp.csc_matrix((A[0][rows_a, cols_a], (rows_a, cols_a)), shape=(m, n)),
        big(l[0], -1),
        big(u[0], 1),
        eps_abs=TOL,
        eps_rel=TOL,
        verbose=False,
        max_iter=40000,
    )
    xs, statuses = [], {}
    t0 = time.perf_counter()
    c0 = time.process_time()
    for i in range(B):
        s.update(
            Px=P[i][rows_p, cols_p],
            q=q[i],
            Ax=A[i][rows_a, cols_a],
            l=big(l[i], -1),
            u=big(u[i], 1),
        )
        r = s.solve()
        xs.append(r.x)
        statuses[r.info.status] = statuses.get(r.info.status, 0) + 1
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return np.stack(xs), dt, cpu, statuses


def run_qpax(qp, repeat):
    import jax
    import jax.numpy as jnp
    import qpax

    P, q, A, l, u = qp
    big = 1e8
    G = jnp.concatenate([A, -A], axis=1)
    h = jnp.concatenate([jnp.where(jnp.isinf(u), big, u), jnp.where(jnp.isinf(l), big, -l)], axis=1)
    n = q.shape[1]
    Aeq = jnp.zeros((q.shape[0], 0, n), q.dtype)
    beq = jnp.zeros((q.shape[0], 0), q.dtype)
    fn = jax.jit(jax.vmap(lambda *a: qpax.solve_qp(*a, solver_tol=TOL)))
    out, steady, compile_s = compile_and_steady(lambda: fn(P, q, Aeq, beq, G, h), repeat)
    cpu = _cpu_time(lambda: fn(P, q, Aeq, beq, G, h), 1)
    x, conv = np.asarray(out[0]), np.asarray(out[4])
    return (
        x,
        steady,
        cpu,
        compile_s,
        {"converged": int(conv.sum()), "not converged": int((~conv.astype(bool)).sum())},
    )


def run_boxosqp(qp, repeat):
    import jax
    from jaxopt import BoxOSQP

    P, q, A, l, u = qp
    solver = BoxOSQP(tol=TOL, maxiter=4000, jit=True)
    fn = jax.jit(
        jax.vmap(
            lambda P, q, A, l, u: solver.run(params_obj=(P, q), params_eq=A, params_ineq=(l, u))
        )
    )
    out, steady, compile_s = compile_and_steady(lambda: fn(P, q, A, l, u), repeat)
    cpu = _cpu_time(lambda: fn(P, q, A, l, u), 1)
    x = np.asarray(out.params.primal[0])
    st = np.asarray(out.state.status)
    names = {0: "unsolved", 1: "solved", 2: "dual infeasible", 3: "primal infeasible"}
    counts = {names.get(int(k), str(k)): int((st == k).sum()) for k in np.unique(st)}
    return x, steady, cpu, compile_s, counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="128 problems, n=20 only, float32 and float64"
    )
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--one-core",
        action="store_true",
        help="pin the process to one CPU before JAX starts (per-core throughput)",
    )
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--boxosqp-subset", type=int, default=128)
    ap.add_argument(
        "--no-map", action="store_true", help="skip the FlexQP batch='map' comparison row"
    )
    ns = ap.parse_args(argv)
    if ns.one_core:
        if not hasattr(os, "sched_setaffinity"):
            ap.error("--one-core needs os.sched_setaffinity (Linux)")
        # before JAX creates its thread pools: every thread inherits the affinity
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    B = ns.batch or (128 if ns.quick else 1024)
    if ns.quick:  # CI: the batch='map' comparison row only in the full run
        ns.no_map = True
    sizes = [(20, 40)] if ns.quick else [(20, 40), (100, 150)]
    repeat = 5  # median of 5 timed calls (2 left the first-call warm-up in the median)
    peers = {"qpax": _have("qpax"), "jaxopt": _have("jaxopt"), "osqp": _have("osqp")}
    for k, v in peers.items():
        if not v:
            print(f"note: {k} is not installed; skipping it")
    lines = [
        "# Batched QP benchmark (CPU)",
        "",
        f"{B} random QPs per row (`problems.random_qp`), tolerance {TOL:g} for every solver, "
        f"device: {jax.devices()[0].device_kind}"
        f"{' (the process pinned to one core: --one-core)' if ns.one_core else ''}. Times in seconds for the whole batch: "
        "steady state (median) and compile (first call minus steady). Accuracy: "
        "max / median of ||x - x*|| / max(1, ||x*||) against OSQP 1e-10 + polish; viol: max "
        "constraint violation. Ratio = peer time / FlexQP time (> 1: FlexQP faster), on "
        "wall time and on process CPU time.",
        "",
        "| n, m | dtype | solver | time (s) | CPU (s) | compile (s) | ratio peer/ours | ratio (CPU) | max err | median err | max viol | statuses | ADMM iters mean / max |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, m in sizes:
        qp64 = make_batch(B, n, m, jnp.float64)
        qp_np = tuple(np.asarray(v) for v in qp64)
        t0 = time.perf_counter()
        xref = reference(qp_np) if peers["osqp"] else None
        print(f"n={n} m={m}: reference in {time.perf_counter() - t0:.1f}s", flush=True)
        if peers["osqp"]:
            xo, to, co, so = run_osqp_loop(qp_np)
        for dtype in (jnp.float32, jnp.float64):
            qp = jax.tree.map(lambda v, dtype=dtype: v.astype(dtype), qp64)
            name = jnp.dtype(dtype).name
            xf, tf, uf, cf, sf, itf = run_flexqp(qp, repeat)
            rows = [(f"FlexQP ({FLEX_LABEL})", tf, uf, cf, xf, sf, itf)]
            if not ns.no_map:
                xm, tm_, um, cm, sm, itm = run_flexqp(qp, 1, batch="map")
                rows.append(
                    (
                        "FlexQP (batch='map': lax.map, previous CPU default)",
                        tm_,
                        um,
                        cm,
                        xm,
                        sm,
                        itm,
                    )
                )
            if peers["osqp"]:
                rows.append(("OSQP loop (update+solve, float64)", to, co, 0.0, xo, so, ""))
            if peers["qpax"]:
                try:
                    xq, tq, uq, cq, sq = run_qpax(qp, repeat)
                    rows.append(("qpax (vmap)", tq, uq, cq, xq, sq, ""))
                except Exception as err:  # pragma: no cover
                    print(f"qpax failed: {err}")
            if peers["jaxopt"]:
                try:
                    # BoxOSQP is ~20x slower: run it on the first `sub` problems and scale
                    # its time to the whole batch (labelled as such)
                    sub = min(B, ns.boxosqp_subset)
                    qsub = jax.tree.map(lambda v, sub=sub: v[:sub], qp)
                    xb, tb, ub, cb, sb = run_boxosqp(qsub, 1 if sub < B else repeat)
                    if sub < B:
                        xb = np.concatenate([xb, np.full((B - sub, xb.shape[1]), np.nan)])
                        label = f"jaxopt BoxOSQP (vmap; {sub} problems, time x{B / sub:g})"
                    else:
                        label = "jaxopt BoxOSQP (vmap)"
                    rows.append((label, tb * B / sub, ub * B / sub, cb, xb, sb, ""))
                except Exception as err:  # pragma: no cover
                    print(f"BoxOSQP failed: {err}")
            for label, t, u, c, x, st, its in rows:
                acc = _accuracy(x, xref, qp_np) if xref is not None else (float("nan"),) * 3
                line = (
                    f"| {n}, {m} | {name} | {label} | {t:.3f} | {u:.3f} | {c:.1f} | {t / tf:.2f} | "
                    f"{u / uf:.2f} | {acc[0]:.1e} | {acc[1]:.1e} | {acc[2]:.1e} | {st} | {its} |"
                )
                print(line, flush=True)
                lines.append(line)
    text = "\n".join(lines) + "\n"
    write_results("qp_one_core" if ns.one_core else "qp", text, quick=ns.quick, out=ns.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
