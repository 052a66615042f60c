"""The point-mass maze (`PointMass(walls=...)`): no policy crosses a wall, the open arena is unchanged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.blackbox.envs import MAZE_WALLS, PointMass, linear_policy, mlp_policy, point_mass_maze

POL = linear_policy(5, 2)


def _paths(env, pol, params, seed=0):
    keys = jax.random.split(jax.random.key(seed), params.shape[0])
    ro = jax.jit(jax.vmap(lambda p, k: env.rollout(pol, p, k)))(params, keys)
    pos = np.concatenate([np.asarray(ro.states[..., :2]), np.asarray(ro.descriptors)[:, None]], 1)
    return ro, pos.astype(np.float64)  # (N, T + 1, 2): every position, the final one last


def _crossings(pos, walls):
    """Steps whose L path (x leg at the old y, then y leg at the new x) touches a wall."""
    p, q = pos[:, :-1], pos[:, 1:]
    bad = np.zeros(p.shape[:2], bool)
    for x0, y0, x1, y1 in walls:
        if x0 == x1:  # vertical: the x leg crosses it, or the y leg runs along it
            lo, hi = min(y0, y1), max(y0, y1)
            xl, xh = np.minimum(p[..., 0], q[..., 0]), np.maximum(p[..., 0], q[..., 0])
            bad |= (lo <= p[..., 1]) & (p[..., 1] <= hi) & (xl <= x0) & (x0 <= xh)
            yl, yh = np.minimum(p[..., 1], q[..., 1]), np.maximum(p[..., 1], q[..., 1])
            bad |= (q[..., 0] == x0) & (yl <= hi) & (yh >= lo)
        else:
            lo, hi = min(x0, x1), max(x0, x1)
            yl, yh = np.minimum(p[..., 1], q[..., 1]), np.maximum(p[..., 1], q[..., 1])
            bad |= (lo <= q[..., 0]) & (q[..., 0] <= hi) & (yl <= y0) & (y0 <= yh)
            xl, xh = np.minimum(p[..., 0], q[..., 0]), np.maximum(p[..., 0], q[..., 0])
            bad |= (p[..., 1] == y0) & (xl <= hi) & (xh >= lo)
    return bad


@pytest.mark.parametrize("hidden", [0, 8])
def test_no_policy_crosses_a_maze_wall(hidden):
    env = point_mass_maze()
    pol = mlp_policy(5, 2, hidden) if hidden else POL
    params = 2.0 * jax.random.normal(jax.random.key(hidden), (256, pol.n_params))
    ro, pos = _paths(env, pol, params)
    assert not _crossings(pos, MAZE_WALLS).any()
    # the walls are exercised: many points end a step within two gaps of a wall
    near = np.zeros(pos.shape[:2], bool)
    for x0, y0, x1, y1 in MAZE_WALLS:
        ax, c, lo, hi = (0, x0, min(y0, y1), max(y0, y1)) if x0 == x1 else (1, y0, x0, x1)
        span = pos[..., 1 - ax]
        near |= (np.abs(pos[..., ax] - c) <= 2e-3) & (lo <= span) & (span <= hi)
    assert near.sum() > 100
    # the cup's inside and the region above its roof: most policies stay in the cup
    d = np.asarray(ro.descriptors)
    in_cup = (np.abs(d[:, 0]) < 0.5) & (d[:, 1] > -0.35) & (d[:, 1] < 0.25)
    assert in_cup.mean() > 0.2


def test_a_closed_box_of_walls_is_never_left():
    box = (
        (-0.3, -0.3, 0.3, -0.3),
        (-0.3, 0.3, 0.3, 0.3),
        (-0.3, -0.3, -0.3, 0.3),
        (0.3, -0.3, 0.3, 0.3),
    )
    env = PointMass(walls=box)
    params = 3.0 * jax.random.normal(jax.random.key(7), (512, POL.n_params))
    _, pos = _paths(env, POL, params, seed=3)
    assert np.all(np.abs(pos) < 0.3)  # strictly inside
    assert np.abs(pos).max() >= 0.3 - 1.5e-3  # and pressed against the box
    assert not _crossings(pos, box).any()


def test_open_arena_unchanged_and_maze_agrees_away_from_walls():
    params = jax.random.normal(jax.random.key(2), (32, POL.n_params))
    a, _ = _paths(PointMass(), POL, params)
    b, _ = _paths(PointMass(walls=()), POL, params)
    np.testing.assert_array_equal(a.states, b.states)
    # walls that no path reaches change nothing (the collision is a no-op)
    far = PointMass(walls=((0.99, -0.01, 0.99, 0.01),))
    small = 0.05 * params
    c, _ = _paths(PointMass(), POL, small)
    d, _ = _paths(far, POL, small)
    tol = 1e-12 if c.states.dtype == jnp.float64 else 1e-6  # another program: ulps may move
    np.testing.assert_allclose(c.states, d.states, rtol=tol, atol=tol)
    np.testing.assert_allclose(c.ret, d.ret, rtol=tol)


def test_maze_jits_vmaps_float32_float64_and_nan():
    env = point_mass_maze()
    mlp = mlp_policy(5, 2, 4)
    ro = jax.jit(lambda p: env.rollout(mlp, p, jax.random.key(0)))(jnp.full(mlp.n_params, jnp.nan))
    assert np.isnan(float(ro.ret)) and np.all(np.isnan(np.asarray(ro.descriptors)))
    p32 = jax.random.normal(jax.random.key(4), (8, POL.n_params), jnp.float32)
    r32, pos32 = _paths(env, POL, p32)
    assert r32.states.dtype == jnp.float32 and r32.descriptors.dtype == jnp.float32
    assert not _crossings(pos32, MAZE_WALLS).any()
    with jax.enable_x64(True):
        r64, _ = _paths(env, POL, p32.astype(jnp.float64))
        assert r64.states.dtype == jnp.float64
    # one unbatched rollout equals the vmapped one
    one = env.rollout(POL, p32[3], jax.random.split(jax.random.key(0), 8)[3])
    np.testing.assert_allclose(one.descriptors, r32.descriptors[3], rtol=1e-6)


@pytest.mark.parametrize(
    "walls, match",
    [
        (((0.0, 0.5, 0.2),), "segments"),
        (((0.1, 0.1, 0.3, 0.3),), "vertical or horizontal"),
        (((0.5, 0.5, 0.5, 0.5),), "vertical or horizontal"),
        (((0.5, 0.0, 0.5, 1.5),), r"\[-1, 1\]"),
        (((-0.5, 0.0, 0.5, 0.0),), "start box"),
    ],
)
def test_bad_walls_raise(walls, match):
    with pytest.raises(ValueError, match=match):
        PointMass(walls=walls)
