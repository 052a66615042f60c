"""Projected gradient on constrained least squares over every projection's set, against
OSQP (polished, 1e-10) or SciPy; the line search, restarts, statuses and derivatives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import jaxsolve
from jaxsolve import Status
from jaxsolve import projections as P
from jaxsolve.first_order import minimize_projected, projected_gradient
from peers.problems import first_order as R
from peers.problems.first_order import least_squares, osqp_ls_l1

M, N = 12, 6
W = np.linspace(0.2, 1.2, N)
GROUPS = np.array([0, 0, 1, 1, 2, 2])
CAPS = np.array([0.5, 1.0, 0.3])
AEQ = np.random.default_rng(42).normal(size=(2, N))
BEQ = AEQ @ np.full(N, 0.2)
HALF_A = np.linspace(-1.0, 1.5, N)

# name -> (projection of x, reference(A, b))
SETS = {
    "simplex": (
        P.simplex,
        lambda A, b: R.osqp_ls(
            A,
            b,
            np.vstack([np.eye(N), np.ones(N)]),
            np.r_[np.zeros(N), 1],
            np.r_[np.full(N, np.inf), 1],
        ),
    ),
    "l1_ball": (lambda x: P.l1_ball(x, 0.5), lambda A, b: osqp_ls_l1(A, b, 0.5)),
    "l2_ball": (lambda x: P.l2_ball(x, 0.5), lambda A, b: R.ls_l2_ball(A, b, 0.5)),
    "box": (
        lambda x: P.box(x, -0.2, 0.3),
        lambda A, b: R.osqp_ls(A, b, np.eye(N), np.full(N, -0.2), np.full(N, 0.3)),
    ),
    "capped_simplex": (
        lambda x: P.capped_simplex(x, 2.0),
        lambda A, b: R.osqp_ls(
            A, b, np.vstack([np.eye(N), np.ones(N)]), np.r_[np.zeros(N), 2], np.r_[np.ones(N), 2]
        ),
    ),
    "knapsack": (
        lambda x: P.knapsack(x, W, 1.0, 0.6),
        lambda A, b: R.osqp_ls(
            A,
            b,
            np.vstack([np.eye(N), W]),
            np.r_[np.zeros(N), -np.inf],
            np.r_[np.full(N, 0.6), 1.0],
        ),
    ),
    "partition_matroid": (
        lambda x: P.partition_matroid(x, GROUPS, CAPS),
        lambda A, b: R.osqp_ls(
            A,
            b,
            np.vstack([np.eye(N), (GROUPS[None, :] == np.arange(3)[:, None]).astype(float)]),
            np.r_[np.zeros(N), np.full(3, -np.inf)],
            np.r_[np.ones(N), CAPS],
        ),
    ),
    "affine": (lambda x: P.affine(x, AEQ, BEQ), lambda A, b: R.osqp_ls(A, b, AEQ, BEQ, BEQ)),
    "halfspace": (
        lambda x: P.halfspace(x, HALF_A, -0.3),
        lambda A, b: R.osqp_ls(A, b, HALF_A[None, :], [-np.inf], [-0.3]),
    ),
}


def _rel(x, ref):
    return float(np.linalg.norm(np.asarray(x) - ref) / max(1.0, np.linalg.norm(ref)))


@pytest.mark.parametrize("name", sorted(SETS))
def test_constrained_least_squares_matches_reference(name):
    projection, reference = SETS[name]
    A, b = R.data(1, M, N)
    solver = projected_gradient(least_squares, projection)
    sol = jaxsolve.solve(
        solver, jnp.zeros(N), (jnp.asarray(A), jnp.asarray(b)), tol=1e-10, max_steps=5000
    )
    assert int(sol.status) == Status.SUCCESS, (name, sol.message, float(sol.error))
    ref = reference(A, b)
    assert _rel(sol.x, ref) <= 1e-6, (name, _rel(sol.x, ref))
    # the objective cannot beat the reference's by more than rounding (both feasible)
    assert float(least_squares(sol.x, (A, b))) <= float(least_squares(ref, (A, b))) + 1e-8


@pytest.mark.parametrize(
    "opts",
    [
        {"restart": "function"},
        {"restart": None},
        {"accelerated": False},
        {"stepsize": "1/L"},
        {"stepsize": "1/L", "accelerated": False},
        {"shrink": 1.0, "increase": 1.5},
    ],
    ids=str,
)
def test_every_mode_reaches_the_osqp_solution(opts):
    A, b = R.data(2, M, N)
    opts = dict(opts)
    if opts.get("stepsize") == "1/L":
        opts["stepsize"] = 1.0 / np.linalg.norm(A, 2) ** 2
    solver = projected_gradient(least_squares, P.simplex, **opts)
    sol = jaxsolve.solve(solver, jnp.zeros(N), (A, b), tol=1e-10, max_steps=20000)
    assert int(sol.status) == Status.SUCCESS, (opts, sol.message)
    assert _rel(sol.x, SETS["simplex"][1](A, b)) <= 1e-6


def test_acceleration_and_backtracking_pay_off():
    """FISTA with restart needs far fewer steps than plain projected gradient at 1/L on an
    ill-conditioned problem; the backtracking estimate stays below the global L."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(40, 30)) @ np.diag(np.logspace(0, -2, 30))
    b = rng.normal(size=40)
    L = np.linalg.norm(A, 2) ** 2
    args = (jnp.asarray(A), jnp.asarray(b))
    fast = jaxsolve.solve(
        projected_gradient(least_squares, P.simplex), jnp.zeros(30), args, tol=1e-9, max_steps=50000
    )
    slow = jaxsolve.solve(
        projected_gradient(least_squares, P.simplex, stepsize=1 / L, accelerated=False),
        jnp.zeros(30),
        args,
        tol=1e-9,
        max_steps=50000,
    )
    assert int(fast.status) == int(slow.status) == Status.SUCCESS
    assert int(fast.num_steps) * 3 < int(slow.num_steps), (int(fast.num_steps), int(slow.num_steps))
    assert float(fast.state.lipschitz) <= 2.5 * L
    np.testing.assert_allclose(fast.x, slow.x, atol=1e-6)


