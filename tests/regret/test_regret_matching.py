"""Regret matching as an optimizer: KKT gaps, OSQP references, scale invariance, games."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
import peers.osqp
from jaxsolve.core import Status
from jaxsolve.regret import domains, kkt_gap, regret_matching

SHAPES = {"a": (3, 4), "b": (5,)}  # four simplices: three of size 4 and one of size 5
N = 17


def _flat(x):
    return jnp.concatenate([x["a"].reshape(-1), x["b"]])


def quad(x, args):
    Q, c = args
    z = _flat(x)
    return 0.5 * z @ (Q @ z) + c @ z


def cubic(x, args):
    Q, c, T = args
    z = _flat(x)
    return 0.5 * z @ (Q @ z) + c @ z + jnp.einsum("ijk,i,j,k->", T, z, z, z)


def _x0(dtype=jnp.float64):
    return {"a": jnp.full(SHAPES["a"], 0.25, dtype), "b": jnp.full(SHAPES["b"], 0.2, dtype)}


def _blocks():
    rows = [list(range(4 * i, 4 * i + 4)) for i in range(3)] + [list(range(12, 17))]
    A = np.zeros((4, N))
    for r, idx in enumerate(rows):
        A[r, idx] = 1
    return A


@functools.cache
def convex_problem(seed=0):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, N))
    Q = B @ B.T / N + 0.1 * np.eye(N)
    c = rng.standard_normal(N)
    A = np.vstack([_blocks(), np.eye(N)])
    z = peers.osqp.solve(
        Q, c, A, np.r_[np.ones(4), np.zeros(N)], np.r_[np.ones(4), np.full(N, np.inf)],
        eps_abs=1e-12, eps_rel=1e-12, polishing=True, max_iter=100000,
    ).x  # fmt: skip
    return (jnp.asarray(Q), jnp.asarray(c)), float(0.5 * z @ Q @ z + c @ z)


def _np_kkt(grad_flat, z):
    gaps = []
    for idx in [slice(4 * i, 4 * i + 4) for i in range(3)] + [slice(12, 17)]:
        g, x = grad_flat[idx], z[idx]
        gaps.append(g @ x - g.min())
    return max(gaps)


VARIANTS = [("rm+", True), ("rm+", False), ("predictive", True)]


@pytest.mark.parametrize("variant,alternating", VARIANTS)
def test_convex_qp_matches_osqp(variant, alternating):
    """A strongly convex QP over a product of 4 simplices: KKT gap 1e-9 and f* of OSQP."""
    args, fstar = convex_problem()
    sol = jaxsolve.solve(
        regret_matching(quad, variant=variant, alternating=alternating), _x0(), args,
        tol=1e-9, max_steps=20000,
    )  # fmt: skip
    assert int(sol.status) == Status.SUCCESS, (float(sol.error), int(sol.num_steps))
    assert abs(float(quad(sol.x, args)) - fstar) <= 1e-8 * max(1.0, abs(fstar))
    for leaf in jax.tree.leaves(sol.x):
        assert float(leaf.min()) >= 0
        np.testing.assert_allclose(np.asarray(leaf).sum(-1), 1.0, atol=1e-12)


@functools.cache
def nonconvex_args(seed):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((N, N))
    T = rng.standard_normal((N, N, N)) / N
    return (jnp.asarray((B + B.T) / 2), jnp.asarray(rng.standard_normal(N)), jnp.asarray(T))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nonconvex_polynomial_reaches_kkt(seed):
    """Random indefinite quadratic + cubic over the product of simplices: alternating RM+
    reaches a KKT gap of 1e-6, checked with an independent NumPy gradient."""
    args = nonconvex_args(seed)
    Q, c, T = (np.asarray(a) for a in args)
    solver = regret_matching(cubic)
    x0 = _x0()
    sol = jaxsolve.solve(solver, x0, args, tol=1e-6, max_steps=20000)
    assert int(sol.status) == Status.SUCCESS
    z = np.asarray(_flat(sol.x))
    g = Q @ z + c + np.einsum("ijk,j,k->i", T, z, z) + np.einsum("ijk,i,k->j", T, z, z)
    g += np.einsum("ijk,i,j->k", T, z, z)
    assert _np_kkt(g, z) <= 1e-6
    assert float(cubic(sol.x, args)) <= float(cubic(x0, args))


def test_scale_invariance():
    """Iterates on f and 1000 f agree to 1e-10 (all variants, 200 sweeps); PGD's would not."""
    args = nonconvex_args(0)
    scaled = lambda x, a: a[3] * cubic(x, a[:3])
    both = (*[jnp.stack([v, v]) for v in args], jnp.array([1.0, 1000.0]))
    for variant, alt in VARIANTS + [("rm", True)]:
        solver = regret_matching(scaled, variant=variant, alternating=alt)
        run = lambda a, solver=solver: jaxsolve.solve(solver, _x0(), a, tol=0.0, max_steps=200)
        sol = jax.vmap(run)(both)
        for leaf in jax.tree.leaves(sol.x):
            np.testing.assert_allclose(np.asarray(leaf[0]), np.asarray(leaf[1]), atol=1e-10, rtol=0)
        np.testing.assert_allclose(
            float(sol.error[1]), 1000 * float(sol.error[0]), rtol=1e-8, atol=1e-9
        )


