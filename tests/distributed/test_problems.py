"""Losses, prox operators and data generators against closed forms and SciPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from jaxsolve import distributed as D


@pytest.mark.parametrize(("m", "d"), [(4, 7), (9, 3)])  # Woodbury branch, d x d branch
def test_least_squares_prox_is_the_linear_solve(m, d):
    k1, k2, k3 = jax.random.split(jax.random.key(m), 3)
    A, b, z = (
        jax.random.normal(k1, (m, d)),
        jax.random.normal(k2, (m,)),
        jax.random.normal(k3, (d,)),
    )
    loss, c = D.LeastSquares(), 0.37
    x = loss.prox(z, loss.prox_factor((A, b), c), (A, b), c)
    An, bn = np.asarray(A), np.asarray(b)
    x_ref = np.linalg.solve(np.eye(d) + c / m * An.T @ An, np.asarray(z) + c / m * An.T @ bn)
    np.testing.assert_allclose(x, x_ref, atol=1e-13)


@pytest.mark.parametrize(("m", "d"), [(4, 7), (9, 3)])
def test_least_squares_prox_grad_is_prox_and_grad(m, d):
    # the fused form (two passes over A for the prox at z and the gradient at x)
    # equals the closed-form solve and the gradient A^T (A x - b) / m of NumPy
    k1, k2, k3, k4 = jax.random.split(jax.random.key(m), 4)
    A, b, z, x = (
        jax.random.normal(k, s)
        for k, s in zip((k1, k2, k3, k4), ((m, d), (m,), (d,), (d,)), strict=True)
    )
    loss, c = D.LeastSquares(), 0.37
    p, g = loss.prox_grad(z, loss.prox_factor((A, b), c), (A, b), c, x)
    An, bn = np.asarray(A), np.asarray(b)
    p_ref = np.linalg.solve(np.eye(d) + c / m * An.T @ An, np.asarray(z) + c / m * An.T @ bn)
    np.testing.assert_allclose(p, p_ref, atol=1e-13)
    np.testing.assert_allclose(g, An.T @ (An @ np.asarray(x) - bn) / m, atol=1e-13)


@pytest.mark.parametrize("loss", [D.LeastSquares(), D.Logistic(), D.SmoothedHinge(0.5)])
def test_grads_at_is_grad_at_each_point(loss):
    # three gradients in two passes over A, against jax.grad of the value at each point
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    A = jax.random.normal(k1, (12, 5))
    b = jnp.sign(jax.random.normal(k2, (12,)))
    points = jax.random.normal(k3, (5, 3))
    ref = np.stack([jax.grad(loss.value)(points[:, k], (A, b)) for k in range(3)])
    np.testing.assert_allclose(loss.grads_at(points, (A, b)), ref, atol=1e-13)


@pytest.mark.parametrize("loss", [D.LeastSquares(), D.Logistic(), D.SmoothedHinge(0.5)])
def test_gradients_and_lipschitz(loss):
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    A = jax.random.normal(k1, (12, 5))
    b = jnp.sign(jax.random.normal(k2, (12,)))
    x = jax.random.normal(k3, (5,))
    np.testing.assert_allclose(loss.grad(x, (A, b)), jax.grad(loss.value)(x, (A, b)), atol=1e-13)
    # the Lipschitz constant bounds the gradient's change, and is attained for least squares
    L = float(loss.lipschitz((A, b)))
    ys = jax.random.normal(jax.random.key(5), (50, 5))
    gs = jax.vmap(loss.grad, in_axes=(0, None))(ys, (A, b)) - loss.grad(x, (A, b))
    ratios = np.linalg.norm(gs, axis=1) / np.linalg.norm(ys - x, axis=1)
    assert max(ratios) <= L * (1 + 1e-12)
    if isinstance(loss, D.LeastSquares):
        H = np.asarray(A).T @ np.asarray(A) / 12
        assert L == pytest.approx(np.linalg.eigvalsh(H)[-1], rel=1e-12)


def test_smoothed_hinge_values():
    loss = D.SmoothedHinge(0.5)
    A = jnp.array([[1.0], [1.0], [1.0], [1.0]])
    b = jnp.ones(4)
    # t = x: h(2) = 0, h(0.8) = 0.2^2 / 1 = 0.04, h(0) = 1 - 0.25
    for x, h in ((2.0, 0.0), (0.8, 0.04), (0.0, 0.75)):
        assert float(loss.value(jnp.array([x]), (A, b))) == pytest.approx(h, abs=1e-14)
    with pytest.raises(ValueError, match="mu"):
        D.SmoothedHinge(0.0)


@pytest.mark.parametrize(
    ("reg", "params"),
    [(D.L1(), 0.7), (D.L2Squared(), 0.7), (D.Box(), (-0.3, 0.5)), (D.Zero(), 0.0)],
)
def test_prox_operators_against_scipy(reg, params):
    z = jnp.array([1.3, -0.2, 0.05, -2.0])
    c = 0.6
    x = np.asarray(reg.prox(z, c, jax.tree.map(jnp.asarray, params)))
    zn = np.asarray(z)
    if isinstance(reg, D.Box):
        x_ref = np.clip(zn, -0.3, 0.5)
    else:
        obj = lambda y: c * float(reg.value(jnp.asarray(y), params)) + 0.5 * np.sum((y - zn) ** 2)
        x_ref = minimize(obj, zn, method="Powell", options={"xtol": 1e-12, "ftol": 1e-15}).x
    np.testing.assert_allclose(x, x_ref, atol=1e-7)


def test_generators():
    A, b = D.breast_cancer(30)
    assert A.shape == (30, 18, 30) and b.shape == (30, 18) and A.dtype == jnp.float64
    assert set(np.unique(b)) == {-1.0, 1.0}
    # heterogeneous: the first agents see only one class, the last the other
    assert np.all(np.asarray(b[0]) == -1) and np.all(np.asarray(b[-1]) == 1)
    A, b = D.sparse_binary(jax.random.key(0), 10, 40)
    assert A.shape == (10, 40, 123) and set(np.unique(np.asarray(A))) <= {0.0, 1.0}
    assert 0.07 < float(A.mean()) < 0.15
    assert 0.2 < float((b > 0).mean()) < 0.8
    local = np.asarray(A.mean(axis=1))  # per-agent feature frequencies differ
    assert np.std(local, axis=0).mean() > 0.03
    A2, _ = D.sparse_binary(jax.random.key(0), 10, 40)
    np.testing.assert_array_equal(A, A2)


def test_make_problem_checks():
    A, b = D.breast_cancer(6)
    W = D.metropolis_hastings(D.ring(6))
    p = D.make_problem((A, b), W, 1.0)
    assert p.W.dtype == A.dtype and D.num_agents(p) == 6
    with pytest.raises(TypeError, match="floating"):
        D.make_problem((A.astype(jnp.int32), b), W)
    with pytest.raises(ValueError, match="NaN"):
        D.make_problem((A.at[0, 0, 0].set(jnp.nan), b), W)
    with pytest.raises(ValueError, match="agent"):
        D.make_problem((A, b), D.metropolis_hastings(D.ring(5)))
