"""``make demo`` entry for the projection layer (Pinet): DC3 feasible sets, batched."""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])


import jax
import jax.numpy as jnp
import numpy as np

import peers.osqp
from examples._common import build, main, row_from_solution
from peers.timing import timed


def run(out_dir: pathlib.Path) -> list[dict]:
    from jaxsolve.core import Status, solve, status_counts
    from jaxsolve.layers import Polytope, dc3_simple_qp, pinet_projection, project, projection_args

    rows = []
    # A batch of 48: below 64 the forward runs as one phase (no straggler compaction),
    # which halves its compilation; the batch of 1024 is in bench/results/layers.md.
    batch = 48
    # the data in one fast-compiled call (`build`), not timed
    prob, Y = build(
        lambda k0, k1: (
            dc3_simple_qp(k0, 100, 50, 50, num=batch),
            jax.random.normal(k1, (batch, 100), jnp.float64),
        )
    )(jax.random.key(0), jax.random.key(1))
    poly = prob.polytope().factorize()

    # 1. a batch of projections, one right-hand side each (the polytope is an argument:
    # closed over, its factors would be constants for XLA to fold)
    fn = jax.jit(lambda y, P: project(y, P, tol=1e-9))
    sol, seconds = timed(fn, Y, poly)
    x = sol.x
    ref = ""
    try:
        errs = []
        for i in range(3):
            res = peers.osqp.project(
                Y[i],
                np.vstack([prob.A, prob.G]),
                np.concatenate([prob.X[i], np.full(50, -np.inf)]),
                np.concatenate([prob.X[i], prob.h]),
                eps_abs=1e-10,
                eps_rel=1e-10,
                polishing=True,
                max_iter=100000,
            )
            errs.append(np.abs(res.x - np.asarray(x[i])).max())
        ref = (
            f"max|x - OSQP| {max(errs):.1e} (3 ex.), violation {float(poly.violation(x).max()):.1e}"
        )
    except ImportError:
        ref = f"violation {float(poly.violation(x).max()):.1e} (OSQP not installed)"
    counts = status_counts(sol.status)
    rows.append(
        {
            "problem": f"DC3 feasible set, batch {batch}",
            "size": "n=100, 50 eq, 50 ineq",
            "solver": "layers.project (batched)",
            "status": "SUCCESS" if counts == {"SUCCESS": batch} else str(counts),
            "steps": int(np.max(sol.num_steps)),
            "error": float(np.max(sol.error)),
            "time": seconds,
            "reference": ref,
        }
    )

    # 2. one projection through the shared driver, with its convergence history
    solver = pinet_projection()
    args = projection_args(Y[0], poly.update(b=prob.X[0]))
    run_one = jax.jit(lambda y, a: solve(solver, y, a, tol=1e-12, max_steps=2000, history=True))
    sol, seconds = timed(run_one, Y[0], args)
    err = float(np.abs(np.asarray(sol.x) - np.asarray(x[0])).max())
    rows.append(
        row_from_solution(
            "DC3 feasible set, one point",
            "n=100",
            "layers.pinet_projection",
            sol,
            seconds,
            f"max|x - batched| {err:.1e}",
        )
    )

    # 3. an empty polytope is reported, not iterated to the step limit
    empty = Polytope(
        A=jnp.array([[1.0, 1.0, 0.0]]), b=jnp.array([3.0]), lb=jnp.zeros(3), ub=jnp.ones(3)
    )
    sol3 = project(jnp.array([0.2, 0.4, 0.9]), empty, max_steps=5000)
    rows.append(
        {
            "problem": "x1 + x2 = 3 in [0,1]^3 (empty)",
            "size": "n=3",
            "solver": "layers.project",
            "status": Status(int(sol3.status)).name,
            "steps": int(sol3.num_steps),
            "error": float(sol3.error),
            "time": float("nan"),
            "reference": "expected INFEASIBLE",
        }
    )
    return rows


if __name__ == "__main__":
    sys.exit(main("layers", run))
