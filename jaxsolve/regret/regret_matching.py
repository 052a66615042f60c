r"""Regret matching (RM, RM+, predictive RM+, alternating RM+) as a constrained optimizer.

Minimizes a smooth ``fun(x, args)`` over a product of probability simplices: ``x`` is a
pytree whose leaves each hold one simplex along the last axis (a leaf of shape
``(..., k)`` holds ``prod(...)`` independent simplices of size ``k``). Each simplex runs
a regret-matching learner on the utilities $u = -\nabla f$ of its block
(Hart & Mas-Colell 2000; RM+: Tammelin 2014; predictive RM+: Farina, Kroer &
Sandholm, AAAI 2021):

$$
r = u - \langle u, x\rangle \mathbf 1,\qquad
R \leftarrow R + r \ (\text{RM}),\quad R \leftarrow [R + r]^+ \ (\text{RM+}),\qquad
x \leftarrow q / \textstyle\sum q,
$$

with $q = [R]^+$ (RM, RM+) or $q = [R + r]^+$ (predictive RM+, the last
instantaneous regret as the prediction); if $\sum q = 0$ the block keeps its
point. ``alternating=True`` updates the leaves one after another, each seeing the
gradient at the blocks already updated in this sweep (Gauss-Seidel); Anagnostides,
Tewolde, Zhang, Panageas, Conitzer & Sandholm, "Convergence of Regret Matching in
Potential Games and Constrained Optimization" (2025), prove that alternating RM+
reaches an $\epsilon$-KKT point in $O_\epsilon(1/\epsilon^4)$ sweeps, while RM
can need exponentially many. One ``step`` is one sweep over all leaves.

``state.error`` is the blockwise KKT gap $\max_{\text{blocks } b}\ \big(\langle\nabla_b f, x_b\rangle -
\min_a \partial_{b,a} f\big)$ (0 exactly at KKT points of the product of simplices;
Tewolde et al.'s stopping rule). The method is parameter-free and its iterates are
invariant under $f \to c f$ for $c > 0$.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver

__all__ = ["regret_matching", "RegretMatching", "RMState", "kkt_gap"]

VARIANTS = ("rm", "rm+", "predictive")


class RMState(NamedTuple):
    r"""State of `regret_matching`.

    Attributes:
        x: the iterate, a pytree like ``x0`` whose leaves each hold probability simplices
            along their last axis (``x0`` projected onto them by ``init``).
        iter_num: int32 scalar, sweeps taken (one sweep updates every leaf).
        error: the blockwise KKT gap at ``x`` (`kkt_gap`),
            $\max_b \langle g_b, x_b\rangle - \min_a g_{b,a}$ with $g = \nabla f(x)$.
        status: int32 `Status`; the solver itself always leaves ``SUCCESS`` (the method
            has no failure mode of its own; a non-finite start or iterate is judged by
            the driver).
        regrets: the regrets $R$, a pytree shaped like ``x``: cumulative
            ($R \leftarrow R + r$) for ``"rm"``, thresholded ($R \leftarrow [R + r]^+$)
            for ``"rm+"`` and ``"predictive"``.
        grad: $\nabla f(x)$ at the current ``x``, a pytree shaped like ``x``.
        num_grad: int32, gradient evaluations so far (1 in ``init``; per sweep one per
            leaf with ``alternating=True``, else one, plus one at the new ``x``).
    """

    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    regrets: Any
    grad: Any
    num_grad: jax.Array


class RMInfo(NamedTuple):
    value: jax.Array


def _block_gaps(g, x):
    return jnp.sum(g * x, axis=-1) - jnp.min(g, axis=-1)


def kkt_gap(grad, x) -> jax.Array:
    r"""Blockwise KKT gap of ``x`` on a product of simplices (last axis of each leaf):
    $\max_b \langle g_b, x_b\rangle - \min_a g_{b,a}$ for the minimization of f."""
    gaps = [
        jnp.max(_block_gaps(g, xi))
        for g, xi in zip(jax.tree.leaves(grad), jax.tree.leaves(x), strict=True)
    ]
    return jnp.max(jnp.stack(gaps))


def _update_block(x, R, g, variant):
    u = -g
    r = u - jnp.sum(u * x, axis=-1, keepdims=True)
    if variant == "rm":
        R = R + r
        q = jnp.maximum(R, 0.0)
    else:
        R = jnp.maximum(R + r, 0.0)
        q = R if variant == "rm+" else jnp.maximum(R + r, 0.0)
    s = jnp.sum(q, axis=-1, keepdims=True)
    x_new = jnp.where(s > 0, q / jnp.where(s > 0, s, 1.0), x)
    return x_new, R


def _onto_simplices(x0):
    """``x0`` projected, block by block (last axis), onto the probability simplices."""
    from jaxsolve.projections import simplex

    def leaf(v):
        v = jnp.asarray(v)
        if not jnp.issubdtype(v.dtype, jnp.inexact):
            raise TypeError(f"x0 must be floating-point, got dtype {v.dtype}")
        if v.ndim == 0 or v.shape[-1] == 0:
            raise ValueError(f"x0 leaves need a non-empty last (simplex) axis, got {v.shape}")
        flat = v.reshape(-1, v.shape[-1])
        return jax.vmap(simplex)(flat).reshape(v.shape)

    return jax.tree.map(leaf, x0)


class RegretMatching(AbstractSolver):
    """Regret matching over a product of simplices (see `regret_matching`).

    Static: ``fun``, ``variant``, ``alternating``; the method has no numeric
    hyperparameters.
    """

    fun: Callable = eqx.field(static=True)
    variant: str = eqx.field(static=True, default="rm+")
    alternating: bool = eqx.field(static=True, default=True)

    def init(self, x0, args) -> RMState:
        x0 = _onto_simplices(x0)
        g = jax.grad(self.fun)(x0, args)
        return RMState(
            x=x0,
            iter_num=jnp.int32(0),
            error=kkt_gap(g, x0),
            status=jnp.int32(Status.SUCCESS),
            regrets=optax.tree.zeros_like(x0),
            grad=g,
            num_grad=jnp.int32(1),
        )

    def step(self, state: RMState, args) -> tuple[RMState, RMInfo]:
        fun, variant = self.fun, self.variant
        grad = jax.grad(fun)
        xs, treedef = jax.tree.flatten(state.x)
        Rs = treedef.flatten_up_to(state.regrets)
        gs = treedef.flatten_up_to(state.grad)
        n_grad = state.num_grad
        for i in range(len(xs)):
            if self.alternating and i > 0:
                gs = treedef.flatten_up_to(grad(jax.tree.unflatten(treedef, xs), args))
                n_grad = n_grad + 1
            xs[i], Rs[i] = _update_block(xs[i], Rs[i], gs[i], variant)
        x = jax.tree.unflatten(treedef, xs)
        val, g = jax.value_and_grad(fun)(x, args)
        new = RMState(
            x=x,
            iter_num=state.iter_num + 1,
            error=kkt_gap(g, x).astype(state.error.dtype),
            status=state.status,
            regrets=jax.tree.unflatten(treedef, Rs),
            grad=g,
            num_grad=n_grad + 1,
        )
        return new, RMInfo(value=val)


def regret_matching(
    fun: Callable, *, variant: str = "rm+", alternating: bool = True
) -> RegretMatching:
    r"""Regret matching as an optimizer over a product of simplices.

    Args:
        fun: ``fun(x, args) -> scalar`` to *minimize*; ``x`` is a pytree whose leaves each
            lie on probability simplices along their last axis.
        variant: ``"rm"`` (Hart & Mas-Colell 2000), ``"rm+"`` (Tammelin 2014) or
            ``"predictive"`` (predictive RM+, Farina et al. 2021).
        alternating: update the leaves one at a time (Gauss-Seidel), as analysed by
            Anagnostides et al. (2025); ``False`` updates all leaves from one gradient.

    The start is *projected* onto the product of simplices (Euclidean projection per
    block, `jaxsolve.projections.simplex`): a start on it is unchanged, ``x0 = 0``
    starts from the uniform point (regret matching's ``x / sum`` never leaves a point
    off the simplex, so such a start would end SUCCESS off it); NaN ends NONFINITE.

    ``state.error`` is the blockwise KKT gap (`kkt_gap`). No step size: the
    iterates do not change when ``fun`` is multiplied by a positive constant. Boxes and
    l1 balls map onto simplices with `jaxsolve.regret.domains`.
    """
    if not callable(fun):
        raise TypeError("fun must be callable: fun(x, args) -> scalar")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not isinstance(alternating, bool):
        raise TypeError(f"alternating must be a bool, got {alternating!r}")
    return RegretMatching(fun=fun, variant=variant, alternating=alternating)
