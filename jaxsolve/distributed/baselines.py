r"""The decentralized baselines DS-ADMM is measured against, on the same protocol.

All four send one vector per agent per round and one round per iteration; the
stacked iterate is $X \in \mathbb R^{n\times d}$, $\nabla F(X)$ stacks the agents'
gradients, $\operatorname{prox}_{\alpha g}$ acts row by row with each agent's share $g/n$,
and $\tilde W = (I + W)/2$.

* `dgd` (proximal decentralized gradient descent, Nedic-Ozdaglar 2009):
  $X^{k+1} = \operatorname{prox}_{\alpha g}(WX^k - \alpha\nabla F(X^k))$. With a constant step
  it stalls at an $O(\alpha)$ distance from the solution when local problems differ.
* `pg_extra` (Shi, Ling, Wu, Yin 2015):
  $Z^{k+1} = Z^k + WX^k - \tilde WX^{k-1} - \alpha(\nabla F(X^k) - \nabla F(X^{k-1}))$,
  $X^{k+1} = \operatorname{prox}_{\alpha g}(Z^{k+1})$, from $Z^1 = WX^0 - \alpha\nabla F(X^0)$;
  `extra` is the same with $g = 0$. Exact with a constant step $\alpha < 2\lambda_{\min}(\tilde W)/L$.
* `nids` (Li, Shi, Yan 2019):
  $Z^{k+1} = Z^k - X^k + \tilde W(2X^k - X^{k-1} - \alpha\nabla F(X^k) + \alpha\nabla F(X^{k-1}))$,
  $X^{k+1} = \operatorname{prox}_{\alpha g}(Z^{k+1})$, from $Z^1 = X^0 - \alpha\nabla F(X^0)$; the step
  bound $\alpha < 2/L$ does not depend on the network.
* `decentralized_admm` (Shi, Ling, Yuan, Wu, Yin 2014, with the local loss
  linearized as in DLM, Ling et al. 2015), penalty $c$, degrees $d_i$, neighbour sums
  $S_i = \sum_{j\in N_i} x_j$ and multipliers $\alpha_i$:
  $x_i^{k+1} = \operatorname{prox}_{g/(n(L_i + 2cd_i))}\big(\frac{L_ix_i^k - \nabla f_i(x_i^k) - \alpha_i^k
  + c(d_ix_i^k + S_i^k)}{L_i + 2cd_i}\big)$, $\alpha_i^{k+1} = \alpha_i^k + c(d_ix_i^{k+1} - S_i^{k+1})$.

Step sizes are absolute; ``None`` gives half of the method's step bound
(`default_stepsize`) and $c = \bar L$ for ADMM. Each ``init`` spends the one round that forms the
first neighbour sums.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import jaxsolve
from jaxsolve.core.validation import check_positive
from jaxsolve.distributed.base import DecentralizedSolver, Simulated, check_loss, check_reg
from jaxsolve.distributed.graphs import Neighbours
from jaxsolve.distributed.ledger import Ledger, empty_ledger, record
from jaxsolve.distributed.problems import Zero

__all__ = [
    "DGD",
    "DGDState",
    "PGExtra",
    "PGExtraState",
    "NIDS",
    "NIDSState",
    "DecentralizedADMM",
    "DADMMState",
    "dgd",
    "default_stepsize",
    "extra",
    "pg_extra",
    "nids",
    "decentralized_admm",
]


def _alpha(solver, lips, like, W):
    if solver.stepsize is None:
        if not isinstance(solver.comm, Simulated):
            return None
        return default_stepsize(type(solver), lips, W).astype(like.dtype)
    return jaxsolve.hyper(solver.stepsize, like)


def default_stepsize(kind, lips, W):
    """Half of each method's step bound: $(1 + \\lambda_{\\min}(W)) / (2\\max_i L_i)$ for DGD
    and PG-EXTRA (their bound is $(1 + \\lambda_{\\min}(W))/L$), $1/\\max_i L_i$ for NIDS
    (bound $2/L$)."""
    if kind is NIDS:
        return 1.0 / jnp.max(lips)
    return (1.0 + jnp.linalg.eigvalsh(W)[0]) / (2.0 * jnp.max(lips))


def _start(solver, x0, args):
    r"""The checked start's constants of the step-size methods (DGD, PG-EXTRA, NIDS):
    the agents' $L_i$, the step $\alpha$ and ``error``'s step $\eta$, in ``x0``'s dtype."""
    solver.check_start(x0, args)
    lips = solver._lipschitz(args.data).astype(x0.dtype)
    alpha = _need_alpha(_alpha(solver, lips, x0, args.W))
    return lips, alpha, solver._eta(lips).astype(x0.dtype)


