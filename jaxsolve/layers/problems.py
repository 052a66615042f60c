r"""The DC3 "simple QP" family (Donti, Rolnick, Kolter, ICLR 2021), used by Pinet's benchmarks.

$$
\min_y \tfrac12 y^\top Q y + p^\top y \ \text{ s.t. }\ Ay = x,\ Gy \le h,
$$

with $Q = \mathrm{diag}(U[0,1]^n)$, $p \sim U[0,1]^n$, $A, G$ with
standard normal entries, per-instance right-hand sides $x \sim U[-1,1]^{n_{eq}}$
and $h = \sum_j |G A^{+}|_{:,j}$, which makes $y = A^{+}x$ feasible for
every $x$ in the cube (DC3's ``generate_QP.py``; Pinet, arXiv 2508.10480, section 5.1).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.layers.polytope import Polytope

__all__ = ["DC3QP", "dc3_simple_qp"]


class DC3QP(NamedTuple):
    """One DC3 simple-QP family with ``num`` right-hand sides ``X`` (``(num, n_eq)``)."""

    Q: jax.Array  # (n,) diagonal
    p: jax.Array  # (n,)
    A: jax.Array  # (n_eq, n)
    G: jax.Array  # (n_ineq, n)
    h: jax.Array  # (n_ineq,)
    X: jax.Array  # (num, n_eq)

    def polytope(self, X=None) -> Polytope:
        """The feasible set ``{y : Ay = x, Gy <= h}`` for the right-hand sides ``X``."""
        return Polytope(A=self.A, b=self.X if X is None else X, C=self.G, u=self.h)

    def objective(self, y):
        """``0.5 y'Qy + p'y`` (batched over leading axes of ``y``)."""
        return 0.5 * jnp.sum(self.Q * y * y, axis=-1) + y @ self.p


def dc3_simple_qp(key, n: int = 100, n_eq: int = 50, n_ineq: int = 50, num: int = 1000, dtype=None):
    """Draw a DC3 simple-QP family (see the module docstring)."""
    dtype = jnp.dtype(dtype or jnp.result_type(float))
    return _draw(key, int(n), int(n_eq), int(n_ineq), int(num), dtype)


@partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _draw(key, n, n_eq, n_ineq, num, dtype):
    kq, kp, ka, kx, kg = jax.random.split(key, 5)
    Q = jax.random.uniform(kq, (n,), dtype)
    p = jax.random.uniform(kp, (n,), dtype)
    A = jax.random.normal(ka, (n_eq, n), dtype)
    X = jax.random.uniform(kx, (num, n_eq), dtype, -1.0, 1.0)
    G = jax.random.normal(kg, (n_ineq, n), dtype)
    h = jnp.sum(jnp.abs(G @ jnp.linalg.pinv(A)), axis=1)
    return DC3QP(Q, p, A, G, h, X)
