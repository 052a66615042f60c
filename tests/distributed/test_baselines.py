"""The baselines: equal to textbook per-agent loops, exact where they should be, DGD's
plateau on heterogeneous data, ledgers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D
from tests.distributed import _reference as ref

LAM = 0.3


@pytest.fixture(scope="module")
def small():
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    n, m, d = 7, 5, 4
    A = jax.random.normal(k1, (n, m, d))
    b = jax.random.normal(k2, (n, m)) + 2.0 * jnp.arange(n)[:, None] / n  # heterogeneous
    W = D.metropolis_hastings(D.erdos_renyi(k3, n, 0.5))
    x0 = jax.random.normal(jax.random.key(9), (n, d))
    return A, b, W, x0


def _run(solver, x0, problem, steps):
    step = jax.jit(solver.step)
    state = jax.jit(solver.init)(x0, problem)
    out = []
    for _ in range(steps):
        state, _ = step(state, problem)
        out.append(np.asarray(state.x))
    return state, out


CASES = {
    "pg_extra": (D.pg_extra, "stepsize", ref.loop_pg_extra, 0.05),
    "nids": (D.nids, "stepsize", ref.loop_nids, 0.05),
    "dgd": (D.dgd, "stepsize", ref.loop_dgd, 0.05),
    "decentralized_admm": (D.decentralized_admm, "penalty", ref.loop_dadmm, 0.7),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_textbook_per_agent_loop(small, name):
    factory, hp, loop, value = CASES[name]
    A, b, W, x0 = small
    problem = D.make_problem((A, b), W, LAM)
    state, ours = _run(factory(D.LeastSquares(), D.L1(), **{hp: value}), x0, problem, 30)
    theirs = loop(A, b, W, LAM, x0, value, 30)
    for t, (x, x_ref) in enumerate(zip(ours, theirs, strict=True)):
        assert np.max(np.abs(x - x_ref)) <= 1e-12, (name, t, np.max(np.abs(x - x_ref)))
    assert np.max(np.abs(theirs[-1] - np.asarray(x0))) > 1e-2
    init_rounds = 0 if name == "dgd" else 1
    d = x0.shape[1]
    assert [int(v) for v in state.ledger] == [
        30 + init_rounds,
        30 + init_rounds,
        (30 + init_rounds) * d,
    ]


@pytest.fixture(scope="module")
def cancer():
    A, b = D.breast_cancer(30)
    W = D.metropolis_hastings(D.erdos_renyi(jax.random.key(0), 30, 0.5))
    return A, b, W


@pytest.mark.parametrize("name", ["pg_extra", "nids", "decentralized_admm"])
def test_exact_methods_reach_the_centralized_lasso(cancer, name):
    A, b, W = cancer
    lam = 3.0
    problem = D.make_problem((A, b), W, lam)
    L = np.asarray(jax.vmap(D.LeastSquares().lipschitz)((A, b)))
    hp = {"pg_extra": {"stepsize": 1.0 / L.max()}, "nids": {"stepsize": 1.9 / L.max()}}
    hp["decentralized_admm"] = {"penalty": 0.03 * L.mean()}
    factory = {"pg_extra": D.pg_extra, "nids": D.nids, "decentralized_admm": D.decentralized_admm}
    solver = factory[name](D.LeastSquares(), D.L1(), **hp[name])
    sol = jaxsolve.solve(solver, jnp.zeros((30, 30)), problem, tol=1e-11, max_steps=40000)
    assert int(sol.status) == jaxsolve.Status.SUCCESS, (name, float(sol.error))
    assert ref.consensus_distance(sol.x, ref.lasso(A, b, lam)) <= 1e-8


def test_extra_is_exact_on_logistic_and_dgd_plateaus(cancer):
    A, b, W = cancer
    lam = 3.0
    problem = D.make_problem((A, b), W, lam)
    x_star = ref.logistic_l2(A, b, lam)
    x0 = jnp.zeros((30, 30))
    sol = jaxsolve.solve(
        D.pg_extra(D.Logistic(), D.L2Squared()), x0, problem, tol=1e-11, max_steps=20000
    )
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    assert ref.consensus_distance(sol.x, x_star) <= 1e-8
    # DGD with the same constant step: a plateau far from x*, not a slow approach to it
    L = np.asarray(jax.vmap(D.Logistic().lipschitz)((A, b)))
    dgd = D.dgd(D.Logistic(), D.L2Squared(), stepsize=1.0 / L.max())
    advance = jax.jit(lambda s, k: jax.lax.fori_loop(0, k, lambda _, s: dgd.step(s, problem)[0], s))
    s2000 = advance(dgd.init(x0, problem), 2000)
    s4000 = advance(s2000, 2000)
    far = [ref.consensus_distance(s.x, x_star) for s in (s2000, s4000)]
    assert far[1] >= 1e-3 and abs(far[1] - far[0]) <= 1e-3 * far[0], far


def test_bad_steps_raise():
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="stepsize"):
            D.pg_extra(D.LeastSquares(), stepsize=bad)
        with pytest.raises(ValueError, match="stepsize"):
            D.nids(D.LeastSquares(), stepsize=bad)
        with pytest.raises(ValueError, match="stepsize"):
            D.dgd(D.LeastSquares(), stepsize=bad)
        with pytest.raises(ValueError, match="penalty"):
            D.decentralized_admm(D.LeastSquares(), penalty=bad)
    with pytest.raises(TypeError, match="reg"):
        D.nids(D.LeastSquares(), "l1")
