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

Training (`train_mlp`) runs the network feature-major (activations ``(width, n)``,
the input transposed once per call) with the backward pass written out: every
product is then a plain or right-transposed matrix product, which XLA:CPU hands to
its fast GEMM library, whereas the reverse-mode weight gradients of the row-major
network ($H^\top G$, a contraction over the $n$ rows) ran on its slower generic
kernel (2-3x per product at $n = 4600$). The GELU derivative and the dropout mask
are applied in one pass. The result equals ``jax.grad`` of `mse` (tested).

Dropout masks come from Threefry-2x32 (20 rounds, JAX's default generator; Salmon
et al., SC 2011) written out so that XLA compiles it as one fused pass: one call,
keyed by two words drawn from the call's key at counter $(c, t)$ for epoch $t$, gives
64 bits, and each of its four 16-bit halves decides one unit (kept when the half is
at least $\lfloor p\,2^{16} \rceil$: keep probability $1 - p$ to within $2^{-17}$;
`dropout_keep` gives the layout). ``jax.random.uniform``'s masks (Threefry too, but
compiled by XLA:CPU as a loop over rounds, an array pass per round) took about 9 of
a 17 ms epoch at $n = 4600$, $K = 100$. One 32-bit word per unit, recomputed inside
the forward and the backward fusions that read the mask, took 1-1.8 ms; four units
per call, its words computed once per epoch (the next epoch's words are carried by
the training loop, which makes XLA store them rather than recompute them in every
fusion that reads them), 0.5-1 ms more than no dropout at all.
The masks are a function of the key alone, so runs are reproducible and ``vmap`` over
keys gives each lane its own stream.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jaxsolve.core.random import threefry2x32

__all__ = ["init_mlp", "apply_mlp", "mse", "train_mlp", "dropout_keep"]


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


def _key_words(key):
    """Two uint32 words from ``key`` (any ``jax.random`` key type): the Threefry key of
    the dropout masks."""
    return jax.random.bits(key, (2,), jnp.uint32)


