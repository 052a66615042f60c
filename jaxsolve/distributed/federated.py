r"""Federated non-convex optimization under cost-aware client selection: RG-SAGA and baselines.

A server and $n$ clients solve $\min_x f(x) = \frac1n\sum_i f_i(x)$; client $i$ holds its
data $D_i$ and can evaluate $\nabla f_i(x) = \nabla_x \ell(x, D_i)$. Client data are stacked
on a leading client axis (``args`` is a pytree whose leaves are ``(n, ...)``), ``loss`` is
$\ell(x, D_i)$ for one client. Client 0 is the *delegate*.

Three ways to reach clients, each with its own price per round (Jiang, Rodomanov, Stich,
"Cost-aware client selection", ICLR 2026):

* A-CSS, an arbitrary subset of at most $m$ clients, cost $C_A$ per round; a full
  synchronization takes $\lceil n/m\rceil$ such rounds;
* R-CSS, a uniformly random $m$-subset (without replacement), cost $C_R$ per round;
* D-CSS, a round with the delegate alone, cost 1.

Every state carries a `ClientLedger` of these rounds (and of the local gradient calls);
`ledger_cost` gives $C_A N_A + C_R N_R + N_D$. The prices only enter that formula, so one
run is priced under any $(C_A, C_R)$ afterwards.

`rg_saga` (I-CGM with the RG-SAGA estimator). From $x^t$ and an estimate $g^t$ of
$\nabla f(x^t)$ the delegate approximately minimizes
$F_t(x) = f_1(x) + \langle g^t - \nabla f_1(x^t), x - x^t\rangle + \frac\lambda2\|x - x^t\|^2$
by $K_t \sim \mathrm{Geom}(p)$ (on $\{1, 2, \dots\}$) gradient steps
$y_{k+1} = y_k - \nabla F_t(y_k)/(\lambda + L)$ from $y_0 = x^t$, and $x^{t+1} = y_{K_t}$
(one D-CSS round). The first step needs no new gradient ($\nabla F_t(x^t) = g^t$, so
$y_1 = x^t - g^t/(\lambda + L)$), hence $K_t$ delegate gradients per round:
$\nabla f_1(x^t)$ and $\nabla f_1(y_1), \dots, \nabla f_1(y_{K_t - 1})$. Then a random $m$-subset $S_t$ (one R-CSS round) sends
$\nabla f_i(x^t)$ and $\nabla f_i(x^{t+1})$, $i\in S_t$; with the SAGA table $b_i$ and its
mean $\bar b$,

$$
G^t = \bar b + \frac1m\sum_{i\in S_t}(\nabla f_i(x^t) - b_i),\qquad
b_i \leftarrow \nabla f_i(x^t)\ (i\in S_t),
$$

$$
g^{t+1} = (1-\beta)g^t + \beta G^t + \frac1m\sum_{i\in S_t}(\nabla f_i(x^{t+1}) - \nabla f_i(x^t)).
$$

$G^t$ is conditionally unbiased for $\nabla f(x^t)$; $\beta = 0$ is SARAH. The start
$g^0 = \nabla f(x^0)$, $b_i = \nabla f_i(x^0)$ is one full synchronization
($\lceil n/m\rceil$ A-CSS rounds: the table and $g^0$ are the same gradients, so we charge
one sync where the paper's theorem charges two). Defaults are the paper's practical
parameters (`practical_parameters`): $\lambda = \sqrt{n/m}\,\delta + \Delta_1$,
$\beta = m/n$, $L = 2L_{\max}$, $p = \delta/L$, with $\delta$ the gradient heterogeneity,
$\Delta_1$ the smoothness of $f - f_1$ and $L_{\max}$ the largest client smoothness.

Baselines on the same ledger: `fed_gd` (gradient descent, one full sync per step) and
`scaffold` (Karimireddy et al. 2020, option II control variates: a random $m$-subset runs
$K$ local steps $y \leftarrow y - \eta_l(\nabla f_i(y) - c_i + c)$, one R-CSS round each).

``State.error`` is $\|\nabla f(x)\|$ at the server iterate for every method, a monitoring
quantity the ledger does not count, so ``tol`` means the same thing for all of them.
The paper's test problem (`LogSumQuadratic`) is in `jaxsolve.distributed.federated_problems`
and re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.core.validation import check_finite, check_positive, is_concrete
from jaxsolve.distributed.federated_problems import (
    LogSumQuadratic,
    log_sum_constants,
    log_sum_quadratic,
)

__all__ = [
    "ClientLedger",
    "empty_client_ledger",
    "ledger_cost",
    "LogSumQuadratic",
    "log_sum_quadratic",
    "num_clients",
    "full_gradient",
    "practical_parameters",
    "log_sum_constants",
    "saga_estimate",
    "RGSAGA",
    "RGSAGAState",
    "rg_saga",
    "FedGD",
    "FedGDState",
    "fed_gd",
    "Scaffold",
    "ScaffoldState",
    "scaffold",
]


# --- the cost ledger ---------------------------------------------------------------------------


class ClientLedger(NamedTuple):
    """Client-selection rounds and local work so far (int32 0-d each).

    Attributes:
        a_rounds: A-CSS rounds (arbitrary subsets of at most $m$ clients), $N_A$.
        r_rounds: R-CSS rounds (uniformly random $m$-subsets), $N_R$.
        d_rounds: D-CSS rounds (the delegate alone), $N_D$.
        local_grads: client gradient evaluations, over all clients.
    """

    a_rounds: jax.Array
    r_rounds: jax.Array
    d_rounds: jax.Array
    local_grads: jax.Array


def empty_client_ledger() -> ClientLedger:
    """A ledger with no round yet."""
    z = jnp.zeros((), jnp.int32)
    return ClientLedger(z, z, z, z)


def ledger_cost(ledger: ClientLedger, c_a: float, c_r: float) -> jax.Array:
    """The communication cost $C_A N_A + C_R N_R + N_D$ (a D-CSS round costs 1).

    Args:
        ledger: a `ClientLedger` (leaves may be batched).
        c_a: the price $C_A > 0$ of an A-CSS round.
        c_r: the price $C_R > 0$ of an R-CSS round.
    """
    check_positive("c_a", c_a)
    check_positive("c_r", c_r)
    return c_a * ledger.a_rounds + c_r * ledger.r_rounds + ledger.d_rounds


def _sync_rounds(n: int, m: int) -> int:
    return math.ceil(n / m)


# --- client data and gradients ---------------------------------------------------------------


def num_clients(data) -> int:
    """The common leading axis of the client data; ``ValueError`` if leaves disagree."""
    leaves = jax.tree.leaves(data)
    if not leaves:
        raise ValueError("data (the stacked client data) is empty")
    sizes = {int(np.shape(v)[0]) if np.ndim(v) else -1 for v in leaves}
    if len(sizes) != 1 or -1 in sizes or 0 in sizes:
        raise ValueError(
            f"data must be stacked on a leading client axis of one size, got leading sizes {sizes}"
        )
    return sizes.pop()


def _client_grads(loss, x, data):
    return jax.vmap(jax.grad(loss), in_axes=(None, 0))(x, data)


def full_gradient(loss, x, data):
    r"""$\nabla f(x) = \frac1n\sum_i \nabla_x \ell(x, D_i)$."""
    return jnp.mean(_client_grads(loss, x, data), axis=0)


def practical_parameters(n: int, m: int, *, delta: float, delta1: float, l_max: float) -> dict:
    r"""The paper's practical RG-SAGA parameters: $\lambda = \sqrt{n/m}\,\delta + \Delta_1$,
    $\beta = m/n$, local smoothness $L = 2L_{\max}$, $p = \min(1, \delta/L)$.

    Args:
        n: number of clients.
        m: clients per round.
        delta: gradient heterogeneity $\delta$ (Assumption 2.2).
        delta1: smoothness $\Delta_1$ of $f - f_1$ (Assumption 2.1).
        l_max: the largest client smoothness.

    Returns:
        ``dict(lam=..., beta=..., local_l=..., p=...)``, the keywords of `rg_saga`.
    """
    _check_nm(n, m)
    for name, v in (("delta", delta), ("delta1", delta1), ("l_max", l_max)):
        check_positive(name, v)
    local_l = 2.0 * float(l_max)
    return dict(
        lam=math.sqrt(n / m) * float(delta) + float(delta1),
        beta=m / n,
        local_l=local_l,
        p=min(1.0, float(delta) / local_l),
    )


def _check_nm(n, m):
    if not isinstance(m, int | np.integer) or isinstance(m, bool) or m < 1:
        raise ValueError(f"m (clients per round) must be a positive int, got {m!r}")
    if m > n:
        raise ValueError(
            f"m (clients per round) must be at most the number of clients {n}, got {m}"
        )


def _check_data(data, m):
    n = num_clients(data)
    _check_nm(n, m)
    if is_concrete(data):
        check_finite("data", data)
    return n


def saga_estimate(
    table: jax.Array, bbar: jax.Array, fresh: jax.Array, idx: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""One SAGA step: $G = \bar b + \frac1m\sum_{i\in S}(v_i - b_i)$ and the updated table
    ($b_i \leftarrow v_i$ for $i \in S$) and mean.

    Args:
        table: ``(n, d)`` stored client gradients $b_i$.
        bbar: ``(d,)`` their mean.
        fresh: ``(m, d)`` new gradients $v_i$ of the sampled clients.
        idx: ``(m,)`` distinct client indices $S$.

    Returns:
        ``(G, table, bbar)``.
    """
    n = table.shape[0]
    diff = fresh - table[idx]
    G = bbar + jnp.mean(diff, axis=0)
    return G, table.at[idx].set(fresh), bbar + jnp.sum(diff, axis=0) / n


