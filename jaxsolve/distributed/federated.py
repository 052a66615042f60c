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

Baselines on the same ledger: `fed_gd` (gradient descent, one full sync per step),
`scaffold` (Karimireddy et al. 2020, option II control variates: a random $m$-subset runs
$K$ local steps $y \leftarrow y - \eta_l(\nabla f_i(y) - c_i + c)$, one R-CSS round each),
`fedavg` (the same local steps without control variates), `rg_svrg` (RG-SAGA's I-CGM step
with an SVRG snapshot refreshed by a full sync with probability $q$, derived here from
RG-SAGA since the notes give no formula) and `saber_full` (PAGE with server gradient steps:
a full sync with probability $q$, else the $m$-client recursive correction).

``State.error`` is $\|\nabla f(x)\|$ at the server iterate for every method, a monitoring
quantity the ledger does not count, so ``tol`` means the same thing for all of them.
The test problems (the paper's `LogSumQuadratic`, `NonconvexLogistic` on breast_cancer, the
`DigitsMLP` on non-IID digits) are in `jaxsolve.distributed.federated_problems` and
re-exported here; `jaxsolve.distributed.solve_clients_on_mesh` runs any method with the
clients sharded over devices.
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
    DigitsMLP,
    LogSumQuadratic,
    NonconvexLogistic,
    digits_mlp,
    hessian_constants,
    log_sum_constants,
    log_sum_quadratic,
    logistic_constants,
    nonconvex_logistic,
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
    "NonconvexLogistic",
    "nonconvex_logistic",
    "logistic_constants",
    "DigitsMLP",
    "digits_mlp",
    "hessian_constants",
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
    "svrg_estimate",
    "FedAvg",
    "FedAvgState",
    "fedavg",
    "RGSVRG",
    "RGSVRGState",
    "rg_svrg",
    "SaberFull",
    "SaberFullState",
    "saber_full",
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


def _check_data(data, m, loss=None, x0=None):
    """The client data (one leading client axis, real, no NaN), ``m``, and, given ``loss``
    and ``x0``, that one client's loss at ``x0`` is a real scalar (shapes only: runs
    under tracing too). A misfit failed deep in the first gradient with JAX's own
    broadcasting or ``grad`` error."""
    n = num_clients(data)
    _check_nm(n, m)
    for path, leaf in jax.tree_util.tree_leaves_with_path(data):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.complexfloating):
            raise TypeError(
                f"data{jax.tree_util.keystr(path)} must be real, got dtype {jnp.result_type(leaf)}"
            )
    if is_concrete(data):
        check_finite("data", data)
    if loss is not None:
        first = jax.tree.map(lambda v: v[0], data)
        try:
            out = jax.eval_shape(loss, x0, first)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"loss(x0, data_i) fails for x0 of shape {jnp.shape(x0)} and one client's "
                f"data {jax.tree.map(jnp.shape, first)}: {str(err).splitlines()[0]}"
            ) from None
        if out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
            raise ValueError(
                f"loss(x0, data_i) must return a real scalar, got shape {out.shape} and "
                f"dtype {out.dtype}"
            )
    return n


def _check_seed(seed) -> None:
    """``seed`` is an int or an int array (a batch of seeds under ``vmap``); a PRNG key or a
    float failed inside ``jax.random.key`` at the first ``init``."""
    if (
        isinstance(seed, bool)
        or isinstance(seed, jax.Array)
        and jax.dtypes.issubdtype(seed.dtype, jax.dtypes.prng_key)
    ):
        raise TypeError(
            f"seed must be an int (or an int array under vmap), got {seed!r}; for a key "
            "pass an int, e.g. seed=int(jax.random.randint(key, (), 0, 2**31 - 1))"
        )
    if not jnp.issubdtype(jnp.result_type(seed), jnp.integer):
        raise TypeError(
            f"seed must be an int (or an int array under vmap), got dtype {jnp.result_type(seed)}"
        )


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


