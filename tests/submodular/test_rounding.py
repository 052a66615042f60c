"""Randomized pipage / knapsack rounding: unbiased moves, preserved sums, always feasible."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import submodular as sm
from tests.submodular._problems import random_scm

N, DRAWS = 12, 4000


def _draws(fn, x, c):
    keys = jax.random.split(jax.random.key(0), DRAWS)
    return np.asarray(jax.jit(jax.vmap(lambda k: fn(x, c, k)))(keys))


def test_pipage_cardinality_is_unbiased_and_keeps_the_sum():
    x = np.random.default_rng(0).uniform(size=N)
    x = x * 5.0 / x.sum()  # sum exactly 5 = k, a point on the base polytope
    S = _draws(sm.pipage, jnp.asarray(x), sm.cardinality(5))
    assert np.all(S.sum(axis=1) == 5)
    sigma = np.sqrt(x * (1 - x) / DRAWS)
    assert np.all(np.abs(S.mean(axis=0) - x) <= 4.5 * sigma + 1e-12)


def test_pipage_partition_keeps_every_group_sum():
    groups = np.arange(N) % 3
    caps = np.array([2.0, 1.0, 3.0])
    x = np.random.default_rng(1).uniform(0.05, 1, N)
    for g in range(3):  # scale each group to sum to its cap (integral sums: no round-up)
        x[groups == g] *= caps[g] / x[groups == g].sum()
    x = np.minimum(x, 1.0)
    c = sm.partition_matroid(jnp.asarray(groups), jnp.asarray(caps))
    S = _draws(sm.pipage, jnp.asarray(x), c)
    for g in range(3):
        sums = S[:, groups == g].sum(axis=1)
        assert np.all(sums <= caps[g]) and np.all(sums >= np.floor(x[groups == g].sum() + 1e-9))
    sigma = np.sqrt(x * (1 - x) / DRAWS)
    # all groups end integral except where a cap clipped x: unbiased there
    assert np.all(np.abs(S.mean(axis=0) - x) <= 4.5 * sigma + 0.02)


def test_knapsack_rounding_keeps_the_budget_and_the_cost_in_mean():
    rng = np.random.default_rng(2)
    costs = rng.uniform(0.5, 2.0, N)
    x = rng.uniform(size=N)
    budget = float(costs @ x)
    c = sm.knapsack(jnp.asarray(costs), budget)
    S = _draws(sm.knapsack_rounding, jnp.asarray(x), c)
    spent = S @ costs
    assert np.all(spent <= budget * (1 + 1e-12))
    # only the last fractional item is rounded down: the cost drops by < one item's cost
    assert spent.mean() >= budget - costs.max()
    assert spent.mean() <= budget


def test_round_solution_is_always_feasible_and_fills_up():
    rng = np.random.default_rng(3)
    M, w = random_scm(rng, 8, N)
    f = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), "sqrt")
    cons = [
        sm.cardinality(4),
        sm.knapsack(jnp.asarray(rng.uniform(0.5, 2.0, N)), 3.0),
        sm.partition_matroid(jnp.arange(N) % 4, jnp.array([1, 0, 2, 1])),
    ]

    @jax.jit
    def run(c, y, key):
        S, v = sm.round_solution(f, c, c.project(y), key, num_rounds=2)
        return S, v, c.feasible(S), f.value(S)

    for c in cons:
        for i in range(8):
            S, v, ok, value = run(c, jnp.asarray(rng.uniform(-0.5, 1.5, N)), jax.random.key(i))
            assert bool(ok)
            np.testing.assert_allclose(float(v), float(value), rtol=1e-14)
            if isinstance(c, sm.Cardinality):
                assert int(S.sum()) == 4  # the fill completes the set
            if isinstance(c, sm.PartitionMatroid):
                assert not bool(S[jnp.arange(N) % 4 == 1].any())  # cap 0


def _fill_one_by_one(groups, caps, S, order):
    """The fill's definition: walk `order`, add an item while its group has room."""
    S = S.copy()
    room = np.asarray(caps, int) - np.bincount(groups[S], minlength=len(caps))
    for j in order:
        if not S[j] and room[groups[j]] > 0:
            S[j] = True
            room[groups[j]] -= 1
    return S


