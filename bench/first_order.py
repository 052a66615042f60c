"""Projected gradient benchmark: jaxsolve vs jaxopt's ProjectedGradient at equal accuracy.

Problems: min 1/2 ||A x - b||^2 over the simplex, the l1 ball (radius 1) and the box
[-0.1, 0.1]^n, A Gaussian (m = 2n), float64, at two sizes. Both solvers use FISTA
with backtracking (jaxsolve: ``projected_gradient(fun, projection)``; jaxopt:
``ProjectedGradient(fun, projection_*, acceleration=True)``, stepsize by line search),
with their own projections (``jaxsolve.projections`` / ``jaxopt.projection``).

Equal accuracy: the two libraries stop on different measures (ours: the gradient
mapping at x; jaxopt: the distance between iterates divided by the step), so each
one's tolerance is lowered along a ladder (1e-3, 1e-4, ... of the initial measure) until
a common certificate, the gradient-mapping norm at the global step 1/L
(L = ||A||_2^2), is <= 1e-6 of its value at the start. Both solvers are then timed at
their own first tolerance that reaches it; the objective gap against a reference
(OSQP at 1e-10 with polishing) is reported for both.

Compile time (lower + compile) is reported apart from steady-state time (best of
repeated calls of the compiled functions, ours and jaxopt interleaved so both see the same
background load: the machine is shared). The ladder has
half-decade rungs, so neither solver is made to over-solve by more than ~3x. Ratio = ours / jaxopt (< 1: we are faster).
A vmapped batch of 256 problems (simplex, small size; the same rule applied to the
worst lane) closes the table.

``--quick``: the small size only, fewer repeats (what CI runs).
"""

from __future__ import annotations

import argparse
import sys
import time

from _util import peer, setup, write_results

setup(threads=None)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxsolve  # noqa: E402
from jaxsolve import projections as P  # noqa: E402
from jaxsolve.first_order import projected_gradient  # noqa: E402
from peers.problems import first_order as R  # noqa: E402
from peers.timing import best_of_interleaved  # noqa: E402

jaxopt, JP, JAXOPT_MISSING = peer("jaxopt", "jaxopt.projection")

RADIUS, BOX = 1.0, 0.1
TARGET = 1e-6  # common certificate, relative to its value at x0
LADDER = [10.0 ** (-k / 2) for k in range(6, 25)]  # own tolerance / initial measure: half decades

SETS = {
    "simplex": (P.simplex, lambda x, hp: JP.projection_simplex(x, hp), 1.0),
    "l1_ball": (lambda x: P.l1_ball(x, RADIUS), lambda x, hp: JP.projection_l1_ball(x, hp), RADIUS),
    "box": (lambda x: P.box(x, -BOX, BOX), lambda x, hp: JP.projection_box(x, hp), (-BOX, BOX)),
}


def fun(x, args):
    A, b = args
    r = A @ x - b
    return 0.5 * jnp.vdot(r, r)


def fun_jaxopt(x, A, b):
    r = A @ x - b
    return 0.5 * jnp.vdot(r, r)


def reference(name, A, b):
    A, b = np.asarray(A), np.asarray(b)
    n = A.shape[1]
    if name == "simplex":
        C = np.vstack([np.eye(n), np.ones(n)])
        return R.osqp_ls(A, b, C, np.r_[np.zeros(n), 1], np.r_[np.full(n, np.inf), 1])
    if name == "l1_ball":
        return R.osqp_ls_l1(A, b, RADIUS)
    return R.osqp_ls(A, b, np.eye(n), np.full(n, -BOX), np.full(n, BOX))


def make_data(seed, n):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(2 * n, n)) / np.sqrt(2 * n)
    b = A @ (rng.normal(size=n) / np.sqrt(n)) + 0.1 * rng.normal(size=2 * n)
    return jnp.asarray(A), jnp.asarray(b)


def certificate(proj, A, b, L, x):
    """Gradient-mapping norm at the global step 1/L: L ||x - P(x - grad f(x)/L)||."""
    g = A.T @ (A @ x - b)
    return float(L * jnp.linalg.norm(x - proj(x - g / L)))


def compile_fn(fn, *args):
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def ours_runner(name, n, max_steps):
    proj = SETS[name][0]
    solver = projected_gradient(fun, proj)

    def run(A, b, tol):
        sol = jaxsolve.solve(solver, jnp.zeros(n), (A, b), tol=tol, max_steps=max_steps)
        return sol.x, sol.num_steps, sol.status

    return run