def test_potential_game_converges_to_nash():
    """2-player common-interest game (both maximize x'Ay): alternating RM+ on -x'Ay reaches
    a KKT point, which for a bilinear potential is a Nash equilibrium."""
    rng = np.random.default_rng(3)
    A = jnp.asarray(rng.standard_normal((6, 7)))
    fun = lambda x, A: -(x["p"] @ A @ x["q"])
    x0 = {"p": jnp.full(6, 1 / 6), "q": jnp.full(7, 1 / 7)}
    for alt in (True, False):
        sol = jaxsolve.solve(
            regret_matching(fun, alternating=alt), x0, A, tol=1e-10, max_steps=5000
        )
        assert int(sol.status) == Status.SUCCESS
        p, q, An = np.asarray(sol.x["p"]), np.asarray(sol.x["q"]), np.asarray(A)
        value = p @ An @ q
        assert (An @ q).max() - value <= 1e-10  # player 1 cannot improve
        assert (p @ An).max() - value <= 1e-10  # player 2 cannot improve


def test_box_domain_matches_osqp():
    rng = np.random.default_rng(4)
    n = 8
    B = rng.standard_normal((n, n))
    Q, c = B @ B.T / n + 0.05 * np.eye(n), 2 * rng.standard_normal(n)
    lo, hi = -np.ones(n), 0.5 * np.ones(n)
    z = peers.osqp.solve(Q, c, np.eye(n), lo, hi, eps_abs=1e-12, eps_rel=1e-12, polishing=True).x
    fstar = 0.5 * z @ Q @ z + c @ z
    dom = domains.box(lo, hi)
    f = dom.wrap(lambda x, a: 0.5 * x @ (a[0] @ x) + a[1] @ x)
    args = (jnp.asarray(Q), jnp.asarray(c))
    sol = jaxsolve.solve(regret_matching(f), dom.encode(jnp.zeros(n)), args, tol=1e-10, max_steps=20000)  # fmt: skip
    assert int(sol.status) == Status.SUCCESS
    x = np.asarray(dom.decode(sol.x))
    assert np.all(x >= lo - 1e-15) and np.all(x <= hi + 1e-15)
    assert abs(0.5 * x @ Q @ x + c @ x - fstar) <= 1e-8 * max(1, abs(fstar))


