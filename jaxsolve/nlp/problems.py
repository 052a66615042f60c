r"""Test problems for constrained nonlinear programming: Hock-Schittkowski and trajectories.

Each problem is an `NLP` (functions of ``(x, args)``, bounds, start, known optimum)
in the form `jaxsolve.nlp.sqp` takes: ``eq(x) = 0``, ``ineq(x) <= 0``. The
Hock-Schittkowski problems are from W. Hock and K. Schittkowski, *Test Examples for
Nonlinear Programming Codes*, Lecture Notes in Econ. and Math. Systems 187 (1981),
with their published optima.

`unicycle` builds obstacle-avoidance trajectory optimization over a horizon: the
decision vector stacks the states $(p_x, p_y, \theta)_{1..T}$ and the inputs
$(v, \omega)_{0..T-1}$; the dynamics $s_{t+1} = s_t + \Delta t\,(v_t \cos\theta_t,
v_t \sin\theta_t, \omega_t)$ are equalities, each circular obstacle
$r_j^2 - \|p_t - c_j\|^2 \le 0$ an inequality at every step, the inputs are boxed,
and the cost is $\sum_t \|u_t\|^2 + w \|p_T - p_{goal}\|^2$. The problem data (start,
goal, obstacles) is ``args``, so one compiled solver serves a batch of scenarios.
`safety_filter` turns the same constraints into a predictive safety filter: the
closest input sequence to a reference that keeps the trajectory collision free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_key

__all__ = [
    "NLP",
    "hs006",
    "hs021",
    "hs035",
    "hs040",
    "hs071",
    "rosenbrock_disk",
    "hock_schittkowski",
    "UnicycleData",
    "unicycle",
    "unicycle_data",
    "unicycle_rollout",
    "safety_filter",
]


class NLP(NamedTuple):
    """A test problem: ``min fun(x, args)`` s.t. ``eq(x, args) = 0``, ``ineq(x, args) <= 0``,
    ``lb <= x <= ub``; ``x0`` the standard start, ``f_star`` the published optimum
    (``None`` if not known)."""

    name: str
    fun: Callable
    eq: Callable | None
    ineq: Callable | None
    lb: Any
    ub: Any
    x0: np.ndarray
    f_star: float | None


def hs006() -> NLP:
    """HS6: $\\min (1 - x_1)^2$ s.t. $10 (x_2 - x_1^2) = 0$; optimum 0 at (1, 1)."""
    return NLP(
        "hs006",
        lambda x, a: (1 - x[0]) ** 2,
        lambda x, a: jnp.array([10 * (x[1] - x[0] ** 2)]),
        None,
        None,
        None,
        np.array([-1.2, 1.0]),
        0.0,
    )


def hs021() -> NLP:
    """HS21: $\\min 0.01 x_1^2 + x_2^2 - 100$ s.t. $10 x_1 - x_2 \\ge 10$, boxes; the start
    (-1, -1) is infeasible; optimum -99.96 at (2, 0)."""
    return NLP(
        "hs021",
        lambda x, a: 0.01 * x[0] ** 2 + x[1] ** 2 - 100,
        None,
        lambda x, a: jnp.array([10 - 10 * x[0] + x[1]]),
        np.array([2.0, -50.0]),
        np.array([50.0, 50.0]),
        np.array([-1.0, -1.0]),
        -99.96,
    )


def hs035() -> NLP:
    """HS35 (a convex QP written as an NLP): optimum 1/9 at (4/3, 7/9, 4/9)."""

    def f(x, a):
        return (
            9
            - 8 * x[0]
            - 6 * x[1]
            - 4 * x[2]
            + 2 * x[0] ** 2
            + 2 * x[1] ** 2
            + x[2] ** 2
            + 2 * x[0] * x[1]
            + 2 * x[0] * x[2]
        )

    return NLP(
        "hs035",
        f,
        None,
        lambda x, a: jnp.array([x[0] + x[1] + 2 * x[2] - 3]),
        np.zeros(3),
        None,
        np.array([0.5, 0.5, 0.5]),
        1 / 9,
    )


def hs040() -> NLP:
    """HS40: $\\min -x_1 x_2 x_3 x_4$ s.t. three nonlinear equalities; optimum -0.25."""
    return NLP(
        "hs040",
        lambda x, a: -x[0] * x[1] * x[2] * x[3],
        lambda x, a: jnp.array(
            [x[0] ** 3 + x[1] ** 2 - 1, x[0] ** 2 * x[3] - x[2], x[3] ** 2 - x[1]]
        ),
        None,
        None,
        None,
        np.array([0.8, 0.8, 0.8, 0.8]),
        -0.25,
    )


def hs071() -> NLP:
    """HS71 (IPOPT's tutorial problem): $\\min x_1 x_4 (x_1 + x_2 + x_3) + x_3$ s.t.
    $x_1 x_2 x_3 x_4 \\ge 25$, $\\|x\\|^2 = 40$, $1 \\le x \\le 5$; optimum 17.0140173."""
    return NLP(
        "hs071",
        lambda x, a: x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2],
        lambda x, a: jnp.array([jnp.sum(x**2) - 40]),
        lambda x, a: jnp.array([25 - jnp.prod(x)]),
        np.ones(4),
        np.full(4, 5.0),
        np.array([1.0, 5.0, 5.0, 1.0]),
        17.0140173,
    )


def rosenbrock_disk() -> NLP:
    """Rosenbrock's function on the disk $x_1^2 + x_2^2 \\le 1.5$ (the constraint is
    active at the optimum, which is not (1, 1)); optimum not published: compare with
    a reference solver."""
    return NLP(
        "rosenbrock_disk",
        lambda x, a: (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2,
        None,
        lambda x, a: jnp.array([x[0] ** 2 + x[1] ** 2 - 1.5]),
        None,
        None,
        np.array([-1.2, 1.0]),
        None,
    )


def hock_schittkowski() -> list[NLP]:
    """All the problems above, in one list."""
    return [hs006(), hs021(), hs035(), hs040(), hs071(), rosenbrock_disk()]


# --- trajectory optimization -----------------------------------------------------------


class UnicycleData(NamedTuple):
    """One obstacle-avoidance scenario (the ``args`` of `unicycle`'s functions).

    Attributes:
        start: ``(3,)`` initial state $(p_x, p_y, \\theta)$.
        goal: ``(2,)`` goal position.
        centers: ``(J, 2)`` obstacle centres.
        radii: ``(J,)`` obstacle radii.
        u_ref: ``(T, 2)`` reference inputs (used by `safety_filter` only).
    """

    start: jax.Array
    goal: jax.Array
    centers: jax.Array
    radii: jax.Array
    u_ref: jax.Array


def _split(z, T):
    states = z[: 3 * T].reshape(T, 3)
    inputs = z[3 * T :].reshape(T, 2)
    return states, inputs


def _dynamics(states, inputs, start, dt):
    prev = jnp.concatenate([start[None], states[:-1]])
    th = prev[:, 2]
    v, w = inputs[:, 0], inputs[:, 1]
    pred = prev + dt * jnp.stack([v * jnp.cos(th), v * jnp.sin(th), w], axis=1)
    return (states - pred).reshape(-1)


def _check_horizon(T, dt, **positive) -> None:
    """T a positive int, dt and the named limits positive finite numbers (naming each)."""
    if isinstance(T, bool) or not isinstance(T, int | np.integer) or T < 1:
        raise ValueError(f"T must be a positive int (the horizon), got {T!r}")
    for name, v in {"dt": dt, **positive}.items():
        if not (isinstance(v, int | float | np.number) and np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")


def _obstacles(states, d: UnicycleData):
    diff = states[:, None, :2] - d.centers[None]
    return (d.radii[None] ** 2 - jnp.sum(diff**2, -1)).reshape(-1)


def unicycle(
    T: int = 30,
    dt: float = 0.1,
    *,
    v_max: float = 2.0,
    w_max: float = 2.0,
    goal_weight: float = 100.0,
) -> NLP:
    """The unicycle obstacle-avoidance NLP over horizon ``T`` (module docstring).

    ``x0`` is the all-zero decision vector; use `unicycle_rollout` for a start from
    the reference inputs. The data (`UnicycleData`) comes from `unicycle_data`.
    ``T`` must be a positive int and ``dt``, ``v_max``, ``w_max``, ``goal_weight``
    positive (checked, naming the argument).
    """
    _check_horizon(T, dt, v_max=v_max, w_max=w_max, goal_weight=goal_weight)
    n = 5 * T
    lb = np.concatenate([np.full(3 * T, -np.inf), np.tile([-v_max, -w_max], T)])
    ub = np.concatenate([np.full(3 * T, np.inf), np.tile([v_max, w_max], T)])

    def fun(z, d):
        states, inputs = _split(z, T)
        return jnp.sum(inputs**2) * dt + goal_weight * jnp.sum((states[-1, :2] - d.goal) ** 2)

    def eq(z, d):
        states, inputs = _split(z, T)
        return _dynamics(states, inputs, d.start, dt)

    def ineq(z, d):
        states, _ = _split(z, T)
        return _obstacles(states, d)

    return NLP(f"unicycle_T{T}", fun, eq, ineq, lb, ub, np.zeros(n), None)


def unicycle_rollout(data: UnicycleData, inputs, dt: float = 0.1):
    """The decision vector of the trajectory that ``inputs`` ``(T, 2)`` drive from
    ``data.start`` (dynamically feasible, obstacles ignored): a start for `unicycle`.
    ``inputs`` must be real and shaped ``(T, 2)`` (checked)."""
    inputs = jnp.asarray(inputs)
    if inputs.ndim != 2 or inputs.shape[1] != 2 or inputs.shape[0] == 0:
        raise ValueError(f"inputs must have shape (T, 2) (v, omega per step), got {inputs.shape}")
    if not jnp.issubdtype(inputs.dtype, jnp.floating):
        raise TypeError(f"inputs must be real floating point, got dtype {inputs.dtype}")

    def f(s, u):
        s = s + dt * jnp.array([u[0] * jnp.cos(s[2]), u[0] * jnp.sin(s[2]), u[1]])
        return s, s

    _, states = jax.lax.scan(f, jnp.asarray(data.start), jnp.asarray(inputs))
    return jnp.concatenate([states.reshape(-1), jnp.asarray(inputs).reshape(-1)])


def unicycle_data(
    key, T: int = 30, n_obstacles: int = 2, *, dtype=jnp.float64, v_ref: float = 1.0
) -> UnicycleData:
    """A random scenario: start near the origin heading +x, goal about ``T dt v_ref``
    ahead, obstacles of radius 0.2-0.4 placed near the straight line between them.
    ``key`` must be a `jax.random` key, ``T`` a positive int, ``n_obstacles`` a
    non-negative int and ``dtype`` a real float (checked, naming the argument)."""
    check_key("key", key)
    _check_horizon(T, 0.1, v_ref=v_ref)
    if isinstance(n_obstacles, bool) or not isinstance(n_obstacles, int | np.integer):
        raise ValueError(f"n_obstacles must be a non-negative int, got {n_obstacles!r}")
    if n_obstacles < 0:
        raise ValueError(f"n_obstacles must be a non-negative int, got {n_obstacles!r}")
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a real floating-point dtype, got {jnp.dtype(dtype)}")
    k1, k2, k3, k4 = jax.random.split(key, 4)
    dist = 0.1 * T * v_ref
    start = jnp.concatenate([0.1 * jax.random.normal(k1, (2,)), jnp.zeros(1)])
    goal = jnp.array([dist, 0.0]) + 0.2 * jax.random.normal(k2, (2,))
    along = jax.random.uniform(k3, (n_obstacles,), minval=0.3, maxval=0.7) * dist
    across = 0.25 * jax.random.normal(k4, (n_obstacles,))
    centers = jnp.stack([along, across], 1)
    radii = jax.random.uniform(jax.random.fold_in(key, 7), (n_obstacles,), minval=0.2, maxval=0.4)
    u_ref = jnp.tile(jnp.array([v_ref, 0.0]), (T, 1))
    return jax.tree.map(
        lambda v: jnp.asarray(v, dtype), UnicycleData(start, goal, centers, radii, u_ref)
    )


def safety_filter(
    T: int = 30, dt: float = 0.1, *, v_max: float = 2.0, w_max: float = 2.0, first_weight=10.0
) -> NLP:
    """A predictive safety filter: the input sequence closest to ``data.u_ref`` (the
    first input weighted ``first_weight``, the one that is applied) whose trajectory
    avoids every obstacle; same variables and constraints as `unicycle` (and its
    checks; ``first_weight`` must be positive)."""
    _check_horizon(T, dt, v_max=v_max, w_max=w_max, first_weight=first_weight)
    base = unicycle(T, dt, v_max=v_max, w_max=w_max)
    w = jnp.ones(T).at[0].set(first_weight)

    def fun(z, d):
        _, inputs = _split(z, T)
        return jnp.sum(w[:, None] * (inputs - d.u_ref) ** 2)

    return base._replace(name=f"safety_filter_T{T}", fun=fun)
