"""FlexQP against OSQP, proxsuite and SciPy HiGHS: exactness, infeasibility, hostile input,
warm starts, float32, gradients (paper: Oshin et al., 2025, Thm 3.1 and the l1 relaxation)."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.core import Status
from jaxsolve.qp import QP, WarmStart, problems, solve_qp, validate_qp
from jaxsolve.qp.certify import exclusion_radius
from tests.qp._refs import min_l1_violation, osqp_ref, proxsuite_ref, rel

INF = np.inf


def _np(qp):
    return QP(*(np.asarray(v, np.float64) for v in qp))


def _stack(qps):
    return QP(*(jnp.asarray(np.stack(v)) for v in zip(*qps, strict=True)))


# Every lockstep batch of this file has one shape: 12 lanes of QPs padded to n = 28,
# m = 46 (extra variables with P = I, q = 0 and no constraint; extra free rows), all
# at tol 1e-9 and 3000 steps, so the whole file compiles the batched solve once
# (~10 s each otherwise). Single solves likewise share the (8, 16) shape.
_BN, _BM, _BB = 28, 46, 12


def _pad_to(qp, n=_BN, m=_BM):
    """Pad to ``n`` variables and ``m`` rows without changing the solution (first n, m)."""
    return QP(*(jnp.asarray(v, jnp.float64) for v in qp)).padded(n, m)


def _solve_batch(qps, **kw):
    """The file's one batched configuration (see _BB)."""
    assert len(qps) == _BB, len(qps)
    return solve_qp(_stack([_pad_to(qp) for qp in qps]), tol=1e-9, max_steps=3000, **kw)


def _part(sol, i, qp):
    """Lane i of a padded batch, cut back to the unpadded sizes: (x, y, viol)."""
    n, m = len(qp.q), len(qp.l)
    return (
        np.asarray(sol.x[i])[:n],
        np.asarray(sol.state.y[i])[:m],
        np.asarray(sol.state.viol[i])[:m],
    )


# ---------------------------------------------------------------- exactness vs references

_CLASSES = {
    "random": lambda k: problems.random_qp(k, 12, 30),
    "eq": lambda k: problems.eq_qp(k, 12, 6),
    "portfolio": lambda k: problems.portfolio(k, 1, 12),
    "mpc": lambda k: problems.mpc(k, 3, 2, 5),
    "lasso": lambda k: problems.lasso(k, 3, 12),
    "huber": lambda k: problems.huber(k, 2, 8),
    "svm": lambda k: problems.svm(k, 2, 10),
}
_SLOW_CLASSES = ("lasso", "huber", "svm")


@pytest.fixture(scope="module")
def exact_batch():
    """One padded batch per group of classes, solved on first use: the four default
    classes with 3 instances each, the three slow ones with 4 (12 lanes either way)."""
    cache = {}

    def get(slow):
        if slow not in cache:
            names = [c for c in _CLASSES if (c in _SLOW_CLASSES) == slow]
            per = _BB // len(names)
            lanes = [(c, _CLASSES[c](jax.random.key(s))) for c in names for s in range(per)]
            cache[slow] = lanes, _solve_batch([qp for _, qp in lanes])
        return cache[slow]

    return get


@pytest.mark.parametrize(
    "name",
    [pytest.param(c, marks=pytest.mark.slow) if c in _SLOW_CLASSES else c for c in _CLASSES],
)
def test_exact_against_osqp_and_proxsuite(exact_batch, name):
    """3-4 instances per class in one lockstep batch: x within 1e-6 of OSQP and proxsuite
    at 1e-10. (Slow classes: a second batch, ~10 s of solving with the references.)"""
    lanes, sol = exact_batch(name in _SLOW_CLASSES)
    idx = [i for i, (c, _) in enumerate(lanes) if c == name]
    assert len(idx) >= 3
    for i in idx:
        qp = lanes[i][1]
        assert int(sol.status[i]) == Status.SUCCESS, (name, i, Status(int(sol.status[i])).name)
        x_ref, y_ref, st = osqp_ref(qp)
        assert st == "solved"
        x_px, _ = proxsuite_ref(qp)
        x, y, viol = _part(sol, i, qp)
        assert rel(x, x_ref) <= 1e-6
        assert rel(x, x_px) <= 1e-6
        # KKT of the original QP with our multipliers (OSQP sign convention)
        P, q, A, l, u = _np(qp)
        assert np.max(np.abs(P @ x + q + A.T @ y)) <= 1e-6 * max(1, np.max(np.abs(q)))
        assert np.max(viol) <= 1e-7 * max(1, np.max(np.abs(A @ x)))
        assert np.all(y[np.isinf(u)] <= 1e-8) and np.all(y[np.isinf(l)] >= -1e-8)


