r"""DS-ADMM: decentralized double-communication symmetric ADMM (arXiv 2511.05283).

Huang, Wang, Liu, Lan, Wu, "Communication-Efficient Decentralized Optimization via
Double-Communication Symmetric ADMM" (ICLR 2026, arXiv 2511.05283).

**Constraints.** With $\tilde W = W \otimes I_d$ and stacked agent copies $u, v$, consensus
holds iff $u = \tilde W v$ and $v = \tilde W u$ (then $u = \tilde W^2 u$, whose only
fixed points are consensual when $W$ is connected with eigenvalues in $(-1, 1]$). So

$$
\min_{u, v}\; f(u) + g(v) \quad\text{s.t.}\quad Au - Bv = 0,\qquad
A = \begin{pmatrix}\tilde W\\ I\end{pmatrix},\; B = \begin{pmatrix} I\\ \tilde W\end{pmatrix},
$$

with $f(u) = \sum_i f_i(u_i)$, $g(v) = \sum_i g(v_i)/n$: symmetric under $u \leftrightarrow v$.

**Generalized symmetric ADMM** (He, Ma, Yuan 2016) on the augmented Lagrangian
$f(u) + g(v) - \lambda^\top(Au - Bv) + \frac\beta2\|Au - Bv\|^2$, $\lambda = (\lambda_1; \lambda_2)$,
with the graph-aware proximal term $\frac12\|\cdot\|^2_Q$, $Q = \beta((1+\tau)I - \tilde W^2)$
(positive definite for $\tau > 0$), which cancels the coupling $\tilde W^2$ so both
subproblems are separable over agents with the weight $c = \beta(2 + \tau)$:

$$
\begin{aligned}
u^{t+1} &= \operatorname{prox}_{f/c}\big(\tfrac1c[\tilde W p^t + \lambda_2^t + \beta(1+\tau)u^t]\big),
  & p^t &= \lambda_1^t + 2\beta v^t - \beta \tilde W u^t,\\
\lambda^{t+1/2} &= \lambda^t - r\beta(Au^{t+1} - Bv^t),\\
v^{t+1} &= \operatorname{prox}_{g/c}\big(\tfrac1c[\tilde W q^{t+1} - \lambda_1^{t+1/2} + \beta(1+\tau)v^t]\big),
  & q^{t+1} &= 2\beta u^{t+1} - \lambda_2^{t+1/2} - \beta\tilde W v^t,\\
\lambda^{t+1} &= \lambda^{t+1/2} - s\beta(Au^{t+1} - Bv^{t+1}).
\end{aligned}
$$

(These closed forms are derived from the updates, not read from the paper.) With
$r = 0$ the first dual step vanishes: plain proximal ADMM on the same constraints.

**Two rounds, two vectors each.** Each agent keeps $\tilde W v^t$ and $\tilde W p^t$
from the previous round. Round 1: after its local $u$-step and $\lambda_2$ half step,
agent $i$ broadcasts $(u_i^{t+1}, q_i^{t+1})$ and receives the sums
$(\tilde W u^{t+1})_i, (\tilde W q^{t+1})_i$; then $\lambda_1$'s half step, the
$v$-step and $\lambda_1$'s full step are local. Round 2: it broadcasts
$(v_i^{t+1}, p_i^{t+1})$; then $\lambda_2$'s full step is local. So an iteration costs
2 rounds, 4 vectors, $4d$ scalars per agent; ``init`` spends 2 rounds (one vector each)
to form $\tilde W v^0$ and $\tilde W p^0$.

**The $u$-step.** Least squares has a closed-form prox (``f_step="prox"``). For a loss
without one (logistic, smoothed hinge) the default ``f_step="newton"`` computes the
prox by a few Newton steps on $f_i(u) + \frac c2\|u - z_i\|^2$ warm-started at $u_i^t$
($d\times d$ Hessians: moderate $d$); ``f_step="gradient"`` instead replaces $f_i$ by
its linearization at $u_i^t$ plus $\frac{L_i}2\|u - u_i^t\|^2$, so the $u$-step is
$u_i^{t+1} = (\text{rhs}_i + L_i u_i^t - \nabla f_i(u_i^t)) / (c + L_i)$: cheaper per
iteration, but more iterations (and so more communication) on the problems measured.
Neither changes the communication per iteration.

**Where the $u$-step is computed.** Its inputs ($\tilde W p^t$, $\lambda_2^t$, $u^t$)
are all known at the end of the previous iteration, when the error measure at $v^t$
is computed too, and both read the agents' data: the error needs every agent's
gradient at the mean $\bar v^t$. So each iteration ends by computing $u^{t+1}$ and
the error together (``init`` does so for $u^1$), in one pass over each agent's data
per product (`jaxsolve.distributed.base.DecentralizedSolver._grads_and_error`,
``LeastSquares.prox_grad``): a step at 256 agents, $d = 500$, reads $A$ twice instead
of four times. The iterates are the same up to rounding; the state carries $u^{t+1}$
as ``u_next``.

**Defaults.** $r = 0.99$, $s = 1$, $\tau = 0.01$ (the paper's). $\beta$: by default
$\beta = 0.1\,\bar L / \sqrt{\rho}$ with $\bar L$ the mean of the agents' Lipschitz
constants and $\rho$ the spectral gap of $W$. This rule is a choice made here: the
paper tunes $\beta$, and its rate $\min\{2\beta\rho, (1-r)/\beta\}$ asks for a larger
$\beta$ on a poorer graph. On breast_cancer lasso and logistic problems over ER,
grid and ring graphs it lands within a factor of about 2 of the best $\beta$ of a
grid search.
The state's ``x`` is $v$ (the $g$-side copy: sparse for the lasso).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.core.validation import check_positive, is_concrete
from jaxsolve.distributed.base import DecentralizedSolver, Simulated, check_loss, check_reg
from jaxsolve.distributed.ledger import Ledger, empty_ledger, record
from jaxsolve.distributed.problems import Zero

__all__ = ["DSADMM", "DSADMMState", "DSADMMInfo", "ds_admm", "default_beta"]


class DSADMMState(NamedTuple):
    """State of `DSADMM` (arrays with a leading agent axis unless said).

    Attributes:
        x: $v^t$, the agents' copies on the regularizer's side, ``(n, d)``.
        iter_num: int32 scalar, iterations taken (two communication rounds each).
        error: the family's optimality measure at ``x`` (`jaxsolve.distributed.base`):
            the agents' disagreement plus the centralized prox-gradient residual at
            their mean.
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        u: $u^t$, the copies on the loss's side.
        u_next: $u^{t+1}$, the next iteration's $u$-step, computed with ``error`` (see
            the module docstring).
        lam1: $\\lambda_1^t$, the multiplier of the constraint $\\tilde W u = v$.
        lam2: $\\lambda_2^t$, the multiplier of the constraint $u = \\tilde W v$.
        Wv: $(\\tilde W v^t)_i$, the neighbours' mix of ``x`` received in the last round.
        Wp: $(\\tilde W p^t)_i$ with $p^t = \\lambda_1^t + 2\\beta v^t - \\beta \\tilde W u^t$,
            received in the last round.
        factor: the inverses the loss's prox multiplies by, built once in ``init`` at
            $c = \\beta(2 + \\tau)$ (``None`` unless ``f_step="prox"``).
        lips: the agents' Lipschitz constants $L_i$, ``(n,)``.
        beta: the penalty $\\beta$ in use (0-d; `default_beta` when not given).
        eta: the step $1/\\sum_i L_i$ of ``error``'s prox-gradient residual (0-d).
        ledger: the communication so far, per agent.
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    u: jax.Array
    u_next: jax.Array
    lam1: jax.Array
    lam2: jax.Array
    Wv: jax.Array
    Wp: jax.Array
    factor: Any
    lips: jax.Array
    beta: jax.Array
    eta: jax.Array
    ledger: Ledger


