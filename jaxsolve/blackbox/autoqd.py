r"""AutoQD's learned behaviour descriptors: occupancy embeddings by random Fourier features,
calibrated weighted PCA, and the diversity metrics (Vendi score) used to judge them.

Hedayatian and Nikolaidis, "Automatic Discovery of Diverse Behaviors with
Quality-Diversity Optimization" (ICLR 2026, arXiv 2506.05634).

**Embedding.** Random Fourier features of a Gaussian kernel
$k(z, z') = \exp(-\|z - z'\|^2 / 2\sigma^2)$ (Rahimi and Recht 2007):
$\varphi(z) = \sqrt{2/D}\,\cos(\Omega z + c)$, $\Omega_{ij} \sim N(0, \sigma^{-2})$,
$c_i \sim U[0, 2\pi]$, so $E[\varphi(z)^\top\varphi(z')] = k(z, z')$. A policy's
occupancy measure is embedded from $n$ trajectories of state-action vectors
$z_t$ as

$$
\psi^\pi = \frac1n \sum_{j=1}^n (1 - \gamma) \sum_{t=0}^{T-1} \gamma^t \varphi(z^j_t),
$$

so that $\|\psi^{\pi_1} - \psi^{\pi_2}\|$ estimates the maximum mean discrepancy between
the occupancy measures (exactly so as $D$, $n$ grow, for trajectories long enough that
$\gamma^T$ is negligible: the discount weights sum to $1 - \gamma^T$).

**Descriptors (calibrated weighted PCA).** From embeddings $\psi_i$ with fitness
$f_i$: weights $w_i \propto (f_i - \min f) + \epsilon\,(\max f - \min f)$ (the better
policies count more; $\epsilon = 0.05$ keeps every policy in, and equal fitness gives
plain PCA), the weighted mean $\mu$ and covariance, its top-$k$ eigenvectors $V$, and
per axis an affine map sending the fit set's smallest and largest projections to
$-1$ and $1$. The descriptor is affine, $d(\psi) = A\psi + b$, clipped to
$[-1, 1]^k$ (new policies beyond the fit set's range land on the border, as measures
outside an archive's box do). These choices are ours where the paper's text was not
available; they keep the properties the paper states (affine, calibrated to
$[-1, 1]$, fitness-weighted).

**Vendi score** (Friedman and Dieng 2023): $\exp(-\sum_i \lambda_i \log \lambda_i)$ of
the eigenvalues of $K/n$, $K_{ij} = \exp(-\|x_i - x_j\|^2 / 2\sigma^2)$: the effective
number of distinct points, between 1 (all equal) and $n$ (all far apart). The
quality-weighted Vendi score multiplies it by the mean fitness.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_int, check_key, is_concrete

__all__ = [
    "RFF",
    "rff_embedding",
    "rff_features",
    "occupancy_embedding",
    "gaussian_mmd2",
    "Descriptor",
    "fit_descriptors",
    "vendi_score",
    "quality_vendi_score",
]


class RFF(NamedTuple):
    """Random Fourier features $\\varphi(z) = \\sqrt{2/D}\\cos(\\Omega z + c)$.

    Attributes:
        omega: the frequencies $\\Omega$ ``(D, dim_in)``, entries $N(0, \\sigma^{-2})$.
        phase: the phases $c$ ``(D,)``, uniform on $[0, 2\\pi]$.
    """

    omega: jax.Array
    phase: jax.Array


def rff_embedding(key, dim_in: int, D: int, bandwidth: float, dtype=jnp.float32) -> RFF:
    """Draw the features of the Gaussian kernel of width ``bandwidth`` ($\\sigma$)."""
    check_key("key", key)
    check_int("D", D)  # a float failed inside jax.random.normal's shape
    check_int("dim_in", dim_in)
    if D < 1 or dim_in < 1 or not bandwidth > 0:
        raise ValueError(
            f"need D >= 1, dim_in >= 1, bandwidth > 0 (got {D}, {dim_in}, {bandwidth})"
        )
    k1, k2 = jax.random.split(key)
    omega = jax.random.normal(k1, (D, dim_in), dtype) / bandwidth
    phase = jax.random.uniform(k2, (D,), dtype, 0, 2 * jnp.pi)
    return RFF(omega, phase)


def rff_features(features: RFF, z) -> jax.Array:
    """$\\varphi(z)$ for ``z`` ``(..., dim_in)``: ``(..., D)``."""
    D = features.phase.shape[0]
    if jnp.shape(z)[-1:] != features.omega.shape[1:]:  # it failed inside the product
        raise ValueError(
            f"z must have shape (..., dim_in = {features.omega.shape[1]}), got {jnp.shape(z)}"
        )
    return jnp.sqrt(2.0 / D) * jnp.cos(z @ features.omega.T + features.phase)


def occupancy_embedding(features: RFF, trajectories, gamma: float, mask=None) -> jax.Array:
    """$\\psi^\\pi$ from ``trajectories`` ``(n_traj, T, dim_in)`` (see the module docstring).

    ``mask`` ``(n_traj, T)`` (1 = the step happened) handles trajectories that end
    early; their later steps count nothing.
    """
    traj = jnp.asarray(trajectories)
    if traj.ndim != 3:
        raise ValueError(f"trajectories must be (n_traj, T, dim_in), got shape {traj.shape}")
    if not 0 <= gamma < 1:
        raise ValueError(f"gamma must be in [0, 1), got {gamma!r}")
    T = traj.shape[1]
    if mask is not None and jnp.shape(mask) != traj.shape[:2]:
        raise ValueError(
            f"mask must have shape {traj.shape[:2]} (n_traj, T), got {jnp.shape(mask)}"
        )
    disc = (1 - gamma) * gamma ** jnp.arange(T, dtype=traj.dtype)
    w = disc[None, :] if mask is None else disc[None, :] * jnp.asarray(mask, traj.dtype)
    phi = rff_features(features, traj)  # (n, T, D)
    return jnp.mean(jnp.einsum("nt,ntd->nd", w, phi), axis=0)


def gaussian_mmd2(mean1, cov1, mean2, cov2, bandwidth: float):
    """Closed-form squared MMD between $N(m_1, S_1)$ and $N(m_2, S_2)$ under the Gaussian
    kernel of width $\\sigma$: $E k(X, X') + E k(Y, Y') - 2 E k(X, Y)$, with
    $E k(X, Y) = \\det(I + (S_1 + S_2)/\\sigma^2)^{-1/2}
    \\exp(-\\frac12 \\Delta^\\top(\\sigma^2 I + S_1 + S_2)^{-1}\\Delta)$."""
    m1, m2 = jnp.asarray(mean1), jnp.asarray(mean2)
    S1, S2 = jnp.asarray(cov1), jnp.asarray(cov2)
    s2 = bandwidth**2
    eye = jnp.eye(m1.shape[0], dtype=m1.dtype)

    def ek(d, S):
        return jnp.linalg.det(eye + S / s2) ** -0.5 * jnp.exp(
            -0.5 * d @ jnp.linalg.solve(s2 * eye + S, d)
        )

    zero = jnp.zeros_like(m1)
    return ek(zero, 2 * S1) + ek(zero, 2 * S2) - 2 * ek(m1 - m2, S1 + S2)


class Descriptor(NamedTuple):
    """The affine descriptor map ``d(psi) = clip(A psi + b, -1, 1)``.

    Attributes:
        A: the linear part ``(k, D)`` (scaled principal axes).
        b: the offset ``(k,)``.
    """

    A: jax.Array
    b: jax.Array

    def __call__(self, psi):
        return jnp.clip(jnp.asarray(psi) @ self.A.T + self.b, -1.0, 1.0)


def fit_descriptors(embeddings, fitness, k: int, *, floor: float = 0.05, mask=None) -> Descriptor:
    """Calibrated fitness-weighted PCA of ``embeddings`` ``(n, D)`` to ``k`` descriptors.

    ``mask`` ``(n,)`` (optional; True = use the row) fits on a subset of fixed-size
    arrays under ``jit``, e.g. an archive's occupied cells. Rows with a non-finite
    embedding are left out as well; non-finite fitness counts as the worst.
    """
    P = jnp.asarray(embeddings)
    f = jnp.asarray(fitness, P.dtype)
    if P.ndim != 2 or f.shape != (P.shape[0],):
        raise ValueError(f"embeddings (n, D) and fitness (n,) expected, got {P.shape}, {f.shape}")
    check_int("k", k)  # a float failed inside a slice
    if not (np.isfinite(floor) and floor >= 0):  # a negative floor gave NaN descriptors
        raise ValueError(f"floor must be non-negative and finite, got {floor!r}")
    if not 1 <= k <= P.shape[1]:
        raise ValueError(f"k must be in [1, D = {P.shape[1]}], got {k}")
    m = jnp.ones(f.shape, bool) if mask is None else jnp.asarray(mask, bool)
    if m.shape != f.shape:
        raise ValueError(f"mask must have shape {f.shape}, got {m.shape}")
    if is_concrete(f) and is_concrete(m) and not np.any(np.isfinite(np.asarray(f)[np.asarray(m)])):
        raise ValueError("fitness has no finite value (non-finite entries count as the worst)")
    if (
        is_concrete(P)
        and is_concrete(m)
        and not np.any(np.asarray(m) & np.all(np.isfinite(np.asarray(P)), axis=1))
    ):  # every row left out: the descriptors were arbitrary axes, silently
        raise ValueError("embeddings has no (unmasked) row that is finite")
    m = m & jnp.all(jnp.isfinite(P), axis=1)
    P = jnp.where(m[:, None], P, 0)
    ok = m & jnp.isfinite(f)
    fmin = jnp.min(jnp.where(ok, f, jnp.inf))
    fmax = jnp.max(jnp.where(ok, f, -jnp.inf))
    fmin, fmax = jnp.where(jnp.any(ok), fmin, 0), jnp.where(jnp.any(ok), fmax, 0)
    f = jnp.where(ok, f, fmin)
    spread = fmax - fmin
    w = jnp.where(m, (f - fmin) + floor * jnp.where(spread > 0, spread, 1.0), 0)
    w = w / jnp.maximum(jnp.sum(w), jnp.finfo(P.dtype).tiny)
    mu = w @ P
    X = P - mu
    cov = (X * w[:, None]).T @ X
    vals, vecs = jnp.linalg.eigh(cov)
    V = vecs[:, ::-1][:, :k]  # (D, k), largest variance first
    proj = X @ V
    lo = jnp.min(jnp.where(m[:, None], proj, jnp.inf), 0)
    hi = jnp.max(jnp.where(m[:, None], proj, -jnp.inf), 0)
    lo, hi = jnp.where(hi > lo, lo, 0), jnp.where(hi > lo, hi, 0)
    scale = 2 / jnp.where(hi > lo, hi - lo, 1.0)
    A = (V * scale).T
    b = -1 - lo * scale - (mu @ V) * scale
    return Descriptor(A, b)


def vendi_score(X, bandwidth: float) -> jax.Array:
    """The Vendi score of the rows of ``X`` under the Gaussian kernel of width ``bandwidth``."""
    X = jnp.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X must be a non-empty (n, d) matrix of points, got shape {X.shape}")
    if is_concrete(X) and not np.all(np.isfinite(np.asarray(X))):  # the score was 1, silently
        raise ValueError("X contains NaN or inf")
    if is_concrete(bandwidth) and not float(bandwidth) > 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth}")
    d2 = jnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = jnp.exp(-d2 / (2 * bandwidth**2)) / X.shape[0]
    lam = jnp.clip(jnp.linalg.eigvalsh(K), 0, None)
    ent = -jnp.sum(jnp.where(lam > 0, lam * jnp.log(jnp.where(lam > 0, lam, 1)), 0))
    # a NaN eigenvalue fails `lam > 0` and dropped out: traced non-finite X gives NaN, not 1
    return jnp.where(jnp.all(jnp.isfinite(X)), jnp.exp(ent), jnp.nan)


def quality_vendi_score(X, fitness, bandwidth: float) -> jax.Array:
    """Vendi score times the mean fitness (the quality-weighted Vendi score)."""
    if jnp.shape(fitness) != jnp.shape(X)[:1]:  # a mismatch averaged other points' fitness
        raise ValueError(
            f"fitness must have shape {jnp.shape(X)[:1]} (one per row of X), got {jnp.shape(fitness)}"
        )
    return vendi_score(X, bandwidth) * jnp.mean(jnp.asarray(fitness))
