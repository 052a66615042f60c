"""``make demo`` entry: Frank-Wolfe variants on a simplex projection with a closed-form answer."""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax.numpy as jnp
import numpy as np

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve.frank_wolfe import frank_wolfe, lmo, optimistic_frank_wolfe
from peers.timing import timed


def _dist(x, y):
    return 0.5 * jnp.sum((x - y) ** 2)


def _project(y):
    u = np.sort(y)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u * np.arange(1, y.size + 1) > css - 1)[0][-1]
    return np.maximum(y - (css[k] - 1) / (k + 1), 0)


def run(out_dir) -> list[dict]:
    n = 200
    y = np.random.default_rng(0).standard_normal(n) * 0.1
    ref = _project(y)
    fstar = 0.5 * np.sum((ref - y) ** 2)
    x0 = jnp.full(n, 1.0 / n)
    args = jnp.asarray(y)
    rows = []
    solvers = {
        "pairwise FW, exact line search": frank_wolfe(
            _dist, lmo.probability_simplex(), step="exact", variant="pairwise"
        ),
        "vanilla FW, primal-dual short step": frank_wolfe(
            _dist, lmo.probability_simplex(), step="primal_dual", lipschitz=1.0
        ),
        "optimistic FW": optimistic_frank_wolfe(_dist, lmo.probability_simplex()),
    }
    for name, solver in solvers.items():
        sol, secs = timed(jaxsolve.solve, solver, x0, args, tol=1e-8, max_steps=2000, history=True)
        f = float(_dist(sol.x, args))
        rows.append(
            row_from_solution(
                "simplex projection",
                str(n),
                name,
                sol,
                secs,
                f"f - f* = {f - fstar:.1e} <= certified {float(sol.error):.1e}",
            )
        )
    return rows


if __name__ == "__main__":
    sys.exit(main("frank_wolfe", run))
