"""``make demo`` entry: CMA-ES on Rosenbrock under `jaxsolve.solve`, CMA-MAE on the QD sphere, GenBO on Ackley.

The CMA-ES row is a real solve: its status is the solver's, its error the search
distribution's largest standard deviation (the stopping measure), and the reference
column compares the best point with Rosenbrock's known minimizer $x^* = \\mathbf 1$.
The CMA-MAE row is a fixed budget of iterations on the sphere linear-projection
benchmark (Fontaine et al. 2020) with a small grid archive: it has no convergence test,
so it reports the result archive's normalized QD score and coverage in ``metric``, and,
as its reference, CMA-ES on the same budget: the same scheduler with archive learning
rate $\\alpha = 0$ (thresholds never move, emitters rank by objective), run in the same
compiled call as a second entry of a ``vmap`` over $\\alpha$.
The GenBO row is generative batch Bayesian optimization (`genbo`, preference loss, EI
utility) on the 4-D Ackley function over $[-5, 10]^4$, a fixed budget of rounds; its
reference is random search with the same number of evaluations. Both report the
simple regret (Ackley's value at the best point found; 0 is optimal).
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve.blackbox import (
    DiagonalGaussian,
    UniformBox,
    cma_es_solver,
    cma_mae,
    genbo,
    sphere_linear_projection,
)
from peers.timing import timed


def _rosenbrock(x, args):
    return jnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def _cma_es_row():
    n = 10
    solver = cma_es_solver(_rosenbrock, n, seed=0, sigma0=0.5)
    sol, secs = timed(
        jaxsolve.solve, solver, jnp.zeros(n), None, tol=1e-9, max_steps=2000, history=True
    )
    err = float(jnp.max(jnp.abs(sol.x - 1)))
    f = float(sol.state.f_x)
    evals = int(sol.num_steps) * solver.es.popsize
    return row_from_solution(
        "Rosenbrock",
        f"n={n}",
        "CMA-ES",
        sol,
        secs,
        f"max abs(x - x*) = {err:.1e}, f - f* = {f:.1e} ({evals} evaluations)",
    )


def _cma_mae_row():
    n, iters, E, B = 10, 300, 4, 12
    bound = n / 2 * 5.12
    mae = cma_mae(
        solution_dim=n, dims=(25, 25), ranges=[(-bound, bound)] * 2, n_emitters=E, batch_size=B
    )

    def one(lr):  # the same scheduler, the annealing archive's learning rate replaced
        m = eqx.tree_at(lambda m: m.archive.learning_rate, mae, lr)
        _, stats = m.run(sphere_linear_projection, m.init(jnp.zeros(n), jax.random.key(0)), iters)
        return stats.norm_qd_score[-1], stats.coverage[-1]

    run = jax.jit(jax.vmap(one))
    (qd, cov), secs = timed(run, jnp.asarray([0.01, 0.0]))
    qd, cov = np.asarray(qd), np.asarray(cov)
    return {
        "problem": "QD sphere, linear projection",
        "size": f"n={n}, 25x25 grid",
        "solver": "CMA-MAE (alpha 0.01)",
        "status": "fixed budget",
        "steps": iters,
        "error": "",
        "metric": f"norm QD {qd[0]:.1f}, coverage {100 * cov[0]:.0f}%",
        "time": secs,
        "reference": (
            f"CMA-ES (alpha 0), same {iters * E * B} evaluations: "
            f"norm QD {qd[1]:.1f}, coverage {100 * cov[1]:.0f}%"
        ),
    }


def _neg_ackley(X):  # GenBO maximizes: minus Ackley, 0 at the optimum x = 0
    return (
        20 * jnp.exp(-0.2 * jnp.sqrt(jnp.mean(X**2, 1)))
        + jnp.exp(jnp.mean(jnp.cos(2 * jnp.pi * X), 1))
        - 20
        - jnp.e
    )


def _genbo_row():
    d, B, T = 4, 20, 10
    lo, hi = jnp.full(d, -5.0), jnp.full(d, 10.0)
    prior = UniformBox(lo, hi)
    g = genbo(prior, utility="ei", loss="preference", batch_size=B, rounds=T, n_initial=B)
    model = DiagonalGaussian((lo + hi) / 2, jnp.log((hi - lo) / 4), lo, hi)

    def both(key):
        k0, k1, k2 = jax.random.split(key, 3)
        X0 = prior.sample(k0, B)
        best = g.run(_neg_ackley, g.init(model, X0, _neg_ackley(X0), k1), T)[1][-1]
        rand = jnp.max(_neg_ackley(prior.sample(k2, B * (T + 1))))
        return best, rand

    (best, rand), secs = timed(jax.jit(both), jax.random.key(0))
    return {
        "problem": "Ackley (maximize -f)",
        "size": f"d={d}, batch {B}",
        "solver": "GenBO (preference, EI)",
        "status": "fixed budget",
        "steps": T,
        "error": "",
        "metric": f"regret {-float(best):.2f} ({B * (T + 1)} evaluations)",
        "time": secs,
        "reference": f"random search, same evaluations: regret {-float(rand):.2f}",
    }


def run(out_dir) -> list[dict]:
    return [_cma_es_row(), _cma_mae_row(), _genbo_row()]


if __name__ == "__main__":
    sys.exit(main("blackbox", run))