def svrg_estimate(
    snapshot: jax.Array, mean: jax.Array, fresh: jax.Array, idx: jax.Array
) -> jax.Array:
    r"""The SVRG estimate $G = \nabla f(w) + \frac1m\sum_{i\in S}(v_i - \nabla f_i(w))$.

    The same control-variate sum as `saga_estimate`, whose table here is the snapshot
    $\nabla f_i(w)$ of every client at one point $w$ and is not written: it changes only at
    the next full synchronization. Conditionally unbiased for $\frac1n\sum_i v_i$ when $S$
    is a uniform $m$-subset.

    Args:
        snapshot: ``(n, d)`` client gradients $\nabla f_i(w)$ at the snapshot $w$.
        mean: ``(d,)`` their mean $\nabla f(w)$.
        fresh: ``(m, d)`` new gradients $v_i$ of the sampled clients.
        idx: ``(m,)`` distinct client indices $S$.
    """
    return saga_estimate(snapshot, mean, fresh, idx)[0]


def _sample(key, n, m):
    return jax.random.permutation(key, n)[:m]


def _delegate_step(solver, key, x, g, data1):
    r"""The I-CGM step on the delegate (one D-CSS round), shared by `RGSAGA` and `RGSVRG`:
    $K \sim \mathrm{Geom}(p)$ (capped at ``max_local``) gradient steps of size
    $1/(\lambda + L)$ on $F_t$ from $y_0 = x$; returns ``(y_K, K)``, $K$ delegate
    gradients (the first step reuses $\nabla F_t(x) = g$)."""
    lam = jaxsolve.hyper(solver.lam, x)
    L = jaxsolve.hyper(solver.local_l, x)
    p = jaxsolve.hyper(solver.p, x)
    grad1 = jax.grad(solver.loss)
    shift = lam * x + grad1(x, data1) - g
    K = jnp.minimum(jax.random.geometric(key, p, dtype=jnp.int32), solver.max_local)

    def body(carry):
        k, y = carry
        return k + 1, (L * y + shift - grad1(y, data1)) / (lam + L)

    # step 1 from y_0 = x^t reuses grad f_1(x^t) (already in `shift`):
    # y_1 = (L x + shift - grad f_1(x)) / (lam + L) = x - g / (lam + L)
    y1 = x - g / (lam + L)
    _, y = jax.lax.while_loop(lambda c: c[0] < K, body, (jnp.int32(1), y1))
    return y, K


def _sync_or_recurse(loss, args, m, key, q, x, x1, g, beta=None, snapshot=None):
    r"""The estimator step shared by `RGSVRG` and `SaberFull` (PAGE's coin).

    With probability $q$ a full synchronization at $x^{t+1}$ ($\lceil n/m\rceil$ A-CSS
    rounds, $n$ client gradients): $g^{t+1} = \nabla f(x^{t+1})$, and the snapshot, when
    one is kept, becomes $\nabla f_i(x^{t+1})$. Otherwise one R-CSS round on a random
    $m$-subset $S$ ($2m$ client gradients):
    $g^{t+1} = g^t + \frac1m\sum_{i\in S}(\nabla f_i(x^{t+1}) - \nabla f_i(x^t))
    + \beta(G^t - g^t)$, with $G^t$ = `svrg_estimate` at $x^t$ when ``snapshot`` (a pair
    ``(table, mean)``) is given, and no $\beta$ term without one (PAGE).

    Returns ``(g1, snapshot1, ledger_increment)``, the increment a `ClientLedger` of
    ``(a_rounds, r_rounds, local_grads)`` to add.
    """
    n = num_clients(args)
    k_coin, k_sample = jax.random.split(key)
    sync = jax.random.bernoulli(k_coin, q)

    def full(_):
        grads = _client_grads(loss, x1, args)
        mean = jnp.mean(grads, axis=0)
        return mean, None if snapshot is None else (grads, mean)

    def recurse(_):
        idx = _sample(k_sample, n, m)
        sub = jax.tree.map(lambda v: v[idx], args)
        old = _client_grads(loss, x, sub)
        new = _client_grads(loss, x1, sub)
        g1 = g + jnp.mean(new - old, axis=0)
        if snapshot is not None:
            G = svrg_estimate(*snapshot, old, idx)
            g1 = g1 + beta * (G - g)
        return g1, snapshot

    g1, snap1 = jax.lax.cond(sync, full, recurse, None)
    z = jnp.int32(0)
    inc = (
        jnp.where(sync, jnp.int32(_sync_rounds(n, m)), z),
        jnp.where(sync, z, jnp.int32(1)),
        jnp.where(sync, jnp.int32(n), jnp.int32(2 * m)),
    )
    return g1, snap1, inc


