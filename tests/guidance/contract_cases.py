"""Contract cases of the guidance family (solver module: latent_optimizer).

The case is an identity feature map with the l2 energy and a pivot term, whose solution
is the closed-form weighted midpoint (a r + lam z_pivot) / (a + lam), a = 2 p / n.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.guidance import latent_optimizer
from jaxsolve.testing import SolverCase

N, C = 6, 3
LAM, P = 0.5, 1.5


def _identity(z):
    return z


def _make(**hp):
    return latent_optimizer(_identity, **{"lam": LAM, "p": P, "stepsize": 0.5, **hp})


def _problem(key, dtype):
    k1, k2 = jax.random.split(key)
    scale = 1.0 + 4.0 * jax.random.uniform(k1, (), dtype)  # lanes differ in step counts
    ref = scale * jax.random.normal(k1, (N, C), dtype)
    pivot = jax.random.normal(k2, (N, C), dtype)
    return jnp.zeros((N, C), dtype), (ref, pivot)


def _midpoint(args):
    ref, pivot = (np.asarray(a, np.float64) for a in args)
    a = 2 * P / N
    return (a * ref + LAM * pivot) / (a + LAM)


def _gradient(args):
    ref, pivot = args
    w = jnp.linspace(-1.0, 1.0, N * C).reshape(N, C)
    opt = _make()

    def loss(adjoint):
        def f(piv):
            sol = jaxsolve.solve(
                opt, jnp.zeros_like(ref), (ref, piv), tol=1e-12, max_steps=500, adjoint=adjoint
            )
            return jnp.sum(w * sol.x)

        return f

    return pivot, loss(jaxsolve.Implicit()), loss(jaxsolve.Unrolled())


CASES = [
    SolverCase(
        name="guidance.latent_optimizer",
        make_solver=_make,
        make_problem=_problem,
        reference=_midpoint,
        tol=1e-10,
        max_steps=500,
        accuracy=1e-9,
        hyper_variants=({"stepsize": 0.5}, {"stepsize": 0.4, "lam": 0.4}),
        gradient=_gradient,
        nan_args=lambda args: (args[0].at[0, 0].set(jnp.nan), args[1]),
        bad_inputs=(
            lambda: latent_optimizer(_identity, stepsize=-1.0),
            lambda: latent_optimizer(_identity, lam=-1.0),
            lambda: latent_optimizer(_identity, kind="huber"),
            lambda: latent_optimizer(None),
        ),
        float32_tol=1e-5,
    ),
]
