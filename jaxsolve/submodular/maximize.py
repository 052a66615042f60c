r"""`maximize`: relax, run AAPGA on the concave extension, round.

The pipeline of Lv, Wang, Xu and Yang (ICLR 2026): maximize the concave extension
$F$ over the constraint polytope $P$ with `aapga` (or any solver of this family),
then round with `round_solution` (pipage / pairwise knapsack rounding, a monotone
fill, the best single item for knapsack). Because $F \ge f$ on $P$ (and $F = f$ on
sets), $F(x) + \mathrm{gap}(x) \ge \max_P F \ge \mathrm{OPT} \ge f(S)$: the returned
`upper_bound` certifies how far the set can be from optimal.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

import jaxsolve
from jaxsolve.core.compile_options import LOOP_EMITTERS_O1, options_jit
from jaxsolve.core.validation import check_floating, check_key, check_shape, check_tol
from jaxsolve.submodular.aapga import AAPGA, aapga
from jaxsolve.submodular.constraints import Cardinality, Knapsack, PartitionMatroid
from jaxsolve.submodular.objectives import SCM
from jaxsolve.submodular.rounding import round_solution

__all__ = ["MaximizeResult", "maximize"]


class MaximizeResult(NamedTuple):
    """The result of `maximize`.

    Attributes:
        selected: the chosen set, a boolean indicator of shape `(n,)` (always feasible).
        value: $f(S)$.
        relaxation: $F(x)$ at the relaxed point.
        upper_bound: $F(x) + \\mathrm{gap}(x) \\ge \\mathrm{OPT}$ (a certified bound).
        x: the relaxed point (in $P$).
        status: the relaxation solve's `jaxsolve.Status` (`SUCCESS`: relative gap $\\le$ `tol`).
        feasible: the constraint's check of `selected` (True unless the data had NaN).
        num_steps: steps of the relaxation solve.
        num_grads: supergradient evaluations of the relaxation solve.
    """

    selected: Bool[Array, " n"]
    value: Float[Array, ""]
    relaxation: Float[Array, ""]
    upper_bound: Float[Array, ""]
    x: Float[Array, " n"]
    status: jax.Array
    feasible: jax.Array
    num_steps: jax.Array
    num_grads: jax.Array


def _check_inputs(f, constraint, key, num_rounds):
    if not isinstance(f, SCM):
        raise TypeError(f"f must be an SCM (see SCM.create), got {type(f).__name__}")
    if not isinstance(constraint, Cardinality | Knapsack | PartitionMatroid):
        raise TypeError(
            "constraint must come from cardinality, knapsack or partition_matroid, "
            f"got {type(constraint).__name__}"
        )
    constraint.check(f.n)
    if num_rounds is not None and (
        isinstance(num_rounds, bool) or not isinstance(num_rounds, int) or num_rounds < 1
    ):
        raise ValueError(f"num_rounds must be None or a positive int, got {num_rounds!r}")
    check_key("key", key)


def maximize(
    f: SCM,
    constraint: Cardinality | Knapsack | PartitionMatroid,
    key: jax.Array | None = None,
    *,
    solver: AAPGA | None = None,
    tol: float | None = 1e-3,
    max_steps: int = 500,
    num_rounds: int | None = None,
    x0: Float[Array, " n"] | None = None,
) -> MaximizeResult:
    r"""Maximize the SCM `f` under `constraint`: relaxation, AAPGA, randomized rounding.

    Args:
        f: the objective (`SCM`).
        constraint: `cardinality(k)`, `knapsack(costs, budget)` or
            `partition_matroid(groups, caps)`.
        key: a `jax.random` key for the rounding (default `jax.random.key(0)`, so a
            call is reproducible).
        solver: the relaxation's solver (default `aapga(shrink=0.7, bound="extrapolated",
            certify_below=10 * tol, first_lipschitz="step")`: about half the steps of
            `aapga()`'s 0.9 on coverage, the certificate read off the line search's
            supergradient instead of one more product per step, and the first $L$ from
            the first projected step, see `jaxsolve.submodular.aapga`; `pga()` for the
            baseline).
        tol: relative certified gap at which the relaxation stops (None: the driver's
            default tolerance). The default $10^{-3}$ is matched to what the rounding
            keeps, see below.
        max_steps: step budget of the relaxation.
        num_rounds: randomized roundings, the best kept with the derandomized one
            (static); None: 8 when at most 200 items of the relaxed point are
            fractional, else 1 (`jaxsolve.submodular.rounding` says why).
        x0: the relaxation's start (default: the constraint's uniform point); a real
            vector of shape `(n,)` (checked), cast to `f`'s dtype and projected onto
            the polytope, so a start outside it is allowed.

    What is guaranteed, whatever `tol`: the set is feasible, `value` is its $f$, and
    `upper_bound` $= F(x) + \mathrm{gap}(x) \ge \mathrm{OPT}$ is a certificate; on
    `SUCCESS`, $F(x) \ge \max_P F/(1 + \mathrm{tol})$. With at least one randomized
    rounding among the candidates, the expected value is at least that rounding's,
    $\mathbb E f(S) \ge G(x)$ for the multilinear extension $G$ (pipage keeps it in
    expectation), which gives the paper's approximation factors where $G$ is within a
    constant of $F$ (e.g. $G \ge (1 - 1/e) F$ for coverage). The derandomized
    rounding follows $F$ and carries no guarantee of its own; it only adds a candidate.

    Why `tol` $= 10^{-3}$ by default (it was $10^{-6}$): the rounding loses far more
    than that. On the 16 instances of `bench/submodular.py` (probabilistic coverage,
    ER and SBM, n = 5000, k = 10-2000) $f(S)$ is 0.06-2.2% below $F(x)$, while at
    12 of them (k = 10, 50, 200, 500, 1000, 2000) the sets found at $10^{-3}$ are
    within 0.03% of those at $10^{-4}$ in value (equal or higher at 8 of 12), in
    7-12 steps instead of 10-19 (k = 500: ER 13 -> 9, SBM 14 -> 12); on the 200
    brute-forced SCMs of `tests/submodular/test_maximize.py` the medians and minima
    of the ratios to OPT are those of $10^{-6}$ (cardinality median 1.0, min 0.949;
    knapsack min 0.932; partition min 0.972). A smaller `tol` tightens the
    certificate `upper_bound` (by at most `tol` relative) more than the set.

    Works under `jax.vmap` (over `f`, `constraint`, `key`) and `jax.jit`; the checks
    run only on concrete inputs.
    """
    key = jax.random.key(0) if key is None else key
    _check_inputs(f, constraint, key, num_rounds)
    check_tol(tol)  # here, not only in jaxsolve.solve: the default solver is built from tol
    dtype = f.weights.dtype
    if tol is not None:
        tol = jnp.asarray(tol, dtype)  # traced in `_run`: a new tol does not recompile
    if solver is None:
        below = 0.0 if tol is None else 10 * tol
        solver = aapga(
            shrink=0.7, bound="extrapolated", certify_below=below, first_lipschitz="step"
        )
    if x0 is None:
        x0 = constraint.start(f.n, dtype)
    else:
        x0 = jnp.asarray(x0)
        check_floating("x0", x0)
        check_shape("x0", x0, (f.n,))
        if jnp.issubdtype(x0.dtype, jnp.complexfloating):
            raise TypeError(f"x0 must be real, got dtype {x0.dtype}")
        x0 = x0.astype(dtype)  # the relaxation runs in f's precision
    return _run(solver, f, constraint, key, x0, tol, max_steps, num_rounds)


def _run_program(solver, f, constraint, key, x0, tol, max_steps, num_rounds):
    """The relaxation and the rounding as one compiled program (the inputs are checked
    by `maximize`): at n = 5000, k = 500 the two calls from Python cost ~3-6 ms of CPU
    more per call than this one (the driver's host-side work and two dispatches)."""
    sol = jaxsolve.solve(solver, x0, (f, constraint), tol=tol, max_steps=max_steps)
    return _finish(f, constraint, key, sol, num_rounds)


# compiled with XLA:CPU's loop emitters and LLVM -O1 at top level (FlexQP's set,
# `jaxsolve.core.compile_options`): the coverage 100 x 60, k = 10 program compiles in
# 1.0 instead of 1.9 CPU s at the same steady time (same-process A/B, 2026-12-05,
# bench/results/compile.md); inside a user's jit or vmap it is inlined there
_run = options_jit(_run_program, LOOP_EMITTERS_O1, static_argnames=("max_steps", "num_rounds"))


def _finish(f, constraint, key, sol, num_rounds):
    S, v = _round_jit(f, constraint, sol.x, key, num_rounds)
    return MaximizeResult(
        selected=S,
        value=v,
        relaxation=sol.state.value,
        upper_bound=sol.state.upper,
        x=sol.x,
        status=sol.status,
        feasible=constraint.feasible(S) & jnp.isfinite(v),
        num_steps=sol.num_steps,
        num_grads=sol.state.num_grads,
    )


_round_jit = jax.jit(round_solution, static_argnames=("num_rounds",))