def _local_gd(loss, x, data, eta, steps, shift):
    r"""``steps`` local gradient steps $y \leftarrow y - \eta(\nabla f_i(y) + s)$ from
    $y = x$ on one client (FedAvg: $s = 0$; SCAFFOLD: $s = c - c_i$)."""
    grad = jax.grad(loss)
    return jax.lax.fori_loop(0, steps, lambda _, y: y - eta * (grad(y, data) + shift), x)


# --- RG-SAGA ----------------------------------------------------------------------------------


class ClientSolver(jaxsolve.AbstractSolver):
    """Base of the federated solvers: the data are the clients' stacked data, and a loss
    with a ``check_data(data)`` method (labels of `NonconvexLogistic`) has it run on
    them before tracing (the protocol's ``check_args`` hook)."""

    def check_args(self, x0, args):
        check = getattr(self.loss, "check_data", None)
        if check is not None:
            check(args)


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


def _synced_start(solver, x0, args):
    """The fields of an I-CGM state after its opening full sync, in state order: every
    client's gradient at ``x0`` (the SAGA table, or the SVRG snapshot), their mean as both
    the estimate and the table's mean, and the ledger of that sync."""
    n = _check_data(args, solver.m, solver.loss, x0)
    grads = _client_grads(solver.loss, x0, args)
    g = jnp.mean(grads, axis=0)
    key = jax.random.key_data(jax.random.key(solver.seed))
    z = jnp.int32(0)
    return x0, z, jnp.linalg.norm(g), z, g, grads, g, key, _sync_ledger(n, solver.m)


class RGSAGA(ClientSolver):
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
        return RGSAGAState(*_synced_start(self, x0, args))

    def _local(self, key, x, g, data1):
        return _delegate_step(self, key, x, g, data1)

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
    _check_loss_m(loss, m)
    _check_seed(seed)
    _check_hypers(lam=lam, local_l=local_l)
    _check_unit(beta=beta, p=p)
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


class FedGD(ClientSolver):
    r"""Gradient descent $x \leftarrow x - \eta\nabla f(x)$; each gradient is a full sync
    ($\lceil n/m\rceil$ A-CSS rounds)."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    stepsize: Any

    def init(self, x0, args):
        n = _check_data(args, self.m, self.loss, x0)
        g = full_gradient(self.loss, x0, args)
        z = jnp.int32(0)
        return FedGDState(x0, z, jnp.linalg.norm(g), z, g, _sync_ledger(n, self.m))

    def step(self, state, args):
        n = num_clients(args)
        x1 = state.x - jaxsolve.hyper(self.stepsize, state.x) * state.grad
        g = full_gradient(self.loss, x1, args)
        led = _add(state.ledger, (_sync_rounds(n, self.m), 0, n))
        return FedGDState(x1, state.iter_num + 1, jnp.linalg.norm(g), state.status, g, led), None


def fed_gd(loss: Callable, m: int, *, stepsize) -> FedGD:
    """Full-gradient descent with step ``stepsize`` (e.g. $1/L_{\\max}$), a full sync of
    $\\lceil n/m\\rceil$ A-CSS rounds per step."""
    _check_loss_m(loss, m)
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


class Scaffold(ClientSolver):
    """SCAFFOLD with option II control variates on random $m$-subsets (one R-CSS round each)."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    local_steps: int = eqx.field(static=True)
    local_lr: Any
    global_lr: Any = 1.0
    seed: Any = 0

    def init(self, x0, args):
        n = _check_data(args, self.m, self.loss, x0)
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
        x, c = state.x, state.c

        def client(ci, data):
            y = _local_gd(self.loss, x, data, eta, self.local_steps, c - ci)
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
    _check_loss_m(loss, m)
    _check_seed(seed)
    _check_hypers(local_lr=local_lr, global_lr=global_lr)
    if not isinstance(local_steps, int) or local_steps < 1:
        raise ValueError(f"local_steps must be a positive int, got {local_steps!r}")
    return Scaffold(loss, int(m), local_steps, local_lr, global_lr, seed)


