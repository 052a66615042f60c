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

`round_solution` draws `num_rounds` independent randomized roundings and keeps the
best by $f$ of those and the derandomized one. By default (`num_rounds=None`) it draws
8 when at most `MANY_FRACTIONAL` = 200 items of $x$ are fractional and 1 when more
are: one randomized rounding is what the guarantee in expectation needs (the best of
several is never worse than the first); more help on small problems (the brute force
of `tests/submodular/test_maximize.py`, n = 16: knapsack minimum 0.85 -> 0.93 OPT
with 8), but with many fractional items the randomized sets concentrate below the
derandomized one: on the 16 instances of `bench/submodular.py` (ER and SBM,
n = 5000, k = 10-2000, 33-1784 fractional items) the derandomized set beat the best
of 32 randomized ones every time, by 0.16-1.1%, while each extra candidate costs a
pass, a fill and a value (at k = 500, 8 -> 1: about 4 ms of CPU).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxsolve.core.validation import (
    check_floating,
    check_key,
    check_nonempty,
    check_shape,
    is_concrete,
)
from jaxsolve.submodular.constraints import Cardinality, Knapsack, PartitionMatroid

__all__ = ["pipage", "knapsack_rounding", "fill", "round_solution", "MANY_FRACTIONAL"]

# above this many fractional items of x, `round_solution(num_rounds=None)` draws one
# randomized rounding instead of 8 (see the module)
MANY_FRACTIONAL = 200


def _layout(constraint, n, dtype):
    """(weights, group ids, number of groups) of the pairwise scheme."""
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


def _ground_size(constraint):
    """n for a knapsack (its costs) or a partition matroid (its groups); None for k."""
    if isinstance(constraint, Knapsack):
        return constraint.costs.shape[0]
    if isinstance(constraint, PartitionMatroid):
        return constraint.groups.shape[0]
    return None


def _check_point(x, constraint) -> None:
    """Refuse a concrete `x` outside the constraint's polytope, naming `x`: the pairwise
    moves keep every group's weighted sum, so a point with a sum above its cap would
    round to an infeasible set."""
    check_floating("x", x)
    if jnp.ndim(x) != 1:
        raise ValueError(f"x must be a vector (n,), got shape {jnp.shape(x)}")
    check_nonempty("x", x)
    size = _ground_size(constraint)
    if size is not None and jnp.shape(x) != (size,):
        raise ValueError(
            f"x must have shape ({size},) (the constraint's ground set), got {jnp.shape(x)}"
        )
    if jnp.issubdtype(jnp.result_type(x), jnp.complexfloating):
        raise TypeError(f"x must be real, got dtype {jnp.result_type(x)}")
    if not is_concrete((x, constraint)):
        return
    n = x.shape[0]
    constraint.check(n)
    xs = np.asarray(x, np.float64)
    slack = 1e-6
    if not (np.all(np.isfinite(xs)) and xs.min() >= -slack and xs.max() <= 1 + slack):
        raise ValueError("x must lie in [0, 1]^n (the relaxed point of the constraint)")
    if isinstance(constraint, Knapsack):
        sums = np.asarray([np.dot(np.asarray(constraint.costs, np.float64), xs)])
    elif isinstance(constraint, PartitionMatroid):
        g = constraint.num_groups
        sums = np.bincount(np.asarray(constraint.groups), weights=xs, minlength=g)
    else:
        sums = np.asarray([xs.sum()])
    if isinstance(constraint, Knapsack):
        caps = np.asarray(constraint.budget, np.float64)[None]
    elif isinstance(constraint, PartitionMatroid):
        caps = np.asarray(constraint.caps, np.float64)
    else:
        caps = np.asarray(constraint.k, np.float64)[None]
    if np.any(sums > caps * (1 + slack) + slack):
        raise ValueError(
            f"x must lie in the constraint's polytope: its weighted sums {sums.round(6)} "
            f"exceed the caps {caps}"
        )


def _fractional_tests(tol):
    """``fractional(v)``: strictly inside ``(tol, 1 - tol)``; ``snap(v)``: to 0 or 1
    within ``tol`` of it, else unchanged. Both pairwise passes judge items by these."""

    def fractional(v):
        return (v > tol) & (v < 1 - tol)

    def snap(v):
        return jnp.where(v <= tol, 0, jnp.where(v >= 1 - tol, 1, v))

    return fractional, snap


