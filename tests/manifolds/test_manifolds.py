"""Manifold correctness: retractions land on the manifold, projections are orthogonal
projections in the metric, and autodiff gradients/Hessians pass Manopt's Taylor-slope
checks (slope 2 and 3) on random non-quadratic costs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.manifolds import (
    DoublyStochastic,
    Euclidean,
    Oblique,
    Orthogonal,
    Product,
    Sphere,
    Stiefel,
    Symmetric,
    check_gradient,
    check_hessian,
    hessian_spectrum,
)
from jaxsolve.manifolds.base import tree_scale, tree_sub

# second-order retractions: the Hessian slope check is valid at any point
SECOND_ORDER = [
    Euclidean(4, 3),
    Symmetric(4),
    Sphere(7),
    Sphere(3, 4),
    Oblique(4, 3),
    Stiefel(7, 3),
    Orthogonal(4),
    Product(Stiefel(6, 3), Symmetric(3)),
    Product(Sphere(5), Product(Oblique(3, 2), Euclidean(2))),
]
# first-order retractions: the Hessian check is only valid at critical points
FIRST_ORDER = [Stiefel(7, 3, "qr"), DoublyStochastic(5)]
ALL = SECOND_ORDER + FIRST_ORDER


def _coef(x):
    return jax.tree.map(lambda v: jnp.cos(jnp.arange(v.size, dtype=v.dtype)).reshape(v.shape), x)


def random_cost(x, args):
    """Smooth, non-quadratic: sum of sin(<c, x>) terms, cubes and a quartic coupling."""
    out = 0.0
    for v, c in zip(jax.tree.leaves(x), jax.tree.leaves(_coef(x)), strict=True):
        out = out + jnp.sum(jnp.sin(c * v)) + 0.3 * jnp.sum(c * v**3) + jnp.sum(c * v) ** 2
    return out


def _max_abs(a, b):
    return max(
        float(jnp.max(jnp.abs(u - w)))
        for u, w in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _gauss(key, x):
    leaves, tree = jax.tree.flatten(x)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(
        tree, [jax.random.normal(k, v.shape, v.dtype) for k, v in zip(keys, leaves, strict=True)]
    )


@pytest.mark.parametrize("m", ALL, ids=repr)
def test_retraction_lands_on_manifold(m):
    x = m.random_point(jax.random.key(0))
    assert float(m.residual(x)) <= 1e-10
    for scale in (1e-3, 1.0, 5.0):
        u = tree_scale(scale, m.random_tangent(jax.random.key(1), x))
        y = m.retract(x, u)
        assert float(m.residual(y)) <= 1e-10, (m, scale, float(m.residual(y)))
    # R_x(0) = x and dR_x(0) = id
    assert _max_abs(m.retract(x, m.zero_tangent(x)), x) <= 1e-12
    u = m.random_tangent(jax.random.key(2), x)
    t = 1e-6
    d = tree_scale(1.0 / t, tree_sub(m.retract(x, tree_scale(t, u)), x))
    assert _max_abs(d, u) <= 1e-5


@pytest.mark.parametrize("m", ALL, ids=repr)
def test_projection_idempotent_and_orthogonal(m):
    x = m.random_point(jax.random.key(3))
    z = _gauss(jax.random.key(4), x)
    p = m.proj(x, z)
    assert _max_abs(m.proj(x, p), p) <= 1e-12
    # z - proj(z) is orthogonal, in the metric, to every tangent vector
    for k in range(3):
        u = m.random_tangent(jax.random.key(10 + k), x)
        assert abs(float(m.inner(x, tree_sub(z, p), u))) <= 1e-12
    # tangent vectors are fixed points
    u = m.random_tangent(jax.random.key(5), x)
    assert _max_abs(m.proj(x, u), u) <= 1e-12
    assert abs(float(m.norm(x, u)) - 1.0) <= 1e-12


@pytest.mark.parametrize("m", ALL, ids=repr)
def test_gradient_slope_two(m):
    x = m.random_point(jax.random.key(6))
    res = check_gradient(random_cost, m, x, key=jax.random.key(7))
    assert not res.exact
    assert abs(res.slope - 2.0) <= 0.1, res.slope


@pytest.mark.parametrize("m", SECOND_ORDER, ids=repr)
def test_hessian_slope_three(m):
    x = m.random_point(jax.random.key(8))
    res = check_hessian(random_cost, m, x, key=jax.random.key(9))
    assert abs(res.slope - 3.0) <= 0.1, res.slope
    assert res.symmetry <= 1e-10 and res.tangency <= 1e-10


def _critical_cost(m, xstar):
    """A cost with an unconstrained (hence Riemannian) critical point at xstar."""

    def cost(x, args):
        out = 0.0
        for v, s, c in zip(
            jax.tree.leaves(x), jax.tree.leaves(xstar), jax.tree.leaves(_coef(x)), strict=True
        ):
            d = v - s
            out = out + jnp.sum((1.5 + c) * d**2) + jnp.sum(c * d**3) + jnp.sum(d) ** 4
        return out

    return cost


@pytest.mark.parametrize("m", FIRST_ORDER, ids=repr)
def test_hessian_slope_three_at_critical_point(m):
    xstar = m.random_point(jax.random.key(11))
    cost = _critical_cost(m, xstar)
    res = check_hessian(cost, m, xstar, key=jax.random.key(12))
    assert abs(res.slope - 3.0) <= 0.1, res.slope
    # away from critical points: the Hessian is still symmetric and tangent
    res = check_hessian(random_cost, m, m.random_point(jax.random.key(13)))
    assert res.symmetry <= 1e-10 and res.tangency <= 1e-10


def test_doubly_stochastic_hessian_matches_connection():
    """Hess f(X)[U] = proj_X(D grad f(X)[U] - grad f * U / (2X)) (Levi-Civita connection of the
    Fisher metric), with D grad by central differences along a curve through X."""
    m = DoublyStochastic(5)
    x = m.random_point(jax.random.key(14))
    u = m.random_tangent(jax.random.key(15), x)
    eg = jax.grad(random_cost)(x, None)
    rg = m.egrad_to_rgrad(x, eg)
    eh = jax.jvp(lambda z: jax.grad(random_cost)(z, None), (x,), (u,))[1]
    h = m.ehess_to_rhess(x, eg, eh, u)
    t = 1e-5
    grad_at = lambda z: m.egrad_to_rgrad(z, jax.grad(random_cost)(z, None))
    # the straight line x + t u stays in the affine hull; gradients there use the same formula
    dgrad = (grad_at(x + t * u) - grad_at(x - t * u)) / (2 * t)
    fd = m.proj(x, dgrad - 0.5 * rg * u / x)
    assert float(jnp.max(jnp.abs(fd - h))) <= 1e-6 * float(jnp.max(jnp.abs(h)))


def test_doubly_stochastic_geometry():
    m = DoublyStochastic(6)
    x = m.random_point(jax.random.key(16))
    u = m.random_tangent(jax.random.key(17), x)
    np.testing.assert_allclose(np.asarray(u.sum(0)), 0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(u.sum(1)), 0, atol=1e-12)
    # Fisher metric: <grad f, v>_X equals the Euclidean directional derivative
    eg = jax.grad(random_cost)(x, None)
    rg = m.egrad_to_rgrad(x, eg)
    assert abs(float(m.inner(x, rg, u) - jnp.sum(eg * u))) <= 1e-12
    assert m.dim == 25


def test_hessian_spectrum_matches_dense_sphere():
    """On the sphere the Rayleigh Hessian at an eigenvector v_k is 2(A - lambda_k I) on v_k^perp."""
    n = 8
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n))
    a = a + a.T
    lam, v = np.linalg.eigh(a)
    spec = hessian_spectrum(lambda x, a: x @ a @ x, Sphere(n), jnp.asarray(v[:, 2]), jnp.asarray(a))
    np.testing.assert_allclose(np.sort(spec), np.sort(2 * (np.delete(lam, 2) - lam[2])), atol=1e-10)


def test_distances():
    s = Sphere(5)
    x = s.random_point(jax.random.key(0))
    u = tree_scale(0.7, s.random_tangent(jax.random.key(1), x))
    assert abs(float(s.dist(x, s.exp(x, u))) - 0.7) <= 1e-12
    o = Oblique(4, 3)
    x = o.random_point(jax.random.key(2))
    assert float(o.dist(x, x)) == 0.0
    p = Product(Sphere(5), Euclidean(3))
    x = p.random_point(jax.random.key(3))
    y = p.random_point(jax.random.key(4))
    ref = np.hypot(float(Sphere(5).dist(x[0], y[0])), float(Euclidean(3).dist(x[1], y[1])))
    assert abs(float(p.dist(x, y)) - ref) <= 1e-12
    with pytest.raises(NotImplementedError):
        Stiefel(5, 2).dist(Stiefel(5, 2).random_point(jax.random.key(0)), None)


def test_static_hashable_and_validated():
    assert Stiefel(10, 3) == Stiefel(10, 3) and hash(Stiefel(10, 3)) == hash(Stiefel(10, 3))
    assert Stiefel(10, 3) != Stiefel(10, 3, "qr")
    assert hash(Product(Sphere(3), Symmetric(2))) == hash(Product((Sphere(3), Symmetric(2))))
    assert Stiefel(200, 5).dim == 200 * 5 - 15 and Sphere(1000).dim == 999
    with pytest.raises(ValueError, match="p <= n"):
        Stiefel(3, 5)
    with pytest.raises(ValueError, match="retraction"):
        Stiefel(5, 3, "cayley")
    with pytest.raises(ValueError, match="n must be"):
        Symmetric(0)
    with pytest.raises(TypeError, match="manifolds\\[1\\]"):
        Product(Sphere(3), "x")


def test_vmap_and_float32():
    m = Stiefel(6, 2)
    keys = jax.random.split(jax.random.key(0), 4)
    xs = jax.vmap(lambda k: m.random_point(k, jnp.float32))(keys)
    us = jax.vmap(m.random_tangent)(keys, xs)
    ys = jax.vmap(m.retract)(xs, us)
    assert ys.dtype == jnp.float32
    assert float(jnp.max(jax.vmap(m.residual)(ys))) <= 1e-5
    ds = DoublyStochastic(4)
    x = ds.random_point(jax.random.key(1), jnp.float32)
    y = ds.retract(x, ds.random_tangent(jax.random.key(2), x))
    assert y.dtype == jnp.float32 and float(ds.residual(y)) <= 1e-5
