"""FedAvg, RG-SVRG, SABER-full (PAGE): exact ledgers, reductions to GD, snapshots, vmap, bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D

N, DIM, M = 10, 20, 3
LOSS = D.LogSumQuadratic()
SYNC = math.ceil(N / M)


@pytest.fixture(scope="module")
def problem():
    data = D.log_sum_quadratic(jax.random.key(0), N, DIM, 5)
    params = D.practical_parameters(N, M, **D.log_sum_constants(data))
    return data, params


def _solve(solver, data, steps, x0=None):
    x0 = jnp.zeros(DIM) if x0 is None else x0
    return jaxsolve.solve(solver, x0, data, tol=0.0, max_steps=steps)


def _replay_rg_svrg(seed, p, q, steps, max_local):
    """(sum of K_t, number of snapshot steps) from the key schedule of `RGSVRG.step`."""
    key = jax.random.key(seed)
    local = syncs = 0
    for _ in range(steps):
        key, k_local, k_est = jax.random.split(key, 3)
        local += int(jnp.minimum(jax.random.geometric(k_local, p, dtype=jnp.int32), max_local))
        syncs += bool(jax.random.bernoulli(jax.random.split(k_est)[0], q))
    return local, syncs


def _replay_saber(seed, q, steps):
    key = jax.random.key(seed)
    syncs = 0
    for _ in range(steps):
        key, k_est = jax.random.split(key)
        syncs += bool(jax.random.bernoulli(jax.random.split(k_est)[0], q))
    return syncs


def _assert_same_ledger(a, b):
    for u, v in zip(a, b, strict=True):
        assert int(u) == int(v)


def test_rg_svrg_ledger_replay_and_formula(problem):
    data, params = problem
    q, steps = 0.3, 15
    solver = D.rg_svrg(LOSS, M, q=q, seed=4, **params)
    runs = [_solve(solver, data, steps) for _ in range(2)]
    led = runs[0].state.ledger
    _assert_same_ledger(led, runs[1].state.ledger)
    np.testing.assert_array_equal(runs[0].x, runs[1].x)
    local, syncs = _replay_rg_svrg(4, params["p"], q, steps, solver.max_local)
    assert 0 < syncs < steps  # both branches ran
    assert int(led.a_rounds) == SYNC * (1 + syncs)
    assert int(led.r_rounds) == steps - syncs
    assert int(led.d_rounds) == steps
    assert int(led.local_grads) == N * (1 + syncs) + 2 * M * (steps - syncs) + local
    for c_a, c_r in ((1.0, 1.0), (10.0, 1.0)):
        want = c_a * SYNC * (1 + syncs) + c_r * (steps - syncs) + steps
        assert float(D.ledger_cost(led, c_a, c_r)) == pytest.approx(want)


def test_saber_full_and_fedavg_ledgers(problem):
    data, _ = problem
    q, steps = 0.4, 12
    solver = D.saber_full(LOSS, M, stepsize=1e-3, q=q, seed=9)
    runs = [_solve(solver, data, steps) for _ in range(2)]
    led = runs[0].state.ledger
    _assert_same_ledger(led, runs[1].state.ledger)
    syncs = _replay_saber(9, q, steps)
    assert 0 < syncs < steps
    assert int(led.a_rounds) == SYNC * (1 + syncs)
    assert int(led.r_rounds) == steps - syncs
    assert int(led.d_rounds) == 0
    assert int(led.local_grads) == N * (1 + syncs) + 2 * M * (steps - syncs)

    fa = D.fedavg(LOSS, M, stepsize=1e-3, local_steps=4, seed=1)
    runs = [_solve(fa, data, 7) for _ in range(2)]
    led = runs[0].state.ledger
    _assert_same_ledger(led, runs[1].state.ledger)
    np.testing.assert_array_equal(runs[0].x, runs[1].x)
    assert (int(led.a_rounds), int(led.r_rounds), int(led.d_rounds)) == (0, 7, 0)
    assert int(led.local_grads) == 7 * M * 4
    assert float(D.ledger_cost(led, 10.0, 2.0)) == pytest.approx(14.0)


def test_saber_full_with_q_one_is_gradient_descent(problem):
    data, _ = problem
    x0 = jnp.linspace(-1.0, 2.0, DIM)
    saber = _solve(D.saber_full(LOSS, M, stepsize=0.004, q=1.0), data, 6, x0)
    gd = _solve(D.fed_gd(LOSS, M, stepsize=0.004), data, 6, x0)
    np.testing.assert_allclose(saber.x, gd.x, rtol=1e-13, atol=1e-13)
    _assert_same_ledger(saber.state.ledger, gd.state.ledger)
    # written out: x <- x - eta grad f(x)
    x = x0
    for _ in range(6):
        x = x - 0.004 * D.full_gradient(LOSS, x, data)
    np.testing.assert_allclose(saber.x, x, rtol=1e-12, atol=1e-12)


def test_fedavg_with_all_clients_and_one_local_step_is_gradient_descent(problem):
    data, _ = problem
    x0 = jnp.linspace(-1.0, 2.0, DIM)
    fa = _solve(D.fedavg(LOSS, N, stepsize=0.004, local_steps=1, seed=3), data, 6, x0)
    gd = _solve(D.fed_gd(LOSS, N, stepsize=0.004), data, 6, x0)
    np.testing.assert_allclose(fa.x, gd.x, rtol=1e-12, atol=1e-12)
    # and with K local steps and one client, K gradient steps on that client's loss
    one = jax.tree.map(lambda v: v[:1], data)
    fa1 = _solve(D.fedavg(LOSS, 1, stepsize=0.004, local_steps=3), one, 1, x0)
    y = x0
    for _ in range(3):
        y = y - 0.004 * jax.grad(LOSS)(y, jax.tree.map(lambda v: v[0], data))
    np.testing.assert_allclose(fa1.x, y, rtol=1e-13, atol=1e-13)


def test_rg_svrg_snapshot_gives_the_full_gradient(problem):
    data, params = problem
    solver = D.rg_svrg(LOSS, M, q=0.5, seed=0, **params)
    state = solver.init(jnp.zeros(DIM), data)
    np.testing.assert_allclose(state.g, D.full_gradient(LOSS, state.x, data), rtol=1e-13)
    step = jax.jit(solver.step)
    kinds = set()
    for _ in range(8):
        before = int(state.ledger.a_rounds)
        state, _ = step(state, data)
        full = D.full_gradient(LOSS, state.x, data)
        if int(state.ledger.a_rounds) > before:  # a snapshot at x^{t+1}
            kinds.add("sync")
            np.testing.assert_allclose(state.g, full, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(state.snapshot_mean, full, rtol=1e-12, atol=1e-12)
            grads = jax.vmap(jax.grad(LOSS), in_axes=(None, 0))(state.x, data)
            np.testing.assert_allclose(state.snapshot, grads, rtol=1e-13, atol=1e-13)
        else:
            kinds.add("recursion")
            assert float(jnp.linalg.norm(state.g - full)) > 0
    assert kinds == {"sync", "recursion"}


def test_rg_svrg_beta_one_step_written_out(problem):
    """beta = 1, no snapshot: g^{t+1} = G^t (SVRG at x^t) + mean_S(grad f_i(x^{t+1}) - grad f_i(x^t))."""
    data, params = problem
    solver = D.rg_svrg(LOSS, M, seed=5, **{**params, "beta": 1.0}, q=1e-9)
    state = solver.init(jnp.zeros(DIM), data)
    state, _ = solver.step(state, data)  # moves x away from the snapshot at x0
    s1, _ = solver.step(state, data)
    key, _, k_est = jax.random.split(jax.random.wrap_key_data(state.key), 3)
    idx = jax.random.permutation(jax.random.split(k_est)[1], N)[:M]
    grads = jax.vmap(jax.grad(LOSS), in_axes=(None, 0))
    sub = jax.tree.map(lambda v: v[idx], data)
    old, new = grads(state.x, sub), grads(s1.x, sub)
    G = state.snapshot_mean + jnp.mean(old - state.snapshot[idx], axis=0)
    np.testing.assert_allclose(s1.g, G + jnp.mean(new - old, axis=0), rtol=1e-12, atol=1e-12)


def test_svrg_estimate_is_unbiased():
    n, d, m, reps = 7, 3, 2, 10_000
    k1, k2 = jax.random.split(jax.random.key(11))
    snap = jax.random.normal(k1, (n, d))
    fresh = jax.random.normal(k2, (n, d)) * 2.0 + 1.0

    def one(key):
        idx = jax.random.permutation(key, n)[:m]
        return D.svrg_estimate(snap, snap.mean(0), fresh[idx], idx)

    G = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(12), reps))
    se = np.asarray(G.std(0)) / math.sqrt(reps)
    gap = np.abs(np.asarray(G.mean(0) - fresh.mean(0)))
    assert np.all(gap < 3 * se), (gap, se)


@pytest.mark.parametrize("method", ["rg_svrg", "saber_full", "fedavg"])
def test_vmap_over_seeds_equals_loop(problem, method):
    data, params = problem
    x0 = jnp.zeros(DIM)
    make = {
        "rg_svrg": lambda s: D.rg_svrg(LOSS, M, q=0.3, seed=s, **params),
        "saber_full": lambda s: D.saber_full(LOSS, M, stepsize=0.005, q=0.3, seed=s),
        "fedavg": lambda s: D.fedavg(LOSS, M, stepsize=1e-3, local_steps=2, seed=s),
    }[method]

    def run(seed):
        sol = jaxsolve.solve(make(seed), x0, data, max_steps=6)
        return sol.x, sol.state.ledger

    xs, leds = jax.vmap(run)(jnp.arange(3))
    for s in range(3):
        x, led = run(jnp.int32(s))
        np.testing.assert_allclose(xs[s], x, rtol=1e-12, atol=1e-12)
        for a, b in zip(leds, led, strict=True):
            assert int(a[s]) == int(b)
    assert len({float(v) for v in xs[:, 0]}) > 1


def test_new_methods_reach_tolerance(problem):
    data, params = problem
    for solver in (
        D.rg_svrg(LOSS, M, **params),
        D.saber_full(LOSS, M, stepsize=0.01),
    ):
        sol = jaxsolve.solve(solver, jnp.zeros(DIM), data, tol=1e-2, max_steps=3000)
        assert int(sol.status) == int(jaxsolve.Status.SUCCESS), solver
        g = D.full_gradient(LOSS, sol.x, data)
        assert float(jnp.linalg.norm(g)) <= 1e-2


def test_bad_input(problem):
    data, params = problem
    x0 = jnp.zeros(DIM)
    for make in (
        lambda m: D.fedavg(LOSS, m, stepsize=0.1),
        lambda m: D.rg_svrg(LOSS, m, **params),
        lambda m: D.saber_full(LOSS, m, stepsize=0.1),
    ):
        with pytest.raises(ValueError, match="m .*at most the number of clients"):
            jaxsolve.solve(make(N + 1), x0, data, max_steps=2)
        with pytest.raises(ValueError, match="m "):
            make(0)
    with pytest.raises(ValueError, match="stepsize"):
        D.fedavg(LOSS, M, stepsize=0.0)
    with pytest.raises(ValueError, match="stepsize"):
        D.saber_full(LOSS, M, stepsize=-1.0)
    with pytest.raises(ValueError, match="stepsize"):
        D.saber_full(LOSS, M, stepsize=float("nan"))
    with pytest.raises(ValueError, match="local_steps"):
        D.fedavg(LOSS, M, stepsize=0.1, local_steps=0)
    with pytest.raises(ValueError, match="q "):
        D.saber_full(LOSS, M, stepsize=0.1, q=0.0)
    with pytest.raises(ValueError, match="q "):
        D.rg_svrg(LOSS, M, q=1.5, **params)
    with pytest.raises(ValueError, match="lam"):
        D.rg_svrg(LOSS, M, **{**params, "lam": 0.0})
    with pytest.raises(ValueError, match="beta"):
        D.rg_svrg(LOSS, M, **{**params, "beta": -0.1})
    with pytest.raises(TypeError, match="loss"):
        D.fedavg(None, M, stepsize=0.1)
    A, B = data
    bad = (A.at[4, 0, 0].set(jnp.nan), B)
    for solver in (
        D.fedavg(LOSS, M, stepsize=0.01),
        D.rg_svrg(LOSS, M, **params),
        D.saber_full(LOSS, M, stepsize=0.01),
    ):
        sol = jaxsolve.solve(solver, x0, bad, max_steps=5)
        assert int(sol.status) == int(jaxsolve.Status.NONFINITE), solver


def test_logistic_problem_and_constants():
    data = D.nonconvex_logistic(10, seed=0)
    A, b = data
    assert A.shape == (10, 56, 30) and b.shape == (10, 56)
    np.testing.assert_allclose(np.asarray(A).reshape(-1, 30).mean(0), 0.0, atol=0.1)
    assert set(np.unique(np.asarray(b))) == {-1.0, 1.0}
    loss = D.NonconvexLogistic(alpha=0.1)
    x = jnp.linspace(-0.5, 0.5, 30)
    a0, b0 = A[0], b[0]
    want = np.mean(np.log1p(np.exp(-np.asarray(b0) * (np.asarray(a0) @ np.asarray(x)))))
    want += 0.1 * np.sum(np.asarray(x) ** 2 / (1 + np.asarray(x) ** 2))
    assert float(loss(x, (a0, b0))) == pytest.approx(want, rel=1e-12)
    # the constants against Hessians by autodiff at x = 0 (the logistic part; the
    # regularizer is common to all clients)
    c = D.logistic_constants(data, alpha=0.1)
    fit = D.NonconvexLogistic(alpha=0.0)
    H = jax.vmap(jax.hessian(fit), in_axes=(None, 0))(jnp.zeros(30), data)
    Hbar = H.mean(0)
    assert c["delta1"] == pytest.approx(float(jnp.linalg.norm(Hbar - H[0], 2)), rel=1e-10)
    Dm = H - Hbar
    top = float(jnp.linalg.eigvalsh(jnp.einsum("njk,nkl->jl", Dm, Dm) / 10)[-1])
    assert c["delta"] == pytest.approx(math.sqrt(top), rel=1e-10)
    lmax = max(float(jnp.linalg.norm(h, 2)) for h in H)
    assert c["l_max"] == pytest.approx(lmax + 0.2, rel=1e-10)


@pytest.mark.parametrize("method", ["rg_svrg", "saber_full", "fedavg"])
def test_float32_runs_and_tracks_float64(problem, method):
    data, params = problem
    """float32 in, float32 state out. The random coins (the sync coin, K_t) are drawn in
    the iterate's precision, so only runs without them are compared with float64: q = 1
    (every step a sync) for SABER-full, FedAvg as is; RG-SVRG's are checked for progress."""
    make = {
        "rg_svrg": lambda: D.rg_svrg(LOSS, M, q=0.3, seed=2, **params),
        "saber_full": lambda: D.saber_full(LOSS, M, stepsize=0.005, q=1.0, seed=2),
        "fedavg": lambda: D.fedavg(LOSS, M, stepsize=1e-3, local_steps=2, seed=2),
    }[method]
    data32 = jax.tree.map(lambda v: v.astype(jnp.float32), data)
    s32 = _solve(make(), data32, 5, jnp.zeros(DIM, jnp.float32))
    assert s32.x.dtype == jnp.float32
    for leaf in jax.tree.leaves(s32.state):
        assert leaf.dtype in (jnp.float32, jnp.int32, jnp.uint32), leaf.dtype
    if method == "rg_svrg":
        g0 = float(jnp.linalg.norm(D.full_gradient(LOSS, jnp.zeros(DIM), data)))
        assert np.isfinite(float(s32.error)) and float(s32.error) < 0.5 * g0
        return
    s64 = _solve(make(), data, 5)
    _assert_same_ledger(s32.state.ledger, s64.state.ledger)
    np.testing.assert_allclose(s32.x, s64.x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: D.rg_saga(LOSS, M, lam=10.0, beta=0.3, local_l=200.0, p=0.05, **kw),
        lambda **kw: D.rg_svrg(LOSS, M, lam=10.0, beta=0.3, local_l=200.0, p=0.05, **kw),
        lambda **kw: D.fedavg(LOSS, M, stepsize=0.005, **kw),
        lambda **kw: D.scaffold(LOSS, M, local_lr=0.002, **kw),
        lambda **kw: D.saber_full(LOSS, M, stepsize=0.005, **kw),
    ],
    ids=["rg_saga", "rg_svrg", "fedavg", "scaffold", "saber_full"],
)
def test_misfit_seed_start_and_data_are_named(problem, make):
    """Each of these failed at the first init or step with a JAX error from deep inside
    (jax.random.key of a key or a float; broadcasting in the loss; grad of a complex or
    vector output); now each names the argument before anything runs."""
    data, _ = problem
    x0 = jnp.zeros(DIM)
    with pytest.raises(TypeError, match="seed must be an int"):
        make(seed=jax.random.key(0))
    with pytest.raises(TypeError, match="seed must be an int"):
        make(seed=1.5)
    solver = make()
    with pytest.raises(ValueError, match=r"loss\(x0, data_i\) fails for x0 of shape \(21,\)"):
        jaxsolve.solve(solver, jnp.zeros(DIM + 1), data, max_steps=2)
    with pytest.raises(TypeError, match=r"data\[0\] must be real"):
        jaxsolve.solve(solver, x0, (data[0].astype(jnp.complex128), data[1]), max_steps=2)

    def vector(x, d):
        return x * jnp.sum(d[0])

    bad = D.fedavg(vector, M, stepsize=0.1)
    with pytest.raises(ValueError, match=r"must return a real scalar, got shape \(20,\)"):
        jaxsolve.solve(bad, x0, data, max_steps=2)


def test_generators_name_a_bad_key_or_count():
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        D.log_sum_quadratic(0, 3, 4)
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        D.sparse_binary(0, 3, 5)
    with pytest.raises(ValueError, match="n_agents must be an int >= 1"):
        D.sparse_binary(jax.random.key(0), 0, 5)
    with pytest.raises(ValueError, match="n_agents must be an int >= 1"):
        D.breast_cancer(0)  # was ZeroDivisionError
