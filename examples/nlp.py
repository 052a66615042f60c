"""`make demo` entry: SQP on always-feasible FlexQP subproblems, HS71 against SciPy's SLSQP
and one unicycle obstacle-avoidance trajectory (with a picture).

HS71 has a published optimum (17.0140173) and SLSQP solves it to high accuracy, so its
row reports the distance to SLSQP's point. The trajectory row starts from the straight
reference rollout, which passes through the obstacles (an infeasible linearization is
what the elastic subproblem handles); it reports the KKT status and the smallest distance
of a state to an obstacle's edge (zero at an active constraint, negative a collision).
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve.nlp import problems, sqp
from peers.timing import timed


def _slsqp(p):
    """SciPy's SLSQP on the same NLP (its inequalities are ``>= 0``, ours ``<= 0``)."""
    cons = [{"type": "eq", "fun": lambda x: np.asarray(p.eq(x, None))}]
    cons += [{"type": "ineq", "fun": lambda x: -np.asarray(p.ineq(x, None))}]
    res = minimize(
        lambda x: float(p.fun(x, None)),
        p.x0,
        method="SLSQP",
        bounds=list(zip(p.lb, p.ub, strict=True)),
        constraints=cons,
        options={"ftol": 1e-12, "maxiter": 500},
    )
    return res.x


def _trajectory_picture(data, z0, z, T, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    states = np.asarray(z[: 3 * T]).reshape(T, 3)
    fig, ax = plt.subplots(figsize=(5, 3))
    for c, r in zip(np.asarray(data.centers), np.asarray(data.radii), strict=True):
        ax.add_patch(plt.Circle(c, r, color="tab:red", alpha=0.4))
    start = np.asarray(data.start)
    ref = np.asarray(z0[: 3 * T]).reshape(T, 3)
    ax.plot(*np.vstack([start[:2], ref[:, :2]]).T, "--", c="gray", lw=1, label="start (reference)")
    ax.plot(*np.vstack([start[:2], states[:, :2]]).T, "o-", ms=3, label="SQP trajectory")
    ax.plot(*np.asarray(data.goal), "k*", ms=12, label="goal")
    ax.set_aspect("equal")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("unicycle around obstacles (SQP + FlexQP)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(out_dir) -> list[dict]:
    p = problems.hs071()
    solver = sqp(p.fun, p.eq, p.ineq, lb=p.lb, ub=p.ub)
    sol, secs = timed(jaxsolve.solve, solver, jnp.asarray(p.x0), None, tol=1e-8, history=True)
    gap = float(jnp.max(jnp.abs(sol.x - _slsqp(p))))
    rows = [
        row_from_solution(
            "HS71", "n=4", "sqp (BFGS)", sol, secs, f"max|x - SLSQP| {gap:.1e}, f* 17.0140173"
        )
    ]
    rows[0]["metric"] = f"f {float(p.fun(sol.x, None)):.7f}"

    T = 20
    traj = problems.unicycle(T)
    data = problems.unicycle_data(jax.random.key(0), T)
    z0 = problems.unicycle_rollout(data, data.u_ref)
    solver = sqp(traj.fun, traj.eq, traj.ineq, lb=traj.lb, ub=traj.ub, hessian="exact")
    sol, secs = timed(jaxsolve.solve, solver, z0, data, tol=1e-6, max_steps=150, history=True)
    states = np.asarray(sol.x[: 3 * T]).reshape(T, 3)
    dist = np.linalg.norm(states[:, None, :2] - np.asarray(data.centers)[None], axis=-1)
    clearance = float(np.min(dist - np.asarray(data.radii)[None]))
    start_clear = np.linalg.norm(
        np.asarray(z0[: 3 * T]).reshape(T, 3)[:, None, :2] - np.asarray(data.centers)[None], axis=-1
    )
    start_clear = float(np.min(start_clear - np.asarray(data.radii)[None]))
    rows.append(
        row_from_solution(
            "unicycle, 2 obstacles",
            f"T={T}, n={5 * T}",
            "sqp (exact Hessian)",
            sol,
            secs,
            f"clearance {clearance:+.1e} (start {start_clear:+.2f})",
        )
    )
    _trajectory_picture(data, z0, sol.x, T, pathlib.Path(out_dir) / "nlp_unicycle.png")
    return rows


if __name__ == "__main__":
    sys.exit(main("nlp", run))
