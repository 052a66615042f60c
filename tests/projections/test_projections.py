"""Each projection against OSQP (eps 1e-10, polished) on random points, ties, interior points
and degenerate data; vmap = loop; gradients = finite differences; input validation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import projections as P
from tests.projections import _reference as R

N = 7
ATOL = 1e-9  # OSQP polished at 1e-10; ours is exact to rounding


def _points(seed, n=N):
    """Generic, tied (repeated values), interior (tiny) and far points."""
    rng = np.random.default_rng(seed)
    generic = rng.normal(size=n) * 1.5
    tied = np.round(rng.normal(size=n), 1)
    tied[: n // 2] = tied[0]  # exact ties, including at the threshold
    interior = rng.uniform(0.0, 0.1, size=n)
    far = rng.normal(size=n) * 50.0
    return [generic, tied, interior, far]


SEEDS = range(4)

# (name, jitted projection, reference, parameters per seed)
_jit = {name: jax.jit(getattr(P, name)) for name in P.__all__}


def _check(ours, ref, atol=ATOL):
    np.testing.assert_allclose(np.asarray(ours), ref, atol=atol, rtol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_simplex_matches_osqp(seed):
    for x in _points(seed):
        for s in (1.0, 0.3, 5.0):
            _check(_jit["simplex"](jnp.asarray(x), s), R.ref_simplex(x, s))
    # s = 0 is the single point 0
    _check(P.simplex(jnp.asarray(_points(seed)[0]), 0.0), np.zeros(N), atol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_l1_ball_matches_osqp(seed):
    for x in _points(seed):
        for r in (1.0, 0.25):
            _check(_jit["l1_ball"](jnp.asarray(x), r), R.ref_l1_ball(x, r), atol=1e-8)
    x = _points(seed)[2]  # interior: returned unchanged
    _check(P.l1_ball(jnp.asarray(x), 10.0), x, atol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_l2_ball_closed_form(seed):
    for x in _points(seed):
        for r in (1.0, 0.1, 100.0):
            y = np.asarray(_jit["l2_ball"](jnp.asarray(x), r))
            _check(y, R.ref_l2_ball(x, r), atol=1e-12)
            assert np.linalg.norm(y) <= r * (1 + 1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_box_matches_osqp(seed):
    rng = np.random.default_rng(100 + seed)
    lo = -rng.uniform(0, 1, N)
    hi = rng.uniform(0, 1, N)
    hi[0] = lo[0]  # a degenerate coordinate
    for x in _points(seed):
        _check(_jit["box"](jnp.asarray(x), lo, hi), R.ref_box(x, lo, hi))
    x = _points(seed)[0]
    _check(P.box(jnp.asarray(x), -jnp.inf, 0.5), np.minimum(x, 0.5), atol=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_capped_simplex_matches_osqp(seed):
    for x in _points(seed):
        for k in (1.0, 2.5, 0.0, float(N)):
            y = np.asarray(_jit["capped_simplex"](jnp.asarray(x), k))
            _check(y, R.ref_capped_simplex(x, k))
            assert abs(y.sum() - k) <= 1e-12 * N and y.min() >= 0 and y.max() <= 1


@pytest.mark.parametrize("seed", SEEDS)
def test_knapsack_matches_osqp(seed):
    rng = np.random.default_rng(200 + seed)
    w = rng.uniform(0.2, 2.0, N)
    w_zero = w.copy()
    w_zero[::3] = 0.0  # degenerate: zero weights
    w_equal = np.full(N, 0.7)  # degenerate: equal weights (ties in x/w)
    upper = rng.uniform(0.5, 2.0, N)
    for x in _points(seed):
        for ww in (w, w_zero, w_equal):
            for budget in (0.5, 2.0, 0.0):
                for u in (1.0, upper):
                    y = np.asarray(_jit["knapsack"](jnp.asarray(x), ww, budget, u))
                    _check(y, R.ref_knapsack(x, ww, budget, u))
                    assert ww @ y <= budget + 1e-12 and y.min() >= 0
    # no upper bound
    x = _points(seed)[0]
    _check(P.knapsack(jnp.asarray(x), w, 1.0, jnp.inf), R.ref_knapsack(x, w, 1.0, np.inf))


@pytest.mark.parametrize("seed", SEEDS)
def test_partition_matroid_matches_osqp(seed):
    groups = np.array([0, 0, 1, 1, 1, 2, 2])
    for caps in (np.array([1.0, 0.5, 2.0]), np.array([0.0, 3.0, 1.2])):
        for x in _points(seed):
            y = np.asarray(_jit["partition_matroid"](jnp.asarray(x), groups, caps))
            _check(y, R.ref_partition_matroid(x, groups, caps))
    # a group id with no member is fine
    caps = np.array([1.0, 0.5, 2.0, 1.0])
    x = _points(seed)[0]
    _check(
        P.partition_matroid(jnp.asarray(x), groups, caps), R.ref_partition_matroid(x, groups, caps)
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_affine_and_halfspace_match_osqp(seed):
    rng = np.random.default_rng(300 + seed)
    A = rng.normal(size=(3, N))
    b = rng.normal(size=3)
    A_def = np.vstack([A, A[0] + A[1]])  # rank-deficient, consistent
    b_def = np.r_[b, b[0] + b[1]]
    a = rng.normal(size=N)
    for x in _points(seed):
        _check(_jit["affine"](jnp.asarray(x), A, b), R.ref_affine(x, A, b), atol=1e-8)
        _check(_jit["affine"](jnp.asarray(x), A_def, b_def), R.ref_affine(x, A, b), atol=1e-8)
        for off in (-1.0, 0.0, 3.0):
            _check(_jit["halfspace"](jnp.asarray(x), a, off), R.ref_halfspace(x, a, off))
    x = _points(seed)[0]
    _check(P.halfspace(jnp.asarray(x), np.zeros(N), 1.0), x, atol=0)


# --- batching, dtypes, gradients -------------------------------------------------------

_GROUPS = np.array([0, 0, 1, 1, 1, 2, 2])
_W = np.linspace(0.3, 1.5, N)
_A = np.random.default_rng(5).normal(size=(3, N))
_B = np.random.default_rng(6).normal(size=3)

# projections as functions of x (and one differentiable parameter each)
CASES = {
    "simplex": lambda x, p: P.simplex(x, 1.0 + p),
    "l1_ball": lambda x, p: P.l1_ball(x, 1.0 + p),
    "l2_ball": lambda x, p: P.l2_ball(x, 1.0 + p),
    "box": lambda x, p: P.box(x, -0.5 + p, 0.5 + p),
    "capped_simplex": lambda x, p: P.capped_simplex(x, 2.5 + p),
    "knapsack": lambda x, p: P.knapsack(x, _W, 1.5 + p, 0.8),
    "partition_matroid": lambda x, p: P.partition_matroid(
        x, _GROUPS, jnp.asarray([1.0, 0.5, 0.7]) + p
    ),
    "affine": lambda x, p: P.affine(x, _A, _B + p),
    "halfspace": lambda x, p: P.halfspace(x, _W, 0.5 + p),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_equals_loop_and_float32(name):
    f = jax.jit(CASES[name])
    xs = jnp.asarray(np.random.default_rng(7).normal(size=(6, N)) * 2)
    ps = jnp.linspace(0.0, 0.3, 6)
    batched = jax.jit(jax.vmap(CASES[name]))(xs, ps)
    single = jnp.stack([f(x, p) for x, p in zip(xs, ps, strict=True)])
    np.testing.assert_allclose(batched, single, atol=1e-12, rtol=0)
    y32 = f(xs[0].astype(jnp.float32), jnp.float32(0.1))
    assert y32.dtype == jnp.float32
    np.testing.assert_allclose(y32, f(xs[0], 0.1), atol=2e-5)


def _fd_jac(fun, x, eps=1e-6):
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        cols.append((np.asarray(fun(x + e)) - np.asarray(fun(x - e))) / (2 * eps))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_finite_differences(name):
    """Jacobian in x (forward and reverse) and the derivative in the set's parameter."""
    f = jax.jit(CASES[name])
    x = np.random.default_rng(11).normal(size=N) * 1.3  # generic point: no ties
    jac_rev = np.asarray(jax.jacrev(f)(x, 0.05))
    jac_fwd = np.asarray(jax.jacfwd(f)(x, 0.05))
    fd = _fd_jac(lambda z: f(z, 0.05), x)
    np.testing.assert_allclose(jac_rev, fd, atol=1e-7)
    np.testing.assert_allclose(jac_fwd, fd, atol=1e-7)
    dp = np.asarray(jax.jacfwd(f, argnums=1)(x, 0.05))
    dp_fd = (np.asarray(f(x, 0.05 + 1e-6)) - np.asarray(f(x, 0.05 - 1e-6))) / 2e-6
    np.testing.assert_allclose(dp, dp_fd, atol=1e-7)
    assert np.abs(jac_rev).max() + np.abs(dp).max() > 0  # not a trivially constant point


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_nan_gradients_at_ties(name):
    jac_fn = jax.jit(jax.jacrev(CASES[name]))
    x = jnp.asarray([0.5, 0.5, 0.5, -0.5, 0.0, 0.0, 1.0])
    for z in (x, jnp.zeros(N), 0.5 * jnp.ones(N)):
        jac = jac_fn(z, 0.0)
        assert bool(jnp.all(jnp.isfinite(jac))), name