@pytest.mark.slow  # a sweep of mu around the exactness threshold (10 s)
def test_exactness_threshold_and_adaptive_mu():
    """Thm 3.1: a fixed weight above ||y*||_inf gives the QP solution, below it does not;
    the adaptive weight started far too low still reaches the exact solution."""
    qp = problems.random_qp(jax.random.key(3), 8, 16)
    x_ref, y_ref, _ = osqp_ref(qp)
    ystar = np.max(np.abs(y_ref))
    assert ystar > 0.1
    adaptive = solve_qp(qp, mu=1e-4, tol=1e-9, max_steps=3000)
    assert int(adaptive.status) == Status.SUCCESS
    assert rel(adaptive.x, x_ref) <= 1e-6
    assert float(adaptive.state.mu) > ystar
    # fixed weights (mu_max = mu): compare in the user's units through state.mu
    c = float(adaptive.state.mu) / float(adaptive.state.mu_level)  # 1 / cost scaling
    above = solve_qp(qp, mu=2 * ystar / c, mu_max=2 * ystar / c, tol=1e-9, max_steps=3000)
    assert int(above.status) == Status.SUCCESS and rel(above.x, x_ref) <= 1e-6
    below = solve_qp(qp, mu=0.5 * ystar / c, mu_max=0.5 * ystar / c, tol=1e-9, max_steps=3000)
    assert float(jnp.max(below.state.viol)) > 1e-3  # inexact: constraints violated ...
    assert float(jnp.max(jnp.abs(below.state.y))) <= 0.5 * ystar * (1 + 1e-9)  # ... duals clipped
    # ... and reported MAX_STEPS with the violation in its error: never a false SUCCESS,
    # and never INFEASIBLE either (the constraints can be met; the cap is too small)
    assert int(below.status) == Status.MAX_STEPS
    assert float(below.error) > 1e-3


def test_polish_lands_on_vertex_of_nearly_parallel_active_rows():
    """Regression (the QBEACONF failure mode, small): an LP-like QP whose optimal vertex is
    cut by two nearly parallel rows (angle 1e-7), so the active-set KKT system is nearly
    singular. The first polish stage (regularization 1e-6, 5 refinement steps) moves only
    a fraction of the way along the ill-determined direction per step and reported
    SUCCESS with KKT 8e-13 but x 3.3e-5 off the vertex; the fine stage (1e-8, 20 steps)
    lands on it. Padded to the (8, 16) shape of the tests above (one compilation)."""
    eps = 1e-7
    n, m = 8, 16
    A = np.zeros((m, n))
    A[:4, :2] = [[1.0, 1.0], [1.0, 1.0 + eps], [1.0, 0.0], [0.0, 1.0]]
    l, u = np.full(m, -INF), np.full(m, INF)
    l[2:4] = -10.0
    u[:4] = [1.0, 1.0 + eps / 2, 10.0, 10.0]
    P = np.diag(np.r_[0.0, 0.0, np.ones(n - 2)])  # P = 0 on the LP part, padding at 0
    q = np.zeros(n)
    q[:2] = -(A[0, :2] + A[1, :2])  # y* = (1, 1) on the two rows, x* = (1/2, 1/2)
    sol = solve_qp(QP(P, q, A, l, u), tol=1e-9, max_steps=3000)
    assert int(sol.status) == Status.SUCCESS
    x, y = np.asarray(sol.x), np.asarray(sol.state.y)
    assert np.max(np.abs(x[:2] - 0.5)) <= 1e-8 and np.max(np.abs(x[2:])) <= 1e-12
    np.testing.assert_allclose(y[:2], [1.0, 1.0], atol=1e-6)
    assert np.max(np.abs(y[2:])) <= 1e-12


# ---------------------------------------------------------------- infeasible QPs


def test_infeasible_minimizes_l1_violation_like_highs():
    """INFEASIBLE, and the violation sum equals the HiGHS LP minimum (1e-6 relative)
    with the same set of violated rows (12 random infeasible QPs, one batch)."""
    qps = [problems.infeasible_qp(jax.random.key(s), 8, 16, k=2) for s in range(_BB)]
    sol = _solve_batch(qps)
    for i, qp in enumerate(qps):
        assert int(sol.status[i]) == Status.INFEASIBLE, (i, Status(int(sol.status[i])).name)
        value, v_lp = min_l1_violation(qp)
        x, _, viol = _part(sol, i, qp)
        assert abs(viol.sum() - value) <= 1e-6 * value
        np.testing.assert_array_equal(np.nonzero(viol > 1e-7)[0], np.nonzero(v_lp > 1e-7)[0])
        assert np.all(np.isfinite(x))


@pytest.mark.slow  # several polish-pass counts, each compiled (9 s)
def test_polish_passes_reclassify_violated_rows():
    """Regression: the polish's later passes re-read which rows are violated (a
    primal-dual active-set step on the relaxed optimality conditions), not only which
    are active. On this infeasible QP (n = 20, m = 40) the ADMM iterate at the elastic
    cap keeps a wrong violated set for hundreds of steps; with the violated rows frozen
    at their first reading the run needed 800 steps (MAX_STEPS within 500), now 325."""
    qp = problems.infeasible_qp(jax.random.split(jax.random.key(0), 32)[0], 20, 40)
    sol = solve_qp(qp, max_steps=500)
    assert int(sol.status) == Status.INFEASIBLE, Status(int(sol.status)).name
    value, v_lp = min_l1_violation(qp)
    viol = np.asarray(sol.state.viol)
    assert abs(viol.sum() - value) <= 1e-6 * value
    np.testing.assert_array_equal(np.nonzero(viol > 1e-7)[0], np.nonzero(v_lp > 1e-7)[0])


