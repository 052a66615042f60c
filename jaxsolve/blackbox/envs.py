r"""Small JAX-native control environments and policies for quality-diversity search on behaviours.

`PointMass`: a point of unit mass in the box $[-1, 1]^2$, starting near the origin
(uniform noise of half-width ``init_noise`` on the position, drawn from the rollout's
key), pushed for ``horizon`` steps of length ``dt`` by a force
$F\,a_t$, $a_t \in [-1, 1]^2$, under linear drag:

$$
v_{t+1} = v_t + \mathrm{dt}\,(F a_t - c\, v_t), \qquad
p_{t+1} = \operatorname{clip}(p_t + \mathrm{dt}\, v_{t+1}, -1, 1),
$$

and a wall stops the velocity component that pushes into it. The return is
$J = 1 - \frac{1}{2T}\sum_t \|a_t\|^2 \in [0, 1]$ (a control cost: getting far from
the origin costs force, so quality and diversity pull apart, as in pyribs' arm
repertoire). The hand-crafted descriptors are the final position, in $[-1, 1]^2$.
Observations are $(p, v, 2t/T - 1)$: with the time feature a linear policy can turn.

**Interior walls (the maze).** ``PointMass(walls=...)`` adds axis-aligned wall
segments of zero thickness, each ``(x0, y0, x1, y1)`` with ``x0 == x1`` (vertical) or
``y0 == y1`` (horizontal), closed at both ends. A step moves the point along $x$
first (at the old $y$), then along $y$ (at the new $x$): an L-shaped path. In each
leg, a wall whose span contains the fixed coordinate and whose line the leg reaches
or crosses stops the point ``wall_gap`` short of the nearest such wall, on the side
it came from, and zeroes that velocity component (as the outer walls do). The point
therefore never crosses a wall: any wall between the old and the stopped position
would have been nearer. Leg by leg collision is exact for an L path, cheap (a masked
minimum over the walls, so it jits and vmaps) and seals corners where two walls
meet. With no walls (the default) the dynamics are exactly the open arena above.

`point_mass_maze` builds the maze that bench/blackbox.py uses: an inverted cup around
the start, roof $y = 0.25$ for $|x| \le 0.5$ and sides $x = \pm 0.5$ for
$-0.35 \le y \le 0.25$, open downwards. Why: in the open arena the final position is
a smooth function of the policy's parameters, so CMA-MAE that searches the final
position directly is the natural winner. Behind the roof (the upper half, nearest to
the start) the final position is reached only by first moving away, down out of the
cup, sideways past its side and up: a deceptive maze in the sense of Lehman and
Stanley's novelty search (2011), where the stepping stones differ in their
trajectories more than in where they end (a policy pressed against the roof from
inside ends near one that crept round the corner). That is the case AutoQD's learned
occupancy descriptors (Hedayatian and Nikolaidis, ICLR 2026) are meant for.

Policies map a flat parameter vector and an observation to an action in
$[-1, 1]^{m}$ (``tanh`` output), so CMA-ES searches the vector directly:
`linear_policy` ($\tanh(W o + b)$) and `mlp_policy` (one ``tanh`` hidden layer).
Everything is a pure function: `PointMass.rollout` jits and vmaps over parameters
and keys, and a NaN in the parameters gives NaN states, return and descriptors
(which the archives never insert) rather than an error.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = [
    "Policy",
    "linear_policy",
    "mlp_policy",
    "EnvState",
    "Rollout",
    "PointMass",
    "MAZE_WALLS",
    "point_mass_maze",
]


class Policy(eqx.Module):
    """A policy over flat parameters: ``policy(params, obs) -> action`` in ``[-1, 1]^act_dim``.

    Attributes:
        obs_dim: length of an observation (static int).
        act_dim: length of an action (static int).
        hidden: hidden ``tanh`` units; 0 for the linear policy (static int).
    """

    obs_dim: int = eqx.field(static=True)
    act_dim: int = eqx.field(static=True)
    hidden: int = eqx.field(static=True)  # 0: linear

    @property
    def n_params(self) -> int:
        """Length of the flat parameter vector."""
        o, a, h = self.obs_dim, self.act_dim, self.hidden
        return (o + 1) * a if h == 0 else (o + 1) * h + (h + 1) * a

    def __call__(self, params, obs):
        o, a, h = self.obs_dim, self.act_dim, self.hidden
        if h == 0:
            W, b = params[: o * a].reshape(a, o), params[o * a :]
            return jnp.tanh(W @ obs + b)
        n1 = o * h
        W1, b1 = params[:n1].reshape(h, o), params[n1 : n1 + h]
        W2, b2 = params[n1 + h : n1 + h + h * a].reshape(a, h), params[n1 + h + h * a :]
        return jnp.tanh(W2 @ jnp.tanh(W1 @ obs + b1) + b2)


def linear_policy(obs_dim: int, act_dim: int) -> Policy:
    """$a = \\tanh(W o + b)$: ``(obs_dim + 1) * act_dim`` parameters (``W`` row-major, then ``b``)."""
    return Policy(int(obs_dim), int(act_dim), 0)


def mlp_policy(obs_dim: int, act_dim: int, hidden: int = 8) -> Policy:
    """$a = \\tanh(W_2 \\tanh(W_1 o + b_1) + b_2)$ with ``hidden`` units."""
    if hidden < 1:
        raise ValueError(f"hidden must be >= 1, got {hidden!r}")
    return Policy(int(obs_dim), int(act_dim), int(hidden))


class EnvState(NamedTuple):
    """The point mass's state.

    Attributes:
        pos: position ``(2,)`` in ``[-1, 1]^2``.
        vel: velocity ``(2,)``.
        t: steps taken so far (int32 scalar).
    """

    pos: jax.Array
    vel: jax.Array
    t: jax.Array


class Rollout(NamedTuple):
    """One episode.

    Attributes:
        states: ``(T, 4)`` position and velocity before each action.
        actions: ``(T, 2)`` the actions taken, in ``[-1, 1]^2``.
        ret: the return $J$ (scalar, in ``[0, 1]``; NaN for NaN parameters).
        descriptors: the hand-crafted descriptors, the final position ``(2,)``.
    """

    states: jax.Array
    actions: jax.Array
    ret: jax.Array
    descriptors: jax.Array

    @property
    def state_actions(self) -> jax.Array:
        """``(T, 6)`` state-action vectors, what AutoQD's occupancy embedding reads."""
        return jnp.concatenate([self.states, self.actions], axis=-1)


