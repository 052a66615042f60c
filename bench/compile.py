"""Time to first answer: first-call time of every public solver against the peers' first calls.

Each entry runs in a fresh Python process (what a user, a notebook kernel or a test
worker pays). For JAX entries the first call is split the way JAX exposes it:
``jax.jit(f).trace`` (Python tracing), ``.lower`` (to StableHLO), ``.compile`` (XLA),
then the first run; the program size is the optimized HLO's instruction count.
Steady state is the median of later calls. Peers that are not installed are skipped.

    python bench/compile.py            # every entry, bench/results/compile.md
    python bench/compile.py --quick    # three entries (CI keeps the script working)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

from _util import setup, write_results

setup(threads=None, x64=False)

# name -> (peer group, kind, setup source). The setup defines `f` (a zero-argument
# function): kind "jax" is traced by jax.jit; kind "host" is called as a user would.
ENTRIES = {
    "qp.solve_qp (n=20, m=40)": (
        "qp",
        "jax",
        """
import jax, jaxsolve.qp as Q
qp = Q.problems.random_qp(jax.random.key(0), 20, 40)
f = lambda: Q.solve_qp(qp, tol=1e-6).x
""",
    ),
    "qp.solve_qp batch 64 (jit(vmap))": (
        "qp batch",
        "jax",
        """
import jax, jaxsolve.qp as Q
qps = jax.vmap(lambda k: Q.problems.random_qp(k, 20, 40))(jax.random.split(jax.random.key(0), 64))
f = lambda: jax.vmap(lambda p: Q.solve_qp(p, tol=1e-6).x)(qps)
""",
    ),
    "qpax.solve_qp (n=20, m=40)": (
        "qp",
        "jax",
        """
import jax, jax.numpy as jnp, qpax, jaxsolve.qp as Q
p = Q.problems.random_qp(jax.random.key(0), 20, 40)
G = jnp.concatenate([p.A, -p.A]); h = jnp.concatenate([jnp.minimum(p.u, 1e8), jnp.minimum(-p.l, 1e8)])
E, e = jnp.zeros((0, 20)), jnp.zeros(0)
f = lambda: qpax.solve_qp(p.P, p.q, E, e, G, h, solver_tol=1e-6)[0]
""",
    ),
    "qpax batch 64 (jit(vmap))": (
        "qp batch",
        "jax",
        """
import jax, jax.numpy as jnp, qpax, jaxsolve.qp as Q
ps = jax.vmap(lambda k: Q.problems.random_qp(k, 20, 40))(jax.random.split(jax.random.key(0), 64))
G = jnp.concatenate([ps.A, -ps.A], 1); h = jnp.concatenate([jnp.minimum(ps.u, 1e8), jnp.minimum(-ps.l, 1e8)], 1)
E, e = jnp.zeros((64, 0, 20)), jnp.zeros((64, 0))
f = lambda: jax.vmap(lambda *a: qpax.solve_qp(*a, solver_tol=1e-6)[0])(ps.P, ps.q, E, e, G, h)
""",
    ),
    "jaxopt.BoxOSQP (n=20, m=40)": (
        "qp",
        "jax",
        """
import jax, jaxsolve.qp as Q
from jaxopt import BoxOSQP
p = Q.problems.random_qp(jax.random.key(0), 20, 40)
s = BoxOSQP(tol=1e-6, maxiter=4000)
f = lambda: s.run(params_obj=(p.P, p.q), params_eq=p.A, params_ineq=(p.l, p.u)).params.primal[0]
""",
    ),
    "OSQP set-up + solve (n=20, m=40)": (
        "qp",
        "host",
        """
import jax, numpy as np, osqp, scipy.sparse as sp, jaxsolve.qp as Q
p = Q.problems.random_qp(jax.random.key(0), 20, 40)
P, q, A, l, u = (np.asarray(v) for v in (p.P, p.q, p.A, p.l, p.u))
def f():
    s = osqp.OSQP(); s.setup(sp.csc_matrix(np.triu(P)), q, sp.csc_matrix(A), np.maximum(l, -1e30),
                             np.minimum(u, 1e30), eps_abs=1e-6, eps_rel=1e-6, verbose=False)
    return s.solve().x