def _contradictory(j=0, n=8, m=16):
    """Infeasible: rows x_j <= 0 and x_j >= 1 with the objective's minimizer (x_j = 1/2)
    between them, so every relaxed solution keeps x_j there and A'w = 0 exactly."""
    P, q = np.eye(n), np.zeros(n)
    q[j] = -0.5
    A = np.zeros((m, n))
    A[0, j] = A[1, j] = 1.0
    A[2 : 2 + n] = np.eye(n)
    l, u = np.full(m, -INF), np.full(m, INF)
    u[0], l[1] = 0.0, 1.0
    l[2 : 2 + n], u[2 : 2 + n] = -2.0, 2.0
    return QP(P, q, A, l, u)


def test_violation_at_the_cap_is_infeasible_only_with_a_certificate():
    """A run that converges at mu_max with rows violated is INFEASIBLE only when the
    exclusion radius certifies it; a feasible QP whose multipliers exceed mu_max (the
    Maros-Meszaros QPCBOEI2 failure, here with a small cap) is MAX_STEPS with the
    violation in its error. One lockstep batch mixes both."""
    feas = [_np(problems.random_qp(jax.random.key(s), 8, 16)) for s in range(3, 11)]
    infeas = [_contradictory(j) for j in range(3)] + [_hostile_zero_row()]
    lanes = feas[:4] + infeas[:2] + feas[4:] + infeas[2:]
    # mu is in cost-scaled units (about 1/20 of the user's here): far below every y*
    sol = _solve_batch(lanes, mu=0.05, mu_max=0.05)
    for i, qp in enumerate(lanes):
        name = Status(int(sol.status[i])).name
        x, y, viol = _part(sol, i, qp)
        if any(qp is f for f in feas):
            x_ref, y_ref, st = osqp_ref(qp)
            assert st == "solved"  # the QP is feasible ...
            assert float(sol.state.mu[i]) < 0.5 * np.max(np.abs(y_ref))  # ... the cap below y*
            assert np.max(viol) > 1e-3  # so rows stay violated ...
            assert name == "MAX_STEPS", (i, name)  # ... reported as such, never INFEASIBLE
            assert float(sol.error[i]) > 1e-3  # and the error says so
        else:
            assert name == "INFEASIBLE", (i, name)
            value, v_lp = min_l1_violation(qp)
            assert abs(viol.sum() - value) <= 1e-6 * value
    # the zero row's violated set is unique (a contradictory pair's is not: every x_j in
    # [0, 1] violates by 1 in total, HiGHS picks a vertex, FlexQP x_j = 1/2)
    i = len(lanes) - 1
    np.testing.assert_array_equal(np.nonzero(_part(sol, i, lanes[i])[2] > 1e-7)[0], [0])
    np.testing.assert_allclose(sol.x[4][0], 0.5, atol=1e-8)
    np.testing.assert_allclose(sol.x[5][1], 0.5, atol=1e-8)


def test_exclusion_radius_is_a_valid_bound():
    """Theorem of jaxsolve.qp.certify: for ANY (x, z, w) no point meeting the constraints
    lies within the radius of x. Random systems with a known feasible point x_f: the
    radius never exceeds ||x_f - x||_inf; a Farkas pair (rows a'x <= 0, a'x >= 1) gives
    a radius bounded only by the rounding pad."""
    rng = np.random.default_rng(0)
    k, m, n = 400, 7, 4
    A = rng.standard_normal((k, m, n)) * 10.0 ** rng.uniform(-3, 3, (k, m, 1))
    xf = rng.standard_normal((k, n))
    Axf = np.einsum("kmn,kn->km", A, xf)
    lo = Axf - rng.uniform(0, 1, (k, m)) * (rng.random((k, m)) < 0.7)
    up = Axf + rng.uniform(0, 1, (k, m)) * (rng.random((k, m)) < 0.7)
    l = np.where(rng.random((k, m)) < 0.3, -INF, lo)
    u = np.where(rng.random((k, m)) < 0.3, INF, up)
    x = xf + rng.standard_normal((k, n)) * 10.0 ** rng.uniform(-6, 1, (k, 1))
    z = np.einsum("kmn,kn->km", A, x) + rng.standard_normal((k, m)) * 10.0 ** rng.uniform(
        -6, 0, (k, 1)
    )
    w = rng.uniform(-1.2, 1.2, (k, m))
    dist = np.max(np.abs(xf - x), axis=1)
    radius = jax.jit(jax.vmap(exclusion_radius))  # one compilation for both calls
    r = radius(A, l, u, x, z, w, np.ones((k, m)), np.ones((k, n)))
    assert np.all(np.asarray(r) <= dist * (1 + 1e-9))
    assert np.sum(np.asarray(r) > 0.01 * dist) > 10  # not vacuous: some bounds are close
    # the same radius from Ruiz-scaled data (A_s = E A D, x_s = x / D, ...)
    E, D = 10.0 ** rng.uniform(-2, 2, (k, m)), 10.0 ** rng.uniform(-2, 2, (k, n))
    As = E[:, :, None] * A * D[:, None, :]
    rs = radius(As, E * l, E * u, x / D, E * z, w, E, D)
    np.testing.assert_allclose(np.asarray(rs), np.asarray(r), rtol=1e-8)
    A = np.array([[1.0, 0.0], [1.0, 0.0]])
    r = exclusion_radius(
        A,
        np.array([-INF, 1.0]),
        np.array([0.0, INF]),
        np.array([0.5, 3.0]),
        np.array([0.5, 0.5]),
        np.array([1.0, -1.0]),
    )
    assert float(r) >= 1e13  # A'w = 0: only the rounding pad 10 eps |A|'|w| bounds it