class FedAvgState(NamedTuple):
    r"""State of `FedAvg`.

    Attributes:
        x: the server iterate ``(d,)``.
        iter_num: int32 scalar, server steps (rounds) taken.
        error: $\|\nabla f(x)\|_2$ at the server iterate (a monitoring quantity the
            ledger does not charge).
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        key: the PRNG key as raw bits (``jax.random.key_data``), split each step for the
            random $m$-subset.
        ledger: the rounds and local gradient calls so far (`ClientLedger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    key: jax.Array
    ledger: ClientLedger


class FedAvg(ClientSolver):
    r"""FedAvg (McMahan et al. 2017): a random $m$-subset (one R-CSS round) runs $K$ local
    gradient steps $y \leftarrow y - \eta\nabla f_i(y)$ from $x$; the server moves by
    ``global_lr`` times the mean of $y_i - x$. Build with `fedavg`."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    local_steps: int = eqx.field(static=True)
    stepsize: Any
    global_lr: Any = 1.0
    seed: Any = 0

    def init(self, x0, args):
        _check_data(args, self.m, self.loss, x0)
        z = jnp.int32(0)
        err = jnp.linalg.norm(full_gradient(self.loss, x0, args))
        key = jax.random.key_data(jax.random.key(self.seed))
        return FedAvgState(x0, z, err, z, key, empty_client_ledger())

    def step(self, state, args):
        n = num_clients(args)
        key, sub_key = jax.random.split(jax.random.wrap_key_data(state.key))
        idx = _sample(sub_key, n, self.m)
        sub = jax.tree.map(lambda v: v[idx], args)
        x = state.x
        eta = jaxsolve.hyper(self.stepsize, x)
        zero = jnp.zeros_like(x)
        ys = jax.vmap(lambda data: _local_gd(self.loss, x, data, eta, self.local_steps, zero))(sub)
        x1 = x + jaxsolve.hyper(self.global_lr, x) * jnp.mean(ys - x, axis=0)
        led = state.ledger
        led = led._replace(
            r_rounds=led.r_rounds + 1, local_grads=led.local_grads + self.m * self.local_steps
        )
        err = jnp.linalg.norm(full_gradient(self.loss, x1, args))
        new = FedAvgState(x1, state.iter_num + 1, err, state.status, jax.random.key_data(key), led)
        return new, None


def _check_loss_m(loss, m):
    if not callable(loss):
        raise TypeError(f"loss must be callable (x, client_data) -> scalar, got {type(loss)}")
    _check_nm(float("inf"), m)


def _check_unit(**kw):
    """Each concrete value in (0, 1] (``beta`` in [0, 1])."""
    for name, v in kw.items():
        check_positive(name, v, strict=name != "beta")
        if is_concrete(v) and np.any(np.asarray(v) > 1):
            raise ValueError(f"{name} must be in (0, 1], got {v}")


