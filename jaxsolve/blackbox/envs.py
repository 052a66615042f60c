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

__all__ = ["Policy", "linear_policy", "mlp_policy", "EnvState", "Rollout", "PointMass"]


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
    """

    horizon: int = eqx.field(static=True, default=50)
    dt: float = 0.1
    force: float = 0.5
    drag: float = 0.5
    init_noise: float = 0.05

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

    def descriptors(self, state: EnvState) -> jax.Array:
        """The hand-crafted descriptors: the final position (in ``[-1, 1]^2`` by the walls)."""
        return state.pos
