"""Derivatives of jaxsolve.ot against central finite differences (float64).

* unrolled (``loop="fixed"``) reverse mode through SGA steps, both Legendre methods: against
  finite differences of the same fixed-step computation (exact up to FD error);
* implicit differentiation of ``barycenter(...).x`` (``jax.grad`` through the default while
  loop): against finite differences of converged solves;
* envelope gradients of ``w2`` and ``barycenter_functional`` (weights and densities): against
  finite differences of the exact 1D functionals (quantile functions of the cell-uniform
  densities), i.e. of the true value function, not of our own discretization.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import solve
from jaxsolve.ot import (
    Grid,
    barycenter,
    barycenter_functional,
    legendre,
    sobolev_barycenter,
    w2,
)


def _bumps2d(n, floor):
    g = Grid((n, n))
    p = g.points_flat()
    a = np.exp(-((p - [0.3, 0.4]) ** 2).sum(1) / 0.05).reshape(n, n) + floor
    b = np.exp(-((p - [0.6, 0.5]) ** 2).sum(1) / 0.08).reshape(n, n) + floor
    return g, jnp.asarray(np.stack([a, b]))


def _central(fun, x, dx, eps):
    return (float(fun(x + eps * dx)) - float(fun(x - eps * dx))) / (2 * eps)


@pytest.mark.slow  # 10 s; the contract and the implicit/envelope tests cover the fast tier
def test_legendre_gradient_both_methods_match_fd():
    """The custom_jvp of the Legendre transform (Danskin: -du at the maximizer), hull and brute,
    forward and reverse mode, against central differences on a 2D grid."""
    g = Grid((7, 5))
    rng = np.random.default_rng(4)
    u = jnp.asarray(rng.normal(size=(2, *g.shape)))
    r = jnp.asarray(rng.normal(size=(2, 3 * 7 + 1, 3 * 5 + 1)))
    du = jnp.asarray(rng.normal(size=u.shape))
    for method in ("hull", "brute"):

        def loss(v, method=method):
            return jnp.sum(r * legendre(v, g, queries="corners", sub=3, method=method))

        fd = _central(loss, u, du, 1e-7)
        np.testing.assert_allclose(float(jnp.sum(jax.grad(loss)(u) * du)), fd, rtol=1e-7)
        np.testing.assert_allclose(float(jax.jvp(loss, (u,), (du,))[1]), fd, rtol=1e-7)


@pytest.mark.slow  # 8 s of compiling the unrolled reverse pass
def test_unrolled_reverse_mode_matches_fd():
    """jax.grad through 8 SGA steps (loop='fixed') with the linear-time hull transform (its
    while_loop is only in the index search), w.r.t. densities and weights."""
    method = "hull"
    g, D = _bumps2d(6, 0.05)
    W = jnp.asarray([0.4, 0.6])
    target = jnp.asarray(np.random.default_rng(0).normal(size=g.shape))
    solver = sobolev_barycenter(method=method, schedule="constant", subsample=1)

    @jax.jit
    def loss(D, W):
        sol = solve(solver, jnp.zeros_like(D), (D, W), loop="fixed", max_steps=8)
        return jnp.sum(target * sol.x)

    gD, gW = jax.grad(loss, (0, 1))(D, W)
    dW = jnp.asarray([1.0, -1.0])
    dD = jnp.asarray(np.random.default_rng(1).normal(size=D.shape))
    fd_w = _central(lambda w: loss(D, w), W, dW, 1e-6)
    fd_d = _central(lambda d: loss(d, W), D, dD, 1e-6)
    np.testing.assert_allclose(float(gW @ dW), fd_w, rtol=1e-6)
    np.testing.assert_allclose(float(jnp.sum(gD * dD)), fd_d, rtol=1e-6)


def test_implicit_gradient_of_barycenter_matches_fd():
    """jax.grad of a loss of barycenter(...).x (implicit function theorem at the fixed point)."""
    g, D = _bumps2d(6, 0.3)
    W = jnp.asarray([0.4, 0.6])
    target = jnp.asarray(np.random.default_rng(0).normal(size=g.shape))

    def loss(D, W):
        return jnp.sum(target * barycenter(D, W, tol=1e-13, max_steps=400, subsample=1).x)

    gD, gW = jax.grad(loss, (0, 1))(D, W)
    dW = jnp.asarray([1.0, -1.0])
    dD = jnp.asarray(np.random.default_rng(1).normal(size=D.shape))
    fd_w = _central(lambda w: loss(D, w), W, dW, 1e-5)
    fd_d = _central(lambda d: loss(d, W), D, dD, 1e-5)
    np.testing.assert_allclose(float(gW @ dW), fd_w, rtol=1e-5)
    np.testing.assert_allclose(float(jnp.sum(gD * dD)), fd_d, rtol=1e-5)


N1 = 48
_T = (np.arange(100000) + 0.5) / 100000


def _quantile(m):
    """Quantile function of the cell-uniform density with cell masses ``m`` on [0, 1]."""
    cdf = np.concatenate([[0], np.cumsum(m / m.sum())])
    return np.interp(_T, cdf, np.arange(N1 + 1) / N1)


@pytest.fixture(scope="module")
def dens1d():
    x = (np.arange(N1) + 0.5) / N1
    mus = np.stack(
        [
            np.exp(-0.5 * ((x - c) / s) ** 2) + 0.05
            for c, s in [(0.3, 0.08), (0.6, 0.1), (0.5, 0.06)]
        ]
    )
    return mus / mus.sum(1, keepdims=True)


def _fd_gradient(fun, x, eps):
    """Central finite differences of a NumPy function, component by component."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (fun(x + e) - fun(x - e)) / (2 * eps)
    return g