def _sample(key, n, m):
    return jax.random.permutation(key, n)[:m]


# --- RG-SAGA ----------------------------------------------------------------------------------


class RGSAGAState(NamedTuple):
    r"""State of `RGSAGA`.

    Attributes:
        x: $x^t$, the server iterate ``(d,)`` (the delegate's last local iterate).
        iter_num: int32 scalar, server steps taken.
        error: $\|\nabla f(x)\|_2$ at the server iterate (a monitoring quantity the
            ledger does not charge).
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        g: $g^t$, the RG-SAGA estimate of $\nabla f(x^t)$, ``(d,)``.
        table: the SAGA table $b_i$, ``(n, d)``: each client's gradient at the iterate
            it was last sampled at (all at ``x0`` after ``init``).
        bbar: $\bar b$, the mean of ``table`` over clients, ``(d,)``, kept in step.
        key: the PRNG key as raw bits (``jax.random.key_data``), split each step for the
            local step count $K_t$ and the subset $S_t$.
        ledger: the rounds and local gradient calls so far (`ClientLedger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    g: jax.Array
    table: jax.Array
    bbar: jax.Array
    key: jax.Array
    ledger: ClientLedger


class RGSAGA(jaxsolve.AbstractSolver):
    """I-CGM with the RG-SAGA estimator (see the module docstring); build with `rg_saga`."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    max_local: int = eqx.field(static=True)
    lam: Any
    beta: Any
    local_l: Any
    p: Any
    seed: Any = 0

    def init(self, x0, args):
        n = _check_data(args, self.m)
        grads = _client_grads(self.loss, x0, args)
        g = jnp.mean(grads, axis=0)
        ledger = empty_client_ledger()._replace(
            a_rounds=jnp.int32(_sync_rounds(n, self.m)), local_grads=jnp.int32(n)
        )
        key = jax.random.key_data(jax.random.key(self.seed))
        z = jnp.int32(0)
        return RGSAGAState(x0, z, jnp.linalg.norm(g), z, g, grads, g, key, ledger)

    def _local(self, key, x, g, data1):
        lam = jaxsolve.hyper(self.lam, x)
        L = jaxsolve.hyper(self.local_l, x)
        p = jaxsolve.hyper(self.p, x)
        grad1 = jax.grad(self.loss)
        shift = lam * x + grad1(x, data1) - g
        K = jnp.minimum(jax.random.geometric(key, p, dtype=jnp.int32), self.max_local)

        def body(carry):
            k, y = carry
            return k + 1, (L * y + shift - grad1(y, data1)) / (lam + L)

        # step 1 from y_0 = x^t reuses grad f_1(x^t) (already in `shift`):
        # y_1 = (L x + shift - grad f_1(x)) / (lam + L) = x - g / (lam + L)
        y1 = x - g / (lam + L)
        _, y = jax.lax.while_loop(lambda c: c[0] < K, body, (jnp.int32(1), y1))
        return y, K

    def step(self, state, args):
        n = num_clients(args)
        key, k_local, k_sample = jax.random.split(jax.random.wrap_key_data(state.key), 3)
        x, g = state.x, state.g
        data1 = jax.tree.map(lambda v: v[0], args)
        x1, K = self._local(k_local, x, g, data1)
        idx = _sample(k_sample, n, self.m)
        sub = jax.tree.map(lambda v: v[idx], args)
        old = _client_grads(self.loss, x, sub)
        new = _client_grads(self.loss, x1, sub)
        G, table, bbar = saga_estimate(state.table, state.bbar, old, idx)
        beta = jaxsolve.hyper(self.beta, x)
        g1 = (1 - beta) * g + beta * G + jnp.mean(new - old, axis=0)
        led = state.ledger
        led = led._replace(
            r_rounds=led.r_rounds + 1,
            d_rounds=led.d_rounds + 1,
            local_grads=led.local_grads + K + 2 * self.m,
        )
        err = jnp.linalg.norm(full_gradient(self.loss, x1, args))
        new_state = RGSAGAState(
            x1, state.iter_num + 1, err, state.status, g1, table, bbar,
            jax.random.key_data(key), led,
        )  # fmt: skip
        return new_state, None