def jaxopt_runner(name, n, tol, max_steps):
    hp = SETS[name][2]
    pg = jaxopt.ProjectedGradient(
        fun=fun_jaxopt, projection=SETS[name][1], tol=tol, maxiter=max_steps, acceleration=True
    )

    def run(A, b):
        out = pg.run(jnp.zeros(n), hp, A, b)
        return out.params, out.state.iter_num

    return run


def bench_problem(name, n, repeat, max_steps, rows):
    A, b = make_data(n + len(name), n)
    L = float(np.linalg.norm(np.asarray(A), 2) ** 2)
    proj = SETS[name][0]
    x_ref = reference(name, A, b)
    f_ref = float(fun(jnp.asarray(x_ref), (A, b)))
    x_start = proj(jnp.zeros(n))
    c0 = certificate(proj, A, b, L, x_start)
    target = TARGET * c0
    row = {"problem": name, "n": n, "target": target}

    # ours: tol is a traced argument, one compilation for the whole ladder
    run = ours_runner(name, n, max_steps)
    compiled, t_compile = compile_fn(run, A, b, 1.0)
    for rel in LADDER:
        tol = rel * c0
        x, steps, status = compiled(A, b, tol)
        cert = certificate(proj, A, b, L, x)
        if cert <= target:
            break
    row.update(
        ours_tol=rel,
        ours_steps=int(steps),
        ours_status=jaxsolve.Status(int(status)).name,
        ours_cert=cert,
        ours_gap=float(fun(x, (A, b))) - f_ref,
        ours_compile=t_compile,
    )
    ours_call = lambda: compiled(A, b, tol)
    if jaxopt is None:
        row["ours_time"] = best_of_interleaved([ours_call], repeat)[0]
        rows.append(row)
        return row
    # jaxopt: tol is static (a recompilation per rung); start two rungs looser than ours
    start = max(0, LADDER.index(row["ours_tol"]) - 4)
    for rel in LADDER[start:]:
        jrun = jaxopt_runner(name, n, rel * c0, max_steps)
        jcompiled, j_compile = compile_fn(jrun, A, b)
        xj, jsteps = jcompiled(A, b)
        jcert = certificate(proj, A, b, L, xj)
        if jcert <= target:
            break
    row.update(
        jaxopt_tol=rel,
        jaxopt_steps=int(jsteps),
        jaxopt_cert=jcert,
        jaxopt_gap=float(fun(xj, (A, b))) - f_ref,
        jaxopt_compile=j_compile,
    )
    row["ours_time"], row["jaxopt_time"] = best_of_interleaved(
        [ours_call, lambda: jcompiled(A, b)], repeat
    )
    row["ratio"] = row["ours_time"] / row["jaxopt_time"]
    rows.append(row)
    return row


def bench_batch(single_row, batch, repeat, max_steps):
    n = single_row["n"]
    name = single_row["problem"]
    keys = range(batch)
    data = [make_data(1000 + k, n) for k in keys]
    As = jnp.stack([d[0] for d in data])
    bs = jnp.stack([d[1] for d in data])
    proj = SETS[name][0]
    c0 = certificate(
        proj, As[0], bs[0], float(np.linalg.norm(np.asarray(As[0]), 2) ** 2), proj(jnp.zeros(n))
    )
    Ls = [float(np.linalg.norm(np.asarray(a), 2) ** 2) for a in As]
    row = {"problem": f"{name} x{batch} (vmap)", "n": n}
    target = TARGET * c0
    run = ours_runner(name, n, max_steps)
    vrun = jax.vmap(run, in_axes=(0, 0, None))
    compiled, t_compile = compile_fn(vrun, As, bs, 1.0)
    for rel in LADDER[LADDER.index(single_row["ours_tol"]) :]:
        tol = rel * c0
        x, steps, status = compiled(As, bs, tol)
        certs = [certificate(proj, As[i], bs[i], Ls[i], x[i]) for i in range(batch)]
        if max(certs) <= target:
            break
    row.update(
        ours_tol=rel,
        ours_steps=int(jnp.max(steps)),
        ours_status=f"{int(jnp.sum(status == 0))}/{batch} SUCCESS",
        ours_cert=max(certs),
        ours_compile=t_compile,
    )
    ours_call = lambda: compiled(As, bs, tol)
    row["ours_time"] = best_of_interleaved([ours_call], repeat)[0]
    if jaxopt is not None:
        for rel in LADDER[LADDER.index(single_row["jaxopt_tol"]) :]:
            jrun = jax.vmap(jaxopt_runner(name, n, rel * c0, max_steps))
            jcompiled, j_compile = compile_fn(jrun, As, bs)
            xj, jsteps = jcompiled(As, bs)
            jcerts = [certificate(proj, As[i], bs[i], Ls[i], xj[i]) for i in range(batch)]
            if max(jcerts) <= target:
                break
        row.update(
            jaxopt_tol=rel,
            jaxopt_steps=int(jnp.max(jsteps)),
            jaxopt_cert=max(jcerts),
            jaxopt_compile=j_compile,
        )
        row["ours_time"], row["jaxopt_time"] = best_of_interleaved(
            [ours_call, lambda: jcompiled(As, bs)], repeat
        )
        row["ratio"] = row["ours_time"] / row["jaxopt_time"]
    return row