def _fractional_items(x):
    """``x`` clipped to [0, 1], the tolerance ``1e3 eps`` under which a coordinate counts
    as integral, and the mask of the fractional items: the one test of what rounding
    still has to move (the passes and `round_solution`'s candidate count use it)."""
    tol = 1e3 * jnp.finfo(x.dtype).eps
    x = jnp.clip(x, 0, 1)
    return x, tol, _fractional_tests(tol)[0](x)


def _fractional_visit(x, groups, num_groups):
    """Where both pairwise passes start: `_fractional_items`, and the order and count of
    the fractional items, group by group (only they move; the rest are never visited)."""
    x, tol, frac0 = _fractional_items(x)
    order = jnp.argsort(jnp.where(frac0, groups, num_groups), stable=True).astype(jnp.int32)
    return x, tol, order, jnp.sum(frac0.astype(jnp.int32))


def _pairwise(x, w, groups, num_groups, round_up: bool, f):
    """The derandomized pairwise pass (see the module) over the fractional items: each
    move goes to the end with the larger $F$, with $Mx$ updated along the way ($O(m)$
    per move, $O(p)$ for a `BCOO` `f`); a 0/1 vector. The randomized passes are
    `_pairwise_random`."""
    x, tol, order, count = _fractional_visit(x, groups, num_groups)
    fractional, snap = _fractional_tests(tol)
    z0 = f.modular(x)
    if f.sparse:
        direction, gain, move = _sparse_moves(f)
    else:
        MT = f.M.T  # rows of M^T are the items' columns: contiguous reads in the loop
        value = lambda z: jnp.dot(f.weights, f.phi.value(z, f.cap))

        def direction(i, j, wi, wj):
            return MT[i] / wi - MT[j] / wj

        def gain(z, d, theta):  # F(z + theta d) up to a constant
            return value(z + theta * d)

        def move(z, d, theta):
            return z + theta * d

    def body(carry):
        x, z, cur, grp, p = carry
        j = order[p]
        gj = groups[j]
        cur = jnp.where(gj == grp, cur, -1)  # a new group: nothing carried
        xj = x[j]
        pair = cur >= 0
        i = jnp.maximum(cur, 0)
        xi, wi, wj = x[i], w[i], w[j]
        up = jnp.minimum((1 - xi) * wi, xj * wj)  # theta_+ : x_i up, x_j down
        dn = jnp.minimum(xi * wi, (1 - xj) * wj)  # -theta_- : x_i down, x_j up
        d = direction(i, j, wi, wj)  # once per move, read by both gains and the move
        take_up = gain(z, d, up) >= gain(z, d, -dn)
        z = move(z, d, jnp.where(pair, jnp.where(take_up, up, -dn), 0))
        theta = jnp.where(pair, jnp.where(take_up, up, -dn), 0)
        xi_new = snap(xi + theta / wi)
        xj_new = snap(xj - theta / wj)
        x = x.at[i].set(jnp.where(pair, xi_new, xi)).at[j].set(jnp.where(pair, xj_new, xj))
        # the carried item is the one still fractional (j when i became integral)
        cur = jnp.where(
            pair, jnp.where(fractional(xi_new), i, jnp.where(fractional(xj_new), j, -1)), j
        )
        return x, z, cur.astype(jnp.int32), gj, p + 1

    init = (x, z0, jnp.int32(-1), groups[order[0]], jnp.int32(0))
    x, _, _, _, _ = jax.lax.while_loop(lambda c: c[-1] < count, body, init)
    return x > tol if round_up else x >= 1 - tol


