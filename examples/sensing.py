"""``make demo`` rows for weight-normalized matrix sensing (paper 1) and plain GD."""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax
import numpy as np

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve import sensing as S
from peers.timing import timed


def run(out_dir) -> list[dict]:
    meas, a = S.make_problem(jax.random.key(0), 10, 3, 6000, 10.0, form="gram")
    rows = []
    x0 = S.initial_point(jax.random.key(1), 10, 6)
    sol, t = timed(
        lambda: jaxsolve.solve(
            S.weight_normalized(direction_step=1.5),
            x0,
            meas,
            tol=1e-11,
            max_steps=4000,
            history=True,
        )
    )
    x, th = sol.x
    rel = float(S.relative_error(x @ th @ x.T, a))
    rows.append(
        row_from_solution(
            "sensing m=10 rA=3 kappa=10", "r=6", "weight_normalized", sol, t, f"rel err {rel:.1e}"
        )
    )
    y0 = S.small_initial_point(jax.random.key(1), 10, 6)
    steps = int(sol.num_steps)
    sol2, t2 = timed(
        lambda: jaxsolve.solve(
            S.burer_monteiro(stepsize=0.5),
            y0,
            meas,
            tol=1e-11,
            max_steps=max(steps, 1),
            history=True,
        )
    )
    rel2 = float(S.relative_error(sol2.x @ sol2.x.T, a))
    rows.append(
        row_from_solution(
            "sensing m=10 rA=3 kappa=10",
            "r=6",
            "burer_monteiro (same steps)",
            sol2,
            t2,
            f"rel err {rel2:.1e}",
        )
    )
    assert np.isfinite(rel) and np.isfinite(rel2)
    return rows


if __name__ == "__main__":
    sys.exit(main("sensing", run))
