r"""How well estimated accuracies match the true ones: MAE, Kendall's $\tau_b$, interval coverage.

Kendall's $\tau_b$ (the variant ``scipy.stats.kendalltau`` computes by default, which
corrects for ties: true accuracies on $N$ items take only $N + 1$ values) over all
$\binom{n}{2}$ pairs:

$$
\tau_b = \frac{n_c - n_d}{\sqrt{(n_0 - t_x)(n_0 - t_y)}},
$$

$n_c$ / $n_d$ the concordant / discordant pairs, $n_0$ all pairs, $t_x$, $t_y$ the
pairs tied in each ranking. $O(n^2)$ memory: meant for the few hundred test models
of a benchmark split.
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["mae", "kendall_tau", "coverage"]


def _vectors(**named):
    """Real arrays of one non-empty shape (checked, naming the argument)."""
    arrays = {k: jnp.asarray(v) for k, v in named.items()}
    shapes = {k: a.shape for k, a in arrays.items()}
    for name, a in arrays.items():
        if not (jnp.issubdtype(a.dtype, jnp.floating) or jnp.issubdtype(a.dtype, jnp.integer)):
            raise TypeError(f"{name} must be real, got dtype {a.dtype}")
        if a.size == 0:
            raise ValueError(f"{name} is empty (shape {a.shape})")
    if len(set(shapes.values())) > 1:
        names = list(arrays)
        raise ValueError(
            f"{', '.join(names[:-1])} and {names[-1]} must have one shape, got {shapes}"
        )
    return tuple(arrays.values())


def mae(pred, true):
    """Mean absolute error (accuracy units; tables report it x100 as points); ``pred``
    and ``true`` real and of one non-empty shape (checked)."""
    pred, true = _vectors(pred=pred, true=true)
    return jnp.mean(jnp.abs(pred - true))


def kendall_tau(x, y, weights=None):
    r"""Kendall's $\tau_b$ between two score vectors (ties handled as SciPy does).

    ``weights`` (0/1 per entry) restricts the pairs to entries with weight 1, so a
    padded vector can be scored without changing shapes. Checked: ``x``, ``y`` (and
    ``weights``) real vectors of one non-empty length. Fewer than two distinct pairs
    give NaN (tau is undefined).
    """
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"x and y must be score vectors of one length, got {x.shape} and {y.shape}"
        )
    x, y = _vectors(x=x, y=y)
    if weights is not None:
        (weights,) = _vectors(weights=weights)
        if weights.shape != x.shape:
            raise ValueError(f"weights must have shape {x.shape} like x, got {weights.shape}")
    w = jnp.ones_like(x) if weights is None else jnp.asarray(weights, x.dtype)
    pair = jnp.triu(w[:, None] * w[None, :], k=1)
    sx = jnp.sign(x[:, None] - x[None, :])
    sy = jnp.sign(y[:, None] - y[None, :])
    n0 = jnp.sum(pair)
    concord = jnp.sum(pair * sx * sy)
    tx = jnp.sum(pair * (sx == 0))
    ty = jnp.sum(pair * (sy == 0))
    denom = jnp.sqrt((n0 - tx) * (n0 - ty))
    return jnp.where(denom > 0, concord / jnp.where(denom > 0, denom, 1), jnp.nan)


def coverage(lower, upper, true):
    """Fraction of entries with ``lower <= true <= upper`` (real arrays of one non-empty
    shape, checked)."""
    lower, upper, true = _vectors(lower=lower, upper=upper, true=true)
    return jnp.mean((lower <= true) & (true <= upper))