def test_fill_adds_what_one_by_one_insertion_adds():
    rng = np.random.default_rng(7)
    n = 40
    M, w = random_scm(rng, 10, n)
    f = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), "sqrt")
    single = np.asarray(f.singleton_values())
    for _ in range(20):
        g = int(rng.integers(1, 6))
        groups = rng.integers(0, g, n)
        groups[:g] = np.arange(g)  # no empty group
        caps = rng.integers(0, 8, g)
        S = rng.uniform(size=n) < 0.15
        S &= np.array([S[groups == groups[j]].sum() <= caps[groups[j]] for j in range(n)])
        priority = np.round(rng.uniform(size=n), 1)  # ties: broken by f({j})
        c = sm.partition_matroid(jnp.asarray(groups), jnp.asarray(caps))
        ours = np.asarray(sm.fill(f, c, jnp.asarray(S), jnp.asarray(priority)))
        order = np.lexsort((-single, -priority))
        np.testing.assert_array_equal(ours, _fill_one_by_one(groups, caps, S, order))


def test_sparse_derandomized_rounding_equals_the_dense_one():
    from jax.experimental import sparse

    from jaxsolve.submodular.rounding import _round_once

    rng = np.random.default_rng(11)
    n, m = 60, 30
    M = rng.uniform(size=(m, n)) * (rng.uniform(size=(m, n)) < 0.2)
    w = rng.uniform(0.5, 1.5, m)
    for phi in ("sqrt", "coverage", "log1p"):
        dense = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), phi)
        sp = sm.SCM.create(sparse.BCOO.fromdense(jnp.asarray(M)), jnp.asarray(w), phi)
        for c in (sm.cardinality(7), sm.partition_matroid(jnp.arange(n) % 3, jnp.array([2, 3, 1]))):
            x = c.project(jnp.asarray(rng.uniform(size=n)))
            a = np.asarray(_round_once(dense, c, x, None, dense))
            b = np.asarray(_round_once(sp, c, x, None, sp))
            np.testing.assert_array_equal(a, b)


def test_default_rounds_one_random_candidate_when_many_items_are_fractional():
    """num_rounds=None draws 8 randomized roundings (keys split 8 ways) and keeps the best,
    unless more than MANY_FRACTIONAL items are fractional: then only the first. A BCOO
    SCM without its column index has no derandomized candidate, so the randomized ones
    decide alone."""
    from jax.experimental import sparse

    from jaxsolve.submodular.rounding import MANY_FRACTIONAL, _pairwise_pass

    rng = np.random.default_rng(11)
    for n, few in ((120, True), (600, False)):
        M, w = random_scm(rng, 40, n, density=0.1)
        Mb = sparse.BCOO.fromdense(jnp.asarray(M))
        f = sm.SCM(Mb, jnp.asarray(w), jnp.ones(40), sm.sqrt)  # no column index
        c = sm.cardinality(n // 6)
        x = c.project(jnp.asarray(rng.uniform(0.05, 0.3, n)))  # every item fractional
        assert (few and n <= MANY_FRACTIONAL) or (not few and n > MANY_FRACTIONAL)
        key = jax.random.key(5)
        sets = _pairwise_pass(x, c, keys=jax.random.split(key, 8))
        values = [float(f.value(sm.fill(f, c, S, x))) for S in sets]
        S, v = sm.round_solution(f, c, x, key)
        S8, v8 = sm.round_solution(f, c, x, key, num_rounds=8)
        assert float(v8) == max(values)
        assert float(v) == (max(values) if few else values[0]), (float(v), values)
        assert bool(c.feasible(S)) and float(f.value(S)) == float(v)
        if not few:
            assert float(v) < float(v8)  # the other 7 draws are not looked at
