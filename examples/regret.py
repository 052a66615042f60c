"""``make demo`` entry: alternating RM+ on a convex problem over a product of simplices."""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax.numpy as jnp
import numpy as np

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve.regret import regret_matching
from peers.timing import timed


def _dist(x, y):
    return 0.5 * sum(jnp.sum((x[k] - y[k]) ** 2) for k in x)


def _project(v):
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    k = np.nonzero(u * np.arange(1, v.size + 1) > css - 1)[0][-1]
    return np.maximum(v - (css[k] - 1) / (k + 1), 0)


def run(out_dir) -> list[dict]:
    rng = np.random.default_rng(0)
    y = {"a": rng.standard_normal((20, 8)) * 0.3, "b": rng.standard_normal((10, 5)) * 0.3}
    ref = {k: np.stack([_project(r) for r in v]) for k, v in y.items()}
    x0 = {"a": jnp.full((20, 8), 1 / 8), "b": jnp.full((10, 5), 1 / 5)}
    args = {k: jnp.asarray(v) for k, v in y.items()}
    rows = []
    for name, variant in (("alternating RM+", "rm+"), ("alternating predictive RM+", "predictive")):
        solver = regret_matching(_dist, variant=variant)
        sol, secs = timed(jaxsolve.solve, solver, x0, args, tol=1e-9, max_steps=5000, history=True)
        err = max(float(np.abs(np.asarray(sol.x[k]) - ref[k]).max()) for k in ref)
        rows.append(
            row_from_solution(
                "projection onto 30 simplices",
                "20x8 + 10x5",
                name,
                sol,
                secs,
                f"max abs(x - exact projection) = {err:.1e}",
            )
        )
    return rows


if __name__ == "__main__":
    sys.exit(main("regret", run))