def fedavg(
    loss: Callable,
    m: int,
    *,
    stepsize: float,
    local_steps: int = 10,
    global_lr: float = 1.0,
    seed: int | jax.Array = 0,
) -> FedAvg:
    r"""FedAvg: ``local_steps`` local gradient steps of size ``stepsize`` on each of $m$
    random clients per round (one R-CSS round, $mK$ local gradients), server step
    ``global_lr`` on the mean update. With $m = n$ and one local step it is gradient
    descent with step ``stepsize * global_lr``.

    Args:
        loss: $\ell(x, D_i)$, one client's loss (hashable).
        m: clients per round (at most the number of clients).
        stepsize: the local step $\eta > 0$.
        local_steps: local steps $K \ge 1$ per round.
        global_lr: the server step on the mean update.
        seed: an int (or int array, e.g. under ``vmap``) seeding client sampling.
    """
    _check_loss_m(loss, m)
    _check_seed(seed)
    _check_hypers(stepsize=stepsize, global_lr=global_lr)
    if not isinstance(local_steps, int) or local_steps < 1:
        raise ValueError(f"local_steps must be a positive int, got {local_steps!r}")
    return FedAvg(loss, int(m), local_steps, stepsize, global_lr, seed)


# --- RG-SVRG and SABER-full (PAGE) ------------------------------------------------------------


class RGSVRGState(NamedTuple):
    r"""State of `RGSVRG`.

    Attributes:
        x: $x^t$, the server iterate ``(d,)`` (the delegate's last local iterate).
        iter_num: int32 scalar, server steps taken.
        error: $\|\nabla f(x)\|_2$ at the server iterate (a monitoring quantity the
            ledger does not charge).
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        g: $g^t$, the RG-SVRG estimate of $\nabla f(x^t)$, ``(d,)``; equal to
            $\nabla f(x^t)$ right after a snapshot.
        snapshot: $\nabla f_i(w)$, ``(n, d)``: every client's gradient at the last
            snapshot point $w$ (each client keeps its own row; ``x0`` after ``init``).
        snapshot_mean: $\nabla f(w)$, ``(d,)``.
        key: the PRNG key as raw bits, split each step for $K_t$, the snapshot coin and
            the subset $S_t$.
        ledger: the rounds and local gradient calls so far (`ClientLedger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    g: jax.Array
    snapshot: jax.Array
    snapshot_mean: jax.Array
    key: jax.Array
    ledger: ClientLedger


def _snapshot_prob(q, m, args, x):
    return m / num_clients(args) if q is None else jaxsolve.hyper(q, x)


def _sync_ledger(n, m):
    return empty_client_ledger()._replace(
        a_rounds=jnp.int32(_sync_rounds(n, m)), local_grads=jnp.int32(n)
    )


def _add(led, inc, d_rounds=0, local=0):
    a, r, grads = inc
    return ClientLedger(
        led.a_rounds + a, led.r_rounds + r, led.d_rounds + d_rounds, led.local_grads + grads + local
    )


class RGSVRG(ClientSolver):
    """I-CGM with the RG-SVRG estimator (see `rg_svrg`)."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    max_local: int = eqx.field(static=True)
    lam: Any
    beta: Any
    local_l: Any
    p: Any
    q: Any
    seed: Any = 0

    def init(self, x0, args):
        return RGSVRGState(*_synced_start(self, x0, args))

    def step(self, state, args):
        key, k_local, k_est = jax.random.split(jax.random.wrap_key_data(state.key), 3)
        x, g = state.x, state.g
        data1 = jax.tree.map(lambda v: v[0], args)
        x1, K = _delegate_step(self, k_local, x, g, data1)
        g1, (snap, snap_mean), inc = _sync_or_recurse(
            self.loss, args, self.m, k_est, _snapshot_prob(self.q, self.m, args, x), x, x1, g,
            beta=jaxsolve.hyper(self.beta, x), snapshot=(state.snapshot, state.snapshot_mean),
        )  # fmt: skip
        led = _add(state.ledger, inc, d_rounds=1, local=K)
        err = jnp.linalg.norm(full_gradient(self.loss, x1, args))
        new = RGSVRGState(
            x1, state.iter_num + 1, err, state.status, g1, snap, snap_mean,
            jax.random.key_data(key), led,
        )  # fmt: skip
        return new, None


