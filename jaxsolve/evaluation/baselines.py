r"""Baselines SparseEval is measured against: anchor means, anchor points, linear weights, 2PL IRT.

All take the training models' answers ``Y`` (models x items) and return the anchors
and a ``predict(answers_on_anchors) -> accuracies`` function, so the comparison
runs on the same split.

* `random_mean`: $K$ random items, the accuracy estimate is the mean of the
  answers on them (an unbiased estimate with binomial noise).
* `anchor_points` (Vivek et al., "Anchor Points: Benchmarking Models with Much
  Fewer Examples", 2023): k-means anchors weighted by their cluster's share of
  the items.
* `linear_weights`: anchors fixed, weights $w$ and offset $c$ of
  $\hat y = X w + c$ fitted by Adam on the training MSE (the reference code's
  linear variant).
* `irt`: a multidimensional 2PL model $P(Y_{mj}=1) = \sigma(a_j^\top\theta_m - b_j)$
  fitted to the training models by maximum a posteriori (standard normal priors on
  $\theta$, $\log a$ and $b$, Adam); a new model's $\theta$ is its MAP estimate from
  its anchor answers, and its accuracy the p-IRT combination (Polo et al.,
  "tinyBenchmarks", 2024) of what was observed and what the model predicts for the
  rest: $\hat y = \frac{K}{N}\bar X + (1 - \frac KN)\,\frac{1}{N-K}\sum_{j \notin A}
  \sigma(a_j^\top\hat\theta - b_j)$.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsolve.core.validation import check_key
from jaxsolve.evaluation.anchors import kmeans_anchors, random_anchors
from jaxsolve.evaluation.benchmarks import check_matrix

__all__ = ["Baseline", "random_mean", "anchor_points", "linear_weights", "irt"]


def _check(Y, K, key, **counts):
    """Y a finite (models, items) matrix in [0, 1], 1 <= K < n_items, key a key, counts >= 1."""
    Y = check_matrix(Y)
    if not jnp.issubdtype(Y.dtype, jnp.floating) or Y.dtype.itemsize < 4:
        Y = Y.astype(jnp.float32)
    n_items = Y.shape[1]
    if isinstance(K, bool) or not isinstance(K, int | np.integer) or not 1 <= K < n_items:
        raise ValueError(f"K must be an int in [1, {n_items}) (fewer than the items), got {K!r}")
    check_key("key", key)
    for name, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    return Y


def _check_lr(lr) -> None:
    if not (isinstance(lr, int | float | np.number) and np.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")


class Baseline(NamedTuple):
    """``anchors`` ``(K,)`` and ``predict(X) -> (n,)`` from answers ``X`` ``(n, K)``."""

    anchors: jax.Array
    predict: Callable


def random_mean(Y, K: int, key) -> Baseline:
    """``K`` random anchors; the estimate is the mean answer on them.

    Every baseline checks, naming the argument: ``Y`` a finite matrix in ``[0, 1]``
    (`check_matrix`), ``1 <= K <`` the items, ``key`` a ``jax.random`` key, positive
    step counts and learning rates.
    """
    Y = _check(Y, K, key)
    anchors = random_anchors(Y.shape[1], K, key)
    return Baseline(anchors, lambda X: jnp.mean(X, axis=1))


def anchor_points(Y, K: int, key) -> Baseline:
    """K-means anchors, each weighted by its cluster's share of the items."""
    Y = _check(Y, K, key)
    anchors, w = kmeans_anchors(Y, K, key)
    return Baseline(anchors, lambda X: X @ w)


def _adam(loss, params, steps: int, lr):
    opt = optax.adam(lr)

    def step(c, _):
        p, s = c
        g = jax.grad(loss)(p)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), None

    return jax.lax.scan(step, (params, opt.init(params)), None, length=steps)[0][0]