COLUMNS = [
    ("problem", "problem", "{}"),
    ("n", "n", "{}"),
    ("ours_steps", "steps ours", "{}"),
    ("jaxopt_steps", "steps jaxopt", "{}"),
    ("ours_cert", "G(x) ours", "{:.1e}"),
    ("jaxopt_cert", "G(x) jaxopt", "{:.1e}"),
    ("ours_gap", "gap ours", "{:.1e}"),
    ("jaxopt_gap", "gap jaxopt", "{:.1e}"),
    ("ours_compile", "compile ours (s)", "{:.2f}"),
    ("jaxopt_compile", "compile jaxopt (s)", "{:.2f}"),
    ("ours_time", "run ours (ms)", "ms"),
    ("jaxopt_time", "run jaxopt (ms)", "ms"),
    ("ratio", "ratio ours/jaxopt", "{:.2f}"),
]


def fmt(row, key, spec):
    if key not in row:
        return "-"
    v = row[key]
    if spec == "ms":
        return f"{1e3 * v:.2f}"
    return spec.format(v)


def table(rows):
    head = "| " + " | ".join(c[1] for c in COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(fmt(r, k, s) for k, _, s in COLUMNS) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small size, few repeats (CI)")
    parser.add_argument("--out", default=None)
    ns = parser.parse_args(argv)
    sizes = (100,) if ns.quick else (100, 500)
    repeat = 10 if ns.quick else 30
    batch = 32 if ns.quick else 256
    max_steps = 20000
    if JAXOPT_MISSING:
        print(f"note: {JAXOPT_MISSING}; reporting jaxsolve only")
    rows = []
    for n in sizes:
        for name in SETS:
            row = bench_problem(name, n, repeat, max_steps, rows)
            print(f"{name} n={n}: ratio {row.get('ratio', float('nan')):.2f}", flush=True)
    simplex_small = next(r for r in rows if r["problem"] == "simplex" and r["n"] == sizes[0])
    rows.append(bench_batch(simplex_small, batch, repeat, max_steps))
    text = table(rows)
    print(text)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    geo = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
    header = (
        "# first_order: projected gradient vs jaxopt.ProjectedGradient\n\n"
        f"Mode: {'--quick' if ns.quick else 'full'}; float64; CPU ({jax.devices()[0].device_kind}, "
        f"{len(jax.devices())} device(s) visible); jax {jax.__version__}.\n"
        "Constrained least squares min 1/2||Ax - b||^2, A Gaussian 2n x n; both FISTA with "
        "backtracking. Each solver runs at its own loosest tolerance (half-decade ladder 1e-3 ... 1e-12 of "
        "the initial measure) whose output has the common certificate G(x) = L||x - P(x - "
        "grad f(x)/L)|| (L = ||A||_2^2) <= 1e-6 of its value at the start: equal accuracy. "
        "gap = f(x) - f(x_OSQP). Compile = lower + compile; run = best steady-state time of the repeats (ours and jaxopt interleaved). "
        "The vmap row applies the same rule to the worst lane "
        "(steps = the slowest lane, G = the worst lane).\n\n"
        f"Geometric mean of the time ratios (ours / jaxopt): **{geo:.2f}**\n\n"
    )
    if JAXOPT_MISSING:
        header += f"Note: {JAXOPT_MISSING}.\n\n"
    write_results("first_order", header + text + "\n", quick=ns.quick, out=ns.out)
    print(f"\ngeometric mean ratio ours/jaxopt: {geo:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
