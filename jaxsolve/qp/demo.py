"""``make demo`` rows for the QP family: one QP, a vmapped batch, an infeasible QP, an MPC
warm-start sequence (see `jaxsolve.demo`)."""

from __future__ import annotations

import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Status
from jaxsolve.qp import problems, solve_qp


def _osqp_x(qp):
    try:  # reference only: osqp is a dev dependency, imported lazily
        import osqp
        import scipy.sparse as sp
    except ImportError:
        return None
    P, q, A, l, u = (np.asarray(v, np.float64) for v in qp)
    s = osqp.OSQP()
    s.setup(
        sp.csc_matrix(np.triu(P)),
        q,
        sp.csc_matrix(A),
        np.where(np.isinf(l), -1e30, l),
        np.where(np.isinf(u), 1e30, u),
        eps_abs=1e-10,
        eps_rel=1e-10,
        polishing=True,
        verbose=False,
        max_iter=100000,
    )
    return s.solve().x


def _timed(fn):
    out = jax.block_until_ready(fn())
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def run(out_dir: pathlib.Path) -> list[dict]:
    rows = []
    qp = problems.random_qp(jax.random.key(0), 30, 60)
    f = jax.jit(lambda qp: solve_qp(qp, tol=1e-8, history=True))
    sol, t = _timed(lambda: f(qp))
    xr = _osqp_x(qp)
    ref = (
        "osqp not installed"
        if xr is None
        else f"|x-x_osqp|/|x_osqp| = {np.linalg.norm(sol.x - xr) / max(1, np.linalg.norm(xr)):.1e}"
    )
    rows.append(
        {
            "problem": "random QP",
            "size": "n=30, m=60",
            "solver": "flexqp",
            "status": Status(int(sol.status)).name,
            "steps": int(sol.num_steps),
            "error": float(sol.error),
            "time": t,
            "reference": ref,
            "history": np.asarray(sol.history),
        }
    )
    keys = jax.random.split(jax.random.key(1), 256)
    batch = jax.vmap(lambda k: problems.random_qp(k, 20, 40, dtype=jnp.float32))(keys)
    g = jax.jit(lambda qp: solve_qp(qp, tol=1e-4))
    bsol, t = _timed(lambda: g(batch))
    rows.append(
        {
            "problem": "256 random QPs (one batch, float32)",
            "size": "n=20, m=40",
            "solver": "flexqp",
            "status": str(bsol.counts()),
            "steps": int(jnp.max(bsol.num_steps)),
            "error": float(jnp.max(bsol.error)),
            "time": t,
            "reference": "",
        }
    )
    iqp = problems.infeasible_qp(jax.random.key(2), 10, 20, k=2)
    h = jax.jit(lambda qp: solve_qp(qp, tol=1e-9, max_steps=3000))
    isol, t = _timed(lambda: h(iqp))
    viol = np.asarray(isol.state.viol)
    rows.append(
        {
            "problem": "infeasible QP",
            "size": "n=10, m=22",
            "solver": "flexqp",
            "status": Status(int(isol.status)).name,
            "steps": int(isol.num_steps),
            "error": float(isol.error),
            "time": t,
            "reference": f"l1 violation {viol.sum():.4f} on rows {np.nonzero(viol > 1e-7)[0].tolist()}",
        }
    )
    key = jax.random.key(3)
    nx, nu, T = 6, 3, 10
    qp0 = problems.mpc(key, nx, nu, T)
    xmax = qp0.u[(T + 1) * nx : (T + 2) * nx]
    x_state = 0.95 * xmax * jnp.sign(jax.random.normal(jax.random.key(9), (nx,)))
    prev, cold_it, warm_it = None, 0, 0
    t0 = time.perf_counter()
    for _ in range(6):
        qpt = problems.mpc(key, nx, nu, T, x0=x_state)
        cold = solve_qp(qpt, tol=1e-7)
        if prev is not None:
            warm = solve_qp(qpt, problems.shift_mpc_warm_start(prev, qpt, nx, nu, T), tol=1e-7)
            cold_it += int(cold.state.admm_iters)
            warm_it += int(warm.state.admm_iters)
        prev = cold
        x_state = cold.x[nx : 2 * nx]
    rows.append(
        {
            "problem": "MPC, moving x0 (5 shifted warm starts)",
            "size": f"n={qp0.n}, m={qp0.m}",
            "solver": "flexqp",
            "status": Status(int(warm.status)).name,
            "steps": int(warm.num_steps),
            "error": float(warm.error),
            "time": time.perf_counter() - t0,
            "reference": f"ADMM iterations warm/cold = {warm_it}/{cold_it}",
        }
    )
    return rows
