r"""Deep FlexQP: FlexQP whose per-row penalties and relaxation are set by learned policies.

Paper: Oshin, Ghosh, Saravanos and Theodorou, "Deep FlexQP", ICLR 2026 (arXiv
2512.01565), the deep-unfolding half. The iteration is FlexQP's ADMM on the exact
$\ell_1$ relaxation of ``QP(P, q, A, l, u)`` (`jaxsolve.qp.flexqp`, on the
Ruiz-equilibrated problem, equilibrated once per problem), with the scalar $\rho$,
$\mu$, $\alpha$ replaced, at every iteration $k$, by

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
carried in the solver state. `ScalarPolicy` (``Policies.scalar``) is the
scalar-parameter baseline: the same ranges and training, but one trainable value per
iteration for all rows and problems. `ConstantPolicy` returns fixed values: with it, Deep
FlexQP is hand-tuned FlexQP with adaptive $\rho$, weight escalation and polishing
off, iterate for iterate, with or without scaling (``tests/qp/test_deep_flexqp.py``
checks it).

Past the horizon. The policies are trained on ``K`` unrolled iterations
(`jaxsolve.qp.train.train_policy` records ``Policies.horizon = K``); beyond it an LSTM
reads hidden states and features it never saw in training and its parameters are an
extrapolation. So from iteration ``horizon`` on the solver holds $\rho$, $\mu$,
$\alpha$ (and the policies' states) at their values of iteration ``horizon - 1``: the
tail is fixed-parameter relaxed ADMM, i.e. relaxed Douglas-Rachford splitting on the
convex relaxed problem in the metric of the fixed $R = \mathrm{diag}(\rho)$ and
$\sigma$. For $\alpha \in (0, 2)$ (``alpha_range`` lies inside) and $\rho, \mu > 0$
its operator is averaged, so the fixed-point residual $\|w_{k+1} - w_k\|$ in that metric (of
$w = (x, z + R^{-1} y)$) is non-increasing and the iterates converge to a solution of
the relaxation whenever it has one (it is always feasible); the KKT ``error``, a continuous
function vanishing at such a solution, then goes to zero. It is not monotone itself:
it can end above its value at the horizon, at rounding level or on a slowly converging
problem. Held parameters give the same matrix, so the factor is the held one (it is
recomputed: under ``vmap`` a ``cond`` that skipped it would run both branches).
``with_horizon(None)`` runs the policies at every iteration; ``Policies.fixed`` has no
horizon (its parameters are constant anyway) and `ScalarPolicy` holds its schedule's
last value on its own.

The returned point past the horizon. Because that error is not monotone, the solver
reports, from the horizon on, the best iterate since it: the state's ``x``, ``z``, ``y``
and ``error`` are those of the iterate with the smallest ``error`` among iterations
``horizon, horizon + 1, ..., k`` (a NaN error never wins), while the ADMM iteration runs
on from its own last iterate (``DeepFlexQPState.run``). So the returned error after any
budget past the horizon is at most its value at the horizon and never grows with the
budget (the guarantee a user running longer than the training horizon needs), and
within the horizon nothing changes: the returned point is the unrolled network's
output, iterate for iterate. Tracking starts at the horizon, not at iteration 0, so
that inside the trained horizon the solver is exactly the network that was trained;
``keep_best=False`` reports the last iterate instead (the solver before this rule).

Measured (the tables and their history: bench/results/deep_flexqp_horizon.md): holding
alone does not make the last iterate's error end at or below its horizon value on every
problem, because the policies' extrapolation was not the cause (run on, they move each
row's $\rho$, $\mu$ by at most 2.3% past the horizon); the problems whose last iterate
ends above it by more than rounding are slow fixed-parameter ADMM runs.
``past_horizon="adapt"`` rescales the held penalties by OSQP's rule every
`ADAPT_EVERY` iterations (a 5x move at least). It clears more problems at 4x the
horizon but throws some up right after the handover, and no convergence theory covers
it, so ``"hold"`` is the default.

``error`` is FlexQP's relative KKT residual of the relaxed problem, so a learned
solver's SUCCESS means what FlexQP's means (feasibility to ``tol`` while $\mu$ is
below the policy's maximum is not enforced: the policy sets $\mu$). One ``step`` is
one ADMM iteration: ``loop="fixed"`` with ``max_steps=K`` is the unrolled network of
the paper, trained by `jaxsolve.qp.train.train_policy`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.validation import check_int, check_key, check_positive
from jaxsolve.qp.admm import EQ_RHO_WEIGHT, FREE_ROW_RHO, adapted_rho, relaxed_update
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
    "ScalarPolicy",
    "Policies",
    "deep_flexqp",
    "row_features",
]

N_FEATURES = 6
ADAPT_EVERY = 10  # past_horizon="adapt": iterations between penalty updates


class DeepFlexQPState(NamedTuple):
    """State of `deep_flexqp`.

    ``x``, ``z``, ``y`` and ``z_prev`` are in the problem's own units (as in
    `FlexQPState`); ``rho`` and ``mu`` are parameters of the Ruiz-scaled problem the
    iteration runs on (the same units when ``policies.scaling_iters = 0``), with
    ``scale = (D, E, c)`` the factors.

    ``x``, ``z``, ``y``, ``error`` are the returned point: the last iterate within the
    policies' horizon, the best one since the horizon past it (module docstring, "The
    returned point past the horizon"); ``run`` is the iteration's own last iterate.

    Attributes:
        x, iter_num, error, status: the protocol fields (``error``: FlexQP's relative
            KKT residual of the relaxation at ``(x, z, y)``, in the problem's units).
        z: the relaxed copy of ``A x``.
        y: multipliers (OSQP convention; ``|y_i| <= mu_i``).
        run: ``(x, z, y, error)`` of the last iterate, which the next step continues
            from (equal to the returned point except past the horizon).
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
    run: Any


class DeepFlexQPInfo(NamedTuple):
    """Per-iteration record of `deep_flexqp` (the unrolled loss reads ``x`` and ``y``).

    Attributes:
        x: ``(n,)`` the iterate after the step, in the problem's units.
        y: ``(m,)`` its multipliers, in the problem's units.
        rho_mean: scalar, the mean over rows of the penalties the policies chose.
        mu_mean: scalar, the mean over rows of the elastic weights they chose.
        alpha: scalar, the relaxation they chose.
    """

    x: jax.Array
    y: jax.Array
    rho_mean: jax.Array
    mu_mean: jax.Array
    alpha: jax.Array


def _signed_log(v):
    """``sign(v) log(1 + |v|)``: features of any scale in one range."""
    return jnp.sign(v) * jnp.log1p(jnp.abs(v))


def row_features(z, y, Ax, z_prev, rho, mu):
    """The policies' per-row inputs ``(m, 6)`` (module docstring)."""
    return jnp.stack(
        [
            _signed_log(z),
            _signed_log(y),
            _signed_log(Ax - z),
            _signed_log(rho * (z - z_prev)),
            jnp.log(rho),
            jnp.log(mu),
        ],
        axis=-1,
    )


def _log_range(s, lo, hi):
    """``s`` in ``[0, 1]`` mapped log-linearly onto ``[lo, hi]``."""
    return jnp.exp(jnp.log(lo) + s * (jnp.log(hi) - jnp.log(lo)))


class RowPolicy(eqx.Module):
    """LSTM cell (hidden 32) + MLP [32, 32] + sigmoid, applied to each row independently.

    ``__call__(features (m, F), hidden) -> (outputs (m, n_out) in (0, 1), hidden)``.

    Attributes:
        cell: the LSTM cell, ``n_in`` features to ``hidden_size``.
        head: the MLP from the hidden state to the ``n_out`` outputs (before the sigmoid).
        hidden_size: the LSTM's hidden size (static).
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
        """The zero LSTM state ``(h, c)`` of ``rows`` rows."""
        zeros = jnp.zeros((rows, self.hidden_size), dtype)
        return (zeros, zeros)

    def __call__(self, features, hidden):
        hidden = jax.vmap(self.cell)(features, hidden)
        out = jax.nn.sigmoid(jax.vmap(self.head)(hidden[0]))
        return out, hidden


class ConstantPolicy(eqx.Module):
    """A policy that returns ``value`` on every row, whatever the features.

    Used with ``Policies(constant=True)`` (`Policies.fixed`), where the outputs are the
    parameters in their own units, not values in ``(0, 1)`` mapped onto the ranges.

    Attributes:
        value: ``(n_out,)`` the outputs (``(rho, mu)`` or ``(alpha,)``).
    """

    value: Any

    def initial(self, rows: int, dtype):
        """An empty ``(rows, 0)`` state: the policy has none."""
        return jnp.zeros((rows, 0), dtype)

    def __call__(self, features, hidden):
        shape = features.shape[:-1] + jnp.shape(self.value)
        return jnp.broadcast_to(self.value, shape), hidden


class ScalarPolicy(eqx.Module):
    """Problem-independent parameters, one set per iteration: the scalar-parameter
    unrolled baseline against which the row policies are measured.

    Iteration ``k`` (counted in the state) returns ``sigmoid(logits[min(k, T - 1)])`` on
    every row, whatever the features: with ``T = 1`` one value for all iterations, with
    ``T = K`` a schedule over the unrolled horizon held at its last value beyond it.
    The outputs are in ``(0, 1)`` and mapped onto the `Policies` ranges as the
    `RowPolicy` outputs are, so the same training (``train_policy``) fits the logits.

    Attributes:
        logits: ``(T, n_out)`` the values before the sigmoid.
    """

    logits: jax.Array

    def initial(self, rows: int, dtype):
        """The iteration counter ``(rows, 1)`` (int32, no gradient), zero."""
        del dtype
        return jnp.zeros((rows, 1), jnp.int32)

    def __call__(self, features, hidden):
        k = jnp.minimum(hidden[:, 0], self.logits.shape[0] - 1)
        return jax.nn.sigmoid(self.logits[k]), hidden + 1


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

    Attributes:
        ineq: the policy of inequality rows (outputs ``rho, mu``).
        eq: the policy of equality rows (outputs ``rho, mu``).
        alpha: the policy of the relaxation (output ``alpha``).
        rho_range, mu_range: ``(lo, hi)`` onto which the sigmoid outputs are mapped
            log-linearly.
        alpha_range: ``(lo, hi)`` onto which the alpha output is mapped linearly.
        constant: static; the policies are `ConstantPolicy` values in the parameters'
            own units.
        scaling_iters: static; Ruiz passes of the problems (above).
        horizon: static; the number of iterations the policies were trained for
            (`jaxsolve.qp.train.train_policy` sets it to its ``K``), or None. From
            iteration ``horizon`` on the solver holds the parameters of iteration
            ``horizon - 1`` (module docstring, "Past the horizon"); None runs the
            policies at every iteration, extrapolating beyond any training.
    """

    ineq: Any
    eq: Any
    alpha: Any
    rho_range: tuple = (1e-4, 1e4)
    mu_range: tuple = (1e1, 1e7)
    alpha_range: tuple = (1.0, 1.9)
    constant: bool = eqx.field(static=True, default=False)
    scaling_iters: int = eqx.field(static=True, default=0)
    horizon: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.horizon is not None:
            check_int("horizon", self.horizon)

    def with_horizon(self, horizon: int | None) -> Policies:
        """These policies with ``horizon`` (None: the policies run at every iteration)."""
        return dataclasses.replace(self, horizon=horizon)

    @classmethod
    def learned(cls, key, *, scaling_iters: int = 10, **ranges) -> Policies:
        """Freshly initialized `RowPolicy` networks from ``key`` (``**ranges``:
        ``rho_range``, ``mu_range``, ``alpha_range``)."""
        _check_scaling(scaling_iters)
        check_key("key", key)
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

    @classmethod
    def scalar(
        cls,
        horizon: int = 1,
        rho=0.1,
        mu=1e6,
        alpha=1.6,
        *,
        scaling_iters: int = 10,
        **ranges,
    ) -> Policies:
        """Trainable `ScalarPolicy` values over ``horizon`` iterations, started at
        hand-tuned FlexQP's constants (equality rows ``1e3 rho``): untrained, the solver
        is ``fixed(rho, mu, alpha)`` on the same scaled problems, to rounding.

        ``**ranges``: ``rho_range``, ``mu_range``, ``alpha_range`` as in `learned`; the
        starting values must lie inside them."""
        _check_scaling(scaling_iters)
        horizon = check_int("horizon", horizon)
        pol = cls(None, None, None, **ranges)

        def logit(v, lo, hi, log):
            lo, hi, v = float(lo), float(hi), float(v)
            if not lo < v < hi:
                raise ValueError(f"starting value {v} is outside its range ({lo}, {hi})")
            s = (np.log(v / lo) / np.log(hi / lo)) if log else (v - lo) / (hi - lo)
            return np.log(s / (1 - s))

        def start(values):
            return ScalarPolicy(jnp.tile(jnp.asarray(values, float), (horizon, 1)))

        r, m, a = pol.rho_range, pol.mu_range, pol.alpha_range
        return cls(
            start([logit(rho, *r, True), logit(mu, *m, True)]),
            start([logit(EQ_RHO_WEIGHT * rho, *r, True), logit(mu, *m, True)]),
            start([logit(alpha, *a, False)]),
            **ranges,
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
    past_horizon: str = eqx.field(static=True, default="hold")
    keep_best: bool = eqx.field(static=True, default=True)

    def _params(self, features, eq, free, hidden, dtype):
        """The per-row ``rho``, ``mu``, the ``alpha`` and the policies' new states."""
        pol = self.policies
        hidden_ineq, hidden_eq, hidden_alpha = hidden
        out_ineq, hidden_ineq = pol.ineq(features, hidden_ineq)
        out_eq, hidden_eq = pol.eq(features, hidden_eq)
        out_alpha, hidden_alpha = pol.alpha(jnp.mean(features, axis=0, keepdims=True), hidden_alpha)
        out = jnp.where(eq[:, None], out_eq, out_ineq)
        if pol.constant:
            rho, mu, alpha = out[:, 0], out[:, 1], out_alpha[0, 0]
        else:
            rho_range, mu_range, alpha_range = (
                hyper(jnp.asarray(r), dtype) for r in (pol.rho_range, pol.mu_range, pol.alpha_range)
            )
            rho = _log_range(out[:, 0], rho_range[0], rho_range[1])
            mu = _log_range(out[:, 1], mu_range[0], mu_range[1])
            alpha = alpha_range[0] + out_alpha[0, 0] * (alpha_range[1] - alpha_range[0])
        rho = jnp.where(free, jnp.asarray(FREE_ROW_RHO, dtype), rho)
        hidden = (hidden_ineq, hidden_eq, hidden_alpha)
        return rho.astype(dtype), mu.astype(dtype), jnp.asarray(alpha, dtype), hidden

    def _adapted(self, d, x, z, y, state, dtype):
        """``past_horizon="adapt"``: the held per-row penalties times OSQP's factor
        ``sqrt((||r_p|| / scale_p) / (||r_d|| / scale_d))`` (`adapted_rho`) at the
        current iterate, applied every `ADAPT_EVERY` iterations when it exceeds 5x
        either way, clipped to ``rho_range``; free rows keep their penalty."""
        res = kkt_residuals(d, x, z, y, jnp.asarray(False))
        one = jnp.ones((), dtype)
        factor, change = adapted_rho(res, one, state.iter_num, ADAPT_EVERY, True)
        lo, hi = (1e-6, 1e6) if self.policies.constant else self.policies.rho_range
        rho = jnp.clip(state.rho * factor, jnp.asarray(lo, dtype), jnp.asarray(hi, dtype))
        rho = jnp.where(d.free, jnp.asarray(FREE_ROW_RHO, dtype), rho)
        return jnp.where(change, rho, state.rho)

    def _data(self, qp: QP, scale):
        """The `Scaled` data of ``qp`` for the Ruiz factors ``scale = (D, E, c)``."""
        hparams = flexqp(sigma=self.sigma).hyper(qp.q.dtype)
        return scaled_with(qp, hparams, *scale)

    def init(self, x0, qp: QP) -> DeepFlexQPState:
        dtype = qp.q.dtype
        hparams = flexqp(sigma=self.sigma).hyper(dtype)
        d = prepare_scaled(qp, hparams, self.policies.scaling_iters)  # 0: D = E = 1, c = 1
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
            run=(x, z, y, res.kkt),
        )

    def step(self, state: DeepFlexQPState, qp: QP) -> tuple[DeepFlexQPState, DeepFlexQPInfo]:
        dtype = qp.q.dtype
        d = self._data(qp, state.scale)
        # the iteration runs on the scaled problem: x / D, E z, c y / E, from its own
        # last iterate (not the returned best one past the horizon)
        x_run, z_run, y_run, _ = state.run
        x, z, y = x_run / d.D, z_run * d.E, y_run * d.c / d.E
        Ax = d.A @ x
        features = row_features(z, y, Ax, state.z_prev * d.E, state.rho, state.mu)
        rho, mu, alpha, hidden = self._params(features, d.eq, d.free, state.hidden, dtype)
        if self.policies.horizon is not None:
            # past the horizon: the last parameters and states, held (module docstring);
            # the same rho gives the same matrix, so the factor below is the held one
            held = state.iter_num >= self.policies.horizon
            rho_held = state.rho
            if self.past_horizon == "adapt":
                rho_held = self._adapted(d, x, z, y, state, dtype)
            rho, mu, alpha, hidden = jax.tree.map(
                lambda old, new: jnp.where(held, old, new),
                (rho_held, state.mu, state.alpha, state.hidden),
                (rho, mu, alpha, hidden),
            )
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
        res = kkt_residuals(d, *jax.lax.stop_gradient((xn, zn, yn)), jnp.asarray(False))
        x_user, z_user, y_user = unscale(d, xn, zn, yn)
        run = (x_user, z_user, y_user, res.kkt)
        shown = run
        if self.policies.horizon is not None and self.keep_best:
            # past the horizon the returned point is the best iterate since it (module
            # docstring): the old one stays unless the new error is smaller; a NaN
            # error never wins, and a NaN returned error loses to any number
            best = jnp.where(jnp.isnan(state.error), jnp.inf, state.error)
            stay = (state.iter_num + 1 > self.policies.horizon) & ~(res.kkt < best)
            shown = jax.tree.map(
                lambda old, new: jnp.where(stay, old, new),
                (state.x, state.z, state.y, state.error),
                run,
            )
        new = DeepFlexQPState(
            x=shown[0],
            iter_num=state.iter_num + 1,
            error=shown[3],
            status=state.status,
            z=shown[1],
            y=shown[2],
            rho=rho,
            mu=mu,
            alpha=alpha,
            z_prev=z_run,
            hidden=hidden,
            scale=state.scale,
            run=run,
        )
        info = DeepFlexQPInfo(x_user, y_user, jnp.mean(rho), jnp.mean(mu), alpha)
        return new, info


def deep_flexqp(
    policies: Policies | None = None,
    *,
    key=None,
    sigma: float = 1e-6,
    past_horizon: str = "hold",
    keep_best: bool = True,
) -> DeepFlexQP:
    """A Deep FlexQP solver: ``policies`` (default: freshly initialized learned
    policies from ``key``, or hand-tuned constants when ``key`` is None too).

    The problems are equilibrated with ``policies.scaling_iters`` Ruiz passes (see
    `Policies`). Use with ``jaxsolve.solve(solver, x0, qp, ...)``; one step is one ADMM
    iteration. ``past_horizon``: from iteration ``policies.horizon`` on, ``"hold"`` the
    last parameters, or ``"adapt"`` hold them but rescale the penalties by OSQP's rule
    (module docstring, "Past the horizon"); no effect when ``policies.horizon`` is None.
    ``keep_best``: past the horizon, return the best iterate since it (default) rather
    than the last one (module docstring, "The returned point past the horizon").
    """
    if past_horizon not in ("hold", "adapt"):
        raise ValueError(f"past_horizon must be 'hold' or 'adapt', got {past_horizon!r}")
    if policies is None:
        policies = Policies.fixed() if key is None else Policies.learned(key)
    if not isinstance(policies, Policies):
        raise TypeError(
            f"policies must be a jaxsolve.qp.deep.Policies, got {type(policies).__name__}"
        )
    check_positive("sigma", sigma)  # ADMM's proximal weight on x: 0 or less is no ADMM
    if not isinstance(keep_best, bool):
        raise TypeError(f"keep_best must be a bool, got {keep_best!r}")
    return DeepFlexQP(
        policies=policies, sigma=sigma, past_horizon=past_horizon, keep_best=keep_best
    )