class DSADMMInfo(NamedTuple):
    """Per-step diagnostics: ``residual`` is $\\|Au - Bv\\| / \\sqrt n$ after the step."""

    residual: jax.Array


def default_beta(lips, gap):
    r"""The default penalty $\beta = 0.1\,\bar L / \sqrt{\rho}$ (mean Lipschitz constant
    over the square root of the spectral gap, scaled by 0.1)."""
    return 0.1 * jnp.mean(lips) / jnp.sqrt(gap)


def spectral_gap(W):
    """Spectral gap ``1 - max(|lambda_2|, |lambda_n|)`` of the symmetric mixing matrix ``W``."""
    ev = jnp.linalg.eigvalsh(W)
    if ev.shape[0] == 1:  # one agent: no second eigenvalue (ev[-2] would clamp to ev[0] = 1)
        return jnp.ones((), ev.dtype)
    return 1.0 - jnp.maximum(jnp.abs(ev[-2]), jnp.abs(ev[0]))


class DSADMM(DecentralizedSolver):
    """Double-communication symmetric ADMM; see the module docstring for the math.

    ``x0`` is ``(n, d)`` (one row per agent), ``args`` a
    `jaxsolve.distributed.Problem`.
    """

    beta: Any = None
    r: float = 0.99
    s: float = 1.0
    tau: float = 0.01
    f_step: str = eqx.field(static=True, default="prox")
    newton_steps: int = eqx.field(static=True, default=2)

    def _beta(self, lips, problem, like):
        if self.beta is not None:
            return jaxsolve.hyper(self.beta, like)
        # the default rule needs the spectral gap: global information, set up once
        # (simulation: eigvalsh of W; on a mesh, the gap is passed in beta instead)
        gap = spectral_gap(problem.W) if isinstance(self.comm, Simulated) else None
        if gap is None:
            raise ValueError("on a device mesh, give beta (solve_on_mesh does so)")
        return default_beta(lips, gap).astype(like.dtype)

    def init(self, x0, args):
        self.check_start(x0, args)
        problem = args
        lips = self._lipschitz(problem.data).astype(x0.dtype)
        beta = self._beta(lips, problem, x0)
        tau = jaxsolve.hyper(self.tau, x0)
        c = beta * (2 + tau)
        factor = None
        if self.f_step == "prox":
            factor = jax.vmap(self.loss.prox_factor, in_axes=(0, None))(problem.data, 1 / c)
        Wv = self.comm.mix(problem.mixing, x0)  # round 1 (u^0 = v^0 = x0, so W u^0 = W v^0)
        p = 2 * beta * x0 - beta * Wv
        Wp = self.comm.mix(problem.mixing, p)  # round 2
        zeros = jnp.zeros_like(x0)
        eta = self._eta(lips).astype(x0.dtype)
        ledger = record(empty_ledger(), rounds=2, vectors=2, size=x0.shape[1])
        rhs = Wp + beta * (1 + tau) * x0  # lambda_2^0 = 0
        u_next, error = self._u_step_and_error(x0, rhs, c, factor, lips, x0, problem, eta)
        return DSADMMState(
            x0, jnp.int32(0), error, jnp.int32(0), x0, u_next, zeros, zeros, Wv, Wp, factor,
            lips, beta, eta, ledger,
        )  # fmt: skip

    def _exchange(self, W, a, b):
        """One round in which every agent sends two vectors: one product with W."""
        d = a.shape[1]
        both = self.comm.mix(W, jnp.concatenate([a, b], axis=1))
        return both[:, :d], both[:, d:]

    def _u_step_and_error(self, u, rhs, c, factor, lips, v, problem, eta):
        """The $u$-step from $u^t$ = ``u`` with right-hand side ``rhs`` (the next
        iteration's), and the error measure at $v$, sharing the passes over the data."""
        if self.f_step == "prox" and hasattr(self.loss, "prox_grad"):
            vbar = self._mean(v, problem)
            both = jax.vmap(self.loss.prox_grad, in_axes=(0, 0, 0, None, None))
            u1, grads = both(rhs / c, factor, problem.data, 1 / c, vbar)
            return u1, self._error_from(v, vbar, grads, problem, eta)
        if self.f_step == "prox":
            prox = jax.vmap(self.loss.prox, in_axes=(0, 0, 0, None))
            return prox(rhs / c, factor, problem.data, 1 / c), self._error(v, problem, eta)
        if self.f_step == "newton":
            u1 = self._newton_prox(u, rhs / c, c, problem.data)
            return u1, self._error(v, problem, eta)
        L = lips[:, None]
        g, error = self._grads_and_error(u, v, problem, eta)
        return (rhs + L * u - g) / (c + L), error

    def _newton_prox(self, u, z, c, data):
        """prox_{f_i/c}(z_i) by ``newton_steps`` Newton steps on
        f_i(u) + c/2 ||u - z_i||^2 from the previous u_i (strongly convex with c)."""
        eye = jnp.eye(u.shape[1], dtype=u.dtype)

        def one(u_i, z_i, data_i):
            def newton(v, _):
                g = self.loss.grad(v, data_i) + c * (v - z_i)
                H = jax.hessian(self.loss.value)(v, data_i) + c * eye
                return v - jnp.linalg.solve(H, g), None

            return jax.lax.scan(newton, u_i, None, length=self.newton_steps)[0]

        return jax.vmap(one)(u, z, data)

    def step(self, state, args):
        problem = args
        x = state.x
        beta = state.beta
        r, s, tau = (jaxsolve.hyper(h, x) for h in (self.r, self.s, self.tau))
        c = beta * (2 + tau)
        v = state.x
        # the u-step was computed at the end of the last step; lambda_2's half step: local
        u1 = state.u_next
        lam2h = state.lam2 - r * beta * (u1 - state.Wv)
        q = 2 * beta * u1 - lam2h - beta * state.Wv
        # round 1: broadcast (u, q)
        Wu1, Wq = self._exchange(problem.mixing, u1, q)
        lam1h = state.lam1 - r * beta * (Wu1 - v)
        v1 = self._prox_g((Wq - lam1h + beta * (1 + tau) * v) / c, 1 / c, problem)
        lam1 = lam1h - s * beta * (Wu1 - v1)
        p = lam1 + 2 * beta * v1 - beta * Wu1
        # round 2: broadcast (v, p)
        Wv1, Wp1 = self._exchange(problem.mixing, v1, p)
        lam2 = lam2h - s * beta * (u1 - Wv1)
        n = problem.W.shape[1]
        res = jnp.sqrt(self.comm.total(jnp.sum((Wu1 - v1) ** 2 + (u1 - Wv1) ** 2, axis=1)) / n)
        ledger = record(state.ledger, rounds=2, vectors=4, size=x.shape[1])
        # the next u-step (local) and the error measure at v1, in the same passes
        rhs = Wp1 + lam2 + beta * (1 + tau) * u1
        u_next, error = self._u_step_and_error(
            u1, rhs, c, state.factor, state.lips, v1, problem, state.eta
        )
        new = state._replace(
            x=v1, iter_num=state.iter_num + 1, error=error, u=u1, u_next=u_next, lam1=lam1,
            lam2=lam2, Wv=Wv1, Wp=Wp1, ledger=ledger,
        )  # fmt: skip
        return new, DSADMMInfo(res)