# ---------------------------------------------------------------- hostile input


def _hostile():
    """(name, qp, expected status): 12 small QPs (n = 3), padded to the file's batch shape."""
    rng = np.random.default_rng(0)
    P = np.diag([2.0, 1.0, 0.5])
    q = np.array([1.0, -2.0, 0.5])
    I3 = np.eye(3)
    cases = []
    # zero row (feasible: 0 in [l, u]) and a box
    A = np.vstack([np.zeros((1, 3)), I3])
    cases.append(("zero_row", QP(P, q, A, np.r_[-1, -np.ones(3)], np.r_[1, np.ones(3)]), 0))
    # zero row with 0 outside [l, u]: infeasible, violation 1
    cases.append(
        ("zero_row_infeasible", QP(P, q, A, np.r_[1, -np.ones(3)], np.r_[2, np.ones(3)]), 3)
    )
    # duplicated rows
    a = rng.standard_normal(3)
    A = np.vstack([a, a, a, I3])
    cases.append(
        (
            "duplicated",
            QP(P, q, A, np.r_[-INF, -INF, -INF, -np.ones(3)], np.r_[-0.5, -0.5, -0.5, np.ones(3)]),
            0,
        )
    )
    # rank-deficient A (row 3 = row 1 + row 2) with equalities, rank-deficient P
    B = rng.standard_normal((2, 3))
    A = np.vstack([B, B[0] + B[1]])
    xf = rng.standard_normal(3)
    v = np.outer([1.0, 1.0, 0.0], [1.0, 1.0, 0.0])
    cases.append(
        (
            "rank_deficient",
            QP(
                v,
                q,
                np.vstack([A, I3]),
                np.r_[A @ xf, -5 * np.ones(3)],
                np.r_[A @ xf, 5 * np.ones(3)],
            ),
            0,
        )
    )
    # LP (P = 0) on a box with one cut
    A = np.vstack([np.ones((1, 3)), I3])
    cases.append(
        ("lp", QP(np.zeros((3, 3)), q, A, np.r_[-INF, -np.ones(3)], np.r_[1.0, np.ones(3)]), 0)
    )
    # rows scaled by 1e4 and 1e-4
    A = np.vstack([1e4 * rng.standard_normal(3), 1e-4 * rng.standard_normal(3), I3])
    cases.append(
        (
            "scaled_rows",
            QP(P, q, A, np.r_[-1e4, -INF, -2 * np.ones(3)], np.r_[1e3, 1e-5, 2 * np.ones(3)]),
            0,
        )
    )
    # infinite bounds everywhere but one side
    A = np.vstack([I3, -I3])
    cases.append(
        (
            "inf_bounds",
            QP(
                P,
                q,
                A,
                np.r_[-INF, -INF, -INF, -INF, -INF, -INF],
                np.r_[INF, 0.5, INF, INF, INF, INF],
            ),
            0,
        )
    )
    # singleton feasible set (osqp#485): x1 >= 1, x1 <= 1, x2 + x3 = 0, x2 - x3 = 0
    A = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1, 1], [0, 1, -1]])
    cases.append(("singleton", QP(P, q, A, np.r_[1, -INF, 0, 0], np.r_[INF, 1, 0, 0]), 0))
    # tiny infeasibility gap (osqp#255): x1 <= 0 and x1 >= 1e-4
    A = np.array([[1.0, 0, 0], [1.0, 0, 0]])
    cases.append(("tiny_gap", QP(P, q, A, np.r_[-INF, 1e-4], np.r_[0.0, INF]), 3))
    # unbounded LP: min -x1 s.t. x1 >= 0
    A = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1]])
    cases.append(
        (
            "unbounded",
            QP(np.zeros((3, 3)), np.array([-1.0, 0, 0]), A, np.r_[0, -1, -1], np.r_[INF, 1, 1]),
            4,
        )
    )
    # a gap of 1 (x1 <= 0 and x1 >= 1): the relaxed solution sits on x1 = 0
    A = np.array([[1.0, 0, 0], [1.0, 0, 0]])
    cases.append(("gap_one", QP(P, q, A, np.r_[-INF, 1.0], np.r_[0.0, INF]), 3))
    # no constraint at all (every row free)
    cases.append(("unconstrained", QP(P, q, np.ones((2, 3)), np.full(2, -INF), np.full(2, INF)), 0))
    return [(name, _np(qp), st) for name, qp, st in cases]


