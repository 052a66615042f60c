r"""Reference guidance wrapped around a user's sampler step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_floating, is_concrete
from jaxsolve.guidance.energy import (
    _as_mask,
    _as_points,
    _check_finite,
    check_options,
    feature_energy,
)

__all__ = ["guided_step", "guidance_energy"]


def guidance_energy(
    z,
    feature_fn: Callable,
    reference,
    *,
    pivot=None,
    lam: float = 0.0,
    **energy_options: Any,
) -> jax.Array:
    r"""The guided objective $E(\phi(z), r) + \frac{\lambda}{2}\|z - z_{pivot}\|^2$.

    Args:
        z (jax.Array): the latent.
        feature_fn (Callable): $\phi$, ``feature_fn(z) -> (n_points, channels)``.
        reference (jax.Array): the reference features $r$ (not differentiated).
        pivot (jax.Array | None): the anchor $z_{pivot}$ (shape of ``z``); ``None``
            drops the term.
        lam (float): the weight $\lambda \ge 0$ of the pivot term.
        **energy_options (Any): keywords of `feature_energy` (``kind``, ``matcher``, ``p``,
            ``alpha``, ``mask_gen``, ``mask_ref``).

    Returns:
        jax.Array: a real scalar.

    Raises:
        TypeError: a non-callable ``feature_fn``, a non-float ``z``.
        ValueError: a ``pivot`` not shaped like ``z``, a negative ``lam``, and what
            `feature_energy` raises.
    """
    if not callable(feature_fn):
        raise TypeError(f"feature_fn must be callable, got {type(feature_fn).__name__}")
    check_latent("z", z)
    _check_lam(lam)
    e = feature_energy(feature_fn(z), reference, **energy_options)
    if pivot is not None:
        if jnp.shape(pivot) != jnp.shape(z):
            raise ValueError(
                f"pivot must have the shape of z, {jnp.shape(z)}, got {jnp.shape(pivot)}"
            )
        d = z - pivot
        e = e + 0.5 * jnp.asarray(lam, e.dtype) * jnp.sum(d * d)
    return e


def check_latent(name, z) -> None:
    """A latent (or pivot): a real floating-point array (dtype only: fine when traced)."""
    dtype = jnp.result_type(z)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"{name} must be a real floating-point array, got dtype {dtype}")


def _check_lam(lam) -> None:
    if is_concrete(lam):
        v = np.asarray(lam)
        if v.shape != () or not (np.isrealobj(v) and np.isfinite(v) and v >= 0):
            raise ValueError(f"lam must be a non-negative finite scalar, got {lam}")


def check_weights(name, mask) -> None:
    """Latent-space weights: real (or boolean), finite, non-negative and not all zero
    (values when concrete). An all-zero mask guided nothing, silently: `guided_step` was
    the unguided step and `latent_optimizer` reported SUCCESS at its start (the masked
    gradient it measures is zero), the case of a face mask that detected no face."""
    if mask is None:
        return
    dtype = jnp.result_type(mask)
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        if dtype != jnp.bool_:
            raise TypeError(f"{name} must hold real weights (or booleans), got dtype {dtype}")
    if is_concrete(mask):
        mv = np.asarray(mask, np.float64)
        if not np.all(np.isfinite(mv)) or np.any(mv < 0):
            raise ValueError(f"{name} must hold non-negative finite weights (or booleans)")
        if not np.any(mv > 0):
            raise ValueError(f"{name} is empty (no entry has a positive weight)")


def _check_common(feature_fn, reference, pivot, lam, energy_options):
    if not callable(feature_fn):
        raise TypeError(f"feature_fn must be callable, got {type(feature_fn).__name__}")
    check_floating("reference", reference)
    ref = _as_points("reference", reference)  # real, (n_ref, channels), non-empty
    _check_finite("reference", ref)
    _check_lam(lam)
    if pivot is not None:
        check_floating("pivot", pivot)
        check_latent("pivot", pivot)
        _check_finite("pivot", pivot)
    if energy_options.get("mask_ref") is not None:
        _as_mask(
            "mask_ref",
            energy_options["mask_ref"],
            "reference",
            jnp.shape(reference),
            ref.shape[0],
            ref.dtype,
        )
    if energy_options.get("mask_gen") is not None:
        check_weights("mask_gen", energy_options["mask_gen"])
    unknown = set(energy_options) - {"kind", "matcher", "p", "alpha", "mask_gen", "mask_ref"}
    if unknown:
        raise TypeError(f"unknown energy option(s) {sorted(unknown)} (see feature_energy)")
    check_options(
        matcher=energy_options.get("matcher", "nearest"),
        kind=energy_options.get("kind", "dragon"),
        p=energy_options.get("p", 1.0),
        alpha=energy_options.get("alpha", 1.0),
    )


def guided_step(
    step_fn: Callable,
    feature_fn: Callable,
    reference,
    *,
    scale: float,
    t_threshold: float,
    mask=None,
    pivot=None,
    lam: float = 0.0,
    feature_time: bool = False,
    **energy_options: Any,
) -> Callable:
    r"""Wrap a sampler step so that it descends a reference energy late in sampling.

    The returned function has ``step_fn``'s signature and computes

    $$z_{next} = \mathrm{step}(z, t) - [t < t_{thr}]\; s\, m \odot \nabla_z G(z),
    \qquad G(z) = E(\phi(z), r) + \tfrac{\lambda}{2}\|z - z_{pivot}\|^2,$$

    with $E$ = `feature_energy`, $\phi$ = ``feature_fn``, $r$ = ``reference`` (under
    `jax.lax.stop_gradient`), $s$ = ``scale`` and $m$ = ``mask``. Where $m = 0$ the
    result is exactly the unguided step's (a ``where``, so even a non-finite gradient
    cannot leak there). For a DDIM-type step this is the paper's "add $\nabla E$ to
    the noise prediction" up to the step's factor on $\epsilon$, folded into $s$.
    When ``t`` is not batched the gradient is skipped (``lax.cond``) at
    $t \ge t_{thr}$, so an unguided step costs what ``step_fn`` costs; a guided one
    adds one forward and one backward pass of ``feature_fn``.

    Args:
        step_fn (Callable): the sampler's pure step ``step_fn(z, t, *extra) -> z_next``
            (``extra``: e.g. a PRNG key for an ancestral sampler), ``z_next`` of the
            shape and dtype of ``z``.
        feature_fn (Callable): ``feature_fn(z) -> features``, differentiable, features
            of shape ``(n_points, channels)`` (or ``(..., channels)``).
        reference (jax.Array): the reference features.
        scale (float): the guidance step $s \ge 0$.
        t_threshold (float): guidance acts for ``t < t_threshold`` (in ``step_fn``'s
            time units; the paper guides the last 60% of the steps, $t \le 0.6T$).
        mask (jax.Array | None): latent-space weights, broadcastable to ``z``; ``None``
            guides every entry.
        pivot (jax.Array | None): the anchor $z_{pivot}$; ``None`` drops the term.
        lam (float): the pivot weight $\lambda \ge 0$.
        feature_time (bool): call ``feature_fn(z, t)`` instead of ``feature_fn(z)``
            (DIFT-style features of the denoiser at the current time).
        **energy_options (Any): keywords of `feature_energy` (``kind``, ``matcher``, ``p``,
            ``alpha``, ``mask_gen``, ``mask_ref``).

    Returns:
        Callable: ``guided(z, t, *extra) -> z_next``, pure (``jit``/``vmap``-able).

    Raises:
        TypeError: a non-callable ``step_fn``/``feature_fn``, an unknown energy option,
            integer or complex ``reference``/``pivot``/``mask``; at call time a non-float
            ``z``.
        ValueError: negative or non-finite ``scale`` or ``lam``, NaN ``t_threshold``,
            an all-zero ``mask``, NaN/inf in ``reference`` or ``pivot``, a ``reference`` that is not
            ``(n_ref, channels)``, a bad energy option or ``mask_ref``; at call time a
            ``mask`` that does not broadcast to ``z``, a ``step_fn`` output not shaped
            like ``z``.
    """
    if not callable(step_fn):
        raise TypeError(f"step_fn must be callable, got {type(step_fn).__name__}")
    _check_common(feature_fn, reference, pivot, lam, energy_options)
    if not isinstance(feature_time, bool):
        raise TypeError(f"feature_time must be a bool, got {type(feature_time).__name__}")
    if is_concrete(scale):
        sv = np.asarray(scale)
        if not (np.isrealobj(sv) and np.all(np.isfinite(sv)) and np.all(sv >= 0)):
            raise ValueError(f"scale must be non-negative and finite, got {scale}")
    if is_concrete(t_threshold) and np.any(np.isnan(np.asarray(t_threshold))):
        raise ValueError("t_threshold is NaN")
    check_weights("mask", mask)
    reference = jnp.asarray(reference)

    def guided(z, t, *extra):
        phi = (lambda z: feature_fn(z, t)) if feature_time else feature_fn

        def energy(z):
            return guidance_energy(z, phi, reference, pivot=pivot, lam=lam, **energy_options)

        check_latent("z", z)
        z_next = step_fn(z, t, *extra)
        dt = jnp.result_type(z_next)
        if jnp.shape(z_next) != jnp.shape(z):
            raise ValueError(
                f"step_fn must return z_next of z's shape {jnp.shape(z)}, got {jnp.shape(z_next)}"
            )
        if mask is not None:
            try:
                fits = np.broadcast_shapes(np.shape(mask), z.shape) == z.shape
            except ValueError:
                fits = False
            if not fits:
                raise ValueError(f"mask (shape {np.shape(mask)}) must broadcast to z {z.shape}")

        def push(z):
            g = jax.grad(energy)(z)
            m = 1 if mask is None else jnp.asarray(mask, dt)
            return (jnp.asarray(scale, dt) * m * g).astype(dt)

        delta = jax.lax.cond(
            jnp.asarray(t) < t_threshold, push, lambda z: jnp.zeros_like(z_next), z
        )
        out = z_next - delta
        if mask is not None:
            out = jnp.where(jnp.broadcast_to(jnp.asarray(mask) != 0, out.shape), out, z_next)
        return out

    return guided
