"""LMOs against scipy.optimize.linprog (HiGHS) / numpy SVD on random directions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog

from jaxsolve.frank_wolfe import lmo

N = 12
RNG = np.random.default_rng(0)
G = RNG.standard_normal((6, N))
W = RNG.uniform(0.5, 2.0, N)
U = RNG.uniform(0.5, 1.5, N)


def _lp(c, **kw):
    res = linprog(c, method="highs", **kw)
    assert res.status == 0
    return res.fun


def _split(g, A_ub=None, b_ub=None, bounds=(0, None)):
    """Reference for sets written as v = p - q with p, q >= 0."""
    c = np.concatenate([g, -g])
    return _lp(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds)


def ref_value(name, g):
    n = g.size
    if name == "probability_simplex":
        return _lp(g, A_eq=np.ones((1, n)), b_eq=[2.0], bounds=(0, None))
    if name == "unit_simplex":
        return _lp(g, A_ub=np.ones((1, n)), b_ub=[2.0], bounds=(0, None))
    if name == "l1_ball":
        return _split(g, A_ub=np.ones((1, 2 * n)), b_ub=[1.5])
    if name == "linf_ball":
        return _lp(g, bounds=(-0.7, 0.7))
    if name == "box":
        return _lp(g, bounds=list(zip(-U, U, strict=True)))
    if name == "k_sparse":
        return _split(g, A_ub=np.ones((1, 2 * n)), b_ub=[3 * 0.5], bounds=(0, 0.5))
    if name == "hypersimplex":
        return _lp(g, A_eq=np.ones((1, n)), b_eq=[4 * 0.5], bounds=(0, 0.5))
    if name == "knapsack":
        return _lp(g, A_ub=W[None], b_ub=[2.5], bounds=list(zip(np.zeros(n), U, strict=True)))
    raise KeyError(name)


ORACLES = {
    "probability_simplex": lmo.probability_simplex(2.0),
    "unit_simplex": lmo.unit_simplex(2.0),
    "l1_ball": lmo.l1_ball(1.5),
    "linf_ball": lmo.linf_ball(0.7),
    "box": lmo.box(-U, U),
    "k_sparse": lmo.k_sparse(3, 0.5),
    "hypersimplex": lmo.hypersimplex(4, 0.5),
    "knapsack": lmo.knapsack(W, 2.5, upper=U),
}


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_lmo_matches_linprog(name):
    oracle = ORACLES[name]
    batched = jax.jit(jax.vmap(oracle))(jnp.asarray(G))
    for g, v in zip(G, np.asarray(batched), strict=True):
        ref = ref_value(name, g)
        np.testing.assert_allclose(g @ v, ref, rtol=1e-10, atol=1e-10, err_msg=name)
        # the answer is feasible: no point of the set does better than the LP optimum,
        # and v itself attains it, so checking feasibility closes the argument
        np.testing.assert_allclose(np.asarray(oracle(jnp.asarray(g))), v, atol=1e-14)
    _check_feasible(name, np.asarray(batched))


def _check_feasible(name, V, tol=1e-12):
    for v in V:
        if name == "probability_simplex":
            assert v.min() >= -tol and abs(v.sum() - 2.0) < tol
        elif name == "unit_simplex":
            assert v.min() >= -tol and v.sum() <= 2.0 + tol
        elif name == "l1_ball":
            assert np.abs(v).sum() <= 1.5 + tol
        elif name == "linf_ball":
            assert np.abs(v).max() <= 0.7 + tol
        elif name == "box":
            assert np.all(v >= -U - tol) and np.all(v <= U + tol)
        elif name == "k_sparse":
            assert np.abs(v).max() <= 0.5 + tol and np.abs(v).sum() <= 1.5 + tol
        elif name == "hypersimplex":
            assert v.min() >= -tol and v.max() <= 0.5 + tol and abs(v.sum() - 2.0) < tol
        elif name == "knapsack":
            assert v.min() >= -tol and np.all(v <= U + tol) and W @ v <= 2.5 + tol


def test_l2_ball_closed_form():
    o = lmo.l2_ball(3.0)
    for g in G:
        v = np.asarray(o(jnp.asarray(g)))
        np.testing.assert_allclose(g @ v, -3.0 * np.linalg.norm(g), rtol=1e-12)
        assert np.linalg.norm(v) <= 3.0 + 1e-12
    assert np.all(np.asarray(o(jnp.zeros(N))) == 0)


@pytest.mark.parametrize("method", ["lanczos", "svd"])
def test_nuclear_ball_matches_svd(method):
    rng = np.random.default_rng(1)
    o = lmo.nuclear_ball(2.0, steps=40, method=method)
    for shape in [(9, 7), (7, 9)]:
        g = rng.standard_normal(shape)
        v = np.asarray(jax.jit(o)(jnp.asarray(g)))
        s = np.linalg.svd(g, compute_uv=False)
        np.testing.assert_allclose(np.sum(g * v), -2.0 * s[0], rtol=1e-12)
        np.testing.assert_allclose(np.linalg.svd(v, compute_uv=False)[0], 2.0, rtol=1e-12)
        assert np.linalg.matrix_rank(v, tol=1e-9) == 1
    # batched and low-rank gradients (Lanczos breakdown) stay finite and exact
    low = np.outer(rng.standard_normal(9), rng.standard_normal(7))
    batch = jnp.asarray(np.stack([low, 2 * low, rng.standard_normal((9, 7))]))
    V = np.asarray(jax.vmap(o)(batch))
    assert np.all(np.isfinite(V))
    for g, v in zip(np.asarray(batch), V, strict=True):
        np.testing.assert_allclose(np.sum(g * v), -2.0 * np.linalg.norm(g, 2), rtol=1e-10)
    v0 = np.asarray(o(jnp.zeros((9, 7))))  # any point of the ball is optimal for g = 0
    assert np.all(np.isfinite(v0)) and np.linalg.svd(v0, compute_uv=False).sum() <= 2.0 + 1e-12


def test_nuclear_ball_few_lanczos_steps_is_close():
    """12 Lanczos steps on a 50x40 matrix already give sigma_1 to ~1e-8."""
    g = np.random.default_rng(2).standard_normal((50, 40))
    v = np.asarray(lmo.nuclear_ball(1.0, steps=12)(jnp.asarray(g)))
    s1 = np.linalg.norm(g, 2)
    assert -np.sum(g * v) <= s1 * (1 + 1e-12)
    assert -np.sum(g * v) >= s1 * (1 - 1e-6)


@pytest.mark.parametrize("method", ["lanczos", "eigh"])
def test_spectraplex_matches_eigh(method):
    rng = np.random.default_rng(3)
    o = lmo.spectraplex(1.5, method=method)
    for _ in range(3):
        g = rng.standard_normal((8, 8))
        v = np.asarray(jax.jit(o)(jnp.asarray(g)))
        lam = np.linalg.eigvalsh(0.5 * (g + g.T))
        np.testing.assert_allclose(np.sum(g * v), 1.5 * lam[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.trace(v), 1.5, rtol=1e-12)
        assert np.linalg.eigvalsh(v).min() >= -1e-12
    # positive definite gradient with a low-rank part: breakdown must not give a fake 0
    b = rng.standard_normal((8, 2))
    g = np.eye(8) * 3 + b @ b.T
    v = np.asarray(o(jnp.asarray(g)))
    np.testing.assert_allclose(np.sum(g * v), 1.5 * np.linalg.eigvalsh(g)[0], rtol=1e-10)


def test_product_over_pytree():
    o = lmo.product({"a": lmo.probability_simplex(), "b": (lmo.l1_ball(2.0), lmo.box(0.0, 1.0))})
    g = {"a": jnp.array([0.3, -1.0, 2.0]), "b": (jnp.array([0.5, -3.0]), jnp.array([1.0, -1.0]))}
    v = o(g)
    np.testing.assert_allclose(v["a"], [0, 1, 0])
    np.testing.assert_allclose(v["b"][0], [0, 2.0])
    np.testing.assert_allclose(v["b"][1], [0, 1.0])
    assert o.polytope
    vb = jax.vmap(o)(jax.tree.map(lambda z: jnp.stack([z, -z]), g))
    np.testing.assert_allclose(vb["a"][1], [0, 0, 1])


def test_lmo_hash_and_validation():
    assert lmo.l1_ball(2.0) == lmo.l1_ball(2.0) and hash(lmo.l1_ball(2.0)) == hash(lmo.l1_ball(2))
    assert lmo.l1_ball(2.0) != lmo.l1_ball(3.0)
    assert lmo.knapsack(W, 2.5) == lmo.knapsack(W.copy(), 2.5)
    with pytest.raises(ValueError, match="radius"):
        lmo.l1_ball(-1.0)
    with pytest.raises(ValueError, match="k"):
        lmo.k_sparse(0)
    with pytest.raises(ValueError, match="weights"):
        lmo.knapsack([1.0, -2.0], 1.0)
    with pytest.raises(ValueError, match="lower"):
        lmo.box(1.0, 0.0)
    with pytest.raises(TypeError, match="LMO"):
        lmo.product([1, 2])


def test_float32_keeps_dtype():
    g = jnp.asarray(G[0], jnp.float32)
    for o in ORACLES.values():
        assert o(g).dtype == jnp.float32, o
