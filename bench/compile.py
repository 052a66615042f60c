"""Time to first answer: first-call time of every public solver against the peers' first calls.

Each entry runs in a fresh Python process (what a user, a notebook kernel or a test
worker pays). For JAX entries the first call is split the way JAX exposes it:
``jax.jit(f).trace`` (Python tracing), ``.lower`` (to StableHLO), ``.compile`` (XLA),
then the first run; the program size is the optimized HLO's instruction count.
Steady state is the median of later calls. Peers that are not installed are skipped.

    python bench/compile.py            # every entry, bench/results/compile.md
    python bench/compile.py --quick    # three entries (CI keeps the script working)
    python bench/compile.py --only "nlp.minimize_sqp (HS71)"   # one entry, printed only
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
    # called as a user calls it (kind "host"): solve_qp compiles its program with FlexQP's
    # XLA options (jaxsolve.core.compile_options), which an outer jax.jit would replace
    # with its own; the jit(vmap) batch row below is such a user's jit
    "qp.solve_qp (n=20, m=40)": (
        "qp",
        "host",
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
    "scipy least_squares (tanh residual, n=10)": (
        "second order",
        "host",
        """
import jax, numpy as np
from scipy.optimize import least_squares
A = np.asarray(jax.random.normal(jax.random.key(0), (30, 10)))
f = lambda: least_squares(lambda x: np.tanh(A @ x) - 0.5, np.zeros(10), xtol=1e-12, ftol=1e-12).x
""",
    ),
    "second_order.gradient_regularized_newton (logistic, n=10)": (
        "logistic regression",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.second_order import gradient_regularized_newton
X = jax.random.normal(jax.random.key(0), (200, 10))
y = (X[:, 0] + 0.5 * jax.random.normal(jax.random.key(1), (200,)) > 0).astype(X.dtype)
def fun(p, a):
    X, y, mu = a
    z = X @ p["w"] + p["b"]
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 0.5 * mu * jnp.sum(p["w"] ** 2)
s = gradient_regularized_newton(fun)
p0 = {"w": jnp.zeros(10), "b": jnp.zeros(())}
f = lambda: jaxsolve.solve(s, p0, (X, y, 1e-3), tol=1e-8).x["w"]
""",
    ),
    "scikit-learn LogisticRegression (lbfgs, n=10)": (
        "logistic regression",
        "host",
        """
import jax, numpy as np
from sklearn.linear_model import LogisticRegression
X = np.asarray(jax.random.normal(jax.random.key(0), (200, 10)))
y = (X[:, 0] + 0.5 * np.asarray(jax.random.normal(jax.random.key(1), (200,))) > 0).astype(int)
# the same objective: mean loss + 1e-3/2 |w|^2 is C = 1 / (1e-3 * 200) times sum loss + |w|^2/2
f = lambda: LogisticRegression(C=5.0, tol=1e-8, max_iter=1000).fit(X, y).coef_
""",
    ),
    "scipy.linalg.eigh smallest eigenpair (the sphere n=50 answer)": (
        "riemannian",
        "host",
        """
import jax, numpy as np, scipy.linalg
M = np.asarray(jax.random.normal(jax.random.key(0), (50, 50))); A = M + M.T
f = lambda: scipy.linalg.eigh(A, subset_by_index=[0, 0])[1][:, 0]
""",
    ),
    "regret.regret_matching (RM+, 6x7 game)": (
        "regret matching",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.regret import regret_matching
A = jax.random.normal(jax.random.key(0), (6, 7))
s = regret_matching(lambda x, A: -(x["p"] @ A @ x["q"]))
x0 = {"p": jnp.full(6, 1 / 6), "q": jnp.full(7, 1 / 7)}
f = lambda: jaxsolve.solve(s, x0, A, tol=1e-8, max_steps=5000).x["p"]
""",
    ),
    "sensing.weight_normalized (m=10, rank 3, gram)": (
        "matrix sensing",
        "jax",
        """
import jax, jaxsolve
from jaxsolve import sensing as S
meas, A = S.make_problem(jax.random.key(0), m=10, rank=3, n_measurements=1000, cond=10.0, form="gram")
x0 = S.initial_point(jax.random.key(1), 10, 5)
s = S.weight_normalized(direction_step=1.5)
f = lambda: jaxsolve.solve(s, x0, meas, tol=1e-10, max_steps=5000).x[0]
""",
    ),
    "losses.dpo_loss + grad (batch 16)": (
        "dpo loss",
        "jax",
        """
import jax, jax.numpy as jnp
from jaxsolve.losses import dpo_loss
pw, pl, rw, rl = (-10 * jax.random.uniform(k, (16,)) for k in jax.random.split(jax.random.key(0), 4))
loss = lambda pw, pl: dpo_loss(pw, pl, rw, rl, beta=0.1).mean()
# the barrier keeps XLA from folding the whole call into constants (inputs are data)
f = lambda: jax.value_and_grad(loss, argnums=(0, 1))(*jax.lax.optimization_barrier((pw, pl)))
""",
    ),
    "losses.uni_dpo_loss + grad (batch 16, 32 tokens)": (
        "dpo loss",
        "jax",
        """
import jax, jax.numpy as jnp
from jaxsolve.losses import uni_dpo_loss
ks = jax.random.split(jax.random.key(0), 6)
pw, pl, rw, rl = (-jax.random.uniform(k, (16, 32)) for k in ks[:4])
sw, sl = 5 * jax.random.uniform(ks[4], (16,)), 5 * jax.random.uniform(ks[5], (16,))
mask = jnp.broadcast_to(jnp.arange(32) < 24, (16, 32))
loss = lambda pw, pl: uni_dpo_loss(
    pw, pl, rw, rl, sw, sl, chosen_mask=mask, rejected_mask=mask, beta=2.0).mean()
# the barrier keeps XLA from folding the whole call into constants (inputs are data)
f = lambda: jax.value_and_grad(loss, argnums=(0, 1))(*jax.lax.optimization_barrier((pw, pl)))
""",
    ),
    "submodular.maximize (coverage 100x60, k=10)": (
        "submodular",
        "host",  # as a user calls it: its program's XLA options apply (see qp.solve_qp)
        """
import jax, jaxsolve.submodular as sm
P = jax.random.uniform(jax.random.key(0), (100, 60), maxval=0.05)
fn = sm.probabilistic_coverage(P)
f = lambda: sm.maximize(fn, sm.cardinality(10), jax.random.key(1)).value
""",
    ),
    "submodular.lazy_greedy (coverage 100x60, k=10)": (
        "submodular",
        "jax",
        """
import jax, jaxsolve.submodular as sm
P = jax.random.uniform(jax.random.key(0), (100, 60), maxval=0.05)
fn = sm.probabilistic_coverage(P)
f = lambda: sm.lazy_greedy(fn, sm.cardinality(10)).value
""",
    ),
    "nlp.minimize_sqp (HS71)": (
        "nlp",
        "host",  # as a user calls it: SQP's compiler_options apply (see qp.solve_qp)
        """
import jax.numpy as jnp
from jaxsolve.nlp import minimize_sqp
# the functions made once (new lambdas at every call would be new static fields: a recompile)
fun = lambda x, a: x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2]
eq = lambda x, a: jnp.array([jnp.sum(x**2) - 40])
ineq = lambda x, a: jnp.array([25 - jnp.prod(x)])
f = lambda: minimize_sqp(fun, jnp.array([1.0, 5.0, 5.0, 1.0]), eq=eq, ineq=ineq, lb=1.0, ub=5.0, tol=1e-6).x
""",
    ),
    "scipy.optimize.minimize SLSQP (HS71)": (
        "nlp",
        "host",
        """
