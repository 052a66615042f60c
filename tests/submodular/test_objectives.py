"""SCM objectives: extension = f on sets, supergradient = grad / right derivative."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

from jaxsolve import submodular as sm
from tests.submodular._problems import all_masks, np_value, random_scm

N, M_ROWS = 10, 7


@pytest.mark.parametrize("phi", ["sqrt", "log1p", "coverage", "saturate"])
def test_extension_equals_f_on_sets(phi):
    rng = np.random.default_rng(1)
    M, w = random_scm(rng, M_ROWS, N)
    cap = rng.uniform(0.5, 2.0, M_ROWS)
    f = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), phi, cap if phi == "saturate" else None)
    masks = all_masks(N)[::7]
    ours = np.asarray(jax.vmap(f.extension)(jnp.asarray(masks)))
    ref = np.array([np_value(M, w, phi, S, cap) for S in masks])
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        np.asarray(f.singleton_values()),
        [np_value(M, w, phi, np.eye(N)[j], cap) for j in range(N)],
        atol=1e-12,
    )


@pytest.mark.parametrize("phi", ["sqrt", "log1p", "coverage"])
def test_supergradient_equals_grad_where_smooth(phi):
    rng = np.random.default_rng(2)
    M, w = random_scm(rng, M_ROWS, N, density=1.0)  # z > 0 everywhere: phi smooth there
    f = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), phi)
    for x in rng.uniform(0.05, 1.0, (5, N)):
        x = jnp.asarray(x)
        np.testing.assert_allclose(f.supergradient(x), jax.grad(f.extension)(x), rtol=1e-13)


def test_supergradient_right_derivative_at_kink():
    # saturate: min(z, c); z = 1 exactly at the cap for row 0: right derivative 0 there
    M = jnp.array([[1.0, 0.5], [0.25, 1.0]])
    f = sm.SCM.create(M, jnp.array([1.0, 2.0]), "saturate", cap=jnp.array([1.0, 3.0]))
    x = jnp.array([1.0, 0.0])
    g = np.asarray(f.supergradient(x))
    h = 1e-7
    right = [(float(f.extension(x + h * e)) - float(f.extension(x))) / h for e in np.eye(2)]
    np.testing.assert_allclose(g, right, atol=1e-6)
    np.testing.assert_allclose(g, [0.0 * 1.0 + 2.0 * 0.25, 0.0 * 0.5 + 2.0 * 1.0])


def test_user_callable_and_sparse_equal_dense():
    rng = np.random.default_rng(3)
    M, w = random_scm(rng, M_ROWS, N)
    dense = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), "log1p")
    user = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), jnp.log1p)
    sp = sm.SCM.create(sparse.BCOO.fromdense(jnp.asarray(M)), jnp.asarray(w), "log1p")
    x = jnp.asarray(rng.uniform(size=N))
    evaluate = jax.jit(lambda f, x: (f.extension(x), f.supergradient(x), f.singleton_values()))
    ref = evaluate(dense, x)
    for other in (user, sp):
        for a, b in zip(evaluate(other, x), ref, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-13)


def test_constructors_match_their_definitions():
    rng = np.random.default_rng(4)
    P = rng.uniform(0, 0.5, (N, 6)) * (rng.uniform(size=(N, 6)) < 0.5)
    wt = rng.uniform(1, 2, 6)
    f = sm.probabilistic_coverage(jnp.asarray(P), jnp.asarray(wt))
    fs = sm.probabilistic_coverage(sparse.BCOO.fromdense(jnp.asarray(P)), jnp.asarray(wt))
    X = rng.uniform(0, 1, (N, 4))
    fb = sm.feature_based(jnp.asarray(X), "sqrt")
    sc = sm.saturated_coverage(jnp.asarray(X), 1.5)
    masks = all_masks(N)[::37].astype(bool)
    values = {
        name: np.asarray(jax.vmap(g.value)(jnp.asarray(masks)))
        for name, g in (("f", f), ("fs", fs), ("fb", fb), ("sc", sc))
    }
    for t, S in enumerate(masks):
        cov = np.sum(wt * (1 - np.prod(np.where(S[:, None], 1 - P, 1.0), axis=0)))
        np.testing.assert_allclose(values["f"][t], cov, rtol=1e-13)
        np.testing.assert_allclose(values["fs"][t], cov, rtol=1e-13)
        np.testing.assert_allclose(values["fb"][t], np.sum(np.sqrt(X[S].sum(0))), rtol=1e-13)
        np.testing.assert_allclose(
            values["sc"][t], np.sum(np.minimum(X[S].sum(0), 1.5)), rtol=1e-13
        )


def test_sparse_layouts_equal_dense_and_differentiate_through_m():
    """`create` stores a balanced BCOO row by row (`row_width`) and keeps a skewed one
    (one long row) as it is; both equal the dense SCM, and the gradient of the
    extension with respect to the stored values is the dense gradient at those entries."""
    rng = np.random.default_rng(5)
    m, n = 40, 30
    balanced = rng.uniform(size=(m, n)) * (rng.uniform(size=(m, n)) < 0.2)
    skewed = balanced * (rng.uniform(size=(m, n)) < 0.3)
    skewed[0] = rng.uniform(0.1, 1.0, n)  # one full row: padding would triple the storage
    w = rng.uniform(0.5, 1.5, m)
    x = jnp.asarray(rng.uniform(size=n))
    for M, padded in ((balanced, True), (skewed, False)):
        dense = sm.SCM.create(jnp.asarray(M), jnp.asarray(w), "sqrt")
        sp = sm.SCM.create(sparse.BCOO.fromdense(jnp.asarray(M)), jnp.asarray(w), "sqrt")
        assert (sp.row_width is not None) == padded
        np.testing.assert_allclose(sp.modular(x), dense.modular(x), rtol=1e-13)
        np.testing.assert_allclose(sp.supergradient(x), dense.supergradient(x), rtol=1e-13)
        g_dense = eqx.filter_grad(lambda g: g.extension(x))(dense).M
        g_data = eqx.filter_grad(lambda g: g.extension(x))(sp).M.data
        idx = np.asarray(sp.M.indices)
        inside = idx[:, 1] < n
        np.testing.assert_allclose(
            np.asarray(g_data)[inside],
            np.asarray(g_dense)[idx[inside, 0], idx[inside, 1]],
            rtol=1e-12,
        )
        if padded:
            assert np.all(np.asarray(sp.M.data)[~inside] == 0)