def _hostile_zero_row(n=8):
    """Infeasible: a zero row with 0 outside its bounds [1, 2], a box elsewhere whose
    bounds the objective's minimizer does not reach."""
    A = np.vstack([np.zeros((1, n)), np.eye(n)])
    l, u = np.r_[1.0, -np.ones(n)], np.r_[2.0, np.ones(n)]
    return QP(np.eye(n), np.linspace(-0.5, 0.5, n), A, l, u)


@pytest.fixture(scope="module")
def hostile_solutions():
    cases = _hostile()
    for _, qp, _ in cases:
        validate_qp(qp)
    return cases, _solve_batch([c[1] for c in cases])


def test_hostile_inputs_never_nan_nor_false_success(hostile_solutions):
    cases, sol = hostile_solutions
    for i, (name, qp, expected) in enumerate(cases):
        assert int(sol.status[i]) == expected, (name, Status(int(sol.status[i])).name)
        x, y, viol = _part(sol, i, qp)
        if expected != Status.UNBOUNDED:
            assert np.all(np.isfinite(x)), name
            assert np.all(np.isfinite(y)), name
        if expected == Status.SUCCESS:
            x_ref, _, st = osqp_ref(qp)
            assert st == "solved", name
            f = lambda x, qp=qp: 0.5 * x @ qp.P @ x + qp.q @ x
            assert abs(f(x) - f(x_ref)) <= 1e-7 * max(1, abs(f(x_ref))), name
            assert np.max(viol) <= 1e-7 * max(1.0, np.max(np.abs(qp.A @ x_ref))), name
        if expected == Status.INFEASIBLE:
            value, _ = min_l1_violation(qp)
            assert abs(float(np.sum(viol)) - value) <= 1e-6 * value, name


def test_nan_data_is_nonfinite_not_success():
    qp = problems.random_qp(jax.random.key(0), 8, 16)
    bad = qp._replace(q=qp.q.at[2].set(jnp.nan))
    with pytest.raises(ValueError, match="q contains NaN"):
        solve_qp(bad)
    sol = jax.jit(lambda qp: solve_qp(qp, tol=1e-9, max_steps=3000))(bad)  # traced: not inspected
    assert int(sol.status) == Status.NONFINITE


# ---------------------------------------------------------------- validation


def test_validation_messages():
    # NumPy data (validate_qp takes it as it is): no per-test JAX compilation
    qp = _np(problems.random_qp(jax.random.key(0), 8, 16))
    P_bad = qp.P.copy()
    P_bad[0, 1] += 1.0
    with pytest.raises(ValueError, match="P must be symmetric"):
        validate_qp(qp._replace(P=P_bad))
    with pytest.raises(ValueError, match="A must have shape"):
        validate_qp(qp._replace(A=qp.A[:, :3]))
    with pytest.raises(ValueError, match="l must be <= u"):
        validate_qp(qp._replace(l=qp.u + 1))
    with pytest.raises(ValueError, match="P must have shape"):
        validate_qp(qp._replace(P=qp.P[:3]))
    with pytest.raises(TypeError, match="floating"):
        validate_qp(qp._replace(q=np.arange(8)))
    with pytest.raises(TypeError, match="jaxsolve.qp.QP"):
        validate_qp(tuple(qp))


def test_standard_form_builder():
    P = np.eye(2)
    q = np.array([-1.0, -1.0])
    qp = QP.from_standard_form(
        P, q, G=[[1.0, 1.0]], h=[1.0], A_eq=[[1.0, -1.0]], b_eq=[0.0], lb=0.0
    )
    assert qp.A.shape == (4, 2)
    sol = solve_qp(_pad_to(qp, 8, 16), tol=1e-10, max_steps=3000)  # the single-solve shape
    np.testing.assert_allclose(sol.x[:2], [0.5, 0.5], atol=1e-8)
    with pytest.raises(ValueError, match="G must have shape"):
        QP.from_standard_form(P, q, G=np.ones((1, 3)), h=[1.0])


# ---------------------------------------------------------------- warm start


def _iters(sol):
    return int(sol.state.admm_iters)


def _cold_start(qp):
    """The cold start of init (x0 = 0) as a WarmStart: zero duals, z = clip(0, l, u),
    the default rho (0.1) and the elastic weight clipped up to the default mu."""
    dt = qp.q.dtype
    z0 = jnp.clip(jnp.zeros_like(qp.l), qp.l, qp.u)
    zero = jnp.zeros((), dt)
    return WarmStart(jnp.zeros_like(qp.q), jnp.zeros_like(qp.l), z0, zero + 0.1, zero)


