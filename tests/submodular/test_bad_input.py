"""Submodular family on hostile input: a clear error naming the argument, an honest
status, or a SUCCESS whose certified gap is recomputed here."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import jaxsolve
from jaxsolve import Status
from jaxsolve import submodular as sm

N = 6
_M = jnp.asarray(np.random.default_rng(0).uniform(0, 1, (4, N)))
_F = sm.SCM.create(_M, phi="log1p")
_CARD = sm.cardinality(2)
_KNAP = sm.knapsack(jnp.ones(N), 2.0)
_PART = sm.partition_matroid(jnp.array([0, 0, 0, 1, 1, 1]), jnp.array([1, 1]))
_KEY = jax.random.key(0)
_X = jnp.full(N, 0.2)
M34 = jnp.ones((3, 4))


def _bcoo(row=0, value=1.0, dtype=jnp.float64):
    """A sparse M (3, 4) with its first entry's row index and value replaced."""
    B = sparse.BCOO.fromdense(M34)
    data = B.data.at[0].set(value).astype(dtype)
    return sparse.BCOO((data, B.indices.at[0, 0].set(row)), shape=B.shape)


@pytest.mark.parametrize(
    "call, match",
    [
        # SCM.create and the constructors: NaN/inf, signs, shapes, dtypes, empty input
        (lambda: sm.SCM.create(-M34), "M must be non-negative"),
        (lambda: sm.SCM.create(M34.at[0, 0].set(jnp.nan)), "M contains NaN"),
        (lambda: sm.SCM.create(M34.at[0, 0].set(jnp.inf)), "M must be finite"),
        (lambda: sm.SCM.create(jnp.ones(4)), r"M must be a matrix \(m, n\)"),
        (lambda: sm.SCM.create(jnp.ones((0, 4))), "M must be non-empty"),
        (lambda: sm.SCM.create(jnp.ones((3, 4), jnp.int32)), "M must be floating"),
        (lambda: sm.SCM.create(M34.astype(complex)), "M must be floating"),
        (lambda: sm.SCM.create(jnp.ones((3, 5), jnp.bfloat16)), "M has dtype bfloat16"),
        (lambda: sm.SCM.create(jnp.ones((3, 5), jnp.float16)), "M has dtype float16"),
        (lambda: sm.SCM.create(M34, jnp.array([1.0, -1.0, 1.0])), "weights must be non-negative"),
        (lambda: sm.SCM.create(M34, jnp.full(3, jnp.inf)), "weights must be finite"),
        (lambda: sm.SCM.create(M34, jnp.ones(2)), r"weights must have shape \(3,\)"),
        (lambda: sm.SCM.create(M34, jnp.ones(3, complex)), "weights must be real"),
        (lambda: sm.SCM.create(M34, None, "saturate", jnp.ones(2)), r"cap must be a scalar or"),
        (lambda: sm.SCM.create(M34, None, "saturate", jnp.nan), "cap contains NaN"),
        (lambda: sm.SCM.create(M34, None, lambda z: z**2), "concave"),
        (lambda: sm.SCM.create(M34, None, lambda z: -jnp.log1p(z)), "nondecreasing"),
        (lambda: sm.SCM.create(M34, None, lambda z: 1 + z), r"phi\(0\) = 0"),
        (lambda: sm.SCM.create(M34, None, "tanh"), "phi must be one of"),
        (lambda: sm.SCM.create(M34, None, "saturate"), "needs cap"),
        (lambda: sm.concave(3), "phi must be callable"),
        (lambda: sm.probabilistic_coverage(jnp.full((3, 3), 1.0)), "graph_probs"),
        (lambda: sm.probabilistic_coverage(jnp.full((3, 3), jnp.nan)), "graph_probs contains NaN"),
        (lambda: sm.probabilistic_coverage(jnp.zeros((3, 3), int)), "graph_probs must be floating"),
        (lambda: sm.feature_based(-jnp.ones((3, 2))), "X must be non-negative"),
        (lambda: sm.feature_based(jnp.full((3, 2), jnp.inf)), "X must be finite"),
        (lambda: sm.feature_based(jnp.ones(3)), "X must be a matrix"),
        (lambda: sm.feature_based(jnp.ones((0, 3))), "X must be non-empty"),
        (lambda: sm.probabilistic_coverage(jnp.zeros((3, 0))), "graph_probs must be non-empty"),
        (lambda: sm.saturated_coverage(jnp.ones((0, 2)), 1.0), "similarity must be non-empty"),
        (lambda: sm.SCM.create(_bcoo(row=10)), "M's indices must lie inside its shape"),
        (lambda: sm.SCM.create(_bcoo(value=jnp.nan)), "M contains NaN"),
        (lambda: sm.SCM.create(_bcoo(dtype=jnp.int32)), "M must be floating"),
        (lambda: sm.SCM.create(_bcoo(dtype=jnp.float16)), "M has dtype float16"),
        (lambda: sm.saturated_coverage(jnp.ones((3, 2)), -1.0), "cap must be non-negative"),
        (lambda: sm.saturated_coverage(jnp.ones((3, 2)), jnp.ones(5)), r"cap must be a scalar or"),
        (lambda: _F.value(jnp.zeros(4)), r"S must have shape \(6,\)"),
        # a fractional S returned F(S), the extension, as if it were a set's value
        (lambda: _F.value(jnp.full(N, 0.5)), "S must be a 0/1 .* f.extension"),
        (lambda: _F.extension(jnp.zeros(4)), r"x must have shape \(6,\)"),
        # constraints
        (lambda: sm.cardinality(0), "k must be a positive integer"),
        (lambda: sm.cardinality(2.5), "k must be a positive integer"),
        (lambda: sm.cardinality(jnp.nan), "k must be finite"),
        (lambda: sm.cardinality(1 + 1j), "k must be a real number"),
        (lambda: sm.cardinality(jnp.ones(2)), "k must be a scalar"),
        (lambda: sm.maximize(_F, sm.cardinality(7), None), "k must be at most"),
        (lambda: sm.knapsack(jnp.array([2.0, 3.0]), 1.0), "budget 1 is below every cost"),
        (lambda: sm.knapsack(jnp.array([2.0, -3.0]), 5.0), "costs must be positive"),
        (lambda: sm.knapsack(jnp.array([2.0, jnp.inf]), 5.0), "costs must be positive and finite"),
        (lambda: sm.knapsack(jnp.array([2.0, jnp.nan]), 5.0), "costs contains NaN"),
        (lambda: sm.knapsack(jnp.array([2.0, 1.0]), jnp.nan), "budget must be finite"),
        (lambda: sm.knapsack(jnp.ones(3, int), 2.0), "costs must be floating"),
        (lambda: sm.knapsack(jnp.ones(0), 2.0), "costs must be a non-empty"),
        (
            lambda: sm.partition_matroid(jnp.array([0, 0, 2]), jnp.array([1, 1, 1])),
            r"group\(s\) \[1\] empty",
        ),
        (lambda: sm.partition_matroid(jnp.array([0, 3]), jnp.array([1, 1])), "groups must hold"),
        (lambda: sm.partition_matroid(jnp.array([0, 1]), jnp.array([1.5, 1])), "caps must be"),
        (lambda: sm.partition_matroid(jnp.array([0.0, 1.0]), jnp.array([1, 1])), "groups must be"),
        (
            lambda: sm.partition_matroid(jnp.array([0, 1]), jnp.array([1.0, jnp.nan])),
            "caps contains",
        ),
        # maximize / AAPGA: shapes, dtypes, keys, tolerances
        (lambda: sm.maximize(_F, sm.knapsack(jnp.ones(4), 2.0), None), "costs must have shape"),
        (
            lambda: sm.maximize(_F, sm.partition_matroid(jnp.array([0, 1]), jnp.array([1, 1]))),
            "groups must have shape",
        ),
        (lambda: sm.maximize(_M, _CARD), "f must be an SCM"),
        (lambda: sm.maximize(_F, 2), "constraint must come from"),
        (lambda: sm.maximize(_F, _CARD, 0), "key must be a jax.random key"),
        (lambda: sm.maximize(_F, _CARD, jnp.zeros(3, jnp.uint32)), "key must be a jax.random key"),
        (lambda: sm.maximize(_F, _CARD, x0=jnp.ones(4)), r"x0 must have shape \(6,\)"),
        (lambda: sm.maximize(_F, _CARD, x0=jnp.ones(N, int)), "x0 must be a floating"),
        (lambda: sm.maximize(_F, _CARD, x0=jnp.ones(N, complex)), "x0 must be real"),
        (lambda: sm.maximize(_F, _CARD, tol=float("nan")), "tol must be"),
        (lambda: sm.maximize(_F, _CARD, tol=-1.0), "tol must be"),
        (lambda: sm.maximize(_F, _CARD, max_steps=0), "max_steps must be"),
        (lambda: sm.maximize(_F, _CARD, num_rounds=0), "num_rounds must be"),
        (
            lambda: jaxsolve.solve(sm.aapga(), jnp.zeros(4), (_F, _CARD)),
            r"x0 must have shape \(6,\)",
        ),
        (lambda: jaxsolve.solve(sm.pga(), jnp.zeros(4), (_F, _CARD)), r"x0 must have shape \(6,\)"),
        (lambda: jaxsolve.solve(sm.aapga(), jnp.zeros(N, int), (_F, _CARD)), "x0 must be a float"),
        (
            lambda: jaxsolve.solve(sm.aapga(), jnp.zeros(N, jnp.float32), (_F, _CARD)),
            "x0 has dtype float32 but f is float64",
        ),
        (lambda: jaxsolve.solve(sm.aapga(), jnp.zeros(N), _F), "args must be the pair"),
        (lambda: sm.aapga(delta=float("nan")), "delta must be finite"),
        (lambda: sm.aapga(shrink=1.5), "shrink"),
        (lambda: sm.pga(increase=0.5), "increase"),
        (lambda: sm.frank_wolfe_gap(_F, _CARD, jnp.zeros(4)), r"x must have shape \(6,\)"),
        # greedy
        (lambda: sm.naive_greedy(_M, _CARD), "f must be an SCM"),
        (lambda: sm.lazy_greedy(_F, sm.cardinality(9)), "k must be at most"),
        (lambda: sm.lazy_greedy(_F, _CARD, cost_benefit=True), "cost_benefit=True needs"),
        (lambda: sm.stochastic_greedy(_F, _CARD, 0), "key must be a jax.random key"),
        (lambda: sm.stochastic_greedy(_F, _CARD, _KEY, epsilon=2.0), "epsilon must be"),
        (lambda: sm.cost_benefit_greedy(_F, _CARD), "constraint of type Knapsack"),
        (lambda: sm.partition_greedy(_F, _CARD), "constraint of type PartitionMatroid"),
        # rounding: points outside the polytope, shapes, dtypes, keys, empty input
        (lambda: sm.pipage(jnp.full(5, 0.6), sm.cardinality(2)), "x must lie in the constraint"),
        (lambda: sm.pipage(jnp.full(5, 1.5), sm.cardinality(5)), r"x must lie in \[0, 1\]"),
        (lambda: sm.pipage(jnp.full(N, jnp.nan), _CARD), r"x must lie in \[0, 1\]"),
        (lambda: sm.pipage(jnp.full(4, 0.2), _PART), r"x must have shape \(6,\)"),
        (lambda: sm.pipage(jnp.zeros(N, int), _CARD), "x must be a floating"),
        (lambda: sm.pipage(jnp.zeros(N, complex), _CARD), "x must be real"),
        (lambda: sm.pipage(jnp.zeros(0), _CARD), "x has an empty axis"),
        (lambda: sm.pipage(_X, _CARD, key=3), "key must be a jax.random key"),
        (lambda: sm.pipage(_X, _CARD), "key must be a jax.random key"),
        (lambda: sm.pipage(_X, _KNAP, _KEY), "use knapsack_rounding"),
        (lambda: sm.knapsack_rounding(jnp.ones(5), sm.knapsack(jnp.ones(5), 2.0)), "x must lie"),
        (lambda: sm.knapsack_rounding(jnp.full(4, 0.2), _KNAP, _KEY), r"x must have shape \(6,\)"),
        (lambda: sm.knapsack_rounding(_X, _CARD, _KEY), "needs a Knapsack"),
        (lambda: sm.fill(_F, _CARD, jnp.zeros(4, bool), _X), r"S must have shape \(6,\)"),
        (lambda: sm.fill(_F, _CARD, jnp.zeros(N), _X), "S must be a boolean"),
        (lambda: sm.fill(_F, _CARD, jnp.zeros(N, bool), jnp.zeros(4)), "priority must have"),
        (lambda: sm.round_solution(_F, _CARD, jnp.full(4, 0.2), _KEY), r"x must have shape \(6,\)"),
        (lambda: sm.round_solution(_F, _CARD, _X, 0), "key must be a jax.random key"),
        (lambda: sm.round_solution(_F, _CARD, jnp.full(N, 0.9), _KEY), "x must lie in the"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def _certified(f, constraint, res, tol):
    """SUCCESS means relative Frank-Wolfe gap <= tol at the returned point (recomputed)."""
    value = float(f.extension(res.x))
    gap = float(sm.frank_wolfe_gap(f, constraint, res.x))
    assert max(gap, 0.0) <= tol * max(value, 1e-300), (gap, value)
    assert bool(res.feasible)
    np.testing.assert_allclose(float(res.value), float(f.value(res.selected)), rtol=1e-12)


def test_nan_start_is_nonfinite_not_success():
    res = sm.maximize(_F, _CARD, x0=jnp.full(N, jnp.nan), max_steps=20)
    assert int(res.status) == Status.NONFINITE


@pytest.mark.parametrize("x0", [jnp.full(N, 5.0), jnp.full(N, -3.0), jnp.ones(N, jnp.float16)])
def test_start_outside_the_polytope_or_in_float16_is_projected_and_certified(x0):
    res = sm.maximize(_F, _CARD, x0=x0, tol=1e-6)
    assert int(res.status) == Status.SUCCESS
    x = np.asarray(res.x)
    assert x.min() >= 0 and x.max() <= 1 + 1e-12 and x.sum() <= 2 + 1e-9
    _certified(_F, _CARD, res, 1e-6)


def test_tol_none_means_the_drivers_default_and_is_certified():
    """``tol=None`` is the driver's default tolerance (``jaxsolve.default_tol``), as in
    ``jaxsolve.solve``; it used to reach a ``None >= 0`` comparison (a raw TypeError)."""
    res = sm.maximize(_F, _CARD, tol=None)
    assert int(res.status) == Status.SUCCESS
    _certified(_F, _CARD, res, float(jaxsolve.default_tol(res.x)))


@pytest.mark.parametrize(
    "M",
    [_M.at[0].multiply(1e8), _M * 1e8, _M * 1e-8],  # one row 1e8 times the others; all
    ids=["row_1e8", "all_1e8", "all_1e-8"],
)
def test_badly_scaled_data_succeeds_only_when_certified(M):
    """Same phi, constraint and shapes as the cases above: one compiled solve for all."""
    f = sm.SCM.create(M, phi="log1p")
    res = sm.maximize(f, _CARD, tol=1e-6)
    assert int(res.status) == Status.SUCCESS
    _certified(f, _CARD, res, 1e-6)


def test_padded_sparse_m_is_accepted():
    """JAX pads a BCOO with out-of-range indices holding zeros: not an out-of-range entry."""
    M = jnp.array([[1.0, 0, 0, 2], [0, 0, 3, 0], [0, 1, 0, 0]])
    f = sm.SCM.create(sparse.BCOO.fromdense(M, nse=7))
    np.testing.assert_allclose(
        np.asarray(f.singleton_values()), np.asarray(sm.SCM.create(M).singleton_values())
    )


@pytest.mark.parametrize("solver", [sm.pga, sm.aapga], ids=["pga", "aapga"])
def test_line_search_breakdown_reports_a_point_of_the_polytope(solver):
    """lipschitz=1e-30 in float32: every line-search trial is rejected (BREAKDOWN) and the
    last one, the projection of y + g/L with |g/L| ~ 1e19, cannot be resolved in float32
    (it summed to 6 under cardinality(5), and maximize rounded it to a set of 6 items,
    feasible=False). The result must be the last certified point, inside P."""
    P = jax.random.uniform(jax.random.key(0), (30, 20), maxval=0.2, dtype=jnp.float32)
    f = sm.probabilistic_coverage(P)
    card = sm.cardinality(5)
    res = sm.maximize(f, card, solver=solver(lipschitz=1e-30))
    assert int(res.status) == Status.BREAKDOWN
    x = np.asarray(res.x)
    assert x.min() >= 0 and x.max() <= 1 and x.sum() <= 5 * (1 + 1e-6), x.sum()
    assert bool(res.feasible) and int(res.selected.sum()) <= 5
    np.testing.assert_allclose(float(res.relaxation), float(f.extension(res.x)), rtol=1e-5)
    assert float(res.upper_bound) >= float(res.relaxation)