def test_error_is_the_gradient_mapping_norm():
    A, b = R.data(4, M, N)
    sol = jaxsolve.solve(
        projected_gradient(least_squares, P.simplex), jnp.zeros(N), (A, b), tol=1e-9
    )
    L = float(sol.state.lipschitz)
    g = A.T @ (A @ np.asarray(sol.x) - b)
    G = L * np.linalg.norm(np.asarray(sol.x) - np.asarray(P.simplex(sol.x - g / L)))
    np.testing.assert_allclose(float(sol.error), G, rtol=1e-6, atol=1e-14)
    assert float(sol.error) <= 1e-9


def test_nonquadratic_objective_matches_scipy():
    """log-sum-exp + ridge over the simplex vs SciPy SLSQP (tight tolerances)."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(M, N))
    c = rng.normal(size=N)

    def fun(x, args):
        A, c = args
        return jax.nn.logsumexp(A @ x) + 0.5 * jnp.sum((x - c) ** 2)

    sol = jaxsolve.solve(
        projected_gradient(fun, P.simplex), jnp.zeros(N), (A, c), tol=1e-11, max_steps=5000
    )
    assert int(sol.status) == Status.SUCCESS
    f_np = lambda x: scipy.special.logsumexp(A @ x) + 0.5 * np.sum((x - c) ** 2)
    ref = scipy.optimize.minimize(
        f_np,
        np.full(N, 1.0 / N),
        jac=lambda x: A.T @ scipy.special.softmax(A @ x) + (x - c),
        method="SLSQP",
        bounds=[(0, None)] * N,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1, "jac": lambda x: np.ones(N)}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert ref.success
    assert _rel(sol.x, ref.x) <= 1e-6
    assert float(fun(sol.x, (A, c))) <= ref.fun + 1e-12


def test_batched_radii_with_split_args():
    """The set is data: a vmapped batch over l1 radii equals each single solve."""
    A, b = R.data(6, M, N)
    radii = jnp.asarray([0.2, 0.5, 1.0, 5.0])
    solver = projected_gradient(least_squares, P.l1_ball, split_args=True)
    run = lambda r: jaxsolve.solve(solver, jnp.zeros(N), ((A, b), r), tol=1e-10, max_steps=5000)
    batch = jax.jit(jax.vmap(run))(radii)
    assert batch.counts() == {"SUCCESS": 4}
    for i, r in enumerate(radii):
        np.testing.assert_allclose(batch.x[i], osqp_ls_l1(A, b, float(r)), atol=1e-6)


# slow: 30-70 s of compilation; the contract (gradients/float32/vmap checks) covers the same property in the default suite
@pytest.mark.slow
def test_gradient_fixed_unrolled_and_implicit_match_finite_differences():
    A, b = R.data(7, M, N)
    A, b = jnp.asarray(A), jnp.asarray(b)
    c = jnp.linspace(-1.0, 1.0, N)
    proj = lambda x: P.capped_simplex(x, 2.0)
    solver = projected_gradient(least_squares, proj)

    @jax.jit
    def unrolled(b):
        return jnp.vdot(
            c, jaxsolve.solve(solver, jnp.zeros(N), (A, b), loop="fixed", max_steps=400).x
        )

    @jax.jit
    def implicit(b):
        return jnp.vdot(
            c,
            minimize_projected(
                least_squares, proj, jnp.zeros(N), (A, b), tol=1e-13, max_steps=5000
            ).x,
        )

    eps = 1e-6
    d = jnp.asarray(np.random.default_rng(8).normal(size=M))
    fd = (float(implicit(b + eps * d)) - float(implicit(b - eps * d))) / (2 * eps)
    g_unr = float(jnp.vdot(jax.grad(unrolled)(b), d))
    g_imp = float(jnp.vdot(jax.grad(implicit)(b), d))
    assert abs(fd) > 1e-3  # a non-trivial direction
    assert abs(g_unr - fd) <= 1e-5 * max(1, abs(fd))
    assert abs(g_imp - fd) <= 1e-5 * max(1, abs(fd))


def test_line_search_failure_is_breakdown_and_nan_is_nonfinite():
    A, b = R.data(8, M, N)
    solver = projected_gradient(least_squares, P.simplex, shrink=1e-3, max_trials=1)
    sol = jaxsolve.solve(solver, jnp.zeros(N), (A, b), tol=1e-10)
    assert int(sol.status) == Status.BREAKDOWN and int(sol.num_steps) == 1
    nan_b = jnp.asarray(b).at[3].set(jnp.nan)
    sol = jaxsolve.solve(projected_gradient(least_squares, P.simplex), jnp.zeros(N), (A, nan_b))
    assert int(sol.status) == Status.NONFINITE
    with pytest.raises(jaxsolve.SolverError):
        jaxsolve.solve(
            projected_gradient(least_squares, P.simplex),
            jnp.zeros(N),
            (A, b),
            max_steps=2,
            throw=True,
        )


def test_bad_hyperparameters_raise():
    f = least_squares
    for kwargs, word in [
        ({"stepsize": 0.0}, "stepsize"),
        ({"stepsize": -1.0}, "stepsize"),
        ({"stepsize": float("nan")}, "stepsize"),
        ({"shrink": 0.0}, "shrink"),
        ({"increase": 1.0}, "increase"),
        ({"restart": "always"}, "restart"),
        ({"max_trials": 0}, "max_trials"),
    ]:
        with pytest.raises(ValueError, match=word):
            projected_gradient(f, P.simplex, **kwargs)
    with pytest.raises(TypeError, match="projection"):
        projected_gradient(f, None)
    A, b = R.data(0, M, N)
    with pytest.raises(ValueError, match="x0"):
        minimize_projected(f, P.simplex, jnp.zeros(N + 2), (A, b))
    with pytest.raises(ValueError, match="split_args"):
        minimize_projected(f, P.l1_ball, jnp.zeros(N), (A, b, 1.0), split_args=True)


def test_stepsize_change_does_not_recompile():
    A, b = R.data(9, M, N)
    from jaxsolve.core import driver

    jaxsolve.solve(
        projected_gradient(least_squares, P.simplex, stepsize=0.01),
        jnp.zeros(N),
        (A, b),
        max_steps=5,
    )
    size = driver._solve_while._cache_size()
    for s in (0.02, 0.005):
        jaxsolve.solve(
            projected_gradient(least_squares, P.simplex, stepsize=s),
            jnp.zeros(N),
            (A, b),
            max_steps=5,
        )
    assert driver._solve_while._cache_size() == size


def test_pytree_iterate_and_float32():
    """x may be any pytree; the projection handles it; float32 in gives float32 out."""
    c1 = jnp.array([0.5, 0.2, -0.3])
    c2 = jnp.array([2.0, -1.0])

    def f(x, _):
        return jnp.sum((x["a"] - c1) ** 2) + jnp.sum((x["b"] - c2) ** 2)

    def proj(x):
        return {"a": P.simplex(x["a"]), "b": P.box(x["b"], 0.0, 1.0)}

    x0 = {"a": jnp.zeros(3), "b": jnp.zeros(2)}
    sol = jaxsolve.solve(projected_gradient(f, proj), x0, None, tol=1e-10)
    assert int(sol.status) == Status.SUCCESS
    np.testing.assert_allclose(sol.x["a"], [0.65, 0.35, 0.0], atol=1e-10)
    np.testing.assert_allclose(sol.x["b"], [1.0, 0.0], atol=1e-10)
    x32 = jax.tree.map(lambda v: v.astype(jnp.float32), x0)
    sol32 = jaxsolve.solve(projected_gradient(f, proj), x32, None)
    assert int(sol32.status) == Status.SUCCESS
    assert sol32.x["a"].dtype == jnp.float32 and sol32.error.dtype == jnp.float32
    np.testing.assert_allclose(sol32.x["a"], [0.65, 0.35, 0.0], atol=1e-4)
