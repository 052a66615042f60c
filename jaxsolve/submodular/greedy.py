r"""Greedy baselines in JAX: naive, lazy, stochastic, cost-benefit and partition greedy.

All add one item at a time, the one of largest marginal gain
$\Delta_j(S) = f(S \cup \{j\}) - f(S)$ (divided by $c_j$ for cost-benefit greedy)
among the items that keep the set feasible, until none does:

* `naive_greedy`: every gain at every step, $O(\mathrm{nnz}(M))$ per step
  (Nemhauser, Wolsey and Fisher 1978: $1 - 1/e$ for cardinality; $1/2$ for a
  partition matroid, Fisher et al. 1978). Ties go to the lower index.
* `lazy_greedy`: the same selections (up to ties) with stale upper bounds
  (Minoux 1978): a gain is recomputed only for the current best bound, since by
  submodularity gains only shrink. Dense `M`, or `BCOO` built by `SCM.create`.
* `stochastic_greedy`: each step scores a random sample of
  $s = \lceil (n/k)\log(1/\varepsilon)\rceil$ feasible items (Mirzasoleiman et al.,
  AAAI 2015: $1 - 1/e - \varepsilon$ in expectation). Dense `M` or indexed `BCOO`.
* `cost_benefit_greedy`: knapsack, ranking by $\Delta_j/c_j$ among the items that
  still fit (as apricot's and submodlib's cost-sensitive greedy).
* `partition_greedy`: naive greedy under a partition matroid.

Each returns a `GreedyResult`; the loops are `lax.while_loop`s (one compilation
for any $k$), so they `jit` and `vmap`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import sparse
from jaxtyping import Array, Bool, Float, Int

from jaxsolve.core.validation import check_key, is_concrete
from jaxsolve.submodular.constraints import Cardinality, Knapsack, PartitionMatroid
from jaxsolve.submodular.objectives import SCM

__all__ = [
    "GreedyResult",
    "naive_greedy",
    "lazy_greedy",
    "stochastic_greedy",
    "cost_benefit_greedy",
    "partition_greedy",
]


class GreedyResult(NamedTuple):
    """A greedy selection.

    Attributes:
        selected: boolean indicator of the chosen set, shape `(n,)`.
        order: the items in the order chosen, padded with `-1`, shape `(n,)`.
        gains: the marginal gain of each choice (NaN padding), shape `(n,)`.
        value: $f(S)$.
        num_evals: marginal gains computed (one per item and step for naive greedy).
    """

    selected: Bool[Array, " n"]
    order: Int[Array, " n"]
    gains: Float[Array, " n"]
    value: Float[Array, ""]
    num_evals: jax.Array


def _all_gains(f: SCM, z):
    """$\\Delta_j$ for every item at $z = M 1_S$."""
    base = f.phi.value(z, f.cap)
    if isinstance(f.M, sparse.BCOO):
        r, c = f.M.indices[:, 0], f.M.indices[:, 1]
        d = f.weights[r] * (f.phi.value(z[r] + f.M.data, f.cap[r]) - base[r])
        return jax.ops.segment_sum(d, c, f.n)
    return f.weights @ (f.phi.value(z[:, None] + f.M, f.cap[:, None]) - base[:, None])


def _gains_of(f: SCM, z, idx):
    """$\\Delta_j$ for the items `idx`."""
    return f.gains(z, idx)


class _Carry(NamedTuple):
    S: jax.Array
    z: jax.Array
    spent: jax.Array  # items (cardinality), cost (knapsack) or per-group counts (partition)
    order: jax.Array
    gains: jax.Array
    t: jax.Array
    evals: jax.Array


def _start(f, constraint):
    n = f.n
    dtype = f.weights.dtype
    if isinstance(constraint, PartitionMatroid):
        spent = jnp.zeros(constraint.num_groups, dtype)
    else:
        spent = jnp.zeros((), dtype)
    return _Carry(
        S=jnp.zeros(n, bool),
        z=jnp.zeros(f.weights.shape, dtype),
        spent=spent,
        order=jnp.full(n, -1, jnp.int32),
        gains=jnp.full(n, jnp.nan, dtype),
        t=jnp.int32(0),
        evals=jnp.int32(0),
    )


def _fits(constraint, c: _Carry):
    """Items that can be added to the current set."""
    free = ~c.S
    if isinstance(constraint, Cardinality):
        return free & (c.spent < jnp.round(constraint.k))
    if isinstance(constraint, Knapsack):
        slack = constraint.budget - c.spent
        return free & (constraint.costs <= slack * (1 + 8 * jnp.finfo(slack.dtype).eps))
    room = c.spent < jnp.round(constraint.caps)
    return free & room[constraint.groups]


def _add(f, constraint, c: _Carry, j, gain) -> _Carry:
    if isinstance(f.M, sparse.BCOO) and f.columns is None:
        r, cols = f.M.indices[:, 0], f.M.indices[:, 1]
        col = jax.ops.segment_sum(jnp.where(cols == j, f.M.data, 0), r, f.weights.shape[0])
    else:
        col = f.column(j)
    if isinstance(constraint, Cardinality):
        spent = c.spent + 1
    elif isinstance(constraint, Knapsack):
        spent = c.spent + constraint.costs[j]
    else:
        spent = c.spent.at[constraint.groups[j]].add(1)
    return c._replace(
        S=c.S.at[j].set(True),
        z=c.z + col,
        spent=spent,
        order=c.order.at[c.t].set(j),
        gains=c.gains.at[c.t].set(gain),
        t=c.t + 1,
    )


def _scale(constraint, cost_benefit, dtype):
    if cost_benefit:
        return constraint.costs.astype(dtype)
    return None


def _result(f, c: _Carry) -> GreedyResult:
    return GreedyResult(c.S, c.order, c.gains, f.value(c.S), c.evals)


def _naive(f, constraint, cost_benefit):
    dtype = f.weights.dtype
    scale = _scale(constraint, cost_benefit, dtype)

    def cond(c):
        return jnp.any(_fits(constraint, c))

    def body(c):
        g = _all_gains(f, c.z)
        score = g if scale is None else g / scale
        j = jnp.argmax(jnp.where(_fits(constraint, c), score, -jnp.inf)).astype(jnp.int32)
        c = c._replace(evals=c.evals + f.n)
        return _add(f, constraint, c, j, g[j])

    return _result(f, jax.lax.while_loop(cond, body, _start(f, constraint)))


def _lazy(f, constraint, cost_benefit):
    dtype = f.weights.dtype
    scale = _scale(constraint, cost_benefit, dtype)
    g0 = f.singleton_values().astype(dtype)
    ub0 = g0 if scale is None else g0 / scale
    n = f.n

    def cond(carry):
        c, _, _ = carry
        return jnp.any(_fits(constraint, c))

    def body(carry):
        c, ub, fresh = carry
        fits = _fits(constraint, c)
        j = jnp.argmax(jnp.where(fits, ub, -jnp.inf)).astype(jnp.int32)

        def take(_):
            gain = ub[j] if scale is None else ub[j] * scale[j]
            return _add(f, constraint, c, j, gain), ub, jnp.zeros(n, bool)

        def refresh(_):
            gain = _gains_of(f, c.z, j[None])[0]
            s = gain if scale is None else gain / scale[j]
            return c._replace(evals=c.evals + 1), ub.at[j].set(s), fresh.at[j].set(True)

        return jax.lax.cond(fresh[j], take, refresh, None)

    # the singleton gains are exact for the empty set: all fresh at the start
    c, _, _ = jax.lax.while_loop(
        cond, body, (_start(f, constraint)._replace(evals=jnp.int32(n)), ub0, jnp.ones(n, bool))
    )
    return _result(f, c)


def _stochastic(f, constraint, key, sample):
    def cond(carry):
        c, _ = carry
        return jnp.any(_fits(constraint, c))

    def body(carry):
        c, key = carry
        key, sub = jax.random.split(key)
        fits = _fits(constraint, c)
        u = jnp.where(fits, jax.random.uniform(sub, (f.n,)), -1.0)
        prio, idx = jax.lax.top_k(u, sample)
        g = jnp.where(prio >= 0, _gains_of(f, c.z, idx), -jnp.inf)
        best = jnp.argmax(g)
        c = c._replace(evals=c.evals + sample)
        return _add(f, constraint, c, idx[best].astype(jnp.int32), g[best]), key

    c, _ = jax.lax.while_loop(cond, body, (_start(f, constraint), key))
    return _result(f, c)


def _check(f, constraint, kinds, name):
    if not isinstance(f, SCM):
        raise TypeError(f"f must be an SCM (see SCM.create), got {type(f).__name__}")
    if not isinstance(constraint, kinds):
        names = ", ".join(k.__name__ for k in kinds)
        raise TypeError(
            f"{name} takes a constraint of type {names}, got {type(constraint).__name__}"
        )
    constraint.check(f.n)


def _dense_only(f, name):
    if isinstance(f.M, sparse.BCOO) and f.columns is None:
        raise TypeError(f"{name} needs column access: a dense M, or a BCOO SCM built by SCM.create")


_naive_jit = jax.jit(_naive, static_argnames=("cost_benefit",))
_lazy_jit = jax.jit(_lazy, static_argnames=("cost_benefit",))
_stochastic_jit = jax.jit(_stochastic, static_argnames=("sample",))
_ANY = (Cardinality, Knapsack, PartitionMatroid)


def naive_greedy(f: SCM, constraint) -> GreedyResult:
    """Greedy by the largest marginal gain among the feasible items (all gains each step).

    For a knapsack constraint this ranks by gain, not gain per cost
    (`cost_benefit_greedy` does the latter).
    """
    _check(f, constraint, _ANY, "naive_greedy")
    return _naive_jit(f, constraint, cost_benefit=False)


def lazy_greedy(f: SCM, constraint, *, cost_benefit: bool = False) -> GreedyResult:
    """Lazy (accelerated) greedy: `naive_greedy`'s selections up to ties, fewer gains."""
    _check(f, constraint, _ANY, "lazy_greedy")
    _dense_only(f, "lazy_greedy")
    if cost_benefit and not isinstance(constraint, Knapsack):
        raise TypeError("cost_benefit=True needs a knapsack constraint")
    return _lazy_jit(f, constraint, cost_benefit=bool(cost_benefit))