def _check_hypers(**kw):
    for name, v in kw.items():
        check_positive(name, v)


def rg_saga(
    loss: Callable,
    m: int,
    *,
    lam: float,
    beta: float,
    local_l: float,
    p: float,
    seed: int | jax.Array = 0,
    max_local: int = 10_000,
) -> RGSAGA:
    r"""RG-SAGA (I-CGM with a SAGA-plus-recursive-gradient estimator) for federated data.

    Args:
        loss: $\ell(x, D_i)$, one client's loss (hashable: a function or a frozen dataclass
            such as `LogSumQuadratic`).
        m: clients per R-CSS round (at most the number of clients).
        lam: the proximal weight $\lambda > \Delta_1$.
        beta: the SAGA weight $\beta \in [0, 1]$ of the RG estimator ($\beta = 0$: SARAH).
        local_l: the local solver's smoothness constant $L$ (step $1/(\lambda + L)$).
        p: the local solver runs $K \sim \mathrm{Geom}(p)$ steps, $p \in (0, 1]$.
        seed: an int (or int array, e.g. under ``vmap``) seeding client sampling.
        max_local: cap on the local steps of one round.

    `practical_parameters` gives the paper's defaults: ``rg_saga(loss, m, **params)``.
    """
    if not callable(loss):
        raise TypeError(f"loss must be callable (x, client_data) -> scalar, got {type(loss)}")
    _check_nm(float("inf"), m)
    _check_hypers(lam=lam, local_l=local_l, p=p)
    check_positive("beta", beta, strict=False)
    for name, v in (("beta", beta), ("p", p)):
        if is_concrete(v) and np.any(np.asarray(v) > 1):
            raise ValueError(f"{name} must be in [0, 1] (p > 0), got {v}")
    if not isinstance(max_local, int) or max_local < 1:
        raise ValueError(f"max_local must be a positive int, got {max_local!r}")
    return RGSAGA(loss, int(m), max_local, lam, beta, local_l, p, seed)


