r"""The proxy predictor: a small MLP $\{0,1\}^K \to [0, 1]$ and its full-batch Adam training.

Architecture as in SparseEval's reference code: $K \to 128 \to 64 \to 32 \to 1$, exact
GELU between layers, dropout (0.1) after each hidden activation while training,
a sigmoid output; mean-squared error against the models' accuracies; Adam. Layers
start as PyTorch's ``nn.Linear`` does: weights and biases uniform in
$\pm 1/\sqrt{\text{fan-in}}$.

Inputs may be padded to a fixed width with a column mask (``mask``): a padded
column is zero, so its first-layer weights never receive a gradient and the
network computes exactly what a network of the unpadded width would. That lets
one compiled program serve several anchor counts $K$ under ``vmap``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["init_mlp", "apply_mlp", "mse", "train_mlp"]


def init_mlp(key, n_in: int, hidden=(128, 64, 32), dtype=jnp.float32, fan_in=None):
    """Parameters ``[(W, b), ...]`` with PyTorch's default ``nn.Linear`` initialization.

    ``fan_in`` (a traced int allowed) overrides the first layer's fan-in: the number
    of active inputs when the input is padded.
    """
    sizes = (n_in, *hidden, 1)
    keys = jax.random.split(key, 2 * (len(sizes) - 1))
    bounds = [
        1.0 / jnp.sqrt(jnp.asarray(fan_in if (i == 0 and fan_in is not None) else a, dtype))
        for i, a in enumerate(sizes[:-1])
    ]

    # first layer row by row from the row's index: the same rows whatever the padding
    def row(r):
        return jax.random.uniform(jax.random.fold_in(keys[0], r), (sizes[1],), dtype, -1.0, 1.0)

    W0 = jax.vmap(row)(jnp.arange(n_in)) * bounds[0]
    # the other draws, in key order: b_0, W_1, b_1, W_2, ...
    shapes = [(sizes[1],)]
    for a, b in zip(sizes[1:-1], sizes[2:], strict=True):
        shapes += [(a, b), (b,)]
    draws = _uniforms(keys[1:], shapes, dtype)
    params = [(W0, draws[0] * bounds[0])]
    for i in range(1, len(sizes) - 1):
        params.append((draws[2 * i - 1] * bounds[i], draws[2 * i] * bounds[i]))
    return params


def _uniforms(keys, shapes, dtype):
    """``[uniform(keys[j], shapes[j], dtype, -1, 1) for j]``, in one random-number call
    where that gives the same numbers.

    On CPU each random-number call compiles to its own loop (about 0.1 s of compile
    time each): with partitionable threefry keys (JAX's default) the draw of ``n``
    numbers is the first ``n`` of a longer draw, element ``i`` of a shaped draw the
    ``i``-th of the flat one, so one key-batched flat draw sliced per shape gives the
    same bits as separate draws. Other key types draw separately.
    """
    sizes = [math.prod(s) for s in shapes]
    same = (
        jax.config.jax_threefry_partitionable and str(jax.random.key_impl(keys)) == "threefry2x32"
    )
    if not same:
        return [
            jax.random.uniform(k, s, dtype, -1.0, 1.0) for k, s in zip(keys, shapes, strict=True)
        ]
    flat = jax.vmap(lambda k: jax.random.uniform(k, (max(sizes),), dtype, -1.0, 1.0))(keys)
    return [flat[j, :n].reshape(s) for j, (n, s) in enumerate(zip(sizes, shapes, strict=True))]


def apply_mlp(params, X, *, key=None, dropout: float = 0.1):
    """Predicted accuracies ``(n,)`` for inputs ``X`` ``(n, K)``; dropout only with a ``key``."""
    h = X
    masks = None
    if key is not None and dropout > 0:
        # one draw for every hidden layer: each random-number call is a sizeable
        # piece of the compiled program, and this one runs every epoch
        widths = [W.shape[1] for W, _ in params[:-1]]
        u = jax.random.uniform(key, (X.shape[0], sum(widths)), X.dtype)
        masks = jnp.split(u >= dropout, list(np.cumsum(widths)[:-1]), axis=1)
    for i, (W, c) in enumerate(params):
        h = h @ W + c
        if i < len(params) - 1:
            h = jax.nn.gelu(h, approximate=False)
            if masks is not None:
                h = jnp.where(masks[i], h / (1 - dropout), 0)
    return jax.nn.sigmoid(h[:, 0])


def mse(params, X, y, key=None, dropout: float = 0.1):
    """Mean squared error of the predictions against ``y``."""
    return jnp.mean((apply_mlp(params, X, key=key, dropout=dropout) - y) ** 2)


def train_mlp(params, X, y, key, *, epochs: int, lr, dropout: float = 0.1, opt_state=None):
    """``epochs`` full-batch Adam steps on the MSE (one ``lax.scan``).

    Returns ``(params, opt_state, losses)``; pass ``opt_state`` back to continue a run.
    """
    opt = optax.adam(lr)
    if opt_state is None:
        opt_state = opt.init(params)

    def epoch(carry, k):
        p, s = carry
        loss, g = jax.value_and_grad(mse)(p, X, y, k, dropout)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), loss

    (params, opt_state), losses = jax.lax.scan(
        epoch, (params, opt_state), jax.random.split(key, epochs)
    )
    return params, opt_state, losses
