"""maximize (AAPGA + rounding) against brute force on n = 16, k = 4."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import submodular as sm

N, K, ROWS = 16, 4, 10
PHIS = ("sqrt", "log1p", "coverage", "saturate")


def _batch(seed, count):
    rng = np.random.default_rng(seed)
    M = rng.uniform(0, 1, (count, ROWS, N)) * (rng.uniform(size=(count, ROWS, N)) < 0.35)
    w = rng.uniform(0.5, 1.5, (count, ROWS))
    cap = rng.uniform(0.5, 1.5, (count, ROWS))
    costs = rng.uniform(0.5, 2.0, (count, N))
    return M, w, cap, costs


def _phi_np(phi, z, cap):
    return {
        "sqrt": np.sqrt,
        "log1p": np.log1p,
        "coverage": lambda z: -np.expm1(-z),
        "saturate": lambda z: np.minimum(z, cap[:, None, :]),
    }[phi](z)


SUBSETS = np.array(list(itertools.combinations(range(N), K)))
ALL = np.array(list(itertools.product([0, 1], repeat=N)), dtype=np.float64)
GROUPS = np.arange(N) % 4


def _brute(phi, M, w, cap, costs, budget):
    """OPT for cardinality, knapsack and the partition matroid (one item per group)."""
    card = np.zeros((len(SUBSETS), N))
    card[np.arange(len(SUBSETS))[:, None], SUBSETS] = 1
    part = card[np.all(np.sort(GROUPS[SUBSETS], axis=1) == np.arange(4), axis=1)]
    out = []
    for masks, feasible in (
        (card, None),
        (ALL, ALL @ costs.T <= budget[None, :]),
        (part, None),
    ):
        z = np.einsum("sn,bmn->bsm", masks, M)
        vals = np.einsum("bm,bsm->bs", w, _phi_np(phi, z, cap))
        if feasible is not None:
            vals = np.where(feasible.T, vals, -np.inf)
        out.append(vals.max(axis=1))
    return out


def _ours(phi, M, w, cap, costs, budget, kinds):
    phi_fn = getattr(sm, phi)

    @jax.jit
    def run(M, w, cap, costs, budget, key):
        f = sm.SCM(M, w, cap, phi_fn)
        cons = {
            "cardinality": sm.Cardinality(jnp.asarray(float(K))),
            "knapsack": sm.Knapsack(costs, budget),
            "partition": sm.PartitionMatroid(jnp.asarray(GROUPS, jnp.int32), jnp.ones(4)),
        }
        # maximize's default tol (1e-3): the quality it promises is that of its default
        res = [sm.maximize(f, cons[kind], key, max_steps=300) for kind in kinds]
        return [(r.value, r.feasible, f.value(r.selected), r.upper_bound) for r in res]

    keys = jax.random.split(jax.random.key(0), M.shape[0])
    return jax.vmap(run)(*(jnp.asarray(a) for a in (M, w, cap, costs, budget)), keys)


KINDS = ("cardinality", "knapsack", "partition")


def _check(phis, count, kinds=KINDS):
    ratios = {kind: [] for kind in kinds}
    for i, phi in enumerate(phis):
        M, w, cap, costs = _batch(i, count)
        budget = costs.sum(axis=1) / 4
        opt = dict(zip(KINDS, _brute(phi, M, w, cap, costs, budget), strict=True))
        ours = _ours(phi, M, w, cap, costs, budget, kinds)
        for name, (value, feasible, recomputed, upper) in zip(kinds, ours, strict=True):
            o = opt[name]
            value, upper = np.asarray(value), np.asarray(upper)
            assert np.all(np.asarray(feasible)), f"{name}, {phi}: an infeasible set"
            np.testing.assert_allclose(value, np.asarray(recomputed), rtol=1e-12)
            assert np.all(value <= o * (1 + 1e-12)), f"{name}, {phi}: above OPT?"
            assert np.all(upper >= o * (1 - 1e-9)), f"{name}, {phi}: the bound is below OPT"
            ratios[name].extend((value / o).tolist())
    r = {k: np.array(v) for k, v in ratios.items()}
    if "cardinality" in r:
        card = r["cardinality"]
        assert np.median(card) >= 0.95 and card.min() >= 1 - 1 / np.e, (np.median(card), card.min())
    if "knapsack" in r:
        knap = r["knapsack"]
        assert np.median(knap) >= 0.9 and knap.min() >= 0.5, (np.median(knap), knap.min())
    if "partition" in r:
        assert r["partition"].min() >= 0.5, r["partition"].min()
    return r


@pytest.mark.slow  # the 200-SCM brute force is the slow tier too (10 s)
def test_brute_force_small():
    # one compilation: the cardinality case on coverage (all three: the slow test)
    _check(("coverage",), 24, ("cardinality",))


@pytest.mark.slow
def test_brute_force_200_scms():
    r = _check(PHIS, 50)
    card, knap, part = r["cardinality"], r["knapsack"], r["partition"]
    print(
        f"\ncardinality median {np.median(card):.4f} min {card.min():.4f}; "
        f"knapsack median {np.median(knap):.4f} min {knap.min():.4f}; "
        f"partition median {np.median(part):.4f} min {part.min():.4f}; "
        f"exactly optimal: {np.mean(card > 1 - 1e-12):.2f} / {np.mean(knap > 1 - 1e-12):.2f} / "
        f"{np.mean(part > 1 - 1e-12):.2f}"
    )