def stochastic_greedy(
    f: SCM, constraint: Cardinality, key: jax.Array, *, epsilon: float = 0.1
) -> GreedyResult:
    r"""Stochastic greedy: the best of a random sample of $\lceil (n/k)\log(1/\varepsilon)\rceil$
    items per step (`constraint` a cardinality constraint with a concrete `k`; `key` a
    `jax.random` key, checked)."""
    _check(f, constraint, (Cardinality,), "stochastic_greedy")
    _dense_only(f, "stochastic_greedy")
    check_key("key", key)
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon!r}")
    if not is_concrete(constraint.k):
        raise ValueError("stochastic_greedy needs a concrete k (the sample size is static)")
    k = float(constraint.k)
    sample = min(f.n, max(1, math.ceil(f.n / k * math.log(1 / epsilon))))
    return _stochastic_jit(f, constraint, key, sample=sample)


def cost_benefit_greedy(f: SCM, constraint: Knapsack, *, lazy: bool = True) -> GreedyResult:
    r"""Knapsack greedy by gain per cost $\Delta_j / c_j$ among the items that still fit."""
    _check(f, constraint, (Knapsack,), "cost_benefit_greedy")
    if lazy and not (isinstance(f.M, sparse.BCOO) and f.columns is None):
        return _lazy_jit(f, constraint, cost_benefit=True)
    return _naive_jit(f, constraint, cost_benefit=True)


def partition_greedy(f: SCM, constraint: PartitionMatroid, *, lazy: bool = True) -> GreedyResult:
    """Greedy under a partition matroid ($1/2$-approximation): the best gain among the
    items whose group is not yet full."""
    _check(f, constraint, (PartitionMatroid,), "partition_greedy")
    if lazy and not (isinstance(f.M, sparse.BCOO) and f.columns is None):
        return _lazy_jit(f, constraint, cost_benefit=False)
    return _naive_jit(f, constraint, cost_benefit=False)
