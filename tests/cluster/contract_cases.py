"""Contract cases of the cluster family (solver modules: kmeans_newton, nlr)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.cluster import feasible_point, kmeans_newton, lift, nlr, nlr_start, prepare_data
from jaxsolve.testing import SolverCase
from peers.problems.cluster import mixture

N, D, K = 12, 2, 2


def _problem(key, dtype, start):
    seed = int(jax.random.randint(key, (), 0, 2**30))
    x, _ = mixture(seed, n=N, d=D, k=K, gap=12.0)
    data, _ = prepare_data(jnp.asarray(x, dtype))
    return start(key, dtype), data


def _z_reference(data):
    """The cluster matrix of the true partition (the SDP's solution for separated data)."""
    from sklearn.cluster import KMeans

    lab = KMeans(K, n_init=10, random_state=0).fit(np.asarray(data, np.float64)).labels_
    oh = np.eye(K)[lab]
    return (oh / oh.sum(0)) @ oh.T


def _nan(data):
    return data.at[0, 0].set(jnp.nan)


CASES = [
    SolverCase(
        name="cluster.kmeans_newton",
        # its eager step compiles every inner loop on each call (10-34 s)
        slow_checks=("jit_equals_eager",),
        make_solver=lambda **hp: kmeans_newton(**{"mu": 5e-2, "mu_start": 5e-2, **hp}),
        make_problem=lambda key, dt: _problem(
            key, dt, lambda k, d: feasible_point(k, N, K, K + 1, d)
        ),
        reference=_z_reference,
        compare=lambda x: lift(*x) @ lift(*x).T,
        tol=1e-6,
        max_steps=300,
        accuracy=5e-2,  # the barrier (mu = 0.05) biases Z by ~2e-2; a wrong partition is O(1) off
        hyper_variants=({"mu": 5e-2}, {"mu": 4e-2, "sigma0": 2.0}),
        vmap_rtol=1e-6,  # batched eigh/Cholesky round differently; steps must still match
        nan_args=_nan,
        bad_inputs=(
            lambda: kmeans_newton(mu=-1.0),
            lambda: kmeans_newton(max_inner=0),
            lambda: kmeans_newton(grow_max=1.5),
        ),
        float32_tol=1e-3,
        float32_must_succeed=False,
    ),
    SolverCase(
        name="cluster.nlr",
        make_solver=lambda **hp: nlr(**hp),
        make_problem=lambda key, dt: _problem(key, dt, lambda k, d: nlr_start(k, N, K, 2 * K, d)),
        reference=_z_reference,
        compare=lambda u: u @ u.T,
        tol=1e-8,
        max_steps=20000,
        accuracy=1e-5,
        hyper_variants=({"alpha": 0.5}, {"alpha": 0.4, "beta": 8.0}),
        nan_args=_nan,
        bad_inputs=(lambda: nlr(alpha=0.0), lambda: nlr(beta=-1.0)),
        float32_tol=1e-4,
        float32_must_succeed=False,
    ),
]
