"""Constraint polytopes: approximate projection within delta, LMO = LP optimum."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

from jaxsolve import submodular as sm

N = 12


def _constraints():
    costs = jnp.linspace(0.5, 2.0, N)
    return [
        (sm.cardinality(4), np.ones((1, N)), np.array([4.0])),
        (sm.knapsack(costs, 5.0), np.asarray(costs)[None, :], np.array([5.0])),
        (
            sm.partition_matroid(jnp.arange(N) % 3, jnp.array([1, 2, 1])),
            np.stack([(np.arange(N) % 3 == g).astype(float) for g in range(3)]),
            np.array([1.0, 2.0, 1.0]),
        ),
    ]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_approximate_projection_is_feasible_and_within_delta(which):
    c, A, b = _constraints()[which]
    rng = np.random.default_rng(which)
    project = jax.jit(lambda c, y: c.project(y))
    approximate = jax.jit(lambda c, y, d: c.project_approx(y, d))
    for _ in range(5):
        y = jnp.asarray(rng.normal(0.5, 1.0, N) * 2)
        exact = np.asarray(project(c, y))
        assert np.all(A @ exact <= b + 1e-12) and exact.min() >= 0 and exact.max() <= 1
        for delta in (1e-1, 1e-4, 1e-9):
            approx = np.asarray(approximate(c, y, delta))
            assert np.linalg.norm(approx - exact) <= delta
            assert np.all(A @ approx <= b + 1e-12) and approx.min() >= 0 and approx.max() <= 1
    # a coarse delta stops the bisection early: not the exact projection
    y = jnp.full(N, 0.9).at[0].set(3.0)
    assert 0 < np.linalg.norm(np.asarray(approximate(c, y, 0.3) - project(c, y))) <= 0.3


@pytest.mark.parametrize("which", [0, 1, 2])
def test_lmo_is_the_lp_optimum(which):
    c, A, b = _constraints()[which]
    rng = np.random.default_rng(10 + which)
    for _ in range(4):
        g = rng.normal(size=N)
        s = np.asarray(c.lmo(jnp.asarray(g)))
        assert np.all(A @ s <= b + 1e-12) and s.min() >= 0 and s.max() <= 1
        lp = linprog(-g, A_ub=A, b_ub=b, bounds=[(0, 1)] * N, method="highs")
        np.testing.assert_allclose(g @ s, -lp.fun, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(
            float(c.support(jnp.asarray(g))), -lp.fun, rtol=1e-10, atol=1e-12
        )


def test_cardinality_support_without_sort_equals_top_k_sum():
    """The bisection's value is the sum of the k largest positive entries: ties at the k-th
    entry, fewer than k positive entries, all negative, n = 5000; float32 and under vmap."""
    rng = np.random.default_rng(7)
    support = jax.jit(lambda c, g: c.support(g))
    for n, k in ((5000, 500), (5000, 50), (12, 4), (12, 12)):
        c = sm.cardinality(k)
        for case in range(4):
            g = rng.normal(size=n)
            if case == 1:
                g = np.round(g, 1)  # many ties, also at the k-th entry
            elif case == 2:
                g = -np.abs(g)
            elif case == 3:
                g[: n - k + 2] = -1.0  # k - 2 positive entries
            top = np.sort(np.maximum(g, 0))[::-1][:k].sum()
            np.testing.assert_allclose(
                float(support(c, jnp.asarray(g))), top, rtol=1e-12, atol=1e-12
            )
    g32 = rng.normal(size=1000).astype(np.float32)
    top32 = np.sort(np.maximum(g32, 0).astype(np.float64))[::-1][:100].sum()
    np.testing.assert_allclose(
        float(support(sm.cardinality(100), jnp.asarray(g32))), top32, rtol=1e-5
    )
    G = rng.normal(size=(6, 40))
    ks = jnp.arange(1.0, 7.0)
    batched = jax.vmap(lambda k, g: sm.cardinality(k).support(g))(ks, jnp.asarray(G))
    loop = [np.sort(np.maximum(G[i], 0))[::-1][: i + 1].sum() for i in range(6)]
    np.testing.assert_allclose(np.asarray(batched), loop, rtol=1e-12)


def test_start_is_feasible_and_feasible_check():
    for c, A, b in _constraints():
        x = np.asarray(c.start(N, jnp.float64))
        assert np.all(A @ x <= b + 1e-12) and x.min() >= 0 and x.max() <= 1
    card, knap, part = (c for c, _, _ in _constraints())
    S = np.zeros(N, bool)
    S[:4] = True
    assert bool(card.feasible(S)) and not bool(card.feasible(np.ones(N, bool)))
    assert bool(knap.feasible(S)) and not bool(knap.feasible(np.ones(N, bool)))
    assert not bool(part.feasible(S))  # items 0 and 3 are both in group 0 (cap 1)
    assert bool(part.feasible(np.isin(np.arange(N), [0, 1, 4, 2])))


def test_maximize_default_key_is_key_zero():
    """`key=None` is the documented reproducible default, `jax.random.key(0)`."""
    M = jnp.asarray(np.random.default_rng(4).uniform(0, 1, (6, 12)))
    f = sm.SCM.create(M, phi="sqrt")
    a = sm.maximize(f, sm.cardinality(3), max_steps=50)
    b = sm.maximize(f, sm.cardinality(3), jax.random.key(0), max_steps=50)
    np.testing.assert_array_equal(np.asarray(a.selected), np.asarray(b.selected))
    assert int(np.asarray(a.selected).sum()) == 3
