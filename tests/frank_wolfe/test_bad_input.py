"""Bad input to Frank-Wolfe (issue 23): a start outside the set, a non-finite start, a
wrong-length start end in BREAKDOWN or an error naming ``x0`` (an infeasible start gave
SUCCESS with an infeasible x and a "certified" gap of 0 or below)."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status
from jaxsolve.frank_wolfe import frank_wolfe, lmo, optimistic_frank_wolfe

_B = jnp.array([0.2, 0.5, 0.3, -0.4])


def _quad(x, b):
    return 0.5 * jnp.sum((x - b) ** 2)


def _mat(x, b):
    return 0.5 * jnp.sum((x - jnp.diag(b)) ** 2)


# (case, oracle, cost, infeasible start, feasible start)
SETS = [
    ("simplex", lmo.probability_simplex(), _quad, jnp.zeros(4), jnp.full(4, 0.25)),
    ("unit simplex", lmo.unit_simplex(), _quad, jnp.full(4, 0.5), jnp.zeros(4)),
    ("l1", lmo.l1_ball(), _quad, jnp.full(4, 1.0), jnp.zeros(4)),
    ("l2", lmo.l2_ball(), _quad, jnp.full(4, 1.0), jnp.zeros(4)),
    ("linf", lmo.linf_ball(), _quad, jnp.full(4, 2.0), jnp.zeros(4)),
    ("box", lmo.box(0.0, 1.0), _quad, jnp.full(4, -1.0), jnp.zeros(4)),
    ("k_sparse", lmo.k_sparse(2), _quad, jnp.ones(4), jnp.zeros(4)),
    ("hypersimplex", lmo.hypersimplex(2), _quad, jnp.zeros(4), jnp.full(4, 0.5)),
    ("knapsack", lmo.knapsack(jnp.ones(4), 1.0), _quad, jnp.full(4, 0.9), jnp.zeros(4)),
    ("nuclear", lmo.nuclear_ball(method="svd"), _mat, jnp.eye(4), jnp.zeros((4, 4))),
    ("spectraplex", lmo.spectraplex(method="eigh"), _mat, jnp.zeros((4, 4)), jnp.eye(4) / 4),
    ("simplex nan", lmo.probability_simplex(), _quad, jnp.full(4, jnp.nan), jnp.full(4, 0.25)),
]


@pytest.mark.parametrize("case,oracle,cost,bad,good", SETS, ids=[c[0] for c in SETS])
def test_start_outside_the_set_is_breakdown(case, oracle, cost, bad, good):
    solver = frank_wolfe(cost, oracle, step="short", lipschitz=1.0)
    sol = jaxsolve.solve(solver, bad, _B, tol=1e-6, max_steps=200)
    assert int(sol.status) in (Status.BREAKDOWN, Status.NONFINITE), Status(int(sol.status)).name
    ok = jaxsolve.solve(solver, good, _B, tol=1e-6, max_steps=2000)
    assert int(ok.status) in (Status.SUCCESS, Status.MAX_STEPS)
    assert float(oracle.violation(ok.x)) <= 1e-9
    assert float(ok.error) >= -1e-12


def test_simplex_answer_and_certificate_from_a_feasible_start():
    """The projection of b onto the simplex is the minimizer: FW's certificate bounds the
    true gap from above."""
    from jaxsolve import projections

    solver = frank_wolfe(
        _quad, lmo.probability_simplex(), step="short", lipschitz=1.0, variant="away"
    )
    sol = jaxsolve.solve(solver, jnp.full(4, 0.25), _B, tol=1e-10, max_steps=2000)
    x_star = projections.simplex(_B)
    true_gap = float(_quad(sol.x, _B) - _quad(x_star, _B))
    assert int(sol.status) == Status.SUCCESS
    assert 0.0 <= true_gap <= float(sol.error) + 1e-15
    np.testing.assert_allclose(sol.x, x_star, atol=1e-5)


def test_optimistic_start_outside_is_breakdown():
    solver = optimistic_frank_wolfe(_quad, lmo.probability_simplex())
    sol = jaxsolve.solve(solver, jnp.zeros(4), _B, tol=1e-6, max_steps=100)
    assert int(sol.status) == Status.BREAKDOWN


def test_wrong_length_x0_names_x0():
    solver = frank_wolfe(_quad, lmo.probability_simplex())
    with pytest.raises(ValueError, match="x0"):
        jaxsolve.solve(solver, jnp.full(3, 1 / 3), _B)


@pytest.mark.parametrize("factory", [frank_wolfe, optimistic_frank_wolfe])
def test_huge_scale_gap_is_not_lost_to_cancellation(factory):
    """b scaled by 1e150 (f ~ 1e300): the certified gap f - (f - g) rounded to 0 and the
    start x0 = 1/4 was SUCCESS (optimistic FW: after one step, at [0.08, 0.75, 0.08,
    0.08]); the minimum over the simplex is the vertex e_1."""
    sol = jaxsolve.solve(factory(_quad, lmo.probability_simplex()), jnp.full(4, 0.25), _B * 1e150)
    if factory is frank_wolfe:
        assert int(sol.status) == Status.SUCCESS
        np.testing.assert_array_equal(np.asarray(sol.x), [0.0, 1.0, 0.0, 0.0])
    else:  # O(1/t): an honest MAX_STEPS (its gap cannot reach tol at f ~ 1e300), near e_1
        assert int(sol.status) == Status.MAX_STEPS
        np.testing.assert_allclose(np.asarray(sol.x), [0.0, 1.0, 0.0, 0.0], atol=1e-5)
