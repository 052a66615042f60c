r"""Cautious weight decay (CWD) as an optax ``GradientTransformation``.

Chen, Li, Liang, Su, Xie, Pierse, Liang, Lao, Liu, *Cautious Weight Decay*,
arXiv 2510.12402 (ICLR 2026), Algorithm 1:

$$
x_{t+1} = x_t - \eta_t\,\big(u_t + \lambda\,\mathbb 1[u_t \odot x_t \ge 0] \odot x_t\big),
$$

where $u_t$ is the base optimizer's update in the paper's convention (the step
is *subtracted*). In optax the stages before ``scale_by_learning_rate`` carry exactly
that $u_t$ (gradient sign; ``scale_by_learning_rate`` multiplies by
$-\eta_t$ afterwards), so the CWD stage sits where ``add_decayed_weights`` sits
and tests the incoming update against the *pre-step* parameter. The decay's own
descent direction is $-\lambda x$; the optimizer's is $-u$; they agree
exactly when $u x \ge 0$, which is when the decay is applied: the decay never
pushes a coordinate against the optimizer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["cautious_weight_decay", "cautious_mask", "CautiousWeightDecayState"]


class CautiousWeightDecayState(NamedTuple):
    """State of `cautious_weight_decay` with a weight-decay schedule.

    Kept only for a schedule (as optax's ``WeightDecaySchedule``); a constant decay has
    ``optax.EmptyState``, so ``optax.tree_utils.tree_get(state, "count")`` of a chain
    finds one count, as for ``optax.adamw``.

    Attributes:
        count: int32 scalar, updates applied so far (the schedule is evaluated at it;
            incremented with ``optax.safe_increment``, so it saturates, never wraps).
    """

    count: jax.Array


def cautious_mask(updates, params):
    r"""The paper's mask $\mathbb 1[u \odot x \ge 0]$ as a pytree of booleans.

    Computed from signs, ``sign(u) * sign(x) >= 0``, which equals the rule on the real
    numbers exactly: a product ``u * x`` can underflow to 0 (bfloat16/float32) and
    turn a disagreement into a tie, or overflow; the signs cannot. Ties (``u == 0`` or
    ``x == 0``) count as agreement, as in the paper (``>= 0``). A NaN in either gives
    ``False`` (no decay).
    """
    return jax.tree.map(lambda u, x: jnp.sign(u) * jnp.sign(x) >= 0, updates, params)


def _check_weight_decay(weight_decay):
    if callable(weight_decay):
        return
    try:
        arr = np.asarray(weight_decay)
    except Exception:  # a tracer (inject_hyperparams under jit): checked at run time instead
        return
    if arr.dtype.kind not in "fiu" or arr.ndim != 0:
        raise TypeError(f"weight_decay must be a real scalar or a schedule, got {weight_decay!r}")
    if np.isnan(arr) or arr < 0:
        raise ValueError(f"weight_decay must be a non-negative number, got {weight_decay!r}")


def cautious_weight_decay(
    weight_decay: float | jax.Array | Callable[[jax.Array], jax.Array] = 0.0,
    mask: Any | Callable[[Any], Any] | None = None,
) -> optax.GradientTransformation:
    r"""Add $\lambda\,\mathbb 1[u \odot x \ge 0] \odot x$ to the incoming updates.

    A drop-in replacement for `optax.add_decayed_weights` in a chain
    (Cautious Weight Decay, arXiv 2510.12402, Algorithm 1): with the incoming update
    $u$ (descent direction with the gradient's sign, i.e. before
    ``scale_by_learning_rate``) and the parameters $x$,

    $$
    u \leftarrow u + \lambda_t\,\mathbb 1[u \odot x \ge 0] \odot x .
    $$

    So ``optax.chain(optax.scale_by_adam(), cautious_weight_decay(wd),
    optax.scale_by_learning_rate(lr))`` computes the paper's
    $x - \eta(u + \lambda\,\mathbb 1[u x \ge 0]\,x)$ coordinate for coordinate.

    Tie rule: a coordinate with ``u == 0`` or ``x == 0`` is decayed (the paper's
    ``>= 0``); the test uses signs, not the product, so it is exact in low precision
    (see `cautious_mask`). Property (the paper's "no implicit regularized
    objective"): at a minimizer of the loss with no zero entries the decay switches
    off coordinate by coordinate (sliding mode), so SGD/Adam + CWD converge to a
    minimizer of the *unmodified* loss, while decoupled decay converges to the
    minimizer of a regularized (SGD) or box-constrained (Adam) problem.

    Args:
        weight_decay: $\lambda \ge 0$, a scalar or a schedule ``count -> value``
            (evaluated at the step count, as in ``add_decayed_weights``). Works with
            ``optax.inject_hyperparams``.
        mask: as in ``optax.add_decayed_weights``: a pytree (or prefix) of booleans,
            or a callable ``params -> pytree``; ``False`` leaves are never decayed.

    Returns:
        An ``optax.GradientTransformation``; the update keeps each leaf's dtype
        (bfloat16 stays bfloat16).
    """
    _check_weight_decay(weight_decay)

    scheduled = callable(weight_decay)

    def init_fn(params):
        del params
        if not scheduled:
            return optax.EmptyState()
        return CautiousWeightDecayState(count=jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError(
                "cautious_weight_decay needs params: call update(updates, state, params)"
            )
        lam = weight_decay(state.count) if scheduled else weight_decay
        lam = jnp.asarray(lam)

        def leaf(u, x):
            if u is None:
                return None
            keep = jnp.sign(u) * jnp.sign(x) >= 0
            decay = jnp.where(keep, lam.astype(x.dtype) * x, jnp.zeros_like(x))
            return (u + decay.astype(u.dtype)).astype(u.dtype)

        new = jax.tree.map(leaf, updates, params, is_leaf=lambda v: v is None)
        if not scheduled:
            return new, state
        return new, CautiousWeightDecayState(count=optax.safe_increment(state.count))

    tx = optax.GradientTransformation(init_fn, update_fn)
    if mask is None:
        return tx
    masked = optax.masked(tx, mask)

    def check_mask(params):
        m = mask(params) if callable(mask) else mask
        try:
            jax.tree_util.tree_structure(m).flatten_up_to(params)
        except (ValueError, TypeError) as err:
            raise ValueError(
                "mask must be a pytree (or prefix) of booleans with the structure of the "
                f"params (or a callable params -> such a pytree); it does not match: {err}"
            ) from None

    def masked_init(params):
        check_mask(params)
        return masked.init(params)

    def masked_update(updates, state, params=None):
        if params is not None:
            check_mask(params)
        return masked.update(updates, state, params)

    return optax.GradientTransformation(masked_init, masked_update)