import numpy as np
from scipy.optimize import minimize
cons = [{"type": "eq", "fun": lambda x: np.sum(x**2) - 40}, {"type": "ineq", "fun": lambda x: np.prod(x) - 25}]
f = lambda: minimize(lambda x: x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2], np.array([1.0, 5.0, 5.0, 1.0]),
                     method="SLSQP", bounds=[(1, 5)] * 4, constraints=cons, tol=1e-6).x
""",
    ),
    "distributed.ds_admm (lasso, 10 agents, n=30)": (
        "decentralized",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve import distributed as D
A, b = D.breast_cancer(10)
W = D.metropolis_hastings(D.erdos_renyi(jax.random.key(0), 10, 0.5))
problem = D.make_problem((A, b), W, 3.0)
s = D.ds_admm(D.LeastSquares(), D.L1())
f = lambda: jaxsolve.solve(s, jnp.zeros((10, A.shape[-1])), problem, tol=1e-8, max_steps=3000).x
""",
    ),
    "distributed.rg_saga (federated, 10 clients, n=20)": (
        "federated",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve import distributed as D
data = D.log_sum_quadratic(jax.random.key(0), 10, 20, 5)
params = D.practical_parameters(10, 3, **D.log_sum_constants(data))
s = D.rg_saga(D.LogSumQuadratic(), 3, seed=0, **params)
f = lambda: jaxsolve.solve(s, jnp.zeros(20), data, tol=1e-2, max_steps=2000).x
""",
    ),
    "blackbox.cma_es_solver (shifted sphere, n=10)": (
        "cma-es",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.blackbox import cma_es_solver
c = jnp.linspace(-1.0, 1.0, 10)
s = cma_es_solver(lambda x, c: jnp.sum((x - c) ** 2), 10, sigma0=0.5)
f = lambda: jaxsolve.solve(s, jnp.zeros(10), c, tol=1e-8, max_steps=3000).x
""",
    ),
    "pycma CMAEvolutionStrategy (shifted sphere, n=10)": (
        "cma-es",
        "host",
        """
import numpy as np, cma
c = np.linspace(-1.0, 1.0, 10)
def f():
    es = cma.CMAEvolutionStrategy(np.zeros(10), 0.5, {"verbose": -9, "seed": 1, "tolfun": 1e-16})
    es.optimize(lambda x: float(np.sum((x - c) ** 2)))
    return es.result.xbest
""",
    ),
    "blackbox.cma_mae (sphere n=10, 20x20 archive, 50 iters)": (
        "cma-mae",
        "jax",
        """
import jax, jax.numpy as jnp
from jaxsolve.blackbox import cma_mae, sphere_linear_projection
bound = 10 / 2 * 5.12
mae = cma_mae(solution_dim=10, dims=(20, 20), ranges=[(-bound, bound)] * 2)
state = mae.init(jnp.zeros(10), jax.random.key(0))
f = lambda: mae.run(sphere_linear_projection, state, 50)[1].norm_qd_score
""",
    ),
    "pyribs CMA-MAE (sphere n=10, 20x20 archive, 50 iters)": (
        "cma-mae",
        "host",
        """
import numpy as np
from ribs.archives import GridArchive
from ribs.emitters import EvolutionStrategyEmitter
from ribs.schedulers import Scheduler
n, bound, shift = 10, 10 / 2 * 5.12, 0.4 * 5.12
def sphere(X):  # the same benchmark as jaxsolve.blackbox.sphere_linear_projection
    worst = n * (-5.12 - shift) ** 2
    obj = (np.sum((X - shift) ** 2, 1) - worst) / -worst * 100
    out = np.abs(X) > 5.12
    Xf = np.where(out, 5.12 / np.where(out, X, 1), X)
    return obj, np.stack([Xf[:, : n // 2].sum(1), Xf[:, n // 2 :].sum(1)], 1)
def f():
    kw = dict(solution_dim=n, dims=(20, 20), ranges=[(-bound, bound)] * 2)
    archive = GridArchive(**kw, learning_rate=0.01, threshold_min=0.0, seed=0)
    result = GridArchive(**kw, seed=0)
    emitters = [EvolutionStrategyEmitter(archive, x0=np.zeros(n), sigma0=0.5, ranker="imp",
                selection_rule="mu", restart_rule="basic", batch_size=36, seed=i) for i in range(15)]
    sched = Scheduler(archive, emitters, result_archive=result)
    for _ in range(50):
        X = sched.ask(); obj, meas = sphere(X); sched.tell(obj, meas)
    return np.asarray(result.stats.norm_qd_score)
""",
    ),
    "blackbox.genbo (2-d, 5 rounds of 20)": (
        "genbo",
        "jax",
        """
import jax, jax.numpy as jnp
from jaxsolve.blackbox import genbo, UniformBox, DiagonalGaussian
lo, hi = jnp.full(2, -5.0), jnp.full(2, 10.0)
prior = UniformBox(lo, hi)
bo = genbo(prior, utility="ei", loss="preference", batch_size=20, rounds=5, n_initial=20, fit_steps=30)
fun = lambda X: -jnp.sum((X - 1.0) ** 2, 1)
X0 = prior.sample(jax.random.key(0), 20)
state = bo.init(DiagonalGaussian((lo + hi) / 2, jnp.log((hi - lo) / 4), lo, hi), X0, fun(X0),
                jax.random.key(1))
f = lambda: bo.run(fun, state, 5)[1]
""",
    ),
    "evaluation.sparse_eval (200 models x 60 items, K=5)": (
        "sparse eval",
        "host",
        """
import jax
from jaxsolve import evaluation as ev
bench = ev.synthetic_benchmark(jax.random.key(0), n_models=200, n_items=60)
f = lambda: ev.sparse_eval(bench.Y, K=5, key=jax.random.key(1), n_test=20, n_val=20, rounds=2,
                           epochs=200, final_epochs=400, check_every=100).anchors
""",
    ),
    "guidance.latent_optimizer (cosine, nearest, 8x8x4 latent, 5 steps)": (
        "guidance",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.guidance import latent_optimizer
features = lambda z: jnp.tanh(z).reshape(-1, 4)
z, zp, zr = (jax.random.normal(k, (8, 8, 4)) for k in jax.random.split(jax.random.key(0), 3))
ref = features(zr)
opt = latent_optimizer(features, kind="cosine", matcher="nearest", stepsize=0.1, lam=0.01)
f = lambda: jaxsolve.solve(opt, z, (ref, zp), max_steps=5).x
""",
    ),
    "layers.pinet_projection (n=100, one y)": (
        "projection layer",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.layers import Polytope, pinet_projection, projection_args
k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
A, C = jax.random.normal(k1, (50, 100)), jax.random.normal(k2, (50, 100))
poly = Polytope(A, jnp.zeros(50), C, None, jnp.ones(50))
y = jax.random.normal(k3, (100,))
args = projection_args(y, poly)
s = pinet_projection()
f = lambda: jaxsolve.solve(s, y, args, tol=1e-6, max_steps=5000).x
""",
    ),
    "cluster.ratio_cut (kNN graph, n=60, k=3)": (
        "ratio cut",
        "host",
        """
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.neighbors import kneighbors_graph
from jaxsolve.cluster import ratio_cut
X, _ = make_blobs(60, centers=3, cluster_std=1.0, random_state=0)
a = kneighbors_graph(X, 8, include_self=False).toarray(); W = 0.5 * (a + a.T)
f = lambda: ratio_cut(W, 3).state.labels
""",
    ),
    "scikit-learn SpectralClustering (kNN graph, n=60, k=3)": (
        "ratio cut",
        "host",
        """
import numpy as np
from sklearn.cluster import SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.neighbors import kneighbors_graph
X, _ = make_blobs(60, centers=3, cluster_std=1.0, random_state=0)
a = kneighbors_graph(X, 8, include_self=False).toarray(); W = 0.5 * (a + a.T)
f = lambda: SpectralClustering(3, affinity="precomputed", random_state=0).fit(W).labels_
""",
    ),
    "qp.deep_flexqp forward (untrained policy, n=20, m=40)": (
        "qp",
        "jax",
        """
import jax, jax.numpy as jnp, jaxsolve, jaxsolve.qp as Q
qp = Q.problems.random_qp(jax.random.key(0), 20, 40)
s = Q.deep_flexqp(key=jax.random.key(1))
f = lambda: jaxsolve.solve(s, jnp.zeros(20), qp, tol=1e-6, max_steps=200).x
""",
    ),
    "projections.simplex (n=1000)": (
        "simplex projection",
        "jax",
        """
import jax
from jaxsolve.projections import simplex
y = jax.random.normal(jax.random.key(0), (1000,))
f = lambda: simplex(jax.lax.optimization_barrier(y))  # y is data, not a constant
""",
    ),
    "jaxopt projection_simplex (n=1000)": (
        "simplex projection",
        "jax",
        """
import jax
from jaxopt.projection import projection_simplex
y = jax.random.normal(jax.random.key(0), (1000,))
f = lambda: projection_simplex(jax.lax.optimization_barrier(y))
""",
    ),
}

