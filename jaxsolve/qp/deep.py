r"""Deep FlexQP: FlexQP whose per-row penalties and relaxation are set by learned policies.

Paper: Oshin, Ghosh, Saravanos and Theodorou, "Deep FlexQP", ICLR 2026 (arXiv
2512.01565), the deep-unfolding half. The iteration is FlexQP's ADMM on the exact
$\ell_1$ relaxation of ``QP(P, q, A, l, u)`` (`jaxsolve.qp.flexqp`, on the
Ruiz-equilibrated problem, equilibrated once per problem), with the scalar $\rho$, $\mu$, $\alpha$ replaced, at every iteration $k$, by

* per-row penalties $\rho_{k,i}$ and elastic weights $\mu_{k,i}$ from a policy
  applied row by row (one for inequality rows, one for equality rows), and
* the relaxation $\alpha_k$ from a policy of the rows' mean features,

so the number of parameters does not depend on the problem size. One iteration:

$$
(P + \sigma I + A^\top R_k A)\,\tilde x = \sigma x - q + A^\top (R_k z - y),\quad
\hat z = \alpha_k A \tilde x + (1 - \alpha_k) z,\quad
x^+ = \alpha_k \tilde x + (1 - \alpha_k) x,
$$
$$
z^+ = \operatorname{prox}_{\mu_k R_k^{-1} \mathrm{dist}}(\hat z + R_k^{-1} y),\quad
y^+ = R_k (\hat z + R_k^{-1} y - z^+),
$$

$R_k = \mathrm{diag}(\rho_k)$: the matrix changes with $\rho_k$, so it is factored at
every iteration (dense Cholesky: the small and medium problems the policies are
trained on). Row features (the policy's inputs, signed $\log(1 + |v|)$ so that one
policy reads rows of any scale): $z_i$, $y_i$, the primal residual $(Ax)_i - z_i$,
the row's dual-residual term $\rho_i (z_i - z_i^{prev})$, $\log \rho_i$, $\log \mu_i$.

Policies (`RowPolicy`): an ``equinox`` LSTM cell (hidden size 32) then an MLP
[32, 32], sigmoid outputs mapped log-linearly onto the ranges ``rho_range`` /
``mu_range`` (and linearly onto ``alpha_range``); the LSTM state of every row is
carried in the solver state. `ConstantPolicy` returns fixed values: with it, Deep
FlexQP is hand-tuned FlexQP with adaptive $\rho$, weight escalation and polishing
off, iterate for iterate, with or without scaling (tests).

``error`` is FlexQP's relative KKT residual of the relaxed problem, so a learned
solver's SUCCESS means what FlexQP's means (feasibility to ``tol`` while $\mu$ is
below the policy's maximum is not enforced: the policy sets $\mu$). One ``step`` is
one ADMM iteration: ``loop="fixed"`` with ``max_steps=K`` is the unrolled network of
the paper, trained by `jaxsolve.qp.train.train_policy`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.qp.admm import EQ_RHO_WEIGHT, FREE_ROW_RHO, relaxed_update
from jaxsolve.qp.flexqp import flexqp
from jaxsolve.qp.problem import QP
from jaxsolve.qp.residuals import kkt_residuals
from jaxsolve.qp.scaling import prepare_scaled, scaled_with, unscale

__all__ = [
    "DeepFlexQP",
    "DeepFlexQPState",
    "DeepFlexQPInfo",
    "RowPolicy",
    "ConstantPolicy",
    "Policies",
    "deep_flexqp",
    "row_features",
]

N_FEATURES = 6


class DeepFlexQPState(NamedTuple):
    """State of `deep_flexqp`.

    ``x``, ``z``, ``y`` and ``z_prev`` are in the problem's own units (as in
    `FlexQPState`); ``rho`` and ``mu`` are parameters of the Ruiz-scaled problem the
    iteration runs on (the same units when ``policies.scaling_iters = 0``), with
    ``scale = (D, E, c)`` the factors.

    Attributes:
        x, iter_num, error, status: the protocol fields (``error``: FlexQP's relative
            KKT residual of the relaxation at ``(x, z, y)``, in the problem's units).
        z: the relaxed copy of ``A x``.
        y: multipliers (OSQP convention; ``|y_i| <= mu_i``).
        rho, mu: the per-row penalties and elastic weights last used.
        alpha: the relaxation last used.
        z_prev: ``z`` before the last iteration (dual-residual feature).
        hidden: the policies' recurrent states (a pytree).
        scale: the Ruiz factors ``(D, E, c)``, computed once in ``init``.
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    z: jax.Array
    y: jax.Array
    rho: jax.Array
    mu: jax.Array
    alpha: jax.Array
    z_prev: jax.Array
    hidden: Any
    scale: Any


class DeepFlexQPInfo(NamedTuple):
    """Per-iteration record: the iterate ``(x, y)`` in the problem's units (the unrolled
    loss reads it) and the parameters the policies chose (their means over rows)."""

    x: jax.Array
    y: jax.Array
    rho_mean: jax.Array
    mu_mean: jax.Array
    alpha: jax.Array


def _slog(v):
    return jnp.sign(v) * jnp.log1p(jnp.abs(v))


def row_features(z, y, Ax, z_prev, rho, mu):
    """The policies' per-row inputs ``(m, 6)`` (module docstring)."""
    return jnp.stack(
        [_slog(z), _slog(y), _slog(Ax - z), _slog(rho * (z - z_prev)), jnp.log(rho), jnp.log(mu)],
        axis=-1,
    )


def _log_range(s, lo, hi):
    return jnp.exp(jnp.log(lo) + s * (jnp.log(hi) - jnp.log(lo)))


class RowPolicy(eqx.Module):
    """LSTM cell (hidden 32) + MLP [32, 32] + sigmoid, applied to each row independently.

    ``__call__(features (m, F), hidden) -> (outputs (m, n_out) in (0, 1), hidden)``.
    """

    cell: eqx.nn.LSTMCell
    head: eqx.nn.MLP
    hidden_size: int = eqx.field(static=True)

    def __init__(self, key, n_out: int = 2, n_in: int = N_FEATURES, hidden_size: int = 32):
        k1, k2 = jax.random.split(key)
        self.cell = eqx.nn.LSTMCell(n_in, hidden_size, key=k1)
        self.head = eqx.nn.MLP(hidden_size, n_out, 32, 2, activation=jax.nn.relu, key=k2)
        self.hidden_size = hidden_size

    def initial(self, rows: int, dtype):
        z = jnp.zeros((rows, self.hidden_size), dtype)
        return (z, z)

    def __call__(self, feats, hidden):
        h = jax.vmap(self.cell)(feats, hidden)
        out = jax.nn.sigmoid(jax.vmap(self.head)(h[0]))
        return out, h


class ConstantPolicy(eqx.Module):
    """Fixed outputs (values in (0, 1) of the ranges' scale are not used: it returns
    the parameters directly through `Policies.constant`)."""

    value: Any

    def initial(self, rows: int, dtype):
        return jnp.zeros((rows, 0), dtype)

    def __call__(self, feats, hidden):
        return jnp.broadcast_to(self.value, feats.shape[:-1] + jnp.shape(self.value)), hidden


class Policies(eqx.Module):
    """The three policies and the ranges their outputs are mapped onto.

    ``ineq`` and ``eq``: row policies with two outputs (rho, mu); ``alpha``: a row
    policy with one output applied to the rows' mean features (a batch of one row).
    With ``constant=True`` the policies are `ConstantPolicy` values given in the
    parameters' own units (no range mapping).

    ``scaling_iters``: Ruiz equilibration passes of the problems the policies act on
    (computed once per problem in ``init``). It belongs to the policies because they
    read the scaled rows and set the scaled problem's parameters, as hand-tuned
    FlexQP's ``rho`` acts on its scaled problem: a policy is trained and run with one
    value. ``learned`` uses 10 (FlexQP's default: trained on equilibrated rows the
    learned policies reach lower residuals than on unscaled ones); ``fixed`` uses 0,
    where a constant policy is FlexQP without scaling iterate for iterate.
    """

    ineq: Any
    eq: Any
    alpha: Any
    rho_range: tuple = (1e-4, 1e4)
    mu_range: tuple = (1e1, 1e7)
    alpha_range: tuple = (1.0, 1.9)
    constant: bool = eqx.field(static=True, default=False)
    scaling_iters: int = eqx.field(static=True, default=0)

    @classmethod
    def learned(cls, key, *, scaling_iters: int = 10, **ranges) -> Policies:
        _check_scaling(scaling_iters)
        k1, k2, k3 = jax.random.split(key, 3)
        return cls(
            RowPolicy(k1, 2),
            RowPolicy(k2, 2),
            RowPolicy(k3, 1),
            **ranges,
            scaling_iters=scaling_iters,
        )

    @classmethod
    def fixed(cls, rho=0.1, mu=1e6, alpha=1.6, *, scaling_iters: int = 0) -> Policies:
        """Hand-tuned FlexQP's parameters (equality rows get ``1e3 rho`` as there)."""
        _check_scaling(scaling_iters)
        return cls(
            ConstantPolicy(jnp.array([rho, mu])),
            ConstantPolicy(jnp.array([EQ_RHO_WEIGHT * rho, mu])),
            ConstantPolicy(jnp.array([alpha])),
            constant=True,
            scaling_iters=scaling_iters,
        )


def _check_scaling(scaling_iters):
    if isinstance(scaling_iters, bool) or not isinstance(scaling_iters, int) or scaling_iters < 0:
        raise ValueError(f"scaling_iters must be a non-negative int, got {scaling_iters!r}")


class DeepFlexQP(AbstractSolver):
    """Deep FlexQP (module docstring); built by `deep_flexqp`.

    Traced: the policies' weights and ranges, ``sigma``. Static: the structure.
    """

    policies: Policies
    sigma: Any = 1e-6

    def _params(self, feats, eq, free, hidden, dtype):
        pol = self.policies
        h_i, h_e, h_a = hidden
        out_i, h_i = pol.ineq(feats, h_i)
        out_e, h_e = pol.eq(feats, h_e)
        out_a, h_a = pol.alpha(jnp.mean(feats, axis=0, keepdims=True), h_a)
        out = jnp.where(eq[:, None], out_e, out_i)
        if pol.constant:
            rho, mu, alpha = out[:, 0], out[:, 1], out_a[0, 0]
        else:
            rr, mr, ar = (
                hyper(jnp.asarray(r), dtype) for r in (pol.rho_range, pol.mu_range, pol.alpha_range)
            )
            rho = _log_range(out[:, 0], rr[0], rr[1])
            mu = _log_range(out[:, 1], mr[0], mr[1])
            alpha = ar[0] + out_a[0, 0] * (ar[1] - ar[0])
        rho = jnp.where(free, jnp.asarray(FREE_ROW_RHO, dtype), rho)
        return rho.astype(dtype), mu.astype(dtype), jnp.asarray(alpha, dtype), (h_i, h_e, h_a)

    def _data(self, qp: QP, scale):
        hp = flexqp(sigma=self.sigma).hyper(qp.q.dtype)
        return scaled_with(qp, hp, *scale)

    def init(self, x0, qp: QP) -> DeepFlexQPState:
        dtype = qp.q.dtype
        hp = flexqp(sigma=self.sigma).hyper(dtype)
        d = prepare_scaled(qp, hp, self.policies.scaling_iters)  # 0: D = E = 1, c = 1
        m = qp.l.shape[0]
        x = jnp.asarray(x0, dtype)
        z = jnp.clip(qp.A @ x, qp.l, qp.u)
        y = jnp.zeros_like(z)
        pol = self.policies
        hidden = (pol.ineq.initial(m, dtype), pol.eq.initial(m, dtype), pol.alpha.initial(1, dtype))
        res = kkt_residuals(d, x / d.D, z * d.E, y, jnp.asarray(False))
        one = jnp.ones((m,), dtype)
        return DeepFlexQPState(
            x=x,
            iter_num=jnp.int32(0),
            error=res.kkt,
            status=jnp.int32(Status.SUCCESS),
            z=z,
            y=y,
            rho=0.1 * one,
            mu=1e4 * one,
            alpha=jnp.asarray(1.6, dtype),
            z_prev=z,
            hidden=hidden,
            scale=(d.D, d.E, d.c),
        )

    def step(self, state: DeepFlexQPState, qp: QP) -> tuple[DeepFlexQPState, DeepFlexQPInfo]:
        dtype = qp.q.dtype
        d = self._data(qp, state.scale)
        # the iteration runs on the scaled problem: x / D, E z, c y / E
        x, z, y = state.x / d.D, state.z * d.E, state.y * d.c / d.E
        Ax = d.A @ x
        feats = row_features(z, y, Ax, state.z_prev * d.E, state.rho, state.mu)
        rho, mu, alpha, hidden = self._params(feats, d.eq, d.free, state.hidden, dtype)
        n = x.shape[0]
        K = d.P + d.sigma * jnp.eye(n, dtype=dtype) + d.A.T @ (rho[:, None] * d.A)
        L = jnp.linalg.cholesky(K)
        rhs = d.sigma * x - d.q + d.A.T @ (rho * z - y)
        xt = cho_solve((L, True), rhs)
        zt = d.A @ xt
        xn = alpha * xt + (1 - alpha) * x
        zh = alpha * zt + (1 - alpha) * z
        # infinite bounds as huge finite ones in the update: the same forward values, but
        # reverse mode through its `where`s multiplies the unused branch's zero cotangent
        # by (zh - u) = -inf (NaN); the error needs no derivative at all
        big = jnp.finfo(dtype).max ** 0.5
        lo, up = jnp.maximum(d.l, -big), jnp.minimum(d.u, big)
        zn, yn = relaxed_update(zh, y, rho, mu, lo, up)
        sg = jax.lax.stop_gradient
        res = kkt_residuals(d, sg(xn), sg(zn), sg(yn), jnp.asarray(False))
        x_user, z_user, y_user = unscale(d, xn, zn, yn)
        new = DeepFlexQPState(
            x=x_user,
            iter_num=state.iter_num + 1,
            error=res.kkt,
            status=state.status,
            z=z_user,
            y=y_user,
            rho=rho,
            mu=mu,
            alpha=alpha,
            z_prev=state.z,
            hidden=hidden,
            scale=state.scale,
        )
        info = DeepFlexQPInfo(x_user, y_user, jnp.mean(rho), jnp.mean(mu), alpha)
        return new, info


def deep_flexqp(policies: Policies | None = None, *, key=None, sigma: float = 1e-6) -> DeepFlexQP:
    """A Deep FlexQP solver: ``policies`` (default: freshly initialized learned
    policies from ``key``, or hand-tuned constants when ``key`` is None too).

    The problems are equilibrated with ``policies.scaling_iters`` Ruiz passes (see
    `Policies`). Use with ``jaxsolve.solve(solver, x0, qp, ...)``; one step is one ADMM
    iteration.
    """
    if policies is None:
        policies = Policies.fixed() if key is None else Policies.learned(key)
    if not isinstance(policies, Policies):
        raise TypeError(
            f"policies must be a jaxsolve.qp.deep.Policies, got {type(policies).__name__}"
        )
    return DeepFlexQP(policies=policies, sigma=sigma)
