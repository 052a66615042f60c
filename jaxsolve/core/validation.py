"""Input checks run before tracing: clear errors that name the argument.

All checks are skipped for abstract values (tracers), so a solver called inside a
user's ``jit`` or ``vmap`` still works; there, bad numbers surface as a status.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "is_concrete",
    "check_floating",
    "check_not_half",
    "check_key",
    "float_dtype",
    "check_finite",
    "check_shape",
    "check_positive",
    "check_nonempty",
    "check_tol",
    "as_float_array",
]


def is_concrete(x) -> bool:
    """True when ``x`` (a pytree) holds no tracer, so its values can be inspected."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


def check_floating(name: str, x, *, real: bool = False) -> None:
    """Raise ``TypeError`` if a leaf of ``x`` is not a floating (or, unless ``real``,
    complex) array."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(x):
        dtype = jnp.result_type(leaf)
        if not jnp.issubdtype(dtype, jnp.inexact):
            where = f"{name}{jax.tree_util.keystr(path)}"
            raise TypeError(
                f"{where} must be a floating-point array, got dtype {dtype}; "
                f"convert it with jnp.asarray({name}, dtype=jnp.float32) (or float64)"
            )
        if real and jnp.issubdtype(dtype, jnp.complexfloating):
            where = f"{name}{jax.tree_util.keystr(path)}"
            raise TypeError(f"{where} must be real, got dtype {dtype}")


def check_not_half(name: str, x, why: str, fix: str | None = None) -> None:
    """Raise ``TypeError`` if a leaf of ``x`` is a 16-bit float (float16 or bfloat16).

    For methods whose kernels (LAPACK factorizations, FFTs, eigensolvers) run in float32
    and float64 only, or whose certificates need more than 16-bit precision: ``why`` says
    which, as a clause ("FlexQP's LAPACK factorizations run in float32 or float64 only");
    ``fix`` is the conversion to suggest (default ``name.astype(jnp.float32)``).
    """
    for path, leaf in jax.tree_util.tree_leaves_with_path(x):
        dtype = jnp.result_type(leaf)
        if dtype in (jnp.bfloat16, jnp.float16):
            where = f"{name}{jax.tree_util.keystr(path)}"
            fix = fix or f"{name}.astype(jnp.float32)"
            raise TypeError(f"{where} has dtype {dtype}: {why}; pass {fix}")


def float_dtype(dtype=None):
    """``dtype``, or for ``None`` JAX's default float: float64 when x64 is enabled, else
    float32 (a default of float64 would warn and truncate in every float32 session)."""
    return jax.dtypes.canonicalize_dtype(jnp.float64) if dtype is None else dtype


def check_key(name: str, key) -> None:
    """Raise ``TypeError`` unless ``key`` is one ``jax.random`` key: a typed key
    (``jax.random.key``) or a raw ``uint32`` pair (``jax.random.PRNGKey``). Tracers pass."""
    if isinstance(key, jax.core.Tracer):
        return
    if not isinstance(key, jax.Array):
        raise TypeError(
            f"{name} must be a jax.random key (jax.random.key(0)), got {type(key).__name__}"
        )
    raw = key.shape == (2,) and key.dtype == jnp.uint32  # jax.random.PRNGKey(0)
    if not (jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or raw):
        raise TypeError(
            f"{name} must be a jax.random key (jax.random.key(0)), got an array of shape "
            f"{key.shape} and dtype {key.dtype}"
        )


def check_finite(name: str, x) -> None:
    """Raise ``ValueError`` if a concrete leaf of ``x`` holds NaN (Inf is allowed: bounds)."""
    if not is_concrete(x):
        return
    for path, leaf in jax.tree_util.tree_leaves_with_path(x):
        if np.any(np.isnan(np.asarray(leaf))):
            raise ValueError(f"{name}{jax.tree_util.keystr(path)} contains NaN")


def check_shape(name: str, x, shape: tuple) -> None:
    """Raise ``ValueError`` unless ``x.shape`` matches ``shape`` (``None`` = any size)."""
    xs = tuple(np.shape(x))
    ok = len(xs) == len(shape) and all(s is None or s == t for s, t in zip(shape, xs, strict=False))
    if not ok:
        dims = ["*" if s is None else str(s) for s in shape]
        want = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {want}, got {xs}")


def check_int(name: str, value, minimum: int = 1) -> int:
    """Validate a static integer (a size, a step count) before any tracing: a Python or
    NumPy int (not a bool) of at least ``minimum``; returns it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def check_positive(name: str, value, *, allow_none: bool = False, strict: bool = True) -> None:
    """Raise ``ValueError`` if a concrete ``value`` is not (strictly) positive."""
    if value is None:
        if allow_none:
            return
        raise ValueError(f"{name} must be given")
    if not is_concrete(value):
        return
    arr = np.asarray(value)
    bad = np.any(arr <= 0) if strict else np.any(arr < 0)
    if bad or np.any(np.isnan(arr)):
        raise ValueError(f"{name} must be {'positive' if strict else 'non-negative'}, got {value}")


def check_tol(tol) -> None:
    """Raise ``ValueError`` for a concrete scalar ``tol`` that is NaN or negative
    (``None``, meaning the solver's default, and tracers pass): the one check of the
    driver's ``tol`` that one-call helpers building a solver from it run first."""
    if tol is None or not is_concrete(tol):
        return
    t = np.asarray(tol)
    if t.ndim == 0 and (np.isnan(t) or t < 0):
        raise ValueError(f"tol must be a non-negative number, got {tol!r}")


def check_nonempty(name: str, x) -> None:
    """Raise ``ValueError`` for an empty pytree or an array with a zero-size axis."""
    leaves = jax.tree.leaves(x)
    if not leaves:
        raise ValueError(f"{name} is empty")
    for path, leaf in jax.tree_util.tree_leaves_with_path(x):
        if 0 in np.shape(leaf):
            raise ValueError(
                f"{name}{jax.tree_util.keystr(path)} has an empty axis (shape {np.shape(leaf)})"
            )


def as_float_array(name: str, x, dtype=None):
    """``jnp.asarray`` that refuses integer/bool input instead of silently casting."""
    arr = jnp.asarray(x) if dtype is None else jnp.asarray(x, dtype=dtype)
    if dtype is None:
        check_floating(name, arr)
    return arr