def test_simplex_jacobian_is_projector_on_support():
    x = jnp.asarray([0.9, 0.7, -1.0, 0.2, 0.65, -0.3, 0.1])
    y = P.simplex(x)
    S = np.asarray(y > 0)
    J = np.asarray(jax.jacobian(P.simplex)(x))
    expected = np.zeros((N, N))
    k = S.sum()
    expected[np.ix_(S, S)] = np.eye(k) - 1.0 / k
    np.testing.assert_allclose(J, expected, atol=1e-14)


# --- bad input ---------------------------------------------------------------------------


def test_bad_input_names_the_argument():
    x = jnp.ones(N)
    cases = [
        (lambda: P.simplex(x, -1.0), ValueError, "s"),
        (lambda: P.l1_ball(x, -0.1), ValueError, "r"),
        (lambda: P.l2_ball(x, -0.1), ValueError, "r"),
        (lambda: P.capped_simplex(x, N + 1.0), ValueError, "k"),
        (lambda: P.capped_simplex(x, -0.5), ValueError, "k"),
        (lambda: P.knapsack(x, jnp.ones(N), -1.0), ValueError, "budget"),
        (lambda: P.knapsack(x, -jnp.ones(N), 1.0), ValueError, "w"),
        (lambda: P.knapsack(x, jnp.ones(N + 1), 1.0), ValueError, "w"),
        (lambda: P.knapsack(x, jnp.ones(N), 1.0, -1.0), ValueError, "upper"),
        (lambda: P.partition_matroid(x, jnp.zeros(N), jnp.ones(1)), TypeError, "groups"),
        (lambda: P.partition_matroid(x, jnp.zeros(N - 1, int), jnp.ones(1)), ValueError, "groups"),
        (lambda: P.partition_matroid(x, jnp.full(N, 3), jnp.ones(2)), ValueError, "groups"),
        (lambda: P.partition_matroid(x, jnp.zeros(N, int), -jnp.ones(1)), ValueError, "caps"),
        (lambda: P.box(x, 1.0, 0.0), ValueError, "lo"),
        (lambda: P.box(x, jnp.zeros(N + 2), 1.0), ValueError, "lo"),
        (lambda: P.affine(x, jnp.ones((2, N + 1)), jnp.ones(2)), ValueError, "A"),
        (lambda: P.affine(x, jnp.ones((2, N)), jnp.ones(3)), ValueError, "b"),
        (lambda: P.affine(x, jnp.ones((2, N)), jnp.asarray([1.0, 2.0])), ValueError, "range of A"),
        (lambda: P.halfspace(x, jnp.ones(N - 1), 1.0), ValueError, "a"),
        (lambda: P.halfspace(x, jnp.zeros(N), -1.0), ValueError, "empty"),
        (lambda: P.simplex(jnp.arange(N)), TypeError, "x"),
        (lambda: P.simplex(jnp.zeros(0)), ValueError, "x"),
        (lambda: P.simplex(x, jnp.nan), ValueError, "s"),
    ]
    for call, exc, word in cases:
        with pytest.raises(exc, match=word):
            call()


def test_validation_skipped_under_jit_and_nan_propagates():
    # traced parameters cannot be checked; NaN data must come back as NaN, not an answer
    y = jax.jit(P.simplex)(jnp.asarray([0.1, jnp.nan, 0.3]))
    assert bool(jnp.any(jnp.isnan(y)))
    y = jax.jit(P.knapsack)(jnp.asarray([0.1, jnp.nan, 0.3]), jnp.ones(3), 1.0)
    assert bool(jnp.any(jnp.isnan(y)))
