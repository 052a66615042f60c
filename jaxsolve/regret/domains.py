r"""Boxes and l1 balls as products of simplices, so regret matching can optimize over them.

Regret matching lives on simplices; a polytope that is the image of a product of
simplices under an affine map inherits it (the conic-hull / scaling reduction of
Grand-Clément & Kroer, "Conic Blackwell algorithm", NeurIPS 2021, for the simplex
case):

* box $[l, u]^n$: one 2-simplex $(p_i, 1 - p_i)$ per coordinate,
  $x_i = l_i + (u_i - l_i) p_i$;
* l1 ball $\{\|x\|_1 \le \tau\}$: one $(2n+1)$-simplex $p$,
  $x = \tau (p_{1:n} - p_{n+1:2n})$ (the last coordinate is slack).

Each returns a `Domain` with ``decode(p) -> x``, ``encode(x) -> p`` (a point with
``decode(encode(x)) = x``) and ``wrap(fun)`` giving ``fun(decode(p), args)``. A KKT point in
``p`` maps to a KKT point in ``x`` (the map is affine and onto).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

__all__ = ["Domain", "box", "l1_ball"]


class Domain(NamedTuple):
    decode: Callable
    encode: Callable
    wrap: Callable


def _wrap(decode):
    def wrap(fun):
        def wrapped(p, args):
            return fun(decode(p), args)

        return wrapped

    return wrap


def box(lower, upper) -> Domain:
    """$[l, u]$ (broadcast elementwise) as a product of 2-simplices along a new last axis."""
    lo, hi = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo >= hi):
        raise ValueError("box: need finite lower < upper")

    def decode(p):
        return jnp.asarray(lo, p.dtype) + jnp.asarray(hi - lo, p.dtype) * p[..., 0]

    def encode(x):
        t = (x - jnp.asarray(lo, x.dtype)) / jnp.asarray(hi - lo, x.dtype)
        t = jnp.clip(t, 0.0, 1.0)
        return jnp.stack([t, 1.0 - t], axis=-1)

    return Domain(decode, encode, _wrap(decode))


def l1_ball(radius: float = 1.0) -> Domain:
    """$\\{\\|x\\|_1 \\le \\tau\\}$ (x a vector of size n) as one (2n+1)-simplex."""
    tau = float(radius)
    if not tau > 0 or not np.isfinite(tau):
        raise ValueError(f"l1_ball: radius must be positive and finite, got {radius}")

    def decode(p):
        n = (p.shape[-1] - 1) // 2
        return tau * (p[..., :n] - p[..., n : 2 * n])

    def encode(x):
        pos, neg = jnp.maximum(x, 0.0) / tau, jnp.maximum(-x, 0.0) / tau
        slack = jnp.clip(1.0 - jnp.sum(pos + neg, axis=-1, keepdims=True), 0.0, None)
        return jnp.concatenate([pos, neg, slack], axis=-1)

    return Domain(decode, encode, _wrap(decode))