# cautious AdamW against optax's AdamW: the same 200-step loop on one least-squares problem
for _name, _make in (
    ("transforms.cautious_adamw", "from jaxsolve.transforms import cautious_adamw as make"),
    ("optax.adamw", "make = optax.adamw"),
):
    ENTRIES[f"{_name} (optax loop, 200 steps, n=10)"] = (
        "adamw",
        "jax",
        f"""
import jax, jax.numpy as jnp, optax
{_make}
A, b = jax.random.normal(jax.random.key(0), (30, 10)), jnp.ones(30)
loss = lambda p: 0.5 * jnp.sum((A @ p["w"] - b) ** 2)
tx = make(1e-2, weight_decay=0.1)
def f():
    def body(_, c):
        p, st = c
        u, st = tx.update(jax.grad(loss)(p), st, p)
        return optax.apply_updates(p, u), st
    p = {{"w": jnp.zeros(10)}}
    return jax.lax.fori_loop(0, 200, body, (p, tx.init(p)))[0]["w"]
""",
    )

# the Riemannian solvers on one problem (the Rayleigh quotient on the sphere, n = 50)
for _name, _tol in (
    ("gradient_descent", "1e-6, max_steps=5000"),
    ("conjugate_gradient", "1e-6, max_steps=5000"),
    ("cubic_newton", "1e-8"),
):
    ENTRIES[f"riemannian.{_name} (sphere, n=50)"] = (
        "riemannian",
        "jax",
        f"""
import jax, jax.numpy as jnp, jaxsolve
from jaxsolve.manifolds import Sphere
from jaxsolve.riemannian import {_name}
M = jax.random.normal(jax.random.key(0), (50, 50)); A = M + M.T
s = {_name}(lambda x, A: x @ A @ x, Sphere(50))
f = lambda: jaxsolve.solve(s, jnp.ones(50) / jnp.sqrt(50.0), A, tol={_tol}).x
""",
    )

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