def _mask_words(words, step, widths, n: int):
    """The Threefry words ``[(x0, x1) for each layer]``, each ``(ceil(w/4), n)``, of
    `dropout_keep`'s masks at ``step``."""
    if n * sum(-(-w // 4) for w in widths) >= 2**32:
        raise ValueError(f"dropout masks of {n} x {sum(widths)} units exceed 2^32 counters")
    step = jnp.asarray(step).astype(jnp.uint32)
    out, offset = [], 0
    for w in widths:
        q = -(-w // 4)
        c = jnp.arange(q * n, dtype=jnp.uint32).reshape(q, n) + np.uint32(offset)
        out.append(threefry2x32(words[0], words[1], c, jnp.broadcast_to(step, c.shape)))
        offset += q * n
    return out


def _keep_from_words(x0, x1, w: int, dropout: float):
    """Layer mask ``(w, n)``: row ``s q + j`` from 16-bit half ``s`` of ``(x0, x1)[j]``."""
    q, n = x0.shape
    t = np.uint32(min(round(dropout * 2**16), 2**16 - 1))
    s = lax.broadcasted_iota(jnp.uint32, (4, q, n), 0)
    word = jnp.where(s < 2, x0[None], x1[None])
    half = (word >> ((s & np.uint32(1)) * np.uint32(16))) & np.uint32(0xFFFF)
    return (half >= t).reshape(4 * q, n)[:w]


def dropout_keep(words, step, widths, n: int, dropout: float, mask_words=None):
    r"""Keep masks ``[(w, n) for w in widths]`` (feature-major) of one training step.

    One Threefry call gives four masks: a layer of width $w$ takes $q = \lceil w/4
    \rceil$ rows of counters; counter $(o + j n + m, \text{step})$ ($o$ the earlier
    layers' counters, $j < q$, $m < n$) yields the words $x_0, x_1$ of
    `jaxsolve.core.random.threefry2x32` with key ``words``, and unit $(s q + j, m)$ is
    kept when the 16-bit half $s$ (0: low of $x_0$, 1: high of $x_0$, 2, 3: of $x_1$)
    is at least $\lfloor p\,2^{16} \rceil$ (keep probability $1 - p$ to within
    $2^{-17}$). ``step`` may be traced (a uint32 or int). ``mask_words``: the step's
    words already drawn (`_mask_words`, as the training loop carries them).
    """
    xw = _mask_words(words, step, widths, n) if mask_words is None else mask_words
    return [_keep_from_words(x0, x1, w, dropout) for (x0, x1), w in zip(xw, widths, strict=True)]


def apply_mlp(params, X, *, key=None, dropout: float = 0.1):
    """Predicted accuracies ``(n,)`` for inputs ``X`` ``(n, K)``; dropout only with a ``key``
    (the masks of `train_mlp`'s first epoch with that key)."""
    h = X
    masks = None
    if key is not None and dropout > 0:
        widths = [W.shape[1] for W, _ in params[:-1]]
        masks = [k.T for k in dropout_keep(_key_words(key), 0, widths, X.shape[0], dropout)]
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


def _loss_and_grad(params, Xt, y, words, step, dropout: float, mask_words=None):
    r"""`mse` and its gradient in ``params`` for the transposed inputs ``Xt`` ``(K, n)``.

    Feature-major: $Z_l = W_l^\top H_{l-1} + b_l$, $H_l = D_l \odot \mathrm{GELU}(Z_l)$
    with $D_l$ the kept units scaled by $1/(1-p)$; backward
    $G_l = D_l \odot \mathrm{GELU}'(Z_l) \odot (W_{l+1} G_{l+1})$,
    $\partial W_l = (G_l H_{l-1}^\top)^\top$, $\partial b_l = G_l \mathbf 1$, with
    $\mathrm{GELU}'(z) = \Phi(z) + z\,\varphi(z)$ formed in the forward pass. The
    one-unit output layer is a weighted sum over rows, not a product.
    """
    dtype = Xt.dtype
    n = Xt.shape[1]
    L = len(params)
    widths = [W.shape[1] for W, _ in params[:-1]]
    keep = dropout_keep(words, step, widths, n, dropout, mask_words) if dropout > 0 else None
    scale = 1 / (1 - dropout)
    inv_sqrt2 = np.asarray(1 / np.sqrt(2), dtype)
    inv_sqrt2pi = np.asarray(1 / np.sqrt(2 * np.pi), dtype)
    hs, dacts = [Xt], []
    h = Xt
    for i, (W, b) in enumerate(params[:-1]):
        # W^T as an array of its own: a transpose folded into the product would make
        # XLA:CPU run it on its generic kernel
        z = lax.optimization_barrier(W.T) @ h + b[:, None]
        phi_cdf = 0.5 * (1 + lax.erf(z * inv_sqrt2))
        a = z * phi_cdf
        d = phi_cdf + z * inv_sqrt2pi * jnp.exp(-0.5 * z * z)
        if keep is not None:
            a = jnp.where(keep[i], a * scale, 0)
            d = jnp.where(keep[i], d * scale, 0)
        hs.append(a)
        dacts.append(d)
        h = a
    W, b = params[-1]
    z = jnp.sum(W[:, :1] * h, axis=0) + b[0]
    pred = jax.nn.sigmoid(z)
    r = pred - y
    loss = jnp.mean(r * r)
    g = ((2 / n) * r * pred * (1 - pred))[None, :]
    grads = [None] * L
    grads[-1] = (jnp.sum(h * g, axis=1)[:, None], jnp.sum(g, axis=1))
    dh = W[:, :1] * g
    for i in range(L - 2, -1, -1):
        g = dh * dacts[i]
        W = params[i][0]
        grads[i] = ((g @ hs[i].T).T, jnp.sum(g, axis=1))
        if i > 0:
            dh = W @ g
    return loss, grads


def train_mlp(params, X, y, key, *, epochs: int, lr, dropout: float = 0.1, opt_state=None):
    """``epochs`` full-batch Adam steps on the MSE (one ``lax.scan``).

    Epoch $t$ uses the dropout masks `dropout_keep` of step $t$ (Threefry keyed by
    ``key``). Returns ``(params, opt_state, losses)``; pass ``opt_state`` back to
    continue a run (with a new ``key``: the steps count from 0 again).
    """
    opt = optax.adam(lr)
    if opt_state is None:
        opt_state = opt.init(params)
    treedef = jax.tree.structure(params)
    # the inputs transposed once per call (a transpose folded into the products would
    # make XLA:CPU run them on its generic kernel)
    Xt = lax.optimization_barrier(jnp.asarray(X).T)
    words = _key_words(key)
    widths = [W.shape[1] for W, _ in params[:-1]]
    n = Xt.shape[1]

    def masks(step):
        return _mask_words(words, step, widths, n) if dropout > 0 else None

    def epoch(carry, step):
        p, s, mw = carry
        loss, g = _loss_and_grad(p, Xt, y, words, step, dropout, mask_words=mw)
        u, s = opt.update(jax.tree.unflatten(treedef, jax.tree.leaves(g)), s, p)
        # the next epoch's mask words ride in the carry: stored once, not recomputed
        # by every fusion that reads the masks
        return (optax.apply_updates(p, u), s, masks(step + 1)), loss

    (params, opt_state, _), losses = jax.lax.scan(
        epoch, (params, opt_state, masks(0)), jnp.arange(epochs, dtype=jnp.uint32)
    )
    return params, opt_state, losses