def _pairwise_random(x, w, groups, num_groups, keys, round_up: bool):
    """`num_rounds = len(keys)` randomized pairwise passes at once: ``(R, n)`` 0/1 sets.

    Each lane makes the module's randomized moves with its own coins,
    ``jax.random.uniform(keys[r], (n,))`` (the sets of the one-pass loop vmapped over
    ``keys`` that this replaced, checked equal), batched by hand: every pass visits the same items in the same
    order, and an item's value is read only while it is the carried one, so each lane
    keeps its carried item and value as scalars and logs the item (or two) that a move
    leaves behind at the visit's position ``p`` (a `dynamic_update_slice` at an index
    shared by the lanes); one scatter per lane writes the logs after the loop. The
    vmapped pass scattered into an ``(R, n)`` iterate at per-lane indices in every
    iteration (n = 5000, 672 fractional items, R = 8: ~10 ms; logged: see the bench).
    """
    n = x.shape[0]
    dtype = x.dtype
    R = keys.shape[0]
    x, tol, order, count = _fractional_visit(x, groups, num_groups)
    fractional, snap = _fractional_tests(tol)
    coins = jax.vmap(lambda k: jax.random.uniform(k, (n,), dtype))(keys)

    def body(carry):
        cur, xcur, grp, p, logs = carry
        j = order[p]
        gj = groups[j]
        xj, wj = x[j], w[j]
        old = cur
        cur = jnp.where(gj == grp, cur, -1)  # a new group: nothing carried
        pair = cur >= 0
        i = jnp.maximum(cur, 0)
        xi, wi = xcur, w[i]
        up = jnp.minimum((1 - xi) * wi, xj * wj)  # theta_+ : x_i up, x_j down
        dn = jnp.minimum(xi * wi, (1 - xj) * wj)  # -theta_- : x_i down, x_j up
        p_up = dn / jnp.maximum(up + dn, jnp.finfo(dtype).tiny)
        take_up = jax.lax.dynamic_index_in_dim(coins, p, axis=1, keepdims=False) < p_up
        theta = jnp.where(pair, jnp.where(take_up, up, -dn), 0)
        xi_new = snap(xi + theta / wi)
        xj_new = snap(xj - theta / wj)
        keep_i, keep_j = fractional(xi_new), fractional(xj_new)
        new_cur = jnp.where(pair, jnp.where(keep_i, i, jnp.where(keep_j, j, -1)), j)
        new_xcur = jnp.where(pair, jnp.where(keep_i, xi_new, xj_new), xj)
        # left behind: the old carried item (moved, or dropped at a group change) and j
        a_item = jnp.where(pair, jnp.where(keep_i, n, i), jnp.where(old >= 0, old, n))
        a_val = jnp.where(pair, xi_new, xcur)
        b_item = jnp.where(pair & (keep_i | ~keep_j), j, n)
        entries = (a_item, a_val, jnp.broadcast_to(b_item, (R,)), jnp.broadcast_to(xj_new, (R,)))
        logs = tuple(
            jax.lax.dynamic_update_index_in_dim(log, e.astype(log.dtype), p, axis=1)
            for log, e in zip(logs, entries, strict=True)
        )
        return new_cur.astype(jnp.int32), new_xcur, gj, p + 1, logs

    logs = (
        jnp.full((R, n), n, jnp.int32),
        jnp.zeros((R, n), dtype),
        jnp.full((R, n), n, jnp.int32),
        jnp.zeros((R, n), dtype),
    )
    # logged item n: none (out of range, dropped by the scatter)
    init = (
        jnp.full((R,), -1, jnp.int32),
        jnp.zeros((R,), dtype),
        groups[order[0]],
        jnp.int32(0),
        logs,
    )
    cur, xcur, _, _, (ai, av, bi, bv) = jax.lax.while_loop(lambda c: c[3] < count, body, init)

    def write(ai, av, bi, bv, cur, xcur):
        last = jnp.where(cur >= 0, cur, n)
        return (
            x.at[ai]
            .set(av, mode="drop")
            .at[bi]
            .set(bv, mode="drop")
            .at[last]
            .set(xcur, mode="drop")
        )

    out = jax.vmap(write)(ai, av, bi, bv, cur, xcur)
    return out > tol if round_up else out >= 1 - tol