def _check_rs(r, s, tau):
    if not is_concrete((r, s, tau)):
        return
    r, s, tau = (float(np.asarray(v)) for v in (r, s, tau))
    if not (tau > 0):
        raise ValueError(f"tau must be positive (Q must be positive definite), got {tau}")
    golden = (1 + 5**0.5) / 2
    if not (-1 < r < 1 and 0 < s < golden and r + s > 0 and abs(r) < 1 + s - s * s):
        raise ValueError(
            f"(r, s) = ({r}, {s}) is outside the convergent region of symmetric ADMM "
            "(-1 < r < 1, 0 < s < (1 + sqrt 5)/2, r + s > 0, |r| < 1 + s - s^2)"
        )


def ds_admm(
    loss,
    reg=None,
    *,
    beta: float | jax.Array | None = None,
    r: float = 0.99,
    s: float = 1.0,
    tau: float = 0.01,
    f_step: str = "auto",
    newton_steps: int = 2,
) -> DSADMM:
    """Decentralized double-communication symmetric ADMM (arXiv 2511.05283).

    Args:
        loss: the smooth local loss (`jaxsolve.distributed.LeastSquares`,
            `jaxsolve.distributed.Logistic`, ...).
        reg: the common regularizer $g$ (each agent holds $g/n$); default
            `jaxsolve.distributed.Zero`.
        beta: the ADMM penalty (positive); None: $0.1\\bar L/\\sqrt\\rho$ (see
            `default_beta`).
        r, s: the two dual step factors (He-Ma-Yuan's convergent region is checked;
            ``r = 0`` is plain ADMM).
        tau: the proximal term's margin, $Q = \\beta((1+\\tau)I - \\tilde W^2)$, positive.
        f_step: ``"prox"`` (the loss's exact prox), ``"gradient"`` (a linearized step),
            ``"newton"`` (the prox by ``newton_steps`` Newton steps warm-started at
            $u_i^t$: $d \\times d$ Hessians, for moderate $d$), or ``"auto"``: ``"prox"``
            when the loss has one, else ``"newton"``.
        newton_steps: Newton steps per prox with ``f_step="newton"``.

    Returns:
        A `DSADMM` solver (``x0`` of shape ``(n, d)``, ``args`` a ``Problem``).
    """
    check_loss(loss)
    reg = Zero() if reg is None else reg
    check_reg(reg)
    if f_step == "auto":
        f_step = "prox" if getattr(loss, "has_prox", False) else "newton"
    if f_step not in ("prox", "gradient", "newton"):
        raise ValueError(f"f_step must be 'auto', 'prox', 'gradient' or 'newton', got {f_step!r}")
    if isinstance(newton_steps, bool) or not isinstance(newton_steps, int) or newton_steps < 1:
        raise ValueError(f"newton_steps must be a positive int, got {newton_steps!r}")
    if f_step == "prox" and not getattr(loss, "has_prox", False):
        raise ValueError(f"f_step='prox' needs a loss with a prox; {type(loss).__name__} has none")
    if beta is not None:
        check_positive("beta", beta)
    _check_rs(r, s, tau)
    return DSADMM(loss, reg, Simulated(), beta, r, s, tau, f_step, newton_steps)