def _rel(a, b):
    return float(np.linalg.norm(np.ravel(a) - np.ravel(b)) / np.linalg.norm(np.ravel(b)))


def test_w2_envelope_gradient_matches_exact_fd(dens1d):
    """dW2^2 = 2 <f, db> + 2 <f^c, da> vs FD of the exact 1D W2^2 = int |Q_a - Q_b|^2."""
    a, b = dens1d[0], dens1d[1]

    def exact(a, b):
        return float(np.mean((_quantile(a) - _quantile(b)) ** 2))

    ga, gb = jax.grad(lambda a, b: w2(a, b, tol=1e-10, max_steps=4000).x, (0, 1))(
        jnp.asarray(a), jnp.asarray(b)
    )
    fd_a = _fd_gradient(lambda v: exact(v, b), a, 1e-6)
    fd_b = _fd_gradient(lambda v: exact(a, v), b, 1e-6)
    assert _rel(ga, fd_a) <= 1e-2, _rel(ga, fd_a)
    assert _rel(gb, fd_b) <= 1e-2, _rel(gb, fd_b)


@pytest.mark.slow  # 10 s; the implicit-gradient FD check of the barycenter stays in make test
def test_barycenter_functional_envelope_gradients_match_exact_fd(dens1d):
    """dF/dalpha_i = W2^2(mu_i, bary), dF/dmu_i = 2 alpha_i f_i^c vs FD of the exact 1D
    F(alpha, mu) = sum_i alpha_i |Q_i - sum_j alpha_j Q_j|^2."""
    mus = dens1d
    w = np.array([0.2, 0.5, 0.3])

    def exact(w, mus):
        Q = np.stack([_quantile(m) for m in mus])
        return float(w @ np.mean((Q - w @ Q) ** 2, axis=1))

    def ours(W, D):
        return barycenter_functional(D, W, tol=1e-10, max_steps=4000).x

    gw, gD = jax.grad(ours, (0, 1))(jnp.asarray(w), jnp.asarray(mus))
    # the weight gradient is the vector of squared distances to the barycenter, up to a common
    # offset (~1e-4 here: the plan costs treat the cells as atoms at their centres) that is
    # invisible on the simplex; its absolute level agrees to 1e-4
    Q = np.stack([_quantile(m) for m in mus])
    ref = np.mean((Q - w @ Q) ** 2, axis=1)
    gw_np = np.asarray(gw)
    np.testing.assert_allclose(gw_np - gw_np.mean(), ref - ref.mean(), rtol=2e-3)
    np.testing.assert_allclose(gw_np, ref, atol=2e-4)
    for d in (np.array([1.0, -1.0, 0.0]), np.array([0.0, 1.0, -1.0])):  # tangent to the simplex
        fd_w = (exact(w + 1e-5 * d, mus) - exact(w - 1e-5 * d, mus)) / 2e-5
        np.testing.assert_allclose(float(gw @ d), fd_w, rtol=5e-3)
    fd_m = _fd_gradient(lambda m: exact(w, m), mus, 1e-6)
    assert _rel(gD, fd_m) <= 1e-2, _rel(gD, fd_m)


@pytest.mark.slow  # 3-7 s: compiles the forward-mode rule (the grad test covers reverse mode)
def test_implicit_jvp_of_barycenter_matches_fd():
    """Forward mode through the driver's implicit adjoint, along the weights (which move
    the constraint sum_i alpha_i f_i = 0 itself: the tangent must not be re-centred)."""
    g, D = _bumps2d(6, 0.3)
    W = jnp.asarray([0.4, 0.6])
    target = jnp.asarray(np.random.default_rng(0).normal(size=g.shape))

    def loss(W):
        return jnp.sum(target * barycenter(D, W, tol=1e-13, max_steps=400, subsample=1).x)

    dW = jnp.asarray([1.0, -1.0])
    _, jvp = jax.jvp(loss, (W,), (dW,))
    np.testing.assert_allclose(float(jvp), _central(loss, W, dW, 1e-5), rtol=1e-5)