def test_l1_domain_matches_osqp():
    rng = np.random.default_rng(5)
    m_, n = 20, 10
    A = rng.standard_normal((m_, n))
    b = rng.standard_normal(m_)
    tau = 1.0
    AA = np.hstack([A, -A])
    z = peers.osqp.least_squares(
        AA, b, np.vstack([np.ones((1, 2 * n)), np.eye(2 * n)]), np.r_[-np.inf, np.zeros(2 * n)],
        np.r_[tau, np.full(2 * n, np.inf)], eps_abs=1e-12, eps_rel=1e-12, polishing=True,
        max_iter=100000,
    ).x  # fmt: skip
    fstar = 0.5 * np.sum((A @ (z[:n] - z[n:]) - b) ** 2)
    dom = domains.l1_ball(tau)
    f = dom.wrap(lambda x, a: 0.5 * jnp.sum((a[0] @ x - a[1]) ** 2))
    sol = jaxsolve.solve(regret_matching(f), dom.encode(jnp.zeros(n)), (jnp.asarray(A), jnp.asarray(b)), tol=1e-9, max_steps=20000)  # fmt: skip
    assert int(sol.status) == Status.SUCCESS
    x = np.asarray(dom.decode(sol.x))
    assert np.abs(x).sum() <= tau + 1e-12
    assert abs(0.5 * np.sum((A @ x - b) ** 2) - fstar) <= 1e-7 * max(1, fstar)
    np.testing.assert_allclose(np.asarray(dom.decode(dom.encode(jnp.asarray(x)))), x, atol=1e-15)


def test_zero_gradient_and_huge_scale():
    """Zero gradient: step 0, x unchanged, error 0. A 1e8-scaled objective: same iterates, finite."""
    zero = lambda x, a: 0.0 * jnp.sum(_flat(x))
    s = regret_matching(zero)
    x0 = _x0()
    state = s.init(x0, None)
    step = jax.jit(s.step)  # one compile for the three steps
    for _ in range(3):
        state, _ = step(state, None)
    for a, b in zip(jax.tree.leaves(state.x), jax.tree.leaves(x0), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(state.error) == 0.0
    # start at the optimum of a linear cost (a vertex): no regret is positive, x stays put
    lin = lambda x, c: jnp.sum(c["a"] * x["a"]) + jnp.sum(c["b"] * x["b"])
    cost = {"a": jnp.tile(jnp.array([0.0, 1.0, 2.0, 3.0]), (3, 1)), "b": jnp.arange(5.0)}
    start = {"a": jnp.tile(jnp.eye(4)[0], (3, 1)), "b": jnp.eye(5)[0]}
    sol = jaxsolve.solve(regret_matching(lin), start, cost, tol=0.0, max_steps=5)
    for a, b in zip(jax.tree.leaves(sol.x), jax.tree.leaves(start), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(sol.error) == 0.0
    args, _ = convex_problem()
    huge = (args[0] * 1e8, args[1] * 1e8)
    sa = jaxsolve.solve(regret_matching(quad), x0, args, tol=0.0, max_steps=100)
    sb = jaxsolve.solve(regret_matching(quad), x0, huge, tol=0.0, max_steps=100)
    for a, b in zip(jax.tree.leaves(sa.x), jax.tree.leaves(sb.x), strict=True):
        assert np.all(np.isfinite(np.asarray(b)))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-9)


def test_kkt_gap_definition_and_float32():
    g = {"a": jnp.array([[1.0, 2.0], [0.0, -1.0]]), "b": jnp.array([3.0, 1.0, 2.0])}
    x = {"a": jnp.array([[0.5, 0.5], [1.0, 0.0]]), "b": jnp.array([0.0, 1.0, 0.0])}
    assert float(kkt_gap(g, x)) == pytest.approx(1.0)  # block a[1]: 0 - (-1)
    args, fstar = convex_problem()
    args32 = jax.tree.map(lambda a: a.astype(jnp.float32), args)
    sol = jaxsolve.solve(regret_matching(quad), _x0(jnp.float32), args32, max_steps=5000)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(sol.x))
    assert int(sol.status) == Status.SUCCESS
    assert (
        abs(float(quad(jax.tree.map(lambda v: v.astype(jnp.float64), sol.x), args)) - fstar) <= 1e-3
    )


def test_validation():
    with pytest.raises(ValueError, match="variant"):
        regret_matching(quad, variant="cfr")
    with pytest.raises(TypeError, match="alternating"):
        regret_matching(quad, alternating=1)
    with pytest.raises(TypeError, match="fun"):
        regret_matching(None)
    with pytest.raises(ValueError, match="box"):
        domains.box(1.0, 0.0)
    with pytest.raises(ValueError, match="radius"):
        domains.l1_ball(0.0)