def linear_weights(Y, K: int, key, *, steps: int = 2000, lr: float = 1e-2) -> Baseline:
    """K-means anchors with weights and offset fitted by Adam on the training MSE."""
    Y = _check(Y, K, key, steps=steps)
    _check_lr(lr)
    anchors, w0 = kmeans_anchors(Y, K, key)
    w, c = _fit_linear(Y, anchors, w0, jnp.asarray(lr, Y.dtype), steps=int(steps))
    return Baseline(anchors, lambda Xn: Xn @ w + c)


@partial(jax.jit, static_argnames=("steps",))
def _fit_linear(Y, anchors, w0, lr, *, steps):
    # module-level, data as arguments: one compile per shape and step count (a closure
    # over the data compiled afresh on every call)
    X, y = Y[:, anchors], Y.mean(axis=1)
    loss = lambda p: jnp.mean((X @ p[0] + p[1] - y) ** 2)  # noqa: E731
    return _adam(loss, (w0, jnp.zeros((), Y.dtype)), steps, lr)


def loglik_2pl(Y, theta, a, b):
    """2PL log-likelihood of answers ``Y`` (``(..., N)``, soft scores allowed) at
    abilities ``theta`` (``(..., d)``), summed over the items: ``(...)``. The one
    place it is written (`irt` fits and predicts with it, `posterior_accuracy`
    weights its importance samples with it)."""
    z = theta @ a.T - b
    return jnp.sum(Y * jax.nn.log_sigmoid(z) + (1 - Y) * jax.nn.log_sigmoid(-z), axis=-1)


def irt(
    Y, K: int, key, *, dim: int = 2, steps: int = 2000, lr: float = 0.05, theta_steps: int = 200
) -> Baseline:
    """2PL IRT (``dim`` latent dimensions) fitted by MAP; p-IRT estimates from K-means anchors."""
    Y = _check(Y, K, key, dim=dim, steps=steps, theta_steps=theta_steps)
    _check_lr(lr)
    n_models, n_items = Y.shape
    ka, kt, kl = jax.random.split(key, 3)
    anchors, _ = kmeans_anchors(Y, K, ka)
    dtype = Y.dtype
    # drawn outside the compiled fit: inside, XLA fuses the scaling into the normal
    # draw and the start moves by an ulp (which the MAP fit amplifies)
    init = (
        0.1 * jax.random.normal(kt, (n_models, dim), dtype),
        0.1 * jax.random.normal(kl, (n_items, dim), dtype),
        jnp.zeros(n_items, dtype),
    )
    a, b = _fit_irt(Y, init, jnp.asarray(lr, dtype), steps=int(steps))
    theta_steps = int(theta_steps)
    return Baseline(anchors, lambda X: _irt_predict(X, a, b, anchors, theta_steps=theta_steps))


# Module-level programs taking the data as arguments: one compile per shape and static
# option (closures over the data compiled afresh on every call).
@partial(jax.jit, static_argnames=("steps",))
def _fit_irt(Y, init, lr, *, steps):
    n_models = Y.shape[0]

    def neg_post(p):
        theta, log_a, b = p
        prior = jnp.sum(theta**2) + jnp.sum(log_a**2) + jnp.sum(b**2)
        return (-jnp.sum(loglik_2pl(Y, theta, jnp.exp(log_a), b)) + 0.5 * prior) / n_models

    _, log_a, b = _adam(neg_post, init, steps, lr)
    return jnp.exp(log_a), b


@partial(jax.jit, static_argnames=("theta_steps",))
def _irt_predict(X, a, b, anchors, *, theta_steps):
    n_items, dim = a.shape
    frac = anchors.shape[0] / n_items
    aA, bA = a[anchors], b[anchors]
    rest = jnp.ones(n_items, bool).at[anchors].set(False)

    def one(x):
        loss = lambda t: -loglik_2pl(x, t, aA, bA) + 0.5 * jnp.sum(t**2)  # noqa: E731
        t = _adam(loss, jnp.zeros(dim, a.dtype), theta_steps, 0.1)
        p = jax.nn.sigmoid(a @ t - b)
        return frac * jnp.mean(x) + (1 - frac) * jnp.sum(jnp.where(rest, p, 0)) / jnp.sum(rest)

    return jax.vmap(one)(X)
