"""SQP on hostile input: a clear error naming the argument, an honest status, or a
SUCCESS whose KKT residual and feasibility are recomputed here.

The status cases share one compiled solve (same functions, shapes and dtypes; the
data that changes is ``args`` and the bounds, leaves of the solver)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve.nlp import minimize_sqp, problems, sqp


def _fun(x, a):
    return jnp.sum((x - a[0]) ** 2)


def _eq(x, a):
    return a[1] * jnp.array([x[0] + x[1] - 1.0])  # a[1] scales the row


_ARGS = (jnp.array([2.0, 0.0]), jnp.array(1.0))
_FAR = jnp.array([5.0, 5.0])  # not weak-typed (jnp.full(2, 5.0) is): one compilation for all
_DATA = problems.UnicycleData(
    jnp.zeros(3), jnp.zeros(2), jnp.zeros((1, 2)), jnp.ones(1), jnp.zeros((4, 2))
)
_Q = lambda x, a: jnp.sum(x**2)  # noqa: E731


def _solve(x0, args=_ARGS, **kw):
    kw = {"eq": _eq, "lb": 0.0, "ub": 1.0, **kw}
    return minimize_sqp(_fun, x0, args, **kw)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # x0: NaN/inf, dtypes, shapes, empty
        (lambda: _solve(jnp.array([jnp.nan, 0.0])), ValueError, "x0 contains NaN"),
        (lambda: minimize_sqp(_Q, jnp.array([jnp.inf, 0.0])), ValueError, "x0 must be finite"),
        (lambda: _solve(jnp.array([1, 0])), TypeError, "x0 must be a floating"),
        (lambda: _solve(jnp.array([1 + 0j, 0])), TypeError, "x0 must be real"),
        (lambda: _solve(jnp.ones(2, jnp.bfloat16)), TypeError, "x0 has dtype bfloat16"),
        (lambda: _solve(jnp.ones(2, jnp.float16)), TypeError, "x0 has dtype float16"),
        (lambda: _solve(jnp.zeros(0)), ValueError, "x0 has an empty axis"),
        (lambda: minimize_sqp(_Q, jnp.ones((2, 2))), ValueError, "x0 must be a vector"),
        # bounds: shapes, NaN, dtypes, an empty box
        (lambda: _solve(jnp.ones(3), lb=jnp.zeros(2)), ValueError, r"lb must be a scalar or"),
        (lambda: _solve(jnp.ones(2), lb=jnp.zeros((2, 2))), ValueError, "lb must be a scalar"),
        (lambda: _solve(jnp.ones(2), lb=jnp.nan), ValueError, "lb contains NaN"),
        (lambda: _solve(jnp.ones(2), ub=jnp.array([1.0, jnp.nan])), ValueError, "ub contains"),
        (lambda: _solve(jnp.ones(2), lb=0j), TypeError, "lb must be real"),
        (lambda: _solve(jnp.ones(2), lb=1.0, ub=0.0), ValueError, "lb must be <= ub"),
        # the user's functions: shapes and dtypes of what they return
        (lambda: minimize_sqp(lambda x, a: x**2, jnp.ones(3)), TypeError, "fun must return a real"),
        (lambda: minimize_sqp(lambda x, a: _Q(x, a) + 0j, jnp.ones(2)), TypeError, "fun must"),
        (lambda: _solve(jnp.ones(2), eq=lambda x, a: x[:1] + 0j), TypeError, "eq must return"),
        (lambda: _solve(jnp.ones(2), ineq=lambda x, a: x > 0), TypeError, "ineq must return"),
        (
            lambda: _solve(jnp.ones(2), hessian=lambda x, y, a: jnp.eye(3)),
            ValueError,
            r"hessian must return a \(2, 2\) matrix",
        ),
        # the solver's arguments
        (lambda: sqp(3), TypeError, "fun must be callable"),
        (lambda: sqp(_Q, ineq=3), TypeError, "ineq"),
        (lambda: sqp(_Q, hessian="newton"), ValueError, "hessian"),
        (lambda: sqp(_Q, penalty=-1.0), ValueError, "penalty"),
        (lambda: sqp(_Q, penalty=float("nan")), ValueError, "penalty"),
        (lambda: sqp(_Q, qp_tol=-1.0), ValueError, "qp_tol"),
        (lambda: sqp(_Q, armijo=2), ValueError, "armijo"),
        (lambda: sqp(_Q, backtrack=jnp.array(2.0)), ValueError, "backtrack"),
        (lambda: sqp(_Q, qp_max_steps=0), ValueError, "qp_max_steps"),
        (lambda: _solve(jnp.ones(2), tol=float("nan")), ValueError, "tol"),
        (lambda: _solve(jnp.ones(2), tol=-1.0), ValueError, "tol"),
        # the test-problem builders: keys, horizons, dtypes, shapes
        (lambda: problems.unicycle_data(0), TypeError, "key must be a jax.random key"),
        (
            lambda: problems.unicycle_data(jnp.zeros(3, jnp.uint32)),
            TypeError,
            "key must be a jax.random key",
        ),
        (lambda: problems.unicycle_data(jax.random.key(0), T=0), ValueError, "T must be"),
        (lambda: problems.unicycle_data(jax.random.key(0), n_obstacles=-1), ValueError, "n_obst"),
        (lambda: problems.unicycle_data(jax.random.key(0), dtype=jnp.int32), TypeError, "dtype"),
        (lambda: problems.unicycle(T=0), ValueError, "T must be a positive int"),
        (lambda: problems.unicycle(dt=-1.0), ValueError, "dt must be"),
        (lambda: problems.unicycle(v_max=float("nan")), ValueError, "v_max must be"),
        (lambda: problems.safety_filter(T=0), ValueError, "T must be a positive int"),
        (lambda: problems.safety_filter(first_weight=0.0), ValueError, "first_weight"),
        (
            lambda: problems.unicycle_rollout(_DATA, jnp.zeros((4, 3))),
            ValueError,
            r"inputs must have shape \(T, 2\)",
        ),
    ],
)
def test_bad_arguments_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def _kkt_and_feasibility(sol, args, tol):
    """The documented measure, recomputed at the returned point for the problem as given."""
    solver = sqp(_fun, _eq, lb=0.0, ub=1.0)
    e = solver._evaluate(sol.x, args)
    assert float(solver._kkt(sol.x, e, sol.state.y)) <= tol
    x = np.asarray(sol.x)
    assert x.min() >= 0 and x.max() <= 1  # the bounds hold exactly
    assert abs(x[0] + x[1] - 1) <= tol  # the unscaled row holds too


@pytest.mark.parametrize(
    "x0, args, status",
    [
        # a start outside the box is clipped into it: SUCCESS at the true minimizer (1, 0)
        (_FAR, _ARGS, Status.SUCCESS),
        (jnp.array([jnp.inf, -jnp.inf]), _ARGS, Status.SUCCESS),
        # the equality row scaled by 1e8 and by 1e-8
        (_FAR, (_ARGS[0], jnp.array(1e8)), Status.SUCCESS),
        (_FAR, (_ARGS[0], jnp.array(1e-8)), Status.SUCCESS),
        # NaN / inf data in args: never SUCCESS
        (jnp.zeros(2), (jnp.array([jnp.nan, 0.0]), jnp.array(1.0)), Status.NONFINITE),
        (jnp.zeros(2), (jnp.array([jnp.inf, 0.0]), jnp.array(1.0)), Status.NONFINITE),
        (jnp.zeros(2), (_ARGS[0], jnp.array(jnp.nan)), Status.NONFINITE),
    ],
    ids=["x0_outside", "x0_inf", "row_1e8", "row_1e-8", "nan_data", "inf_data", "nan_scale"],
)
def test_statuses_are_honest_and_success_is_certified(x0, args, status):
    sol = _solve(x0, args, tol=1e-8)
    assert int(sol.status) == status, sol.message
    if status == Status.SUCCESS:
        np.testing.assert_allclose(np.asarray(sol.x), [1.0, 0.0], atol=1e-7)
        _kkt_and_feasibility(sol, args, 1e-8 * max(1.0, float(args[1])))
