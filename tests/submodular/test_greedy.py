"""Greedy baselines against a NumPy greedy written from the definition."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse

from jaxsolve import submodular as sm
from tests.submodular._problems import np_value, random_scm

N, M_ROWS = 20, 12


def np_greedy(M, w, phi, fits, score=lambda gain, j: gain):
    """Reference greedy: best score among the items `fits(S, j)` allows, ties to the lower index."""
    S = np.zeros(M.shape[1], bool)
    order = []
    while True:
        cands = [j for j in range(M.shape[1]) if not S[j] and fits(S, j)]
        if not cands:
            return order
        base = np_value(M, w, phi, S)
        best, best_score = None, -np.inf
        for j in cands:
            T = S.copy()
            T[j] = True
            s = score(np_value(M, w, phi, T) - base, j)
            if s > best_score:
                best, best_score = j, s
        S[best] = True
        order.append(best)


def _instance(seed, phi="sqrt"):
    rng = np.random.default_rng(seed)
    M, w = random_scm(rng, M_ROWS, N)
    return M, w, sm.SCM.create(jnp.asarray(M), jnp.asarray(w), phi), rng


def _order(res):
    o = np.asarray(res.order)
    return o[o >= 0].tolist()


def test_cardinality_greedies_match_the_reference():
    M, w, f, _ = _instance(0)
    c = sm.cardinality(6)
    ref = np_greedy(M, w, "sqrt", lambda S, j: S.sum() < 6)
    naive = sm.naive_greedy(f, c)
    assert _order(naive) == ref
    assert _order(sm.lazy_greedy(f, c)) == ref
    assert int(sm.lazy_greedy(f, c).num_evals) < int(naive.num_evals)
    # a sample of all n items each step: stochastic greedy is naive greedy
    assert _order(sm.stochastic_greedy(f, c, jax.random.key(0), epsilon=1e-9)) == ref
    sparse_f = sm.SCM.create(sparse.BCOO.fromdense(jnp.asarray(M)), jnp.asarray(w), "sqrt")
    assert _order(sm.naive_greedy(sparse_f, c)) == ref
    np.testing.assert_allclose(
        float(naive.value), np_value(M, w, "sqrt", naive.selected), rtol=1e-13
    )
    np.testing.assert_allclose(np.nansum(np.asarray(naive.gains)), float(naive.value), rtol=1e-12)


def test_stochastic_greedy_is_near_greedy_in_mean():
    M, w, f, _ = _instance(1, "log1p")
    c = sm.cardinality(5)
    best = float(sm.naive_greedy(f, c).value)
    vals = [
        float(sm.stochastic_greedy(f, c, jax.random.key(i), epsilon=0.3).value) for i in range(8)
    ]
    assert np.mean(vals) >= (1 - 1 / np.e - 0.3) * best
    assert len(set(vals)) > 1  # the samples really differ between keys


def test_cost_benefit_greedy_matches_the_reference():
    M, w, f, rng = _instance(2, "coverage")
    costs = rng.uniform(0.5, 2.0, N)
    c = sm.knapsack(jnp.asarray(costs), 4.0)

    def fits(S, j):
        return costs[S].sum() + costs[j] <= 4.0 * (1 + 1e-12)

    ref = np_greedy(M, w, "coverage", fits, lambda gain, j: gain / costs[j])
    assert _order(sm.cost_benefit_greedy(f, c)) == ref
    assert _order(sm.cost_benefit_greedy(f, c, lazy=False)) == ref
    assert _order(sm.naive_greedy(f, c)) == np_greedy(M, w, "coverage", fits)


def test_partition_greedy_matches_the_reference():
    M, w, f, _ = _instance(3, "log1p")
    groups = np.arange(N) % 4
    caps = np.array([1, 2, 0, 3])
    c = sm.partition_matroid(jnp.asarray(groups), jnp.asarray(caps))

    def fits(S, j):
        return S[groups == groups[j]].sum() < caps[groups[j]]

    ref = np_greedy(M, w, "log1p", fits)
    assert _order(sm.partition_greedy(f, c)) == ref
    assert _order(sm.partition_greedy(f, c, lazy=False)) == ref
    assert bool(c.feasible(sm.partition_greedy(f, c).selected))
