r"""Feature-matching energies between a generated and a reference feature set.

A feature set is an array of shape ``(n_points, channels)`` (a spatial feature map of
shape ``(h, w, channels)`` is flattened over its leading axes). The reference is
wrapped in `jax.lax.stop_gradient`, so guidance never moves it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_floating, is_concrete

__all__ = ["feature_energy", "nearest_match", "cosine_similarity"]

KINDS = ("dragon", "cosine", "l2")
MATCHERS = ("nearest", "reverse", "identity")


def _normalize(f: jax.Array) -> jax.Array:
    # x / ||x||, and 0 (with a zero gradient) below a floor: a zero feature vector has
    # no direction (x * rsqrt(max(|x|^2, tiny)) gave it a gradient of 1/sqrt(tiny), 1e12)
    sq = jnp.sum(f * f, axis=-1, keepdims=True)
    tiny = jnp.asarray(1e-24 if f.dtype == jnp.float64 else 1e-20, f.dtype)
    ok = sq > tiny
    return jnp.where(ok, f * jax.lax.rsqrt(jnp.where(ok, sq, 1)), 0)


def _as_points(name: str, f) -> jax.Array:
    arr = jnp.asarray(f)
    check_floating(name, arr)
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have shape (n_points, channels) (or (..., channels), flattened), "
            f"got shape {arr.shape}"
        )
    if 0 in arr.shape:
        raise ValueError(f"{name} has an empty axis (shape {arr.shape})")
    return arr.reshape(-1, arr.shape[-1])


def _check_finite(name: str, f) -> None:
    """NaN or inf in a concrete feature set (tracers pass: inside grad/jit, a NaN energy)."""
    if is_concrete(f) and not np.all(np.isfinite(np.asarray(f, np.float64))):
        raise ValueError(f"{name} contains NaN or inf")


def _as_mask(name: str, mask, feature_name: str, features_shape: tuple, n: int, dtype):
    if mask is None:
        return jnp.ones((n,), dtype)
    m = jnp.asarray(mask)
    if not (jnp.issubdtype(m.dtype, jnp.floating) or jnp.issubdtype(m.dtype, jnp.integer)):
        if m.dtype != jnp.bool_:
            raise TypeError(f"{name} must hold real weights (or booleans), got dtype {m.dtype}")
    lead = tuple(features_shape[:-1])
    if tuple(m.shape) not in (lead, (n,)):
        also = "" if lead == (n,) else f" (or ({n},))"
        raise ValueError(
            f"{name} must have the leading shape of {feature_name}, {lead}{also}, "
            f"got shape {tuple(m.shape)}"
        )
    m = m.reshape(n).astype(dtype)
    if is_concrete(m):
        v = np.asarray(m, np.float64)
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise ValueError(f"{name} must hold non-negative weights (or booleans)")
        if not np.any(v > 0):
            raise ValueError(f"{name} is empty (no point has a positive weight)")
    return m


def cosine_similarity(features_gen, features_ref) -> jax.Array:
    """All pairwise cosine similarities, shape ``(n_gen, n_ref)``.

    Args:
        features_gen (jax.Array): generated features, shape ``(n_gen, channels)``.
        features_ref (jax.Array): reference features, shape ``(n_ref, channels)``.
            Both real floating point with the same channels (checked; leading axes
            are flattened).

    Returns:
        jax.Array: the matrix $C_{ij} = \\langle f_i, r_j \\rangle / (\\|f_i\\| \\|r_j\\|)$.
    """
    fg = _as_points("features_gen", features_gen)
    fr = _as_points("features_ref", features_ref)
    _check_channels(fg, fr)
    return _normalize(fg) @ _normalize(fr).T


def nearest_match(features_gen, features_ref, *, mask_ref=None) -> jax.Array:
    r"""For each generated point, the index of its most cosine-similar reference point.

    The DIFT correspondence: $j(i) = \arg\max_{j \in M_{ref}} \cos(f_i, r_j)$. The
    indices are integers, so no gradient passes through the choice itself.

    Args:
        features_gen (jax.Array): generated features, shape ``(n_gen, channels)``
            (leading axes flattened).
        features_ref (jax.Array): reference features, shape ``(n_ref, channels)``.
        mask_ref (jax.Array | None): reference points that may be matched, shape
            ``(n_ref,)`` (booleans or non-negative weights; a zero excludes a point).

    Returns:
        jax.Array: int32 indices into the reference points, shape ``(n_gen,)``.
    """
    fg = _as_points("features_gen", features_gen)
    fr = _as_points("features_ref", features_ref)
    _check_channels(fg, fr)
    _check_finite("features_gen", fg)
    _check_finite("features_ref", fr)
    mr = _as_mask(
        "mask_ref", mask_ref, "features_ref", jnp.shape(features_ref), fr.shape[0], fr.dtype
    )
    return _match(fg, jax.lax.stop_gradient(fr), mr)


def _check_channels(fg, fr):
    if fg.shape[-1] != fr.shape[-1]:
        raise ValueError(
            f"features_gen and features_ref must have the same number of channels, "
            f"got {fg.shape[-1]} and {fr.shape[-1]}"
        )


def _match(fg, fr, mr):
    sim = _normalize(jax.lax.stop_gradient(fg)) @ _normalize(fr).T
    sim = jnp.where(mr[None, :] > 0, sim, -jnp.inf)
    return jnp.argmax(sim, axis=1).astype(jnp.int32)


def feature_energy(
    features_gen,
    features_ref,
    *,
    mask_gen=None,
    mask_ref=None,
    matcher: str = "nearest",
    kind: str = "dragon",
    p: float = 1.0,
    alpha: float = 1.0,
) -> jax.Array:
    r"""The energy of a generated feature set against a reference one (differentiable).

    Each generated point $i$ is matched to a reference point $j(i)$ (``"nearest"``:
    the most cosine-similar one inside ``mask_ref``, DIFT-style; ``"identity"``:
    $j(i) = i$). With weights $w_i$ (``mask_gen``, times ``mask_ref[i]`` for the
    identity matcher) and $\bar w = \sum_i w_i$, the formulas below hold;
    ``"reverse"`` swaps the roles: each reference point $j$ inside ``mask_ref`` picks
    its most similar generated point inside ``mask_gen`` and is weighted by
    ``mask_ref[j]`` (the direction of OmniPortrait's $p_{gen} = \arg\min$; a
    generated point may then be matched several times, or never).

    * $S = \sum_i w_i \cos(f_i, r_{j(i)}) / \bar w$, the masked mean cosine similarity;
    * ``"dragon"``: $E = p / (\alpha + S)$ (DragonDiffusion's energy family; the
      portrait guidance of OmniPortrait uses $\alpha = 1$, $p = 8.5$);
    * ``"cosine"``: $E = p\,(1 - S)$;
    * ``"l2"``: $E = p \sum_i w_i \|f_i - r_{j(i)}\|^2 / \bar w$.

    The reference is wrapped in `jax.lax.stop_gradient`: the gradient with respect to
    ``features_ref`` is zero. With $\alpha \le 1$ the dragon energy is unbounded as
    $S \to -\alpha$ (anti-aligned features); take $\alpha > 1$ to keep it finite.

    Args:
        features_gen (jax.Array): generated features, shape ``(n_gen, channels)`` (or
            ``(..., channels)``, flattened over the leading axes).
        features_ref (jax.Array): reference features, shape ``(n_ref, channels)`` (or
            ``(..., channels)``); no NaN or inf (checked when concrete, as for
            ``features_gen``).
        mask_gen (jax.Array | None): weights of the generated points (booleans or
            non-negative), shape ``(n_gen,)`` or the leading shape of ``features_gen``.
        mask_ref (jax.Array | None): reference points that may be matched, shape
            ``(n_ref,)`` or the leading shape of ``features_ref``.
        matcher (str): ``"nearest"``, ``"reverse"`` or ``"identity"`` (needs
            ``n_gen == n_ref``).
        kind (str): ``"dragon"``, ``"cosine"`` or ``"l2"``.
        p (float): the energy's scale, positive.
        alpha (float): the offset of the dragon energy's denominator, positive.

    Returns:
        jax.Array: the energy, a real scalar.

    Raises:
        ValueError: shapes that do not match, an empty mask, a negative or non-finite
            mask weight, NaN or inf in concrete features, an unknown ``kind`` or
            ``matcher``, a ``p`` or ``alpha`` that is not a positive finite scalar.
        TypeError: integer or complex features, a complex mask.
    """
    check_options(matcher=matcher, kind=kind, p=p, alpha=alpha)
    fg = _as_points("features_gen", features_gen)
    fr = _as_points("features_ref", features_ref)
    _check_channels(fg, fr)
    _check_finite("features_ref", fr)
    _check_finite("features_gen", fg)
    dtype = jnp.result_type(fg, fr)
    fg, fr = fg.astype(dtype), jax.lax.stop_gradient(fr.astype(dtype))
    n, m = fg.shape[0], fr.shape[0]
    wg = _as_mask("mask_gen", mask_gen, "features_gen", jnp.shape(features_gen), n, dtype)
    wr = _as_mask("mask_ref", mask_ref, "features_ref", jnp.shape(features_ref), m, dtype)
    if matcher == "identity":
        if n != m:
            raise ValueError(
                f'matcher="identity" needs as many points in features_gen as in features_ref, '
                f"got {n} and {m}"
            )
        matched, w = fr, wg * wr
        if is_concrete(w) and not np.any(np.asarray(w) > 0):
            raise ValueError("mask_gen and mask_ref do not overlap (no point has a weight)")
    elif matcher == "reverse":  # each reference point picks its generated point
        fg, matched, w = fg[_match(fr, fg, wg)], fr, wr
    else:
        matched, w = fr[_match(fg, fr, wr)], wg
    wsum = jnp.maximum(jnp.sum(w), jnp.finfo(dtype).tiny)
    p = jnp.asarray(p, dtype)
    if kind == "l2":
        return p * jnp.sum(w * jnp.sum((fg - matched) ** 2, axis=-1)) / wsum
    s = jnp.sum(w * jnp.sum(_normalize(fg) * _normalize(matched), axis=-1)) / wsum
    if kind == "cosine":
        return p * (1 - s)
    return p / (jnp.asarray(alpha, dtype) + s)


def check_options(*, matcher, kind, p, alpha) -> None:
    """Raise ValueError on an unknown ``matcher``/``kind`` or a ``p``/``alpha`` that is not a
    positive finite scalar."""
    if matcher not in MATCHERS:
        raise ValueError(f"matcher must be one of {MATCHERS}, got {matcher!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    for name, value in (("p", p), ("alpha", alpha)):
        if jnp.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {jnp.shape(value)}")
        if is_concrete(value):
            v = np.asarray(value)
            if not (np.isrealobj(v) and np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be positive and finite, got {value}")
