"""Decentralized solvers on hostile input: errors that name the argument, honest statuses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status
from jaxsolve import distributed as D

N_AG, M, DIM = 6, 5, 4


def _problem(scale=1.0):
    rng = np.random.default_rng(0)
    A = jnp.asarray(rng.normal(size=(N_AG, M, DIM)))
    b = jnp.asarray(rng.normal(size=(N_AG, M)))
    A, b = A.at[0].multiply(scale), b.at[0].multiply(scale)
    return D.make_problem((A, b), D.metropolis_hastings(D.ring(N_AG)), 0.1)


@pytest.mark.parametrize(
    "solver",
    [
        D.ds_admm(D.LeastSquares(), D.L1()),
        D.dgd(D.LeastSquares(), D.L1()),
        D.extra(D.LeastSquares()),
        D.nids(D.LeastSquares(), D.L1()),
        D.decentralized_admm(D.LeastSquares(), D.L1()),
    ],
    ids=["ds_admm", "dgd", "extra", "nids", "decentralized_admm"],
)
@pytest.mark.parametrize(
    "x0, match",
    [
        (jnp.zeros((N_AG, DIM + 1)), r"x0's rows \(length 5\) do not fit"),
        (jnp.zeros((N_AG - 1, DIM)), r"x0 must have shape \(6, d\)"),
        (jnp.zeros(DIM), r"x0 must have shape \(6, d\)"),
    ],
)
def test_a_misshapen_start_is_named(solver, x0, match):
    with pytest.raises(ValueError, match=match):
        jaxsolve.solve(solver, x0, _problem())


def test_bad_mixing_matrices_are_named():
    A = jnp.ones((N_AG, M, DIM))
    b = jnp.ones((N_AG, M))
    W = D.metropolis_hastings(D.ring(N_AG))
    for bad, match in [
        (np.where(np.eye(N_AG) > 0, np.nan, W), "W"),
        (W[:5, :5], "W must be doubly stochastic"),
        (np.eye(N_AG), "disconnected"),
    ]:
        with pytest.raises(ValueError, match=match):
            D.make_problem((A, b), bad, 0.1)


def test_badly_scaled_agent_converges_to_the_certified_point():
    """One agent's rows scaled by 1e6: SUCCESS must still mean consensus on the
    centralized prox-gradient fixed point (the error measure, recomputed here)."""
    with jax.enable_x64(True):
        problem = _problem(1e6)
        solver = D.ds_admm(D.LeastSquares(), D.L1())
        sol = jaxsolve.solve(solver, jnp.zeros((N_AG, DIM)), problem, max_steps=5000)
        assert int(sol.status) == Status.SUCCESS
        residual = solver.optimality(sol.x, problem)
        assert float(jnp.max(jnp.abs(residual))) < 1e-6
        assert float(jnp.max(jnp.abs(sol.x - sol.x[0]))) < 1e-6


@pytest.mark.parametrize(
    "reg, match",
    [
        (-0.1, "reg .* must be finite and non-negative"),
        (jnp.array([0.1, -0.1]), "reg .* must be finite and non-negative"),
        (float("nan"), "reg contains NaN"),
        (float("inf"), "reg .* must be finite"),
        ((1.0, -1.0), r"reg = \(lo, hi\) of a Box must have lo <= hi"),
    ],
    ids=["negative", "negative entry", "nan", "inf", "box lo > hi"],
)
def test_bad_regularizer_weights_are_named(reg, match):
    """A negative L1 weight ran every solver to MAX_STEPS (-lam ||x||_1 is unbounded)."""
    A, b = jnp.ones((N_AG, M, DIM)), jnp.ones((N_AG, M))
    with pytest.raises(ValueError, match=match):
        D.make_problem((A, b), D.metropolis_hastings(D.ring(N_AG)), reg)


def test_one_agent_is_plain_lasso():
    """W = [[1]] (one agent) is a valid mixing matrix: check_mixing raised an IndexError
    (it read the second eigenvalue) and DS-ADMM's default beta divided by a spectral gap
    of 0 (NaN after one step). One agent must solve the centralized problem."""
    rng = np.random.default_rng(0)
    A, b = rng.normal(size=(1, M, DIM)), rng.normal(size=(1, M))
    problem = D.make_problem((jnp.asarray(A), jnp.asarray(b)), np.ones((1, 1)), 0.1)
    x = np.zeros(DIM)  # ISTA on (1/2m)||Ax - b||^2 + 0.1 ||x||_1
    step = M / np.linalg.norm(A[0], 2) ** 2
    for _ in range(20000):
        z = x - step * A[0].T @ (A[0] @ x - b[0]) / M
        x = np.sign(z) * np.maximum(np.abs(z) - 0.1 * step, 0)
    for solver in [D.ds_admm(D.LeastSquares(), D.L1()), D.dgd(D.LeastSquares(), D.L1())]:
        sol = jaxsolve.solve(solver, jnp.zeros((1, DIM)), problem, tol=1e-10, max_steps=5000)
        assert int(sol.status) == Status.SUCCESS
        np.testing.assert_allclose(np.asarray(sol.x[0]), x, atol=1e-8)


def test_complex_data_and_an_int_key_are_named():
    A, b = jnp.ones((N_AG, M, DIM)), jnp.ones((N_AG, M))
    W = D.metropolis_hastings(D.ring(N_AG))
    with pytest.raises(TypeError, match=r"data\[0\] must be real"):
        D.make_problem((A.astype(jnp.complex128), b), W)
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        D.erdos_renyi(0, 5, 0.5)


@pytest.mark.parametrize(
    "b_shape, reg, solver, match",
    [
        ((N_AG, M, 1), 0.1, D.ds_admm(D.LeastSquares(), D.L1()), r"LeastSquares.grad has shape"),
        ((N_AG, M), jnp.full(3, 0.1), D.nids(D.LeastSquares(), D.L1()), "reg parameters"),
        ((N_AG, M), (-1.0, 1.0), D.dgd(D.LeastSquares(), D.L1()), "reg parameters"),
        ((N_AG, M), 0.1, D.ds_admm(D.LeastSquares(), D.Box()), "reg parameters"),
    ],
    ids=["b (m, 1)", "lam of length 3 for d = 4", "Box pair for L1", "scalar for Box"],
)
def test_data_and_reg_that_do_not_fit_the_solver_are_named(b_shape, reg, solver, match):
    """These passed make_problem and failed inside the first step with JAX's own
    broadcasting or tuple errors; init's shape check names them."""
    problem = D.make_problem(
        (jnp.ones((N_AG, M, DIM)), jnp.ones(b_shape)), D.metropolis_hastings(D.ring(N_AG)), reg
    )
    with pytest.raises(ValueError, match=match):
        jaxsolve.solve(solver, jnp.zeros((N_AG, DIM)), problem)


