"""Matrix sensing problems: Gaussian measurements of a low-rank PSD matrix (the setting of arXiv 2510.01175)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsolve.core.validation import check_positive
from jaxsolve.manifolds.base import sym
from jaxsolve.manifolds.stiefel import qr_factor

__all__ = [
    "GaussianMeasurements",
    "GramMeasurements",
    "make_problem",
    "measure",
    "sensing_loss",
    "adjoint_residual",
    "relative_error",
]


class GaussianMeasurements(NamedTuple):
    """``y_i = <M_i, A> / sqrt(n)``, ``i = 1..n``, with i.i.d. ``N(0, 1)`` matrices ``M_i``.

    ``matrices`` has shape ``(n, m, m)``: memory ``n m^2``.
    """

    matrices: jax.Array
    y: jax.Array


class GramMeasurements(NamedTuple):
    """The same measurements kept as sufficient statistics of the quadratic loss.

    ``gram = (1/n) sum_i vec(M_i) vec(M_i)^T`` (``m^2 x m^2``), ``adj_y = M^*(y) =
    sum_i y_i M_i / sqrt(n)`` and ``yy = ||y||^2``, so that
    ``||M(Z) - y||^2 = vec(Z)^T gram vec(Z) - 2 <adj_y, Z> + yy`` exactly. Memory ``m^4``
    whatever the number of measurements ``n`` (the memory-light variant for ``n >> m^2``,
    the paper's sample regime); built chunk by chunk without ever holding all ``M_i``.
    """

    gram: jax.Array
    adj_y: jax.Array
    yy: jax.Array


def _chunk(key, c, chunk, m, dtype):
    return jax.random.normal(jax.random.fold_in(key, c), (chunk, m, m), dtype)


def make_problem(
    key,
    m: int = 10,
    rank: int = 3,
    n_measurements: int = 6000,
    cond: float = 50.0,
    *,
    form: str = "dense",
    chunk: int = 500,
    dtype=None,
):
    r"""A random PSD ground truth ``A = U diag(s) U^T`` and its Gaussian measurements.

    ``U`` is a random ``m x rank`` orthonormal frame and ``s`` is geometric from 1 down to
    ``1 / cond`` (condition number ``cond``), as in the paper's experiments (Wei, Zhang, Li,
    He, "On the benefits of weight normalization for overparameterized matrix sensing",
    ICLR 2026, section 5: ``m = 10``, true rank 3, ``kappa in {50, 75, 100}``).
    ``form="dense"`` returns `GaussianMeasurements`; ``form="gram"`` the
    memory-light `GramMeasurements` of the *same* measurements (same key).

    Returns ``(measurements, A)``.
    """
    for name, v in (("m", m), ("rank", rank), ("n_measurements", n_measurements), ("chunk", chunk)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if rank > m:
        raise ValueError(f"rank must be <= m, got rank={rank}, m={m}")
    check_positive("cond", cond)
    if cond < 1:
        raise ValueError(f"cond must be >= 1, got {cond}")
    if form not in ("dense", "gram"):
        raise ValueError(f"form must be 'dense' or 'gram', got {form!r}")
    if n_measurements % chunk:
        raise ValueError(f"n_measurements ({n_measurements}) must be a multiple of chunk ({chunk})")
    dtype = jnp.result_type(float) if dtype is None else jnp.dtype(dtype)
    k_u, k_m = jax.random.split(key)
    u = qr_factor(jax.random.normal(k_u, (m, rank), dtype))
    s = jnp.asarray(cond, dtype) ** (-jnp.arange(rank, dtype=dtype) / max(rank - 1, 1))
    a = (u * s) @ u.T
    nchunks = n_measurements // chunk
    scale = 1.0 / jnp.sqrt(jnp.asarray(n_measurements, dtype))
    if form == "dense":
        mats = jnp.concatenate([_chunk(k_m, c, chunk, m, dtype) for c in range(nchunks)])
        y = jnp.einsum("nij,ij->n", mats, a) * scale
        return GaussianMeasurements(mats, y), a

    def body(carry, c):
        gram, adj, yy = carry
        mats = _chunk(k_m, c, chunk, m, dtype).reshape(chunk, m * m)
        y = (mats @ a.reshape(-1)) * scale
        return (gram + mats.T @ mats, adj + mats.T @ y * scale, yy + y @ y), None

    zero = (jnp.zeros((m * m, m * m), dtype), jnp.zeros((m * m,), dtype), jnp.zeros((), dtype))
    (gram, adj, yy), _ = jax.lax.scan(body, zero, jnp.arange(nchunks))
    return GramMeasurements(gram / n_measurements, adj.reshape(m, m), yy), a


def measure(z, meas):
    """``M(Z) = (<M_i, Z> / sqrt(n))_i`` (dense measurements only)."""
    if not isinstance(meas, GaussianMeasurements):
        raise TypeError("measure needs GaussianMeasurements (the Gram form keeps no M_i)")
    n = meas.matrices.shape[0]
    return jnp.einsum("nij,ij->n", meas.matrices, z) / jnp.sqrt(jnp.asarray(n, z.dtype))


def sensing_loss(z, meas):
    """``1/4 ||M(Z) - y||^2``."""
    if isinstance(meas, GramMeasurements):
        v = z.reshape(-1)
        val = v @ (meas.gram @ v) - 2 * jnp.sum(meas.adj_y * z) + meas.yy
        return 0.25 * jnp.maximum(val, 0.0)
    r = measure(z, meas) - meas.y
    return 0.25 * r @ r


def adjoint_residual(z, meas):
    """``sym(M^*(M(Z) - y))``: twice the gradient of the loss with respect to a symmetric ``Z``."""
    if isinstance(meas, GramMeasurements):
        m = z.shape[0]
        s = (meas.gram @ z.reshape(-1)).reshape(m, m) - meas.adj_y
        return sym(s)
    n = meas.matrices.shape[0]
    r = measure(z, meas) - meas.y
    return sym(jnp.einsum("n,nij->ij", r, meas.matrices) / jnp.sqrt(jnp.asarray(n, z.dtype)))


def check_measurements(meas, m: int, name: str = "args") -> None:
    """Raise ``ValueError`` unless ``meas`` are measurements of ``m x m`` matrices."""
    if isinstance(meas, GramMeasurements):
        if meas.gram.shape != (m * m, m * m) or meas.adj_y.shape != (m, m):
            raise ValueError(
                f"{name}: GramMeasurements of {m}x{m} matrices need gram {(m * m, m * m)} and "
                f"adj_y {(m, m)}, got {meas.gram.shape} and {meas.adj_y.shape}"
            )
    elif isinstance(meas, GaussianMeasurements):
        if meas.matrices.ndim != 3 or meas.matrices.shape[1:] != (m, m):
            raise ValueError(
                f"{name}: matrices must have shape (n, {m}, {m}), got {meas.matrices.shape}"
            )
        if meas.y.shape != meas.matrices.shape[:1]:
            raise ValueError(
                f"{name}: y must have shape {meas.matrices.shape[:1]}, got {meas.y.shape}"
            )
    else:
        raise TypeError(
            f"{name} must be GaussianMeasurements or GramMeasurements, got {type(meas).__name__}"
        )


def relative_error(z, a):
    """``||Z - A||_F / ||A||_F``."""
    return jnp.linalg.norm(z - a) / jnp.linalg.norm(a)
