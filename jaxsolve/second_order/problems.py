r"""Test problems for the second-order family, shared by its tests, benchmark and demo.

* `logistic_objective`: regularized binary logistic regression,
  $f(w, b) = \frac1n \sum_i \log(1 + e^{z_i}) - y_i z_i + \frac{\mu}{2}\|w\|^2$,
  $z = Xw + b$. With $\mu = 1/(C n)$ its minimizer is scikit-learn's
  ``LogisticRegression(C=C)`` (intercept unpenalized).
* `softmax_objective`: the multinomial version with one-hot labels ``Y``,
  $\frac1n \sum_i \operatorname{logsumexp}(z_i) - \langle y_i, z_i\rangle +
  \frac{\mu}{2}\|W\|_F^2$, $Z = XW + b$.
* `sine_mlp_problem` / `sine_mlp_residual`: fitting
  $\sin(2\pi f x)$ on ``[0, 1]`` with a one-hidden-layer tanh network, the
  spectral-bias problem of the Gauss-Newton paper (arXiv 2601.03162): first-order
  methods fit the high frequency slowly, Gauss-Newton/LM quickly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["logistic_objective", "softmax_objective", "sine_mlp_problem", "sine_mlp_residual"]


def logistic_objective(p, args):
    """Mean logistic loss + ``mu/2 |w|^2``; ``p = {"w", "b"}``, ``args = (X, y, mu)``, y in {0, 1}."""
    X, y, mu = args
    z = X @ p["w"] + p["b"]
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 0.5 * mu * jnp.sum(p["w"] ** 2)


def softmax_objective(p, args):
    """Mean softmax cross-entropy + ``mu/2 |W|^2``; ``p = {"W", "b"}``, ``args = (X, Y, mu)``."""
    X, Y, mu = args
    z = X @ p["W"] + p["b"]
    loss = jnp.mean(jax.nn.logsumexp(z, axis=1) - jnp.sum(Y * z, axis=1))
    return loss + 0.5 * mu * jnp.sum(p["W"] ** 2)


def sine_mlp_problem(seed=0, n=128, width=64, freq=8.0, scale=20.0):
    """Initial parameters and data ``(x, y)`` for fitting ``sin(2 pi freq x)`` on ``n`` points.

    The first layer's weights are drawn with standard deviation ``scale`` (and biases
    uniform in ``[-scale, scale]``) so that the features can represent the frequency;
    the output layer starts at ``N(0, 1/width)``.
    """
    x = jnp.linspace(0.0, 1.0, n)
    y = jnp.sin(2 * jnp.pi * freq * x)
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    params = {
        "W1": scale * jax.random.normal(k1, (width,)),
        "b1": jax.random.uniform(k2, (width,), minval=-scale, maxval=scale),
        "W2": jax.random.normal(k3, (width,)) / jnp.sqrt(width),
        "b2": jnp.zeros(()),
    }
    return params, (x, y)


def sine_mlp_residual(p, args):
    """Residual ``net(x) - y`` of the tanh network ``tanh(x W1 + b1) W2 + b2``."""
    x, y = args
    return jnp.tanh(x[:, None] * p["W1"] + p["b1"]) @ p["W2"] + p["b2"] - y