def _sparse_moves(f):
    """`(direction, gain, move)` of the derandomized pass for a `BCOO` `f`, in $O(p)$ per move.

    The direction $d = M_{:i}/w_i - M_{:j}/w_j$ touches only the rows of columns $i$
    and $j$ (`f.columns`, rows ascending, padding row $m$ last), so
    $F(z + \theta d) - F(z)$ is a sum over those rows; a row shared by both columns is
    counted once, with its two coefficients merged (found by `searchsorted`).
    """
    rows, vals = f._columns()
    m = f.weights.shape[0]

    def direction(i, j, wi, wj):
        ri, rj = rows[i], rows[j]
        pi = jnp.clip(jnp.searchsorted(rj, ri), 0, rj.shape[0] - 1)
        pj = jnp.clip(jnp.searchsorted(ri, rj), 0, ri.shape[0] - 1)
        shared_i = (rj[pi] == ri) & (ri < m)
        shared_j = (ri[pj] == rj) & (rj < m)
        ci = vals[i] / wi - jnp.where(shared_i, vals[j][pi], 0) / wj
        cj = jnp.where(shared_j, 0, -vals[j] / wj)
        r = jnp.concatenate([ri, rj])
        return r, jnp.concatenate([ci, cj])

    def gain(z, d, theta):
        r, c = d
        zr = jnp.take(z, r, mode="fill", fill_value=0)
        wr = jnp.take(f.weights, r, mode="fill", fill_value=0)
        cap = jnp.take(f.cap, r, mode="fill", fill_value=0)
        return jnp.dot(wr, f.phi.value(zr + theta * c, cap) - f.phi.value(zr, cap))

    def move(z, d, theta):
        r, c = d
        return z.at[r].add(theta * c, mode="drop")

    return direction, gain, move


def _pairwise_pass(x, constraint, *, keys=None, f=None):
    """The pairwise pass for ``constraint`` (its weights and groups by `_layout`; the last
    fractional item rounded up, down for a knapsack): ``(len(keys), n)`` randomized sets,
    or with ``f`` the one derandomized set. `pipage`, `knapsack_rounding` and
    `round_solution` all round through here."""
    w, groups, g = _layout(constraint, x.shape[0], x.dtype)
    up = not isinstance(constraint, Knapsack)
    if f is not None:
        return _pairwise(x, w, groups, g, up, f)
    return _pairwise_random(x, w, groups, g, keys, up)


def pipage(x: Float[Array, " n"], constraint, key=None, f=None) -> Bool[Array, " n"]:
    """Pipage rounding onto the cardinality or partition-matroid bases.

    Randomized with `key` (a `jax.random` key, checked; needed unless `f` is given);
    with `f` (an `SCM` with dense `M`) instead, each move goes to
    the end with the larger concave extension $F$ (a derandomized variant: no
    guarantee in expectation, but it follows $F$, and costs $O(m)$ per move). Keeps
    every group sum and rounds each group's last fractional item up (see the module).
    """
    if isinstance(constraint, Knapsack):
        raise TypeError("pipage rounds cardinality and partition matroids; use knapsack_rounding")
    _check_point(x, constraint)
    if f is not None:
        return _pairwise_pass(x, constraint, f=f)
    check_key("key", key)
    return _pairwise_pass(x, constraint, keys=key[None])[0]


def knapsack_rounding(
    x: Float[Array, " n"], constraint: Knapsack, key=None, f=None
) -> Bool[Array, " n"]:
    """Cost-preserving pairwise rounding (the paper's Algorithm 2, without the
    single-item fallback, which `round_solution` adds); the last fractional item is
    rounded down. Randomized with `key`, by the larger $F$ with `f` (as `pipage`)."""
    if not isinstance(constraint, Knapsack):
        raise TypeError("knapsack_rounding needs a Knapsack constraint")
    _check_point(x, constraint)
    if f is not None:
        return _pairwise_pass(x, constraint, f=f)
    check_key("key", key)
    return _pairwise_pass(x, constraint, keys=key[None])[0]