# --- baselines --------------------------------------------------------------------------------


class FedGDState(NamedTuple):
    r"""State of `FedGD`.

    Attributes:
        x: the server iterate ``(d,)``.
        iter_num: int32 scalar, server steps taken.
        error: $\|\nabla f(x)\|_2$ at the server iterate (a monitoring quantity the
            ledger does not charge).
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        grad: $\nabla f(x)$, ``(d,)``, from the full synchronization that also gives
            ``error``; the next step moves along it.
        ledger: the rounds and local gradient calls so far (`ClientLedger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    grad: jax.Array
    ledger: ClientLedger


class FedGD(jaxsolve.AbstractSolver):
    r"""Gradient descent $x \leftarrow x - \eta\nabla f(x)$; each gradient is a full sync
    ($\lceil n/m\rceil$ A-CSS rounds)."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    stepsize: Any

    def init(self, x0, args):
        n = _check_data(args, self.m)
        g = full_gradient(self.loss, x0, args)
        led = empty_client_ledger()._replace(
            a_rounds=jnp.int32(_sync_rounds(n, self.m)), local_grads=jnp.int32(n)
        )
        z = jnp.int32(0)
        return FedGDState(x0, z, jnp.linalg.norm(g), z, g, led)

    def step(self, state, args):
        n = num_clients(args)
        x1 = state.x - jaxsolve.hyper(self.stepsize, state.x) * state.grad
        g = full_gradient(self.loss, x1, args)
        led = state.ledger
        led = led._replace(
            a_rounds=led.a_rounds + _sync_rounds(n, self.m), local_grads=led.local_grads + n
        )
        return FedGDState(x1, state.iter_num + 1, jnp.linalg.norm(g), state.status, g, led), None