# XLA:CPU options that trade run time for compile time (docs/guide.md, "Compile time"):
# LLVM at -O0 without its expensive passes, and the older loop emitters
FAST_COMPILE_FLAGS = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
    "--xla_cpu_use_fusion_emitters=false"
)


def run_entry(name: str, timeout: float = 300.0, fast: bool = False) -> dict | str:
    group, kind, src = ENTRIES[name]
    if "f = " not in src and "def f" not in src:
        return "no entry point"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if fast:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {FAST_COMPILE_FLAGS}".strip()
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
    ap.add_argument(
        "--fast-compile",
        action="store_true",
        help=f"every entry under XLA_FLAGS={FAST_COMPILE_FLAGS!r}; the table is compile_fast.md",
    )
    ap.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this entry (an exact name, or a substring naming one entry; repeatable) "
        "and print its result; no table is written",
    )
    a = ap.parse_args(argv)
    names = QUICK if a.quick else tuple(ENTRIES)
    if a.only:
        picked = []
        for want in a.only:
            hits = [n for n in ENTRIES if n == want] or [n for n in ENTRIES if want in n]
            if len(hits) != 1:
                ap.error(f"--only {want!r} matches {len(hits)} entries: {hits}")
            picked.append(hits[0])
        for name in picked:
            t0 = time.perf_counter()
            r = run_entry(name, fast=a.fast_compile)
            print(f"{name}: {json.dumps(r)} ({time.perf_counter() - t0:.1f} s with start-up)")
        return
    results = {}
    for name in names:
        t0 = time.perf_counter()
        results[name] = run_entry(name, fast=a.fast_compile)
        print(f"{name}: {results[name]} ({time.perf_counter() - t0:.1f} s with start-up)")
    # ratio: ours / the fastest peer first call in the same group
    lines = [
        "# First-call (compile) time against the peers",
        "",
        f"`python bench/compile.py{' --quick' if a.quick else ''}"
        f"{' --fast-compile' if a.fast_compile else ''}`, "
        + (f"every entry under `XLA_FLAGS={FAST_COMPILE_FLAGS}`, " if a.fast_compile else "")
        + f"{datetime.date.today()}, {os.cpu_count()} cores, float64, each entry in a fresh process. "
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
            "transforms",
            "losses",
            "submodular",
            "nlp",
            "distributed",
            "blackbox",
            "evaluation",
            "guidance",
            "projections",
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
    table = "compile_fast" if a.fast_compile else "compile"
    write_results(table, "\n".join(lines) + "\n", quick=a.quick, out=a.out)


if __name__ == "__main__":
    main()
