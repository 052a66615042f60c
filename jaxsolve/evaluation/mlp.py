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
    params = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        fi = a if (i > 0 or fan_in is None) else fan_in
        bound = 1.0 / jnp.sqrt(jnp.asarray(fi, dtype))
        if i == 0:  # row by row from the row's index: the same rows whatever the padding
            rows = lambda r, k=keys[0], b=b: jax.random.uniform(  # noqa: E731
                jax.random.fold_in(k, r), (b,), dtype, -1.0, 1.0
            )
            W = jax.vmap(rows)(jnp.arange(a)) * bound
        else:
            W = jax.random.uniform(keys[2 * i], (a, b), dtype, -1.0, 1.0) * bound
        c = jax.random.uniform(keys[2 * i + 1], (b,), dtype, -1.0, 1.0) * bound
        params.append((W, c))
    return params


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