def fed_gd(loss: Callable, m: int, *, stepsize) -> FedGD:
    """Full-gradient descent with step ``stepsize`` (e.g. $1/L_{\\max}$), a full sync of
    $\\lceil n/m\\rceil$ A-CSS rounds per step."""
    if not callable(loss):
        raise TypeError(f"loss must be callable (x, client_data) -> scalar, got {type(loss)}")
    _check_nm(float("inf"), m)
    check_positive("stepsize", stepsize)
    return FedGD(loss, int(m), stepsize)


class ScaffoldState(NamedTuple):
    r"""State of `Scaffold`.

    Attributes:
        x: the server iterate ``(d,)``.
        iter_num: int32 scalar, server steps taken.
        error: $\|\nabla f(x)\|_2$ at the server iterate (a monitoring quantity the
            ledger does not charge).
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        c: the server control variate $c$, ``(d,)``, the running mean of the client
            controls (zero at the start).
        controls: the client control variates $c_i$, ``(n, d)`` (option II: updated
            only for the sampled clients; zero at the start).
        key: the PRNG key as raw bits (``jax.random.key_data``), split each step for the
            random $m$-subset.
        ledger: the rounds and local gradient calls so far (`ClientLedger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    c: jax.Array
    controls: jax.Array
    key: jax.Array
    ledger: ClientLedger


class Scaffold(jaxsolve.AbstractSolver):
    """SCAFFOLD with option II control variates on random $m$-subsets (one R-CSS round each)."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    local_steps: int = eqx.field(static=True)
    local_lr: Any
    global_lr: Any = 1.0
    seed: Any = 0

    def init(self, x0, args):
        n = _check_data(args, self.m)
        z = jnp.int32(0)
        err = jnp.linalg.norm(full_gradient(self.loss, x0, args))
        key = jax.random.key_data(jax.random.key(self.seed))
        zeros = jnp.zeros((n,) + jnp.shape(x0), x0.dtype)
        return ScaffoldState(x0, z, err, z, jnp.zeros_like(x0), zeros, key, empty_client_ledger())

    def step(self, state, args):
        n = num_clients(args)
        key, sub_key = jax.random.split(jax.random.wrap_key_data(state.key))
        idx = _sample(sub_key, n, self.m)
        sub = jax.tree.map(lambda v: v[idx], args)
        eta = jaxsolve.hyper(self.local_lr, state.x)
        grad = jax.grad(self.loss)
        x, c = state.x, state.c

        def client(ci, data):
            def body(_, y):
                return y - eta * (grad(y, data) - ci + c)

            y = jax.lax.fori_loop(0, self.local_steps, body, x)
            ci1 = ci - c + (x - y) / (self.local_steps * eta)
            return y - x, ci1 - ci, ci1

        dy, dc, ci1 = jax.vmap(client)(state.controls[idx], sub)
        x1 = x + jaxsolve.hyper(self.global_lr, x) * jnp.mean(dy, axis=0)
        c1 = c + jnp.sum(dc, axis=0) / n
        led = state.ledger
        led = led._replace(
            r_rounds=led.r_rounds + 1, local_grads=led.local_grads + self.m * self.local_steps
        )
        err = jnp.linalg.norm(full_gradient(self.loss, x1, args))
        new = ScaffoldState(
            x1, state.iter_num + 1, err, state.status, c1,
            state.controls.at[idx].set(ci1), jax.random.key_data(key), led,
        )  # fmt: skip
        return new, None


def scaffold(
    loss: Callable, m: int, *, local_lr, local_steps: int = 10, global_lr=1.0, seed=0
) -> Scaffold:
    """SCAFFOLD (Karimireddy et al. 2020, option II): ``local_steps`` local steps of size
    ``local_lr`` on each of $m$ random clients per round, server step ``global_lr``."""
    if not callable(loss):
        raise TypeError(f"loss must be callable (x, client_data) -> scalar, got {type(loss)}")
    _check_nm(float("inf"), m)
    _check_hypers(local_lr=local_lr, global_lr=global_lr)
    if not isinstance(local_steps, int) or local_steps < 1:
        raise ValueError(f"local_steps must be a positive int, got {local_steps!r}")
    return Scaffold(loss, int(m), local_steps, local_lr, global_lr, seed)
