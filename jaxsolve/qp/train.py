r"""Training Deep FlexQP's policies by deep unfolding, and the problem classes to train on.

`train_policy` unrolls ``K`` iterations of `jaxsolve.qp.deep.DeepFlexQP`
(``jaxsolve.solve(..., loop="fixed")``, reverse mode through the scan) on minibatches
of training QPs and minimizes, with an ``optax`` optimizer,

$$
\mathcal L(\theta) = \frac1K \sum_{k=1}^K \frac{\|\xi_k(\theta) - \xi^\star\|_2}{\|\xi^\star\|_2},
\qquad \xi = (x, y),
$$

the paper's loss (supervising the multipliers keeps $\mu \ge |y^\star|$, the exact
regime of the relaxation), or with ``loss="log"`` the log-scaled variant
$\frac1K \sum_k \log_{10}(\epsilon + \|\xi_k - \xi^\star\| / \|\xi^\star\|)$
($\epsilon = 10^{-12}$), which keeps pulling once the residual is small. Measured
(bench/results/deep_flexqp_certificate.md): it lowers the median residual but leaves a
heavier tail, so its certificates (`jaxsolve.qp.pac_bayes`) are the tighter ones only
below the tolerance the plain-trained solver reaches on most problems.

`problem_set` draws a class of `jaxsolve.qp.problems` (random, equality, portfolio,
lasso, huber, svm, control) with its own seed, and `reference_solutions` solves them
to 1e-10 with polished FlexQP (the targets $\xi^\star$).
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsolve.core import solve
from jaxsolve.core.validation import check_int, check_key, check_shape, is_concrete
from jaxsolve.qp import problems as gen
from jaxsolve.qp.deep import DeepFlexQP, Policies
from jaxsolve.qp.problem import QP
from jaxsolve.qp.solve import solve_qp

__all__ = [
    "CLASSES",
    "problem_set",
    "reference_solutions",
    "unrolled_loss",
    "train_policy",
    "TrainResult",
]

CLASSES = ("random", "equality", "portfolio", "lasso", "huber", "svm", "control")


def _draw(cls: str, key, n: int, dtype):
    """One QP of class ``cls`` with about ``n`` variables.

    The generators' own size arguments count factors, features or states
    (``portfolio(key, 10)`` has 1010 variables), so each class converts ``n``.
    """
    if cls == "random":
        return gen.random_qp(key, n, dtype=dtype)
    if cls == "equality":
        return gen.eq_qp(key, n, dtype=dtype)
    if cls == "portfolio":  # n_assets + k factors
        k = max(1, n // 10)
        return gen.portfolio(key, k, max(2, n - k), dtype=dtype)
    if cls == "lasso":  # (x, y, t): 2 features + samples, samples = 2 features
        f = max(2, n // 4)
        return gen.lasso(key, f, 2 * f, dtype=dtype)
    if cls == "huber":  # (x, z, r, s): features + 3 samples, samples = 2 features
        f = max(2, n // 7)
        return gen.huber(key, f, 2 * f, dtype=dtype)
    if cls == "svm":  # (x, t): features + samples, samples = 2 features
        f = max(2, n // 3)
        return gen.svm(key, f, 2 * f, dtype=dtype)
    if cls == "control":  # (T + 1) nx + T nu with nx = 2, T = 10
        return gen.mpc(key, max(2, n // 10), dtype=dtype)
    raise ValueError(f"problem class must be one of {CLASSES}, got {cls!r}")


def problem_set(cls: str, count: int, n: int, *, seed: int, dtype=jnp.float64) -> QP:
    """``count`` QPs of class ``cls`` (about ``n`` variables) as one batched `QP`.

    Train and test sets use different ``seed``s; the problems of one class share a
    shape, so they stack.
    """
    if cls not in CLASSES:
        raise ValueError(f"problem class must be one of {CLASSES}, got {cls!r}")
    check_int("count", count)  # 0 made an empty set, silently
    check_int("n", n)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    keys = jax.random.split(jax.random.key(seed), count)
    return _generator(cls, n, jnp.dtype(dtype))(keys)


@functools.lru_cache(maxsize=32)
def _generator(cls: str, n: int, dtype):
    """One compiled, vmapped draw per ``(cls, n, dtype)``: eager draws in a Python loop
    dispatch every small operation on its own and are far slower."""
    return jax.jit(jax.vmap(lambda k: _draw(cls, k, n, dtype)))


def reference_solutions(qps: QP, tol: float = 1e-10):
    """``(x*, y*)`` of a batch by polished FlexQP at ``tol`` (float64 recommended)."""
    sol = solve_qp(qps, tol=tol, max_steps=4000)
    return sol.x, sol.state.y, sol.status


def unrolled_loss(policies: Policies, qps: QP, x_star, y_star, K: int, kind: str = "plain"):
    """Mean over the batch of the unrolled loss (module docstring)."""
    solver = DeepFlexQP(policies=policies)

    def one(qp, x_ref, y_ref):
        sol = solve(solver, jnp.zeros_like(qp.q), qp, loop="fixed", max_steps=K, tol=0.0)
        ref = jnp.concatenate([x_ref, y_ref])
        xi = jnp.concatenate([sol.info.x, sol.info.y], axis=1)
        rel = jnp.linalg.norm(xi - ref, axis=1) / jnp.maximum(jnp.linalg.norm(ref), 1e-12)
        if kind == "log":
            return jnp.mean(jnp.log10(1e-12 + rel))
        return jnp.mean(rel)

    return jnp.mean(jax.vmap(one)(qps, x_star, y_star))


class TrainResult(NamedTuple):
    """`train_policy`'s result.

    Attributes:
        policies: the trained `jaxsolve.qp.deep.Policies`.
        losses: ``(steps,)`` float64, the minibatch loss at each training step.
        seconds: wall time of the training loop (s), compilation included.
    """

    policies: Policies
    losses: np.ndarray
    seconds: float


def _check_training_set(policies, qps, x_star, y_star) -> int:
    """The training set's types, shapes and targets, named; returns the problem count.

    Targets of another length than the batch were gathered out of range, silently (JAX
    clamps the index: problems trained toward another problem's solution); NaN targets,
    what `reference_solutions` gives an infeasible or unsolved QP, made every loss and
    then the weights NaN, silently."""
    if not isinstance(policies, Policies):
        raise TypeError(
            f"policies must be a jaxsolve.qp.deep.Policies, got {type(policies).__name__}"
        )
    if not isinstance(qps, QP):
        raise TypeError(f"qps must be a batched QP (problem_set), got {type(qps).__name__}")
    if jnp.ndim(qps.q) != 2:
        raise ValueError(
            f"qps must be a batch of QPs (q of shape (count, n)), got q of shape "
            f"{jnp.shape(qps.q)}; stack single problems with jax.tree.map(jnp.stack, ...)"
        )
    for name, target, want in (("x_star", x_star, qps.q.shape), ("y_star", y_star, qps.l.shape)):
        check_shape(name, target, want)
        if is_concrete(target):
            bad = ~np.all(np.isfinite(np.asarray(target)), axis=1)
            if bad.any():
                raise ValueError(
                    f"{name} is not finite for problem(s) {np.flatnonzero(bad)[:10].tolist()}: "
                    "drop the problems whose reference_solutions status is not SUCCESS "
                    "(infeasible or unsolved) before training"
                )
    return qps.q.shape[0]


def train_policy(
    policies: Policies,
    qps: QP,
    x_star,
    y_star,
    *,
    K: int = 50,
    steps: int = 200,
    batch_size: int = 32,
    optimizer: optax.GradientTransformation | None = None,
    loss: str = "plain",
    key=None,
    progress: bool = False,
) -> TrainResult:
    """Train ``policies`` on the batch ``qps`` with targets ``(x_star, y_star)``.

    Minibatches of ``batch_size`` problems are drawn with ``key``; ``optimizer``
    defaults to Adam (1e-3) with gradient clipping at norm 1. For short runs give a
    larger rate: at 100 steps of 16 problems, Adam 5e-3 (what
    ``bench/deep_flexqp_baselines.py`` uses) trained the row policies to a ~50x lower
    median error after 100 iterations than 1e-3 on the random class at n = 20
    (`bench/results/deep_flexqp.md`). Checkpoint by saving
    ``result.policies`` with ``equinox.tree_serialise_leaves`` (the horizon is a static
    field, not a leaf: restore into ``Policies.learned(key).with_horizon(K)``).

    The returned policies carry ``horizon = K``: run longer, the solver holds the
    parameters of iteration ``K - 1`` (`jaxsolve.qp.deep`, "Past the horizon").
    Training itself unrolls all ``K`` iterations with the policies, whatever horizon
    ``policies`` came with.
    """
    if loss not in ("plain", "log"):
        raise ValueError(f"loss must be 'plain' or 'log', got {loss!r}")
    count = _check_training_set(policies, qps, x_star, y_star)
    K = check_int("K", K)
    steps = check_int("steps", steps, minimum=0)
    batch_size = check_int("batch_size", batch_size)  # 0 trained on empty batches: NaN
    key = jax.random.key(0) if key is None else key
    check_key("key", key)
    opt = optimizer or optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    # trained on all K iterations (a horizon from an earlier training would hold the
    # parameters inside the unroll); the result's horizon is this K
    policies = policies.with_horizon(None)
    params, static = eqx.partition(policies, eqx.is_inexact_array)
    state = opt.init(params)

    @jax.jit
    def update(params, state, idx):
        batch = jax.tree.map(lambda v: v[idx], (qps, x_star, y_star))

        def f(p):
            return unrolled_loss(eqx.combine(p, static), *batch, K, loss)

        value, grads = jax.value_and_grad(f)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, desc="train_policy")
        except ImportError:
            bar = None
    losses = []
    t0 = time.perf_counter()
    for i in range(steps):
        idx = jax.random.choice(
            jax.random.fold_in(key, i), count, (min(batch_size, count),), replace=False
        )
        params, state, value = update(params, state, idx)
        losses.append(float(value))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3g}")
    if bar is not None:
        bar.close()
    trained = eqx.combine(params, static).with_horizon(K)
    return TrainResult(trained, np.asarray(losses), time.perf_counter() - t0)