def _need_alpha(alpha):
    if alpha is None:
        raise ValueError("on a device mesh, give stepsize (solve_on_mesh does so)")
    return alpha


class DGDState(NamedTuple):
    r"""State of `DGD` (arrays with a leading agent axis unless said).

    Attributes:
        x: $X^k$, the agents' iterates, ``(n, d)``.
        iter_num: int32 scalar, iterations (one communication round each).
        error: the family's optimality measure at ``x`` (`jaxsolve.distributed.base`):
            the agents' disagreement plus the centralized prox-gradient residual at
            their mean.
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        alpha: the constant step $\alpha$ (0-d; `default_stepsize` when ``stepsize``
            is None).
        lips: the agents' Lipschitz constants $L_i$ of $\nabla f_i$, ``(n,)``.
        eta: the step $1/\sum_i L_i$ of ``error``'s prox-gradient residual (0-d).
        ledger: the communication so far, per agent (`jaxsolve.distributed.Ledger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    alpha: jax.Array
    lips: jax.Array
    eta: jax.Array
    ledger: Ledger


class DGD(DecentralizedSolver):
    """Proximal decentralized gradient descent (see the module docstring)."""

    stepsize: Any = None

    def init(self, x0, args):
        lips, alpha, eta = _start(self, x0, args)
        err = self._error(x0, args, eta)
        return DGDState(x0, jnp.int32(0), err, jnp.int32(0), alpha, lips, eta, empty_ledger())

    def step(self, state, args):
        X = state.x
        WX = self.comm.mix(args.mixing, X)
        X1 = self._prox_g(WX - state.alpha * self._grads(X, args.data), state.alpha, args)
        new = state._replace(
            x=X1,
            iter_num=state.iter_num + 1,
            error=self._error(X1, args, state.eta),
            ledger=record(state.ledger, rounds=1, vectors=1, size=X.shape[1]),
        )
        return new, None


class PGExtraState(NamedTuple):
    r"""State of `PGExtra` (arrays ``(n, d)`` with a leading agent axis unless said).

    Attributes:
        x: $X^k = \operatorname{prox}_{\alpha g}(Z^k)$, the agents' iterates.
        iter_num: int32 scalar, iterations (one communication round each).
        error: the family's optimality measure at ``x`` (`jaxsolve.distributed.base`):
            the agents' disagreement plus the centralized prox-gradient residual at
            their mean.
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        z: $Z^k$, the pre-prox sequence.
        wx: $WX^k$, the neighbours' mix of ``x`` received in the last round.
        grad: $\nabla F(X^k)$, the stacked local gradients.
        x_prev: $X^{k-1}$ (``x0`` at the start).
        wx_prev: $WX^{k-1}$ (``W x0`` at the start).
        grad_prev: $\nabla F(X^{k-1})$ (that of ``x0`` at the start).
        alpha: the constant step $\alpha$ (0-d; `default_stepsize` when ``stepsize``
            is None).
        lips: the agents' Lipschitz constants $L_i$ of $\nabla f_i$, ``(n,)``.
        eta: the step $1/\sum_i L_i$ of ``error``'s prox-gradient residual (0-d).
        ledger: the communication so far, per agent (`jaxsolve.distributed.Ledger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    z: jax.Array
    wx: jax.Array
    grad: jax.Array
    x_prev: jax.Array
    wx_prev: jax.Array
    grad_prev: jax.Array
    alpha: jax.Array
    lips: jax.Array
    eta: jax.Array
    ledger: Ledger


class PGExtra(DecentralizedSolver):
    """PG-EXTRA (EXTRA when ``reg`` is `jaxsolve.distributed.Zero`)."""

    stepsize: Any = None

    def init(self, x0, args):
        lips, alpha, eta = _start(self, x0, args)
        wx = self.comm.mix(args.mixing, x0)
        g, err = self._grads_and_error(x0, x0, args, eta)
        # Z^0 chosen so that the general step gives Z^1 = W X^0 - alpha grad(X^0)
        z = 0.5 * (x0 + wx) - alpha * g
        ledger = record(empty_ledger(), rounds=1, vectors=1, size=x0.shape[1])
        return PGExtraState(
            x0, jnp.int32(0), err, jnp.int32(0), z, wx, g, x0, wx, g, alpha, lips, eta, ledger
        )

    def step(self, state, args):
        a = state.alpha
        z = (
            state.z
            + state.wx
            - 0.5 * (state.x_prev + state.wx_prev)
            - a * (state.grad - state.grad_prev)
        )
        X1 = self._prox_g(z, a, args)
        wx1 = self.comm.mix(args.mixing, X1)
        g1, err = self._grads_and_error(X1, X1, args, state.eta)  # one pass over the data
        new = state._replace(
            x=X1, iter_num=state.iter_num + 1, error=err, z=z, wx=wx1, grad=g1, x_prev=state.x,
            wx_prev=state.wx, grad_prev=state.grad,
            ledger=record(state.ledger, rounds=1, vectors=1, size=X1.shape[1]),
        )  # fmt: skip
        return new, None


class NIDSState(NamedTuple):
    r"""State of `NIDS` (arrays ``(n, d)`` with a leading agent axis unless said).

    Attributes:
        x: $X^k = \operatorname{prox}_{\alpha g}(Z^k)$, the agents' iterates.
        iter_num: int32 scalar, iterations (one communication round each).
        error: the family's optimality measure at ``x`` (`jaxsolve.distributed.base`):
            the agents' disagreement plus the centralized prox-gradient residual at
            their mean.
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        z: $Z^k$, the pre-prox sequence.
        grad: $\nabla F(X^k)$, the stacked local gradients.
        x_prev: $X^{k-1}$ (``x0`` at the start).
        grad_prev: $\nabla F(X^{k-1})$ (that of ``x0`` at the start).
        alpha: the constant step $\alpha$ (0-d; `default_stepsize` when ``stepsize``
            is None).
        lips: the agents' Lipschitz constants $L_i$ of $\nabla f_i$, ``(n,)``.
        eta: the step $1/\sum_i L_i$ of ``error``'s prox-gradient residual (0-d).
        ledger: the communication so far, per agent (`jaxsolve.distributed.Ledger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    z: jax.Array
    grad: jax.Array
    x_prev: jax.Array
    grad_prev: jax.Array
    alpha: jax.Array
    lips: jax.Array
    eta: jax.Array
    ledger: Ledger


class NIDS(DecentralizedSolver):
    """NIDS with a prox (see the module docstring)."""

    stepsize: Any = None

    def init(self, x0, args):
        lips, alpha, eta = _start(self, x0, args)
        g, err = self._grads_and_error(x0, x0, args, eta)
        # Z^0 chosen so that the general step gives Z^1 = X^0 - alpha grad(X^0):
        # Z^0 = 2 X^0 - alpha g - W~ X^0 (one round for W X^0)
        wx = self.comm.mix(args.mixing, x0)
        z = 2 * x0 - alpha * g - 0.5 * (x0 + wx)
        ledger = record(empty_ledger(), rounds=1, vectors=1, size=x0.shape[1])
        return NIDSState(x0, jnp.int32(0), err, jnp.int32(0), z, g, x0, g, alpha, lips, eta, ledger)

    def step(self, state, args):
        a = state.alpha
        y = 2 * state.x - state.x_prev - a * (state.grad - state.grad_prev)
        wy = self.comm.mix(args.mixing, y)
        z = state.z - state.x + 0.5 * (y + wy)
        X1 = self._prox_g(z, a, args)
        g1, err = self._grads_and_error(X1, X1, args, state.eta)  # one pass over the data
        new = state._replace(
            x=X1, iter_num=state.iter_num + 1, error=err, z=z, grad=g1, x_prev=state.x,
            grad_prev=state.grad,
            ledger=record(state.ledger, rounds=1, vectors=1, size=X1.shape[1]),
        )  # fmt: skip
        return new, None


class DADMMState(NamedTuple):
    r"""State of `DecentralizedADMM` (arrays with a leading agent axis unless said).

    Attributes:
        x: $x_i^k$, the agents' iterates, ``(n, d)``.
        iter_num: int32 scalar, iterations (one communication round each).
        error: the family's optimality measure at ``x`` (`jaxsolve.distributed.base`):
            the agents' disagreement plus the centralized prox-gradient residual at
            their mean.
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        nsum: the neighbour sums $S_i^k = \sum_{j \in N_i} x_j^k$, ``(n, d)``,
            received in the last round.
        dual: the multipliers $\alpha_i^k$, ``(n, d)`` (zero at the start).
        c: the penalty $c$ (0-d; the mean $L_i$ when ``penalty`` is None).
        deg: the agents' degrees $d_i$ in the graph of ``W``, ``(n,)``.
        lips: the agents' Lipschitz constants $L_i$ of $\nabla f_i$, ``(n,)``.
        eta: the step $1/\sum_i L_i$ of ``error``'s prox-gradient residual (0-d).
        ledger: the communication so far, per agent (`jaxsolve.distributed.Ledger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    nsum: jax.Array
    dual: jax.Array
    c: jax.Array
    deg: jax.Array
    lips: jax.Array
    eta: jax.Array
    ledger: Ledger


class DecentralizedADMM(DecentralizedSolver):
    """Decentralized ADMM on edge constraints, linearized local loss (module docstring)."""

    penalty: Any = None

    def _adjacency(self, W):
        if isinstance(W, Neighbours):
            return W.adjacency()
        return ((W != 0).astype(W.dtype)) * (1 - self.comm.eye_rows(W))

    def init(self, x0, args):
        self.check_start(x0, args)
        lips = self._lipschitz(args.data).astype(x0.dtype)
        if self.penalty is None:
            c = (self.comm.total(lips) / args.W.shape[1]).astype(x0.dtype)
        else:
            c = jaxsolve.hyper(self.penalty, x0)
        adj = self._adjacency(args.mixing)
        deg = jnp.sum(adj.weight if isinstance(adj, Neighbours) else adj, axis=1)
        nsum = self.comm.mix(adj, x0)
        eta = self._eta(lips).astype(x0.dtype)
        ledger = record(empty_ledger(), rounds=1, vectors=1, size=x0.shape[1])
        err = self._error(x0, args, eta)
        zeros = jnp.zeros_like(x0)
        return DADMMState(
            x0, jnp.int32(0), err, jnp.int32(0), nsum, zeros, c, deg, lips, eta, ledger
        )

    def step(self, state, args):
        X, c = state.x, state.c
        L, deg = state.lips[:, None], state.deg[:, None]
        w = L + 2 * c * deg
        g = self._grads(X, args.data)
        z = (L * X - g - state.dual + c * (deg * X + state.nsum)) / w
        X1 = self._prox_g(z, 1 / w[:, 0], args)
        nsum = self.comm.mix(self._adjacency(args.mixing), X1)
        dual = state.dual + c * (deg * X1 - nsum)
        new = state._replace(
            x=X1, iter_num=state.iter_num + 1, error=self._error(X1, args, state.eta),
            nsum=nsum, dual=dual,
            ledger=record(state.ledger, rounds=1, vectors=1, size=X1.shape[1]),
        )  # fmt: skip
        return new, None


def _checked(loss, reg, name, value):
    check_loss(loss)
    reg = Zero() if reg is None else reg
    check_reg(reg)
    if value is not None:
        check_positive(name, value)
    return reg


def dgd(loss, reg=None, *, stepsize: float | jax.Array | None = None) -> DGD:
    """Proximal DGD with a constant ``stepsize`` (default: `default_stepsize`)."""
    return DGD(loss, _checked(loss, reg, "stepsize", stepsize), Simulated(), stepsize)


def pg_extra(loss, reg=None, *, stepsize: float | jax.Array | None = None) -> PGExtra:
    """PG-EXTRA with a constant ``stepsize`` (default: `default_stepsize`)."""
    return PGExtra(loss, _checked(loss, reg, "stepsize", stepsize), Simulated(), stepsize)


def extra(loss, *, stepsize: float | jax.Array | None = None) -> PGExtra:
    """EXTRA: `pg_extra` on a smooth problem (no regularizer)."""
    return pg_extra(loss, None, stepsize=stepsize)


def nids(loss, reg=None, *, stepsize: float | jax.Array | None = None) -> NIDS:
    """NIDS with a constant ``stepsize`` (default: `default_stepsize`)."""
    return NIDS(loss, _checked(loss, reg, "stepsize", stepsize), Simulated(), stepsize)


def decentralized_admm(
    loss, reg=None, *, penalty: float | jax.Array | None = None
) -> DecentralizedADMM:
    """Decentralized (linearized) ADMM with penalty $c$ (default: the mean $L_i$)."""
    return DecentralizedADMM(loss, _checked(loss, reg, "penalty", penalty), Simulated(), penalty)
