import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status

from ._toy import gd


def _problem(n=5, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n, n))
    A = M @ M.T / n + np.eye(n) * scale
    b = rng.normal(size=n)
    return jnp.asarray(A), jnp.asarray(b)


def test_while_converges_to_linear_solution():
    A, b = _problem()
    sol = jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b), tol=1e-10, max_steps=5000)
    assert int(sol.status) == Status.SUCCESS
    np.testing.assert_allclose(sol.x, np.linalg.solve(A, b), rtol=1e-8, atol=1e-9)
    assert float(sol.error) <= 1e-10
    assert 0 < int(sol.num_steps) < 5000


def test_max_steps_status_and_count():
    A, b = _problem()
    sol = jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b), tol=1e-12, max_steps=3)
    assert int(sol.status) == Status.MAX_STEPS
    assert int(sol.num_steps) == 3


def test_zero_steps_when_started_at_solution():
    A, b = _problem()
    xs = jnp.linalg.solve(A, b)
    sol = jaxsolve.solve(gd(0.2), xs, (A, b), tol=1e-8)
    assert int(sol.num_steps) == 0 and int(sol.status) == Status.SUCCESS


def test_nonfinite_status_and_throw():
    A, b = _problem()
    b = b.at[0].set(jnp.nan)
    sol = jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b))
    assert int(sol.status) == Status.NONFINITE
    with pytest.raises(jaxsolve.SolverError, match="NONFINITE"):
        jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b), throw=True)
    # divergence (step size too large) also ends as NONFINITE, never as SUCCESS
    A2, b2 = _problem()
    sol = jaxsolve.solve(gd(50.0), jnp.zeros(5), (A2, b2), max_steps=5000)
    assert int(sol.status) == Status.NONFINITE


def test_vmap_equals_loop_lane_for_lane():
    A, b = _problem()
    bs = jnp.stack([b * s for s in (1e-3, 1.0, 10.0, 100.0)])
    solver = gd(0.2)
    run = lambda bb: jaxsolve.solve(solver, jnp.zeros(5), (A, bb), tol=1e-9, max_steps=2000)
    batched = jax.vmap(run)(bs)
    steps = []
    for i in range(len(bs)):
        single = run(bs[i])
        np.testing.assert_allclose(batched.x[i], single.x, rtol=1e-12, atol=1e-15)
        assert int(batched.num_steps[i]) == int(single.num_steps)
        assert int(batched.status[i]) == int(single.status)
        steps.append(int(single.num_steps))
    assert len(set(steps)) > 1  # the lanes really stopped at different steps


def test_fixed_loop_is_differentiable_and_matches_closed_form():
    A, b = _problem()
    solver = gd(0.2)

    def f(bb):
        return jnp.sum(jaxsolve.solve(solver, jnp.zeros(5), (A, bb), loop="fixed", max_steps=400).x)

    g = jax.grad(f)(b)
    np.testing.assert_allclose(g, np.linalg.solve(A.T, np.ones(5)), rtol=1e-8)
    sol = jaxsolve.solve(solver, jnp.zeros(5), (A, b), loop="fixed", max_steps=7)
    assert int(sol.num_steps) == 7 and sol.history.shape == (7,)


def test_progress_equals_compiled_loop_and_callback_stops():
    A, b = _problem()
    solver = gd(0.2)
    ref = jaxsolve.solve(solver, jnp.zeros(5), (A, b), tol=1e-9, max_steps=500)
    prog = jaxsolve.solve(
        solver, jnp.zeros(5), (A, b), tol=1e-9, max_steps=500, progress=True, chunk=7
    )
    np.testing.assert_array_equal(ref.x, prog.x)
    assert int(ref.num_steps) == int(prog.num_steps) and int(ref.status) == int(prog.status)
    seen = []
    stopped = jaxsolve.solve(
        solver,
        jnp.zeros(5),
        (A, b),
        tol=1e-12,
        max_steps=500,
        chunk=5,
        callback=lambda s, k: seen.append(k) or k >= 10,
    )
    assert int(stopped.num_steps) == 10 and seen == [5, 10]
    assert int(stopped.status) == Status.MAX_STEPS


