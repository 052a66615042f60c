"""Reference problems for the Riemannian solvers (tests and ``bench/riemannian.py``):
Rayleigh quotient and Brockett cost."""

import jax.numpy as jnp
import numpy as np


def rayleigh(x, a):
    """``x^T A x`` on the sphere: minimum = smallest eigenvalue of A."""
    return x @ (a @ x)


def brockett(x, args):
    """``tr(X^T A X N)`` on Stiefel, ``N = diag(p, ..., 1)``: minimum = sum_i (p-i+1) lambda_i."""
    a, nvec = args
    return jnp.sum((x.T @ (a @ x)) * jnp.diag(nvec))


def goe(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    return (a + a.T) / np.sqrt(2 * n)


def planted(n, seed=0, gap=0.5):
    """Symmetric matrix with spectrum {-1, -1 + gap, ...} spread in [-1 + gap, 1] (well conditioned)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.concatenate([[-1.0], np.linspace(-1.0 + gap, 1.0, n - 1)])
    return (q * lam) @ q.T


def brockett_value(a, p):
    lam = np.linalg.eigvalsh(a)[:p]
    return float(np.sum(np.arange(p, 0, -1) * lam))


def planted_brockett(n, p, seed=0):
    """Spectrum with p well separated smallest eigenvalues -1, -1 + 0.2, ... and the rest in [0, 1]."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    lam = np.concatenate([-1.0 + 0.2 * np.arange(p), np.linspace(0.0, 1.0, n - p)])
    return (q * lam) @ q.T
