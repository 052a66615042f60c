r"""Decentralized composite problems: stacked local data, smooth losses, prox operators.

Agent $i$ of $n$ holds a smooth loss $f_i$ on its own data and a share $g/n$ of a
common nonsmooth regularizer $g$; together they solve

$$
\min_x \; \sum_{i=1}^n f_i(x) + g(x), \qquad f_i(x) = \frac{1}{m}\sum_{j=1}^{m}
\ell(a_{ij}^\top x, b_{ij}),
$$

talking only to graph neighbours. The data of all agents are stacked on a leading
agent axis: ``A`` of shape ``(n, m, d)``, ``b`` of shape ``(n, m)``.

Losses (static, hashable objects; their methods act on one agent's data):

* `LeastSquares`: $f_i(x) = \frac{1}{2m}\|A_i x - b_i\|^2$, with a closed-form prox.
* `Logistic`: $f_i(x) = \frac1m \sum_j \log(1 + e^{-b_{ij} a_{ij}^\top x})$, $b \in \{\pm1\}$.
* `SmoothedHinge`: the SVM hinge $\max(0, 1 - b a^\top x)$ with its kink rounded
  by a quadratic over a width $\mu$ (a Huberized hinge, $\nabla$ Lipschitz with $1/\mu$).

A loss may define ``check_data(data)``, a value check of one problem's stacked data
that the solvers run before tracing (`Logistic` and `SmoothedHinge` reject labels
coded 0/1 there, `check_labels`).

Regularizers, through their prox operators $\operatorname{prox}_{cg}(z) =
\arg\min_x c\,g(x) + \frac12\|x - z\|^2$ (parameters live in the problem data):
`Zero`, `L1` ($g = \lambda\|x\|_1$: soft thresholding), `L2Squared`
($g = \frac\lambda2\|x\|^2$), `Box` (the indicator of $lo \le x \le hi$, by
`jaxsolve.projections.box`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxsolve.core.validation import (
    check_finite,
    check_floating,
    check_int,
    check_key,
    is_concrete,
)
from jaxsolve.distributed.graphs import check_mixing, neighbour_lists, sparse_enough
from jaxsolve.projections import box as _project_box

__all__ = [
    "Problem",
    "make_problem",
    "LeastSquares",
    "Logistic",
    "SmoothedHinge",
    "Zero",
    "L1",
    "L2Squared",
    "Box",
    "soft_threshold",
    "check_labels",
    "num_agents",
    "objective",
    "breast_cancer",
    "sparse_binary",
]


class Problem(NamedTuple):
    """The problem data of a decentralized solve (the ``args`` of `jaxsolve.solve`).

    Attributes:
        data: the stacked local data, a pytree whose every leaf has the agent axis
            first (``(A, b)`` with ``A: (n, m, d)``, ``b: (n, m)`` for the losses here).
        W: the ``(n, n)`` mixing matrix (symmetric, doubly stochastic, connected).
        reg: the regularizer's parameters (``lam`` for `L1`/`L2Squared`,
            ``(lo, hi)`` for `Box`, anything for `Zero`).
        neighbours: ``W`` again as padded neighbour lists
            (`jaxsolve.distributed.graphs.Neighbours`), or None. When given, the
            simulation mixes by gathering each agent's neighbours instead of the dense
            product with ``W`` (same values up to rounding); `make_problem` sets it
            for a sparse enough graph. The device mesh mixes by blocks of ``W``.
    """

    data: Any
    W: jax.Array
    reg: Any = 0.0
    neighbours: Any = None

    @property
    def mixing(self):
        """What a round of exchange multiplies by: ``neighbours`` if set, else ``W``."""
        return self.W if self.neighbours is None else self.neighbours


def num_agents(problem: Problem) -> int:
    """The number of agents (the order of ``W``)."""
    return int(np.shape(problem.W)[0])


def make_problem(data, W, reg=0.0, *, neighbours: bool | None = None) -> Problem:
    """A checked `Problem`: ``W`` a valid mixing matrix of the agent count of ``data``.

    ``W`` is cast to the dtype of ``data``. ``neighbours``: whether the simulation
    mixes over neighbour lists (``True``), by the dense product (``False``), or, by
    default, over the lists when the graph is sparse enough for them to be faster
    (its widest row of $W$ has at most $n/8$ and at most 64 nonzeros;
    `jaxsolve.distributed.graphs` says why). Either way the iterates agree up to
    rounding. Raises ``ValueError``/``TypeError`` (naming
    the argument) for a non-real-floating or NaN ``data``, a ``W`` that is not symmetric,
    doubly stochastic and connected, a leading axis of ``data`` other than ``n``, or
    regularizer parameters no regularizer accepts (a negative, infinite or NaN
    weight, a Box with ``lo > hi``).
    """
    check_floating("data", data, real=True)
    check_finite("data", data)
    leaves = jax.tree.leaves(data)
    if not leaves:
        raise ValueError("data is empty")
    check_mixing(W, name="W")
    n = int(np.shape(W)[0])
    for path, leaf in jax.tree_util.tree_leaves_with_path(data):
        if np.ndim(leaf) == 0 or np.shape(leaf)[0] != n:
            raise ValueError(
                f"data{jax.tree_util.keystr(path)} has shape {np.shape(leaf)}: its leading "
                f"(agent) axis must equal the {n} agents of W"
            )
    dtype = jnp.result_type(leaves[0])
    reg = jax.tree.map(lambda v: jnp.asarray(v, dtype), reg)
    _check_reg_params(reg)
    if neighbours not in (None, True, False):
        raise ValueError(f"neighbours must be None, True or False, got {neighbours!r}")
    if neighbours and not is_concrete(W):
        raise ValueError("neighbours=True needs a concrete W (the lists are built on the host)")
    if neighbours is None:
        neighbours = is_concrete(W) and sparse_enough(W)  # a traced W: the dense product
    lists = neighbour_lists(W, dtype) if neighbours else None
    return Problem(data, jnp.asarray(W, dtype), reg, lists)


def _check_reg_params(reg, name: str = "reg") -> None:
    """Raise ``ValueError`` naming ``reg`` for regularizer parameters no regularizer here
    accepts: NaN, a negative weight ``lam`` (an array, for `L1`/`L2Squared`: ``-lam
    ||x||_1`` is unbounded below, and the solvers ran to ``MAX_STEPS``), or a pair
    ``(lo, hi)`` (`Box`) with ``lo > hi``. Tracers are not inspected."""
    if not is_concrete(reg):
        return
    check_finite(name, reg)
    if isinstance(reg, tuple | list):
        if len(reg) == 2:
            lo, hi = (np.asarray(v) for v in reg)
            if np.any(lo > hi):
                raise ValueError(f"{name} = (lo, hi) of a Box must have lo <= hi, got {reg}")
        return
    lam = np.asarray(reg)
    if np.any(lam < 0) or np.any(np.isinf(lam)):
        raise ValueError(
            f"{name} (the weight lam of L1 / L2Squared) must be finite and non-negative, got {reg}"
        )


# --- smooth losses (one agent's data) ------------------------------------------------------


def _rows(data):
    A, b = data
    return A, b, A.shape[0]


def _glm_grads(data, points, dloss):
    r"""The gradients $\frac1m A^\top \ell'(A x, b)$ at the $k$ columns $x$ of ``points``
    (``(d, k)``), as rows ``(k, d)``: $A$ times the $d\times k$ block, then the
    $k\times m$ block of $\ell'$ times $A$, so $k$ gradients cost two passes over $A$
    (the layouts XLA:CPU runs fastest batched over agents), not $2k$."""
    A, b, m = _rows(data)
    return dloss(A @ points, b[:, None]).T @ A / m


def check_labels(data, loss: str) -> None:
    r"""Raise ``ValueError`` for labels ``b`` of ``data = (A, b)`` coded 0/1.

    The losses here score a margin $b\,a^\top x$: the classes are $b = \pm1$ (values
    in between act as soft labels, e.g. to differentiate through the labels). Given 0/1
    labels they do not fail: the rows labelled 0 contribute a constant, and the solver
    converges, with SUCCESS, to the model of the positive rows alone. So labels with a 0
    and no negative value are rejected. The check needs values, so it runs on concrete
    data only (the solvers' ``check_args`` hook, before tracing); tracers pass.
    """
    if not (isinstance(data, tuple | list) and len(data) == 2):
        return  # not (A, b): the shape checks of init report the misfit
    b = data[1]
    if not is_concrete(b):
        return
    b = np.asarray(b)
    if b.size and np.any(b == 0) and not np.any(b < 0):
        raise ValueError(
            f"{loss} needs labels b in {{-1, +1}}, got labels in [0, {float(b.max()):g}] "
            f"with zeros: 0/1 labels fit the positive rows alone; pass 2 * b - 1"
        )


@dataclasses.dataclass(frozen=True)
class LeastSquares:
    r"""$f_i(x) = \frac{1}{2m}\|A_i x - b_i\|^2$, with the exact prox
    $\operatorname{prox}_{cf_i}(z) = (I + \frac cm A_i^\top A_i)^{-1}(z + \frac cm A_i^\top b_i)$
    (by the inverse of the smaller of $I_d + \frac cm A^\top A$ and $\frac mc I_m + AA^\top$,
    from a Cholesky factor made once per solve: the step is then matrix products only)."""

    has_prox = True

    def value(self, x, data):
        A, b, m = _rows(data)
        r = A @ x - b
        return 0.5 * jnp.vdot(r, r) / m

    def grad(self, x, data):
        A, b, m = _rows(data)
        return A.T @ (A @ x - b) / m

    def lipschitz(self, data):
        A, _, m = _rows(data)
        return jnp.linalg.norm(A, 2) ** 2 / m

    def grads_at(self, points, data):
        """``grad`` at each column of ``points`` (``(d, k)``), as ``(k, d)`` rows, in two
        passes over the data (`jaxsolve.distributed.base` uses it for the error)."""
        return _glm_grads(data, points, lambda t, b: t - b)

    def prox_factor(self, data, c):
        A, _, m = _rows(data)
        d = A.shape[1]
        if m <= d:  # Woodbury: the inverse of an m x m matrix
            K = (m / c) * jnp.eye(m, dtype=A.dtype) + A @ A.T
        else:
            K = jnp.eye(d, dtype=A.dtype) + (c / m) * (A.T @ A)
        L = jnp.linalg.cholesky(K)
        return jax.scipy.linalg.cho_solve((L, True), jnp.eye(K.shape[0], dtype=A.dtype))

    def prox(self, z, factor, data, c):
        A, b, m = _rows(data)
        y = z + (c / m) * (A.T @ b)
        if m <= A.shape[1]:
            return y - A.T @ (factor @ (A @ y))
        return factor @ y

    def prox_grad(self, z, factor, data, c, x):
        r"""``(prox(z, factor, data, c), grad(x, data))`` with the two reads of $A$ that
        the Woodbury prox makes shared with the gradient's: $A[y\; x]$ (an $m\times 2$
        product), then $[F A y,\; (Ax - b)/m]^\top A$ (one $2\times d$ product), where
        apart they read $A$ four times. The layouts are the ones XLA:CPU runs fastest
        batched over agents ($A_i$ times a $d\times 2$ block; a $2\times m$ block times
        $A_i$). Same values up to rounding."""
        A, b, m = _rows(data)
        if m > A.shape[1]:
            return self.prox(z, factor, data, c), self.grad(x, data)
        y = z + (c / m) * (A.T @ b)
        P = A @ jnp.stack([y, x], axis=1)
        out = jnp.stack([factor @ P[:, 0], (P[:, 1] - b) / m]) @ A
        return y - out[0], out[1]


@dataclasses.dataclass(frozen=True)
class Logistic:
    r"""$f_i(x) = \frac1m\sum_j \log(1 + \exp(-b_{ij} a_{ij}^\top x))$, labels $b \in \{\pm1\}$;
    $\nabla f_i$ is Lipschitz with $\|A_i\|_2^2 / (4m)$. No closed-form prox: methods take
    gradient (linearized) steps on it."""

    has_prox = False

    def check_data(self, data):
        """Rejects 0/1-coded labels (`check_labels`); called before tracing."""
        check_labels(data, "Logistic")

    def value(self, x, data):
        A, b, _ = _rows(data)
        return jnp.mean(jnp.logaddexp(0.0, -b * (A @ x)))

    def grad(self, x, data):
        A, b, m = _rows(data)
        return A.T @ (-b * jax.nn.sigmoid(-b * (A @ x))) / m

    def grads_at(self, points, data):
        """``grad`` at each column of ``points`` (``(d, k)``), as ``(k, d)`` rows."""
        return _glm_grads(data, points, lambda t, b: -b * jax.nn.sigmoid(-b * t))

    def lipschitz(self, data):
        A, _, m = _rows(data)
        return jnp.linalg.norm(A, 2) ** 2 / (4 * m)


@dataclasses.dataclass(frozen=True)
class SmoothedHinge:
    r"""The SVM hinge with a quadratic kink of width $\mu$: with $t = b\,a^\top x$,
    $h(t) = 0$ for $t \ge 1$, $(1-t)^2/(2\mu)$ for $1-\mu < t < 1$, $1 - t - \mu/2$ for
    $t \le 1-\mu$; $f_i = \frac1m\sum_j h(b_{ij} a_{ij}^\top x)$, $\nabla f_i$ Lipschitz with
    $\|A_i\|_2^2/(\mu m)$."""

    mu: float = 0.5
    has_prox = False

    def __post_init__(self):
        if not (float(self.mu) > 0):
            raise ValueError(f"mu must be positive, got {self.mu}")

    def check_data(self, data):
        """Rejects 0/1-coded labels (`check_labels`); called before tracing."""
        check_labels(data, "SmoothedHinge")

    def _dh(self, t):
        return jnp.where(t >= 1.0, 0.0, jnp.where(t > 1.0 - self.mu, (t - 1.0) / self.mu, -1.0))

    def value(self, x, data):
        A, b, _ = _rows(data)
        t = b * (A @ x)
        mu = self.mu
        h = jnp.where(
            t >= 1.0, 0.0, jnp.where(t > 1.0 - mu, (1.0 - t) ** 2 / (2 * mu), 1.0 - t - mu / 2)
        )
        return jnp.mean(h)

    def grad(self, x, data):
        A, b, m = _rows(data)
        return A.T @ (b * self._dh(b * (A @ x))) / m

    def grads_at(self, points, data):
        """``grad`` at each column of ``points`` (``(d, k)``), as ``(k, d)`` rows."""
        return _glm_grads(data, points, lambda t, b: b * self._dh(b * t))

    def lipschitz(self, data):
        A, _, m = _rows(data)
        return jnp.linalg.norm(A, 2) ** 2 / (self.mu * m)


# --- regularizers: prox of c * g for the whole g (an agent's share is g / n) ---------------


def soft_threshold(z: Float[Array, " ..."], t) -> Float[Array, " ..."]:
    r"""$\operatorname{sign}(z)\max(|z| - t, 0)$: the prox of $t\|\cdot\|_1$."""
    return jnp.sign(z) * jnp.maximum(jnp.abs(z) - t, 0.0)


@dataclasses.dataclass(frozen=True)
class Zero:
    """$g = 0$ (a smooth problem)."""

    def value(self, x, params):
        return jnp.zeros((), x.dtype)

    def prox(self, z, c, params):
        return z


@dataclasses.dataclass(frozen=True)
class L1:
    r"""$g(x) = \lambda\|x\|_1$, ``params = lam``."""

    def value(self, x, params):
        return params * jnp.sum(jnp.abs(x))

    def prox(self, z, c, params):
        return soft_threshold(z, c * params)


@dataclasses.dataclass(frozen=True)
class L2Squared:
    r"""$g(x) = \frac\lambda2\|x\|^2$, ``params = lam``."""

    def value(self, x, params):
        return 0.5 * params * jnp.vdot(x, x)

    def prox(self, z, c, params):
        return z / (1.0 + c * params)


@dataclasses.dataclass(frozen=True)
class Box:
    """The indicator of ``lo <= x <= hi``, ``params = (lo, hi)`` (scalars or ``(d,)``)."""

    def value(self, x, params):
        lo, hi = params
        inside = jnp.all((x >= lo) & (x <= hi))
        return jnp.where(inside, 0.0, jnp.inf).astype(x.dtype)

    def prox(self, z, c, params):
        lo, hi = params
        shape = z.shape
        lo = jnp.broadcast_to(jnp.asarray(lo, z.dtype), shape)
        hi = jnp.broadcast_to(jnp.asarray(hi, z.dtype), shape)
        return _project_box(z, lo, hi)


def objective(loss, reg, x: Float[Array, " d"], problem: Problem) -> jax.Array:
    r"""The centralized objective $\sum_i f_i(x) + g(x)$ at a single point ``x``."""
    fs = jax.vmap(loss.value, in_axes=(None, 0))(x, problem.data)
    return jnp.sum(fs) + reg.value(x, problem.reg)


# --- data generators -------------------------------------------------------------------------


def _split(X, y, n_agents, heterogeneous, order_key, rng):
    m = X.shape[0] // n_agents
    if m < 1:
        raise ValueError(f"n_agents={n_agents} exceeds the {X.shape[0]} samples")
    if heterogeneous:
        idx = np.lexsort((rng.random(len(y)), order_key))
    else:
        idx = rng.permutation(len(y))
    idx = idx[: m * n_agents]
    return X[idx].reshape(n_agents, m, -1), y[idx].reshape(n_agents, m)


def breast_cancer(
    n_agents: int, *, heterogeneous: bool = True, seed: int = 0, dtype=jnp.float64
) -> tuple[jax.Array, jax.Array]:
    """scikit-learn's breast_cancer (569 x 30, standardized) split over ``n_agents``.

    Labels are $\\pm1$. Each agent gets ``569 // n_agents`` samples; ``heterogeneous``
    sorts the samples by label, then by the first feature, before cutting, so agents
    see different classes and feature ranges (local minimizers far apart); otherwise
    the split is a random permutation. Needs scikit-learn (imported here only).

    Returns:
        ``(A, b)`` with shapes ``(n_agents, m, 30)`` and ``(n_agents, m)``.
    """
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = 2.0 * y - 1.0
    rng = np.random.default_rng(seed)
    key = y * 1e3 + X[:, 0]
    A, b = _split(X, y, check_int("n_agents", n_agents), heterogeneous, key, rng)
    return jnp.asarray(A, dtype), jnp.asarray(b, dtype)


def sparse_binary(
    key,
    n_agents: int,
    m: int,
    d: int = 123,
    *,
    density: float = 0.11,
    heterogeneous: bool = True,
    dtype=jnp.float64,
) -> tuple[jax.Array, jax.Array]:
    r"""Seeded synthetic sparse binary classification data, a9a-like (123 binary features,
    about 11% ones per row).

    Features are Bernoulli; with ``heterogeneous`` each agent has its own feature
    frequencies (a random tilt of ``density`` per agent and feature), so the local
    problems differ. Labels are $\operatorname{sign}(a^\top w + \text{noise})$ for a
    sparse planted $w$ (a fifth of the features), centred so both classes occur.

    Returns:
        ``(A, b)`` with shapes ``(n_agents, m, d)`` and ``(n_agents, m)``.
    """
    check_key("key", key)
    shape = tuple(check_int(name, v) for name, v in (("n_agents", n_agents), ("m", m), ("d", d)))
    seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
    rng = np.random.default_rng(seed)  # host-side data: NumPy draws, no compilation
    if heterogeneous:
        tilt = rng.uniform(0.2, 1.8, (shape[0], 1, shape[2]))
    else:
        tilt = np.ones((1, 1, shape[2]))
    A = (rng.random(shape) < np.clip(density * tilt, 0.0, 1.0)).astype(np.float64)
    w = np.where(rng.random(shape[2]) < 0.2, rng.standard_normal(shape[2]), 0.0)
    score = A @ w
    score = score - np.median(score) + 0.3 * rng.standard_normal(score.shape)
    b = np.where(score >= 0, 1.0, -1.0)
    return jnp.asarray(A, dtype), jnp.asarray(b, dtype)
