r"""What every decentralized solver shares: the communicator and the optimality measure.

A solver's ``step`` never multiplies by the mixing matrix itself: it calls
``self.comm.mix(M, Z)`` for one round of neighbour exchange ($MZ$, for a matrix $M$
with the sparsity of the graph) and ``self.comm.total(z)`` for a network-wide sum
(monitoring only). `Simulated` does both on stacked arrays (all agents on one
device: $MZ$ is a matrix product, or, for a matrix given as
`jaxsolve.distributed.graphs.Neighbours` (a sparse graph's padded neighbour lists,
``Problem.mixing``), each agent's weighted sum of its $K$ gathered neighbours, $nKd$
multiply-adds instead of $n^2 d$; ``vmap`` batches both); the device-mesh
communicator of `jaxsolve.distributed.mesh` does them with ``ppermute`` and
``psum`` inside ``jax.shard_map``. The same ``step`` runs both ways.

The optimality measure (``State.error`` of every method here) is

$$
\text{error} = \Big(\frac1n\sum_i \|x_i - \bar x\|^2\Big)^{1/2}
+ \big\|\bar x - \operatorname{prox}_{\eta g}\big(\bar x - \eta \textstyle\sum_i \nabla f_i(\bar x)\big)\big\|,
\qquad \eta = 1 / \textstyle\sum_i L_i,
$$

the agents' disagreement plus the centralized prox-gradient residual at their mean;
it vanishes exactly when all agents hold one minimizer of $\sum_i f_i + g$, and the
same map gives ``optimality`` (what implicit differentiation uses). It is a
monitoring quantity (a global reduction the ledger does not count), the same for
every method, so ``tol`` means the same thing for all of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

import jaxsolve
from jaxsolve.distributed.graphs import Neighbours
from jaxsolve.distributed.problems import (
    L1,
    Box,
    L2Squared,
    LeastSquares,
    Logistic,
    SmoothedHinge,
    Zero,
)

__all__ = ["Simulated", "DecentralizedSolver", "check_loss", "check_reg"]

_LOSSES = (LeastSquares, Logistic, SmoothedHinge)
_REGS = (Zero, L1, L2Squared, Box)


@dataclasses.dataclass(frozen=True)
class Simulated:
    """All agents stacked on one device: a round of exchange is ``M @ Z``."""

    def mix(self, M, Z):
        if isinstance(M, Neighbours):
            # Inside a conditional whose predicate is always true but known only at run
            # time, so that the sum is computed once: fused into its consumers instead,
            # XLA:CPU recomputes it in each of them from K materialized gathers (a
            # DS-ADMM step at n = 256, d = 500, K = 26: 26 ms, against 5.4 ms this way
            # and 6.9 ms dense). Under vmap over problems both branches run (a select).
            zeros = lambda M, Z: jnp.zeros_like(Z)
            return jax.lax.cond(M.index[0, 0] >= 0, _neighbour_sum, zeros, M, Z)
        return jnp.tensordot(M, Z, axes=1)

    def total(self, z):
        return jnp.sum(z, axis=0)

    def eye_rows(self, M):
        return jnp.eye(M.shape[0], M.shape[1], dtype=M.dtype)


def _neighbour_sum(M, Z):
    """$\\sum_k w_{ik} Z_{j_{ik}}$ for every agent $i$, the K terms unrolled: XLA fuses the
    K gathers and the sum into one pass over Z (an einsum over the gathered (n, K, d)
    array, a reduction over it, or a loop over k are each 3-40x slower on CPU)."""
    out = M.weight[:, 0, None] * Z[M.index[:, 0]]
    for k in range(1, M.index.shape[1]):
        out = out + M.weight[:, k, None] * Z[M.index[:, k]]
    return out


def check_loss(loss) -> None:
    """``TypeError`` unless ``loss`` has ``value``, ``grad`` and ``lipschitz``."""
    missing = [m for m in ("value", "grad", "lipschitz") if not callable(getattr(loss, m, None))]
    if missing:
        raise TypeError(
            f"loss must be a loss object such as LeastSquares() or Logistic() "
            f"(with value, grad, lipschitz); {type(loss).__name__} lacks {', '.join(missing)}"
        )


def check_reg(reg) -> None:
    """``TypeError`` unless ``reg`` has ``value`` and ``prox``."""
    missing = [m for m in ("value", "prox") if not callable(getattr(reg, m, None))]
    if missing:
        raise TypeError(
            f"reg must be a regularizer such as L1(), L2Squared(), Box() or Zero(); "
            f"{type(reg).__name__} lacks {', '.join(missing)}"
        )


class DecentralizedSolver(jaxsolve.AbstractSolver):
    """Base of the decentralized solvers: the loss, the regularizer, the communicator."""

    loss: Any = eqx.field(static=True)
    reg: Any = eqx.field(static=True)
    comm: Any = eqx.field(static=True)

    def check_args(self, x0, args) -> None:
        """The loss's value checks of the agents' data (``check_data``: labels of
        `Logistic`, `SmoothedHinge`), run by `jaxsolve.solve` before tracing."""
        check = getattr(self.loss, "check_data", None)
        if check is not None and hasattr(args, "data"):
            check(args.data)

    def check_start(self, x0, problem) -> None:
        """Raise ``ValueError`` naming ``x0`` unless it holds one row per agent of
        ``problem.W`` that fits the agents' data (shapes only: runs under tracing too)."""
        agents = problem.W.shape[0]
        if jnp.ndim(x0) != 2 or jnp.shape(x0)[0] != agents:
            raise ValueError(
                f"x0 must have shape ({agents}, d): one row per agent of W, got {jnp.shape(x0)}"
            )
        first = jax.tree.map(lambda v: v[0], problem.data)
        row = jax.ShapeDtypeStruct(jnp.shape(x0)[1:], jnp.result_type(x0))
        try:
            grad = jax.eval_shape(self.loss.grad, row, first)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"x0's rows (length {jnp.shape(x0)[1]}) do not fit the agents' data "
                f"{jax.tree.map(jnp.shape, first)}: {str(err).splitlines()[0]}"
            ) from None
        # data that broadcast against a row without failing (b of shape (m, 1) for
        # (m,)) give a gradient of another shape, which failed later, deep in a step
        if grad.shape != row.shape:
            raise ValueError(
                f"the agents' data {jax.tree.map(jnp.shape, first)} do not fit x0's rows "
                f"(length {row.shape[0]}): {type(self.loss).__name__}.grad has shape "
                f"{grad.shape}, not {row.shape}"
            )
        try:
            jax.eval_shape(lambda z: self.reg.prox(z, jnp.ones((), z.dtype), problem.reg), row)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"the problem's reg parameters {jax.tree.map(jnp.shape, problem.reg)} do not "
                f"fit the regularizer {type(self.reg).__name__}() and rows of length "
                f"{row.shape[0]} (L1/L2Squared take a weight lam, a scalar or one per "
                f"coordinate; Box a pair (lo, hi)): {str(err).splitlines()[0]}"
            ) from None

    # per-agent maps over the stacked agent axis
    def _grads(self, X, data):
        return jax.vmap(self.loss.grad)(X, data)

    def _lipschitz(self, data):
        return jax.vmap(self.loss.lipschitz)(data)

    def _prox_g(self, Z, c, problem):
        """prox of ``c * g / n`` for each agent's row (an agent holds ``g / n``);
        ``c`` is a scalar or an ``(n_local,)`` array of per-agent steps."""
        n = problem.W.shape[1]
        c = jnp.broadcast_to(c / n, Z.shape[:1])
        return jax.vmap(lambda z, ci: self.reg.prox(z, ci, problem.reg))(Z, c)

    def _eta(self, lips):
        """The step of the error's centralized prox-gradient residual: 1 / sum_i L_i."""
        return 1.0 / self.comm.total(lips)

    def optimality(self, x, args):
        """The residual $X - \\mathbf 1\\,T(\\bar x)^\\top$, with $T$ the centralized
        prox-gradient map of the error measure: zero exactly at a consensual minimizer.
        What ``solve(..., adjoint=jaxsolve.Implicit())`` differentiates, for every method
        of the family (in the simulation)."""
        problem = args
        lips = jax.lax.stop_gradient(self._lipschitz(problem.data))
        eta = self._eta(lips).astype(x.dtype)  # any eta > 0 has the same fixed points
        n = problem.W.shape[1]
        xbar = self.comm.total(x) / n
        grads = jax.vmap(self.loss.grad, in_axes=(None, 0))(xbar, problem.data)
        moved = self.reg.prox(xbar - eta * self.comm.total(grads), eta, problem.reg)
        return x - moved[None, :]

    def _mean(self, X, problem):
        return self.comm.total(X) / problem.W.shape[1]

    def _error(self, X, problem, eta):
        """The error measure at ``X`` (the module docstring), the agents' gradients at
        their mean computed here."""
        xbar = self._mean(X, problem)
        grads = jax.vmap(self.loss.grad, in_axes=(None, 0))(xbar, problem.data)
        return self._error_from(X, xbar, grads, problem, eta)

    def _error_from(self, X, xbar, grads, problem, eta):
        """The error measure at ``X`` given its mean ``xbar`` and the agents' gradients
        ``grads`` (``(n_local, d)``) at it: the one place its formula is written."""
        n = problem.W.shape[1]
        spread = jnp.sqrt(self.comm.total(jnp.sum((X - xbar) ** 2, axis=1)) / n)
        g = self.comm.total(grads)
        moved = xbar - self.reg.prox(xbar - eta * g, eta, problem.reg)
        return spread + jnp.linalg.norm(moved)

    def _grads_and_error(self, P, X, problem, eta):
        """The agents' gradients at the rows of ``P`` and the error measure at ``X``.
        With a loss that has ``grads_at`` (the losses here), an agent's two gradients,
        at $p_i$ and at $\\bar x$, come from one product of its data with the pair
        $[p_i\\; \\bar x]$ and one back, so a step that needs both reads the data twice
        instead of four times. (Vmapping ``loss.grad`` over the pair instead gives
        XLA:CPU batched products in slow layouts: a PG-EXTRA step at 256 agents,
        $d = 500$, took 6.7 ms against 4.7 ms apart.)"""
        grads_at = getattr(self.loss, "grads_at", None)
        if grads_at is None:
            return self._grads(P, problem.data), self._error(X, problem, eta)
        xbar = self._mean(X, problem)
        pairs = jnp.stack([P, jnp.broadcast_to(xbar, P.shape)], axis=2)  # (n, d, 2)
        both = jax.vmap(grads_at)(pairs, problem.data)
        return both[:, 0], self._error_from(X, xbar, both[:, 1], problem, eta)