def rg_svrg(
    loss: Callable,
    m: int,
    *,
    lam: float,
    beta: float,
    local_l: float,
    p: float,
    q: float | None = None,
    seed: int | jax.Array = 0,
    max_local: int = 10_000,
) -> RGSVRG:
    r"""RG-SVRG: RG-SAGA's I-CGM step and delegate solver with an SVRG base estimator.

    The paper names RG-SVRG (the RG technique applies to any conditionally unbiased
    estimator) but the notes we work from give no formula for it, so this is derived from
    RG-SAGA by swapping the SAGA table for a loopless-SVRG snapshot (Kovalev et al. 2020):
    every client keeps $\nabla f_i(w)$ at the last snapshot $w$ and the server
    $\nabla f(w)$. Per step, after the delegate's D-CSS round gives $x^{t+1}$:

    * with probability $q$, a snapshot at $w = x^{t+1}$, one full synchronization
      ($\lceil n/m\rceil$ A-CSS rounds, $n$ client gradients); the exact gradient is then
      in hand and $g^{t+1} = \nabla f(x^{t+1})$ (the recursion restarts, as at $g^0$; our
      choice, it costs nothing);
    * otherwise one R-CSS round on a random $m$-subset $S_t$, whose clients send
      $\nabla f_i(x^t)$ and $\nabla f_i(x^{t+1})$ ($2m$ gradients; $\nabla f_i(w)$ is stored):
      $G^t = \nabla f(w) + \frac1m\sum_{i\in S_t}(\nabla f_i(x^t) - \nabla f_i(w))$
      (`svrg_estimate`, conditionally unbiased) and
      $g^{t+1} = (1-\beta)g^t + \beta G^t + \frac1m\sum_{i\in S_t}(\nabla f_i(x^{t+1}) - \nabla f_i(x^t))$.

    $\beta = 0$ is PAGE's estimator on the I-CGM step. The start is one full sync
    ($g^0 = \nabla f(x^0)$, $w = x^0$). Expected cost per step:
    $1 + q\,C_A\lceil n/m\rceil + (1 - q)C_R$.

    Args:
        loss: $\ell(x, D_i)$, one client's loss (hashable).
        m: clients per R-CSS round (at most the number of clients).
        lam: the proximal weight $\lambda > \Delta_1$ (as in `rg_saga`;
            `practical_parameters` gives it and the next three).
        beta: the weight $\beta \in [0, 1]$ of the SVRG estimate ($\beta = 0$: PAGE).
        local_l: the local solver's smoothness constant $L$ (step $1/(\lambda + L)$).
        p: the local solver runs $K \sim \mathrm{Geom}(p)$ steps, $p \in (0, 1]$.
        q: the snapshot probability $q \in (0, 1]$; default $m/n$ with $n$ the number of
            clients in the data (one full sync per $n/m$ steps on average, as many
            client gradients as the $n/m$ R-CSS rounds in between).
        seed: an int (or int array, e.g. under ``vmap``) seeding $K_t$, the coin and $S_t$.
        max_local: cap on the local steps of one round.
    """
    _check_loss_m(loss, m)
    _check_seed(seed)
    _check_hypers(lam=lam, local_l=local_l)
    _check_unit(beta=beta, p=p, **({} if q is None else {"q": q}))
    if not isinstance(max_local, int) or max_local < 1:
        raise ValueError(f"max_local must be a positive int, got {max_local!r}")
    return RGSVRG(loss, int(m), max_local, lam, beta, local_l, p, q, seed)


