"""AAPGA / PGA on the relaxation: certified gap, acceleration, vmap = loop, sparse scale."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sps
from jax.experimental import sparse

import jaxsolve
from jaxsolve import submodular as sm
from tests.submodular._problems import relaxation_reference


def _coverage_graph(n, p, seed):
    rng = np.random.default_rng(seed)
    A = np.triu(rng.uniform(size=(n, n)) < p, 1)
    A = A | A.T
    deg = np.maximum(A.sum(axis=0), 1)
    return np.where(A, 1.0 / deg[None, :], 0.0)  # weighted cascade: u covers v w.p. 1/deg(v)


def test_gap_certificate_bounds_the_relaxation_optimum():
    rng = np.random.default_rng(0)
    M = rng.uniform(0.2, 2.0, (14, 8))
    w = rng.uniform(0.5, 1.5, 14)
    f = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), "log1p")
    costs = rng.uniform(0.5, 2.0, 8)
    for c, A, b in (
        (sm.cardinality(3), np.ones((1, 8)), np.array([3.0])),
        (sm.knapsack(jnp.asarray(costs), 3.0), costs[None, :], np.array([3.0])),
    ):
        ref = relaxation_reference(M, w, "log1p", A, b)
        best = float(f.extension(jnp.asarray(ref)))
        # the iterate's gap; the extrapolated point's bound alone (certify_below 0) and
        # with the iterate's gap near the end (maximize's default)
        for solver in (
            sm.aapga(),
            sm.aapga(bound="extrapolated"),
            sm.aapga(bound="extrapolated", certify_below=1e-6),
        ):
            state = jax.jit(solver.init)(c.start(8, jnp.float64), (f, c))
            step = jax.jit(solver.step)
            for _ in range(10):  # the bound holds at every iterate, converged or not
                state, _ = step(state, (f, c))
                assert float(state.upper) >= best * (1 - 1e-12)
                assert float(state.value) <= best * (1 + 1e-12)
                np.testing.assert_allclose(
                    float(f.extension(state.x)), float(state.value), rtol=1e-13
                )
                gap = (float(state.upper) - float(state.value)) / float(state.value)
                np.testing.assert_allclose(float(state.error), max(gap, 0), atol=1e-15)
            sol = jaxsolve.solve(solver, c.start(8, jnp.float64), (f, c), tol=1e-7)
            assert int(sol.status) == jaxsolve.Status.SUCCESS
            assert float(sol.state.value) >= best / (1 + 1e-7)
            assert float(sol.state.upper) >= best * (1 - 1e-12)
        if isinstance(c, sm.Cardinality):  # exact projections: the same maximum
            exact = jaxsolve.solve(
                sm.aapga(inexact=False), c.start(8, jnp.float64), (f, c), tol=1e-7
            )
            np.testing.assert_allclose(sol.state.value, exact.state.value, rtol=1e-7)


def test_acceleration_needs_fewer_gradients_than_pga():
    f = sm.probabilistic_coverage(jnp.asarray(_coverage_graph(300, 0.03, 1)))
    c = sm.cardinality(15)
    x0 = c.start(300, jnp.float64)
    plain = jaxsolve.solve(sm.pga(shrink=1.0), x0, (f, c), loop="fixed", max_steps=200)
    target = float(plain.info.value[-1])
    fast = jaxsolve.solve(sm.aapga(shrink=1.0), x0, (f, c), loop="fixed", max_steps=200)
    values, grads = np.asarray(fast.info.value), np.asarray(fast.info.num_grads)
    reached = values >= target - 1e-9 * abs(target)
    assert reached.any()
    assert grads[np.argmax(reached)] <= 0.5 * int(plain.state.num_grads)


@pytest.mark.slow  # 64 lanes and 64 single solves (15 s)
def test_vmap_over_64_instances_equals_the_loop():
    rng = np.random.default_rng(5)
    B, m, n = 64, 9, 12
    M = rng.uniform(0, 1, (B, m, n)) * (rng.uniform(size=(B, m, n)) < 0.5)
    w = rng.uniform(0.5, 1.5, (B, m))
    k = rng.integers(2, 6, B).astype(float)  # the budgets differ too

    @jax.jit
    def run(M, w, k, key):
        f = sm.SCM(M, w, jnp.ones(m), sm.coverage)
        return sm.maximize(f, sm.Cardinality(k), key, tol=1e-6, max_steps=400)

    keys = jax.random.split(jax.random.key(1), B)
    batched = jax.vmap(run)(M, w, k, keys)
    steps = set()
    for i in range(B):
        one = run(M[i], w[i], k[i], keys[i])
        assert int(one.num_steps) == int(batched.num_steps[i])
        assert int(one.status) == int(batched.status[i])
        np.testing.assert_allclose(one.x, batched.x[i], rtol=0, atol=1e-6)
        np.testing.assert_array_equal(one.selected, batched.selected[i])
        steps.add(int(one.num_steps))
    assert len(steps) > 1


@pytest.mark.slow
def test_sparse_million_nonzeros_runs():
    n, per_col = 20_000, 50
    rng = np.random.default_rng(7)
    rows = rng.integers(0, n, n * per_col)
    cols = np.repeat(np.arange(n), per_col)
    data = rng.uniform(0.01, 0.3, n * per_col)
    Msp = sps.coo_matrix((data, (rows, cols)), shape=(n, n)).tocsr()  # duplicates summed
    Msp.sum_duplicates()
    coo = Msp.tocoo()
    M = sparse.BCOO(
        (jnp.asarray(coo.data), jnp.asarray(np.stack([coo.row, coo.col], 1))), shape=(n, n)
    )
    assert M.nse >= 990_000
    f = sm.SCM.create(M, None, "coverage")
    res = sm.maximize(f, sm.cardinality(100), jax.random.key(0), tol=1e-4, max_steps=100)
    S = np.asarray(res.selected)
    assert bool(res.feasible) and S.sum() == 100
    ref = np.sum(-np.expm1(-(Msp @ S.astype(float))))
    np.testing.assert_allclose(float(res.value), ref, rtol=1e-10)
    greedy = sm.naive_greedy(f, sm.cardinality(100))
    assert float(res.value) >= 0.98 * float(greedy.value)
    assert float(res.upper_bound) >= float(greedy.value)


def test_extrapolated_bound_stops_with_the_iterate_gap_at_fewer_products():
    """maximize's default (bound from the line search's supergradient, the iterate's gap
    only near the end) stops at the step the iterate's gap stops, returns the same set,
    and computes fewer supergradients (coverage, n = 400, k = 20 and 100)."""
    f = sm.probabilistic_coverage(jnp.asarray(_coverage_graph(400, 0.03, 2)))
    for k in (20, 100):
        c = sm.cardinality(k)
        key = jax.random.key(3)
        ours = sm.maximize(f, c, key, tol=1e-4)
        plain_solver = sm.aapga(shrink=0.7, first_lipschitz="step")
        plain = sm.maximize(f, c, key, tol=1e-4, solver=plain_solver)
        assert int(ours.status) == int(plain.status) == jaxsolve.Status.SUCCESS
        assert int(ours.num_steps) == int(plain.num_steps)
        assert int(ours.num_grads) < int(plain.num_grads)
        np.testing.assert_array_equal(ours.selected, plain.selected)
        assert float(ours.upper_bound) >= float(ours.value)
        assert float(ours.relaxation) >= float(ours.upper_bound) / (1 + 1e-4)


def test_first_lipschitz_from_the_first_step_saves_steps():
    """first_lipschitz="step" (maximize's default): the secant along the first projected
    step starts L several times below the steepest-direction estimate, so the solve to
    a 1e-3 gap takes fewer steps, certified all the same (coverage, n = 400)."""
    f = sm.probabilistic_coverage(jnp.asarray(_coverage_graph(400, 0.03, 2)))
    c = sm.cardinality(40)
    x0 = c.start(f.n, jnp.float64)
    out = {}
    for kind in ("gradient", "step"):
        solver = sm.aapga(
            shrink=0.7, bound="extrapolated", certify_below=1e-2, first_lipschitz=kind
        )
        first = solver.init(x0, (f, c))
        sol = jaxsolve.solve(solver, x0, (f, c), tol=1e-3, max_steps=200)
        assert int(sol.status) == jaxsolve.Status.SUCCESS
        assert float(sol.state.upper) <= float(sol.state.value) * (1 + 1e-3)
        out[kind] = (float(first.lipschitz), int(sol.num_steps))
    assert out["step"][0] < 0.5 * out["gradient"][0], out
    assert out["step"][1] < out["gradient"][1], out
    with pytest.raises(ValueError, match="first_lipschitz must be"):
        sm.aapga(first_lipschitz="secant")