def test_warm_start_portfolio_changing_returns():
    """Portfolio with drifting expected returns: warm-started solves take at most half
    the ADMM iterations of cold ones, and agree with them."""
    key = jax.random.key(5)
    n = 20
    mu0 = jax.random.normal(jax.random.key(6), (n,))
    prev = None
    cold_total = warm_total = 0
    for t in range(5):
        ret = mu0 + 0.02 * t * jax.random.normal(jax.random.fold_in(key, t), (n,))
        qp = problems.portfolio(key, 2, n, returns=ret)
        # check_every=1: cold starts now end at an early in-loop polish (10-20
        # iterations), below the default 10-iteration step granularity of the count.
        # The cold start is passed as the WarmStart that init builds from x0 = 0 (zero
        # duals, z = clip(0, l, u), the default rho and mu): the same iterates bit for
        # bit, and one compilation (a WarmStart x0 is another pytree) for both solves.
        cold = solve_qp(qp, _cold_start(qp), tol=1e-7, max_steps=2000, check_every=1)
        if prev is not None:
            warm = solve_qp(qp, tol=1e-7, max_steps=2000, warm_start=prev, check_every=1)
            assert int(warm.status) == Status.SUCCESS
            assert rel(warm.x, cold.x) <= 1e-6
            cold_total += _iters(cold)
            warm_total += _iters(warm)
        prev = cold
    assert warm_total <= 0.5 * cold_total, (warm_total, cold_total)


# slow: 30-70 s of compilation; the contract (gradients/float32/vmap checks) covers the same property in the default suite
@pytest.mark.slow
def test_warm_start_mpc_moving_state():
    """MPC with the initial state moving along the closed loop, warm-started from the
    previous plan shifted by one step: at most half the ADMM iterations of cold starts.

    Both without in-loop polishing (``polish_every=0``): with it, cold starts of this
    small MPC already end at the first polish (10-40 iterations), so the count would
    measure polishing, not what the warm start saves the ADMM iteration."""
    key = jax.random.key(2)
    nx, nu, T = 6, 3, 10
    qp = problems.mpc(key, nx, nu, T)
    xmax = qp.u[(T + 1) * nx : (T + 2) * nx]
    x_state = 0.95 * xmax * jnp.sign(jax.random.normal(jax.random.key(9), (nx,)))
    prev = None
    cold_total = warm_total = 0
    for _ in range(5):
        qp = problems.mpc(key, nx, nu, T, x0=x_state)
        cold = solve_qp(qp, tol=1e-7, max_steps=2000, polish_every=0)
        assert int(cold.status) == Status.SUCCESS
        if prev is not None:
            start = problems.shift_mpc_warm_start(prev, qp, nx, nu, T)
            warm = solve_qp(qp, start, tol=1e-7, max_steps=2000, polish_every=0)
            assert int(warm.status) == Status.SUCCESS
            assert rel(warm.x, cold.x) <= 1e-6
            cold_total += _iters(cold)
            warm_total += _iters(warm)
        prev = cold
        x_state = cold.x[nx : 2 * nx]  # apply the first input: next state of the plan
    assert warm_total <= 0.5 * cold_total, (warm_total, cold_total)


# ---------------------------------------------------------------- float32


# slow: 30-70 s of compilation; the contract (gradients/float32/vmap checks) covers the same property in the default suite
@pytest.mark.slow
def test_float32_random_classes():
    """float32 at tol 1e-4: every lane SUCCESS, no NaN, x within 1e-3 of float64 OSQP."""
    keys = jax.random.split(jax.random.key(11), 8)
    qps = [problems.random_qp(k, 12, 30, dtype=jnp.float32) for k in keys]
    sol = solve_qp(_stack(qps), tol=1e-4, max_steps=2000)
    assert sol.x.dtype == jnp.float32
    assert sol.counts() == {"SUCCESS": 8}
    assert np.all(np.isfinite(np.asarray(sol.x)))
    for i, qp in enumerate(qps):
        x_ref = osqp_ref(_np(qp))[0]
        assert rel(sol.x[i], x_ref) <= 1e-3
    eq = [problems.eq_qp(k, 12, 6, dtype=jnp.float32) for k in keys[:4]]
    sol = solve_qp(_stack(eq), tol=1e-4, max_steps=2000)
    assert sol.counts() == {"SUCCESS": 4}


# ---------------------------------------------------------------- gradients


