"""``make demo`` entry: projected gradient on constrained least squares, checked exactly.

The reference is computed independently of the iteration: on the active set the solver
identified, the KKT conditions are a linear system (equality-constrained least squares),
solved directly; the row reports the distance to that solution and whether the
multipliers it implies are dual feasible (i.e. the identified active set is optimal).
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
from jaxsolve import projections as P
from jaxsolve.first_order import projected_gradient
from peers.timing import timed


def _ls(x, args):
    A, b = args
    r = A @ x - b
    return 0.5 * jnp.vdot(r, r)


def _kkt_simplex(A, b, x, s=1.0):
    """Exact solution on the support S of x: min ||A_S z - b|| s.t. sum z = s; dual check."""
    S = np.flatnonzero(np.asarray(x) > 0)
    AS = A[:, S]
    K = np.block([[AS.T @ AS, np.ones((S.size, 1))], [np.ones((1, S.size)), np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.r_[AS.T @ b, s])
    z = np.zeros(A.shape[1])
    z[S] = sol[:-1]
    lam = -sol[-1]  # grad_i = lam on S, grad_i >= lam off S
    g = A.T @ (A @ z - b)
    ok = z.min() >= -1e-12 and np.all(g >= lam - 1e-9)
    return z, ok


def _kkt_l1(A, b, x, r):
    """Support S with signs sigma: min ||A_S z - b|| s.t. sigma.z = r; dual check |g| <= mu."""
    x = np.asarray(x)
    S = np.flatnonzero(np.abs(x) > 0)
    sig = np.sign(x[S])
    AS = A[:, S]
    K = np.block([[AS.T @ AS, sig[:, None]], [sig[None, :], np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.r_[AS.T @ b, r])
    z = np.zeros(A.shape[1])
    z[S] = sol[:-1]
    mu = sol[-1]  # -grad_S = mu * sigma, |grad| <= mu elsewhere
    g = A.T @ (A @ z - b)
    ok = mu >= 0 and np.all(np.sign(z[S]) == sig) and np.all(np.abs(g) <= mu + 1e-9)
    return z, ok


def _kkt_box(A, b, x, lo, hi):
    """Free set F: least squares on F with the others at their bounds; dual sign check."""
    x = np.asarray(x)
    F = np.flatnonzero((x > lo) & (x < hi))
    z = x.copy()
    z[F] = 0.0
    fixed = np.setdiff1d(np.arange(x.size), F)
    z[fixed] = np.where(x[fixed] <= lo, lo, hi)
    rhs = b - A[:, fixed] @ z[fixed]
    z[F] = np.linalg.lstsq(A[:, F], rhs, rcond=None)[0]
    g = A.T @ (A @ z - b)
    ok = (
        np.all(g[z <= lo] >= -1e-9)
        and np.all(g[z >= hi] <= 1e-9)
        and np.all(z >= lo)
        and np.all(z <= hi)
    )
    return z, ok


def run(out_dir) -> list[dict]:
    rng = np.random.default_rng(0)
    m, n = 400, 200
    # decaying column scales: condition number ~1e3, where acceleration matters
    A = rng.normal(size=(m, n)) / np.sqrt(m) * np.logspace(0, -1.5, n)
    b = A @ (rng.normal(size=n) / np.sqrt(n)) + 0.1 * rng.normal(size=m)
    args = (jnp.asarray(A), jnp.asarray(b))
    x0 = jnp.zeros(n)
    rows = []
    problems = {
        "LS over simplex": (P.simplex, lambda x: _kkt_simplex(A, b, x)),
        "LS over l1 ball (r=1)": (lambda x: P.l1_ball(x, 1.0), lambda x: _kkt_l1(A, b, x, 1.0)),
        "LS over box [-0.1, 0.1]": (
            lambda x: P.box(x, -0.1, 0.1),
            lambda x: _kkt_box(A, b, x, -0.1, 0.1),
        ),
    }
    for problem, (proj, kkt) in problems.items():
        for label, opts in (
            ("FISTA + backtracking + restart", {}),
            ("projected gradient, backtracking", {"accelerated": False}),
        ):
            solver = projected_gradient(_ls, proj, **opts)
            sol, secs = timed(
                jaxsolve.solve, solver, x0, args, tol=1e-9, max_steps=5000, history=True
            )
            z, ok = kkt(sol.x)
            dist = float(np.linalg.norm(np.asarray(sol.x) - z))
            note = f"|x - x_KKT| = {dist:.1e} ({'active set optimal' if ok else 'active set NOT optimal'})"
            rows.append(row_from_solution(problem, f"{m}x{n}", label, sol, secs, note))

    # A vmapped batch of 256 simplex-constrained problems.
    B, mb, nb = 256, 60, 30
    As = jnp.asarray(rng.normal(size=(B, mb, nb)) / np.sqrt(mb))
    bs = jnp.asarray(rng.normal(size=(B, mb)))
    solver = projected_gradient(_ls, P.simplex)
    batched = jax.jit(
        jax.vmap(
            lambda A, b: jaxsolve.solve(solver, jnp.zeros(nb), (A, b), tol=1e-9, max_steps=5000)
        )
    )
    sol, secs = timed(batched, As, bs)
    worst = max(
        float(
            np.linalg.norm(
                np.asarray(sol.x[i])
                - _kkt_simplex(np.asarray(As[i]), np.asarray(bs[i]), sol.x[i])[0]
            )
        )
        for i in range(B)
    )
    rows.append(
        {
            "problem": "LS over simplex (vmap batch)",
            "size": f"{B} x {mb}x{nb}",
            "solver": "FISTA + backtracking + restart",
            "status": ", ".join(f"{k} {v}" for k, v in sol.counts().items()),
            "steps": int(jnp.max(sol.num_steps)),
            "error": float(jnp.max(sol.error)),
            "time": secs,
            "reference": f"max |x - x_KKT| = {worst:.1e}",
        }
    )
    return rows


if __name__ == "__main__":
    sys.exit(main("first_order", run))
