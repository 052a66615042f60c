"""The proxy's initialization draws its layers in one random-number call (a smaller
compiled program) and must give the same bits as one draw per layer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.evaluation.mlp import init_mlp


def _per_layer(key, n_in, hidden, dtype, fan_in):
    """PyTorch's nn.Linear initialization, one jax.random.uniform call per array (the
    first layer row by row from the row's index)."""
    sizes = (n_in, *hidden, 1)
    keys = jax.random.split(key, 2 * (len(sizes) - 1))
    params = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        bound = 1.0 / jnp.sqrt(jnp.asarray(fan_in if i == 0 else a, dtype))
        if i == 0:
            W = jax.vmap(
                lambda r, b=b: jax.random.uniform(
                    jax.random.fold_in(keys[0], r), (b,), dtype, -1.0, 1.0
                )
            )(jnp.arange(a))
        else:
            W = jax.random.uniform(keys[2 * i], (a, b), dtype, -1.0, 1.0)
        c = jax.random.uniform(keys[2 * i + 1], (b,), dtype, -1.0, 1.0)
        params.append((W * bound, c * bound))
    return params


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_one_draw_equals_one_draw_per_layer(dtype):
    keys = jax.random.split(jax.random.key(7), 3)
    for n_in, hidden, fan_in in ((12, (128, 64, 32), 9), (5, (16, 8), 5), (40, (7,), 33)):
        ref = jax.jit(
            jax.vmap(lambda k, n_in=n_in, h=hidden, f=fan_in: _per_layer(k, n_in, h, dtype, f))
        )(keys)
        ours = jax.jit(
            lambda ks, n_in=n_in, h=hidden, f=fan_in: jax.lax.map(
                lambda k: init_mlp(k, n_in, h, dtype, fan_in=f), ks
            )
        )(keys)
        eager = init_mlp(keys[1], n_in, hidden, dtype, fan_in=fan_in)
        leaves = zip(
            jax.tree.leaves(ref), jax.tree.leaves(ours), jax.tree.leaves(eager), strict=True
        )
        for a, b, c in leaves:
            assert a.dtype == b.dtype == dtype
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(c))
        # PyTorch's bounds: every weight within 1/sqrt(fan-in) of zero
        W0 = np.asarray(ours[0][0])
        assert np.abs(W0).max() <= 1 / np.sqrt(fan_in) and np.abs(W0).max() > 0.9 / np.sqrt(fan_in)


def test_other_key_types_draw_per_layer():
    key = jax.random.key(3, impl="rbg")
    ref = _per_layer(key, 6, (8, 4), jnp.float32, 6)
    ours = init_mlp(key, 6, (8, 4), jnp.float32)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(ours), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