# slow: 30-70 s of compilation; the contract (gradients/float32/vmap checks) covers the same property in the default suite
@pytest.mark.slow
def test_gradients_all_leaves_implicit_unrolled_fd():
    """d/d(P, q, A, l, u) of sum(sin(x*)): implicit = unrolled = central differences,
    along one random direction in all five leaves at once and along each leaf alone.

    Runs at the optimization level users get (in a subprocess unless the suite already
    does): the suite's ``--xla_backend_optimization_level=0`` (tests/conftest.py) makes
    jaxlib 0.10.2's XLA:CPU compute a wrong derivative of this unrolled solve (the
    forward pass equal to the last bits; at 10 steps the JVP along ones(A) is -0.157
    against -0.612 at the default level, and inactive rows of A get O(1) gradients)."""
    if not os.environ.get("JAXSOLVE_TEST_FULL_OPT"):
        name = "test_gradients_all_leaves_implicit_unrolled_fd"
        env = {**os.environ, "JAXSOLVE_TEST_FULL_OPT": "1", "XLA_FLAGS": ""}
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-m",
                "slow",
                "-p",
                "no:cacheprovider",
                f"{__file__}::{name}",
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd=pathlib.Path(__file__).parents[2],
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
        return
    qp = problems.random_qp(jax.random.key(1), 5, 8)

    def loss(qp, **kw):
        return jnp.sum(jnp.sin(solve_qp(qp, tol=1e-12, **kw).x))

    g_imp = jax.grad(loss)(qp)
    g_unr = jax.grad(lambda qp: loss(qp, loop="fixed", max_steps=80))(qp)
    dirs = []
    for i, name in enumerate(QP._fields):
        leaf = getattr(qp, name)
        d = jax.random.normal(jax.random.key(10 + i), leaf.shape)
        d = jnp.where(jnp.isfinite(leaf), d, 0.0)
        dirs.append(d + d.T if name == "P" else d)
    D = QP(*dirs)
    dot = lambda g: sum(
        float(jnp.sum(jnp.where(jnp.isfinite(a), a, 0.0) * b)) for a, b in zip(g, D, strict=True)
    )
    eps = 1e-6
    plus = QP(*(a + eps * b for a, b in zip(qp, D, strict=True)))
    minus = QP(*(a - eps * b for a, b in zip(qp, D, strict=True)))
    fd = (float(loss(plus)) - float(loss(minus))) / (2 * eps)
    assert abs(dot(g_imp) - fd) <= 1e-5 * max(1, abs(fd)), (dot(g_imp), fd)
    assert abs(dot(g_unr) - fd) <= 1e-5 * max(1, abs(fd)), (dot(g_unr), fd)
    # each leaf carries a nonzero part of the derivative, and implicit = unrolled per leaf
    for a, b, d in zip(g_imp, g_unr, D, strict=True):
        ga = float(jnp.sum(jnp.where(jnp.isfinite(a), a, 0.0) * d))
        gb = float(jnp.sum(jnp.where(jnp.isfinite(b), b, 0.0) * d))
        assert abs(ga) > 1e-3 and abs(ga - gb) <= 1e-6 * max(1, abs(ga))


@pytest.mark.slow  # vmap(grad) and jit(grad) of batched QPs (14 s); the contract checks gradients
def test_gradient_under_vmap_and_jit():
    """jit(vmap(grad)) equals the per-lane grad (at the single-solve shape and options of
    the tests above, so the per-lane solves reuse their compilation)."""
    qp = problems.random_qp(jax.random.key(1), 8, 16)
    qs = jnp.stack([qp.q, 1.5 * qp.q, -qp.q])
    f = lambda q: jnp.sum(solve_qp(qp._replace(q=q), tol=1e-9, max_steps=3000).x ** 2)
    g = jax.jit(jax.vmap(jax.grad(f)))(qs)
    for i in range(3):
        np.testing.assert_allclose(g[i], jax.grad(f)(qs[i]), rtol=1e-8, atol=1e-10)
    assert np.all(np.isfinite(np.asarray(g)))


# ---------------------------------------------------------------- loader


def test_maros_meszaros_loader(monkeypatch, tmp_path):
    """The 44 small problems ship inside jaxsolve: HS21 loads with the full-set folder
    variable pointing at a missing folder (a clean clone, no ../shared)."""
    from jaxsolve.qp.problems import load_maros_meszaros, maros_meszaros_names

    monkeypatch.setenv("JAXSOLVE_MAROS_MESZAROS", str(tmp_path / "missing"))
    assert len(maros_meszaros_names()) == 44
    assert len(maros_meszaros_names(300, 600)) == 44
    qp = load_maros_meszaros("HS21")
    assert (qp.n, qp.m) == (2, 3)
    validate_qp(qp)
    sol = solve_qp(_pad_to(qp, 8, 16), tol=1e-9, max_steps=3000)  # the single-solve shape
    x_ref, _ = proxsuite_ref(qp)
    assert int(sol.status) == Status.SUCCESS and rel(sol.x[:2], x_ref) <= 1e-6
    with pytest.raises(ValueError, match="not found"):
        load_maros_meszaros("NO_SUCH_PROBLEM")


@pytest.mark.slow
def test_qpcboei2_feasible_with_huge_multipliers_is_not_infeasible():
    """Regression of the false INFEASIBLE on Maros-Meszaros QPCBOEI2 (feasible: HiGHS and
    proxsuite solve it; optimal multipliers 1.3e8, above the elastic cap). FlexQP's
    relaxed problem converges at the cap with rows violated by ~5e-6 relative (while
    the least-l1-violation LP, HiGHS, is 0); the
    exclusion radius (about 1 for ||x||_inf ~ 660) does not certify infeasibility, so the
    status is MAX_STEPS with the violation in the error. Slow: 71000 ADMM iterations."""
    from jaxsolve.qp.problems import load_maros_meszaros

    qp = load_maros_meszaros("QPCBOEI2")
    sol = solve_qp(qp, tol=1e-6, max_steps=10000, implicit=False)
    assert int(sol.status) == Status.MAX_STEPS, Status(int(sol.status)).name
    assert 1e-6 < float(sol.error) < 1e-4
    st = sol.state
    r = exclusion_radius(qp.A, qp.l, qp.u, st.x, st.z, st.y / st.mu)
    assert float(r) < 0.01 * float(jnp.max(jnp.abs(st.x)))
    value, _ = min_l1_violation(qp)  # HiGHS: the constraints can all be met
    assert value <= 1e-9


