"""SQP against SciPy's SLSQP on Hock-Schittkowski problems; honest statuses; batches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from jaxsolve import Status, solve
from jaxsolve.nlp import minimize_sqp, problems, sqp


def _slsqp(prob):
    """SciPy's SLSQP on the same problem (its inequalities are >= 0)."""
    cons = []
    if prob.eq is not None:
        cons.append(dict(type="eq", fun=lambda x: np.asarray(prob.eq(jnp.asarray(x), None))))
    if prob.ineq is not None:
        cons.append(dict(type="ineq", fun=lambda x: -np.asarray(prob.ineq(jnp.asarray(x), None))))
    bounds = None
    if prob.lb is not None or prob.ub is not None:
        n = prob.x0.shape[0]
        lb = np.broadcast_to(-np.inf if prob.lb is None else prob.lb, (n,))
        ub = np.broadcast_to(np.inf if prob.ub is None else prob.ub, (n,))
        bounds = list(zip(lb, ub, strict=True))
    res = minimize(
        lambda x: float(prob.fun(jnp.asarray(x), None)),
        prob.x0,
        method="SLSQP",
        constraints=cons,
        bounds=bounds,
        options=dict(ftol=1e-10, maxiter=1000),
    )
    assert res.success, res.message
    return res


def _check_against_slsqp(prob, hessian="bfgs"):
    with jax.enable_x64(True):
        sol = minimize_sqp(
            prob.fun,
            jnp.asarray(prob.x0, jnp.float64),
            eq=prob.eq,
            ineq=prob.ineq,
            lb=prob.lb,
            ub=prob.ub,
            tol=1e-6,
            max_steps=100,
            hessian=hessian,
        )
        ref = _slsqp(prob)
        assert int(sol.status) == Status.SUCCESS, sol.message
        assert float(sol.error) <= 1e-6
        f = float(prob.fun(sol.x, None))
        np.testing.assert_allclose(f, ref.fun, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(np.asarray(sol.x), ref.x, atol=1e-5)
        if prob.f_star is not None:
            np.testing.assert_allclose(f, prob.f_star, rtol=1e-6, atol=1e-6)
        # the certificate is real: recompute the KKT residual at the returned point
        solver = sqp(prob.fun, prob.eq, prob.ineq, lb=prob.lb, ub=prob.ub)
        e = solver._evaluate(sol.x, None)
        assert float(solver._kkt(sol.x, e, sol.state.y)) <= 1e-6


def test_hs071_matches_slsqp():
    _check_against_slsqp(problems.hs071())


@pytest.mark.slow  # one compilation per problem, ~5 s each
@pytest.mark.parametrize("name", ["hs006", "hs021", "hs035", "hs040", "rosenbrock_disk"])
@pytest.mark.parametrize("hessian", ["bfgs", "exact"])
def test_hock_schittkowski_match_slsqp(name, hessian):
    _check_against_slsqp(getattr(problems, name)(), hessian)


def test_infeasible_constraints_never_success():
    # x >= 1 and 2 x <= 0 cannot both hold; the least l1 violation (1 - x)+ + (2x)+
    # is 1 + x on [0, 1], smallest at x = 0
    with jax.enable_x64(True):
        sol = minimize_sqp(
            lambda x, a: jnp.sum(x**2),
            jnp.array([3.0]),
            ineq=lambda x, a: jnp.array([1 - x[0], 2 * x[0]]),
            max_steps=60,
        )
        assert int(sol.status) in (Status.INFEASIBLE, Status.MAX_STEPS), sol.message
        assert float(sol.state.violation) >= 0.99
        np.testing.assert_allclose(np.asarray(sol.x), [0.0], atol=1e-4)


def test_vmap_over_problem_data_equals_loop():
    # projection of a point c onto the unit circle intersected with x0 >= 0.2
    fun = lambda x, c: jnp.sum((x - c) ** 2)
    eq = lambda x, c: jnp.array([jnp.sum(x**2) - 1])
    ineq = lambda x, c: jnp.array([0.2 - x[0]])
    solver = sqp(fun, eq, ineq)
    with jax.enable_x64(True):
        cs = jnp.array([[2.0, 1.0], [-1.0, 0.5], [0.3, -2.0], [1.0, 1.0]])
        x0 = jnp.array([0.5, 0.5])
        run = lambda c: solve(solver, x0, c, tol=1e-9, max_steps=50)
        batch = jax.jit(jax.vmap(run))(cs)
        for i, c in enumerate(cs):
            one = run(c)
            assert int(batch.status[i]) == int(one.status) == Status.SUCCESS
            assert int(batch.num_steps[i]) == int(one.num_steps)
            np.testing.assert_allclose(np.asarray(batch.x[i]), np.asarray(one.x), atol=1e-12)
        # the answer itself: the closest feasible point of the circle
        ang = np.arctan2(np.asarray(cs[:, 1]), np.asarray(cs[:, 0]))
        expect = np.stack([np.cos(ang), np.sin(ang)], 1)
        low = expect[:, 0] < 0.2
        expect[low] = np.stack([np.full(low.sum(), 0.2), np.sign(cs[low, 1]) * np.sqrt(0.96)], 1)
        np.testing.assert_allclose(np.asarray(batch.x), expect, atol=1e-7)


@pytest.mark.slow  # a float32 compilation of HS071 (~10 s)
def test_float32_runs():
    prob = problems.hs071()
    sol = minimize_sqp(
        prob.fun,
        jnp.asarray(prob.x0, jnp.float32),
        eq=prob.eq,
        ineq=prob.ineq,
        lb=prob.lb,
        ub=prob.ub,
        tol=1e-3,
        max_steps=100,
    )
    assert sol.x.dtype == jnp.float32
    assert int(sol.status) == Status.SUCCESS, sol.message
    np.testing.assert_allclose(float(prob.fun(sol.x, None)), prob.f_star, rtol=1e-4)


@pytest.mark.slow  # 10 trajectory problems of 150 variables
def test_unicycle_obstacle_avoidance():
    prob = problems.unicycle(30)
    solver = sqp(prob.fun, prob.eq, prob.ineq, lb=prob.lb, ub=prob.ub, hessian="exact")
    with jax.enable_x64(True):
        run = jax.jit(lambda z0, d: solve(solver, z0, d, tol=1e-6, max_steps=150))
        ok = 0
        for seed in range(10):
            d = problems.unicycle_data(jax.random.key(seed))
            # the straight reference through the obstacles, nudged sideways: a start
            # on the line through a centre is a stationary point of the violation
            z0 = problems.unicycle_rollout(d, d.u_ref.at[:, 1].set(0.3))
            sol = run(z0, d)
            states = np.asarray(sol.x[:90]).reshape(30, 3)
            gap = np.linalg.norm(states[:, None, :2] - np.asarray(d.centers)[None], axis=-1)
            clear = np.min(gap - np.asarray(d.radii))
            if int(sol.status) == Status.SUCCESS:
                ok += 1
                assert clear >= -1e-6
                assert float(sol.state.violation) <= 1e-6
        assert ok >= 8


_VMAP_HANG_SCRIPT = r"""
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from jaxsolve import Status, solve
from jaxsolve.nlp import problems, sqp
T, B = 10, 16
prob = problems.unicycle(T)
scen = jax.vmap(lambda k: problems.unicycle_data(k, T))(jax.random.split(jax.random.key(0), B))
starts = jax.vmap(lambda d: problems.unicycle_rollout(d, d.u_ref.at[:, 1].set(0.3)))(scen)
solver = sqp(prob.fun, prob.eq, prob.ineq, lb=prob.lb, ub=prob.ub, hessian="exact")
one = lambda z0, d: solve(solver, z0, d, tol=1e-6, max_steps=150)
batch = jax.block_until_ready(jax.jit(jax.vmap(one))(starts, scen))
single = jax.jit(one)
matched = 0
for i in range(B):
    s = single(starts[i], jax.tree.map(lambda a: a[i], scen))
    dx = float(jnp.max(jnp.abs(batch.x[i] - s.x)))
    print(i, int(s.status), int(batch.status[i]), int(s.num_steps), int(batch.num_steps[i]), dx)
    if int(s.status) == Status.SUCCESS and int(s.num_steps) <= 30:
        assert int(batch.status[i]) == Status.SUCCESS, i
        assert dx <= 1e-6, (i, dx)
        matched += 1
print("matched", matched)
"""


@pytest.mark.slow
def test_vmapped_trajectory_batch_does_not_hang_on_cpu():
    """Regression: ``jit(vmap(solve(sqp)))`` over 16 unicycle problems at T = 10 waited
    for ever on CPU (jaxlib 0.10.2: its batched Cholesky, called from a pool worker
    inside the vmapped subproblem loop, waited on tasks no worker ran; gdb showed every
    thread idle). The subproblems now run lane by lane under vmap on CPU
    (`jaxsolve.qp.solve.solve_lanewise`). Run in a subprocess with a time limit, so a
    hang fails the test instead of stalling the suite; the run takes about 20 s. The
    lanes that the loop solves in at most 30 steps are solved in the batch too, x within
    1e-6 (measured: 2e-8 at most; KKT tolerance 1e-6; batched and single products
    round differently, so a lane may take a step more or less); lanes that wander for
    150 steps may drift apart."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    run = subprocess.run(
        [sys.executable, "-c", _VMAP_HANG_SCRIPT],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    matched = int(run.stdout.split("matched")[-1])
    assert matched >= 5, run.stdout


def test_subproblem_solver_without_implicit_hooks():
    """A ``qp_solver`` that declares no implicit-differentiation hooks (``implicit_root``,
    ``optimality``; e.g. a host OSQP) runs as it is, alone and under vmap on CPU, and
    gives the default subproblem solver's answer (regression: the lane-by-lane path
    attached FlexQP's implicit rule to every solver)."""
    from jaxsolve.core.protocol import AbstractSolver
    from jaxsolve.qp import single_qp_solver

    class Plain(AbstractSolver):
        inner: object

        def init(self, x0, args):
            return self.inner.init(x0, args)

        def step(self, state, args):
            return self.inner.step(state, args)

        def finalize(self, state, args, converged):
            return self.inner.finalize(state, args, converged)

    fun = lambda x, c: jnp.sum((x - c) ** 2)
    eq = lambda x, c: jnp.array([jnp.sum(x**2) - 1])
    ineq = lambda x, c: jnp.array([0.2 - x[0]])
    with jax.enable_x64(True):
        cs = jnp.array([[2.0, 1.0], [-1.0, 0.5]])
        x0 = jnp.array([0.5, 0.5])
        ref = [solve(sqp(fun, eq, ineq), x0, c, tol=1e-9, max_steps=50) for c in cs]
        plain = sqp(fun, eq, ineq, qp_solver=Plain(single_qp_solver(1e-8)))
        run = lambda c: solve(plain, x0, c, tol=1e-9, max_steps=50)
        batch = jax.jit(jax.vmap(run))(cs)
        for i, c in enumerate(cs):
            one = run(c)
            assert int(one.status) == int(batch.status[i]) == Status.SUCCESS
            np.testing.assert_allclose(np.asarray(one.x), np.asarray(ref[i].x), atol=1e-9)
            np.testing.assert_allclose(np.asarray(batch.x[i]), np.asarray(one.x), atol=1e-12)
