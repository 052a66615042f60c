"""``make demo`` entry: DS-ADMM and NIDS on a decentralized lasso.

30 agents on an Erdos-Renyi graph (p = 0.5, Metropolis-Hastings weights) hold a
heterogeneous split of scikit-learn's breast_cancer; both methods solve the lasso
$\\sum_i \\frac{1}{2m}\\|A_ix - b_i\\|^2 + 3\\|x\\|_1$, checked against scikit-learn's ``Lasso``
(the same objective scaled by $1/n$). The ledger's rounds per agent are reported.
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
from examples._common import main, row_from_solution
from jaxsolve import distributed as D
from peers.timing import timed


def run(out_dir) -> list[dict]:
    from sklearn.linear_model import Lasso

    n, lam = 30, 3.0
    dtype = jnp.result_type(float)
    A, b = D.breast_cancer(n, dtype=dtype)
    W = D.metropolis_hastings(D.erdos_renyi(jax.random.key(0), n, 0.5))
    problem = D.make_problem((A, b), W, lam)
    X, y = np.asarray(A, np.float64).reshape(-1, A.shape[2]), np.asarray(b, np.float64).ravel()
    ref = Lasso(alpha=lam / n, fit_intercept=False, tol=1e-12, max_iter=100000).fit(X, y).coef_
    tol = 1e-8 if dtype == jnp.float64 else 1e-4
    x0 = jnp.zeros((n, A.shape[2]), dtype)
    rows = []
    for name, solver in (
        ("ds_admm", D.ds_admm(D.LeastSquares(), D.L1())),
        ("nids", D.nids(D.LeastSquares(), D.L1())),
    ):
        run_one = jax.jit(
            lambda s, x0, p: jaxsolve.solve(s, x0, p, tol=tol, max_steps=20000, history=True)
        )
        sol, seconds = timed(run_one, solver, x0, problem)
        dist = np.linalg.norm(np.asarray(sol.x, np.float64) - ref) / (
            np.sqrt(n) * np.linalg.norm(ref)
        )
        rounds = int(sol.state.ledger.rounds)
        rows.append(
            row_from_solution(
                "lasso, 30 agents (breast_cancer)",
                f"{n}x{A.shape[2]}",
                name,
                sol,
                seconds,
                f"rel. dist to sklearn {dist:.1e}, {rounds} rounds",
            )
        )
    return rows


if __name__ == "__main__":
    sys.exit(main("distributed", run))