@pytest.mark.slow  # long solves with and without the in-loop polish (12 s)
def test_in_loop_polish_keeps_a_point_that_meets_tol():
    """The in-loop polish keeps a polished point only when it is 10x better than the
    ADMM point, or when its error is at most ``polish_accept`` (solve_qp: ``tol``).
    The rule is tested on its own: the same polished point, against an ADMM error 2x
    above it, is rejected without ``polish_accept`` and kept with it."""
    import importlib

    from jaxsolve.qp.polish import polish, polish_in_loop

    # the module (jaxsolve.qp exports the function under the same name)
    F = importlib.import_module("jaxsolve.qp.flexqp")
    qp = problems.random_qp(jax.random.key(3), 10, 20)
    solver = F.flexqp(polish_passes=1)
    s = solver.init(jnp.zeros(10), qp)
    for _ in range(2):
        s, _ = solver.step(s, qp)
    hp, pending, res = F._residuals_now(solver, s)
    d = s.data
    delta = jnp.maximum(hp.delta, 1e3 * jnp.finfo(s.xs.dtype).eps)
    xp, _, _, rp = polish(d, s.xs, s.zs, s.ys, s.mu_level, delta, 5, 1, pending, res)
    assert float(rp.error) < 1e-6 and float(res.error) > 10 * float(rp.error)
    fake = res._replace(error=2.0 * rp.error)  # the polished point is only 2x better
    for accept, kept in ((0.0, False), (3.0 * float(rp.error), True)):
        h = hp._replace(polish_accept=jnp.asarray(accept))
        x, _, _, r, flag = polish_in_loop(d, s.xs, s.zs, s.ys, s.mu_level, fake, h, 5, 1, pending)
        assert bool(jnp.all(x == xp)) is kept and bool(flag) is kept
        assert float(r.error) == (float(rp.error) if kept else float(fake.error))
    # the hyperparameter reaches the step (solve_qp sets it to its tol)
    assert float(F.flexqp(polish_accept=1e-4).polish_accept) == 1e-4
    with pytest.raises(ValueError, match="polish_accept"):
        F.flexqp(polish_accept=-1.0)


def test_polish_work_stops_at_rounding_level():
    """Polishing does no work that cannot change the answer. (1) Once a pass's point is
    at rounding level (``<= 100 eps``), further passes are skipped: 40 passes from a
    warm start at the solution cost about what 1 pass costs (they cost 40 factorizations
    before), and return the same point. (2) A run that ends at an in-loop polish at
    rounding level is flagged ``polished`` and ``finalize`` returns its point as it is."""
    import importlib
    import time

    from jaxsolve.qp.polish import EXACT_EPS, polish

    F = importlib.import_module("jaxsolve.qp.flexqp")
    n, m = 150, 300
    qp = problems.random_qp(jax.random.key(7), n, m)
    ref = solve_qp(qp, tol=1e-10)
    assert int(ref.status) == Status.SUCCESS
    warm = WarmStart(ref.x, ref.state.y, ref.state.z, ref.state.rho, ref.state.mu)
    solver = F.flexqp(polish_every=5, polish_accept=1e-10, rho_every=1)
    s = solver.init(warm, qp)
    s, _ = solver.step(s, qp)
    hp, pending, res = F._residuals_now(solver, s)
    delta = jnp.maximum(hp.delta, 1e3 * jnp.finfo(s.xs.dtype).eps)

    def run(passes):
        f = jax.jit(
            lambda s: polish(s.data, s.xs, s.zs, s.ys, s.mu_level, delta, 5, passes, pending, res)
        )
        out = jax.block_until_ready(f(s))
        best = np.inf
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(f(s))
            best = min(best, time.perf_counter() - t0)
        return out, best

    (x1, _, _, r1), t1 = run(1)
    (x40, _, _, r40), t40 = run(40)
    assert float(r1.error) <= EXACT_EPS * np.finfo(np.float64).eps
    np.testing.assert_array_equal(np.asarray(x40), np.asarray(x1))
    assert t40 < 5 * t1, (t40, t1)  # 40 passes of factorizations would be ~40x

    # (2) the in-loop polish at step 1 ended the run; finalize keeps its point
    assert bool(s.polished) and float(s.error) <= EXACT_EPS * np.finfo(np.float64).eps
    fin = solver.finalize(s, qp, jnp.asarray(True))
    np.testing.assert_array_equal(np.asarray(fin.x), np.asarray(s.x))
    assert int(fin.status) == Status.SUCCESS
    # what the skipped polish would have returned: the same point to rounding
    again = F._final_polish(solver, s._replace(polished=jnp.asarray(False)), qp, True)
    np.testing.assert_allclose(np.asarray(again.xs), np.asarray(s.xs), rtol=0, atol=1e-12)
