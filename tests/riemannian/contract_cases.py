"""Contract cases: every Riemannian solver on a tiny Rayleigh quotient (sphere, n=6)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.manifolds import Sphere
from jaxsolve.riemannian import conjugate_gradient, cubic_newton, gradient_descent, trust_region
from jaxsolve.testing import SolverCase

N = 6
SPHERE = Sphere(N)


def _cost(x, a):
    # x^T A x written with elementwise products and one reduction (no matvec): batched and
    # single evaluations then round identically, and GD's first-trial rule (a ratio of cost
    # differences) does not amplify last-bit matmul differences between vmap and loop.
    return jnp.sum(a * (x[:, None] * x[None, :]))


def _problem(key, dtype, lam=(-1.0, -0.4, 0.0, 0.3, 0.7, 1.0)):
    k1, k2 = jax.random.split(key)
    q, _ = jnp.linalg.qr(jax.random.normal(k1, (N, N), jnp.float64))
    lam = jnp.array(lam)
    a = ((q * lam) @ q.T).astype(dtype)
    x0 = SPHERE.random_point(k2, dtype)
    return x0, a


def _reference(a):
    _, v = np.linalg.eigh(np.asarray(a, np.float64))
    return np.outer(v[:, 0], v[:, 0])


def _compare(x):  # sign-invariant: the projector onto the eigenvector
    return jnp.outer(x, x)


def _bad(make):
    def bad_manifold():
        make(_cost, "sphere")

    def bad_cost():
        make(None, SPHERE)

    def bad_shape():
        import jaxsolve

        jaxsolve.solve(make(_cost, SPHERE), jnp.ones(N + 1) / 3.0, jnp.eye(N + 1))

    return (bad_manifold, bad_cost, bad_shape)


def _case(name, make, variants, tol=1e-9, accuracy=1e-7, **kw):
    # GD/CG use tol 1e-6 / 1e-7: nearer the rounding error of f, Armijo decisions of
    # batched and unbatched runs can flip on last-bit differences of batched matmuls.
    return SolverCase(
        name=f"riemannian.{name}",
        make_solver=lambda **h: make(_cost, SPHERE, **h),
        make_problem=_problem,
        reference=_reference,
        compare=_compare,
        tol=tol,
        max_steps=500,
        accuracy=accuracy,
        hyper_variants=variants,
        nan_args=lambda a: a.at[0, 0].set(jnp.nan),
        bad_inputs=_bad(make),
        **kw,
    )


CASES = [
    # GD's default first trial (pymanopt's "optimism" rule) is a ratio of successive cost
    # decreases: its last digits follow the rounding of f, which differs in the last bit
    # between batched and single evaluations. optimism=0 (start each search at
    # initial_step/||g||) is lane-exact; the default rule is covered by the family tests.
    _case(
        "gradient_descent",
        lambda cost, m, **h: gradient_descent(cost, m, **({"optimism": 0.0} | h)),
        ({"sufficient_decrease": 1e-4}, {"sufficient_decrease": 1e-3}),
        tol=1e-7,
        accuracy=1e-6,
    ),
    _case(
        "conjugate_gradient",
        conjugate_gradient,
        ({"sufficient_decrease": 0.5}, {"sufficient_decrease": 0.3}),
        tol=1e-7,
        accuracy=1e-6,
        # CG's conjugacy coefficient amplifies last-bit differences of batched matmuls:
        # lanes agree with single solves to ~1e-9 (same steps and status), not 1e-12.
        vmap_rtol=1e-7,
    ),
    _case("trust_region", trust_region, ({"kappa": 0.1}, {"kappa": 0.2})),
    _case("cubic_newton", cubic_newton, ({"sigma0": 30.0}, {"sigma0": 10.0})),
]
