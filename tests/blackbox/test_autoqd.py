"""AutoQD pieces: RFF embeddings estimate the MMD, occupancy weights, descriptors, Vendi."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.blackbox import (
    fit_descriptors,
    gaussian_mmd2,
    occupancy_embedding,
    quality_vendi_score,
    rff_embedding,
    rff_features,
    vendi_score,
)


def test_rff_embedding_distance_converges_to_the_gaussian_mmd():
    sigma, n = 1.5, 20000
    m1, m2 = jnp.zeros(2), jnp.asarray([1.0, -0.5])
    S1, S2 = jnp.eye(2) * 0.5, jnp.asarray([[1.0, 0.3], [0.3, 0.4]])
    k1, k2, kf = jax.random.split(jax.random.key(0), 3)
    X = jax.random.multivariate_normal(k1, m1, S1, (n,))
    Y = jax.random.multivariate_normal(k2, m2, S2, (n,))
    exact = float(gaussian_mmd2(m1, S1, m2, S2, sigma))
    feats = rff_embedding(kf, 2, 4096, sigma, jnp.float64)
    mean_phi = jax.jit(  # in chunks: 20000 x 4096 features at once would be 0.6 GB
        lambda Z: (
            jax.lax.map(lambda c: rff_features(feats, c).sum(0), Z.reshape(10, -1, 2)).sum(0) / n
        )
    )
    est = float(jnp.sum((mean_phi(X) - mean_phi(Y)) ** 2))
    assert abs(est - exact) < 0.05 * max(exact, 0.1), (est, exact)
    # the closed form itself against a direct kernel average on samples
    k = lambda a, b: jnp.exp(-jnp.sum((a[:, None] - b[None]) ** 2, -1) / (2 * sigma**2))  # noqa: E731
    a, b = X[:1500], Y[:1500]
    direct = float(k(a, a).mean() + k(b, b).mean() - 2 * k(a, b).mean())
    assert abs(direct - exact) < 0.02


def test_occupancy_embedding_weights_and_order_invariance():
    feats = rff_embedding(jax.random.key(1), 3, 64, 1.0, jnp.float64)
    traj = jax.random.normal(jax.random.key(2), (5, 20, 3))
    psi = occupancy_embedding(feats, traj, 0.9)
    perm = occupancy_embedding(feats, traj[jnp.asarray([3, 1, 4, 0, 2])], 0.9)
    np.testing.assert_allclose(np.asarray(psi), np.asarray(perm), rtol=1e-12)
    # a constant trajectory: the discount weights sum to 1 - gamma^T
    const = jnp.broadcast_to(traj[0, 0], (2, 20, 3))
    np.testing.assert_allclose(
        np.asarray(occupancy_embedding(feats, const, 0.9)),
        (1 - 0.9**20) * np.asarray(rff_features(feats, traj[0, 0])),
        rtol=1e-12,
    )
    # a mask that ends a trajectory early equals the shorter trajectory
    mask = jnp.ones((5, 20)).at[:, 12:].set(0)
    np.testing.assert_allclose(
        np.asarray(occupancy_embedding(feats, traj, 0.9, mask)),
        np.asarray(occupancy_embedding(feats, traj[:, :12], 0.9)),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match="gamma"):
        occupancy_embedding(feats, traj, 1.0)


def test_fit_descriptors_is_calibrated_fitness_weighted_pca():
    rng = np.random.default_rng(0)
    # embeddings along two directions; the fitter policies vary along the second
    u, v = np.eye(6)[0], np.eye(6)[1]
    t = rng.normal(size=400)
    s = rng.normal(size=400)
    P = 3 * np.outer(t, u) + 2 * np.outer(s, v) + 0.01 * rng.normal(size=(400, 6))
    d = fit_descriptors(P, np.ones(400), 2)
    out = np.asarray(d(P))
    np.testing.assert_allclose(out.min(0), -1, atol=1e-9)
    np.testing.assert_allclose(out.max(0), 1, atol=1e-9)
    # with equal fitness the first axis is the direction of largest variance (u)
    assert abs(np.corrcoef(out[:, 0], t)[0, 1]) > 0.99
    # fitness concentrated on policies that spread along v makes v the first axis
    f = np.where(np.abs(t) < 0.3, 1.0, 0.0) * 10
    d2 = fit_descriptors(P, f, 1)
    sel = np.abs(t) < 0.3
    assert abs(np.corrcoef(np.asarray(d2(P))[sel, 0], s[sel])[0, 1]) > 0.95
    # affine: A psi + b before clipping
    np.testing.assert_allclose(np.asarray(P @ np.asarray(d.A).T + np.asarray(d.b)), out, atol=1e-12)


def test_vendi_score_counts_distinct_points():
    far = jnp.arange(5.0)[:, None] * 100 * jnp.ones((5, 2))
    np.testing.assert_allclose(float(vendi_score(far, 1.0)), 5.0, rtol=1e-9)
    same = jnp.ones((7, 3))
    np.testing.assert_allclose(float(vendi_score(same, 1.0)), 1.0, rtol=1e-9)
    np.testing.assert_allclose(
        float(quality_vendi_score(far, jnp.full(5, 2.0), 1.0)), 10.0, rtol=1e-9
    )
