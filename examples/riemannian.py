"""``make demo`` rows for the Riemannian solvers: Rayleigh quotient and Brockett cost."""

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
from jaxsolve.manifolds import Sphere, Stiefel
from jaxsolve.riemannian import conjugate_gradient, cubic_newton, gradient_descent, trust_region
from peers.timing import timed


def _rayleigh(x, a):
    return x @ (a @ x)


def _brockett(x, args):
    a, nvec = args
    return jnp.sum((x.T @ (a @ x)) * jnp.diag(nvec))


def run(out_dir) -> list[dict]:
    rng = np.random.default_rng(0)
    n = 300
    a = rng.standard_normal((n, n))
    a = (a + a.T) / np.sqrt(2 * n)
    lam = np.linalg.eigvalsh(a)
    rows = []
    x0 = Sphere(n).random_point(jax.random.key(0))
    for name, make in (("trust_region", trust_region), ("cubic_newton", cubic_newton)):
        solver = make(_rayleigh, Sphere(n))
        sol, t = timed(
            lambda s=solver: jaxsolve.solve(
                s, x0, jnp.asarray(a), tol=1e-8, history=True, max_steps=100
            )
        )
        rel = abs(float(sol.state.f) - lam[0]) / abs(lam[0])
        rows.append(
            row_from_solution("rayleigh sphere", f"n={n}", name, sol, t, f"eigh rel {rel:.1e}")
        )
    p, m = 5, 60
    q, _ = np.linalg.qr(rng.standard_normal((m, m)))
    spec = np.concatenate([-1.0 + 0.2 * np.arange(p), np.linspace(0, 1, m - p)])
    b = (q * spec) @ q.T
    ref = float(np.sum(np.arange(p, 0, -1) * spec[:p]))
    args = (jnp.asarray(b), jnp.arange(p, 0, -1.0))
    x0 = Stiefel(m, p).random_point(jax.random.key(1))
    for name, make in (
        ("gradient_descent", gradient_descent),
        ("conjugate_gradient", conjugate_gradient),
    ):
        solver = make(_brockett, Stiefel(m, p))
        sol, t = timed(
            lambda s=solver: jaxsolve.solve(s, x0, args, tol=1e-8, history=True, max_steps=3000)
        )
        rel = abs(float(sol.state.f) - ref) / abs(ref)
        rows.append(
            row_from_solution("brockett stiefel", f"{m}x{p}", name, sol, t, f"eigh rel {rel:.1e}")
        )
    return rows


if __name__ == "__main__":
    sys.exit(main("riemannian", run))