""",
    ),
    "first_order.projected_gradient (simplex, n=10)": (
        "projected gradient",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.first_order import projected_gradient
from jaxsolve.projections import simplex
A, b = jax.random.normal(jax.random.key(0), (30, 10)), jnp.ones(30)
loss = lambda x, a: 0.5 * jnp.sum((a[0] @ x - a[1]) ** 2)
s = projected_gradient(loss, simplex)
f = lambda: jaxsolve.solve(s, jnp.full(10, 0.1), (A, b), tol=1e-6).x
""",
    ),
    "jaxopt.ProjectedGradient (simplex, n=10)": (
        "projected gradient",
        "jax",
        """
import jax, jax.numpy as jnp
from jaxopt import ProjectedGradient
from jaxopt.projection import projection_simplex
A, b = jax.random.normal(jax.random.key(0), (30, 10)), jnp.ones(30)
loss = lambda x, A, b: 0.5 * jnp.sum((A @ x - b) ** 2)
s = ProjectedGradient(loss, projection_simplex, tol=1e-6)
f = lambda: s.run(jnp.full(10, 0.1), A=A, b=b).params
""",
    ),
    "optax L-BFGS (least squares, n=10)": (
        "projected gradient",
        "jax",
        """
import jax, jax.numpy as jnp, optax
A, b = jax.random.normal(jax.random.key(0), (30, 10)), jnp.ones(30)
loss = lambda x: 0.5 * jnp.sum((A @ x - b) ** 2)
opt = optax.lbfgs()
vg = optax.value_and_grad_from_state(loss)
def f():
    def body(c):
        x, st, k = c
        v, g = vg(x, state=st)
        u, st = opt.update(g, st, x, value=v, grad=g, value_fn=loss)
        return optax.apply_updates(x, u), st, k + 1
    def cond(c):
        return (c[2] < 100) & (optax.tree.norm(jax.grad(loss)(c[0])) > 1e-6)
    x0 = jnp.zeros(10)
    return jax.lax.while_loop(cond, body, (x0, opt.init(x0), 0))[0]
""",
    ),
    "layers.project (n=100, batch 32)": (
        "projection layer",
        "host",
        """
import jax, jax.numpy as jnp
from jaxsolve.layers import Polytope, project
k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
A, C = jax.random.normal(k1, (50, 100)), jax.random.normal(k2, (50, 100))
poly = Polytope(A, jnp.zeros(50), C, None, jnp.ones(50))
y = jax.random.normal(k3, (32, 100))
f = lambda: project(y, poly)
""",
    ),
    "cluster.kmeans (iris, k=3)": (
        "k-means",
        "host",
        """
import jax, jax.numpy as jnp
from sklearn.datasets import load_iris
from jaxsolve.cluster import kmeans
X = jnp.asarray(load_iris().data)
f = lambda: kmeans(X, 3, key=jax.random.key(0)).state.labels
""",
    ),
    "scikit-learn KMeans (iris, k=3, n_init=10)": (
        "k-means",
        "host",
        """
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris
X = load_iris().data
f = lambda: KMeans(3, n_init=10, random_state=0).fit(X).cluster_centers_
""",
    ),
    "ot.barycenter (2 densities, 64x64)": (
        "barycenter",
        "host",
        """
import numpy as np, jax.numpy as jnp
from jaxsolve.ot import barycenter
g = np.linspace(-1, 1, 64); X, Y = np.meshgrid(g, g)
mus = np.stack([np.exp(-((X - .4) ** 2 + Y ** 2) / .05), np.exp(-((X + .4) ** 2 + Y ** 2) / .08)])
mus = jnp.asarray(mus / mus.sum(axis=(1, 2), keepdims=True))
f = lambda: barycenter(mus).x
""",
    ),
    "POT convolutional_barycenter2d (64x64)": (
        "barycenter",
        "host",
        """
import numpy as np, ot
g = np.linspace(-1, 1, 64); X, Y = np.meshgrid(g, g)
mus = np.stack([np.exp(-((X - .4) ** 2 + Y ** 2) / .05), np.exp(-((X + .4) ** 2 + Y ** 2) / .08)])
mus = mus / mus.sum(axis=(1, 2), keepdims=True)
f = lambda: ot.bregman.convolutional_barycenter2d(mus, 0.004)
""",
    ),
    "riemannian.trust_region (sphere, n=50)": (
        "riemannian",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.manifolds import Sphere
from jaxsolve.riemannian import trust_region
M = jax.random.normal(jax.random.key(0), (50, 50)); A = M + M.T
s = trust_region(lambda x, A: x @ A @ x, Sphere(50))
f = lambda: jaxsolve.solve(s, jnp.ones(50) / jnp.sqrt(50.0), A, tol=1e-8).x
""",
    ),
    "frank_wolfe (simplex LMO, n=50)": (
        "frank-wolfe",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.frank_wolfe import frank_wolfe, lmo
A, b = jax.random.normal(jax.random.key(0), (80, 50)), jnp.ones(80)
s = frank_wolfe(lambda x, a: 0.5 * jnp.sum((a[0] @ x - a[1]) ** 2), lmo.probability_simplex())
f = lambda: jaxsolve.solve(s, jnp.full(50, 1 / 50), (A, b), tol=1e-6, max_steps=2000).x
""",
    ),
    "second_order.gauss_newton (n=10)": (
        "second order",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.second_order import gauss_newton
A = jax.random.normal(jax.random.key(0), (30, 10))
s = gauss_newton(lambda x, A: jnp.tanh(A @ x) - 0.5)
f = lambda: jaxsolve.solve(s, jnp.zeros(10), A, tol=1e-8).x
""",
    ),
}

QUICK = (
    "first_order.projected_gradient (simplex, n=10)",
    "jaxopt.ProjectedGradient (simplex, n=10)",
    "riemannian.trust_region (sphere, n=50)",
)

RUNNER = r"""
import json, os, sys, time
os.environ.setdefault("JAX_PLATFORMS", "cpu")
t_import = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
out = {}
exec(sys.argv[2], globals())
kind = sys.argv[1]
if kind == "jax":
    jf = jax.jit(f)
    t0 = time.perf_counter(); tr = jf.trace(); t1 = time.perf_counter()
    lo = tr.lower(); t2 = time.perf_counter()
    co = lo.compile(); t3 = time.perf_counter()
    jax.block_until_ready(co()); t4 = time.perf_counter()
    out.update(trace=t1 - t0, lower=t2 - t1, compile=t3 - t2, first_run=t4 - t3,
               first=t4 - t0,
               hlo_ops=sum(1 for ln in co.as_text().splitlines() if " = " in ln))
    run = co
else:
    t0 = time.perf_counter(); jax.block_until_ready(f()); out["first"] = time.perf_counter() - t0
    run = f
ts = []
for _ in range(5):
    t0 = time.perf_counter(); jax.block_until_ready(run()); ts.append(time.perf_counter() - t0)
out["steady"] = float(np.median(ts))
print("RESULT " + json.dumps(out))
"""


def run_entry(name: str, timeout: float = 300.0) -> dict | str:
    group, kind, src = ENTRIES[name]
    if "f = " not in src and "def f" not in src:
        return "no entry point"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    try:
        p = subprocess.run(
            [sys.executable, "-c", RUNNER, kind, src],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return f"timed out ({timeout:.0f} s)"
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    last = (p.stderr.strip().splitlines() or ["?"])[-1]
    if "ModuleNotFoundError" in p.stderr:
        return f"skipped ({last.split(':')[-1].strip()} not installed)"
    return f"failed: {last[:120]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    names = QUICK if a.quick else tuple(ENTRIES)
    results = {}
    for name in names:
        t0 = time.perf_counter()
        results[name] = run_entry(name)
        print(f"{name}: {results[name]} ({time.perf_counter() - t0:.1f} s with start-up)")
    # ratio: ours / the fastest peer first call in the same group
    lines = [
        "# First-call (compile) time against the peers",
        "",
        f"`python bench/compile.py{' --quick' if a.quick else ''}`, "
        f"{datetime.date.today()}, {os.cpu_count()} cores, float64, each entry in a fresh process. "
        "JAX entries: first call = trace + lower + compile + first run (seconds); "
        "`hlo ops` = instructions of the optimized HLO. Ratio: this entry's first call over the "
        "fastest *peer* first call of its group (ours start with `qp.`, `first_order.`, ...); "
        "`vs JAX peer`: over the fastest peer that also compiles (qpax, jaxopt, optax), the "
        "comparison the issue's targets use.",
        "",
        "| entry | group | first call | trace | lower | compile | first run | steady | hlo ops "
        "| ratio | vs JAX peer |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ours = lambda n: (
        n.split(" ")[0].split(".")[0]
        in {  # noqa: E731
            "qp",
            "first_order",
            "layers",
            "cluster",
            "ot",
            "riemannian",
            "frank_wolfe",
            "second_order",
            "regret",
            "sensing",
        }
    )
    for name in names:
        group = ENTRIES[name][0]
        r = results[name]
        if not isinstance(r, dict):
            lines.append(f"| {name} | {group} | {r} | | | | | | | | |")
            continue
        peers = [
            results[p]["first"]
            for p in names
            if ENTRIES[p][0] == group and not ours(p) and isinstance(results[p], dict)
        ]
        ratio = f"{r['first'] / min(peers):.2f}x" if ours(name) and peers else ""
        jax_peers = [
            results[p]["first"]
            for p in names
            if ENTRIES[p][0] == group
            and ENTRIES[p][1] == "jax"
            and not ours(p)
            and isinstance(results[p], dict)
        ]
        vs_jax = f"{r['first'] / min(jax_peers):.2f}x" if ours(name) and jax_peers else ""
        g = lambda k, r=r: f"{r[k]:.2f}" if k in r else ""  # noqa: E731
        steady = f"{r['steady'] * 1e3:.1f} ms"
        lines.append(
            f"| {name} | {group} | {r['first']:.2f} | {g('trace')} | {g('lower')} | "
            f"{g('compile')} | {g('first_run')} | {steady} | {r.get('hlo_ops', '')} | {ratio} "
            f"| {vs_jax} |"
        )
    write_results("compile", "\n".join(lines) + "\n", quick=a.quick, out=a.out)


if __name__ == "__main__":
    main()
