"""`make demo` entry: AAPGA + rounding on probabilistic coverage, checked against greedy
and the certified bound.

The instance is small enough that brute force is not needed for the check: the
relaxation's certificate $F(x) + \\mathrm{gap}(x) \\ge \\mathrm{OPT}$ bounds the optimum,
so the row reports how close the rounded set is to that bound and to lazy greedy.
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from examples._common import main
from jaxsolve import submodular as sm
from peers.timing import timed


def run(out_dir) -> list[dict]:
    rng = np.random.default_rng(0)
    n, t, k = 400, 300, 15
    P = rng.uniform(0, 0.3, (n, t)) * (rng.uniform(size=(n, t)) < 0.03)
    f = sm.probabilistic_coverage(jnp.asarray(P))
    c = sm.cardinality(k)
    sol, seconds = timed(
        lambda: jaxsolve.solve(sm.aapga(), c.start(n, jnp.float64), (f, c), tol=1e-6, history=True)
    )
    res, _ = timed(lambda: sm.maximize(f, c, jax.random.key(0), tol=1e-6))
    greedy = sm.lazy_greedy(f, c)
    ratio_bound = float(res.value) / float(res.upper_bound)
    ratio_greedy = float(res.value) / float(greedy.value)
    hist = None if sol.history is None else np.asarray(sol.history)
    return [
        {
            "problem": "probabilistic coverage, cardinality",
            "size": f"n={n}, k={k}",
            "solver": "aapga + rounding",
            "status": jaxsolve.Status(int(sol.status)).name,
            "steps": int(sol.num_steps),
            "error": float(sol.error),
            "time": seconds,
            "reference": f"f(S)/bound {ratio_bound:.4f}, f(S)/greedy {ratio_greedy:.4f}",
            "history": hist,
        }
    ]


if __name__ == "__main__":
    sys.exit(main("submodular", run))