class PointMass(eqx.Module):
    """2-D point-mass navigation (module docstring); the defaults reach the walls at
    moderate force.

    Attributes:
        horizon: steps per episode $T$ (static int).
        dt: the time step.
        force: the force $F$ at full action.
        drag: the linear drag coefficient $c$.
        init_noise: half-width of the uniform noise on the start position.
        walls: interior wall segments ``((x0, y0, x1, y1), ...)``, each vertical or
            horizontal, inside ``[-1, 1]^2`` and clear of the start box (static; default
            none: the open arena).
        wall_gap: how far short of a wall a blocked point stops.
    """

    horizon: int = eqx.field(static=True, default=50)
    dt: float = 0.1
    force: float = 0.5
    drag: float = 0.5
    init_noise: float = 0.05
    walls: tuple = eqx.field(static=True, default=())
    wall_gap: float = 1e-3

    def __check_init__(self):
        for w in self.walls:
            if len(w) != 4:
                raise ValueError(f"walls must be (x0, y0, x1, y1) segments, got {w!r}")
            x0, y0, x1, y1 = (float(v) for v in w)
            if (x0 == x1) == (y0 == y1):
                raise ValueError(f"a wall must be vertical or horizontal (not a point), got {w!r}")
            if max(abs(x0), abs(y0), abs(x1), abs(y1)) > 1:
                raise ValueError(f"walls must lie in [-1, 1]^2, got {w!r}")
            lo_x, hi_x, lo_y, hi_y = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
            r = float(self.init_noise)
            if lo_x <= r and hi_x >= -r and lo_y <= r and hi_y >= -r:
                raise ValueError(f"a wall must not touch the start box [-{r}, {r}]^2, got {w!r}")

    obs_dim = 5
    act_dim = 2
    state_action_dim = 6
    descriptor_dim = 2
    descriptor_ranges = ((-1.0, 1.0), (-1.0, 1.0))

    def reset(self, key, dtype=jnp.float32) -> EnvState:
        """The start state: position uniform in ``[-init_noise, init_noise]^2``, at rest."""
        pos = jax.random.uniform(key, (2,), dtype, -self.init_noise, self.init_noise)
        return EnvState(pos, jnp.zeros(2, dtype), jnp.int32(0))

    def observe(self, state: EnvState) -> jax.Array:
        """$(p, v, 2t/T - 1)$."""
        dt = state.pos.dtype
        phase = 2 * state.t.astype(dt) / self.horizon - 1
        return jnp.concatenate([state.pos, state.vel, phase[None]])

    def step(self, state: EnvState, action):
        """``(next_state, reward)``; ``action`` is clipped to ``[-1, 1]^2``."""
        a = jnp.clip(action, -1.0, 1.0)
        vel = state.vel + self.dt * (self.force * a - self.drag * state.vel)
        raw = state.pos + self.dt * vel
        pos = jnp.clip(raw, -1.0, 1.0)
        vel = jnp.where(raw != pos, 0.0, vel)  # the wall absorbs the normal velocity
        if self.walls:
            pos, vel = self._collide(state.pos, pos, vel)
        reward = (1.0 - 0.5 * jnp.sum(a**2)) / self.horizon
        return EnvState(pos, vel, state.t + 1), reward

    def rollout(self, policy, params, key) -> Rollout:
        """One episode of ``policy(params, obs)`` from ``reset(key)`` (a ``lax.scan``)."""
        params = jnp.asarray(params)
        s0 = self.reset(key, params.dtype)

        def body(s, _):
            a = jnp.clip(policy(params, self.observe(s)), -1.0, 1.0)
            s2, r = self.step(s, a)
            return s2, (jnp.concatenate([s.pos, s.vel]), a, r)

        sT, (states, actions, rewards) = jax.lax.scan(body, s0, None, length=self.horizon)
        return Rollout(states, actions, jnp.sum(rewards), self.descriptors(sT))

    def _collide(self, old, new, vel):
        """The interior walls on the L path ``old -> (new_x, old_y) -> new`` (module
        docstring): ``(pos, vel)`` stopped short of the nearest wall of each leg."""
        dt = old.dtype
        W = jnp.asarray(self.walls, dt)  # (n, 4)
        vertical = W[:, 0] == W[:, 2]

        def leg(a0, a1, fixed, c, lo, hi, mine):
            # the leg a0 -> a1 along one axis at the other coordinate `fixed`
            side = jnp.sign(a0 - c)
            reach = (a1 - c) * side <= 0  # reaches or crosses the line (False for NaN)
            hit = mine & (lo <= fixed) & (fixed <= hi) & (side != 0) & reach
            dist = jnp.where(hit, jnp.abs(c - a0), jnp.inf)
            j = jnp.argmin(dist)
            stop = c[j] + side[j] * self.wall_gap
            blocked = jnp.any(hit)
            return jnp.where(blocked, stop, a1), blocked

        x, bx = leg(
            old[0], new[0], old[1], W[:, 0], jnp.minimum(W[:, 1], W[:, 3]),
            jnp.maximum(W[:, 1], W[:, 3]), vertical,
        )  # fmt: skip
        y, by = leg(
            old[1], new[1], x, W[:, 1], jnp.minimum(W[:, 0], W[:, 2]),
            jnp.maximum(W[:, 0], W[:, 2]), ~vertical,
        )  # fmt: skip
        vel = jnp.stack([jnp.where(bx, 0.0, vel[0]), jnp.where(by, 0.0, vel[1])]).astype(dt)
        return jnp.stack([x, y]).astype(dt), vel

    def descriptors(self, state: EnvState) -> jax.Array:
        """The hand-crafted descriptors: the final position (in ``[-1, 1]^2`` by the walls)."""
        return state.pos


#: The maze of `point_mass_maze` (module docstring): an inverted cup around the start,
#: roof ``y = 0.25`` for ``|x| <= 0.5``, sides ``x = +-0.5`` for ``-0.35 <= y <= 0.25``.
MAZE_WALLS = (
    (-0.5, 0.25, 0.5, 0.25),
    (-0.5, -0.35, -0.5, 0.25),
    (0.5, -0.35, 0.5, 0.25),
)


def point_mass_maze(**kwargs) -> PointMass:
    """`PointMass` with the deceptive cup maze `MAZE_WALLS` (other fields as keywords)."""
    return PointMass(walls=MAZE_WALLS, **kwargs)
