r"""Preference-optimization losses: the DPO family (as TRL defines it) and Uni-DPO.

All functions are pure functions of arrays (no model code): ``jit``/``vmap``/``grad``
work on them directly. Losses are returned **per example** (shape ``(batch,)``);
reduce them yourself (``.mean()``), as in ``optax.losses``.

Notation, per preference pair $(x, y_w, y_l)$: $\pi_w, \pi_l$ are the
policy's sequence log-probabilities of the chosen/rejected responses, $r_w, r_l$
the reference model's, and the DPO margin is

$$
\Delta = (\pi_w - r_w) - (\pi_l - r_l).
$$
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "DPO_KINDS",
    "dpo_loss",
    "sequence_logps",
    "token_logps",
    "uni_dpo_loss",
    "uni_dpo_weights",
]

DPO_KINDS = ("sigmoid", "ipo", "hinge", "robust")


def _check_same_shape(**arrays):
    for name, v in arrays.items():
        if isinstance(v, list | tuple):  # as jnp functions do, refuse Python sequences
            raise TypeError(
                f"{name} must be an array (wrap it in jnp.asarray), got a {type(v).__name__}"
            )
    shapes = {k: np.shape(v) for k, v in arrays.items()}
    first_name, first = next(iter(shapes.items()))
    for name, shape in shapes.items():
        if shape != first:
            raise ValueError(
                f"{name} must have the same shape as {first_name} {first}, got {shape}"
            )
    for name, v in arrays.items():
        dtype = jnp.result_type(v)
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"{name} must be a floating-point array, got dtype {dtype}")


def _check_beta(beta):
    if isinstance(beta, jax.core.Tracer):
        return
    b = np.asarray(beta)
    if b.ndim != 0 or not np.isfinite(b) or b <= 0:
        raise ValueError(f"beta must be a positive finite scalar, got {beta!r}")


def token_logps(logits: Float[Array, "*b t v"], labels) -> Float[Array, "*b t"]:
    r"""Per-token log-probabilities $\log \mathrm{softmax}(\text{logits})[\text{label}]$.

    ``labels`` are integer token ids of shape ``logits.shape[:-1]``; out-of-range ids
    (e.g. a padding id of -100) give 0 here and must be masked out by the caller's mask
    (see `sequence_logps`). No shift is applied: align logits and labels first.
    """
    labels = jnp.asarray(labels)
    if np.shape(labels) != np.shape(logits)[:-1]:
        raise ValueError(
            f"labels must have shape logits.shape[:-1] = {np.shape(logits)[:-1]}, "
            f"got {np.shape(labels)}"
        )
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise TypeError(f"labels must be integer token ids, got dtype {labels.dtype}")
    logp = jax.nn.log_softmax(logits, axis=-1)
    valid = (labels >= 0) & (labels < logits.shape[-1])
    safe = jnp.where(valid, labels, 0)
    out = jnp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    return jnp.where(valid, out, 0.0)


def sequence_logps(
    token_logps: Float[Array, "*b t"],
    mask: Float[Array, "*b t"] | None = None,
    *,
    length_normalize: bool = False,
) -> Float[Array, "*b"]:
    r"""Sequence log-probability from per-token ones: $\sum_t m_t \ell_t$.

    With ``length_normalize=True`` returns the mean over unmasked tokens,
    $\sum_t m_t \ell_t / \max(1, \sum_t m_t)$ (TRL's IPO and ``sigmoid_norm``
    scores; Uni-DPO's and SimPO's ``dpo_length_norm``). ``mask`` is 1 on response
    tokens and 0 on prompt/padding (bool or float; default: all ones) and broadcasts
    against ``token_logps`` (a ``(t,)`` mask shared by a batch, a ``(b, 1)`` per-row
    switch); a mask that would enlarge the result's shape is refused, naming both
    shapes. The last axis is the token axis.
    """
    token_logps = jnp.asarray(token_logps)
    if not jnp.issubdtype(token_logps.dtype, jnp.floating):
        raise TypeError(f"token_logps must be floating-point, got dtype {token_logps.dtype}")
    if token_logps.ndim < 1:
        raise ValueError("token_logps must have a token axis (last axis)")
    if mask is None:
        mask = jnp.ones_like(token_logps)
    else:
        try:
            shape = np.broadcast_shapes(np.shape(mask), np.shape(token_logps))
        except ValueError:
            shape = None
        if shape != np.shape(token_logps):
            raise ValueError(
                f"mask must broadcast to token_logps' shape {np.shape(token_logps)}, "
                f"got {np.shape(mask)}"
            )
    m = jnp.broadcast_to(jnp.asarray(mask).astype(token_logps.dtype), token_logps.shape)
    # where, not a product: a masked -inf/NaN log-prob (padding) must not leak
    total = jnp.sum(jnp.where(m > 0, token_logps * m, 0.0), axis=-1)
    if length_normalize:
        return total / jnp.maximum(jnp.sum(m, axis=-1), 1.0)
    return total


def dpo_loss(
    policy_chosen_logps: Float[Array, " b"],
    policy_rejected_logps: Float[Array, " b"],
    ref_chosen_logps: Float[Array, " b"],
    ref_rejected_logps: Float[Array, " b"],
    *,
    beta: float = 0.1,
    kind: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> Float[Array, " b"]:
    r"""Per-example DPO-family losses (Rafailov et al. 2023; TRL ``DPOTrainer`` definitions).

    With $\Delta = (\pi_w - r_w) - (\pi_l - r_l)$ and $\varepsilon$ =
    ``label_smoothing``:

    * ``"sigmoid"`` (DPO; cDPO when $\varepsilon>0$):
      $-(1-\varepsilon)\log\sigma(\beta\Delta) - \varepsilon\log\sigma(-\beta\Delta)$
    * ``"hinge"`` (SLiC): $\max(0, 1 - \beta\Delta)$
    * ``"ipo"`` (Azar et al. 2023): $(\Delta - 1/(2\beta))^2$. TRL feeds IPO
      *length-averaged* log-probabilities: pass ``sequence_logps(...,
      length_normalize=True)`` to match it.
    * ``"robust"`` (rDPO, Chowdhury et al. 2024), $0 \le \varepsilon < 1/2$:
      $\big[-(1-\varepsilon)\log\sigma(\beta\Delta) + \varepsilon\log\sigma(-\beta\Delta)\big]/(1-2\varepsilon)$

    Args:
        policy_chosen_logps: policy sequence log-probs of the chosen responses
            (see `sequence_logps`).
        policy_rejected_logps: policy sequence log-probs of the rejected responses.
        ref_chosen_logps: reference-model sequence log-probs of the chosen responses.
        ref_rejected_logps: reference-model sequence log-probs of the rejected responses
            (all four of one shape).
        beta: $\beta > 0$ (TRL default 0.1).
        kind: one of ``"sigmoid"``, ``"ipo"``, ``"hinge"``, ``"robust"``.
        label_smoothing: $\varepsilon$ for ``"sigmoid"`` and ``"robust"``.

    Returns:
        The per-example losses, shape of the inputs.
    """
    _check_same_shape(
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        ref_chosen_logps=ref_chosen_logps,
        ref_rejected_logps=ref_rejected_logps,
    )
    _check_beta(beta)
    if kind not in DPO_KINDS:
        raise ValueError(f"kind must be one of {DPO_KINDS}, got {kind!r}")
    if not isinstance(label_smoothing, jax.core.Tracer):
        eps = float(label_smoothing)
        if kind in ("hinge", "ipo") and eps != 0.0:
            raise ValueError(f"label_smoothing is not used by kind={kind!r}; leave it at 0")
        if kind == "sigmoid" and not 0.0 <= eps <= 0.5:
            raise ValueError(f"label_smoothing must be in [0, 0.5] for kind='sigmoid', got {eps}")
        if kind == "robust" and not 0.0 <= eps < 0.5:
            raise ValueError(f"label_smoothing must be in [0, 0.5) for kind='robust', got {eps}")
    delta = (policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps)
    z = beta * delta
    if kind == "sigmoid":
        return -(1 - label_smoothing) * jax.nn.log_sigmoid(
            z
        ) - label_smoothing * jax.nn.log_sigmoid(-z)
    if kind == "hinge":
        return jax.nn.relu(1 - z)
    if kind == "ipo":
        return (delta - 1 / (2 * beta)) ** 2
    # robust
    return (
        -(1 - label_smoothing) * jax.nn.log_sigmoid(z) + label_smoothing * jax.nn.log_sigmoid(-z)
    ) / (1 - 2 * label_smoothing)


def _reduce(logps, mask, length_normalize, name):
    if mask is None:
        return logps
    if np.ndim(logps) < 1 or np.shape(mask) != np.shape(logps):
        raise ValueError(f"{name}: per-token log-probs and their mask must have one shape")
    return sequence_logps(logps, mask, length_normalize=length_normalize)


def uni_dpo_weights(
    policy_chosen_logps,
    policy_rejected_logps,
    chosen_scores,
    rejected_scores,
    *,
    beta: float = 2.0,
    eta: float = 0.7,
    tau_ref: float = 2.0,
    gamma: float = 3.0,
    quality_weighting: bool = True,
):
    r"""Uni-DPO's two weights, $(w_\text{qual}, w_\text{perf})$, from sequence log-probs.

    $$
    w_\text{qual} = \sigma\big(\eta\,(s_w - s_l)\big),\qquad
    w_\text{perf} = \big(1 - \sigma(\beta(\pi_w - \pi_l) - \tau_\text{ref})\big)^{\gamma}.
    $$

    ``quality_weighting=False`` sets $w_\text{qual} = 1$ (note that
    $\eta = 0$ gives $w_\text{qual} = 1/2$, not 1); $\gamma = 0$ gives
    $w_\text{perf} = 1$. See `uni_dpo_loss`.
    """
    if quality_weighting:
        w_qual = jax.nn.sigmoid(eta * (chosen_scores - rejected_scores))
    else:
        w_qual = jnp.ones_like(chosen_scores)
    margin = beta * (policy_chosen_logps - policy_rejected_logps) - tau_ref
    # (1 - sigmoid(m)) = sigmoid(-m), computed stably; gamma = 0 gives exactly 1
    w_perf = jnp.exp(gamma * jax.nn.log_sigmoid(-margin))
    return w_qual.astype(margin.dtype), w_perf


def uni_dpo_loss(
    policy_chosen_logps: Float[Array, "b ..."],
    policy_rejected_logps: Float[Array, "b ..."],
    ref_chosen_logps: Float[Array, "b ..."],
    ref_rejected_logps: Float[Array, "b ..."],
    chosen_scores: Float[Array, " b"],
    rejected_scores: Float[Array, " b"],
    *,
    chosen_mask: Array | None = None,
    rejected_mask: Array | None = None,
    length_normalize: bool = True,
    beta: float = 2.0,
    eta: float = 0.7,
    tau_ref: float = 2.0,
    gamma: float = 3.0,
    nll_weight: float = 0.001,
    tau_good: float = 2.5,
    quality_weighting: bool = True,
    stop_gradient_weights: bool = False,
) -> Float[Array, " b"]:
    r"""Per-example Uni-DPO loss (Peng et al., *Uni-DPO*, arXiv 2506.10054, ICLR 2026).

    $$
    \begin{aligned}
    \Delta &= (\pi_w - \pi_l) - (r_w - r_l) \\
    w_\text{qual} &= \sigma\big(\eta\,(s_w - s_l)\big) \qquad\text{(quality of the pair, from its score margin)}\\
    w_\text{perf} &= \big(1 - \sigma(\beta(\pi_w - \pi_l) - \tau_\text{ref})\big)^{\gamma}
    \qquad\text{(focal: under-fitted pairs weigh more)}\\
    L &= -\,w_\text{qual}\,w_\text{perf}\,\log\sigma(\beta\Delta)
    \;+\; \lambda\,\mathbb 1[s_w \ge \tau_\text{good}]\,\mathbb 1[\pi_w < r_w]\,(-\pi_w)
    \end{aligned}
    $$

    The last term is the calibrated NLL (c-NLL): it raises the chosen likelihood only
    for *good* pairs whose chosen log-prob fell below the reference's. As in the
    authors' trainer (``uni_dpo_trainer.py``), $w_\text{perf}$ uses the policy's
    own (reference-free, SimPO-like) margin shifted by $\tau_\text{ref}$, the
    log-probs are length-normalized by default, and neither weight is detached
    (``stop_gradient_weights=True`` detaches $w_\text{perf}$). Defaults are the
    authors' code defaults except $\beta$ (configs use 2-10).

    Reduction to DPO: with ``quality_weighting=False``, ``gamma=0`` and
    ``nll_weight=0`` this is exactly ``dpo_loss(..., kind="sigmoid")`` on the same
    sequence log-probs (with ``eta=0`` instead of ``quality_weighting=False``, half of it).

    Args:
        policy_chosen_logps: policy log-probs of the chosen responses: sequence level
            ``(b,)``, or per-token ``(b, t)`` together with ``chosen_mask`` (then reduced
            with `sequence_logps`, the mean over tokens when ``length_normalize``).
        policy_rejected_logps: the same for the rejected responses (``rejected_mask``).
        ref_chosen_logps: reference-model log-probs of the chosen responses.
        ref_rejected_logps: reference-model log-probs of the rejected responses.
        chosen_scores: external quality score $s_w$ of each chosen response, ``(b,)``.
        rejected_scores: quality score $s_l$ of each rejected response, ``(b,)``.
        chosen_mask: response-token mask for per-token chosen inputs (or None).
        rejected_mask: response-token mask for per-token rejected inputs (or None).
        length_normalize: mean instead of sum over tokens when masks are given.
        beta: $\beta > 0$.
        eta: $\eta$, slope of the quality weight.
        tau_ref: $\tau_\text{ref}$, margin shift of the focal weight.
        gamma: $\gamma \ge 0$, focal exponent.
        nll_weight: $\lambda \ge 0$, weight of the calibrated NLL term.
        tau_good: $\tau_\text{good}$, score above which a pair counts as good.
        quality_weighting: use $w_\text{qual}$ (False: 1).
        stop_gradient_weights: detach $w_\text{perf}$ from the gradient.

    Returns:
        Per-example losses, shape ``(b,)``.
    """
    _check_beta(beta)
    if (chosen_mask is None) != (rejected_mask is None):
        raise ValueError("pass both chosen_mask and rejected_mask, or neither")
    _check_same_shape(policy_chosen_logps=policy_chosen_logps, ref_chosen_logps=ref_chosen_logps)
    _check_same_shape(
        policy_rejected_logps=policy_rejected_logps, ref_rejected_logps=ref_rejected_logps
    )
    pw = _reduce(policy_chosen_logps, chosen_mask, length_normalize, "chosen")
    rw = _reduce(ref_chosen_logps, chosen_mask, length_normalize, "chosen")
    pl = _reduce(policy_rejected_logps, rejected_mask, length_normalize, "rejected")
    rl = _reduce(ref_rejected_logps, rejected_mask, length_normalize, "rejected")
    _check_same_shape(
        policy_chosen_logps=pw,
        policy_rejected_logps=pl,
        chosen_scores=chosen_scores,
        rejected_scores=rejected_scores,
    )
    for name, v in (("gamma", gamma), ("nll_weight", nll_weight)):
        if not isinstance(v, jax.core.Tracer) and float(v) < 0:
            raise ValueError(f"{name} must be non-negative, got {v}")
    w_qual, w_perf = uni_dpo_weights(
        pw,
        pl,
        chosen_scores,
        rejected_scores,
        beta=beta,
        eta=eta,
        tau_ref=tau_ref,
        gamma=gamma,
        quality_weighting=quality_weighting,
    )
    if stop_gradient_weights:
        w_perf = jax.lax.stop_gradient(w_perf)
    delta = (pw - pl) - (rw - rl)
    loss = -w_qual * w_perf * jax.nn.log_sigmoid(beta * delta)
    coeff = ((rw - pw) > 0) & (chosen_scores >= tau_good)
    nll = jnp.where(coeff, -pw, 0.0)
    return loss + nll_weight * nll