def fill(f, constraint, S: Bool[Array, " n"], priority: Float[Array, " n"]) -> Bool[Array, " n"]:
    """Add the items that still fit, in decreasing `priority` (monotone $f$: never worse).

    `S` must be a boolean vector of shape `(n,)` and `priority` a real vector of the
    same shape (checked, naming the argument).
    """
    n = f.n
    if jnp.result_type(S) != jnp.bool_:
        raise TypeError(f"S must be a boolean indicator, got dtype {jnp.result_type(S)}")
    check_shape("S", S, (n,))
    check_floating("priority", priority)
    check_shape("priority", priority, (n,))
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
    # matroid: the first room[g] unselected items of each group g (in `order`) fit, and
    # taking them one by one would add exactly those; so rank them within their group
    _, groups, g = _layout(constraint, n, dtype)
    caps = constraint.caps if isinstance(constraint, PartitionMatroid) else constraint.k[None]
    room = jnp.round(caps).astype(jnp.int32) - jax.ops.segment_sum(S.astype(jnp.int32), groups, g)
    if g > 1:  # by group, `order` within (one group: `order` already is)
        order = order[jnp.argsort(groups[order], stable=True)]
    free = ~S[order]
    grp = groups[order]
    counts = jax.ops.segment_sum(free.astype(jnp.int32), groups[order], g)
    before = jnp.cumsum(counts) - counts  # free items in the groups ahead
    rank = jnp.cumsum(free.astype(jnp.int32)) - 1 - before[grp]
    return S.at[order].set(S[order] | (free & (rank < room[grp])))


def _round_once(f, constraint, x, key, guided=None):
    if isinstance(constraint, Knapsack):
        S = knapsack_rounding(x, constraint, key, guided)
    else:
        S = pipage(x, constraint, key, guided)
    return fill(f, constraint, S, x)


def round_solution(f, constraint, x: Float[Array, " n"], key, num_rounds: int | None = None):
    """The best of the randomized roundings of `x`, of the derandomized one (dense `M`,
    or `BCOO` built by `SCM.create`) and, for knapsack, of the best feasible single item.

    `num_rounds` randomized roundings (static); None: 8 when at most `MANY_FRACTIONAL`
    items of `x` are fractional, else 1 (decided at run time, see the module). Returns
    `(S, f(S))`. `x` must be a real vector of shape `(n,)` in the constraint's
    polytope, `key` a `jax.random` key (both checked, naming the argument).
    """
    check_floating("x", x)
    check_shape("x", x, (f.n,))
    check_key("key", key)
    if num_rounds is not None and (
        isinstance(num_rounds, bool) or not isinstance(num_rounds, int) or num_rounds < 0
    ):
        raise ValueError(f"num_rounds must be None or an int >= 0, got {num_rounds!r}")
    guided = not f.sparse or f.columns is not None
    if not guided and num_rounds == 0:
        raise ValueError("num_rounds must be >= 1 for a BCOO SCM without its column index")
    candidates = []
    if num_rounds != 0:
        _check_point(x, constraint)
        R = 8 if num_rounds is None else num_rounds
        sets = _pairwise_pass(x, constraint, keys=jax.random.split(key, R))
        sets = jax.vmap(lambda S: fill(f, constraint, S, x))(sets)
        if num_rounds is None:  # 1 candidate when many items are fractional (module)
            many = jnp.sum(_fractional_items(x)[2]) > MANY_FRACTIONAL
            used = jnp.where(many, 1, R)
        else:
            used = R
        # the values one set at a time: a vmapped value batches the gather of
        # f.modular, which XLA runs slower on CPU than the sets one by one (9 sets,
        # n = 5000 ER: 8.5 ms vs 5.4 ms); only the `used` first ones (a while loop)

        def value_of(c):
            i, best, bv = c
            v = f.value(sets[i])
            better = v > bv
            return i + 1, jnp.where(better, i, best), jnp.where(better, v, bv)

        dtype = f.weights.dtype
        init = (jnp.int32(0), jnp.int32(0), jnp.asarray(-jnp.inf, dtype))
        _, b, bv = jax.lax.while_loop(lambda c: c[0] < used, value_of, init)
        candidates.append((sets[b], bv))
    if guided:
        S = _round_once(f, constraint, x, None, f)
        candidates.append((S, f.value(S)))
    S, v = candidates[0]
    for S2, v2 in candidates[1:]:  # ties: the randomized set, as the argmax over all did
        better = v2 > v
        S, v = jnp.where(better, S2, S), jnp.where(better, v2, v)
    if isinstance(constraint, Knapsack):
        single = f.singleton_values()
        fits = constraint.costs <= constraint.budget
        e = jnp.argmax(jnp.where(fits, single, -jnp.inf))
        use = single[e] > v
        S = jnp.where(use, jnp.arange(x.shape[0]) == e, S)
        v = jnp.where(use, single[e], v)
    return S, v
