"""QP: one QP (checked against OSQP), a vmapped batch, an infeasible QP, an MPC
warm-start sequence."""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])


import jax
import jax.numpy as jnp
import numpy as np

import peers.osqp
from examples._common import build, main
from jaxsolve.core import Status
from jaxsolve.qp import problems, solve_qp
from peers.timing import compile_and_steady, timed


def _osqp_x(qp):
    try:  # reference only: osqp is a dev dependency
        return peers.osqp.solve_qp(
            qp, eps_abs=1e-10, eps_rel=1e-10, polishing=True, max_iter=100000
        ).x
    except ImportError:
        return None


def random_qp_row(out_dir: pathlib.Path) -> list[dict]:
    """One random QP, with its convergence history, against OSQP."""
    # the problems are built in one compiled call each, not op by op, at -O0 (`build`)
    qp = build(lambda k: problems.random_qp(k, 30, 60))(jax.random.key(0))
    f = jax.jit(lambda qp: solve_qp(qp, tol=1e-8, history=True))
    sol, t = timed(f, qp)
    xr = _osqp_x(qp)
    ref = (
        "osqp not installed"
        if xr is None
        else f"|x-x_osqp|/|x_osqp| = {np.linalg.norm(sol.x - xr) / max(1, np.linalg.norm(xr)):.1e}"
    )
    return [
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
    ]


def batch_row(out_dir: pathlib.Path) -> list[dict]:
    """256 random float32 QPs in one vmapped solve."""
    keys = jax.random.split(jax.random.key(1), 256)
    batch = build(jax.vmap(lambda k: problems.random_qp(k, 20, 40, dtype=jnp.float32)))(keys)
    g = jax.jit(lambda qp: solve_qp(qp, tol=1e-4))
    bsol, t = timed(g, batch)
    return [
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
    ]


def infeasible_row(out_dir: pathlib.Path) -> list[dict]:
    """An infeasible QP: the least-violation point and its certificate."""
    iqp = build(lambda k: problems.infeasible_qp(k, 10, 20, k=2))(jax.random.key(2))
    h = jax.jit(lambda qp: solve_qp(qp, tol=1e-9, max_steps=3000))
    isol, t = timed(h, iqp)
    viol = np.asarray(isol.state.viol)
    return [
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
    ]


def mpc_row(out_dir: pathlib.Path) -> list[dict]:
    """A sequence of MPC problems with a moving initial state, cold and warm started.

    Every problem of the sequence has the same shapes, so one compiled problem builder,
    one compiled cold solve and one compiled warm solve serve all of them (built and
    solved op by op, the row took 19 s, nearly all of it compilation, and reported
    that as its time). The time is the sequence's after compilation, given apart."""
    key = jax.random.key(3)
    nx, nu, T = 6, 3, 10
    make = jax.jit(lambda x: problems.mpc(key, nx, nu, T, x0=x))
    cold = jax.jit(lambda qp: solve_qp(qp, tol=1e-7))
    warm = jax.jit(
        lambda qp, prev: solve_qp(qp, problems.shift_mpc_warm_start(prev, qp, nx, nu, T), tol=1e-7)
    )
    qp0 = make(jnp.zeros(nx))  # the system depends on the key only
    xmax = qp0.u[(T + 1) * nx : (T + 2) * nx]
    x_first = 0.95 * xmax * jnp.sign(jax.random.normal(jax.random.key(9), (nx,)))

    def sequence():
        x_state, prev, cold_it, warm_it = x_first, None, 0, 0
        for _ in range(6):
            qpt = make(x_state)
            sol = cold(qpt)
            if prev is not None:
                w = warm(qpt, prev)
                cold_it += int(sol.state.admm_iters)
                warm_it += int(w.state.admm_iters)
            prev = sol
            x_state = sol.x[nx : 2 * nx]
        return w, cold_it, warm_it

    (w, cold_it, warm_it), seconds, compile_s = compile_and_steady(sequence)
    return [
        {
            "problem": "MPC, moving x0 (5 shifted warm starts)",
            "size": f"n={qp0.n}, m={qp0.m}",
            "solver": "flexqp",
            "status": Status(int(w.status)).name,
            "steps": int(w.num_steps),
            "error": float(w.error),
            "time": seconds,
            "reference": f"ADMM iterations warm/cold = {warm_it}/{cold_it}; "
            f"compile {compile_s:.1f} s apart",
        }
    ]


# Four parts, each its own compilations: `make demo` may run them in different workers.
PARTS = (random_qp_row, batch_row, infeasible_row, mpc_row)


def run(out_dir: pathlib.Path) -> list[dict]:
    return [row for part in PARTS for row in part(out_dir)]


if __name__ == "__main__":
    sys.exit(main("qp", run))