class SaberFullState(NamedTuple):
    r"""State of `SaberFull`.

    Attributes:
        x: the server iterate ``(d,)``.
        iter_num: int32 scalar, server steps taken.
        error: $\|\nabla f(x)\|_2$ at the server iterate (a monitoring quantity the
            ledger does not charge).
        status: int32 `Status`; set to ``SUCCESS`` (0) by ``init`` and never changed by
            the method (the driver judges convergence and non-finite values).
        g: $g^t$, the PAGE estimate of $\nabla f(x^t)$, ``(d,)``.
        key: the PRNG key as raw bits, split each step for the sync coin and $S_t$.
        ledger: the rounds and local gradient calls so far (`ClientLedger`).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    g: jax.Array
    key: jax.Array
    ledger: ClientLedger


class SaberFull(ClientSolver):
    """SABER-full as PAGE on the server: see `saber_full`."""

    loss: Callable = eqx.field(static=True)
    m: int = eqx.field(static=True)
    stepsize: Any
    q: Any = None
    seed: Any = 0

    def init(self, x0, args):
        n = _check_data(args, self.m, self.loss, x0)
        g = full_gradient(self.loss, x0, args)
        key = jax.random.key_data(jax.random.key(self.seed))
        z = jnp.int32(0)
        return SaberFullState(x0, z, jnp.linalg.norm(g), z, g, key, _sync_ledger(n, self.m))

    def step(self, state, args):
        key, k_est = jax.random.split(jax.random.wrap_key_data(state.key))
        x, g = state.x, state.g
        x1 = x - jaxsolve.hyper(self.stepsize, x) * g
        q = _snapshot_prob(self.q, self.m, args, x)
        g1, _, inc = _sync_or_recurse(self.loss, args, self.m, k_est, q, x, x1, g)
        err = jnp.linalg.norm(full_gradient(self.loss, x1, args))
        new = SaberFullState(
            x1, state.iter_num + 1, err, state.status, g1, jax.random.key_data(key),
            _add(state.ledger, inc),
        )  # fmt: skip
        return new, None


def saber_full(
    loss: Callable, m: int, *, stepsize: float, q: float | None = None, seed: int | jax.Array = 0
) -> SaberFull:
    r"""SABER-full, run as PAGE (Li et al. 2021) with server gradient steps.

    $x^{t+1} = x^t - \eta g^t$; then with probability $q$ a full synchronization
    ($\lceil n/m\rceil$ A-CSS rounds) gives $g^{t+1} = \nabla f(x^{t+1})$, otherwise one
    R-CSS round on a random $m$-subset gives
    $g^{t+1} = g^t + \frac1m\sum_{i\in S_t}(\nabla f_i(x^{t+1}) - \nabla f_i(x^t))$.
    $g^0 = \nabla f(x^0)$ is one full sync. With $q = 1$ it is gradient descent (`fed_gd`).

    Where the notes are vague: the paper lists "SABER-full (PAGE)" and "SABER-partial"
    among its baselines; SABER (Mishchenko et al., "Federated learning under second-order
    data heterogeneity") has the sampled clients solve a regularized local subproblem
    around that estimate, a form the notes do not give. We keep what the notes name, the
    PAGE estimator with full synchronizations, and take a plain gradient step on the server.
    The same estimator on RG-SAGA's I-CGM delegate step (the similarity-exploiting local
    subproblem) is ``rg_svrg(..., beta=0)``; `bench/federated.py` runs both.

    Args:
        loss: $\ell(x, D_i)$, one client's loss (hashable).
        m: clients per R-CSS round (at most the number of clients).
        stepsize: the server step $\eta > 0$ (e.g. $1/L_{\max}$).
        q: the full-sync probability $q \in (0, 1]$; default $m/n$.
        seed: an int (or int array, e.g. under ``vmap``) seeding the coin and sampling.
    """
    _check_loss_m(loss, m)
    _check_seed(seed)
    check_positive("stepsize", stepsize)
    if q is not None:
        _check_unit(q=q)
    return SaberFull(loss, int(m), stepsize, q, seed)