def _labelled(labels):
    A, b = D.breast_cancer(N_AG, heterogeneous=False)
    return A, labels(b)


@pytest.mark.parametrize("loss", [D.Logistic(), D.SmoothedHinge()], ids=["logistic", "hinge"])
@pytest.mark.parametrize("on_mesh", [False, True], ids=["simulated", "mesh"])
def test_zero_one_labels_are_named_not_solved(loss, on_mesh):
    """0/1 labels made the 0-rows a constant: the solve returned SUCCESS on the model of
    the positive rows alone. The check runs before tracing, also for the device mesh."""
    W = D.metropolis_hastings(D.ring(N_AG))
    x0 = jnp.zeros((N_AG, 30))
    bad = D.make_problem(_labelled(lambda b: (b + 1) / 2), W)
    run = D.solve_on_mesh if on_mesh else jaxsolve.solve
    kw = dict(mesh=D.agent_mesh(jax.devices()[: N_AG // 3])) if on_mesh else {}
    with pytest.raises(ValueError, match=r"labels b in \{-1, \+1\}.*pass 2 \* b - 1"):
        run(D.ds_admm(loss), x0, bad, max_steps=5, **kw)
    # +-1 labels and soft labels in between pass
    for labels in (lambda b: b, lambda b: 0.8 * b):
        good = D.make_problem(_labelled(labels), W)
        assert run(D.ds_admm(loss), x0, good, max_steps=5, **kw).x.shape == (N_AG, 30)


def test_zero_one_labels_inside_jit_are_not_inspected():
    """Under a user's jit the labels are tracers: the hook skips them (no host sync)."""
    W = D.metropolis_hastings(D.ring(N_AG))
    bad = D.make_problem(_labelled(lambda b: (b + 1) / 2), W)
    run = jax.jit(
        lambda p: jaxsolve.solve(D.ds_admm(D.Logistic()), jnp.zeros((N_AG, 30)), p, max_steps=3).x
    )
    assert np.all(np.isfinite(run(bad)))


@pytest.mark.parametrize("on_mesh", [False, True], ids=["single", "mesh"])
def test_federated_zero_one_labels_are_named(on_mesh):
    A, b = D.nonconvex_logistic(8)
    solver = D.fed_gd(D.NonconvexLogistic(), 2, stepsize=0.1)
    run = D.solve_clients_on_mesh if on_mesh else jaxsolve.solve
    with pytest.raises(ValueError, match=r"NonconvexLogistic needs labels b in \{-1, \+1\}"):
        run(solver, jnp.zeros(30), (A, (b + 1) / 2), max_steps=3)
    assert run(solver, jnp.zeros(30), (A, b), max_steps=3).x.shape == (30,)