def test_history_records_each_step():
    A, b = _problem()
    sol = jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b), tol=1e-6, max_steps=300, history=True)
    k = int(sol.num_steps)
    assert np.all(np.isfinite(sol.history[:k])) and np.all(np.isnan(sol.history[k:]))
    assert float(sol.history[k - 1]) == float(sol.error)


def test_no_recompile_when_hyperparameter_changes():
    A, b = _problem()
    from jaxsolve.core import driver

    jaxsolve.solve(gd(0.1), jnp.zeros(5), (A, b), max_steps=50)
    before = driver._solve_while._cache_size()
    for lr in (0.05, 0.15, 0.2):
        jaxsolve.solve(gd(lr), jnp.zeros(5), (A, b), max_steps=50)
    jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b), max_steps=70, tol=1e-3)
    assert driver._solve_while._cache_size() == before


def test_default_tol_by_dtype():
    assert jaxsolve.default_tol(jnp.zeros(3, jnp.float32)) == 1e-4
    assert jaxsolve.default_tol(jnp.zeros(3, jnp.float64)) == 1e-8
    A, b = _problem()
    sol = jaxsolve.solve(
        gd(0.2), jnp.zeros(5, jnp.float32), (A.astype(jnp.float32), b.astype(jnp.float32))
    )
    assert sol.x.dtype == jnp.float32 and int(sol.status) == Status.SUCCESS


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(max_steps=0), ValueError, "max_steps"),
        (dict(max_steps=2.5), ValueError, "max_steps"),
        (dict(loop="until"), ValueError, "loop"),
        (dict(tol=-1.0), ValueError, "tol"),
    ],
)
def test_bad_driver_arguments(kwargs, exc, match):
    A, b = _problem()
    with pytest.raises(exc, match=match):
        jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, b), **kwargs)


def test_bad_x0():
    A, b = _problem()
    with pytest.raises(TypeError, match="x0.*floating"):
        jaxsolve.solve(gd(0.2), jnp.zeros(5, jnp.int32), (A, b))
    with pytest.raises(ValueError, match="x0.*empty"):
        jaxsolve.solve(gd(0.2), jnp.zeros((0,)), (A, b))
    with pytest.raises(TypeError, match="Solver"):
        jaxsolve.solve(lambda x: x, jnp.zeros(5), (A, b))


def test_step_that_changes_the_state_types_is_named():
    """A float16 x0 promoted to float64 by the data, in the while loop and the scan: the
    driver names the State field and both types (was lax's raw carry-type error)."""
    A, b = _problem()
    x0 = jnp.zeros(5, jnp.float16)
    for loop in ("while", "fixed"):
        with pytest.raises(TypeError, match=r"State\.x from float16\[5\] to float64\[5\]"):
            jaxsolve.solve(gd(0.2), x0, (A, b), loop=loop, max_steps=3)
    # same dtype in and out: runs
    sol = jaxsolve.solve(gd(0.2), x0, (A.astype(jnp.float16), b.astype(jnp.float16)), max_steps=3)
    assert sol.x.dtype == jnp.float16


def test_throw_under_jit_raises():
    A, b = _problem()
    f = jax.jit(
        lambda bb: jaxsolve.solve(gd(0.2), jnp.zeros(5), (A, bb), max_steps=2, throw=True).x
    )
    with pytest.raises(Exception, match="failure status"):
        jax.block_until_ready(f(b))


def test_status_table():
    assert [s.value for s in Status] == [0, 1, 2, 3, 4, 5]
    assert all(isinstance(s.message, str) and s.message for s in Status)
    assert jaxsolve.status_message(np.array([0, 3])) == [
        Status.SUCCESS.message,
        Status.INFEASIBLE.message,
    ]
