r"""Rounding a point of the relaxation to a feasible set.

* `pipage` (cardinality, partition matroid) and the pairwise knapsack rounding are
  one randomized pairwise scheme. Items are visited in group order (one group for
  cardinality and knapsack) while one fractional item $i$ of the group is carried;
  each next fractional item $j$ of the group is paired with it and the point moves
  along $v = e_i/w_i - e_j/w_j$ ($w = 1$, or the costs $c$ for knapsack, so that
  $w^\top x$ and the group sums are preserved) to one of the two ends
  $\theta_+ > 0 > \theta_-$ of the segment inside the box, choosing $\theta_+$ with
  probability $-\theta_-/(\theta_+ - \theta_-)$. The move has mean zero
  ($\mathbb E[X] = x$), and each makes $i$ or $j$ integral, so one pass of $O(n)$
  leaves at most one fractional item per group. Along $e_i - e_j$ the multilinear
  extension is convex, which is why the randomized move keeps its expectation
  (Ageev and Sviridenko 2004; Chekuri, Vondrak and Zenklusen, FOCS 2010); for the
  knapsack direction this is the paper's Algorithm 2 (Lv et al., ICLR 2026).
* The last fractional item of a group is rounded up where that stays feasible
  (cardinality, partition matroid: the group sum is below its integer cap) and down
  for knapsack.
* Then, since $f$ is monotone, items that still fit are added in decreasing order
  of $x$ (ties by $f(\{j\})$); this never lowers $f$ and never breaks feasibility.
* Knapsack also keeps the best feasible single item $e^\star$ and returns the better
  of the two (the source of the factor $1/2$).

`round_solution` draws `num_rounds` independent roundings (vmapped) and keeps the
best by $f$.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxsolve.submodular.constraints import Cardinality, Knapsack, PartitionMatroid

__all__ = ["pipage", "knapsack_rounding", "fill", "round_solution"]


def _layout(constraint, n, dtype):
    """(weights, group ids, number of groups, caps) of the pairwise scheme."""
    if isinstance(constraint, Knapsack):
        return constraint.costs.astype(dtype), jnp.zeros(n, jnp.int32), 1
    if isinstance(constraint, PartitionMatroid):
        return jnp.ones(n, dtype), constraint.groups, constraint.num_groups
    if isinstance(constraint, Cardinality):
        return jnp.ones(n, dtype), jnp.zeros(n, jnp.int32), 1
    raise TypeError(
        "constraint must come from cardinality, knapsack or partition_matroid, "
        f"got {type(constraint).__name__}"
    )


def _pairwise(x, w, groups, key, round_up: bool):
    """One randomized pairwise pass (see the module); returns a 0/1 vector."""
    n = x.shape[0]
    dtype = x.dtype
    tol = 1e3 * jnp.finfo(dtype).eps
    x = jnp.clip(x, 0, 1)
    order = jnp.argsort(groups, stable=True)
    coins = jax.random.uniform(key, (n,), dtype)

    def fractional(v):
        return (v > tol) & (v < 1 - tol)

    def snap(v):
        return jnp.where(v <= tol, 0, jnp.where(v >= 1 - tol, 1, v))

    def body(carry, step):
        x, cur, grp = carry
        j = order[step].astype(jnp.int32)
        gj = groups[j]
        cur = jnp.where(gj == grp, cur, -1)  # a new group: nothing carried
        xj = x[j]
        pair = (cur >= 0) & fractional(xj)
        i = jnp.maximum(cur, 0)
        xi, wi, wj = x[i], w[i], w[j]
        up = jnp.minimum((1 - xi) * wi, xj * wj)  # theta_+ : x_i up, x_j down
        dn = jnp.minimum(xi * wi, (1 - xj) * wj)  # -theta_- : x_i down, x_j up
        p_up = dn / jnp.maximum(up + dn, jnp.finfo(dtype).tiny)
        theta = jnp.where(coins[step] < p_up, up, -dn)
        xi_new = snap(xi + theta / wi)
        xj_new = snap(xj - theta / wj)
        x = jnp.where(pair, x.at[i].set(xi_new).at[j].set(xj_new), x)
        # the carried item is the one still fractional (j when i became integral)
        cur = jnp.where(
            pair,
            jnp.where(fractional(xi_new), i, jnp.where(fractional(xj_new), j, -1)),
            jnp.where(fractional(xj) & (cur < 0), j, cur),
        )
        return (x, cur.astype(jnp.int32), gj), None

    (x, _, _), _ = jax.lax.scan(body, (x, jnp.int32(-1), groups[order[0]]), jnp.arange(n))
    return x > tol if round_up else x >= 1 - tol


def pipage(x: Float[Array, " n"], constraint, key) -> Bool[Array, " n"]:
    """Randomized pipage rounding onto the cardinality or partition-matroid bases.

    Keeps every group sum, rounds each group's last fractional item up (see the module).
    """
    if isinstance(constraint, Knapsack):
        raise TypeError("pipage rounds cardinality and partition matroids; use knapsack_rounding")
    w, groups, _ = _layout(constraint, x.shape[0], x.dtype)
    return _pairwise(x, w, groups, key, round_up=True)


def knapsack_rounding(x: Float[Array, " n"], constraint: Knapsack, key) -> Bool[Array, " n"]:
    """Randomized cost-preserving pairwise rounding (the paper's Algorithm 2, without
    the single-item fallback, which `round_solution` adds); the last fractional item
    is rounded down."""
    if not isinstance(constraint, Knapsack):
        raise TypeError("knapsack_rounding needs a Knapsack constraint")
    return _pairwise(
        x, constraint.costs.astype(x.dtype), jnp.zeros(x.shape[0], jnp.int32), key, False
    )


def fill(f, constraint, S: Bool[Array, " n"], priority: Float[Array, " n"]) -> Bool[Array, " n"]:
    """Add the items that still fit, in decreasing `priority` (monotone $f$: never worse)."""
    n = S.shape[0]
    dtype = priority.dtype
    order = jnp.lexsort((-f.singleton_values().astype(dtype), -priority))
    if isinstance(constraint, Knapsack):
        c = constraint.costs.astype(dtype)
        slack = constraint.budget.astype(dtype) - jnp.sum(jnp.where(S, c, 0))

        def body(carry, j):
            S, slack = carry
            add = ~S[j] & (c[j] <= slack)
            return (S.at[j].set(S[j] | add), slack - jnp.where(add, c[j], 0)), None

        (S, _), _ = jax.lax.scan(body, (S, slack), order)
        return S
    _, groups, g = _layout(constraint, n, dtype)
    caps = constraint.caps if isinstance(constraint, PartitionMatroid) else constraint.k[None]
    room = jnp.round(caps).astype(jnp.int32) - jax.ops.segment_sum(S.astype(jnp.int32), groups, g)

    def body(carry, j):
        S, room = carry
        add = ~S[j] & (room[groups[j]] > 0)
        return (S.at[j].set(S[j] | add), room.at[groups[j]].add(-add.astype(jnp.int32))), None

    (S, _), _ = jax.lax.scan(body, (S, room), order)
    return S


def _round_once(f, constraint, x, key):
    if isinstance(constraint, Knapsack):
        S = knapsack_rounding(x, constraint, key)
    else:
        S = pipage(x, constraint, key)
    return fill(f, constraint, S, x)


def round_solution(f, constraint, x: Float[Array, " n"], key, num_rounds: int = 8):
    """The best of `num_rounds` randomized roundings of `x` (and, for knapsack, of the
    best feasible single item). Returns `(S, f(S))`."""
    keys = jax.random.split(key, num_rounds)
    sets = jax.vmap(lambda k: _round_once(f, constraint, x, k))(keys)
    values = jax.vmap(f.value)(sets)
    best = jnp.argmax(values)
    S, v = sets[best], values[best]
    if isinstance(constraint, Knapsack):
        single = f.singleton_values()
        fits = constraint.costs <= constraint.budget
        e = jnp.argmax(jnp.where(fits, single, -jnp.inf))
        use = single[e] > v
        S = jnp.where(use, jnp.arange(x.shape[0]) == e, S)
        v = jnp.where(use, single[e], v)
    return S, v
