"""Taylor-slope checks of gradients and Hessians (Manopt's ``checkgradient``/``checkhessian``)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.manifolds.base import Manifold, tree_scale, tree_sub

__all__ = ["TaylorCheck", "check_gradient", "check_hessian", "hessian_spectrum"]


class TaylorCheck(NamedTuple):
    """Result of a Taylor-slope check.

    Attributes:
        slope: log-log slope of the Taylor residual over the asymptotic window (2 for a
            correct gradient, 3 for a correct Hessian); NaN when the residual is at
            round-off level everywhere (``exact``).
        exact: True when the model is exact to round-off (e.g. a quadratic cost on a flat
            manifold): then there is no slope to measure and the model is correct.
        ts, errors: step sizes and residuals (for a log-log plot).
        symmetry: ``|<u, Hess[v]> - <Hess[u], v>|`` (Hessian check only).
        tangency: ``||Hess[v] - proj(Hess[v])||`` (Hessian check only).
    """

    slope: float
    exact: bool
    ts: np.ndarray
    errors: np.ndarray
    symmetry: float = 0.0
    tangency: float = 0.0


def _fit_slope(ts, errs, floor):
    """Slope of ``log err`` vs ``log t`` over the two decades above the round-off floor."""
    ok = np.isfinite(errs) & (errs > 1e3 * floor)
    if ok.sum() < 4:
        return float("nan"), True
    t0 = ts[ok][0]
    win = ok & (ts <= 100.0 * t0)
    if win.sum() < 4:
        win = ok
    slope = np.polyfit(np.log10(ts[win]), np.log10(errs[win]), 1)[0]
    return float(slope), False


def _flat_shapes(want):
    """The leaf shapes of a (possibly nested) `Manifold.point_shape`, in order."""
    if isinstance(want, tuple) and all(isinstance(i, int) for i in want):
        return [want]
    return [s for w in want for s in _flat_shapes(w)]


def _check_shape(name, manifold, x):
    """Name a point whose shapes differ from the manifold's (it would otherwise fail
    with a NumPy broadcasting error deep inside the Taylor fit)."""
    try:
        want = manifold.point_shape
    except NotImplementedError:
        return
    got = [tuple(jnp.shape(v)) for v in jax.tree.leaves(x)]
    if got != _flat_shapes(want):
        raise ValueError(f"{name} must have shape {want} for {manifold!r}, got {got}")


def _setup(cost, manifold, x, args, direction, key):
    """The cost as ``f(x)`` and the unit tangent direction of the check (projected if
    given, else random from ``key``)."""
    if not isinstance(manifold, Manifold):
        raise TypeError(f"manifold must be a jaxsolve.manifolds.Manifold, got {manifold!r}")
    _check_shape("x", manifold, x)
    if direction is None:
        key = jax.random.key(0) if key is None else key
        direction = manifold.random_tangent(key, x)
    else:
        direction = manifold.proj(x, direction)
    f = lambda z: cost(z, args)
    return f, direction


def _ts(x):
    """The step sizes of the Taylor checks: a log grid from 1e-8 (1e-4 below float64) to 1."""
    dtype = jax.tree.leaves(x)[0].dtype
    lo = -8 if jnp.finfo(dtype).bits >= 64 else -4
    return np.logspace(lo, 0, 17 * (0 - lo) // 2 + 1)


def check_gradient(cost, manifold, x, args=None, *, direction=None, key=None) -> TaylorCheck:
    r"""Check the Riemannian gradient of ``cost(x, args)`` by the slope of a Taylor residual.

    ``E(t) = |f(R_x(t v)) - f(x) - t <grad f(x), v>_x|`` is ``O(t^2)`` exactly when the
    gradient is right (Manopt ``checkgradient``; Boumal 2023, section 4.8), so the
    returned ``slope`` must be about 2. The gradient is the manifold's
    ``egrad_to_rgrad`` of the JAX autodiff Euclidean gradient.
    """
    f, v = _setup(cost, manifold, x, args, direction, key)
    fx, egrad = jax.value_and_grad(f)(x)
    g = manifold.egrad_to_rgrad(x, egrad)
    slope0 = manifold.inner(x, g, v)
    ts = _ts(x)

    @jax.jit
    def resid(t):
        return jnp.abs(f(manifold.retract(x, tree_scale(t, v))) - fx - t * slope0)

    errs = np.asarray(jax.vmap(resid)(jnp.asarray(ts, jnp.result_type(fx))), np.float64)
    floor = float(jnp.finfo(jnp.result_type(fx)).eps) * max(1.0, abs(float(fx)))
    slope, exact = _fit_slope(ts, errs, floor)
    return TaylorCheck(slope, exact, ts, errs)


def _rhess(f, manifold, x, egrad, u):
    """``Hess f(x)[u]`` from the Euclidean gradient ``egrad`` and ``jvp(grad f)``."""
    ehess_u = jax.jvp(jax.grad(f), (x,), (u,))[1]
    return manifold.ehess_to_rhess(x, egrad, ehess_u, u)


def check_hessian(cost, manifold, x, args=None, *, direction=None, key=None) -> TaylorCheck:
    r"""Check the Riemannian Hessian of ``cost(x, args)`` by a Taylor slope and symmetry.

    ``E(t) = |f(R_x(t v)) - f(x) - t <g, v> - t^2/2 <Hess f(x)[v], v>|`` is ``O(t^3)``
    when the Hessian is right and the retraction is second order (or ``x`` is a
    critical point), as in Manopt ``checkhessian``: ``slope`` must be about 3.
    Also reports the symmetry defect ``|<u, H v> - <H u, v>|`` and the tangency defect
    of ``H v``. Hessian-vector products are ``jvp(grad f)`` (forward over reverse)
    mapped by ``ehess_to_rhess``.
    """
    f, v = _setup(cost, manifold, x, args, direction, key)
    fx, egrad = jax.value_and_grad(f)(x)
    g = manifold.egrad_to_rgrad(x, egrad)
    hess_v = _rhess(f, manifold, x, egrad, v)
    slope0 = manifold.inner(x, g, v)
    curvature = manifold.inner(x, hess_v, v)
    ts = _ts(x)

    @jax.jit
    def resid(t):
        f_t = f(manifold.retract(x, tree_scale(t, v)))
        return jnp.abs(f_t - fx - t * slope0 - 0.5 * t * t * curvature)

    errs = np.asarray(jax.vmap(resid)(jnp.asarray(ts, jnp.result_type(fx))), np.float64)
    floor = float(jnp.finfo(jnp.result_type(fx)).eps) * max(1.0, abs(float(fx)))
    slope, exact = _fit_slope(ts, errs, floor)
    u_key = jax.random.key(1) if key is None else jax.random.fold_in(key, 1)
    u = manifold.random_tangent(u_key, x)
    hess_u = _rhess(f, manifold, x, egrad, u)
    sym_err = abs(float(manifold.inner(x, u, hess_v) - manifold.inner(x, hess_u, v)))
    tan_err = float(manifold.norm(x, tree_sub(hess_v, manifold.proj(x, hess_v))))
    return TaylorCheck(slope, exact, ts, errs, sym_err, tan_err)


def hessian_spectrum(cost, manifold, x, args=None) -> np.ndarray:
    r"""Eigenvalues of the Riemannian Hessian at ``x`` (Manopt ``hessianspectrum``), ascending.

    Builds the Hessian on the tangent space spanned by ``proj_x(e_i)`` for the ambient
    unit vectors ``e_i`` and solves the generalized eigenproblem ``H c = lambda G c`` on
    the range of the Gram matrix ``G`` (metric applied through its Riesz map, so
    non-Euclidean metrics such as Fisher work). Cost: one Hessian-vector product per
    ambient dimension; meant for checks on problems up to a few thousand variables.
    """
    f = lambda z: cost(z, args)
    leaves, treedef = jax.tree.flatten(x)
    sizes = [v.size for v in leaves]
    total = sum(sizes)
    dtype = leaves[0].dtype

    def unflat(vec):
        parts, start = [], 0
        for v, s in zip(leaves, sizes, strict=True):
            parts.append(vec[start : start + s].reshape(v.shape).astype(v.dtype))
            start += s
        return jax.tree.unflatten(treedef, parts)

    def flat(tree):
        return jnp.concatenate([jnp.ravel(v) for v in jax.tree.leaves(tree)])

    egrad = jax.grad(f)(x)
    zero = unflat(jnp.zeros(total, dtype))

    @jax.jit
    def columns(e):
        t = manifold.proj(x, unflat(e))
        h = _rhess(f, manifold, x, egrad, t)
        riesz = lambda w: flat(jax.grad(lambda z: manifold.inner(x, z, w))(zero))
        return flat(t), riesz(t), riesz(h)

    eye = jnp.eye(total, dtype=dtype)
    t, riesz_t, riesz_h = jax.lax.map(columns, eye, batch_size=64)
    t, riesz_t, riesz_h = (np.asarray(a, np.float64) for a in (t, riesz_t, riesz_h))
    gram = t @ riesz_t.T
    hess_mat = t @ riesz_h.T
    gram = 0.5 * (gram + gram.T)
    hess_mat = 0.5 * (hess_mat + hess_mat.T)
    s, vecs = np.linalg.eigh(gram)
    keep = s > 1e-10 * s.max()
    w = vecs[:, keep] / np.sqrt(s[keep])
    return np.linalg.eigvalsh(w.T @ hess_mat @ w)
