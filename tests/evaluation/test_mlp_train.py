"""The proxy's training step: the written-out backward pass equals ``jax.grad`` of the
MSE, and the fused Threefry dropout masks keep units at rate 1 - p, reproducibly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from jax.extend.random import threefry_2x32

from jaxsolve.evaluation.mlp import (
    _key_words,
    _loss_and_grad,
    dropout_keep,
    init_mlp,
    mse,
    train_mlp,
)


def _problem(dtype):
    rng = np.random.default_rng(0)
    # 10 active inputs padded to 12 (the padded columns are zero)
    X = jnp.asarray(rng.integers(0, 2, (300, 12)), dtype) * jnp.asarray([1] * 10 + [0] * 2, dtype)
    return X, X.mean(1), init_mlp(jax.random.key(0), 12, (16, 8, 4), dtype, fan_in=10)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("dropout", [0.0, 0.1, 0.5])
def test_written_out_gradient_is_autodiff_of_the_mse(dtype, dropout):
    X, y, params = _problem(dtype)
    key = jax.random.key(3)
    ref_loss, ref = jax.value_and_grad(mse)(params, X, y, key if dropout else None, dropout)
    loss, got = jax.jit(_loss_and_grad, static_argnums=5)(
        params, X.T, y, _key_words(key), 0, dropout
    )
    tol = 1e-6 if dtype == jnp.float32 else 1e-13
    np.testing.assert_allclose(float(loss), float(ref_loss), rtol=tol)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        assert a.shape == b.shape and a.dtype == dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol * np.abs(b).max())
    # the padded inputs' first-layer rows get no gradient
    assert np.all(np.asarray(got[0][0])[10:] == 0)


def test_training_takes_adam_steps_on_each_epochs_masks():
    X, y, params = _problem(jnp.float32)
    key = jax.random.key(5)
    p1, _, losses = jax.jit(lambda p: train_mlp(p, X, y, key, epochs=3, lr=1e-2))(params)
    # the reference: optax Adam on jax.grad of the MSE with step t's masks
    import optax

    opt, words = optax.adam(1e-2), _key_words(key)
    p, s = params, optax.adam(1e-2).init(params)
    for t in range(3):
        keep = [k.T for k in dropout_keep(words, t, (16, 8, 4), 300, 0.1)]

        def loss(p, keep=keep):
            h = X
            for i, (W, c) in enumerate(p):
                h = h @ W + c
                if i < len(p) - 1:
                    h = jnp.where(keep[i], jax.nn.gelu(h, approximate=False) / 0.9, 0)
            return jnp.mean((jax.nn.sigmoid(h[:, 0]) - y) ** 2)

        val, g = jax.value_and_grad(loss)(p)
        np.testing.assert_allclose(float(losses[t]), float(val), rtol=1e-5)
        u, s = opt.update(g, s, p)
        p = optax.apply_updates(p, u)
    for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    # step 0's masks are apply_mlp's for the same key
    np.testing.assert_allclose(float(losses[0]), float(mse(params, X, y, key)), rtol=1e-6)


def test_dropout_masks_keep_one_minus_p_and_are_reproducible():
    words = _key_words(jax.random.key(11))
    keep = dropout_keep(words, 7, (128, 64), 1000, 0.1)
    assert [k.shape for k in keep] == [(128, 1000), (64, 1000)]
    k = np.concatenate([np.asarray(a).ravel() for a in keep])
    # 192,000 Bernoulli(0.9) draws: the count within 4 standard deviations
    assert abs(k.mean() - 0.9) < 4 * np.sqrt(0.09 / k.size)
    # the threshold: layer 2 (q = 16 counter rows after layer 1's 32) row s 16 + j takes
    # 16-bit half s of JAX's own Threefry at counter (32 000 + 1000 j + m, step) >= p 2^16
    units = jnp.arange(32 * 1000 + 1000 * 3, 32 * 1000 + 1000 * 3 + 500, dtype=jnp.uint32)
    x = np.asarray(threefry_2x32(words, jnp.concatenate([units, jnp.full(500, 7, jnp.uint32)])))
    halves = (x[:500] & 0xFFFF, x[:500] >> 16, x[500:] & 0xFFFF, x[500:] >> 16)
    for h, half in enumerate(halves):
        np.testing.assert_array_equal(
            np.asarray(keep[1])[16 * h + 3, :500], half >= np.uint32(round(0.1 * 2**16))
        )
    # independent across units, steps and keys: no correlation between neighbours
    other = np.asarray(dropout_keep(words, 8, (128,), 1000, 0.1)[0]).ravel()
    lane2 = np.asarray(dropout_keep(_key_words(jax.random.key(12)), 7, (128,), 1000, 0.1)[0])
    for b in (other, lane2.ravel(), k[1 : 128 * 1000 + 1]):
        r = scipy.stats.pearsonr(k[: 128 * 1000].astype(float), b.astype(float)).statistic
        assert abs(r) < 4 / np.sqrt(128 * 1000)
    # the same key gives the same masks; a vmap over keys gives each lane its own
    again = dropout_keep(_key_words(jax.random.key(11)), 7, (128, 64), 1000, 0.1)
    assert all(np.array_equal(a, b) for a, b in zip(keep, again, strict=True))
    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.vmap(lambda kk: dropout_keep(_key_words(kk), 7, (128,), 1000, 0.1)[0])(keys)
    for i in range(3):
        single = dropout_keep(_key_words(keys[i]), 7, (128,), 1000, 0.1)[0]
        np.testing.assert_array_equal(np.asarray(batched[i]), np.asarray(single))
