r"""Communication graphs, Metropolis-Hastings mixing matrices and their checks.

Graphs are built on the host, once, as symmetric 0/1 adjacency matrices (NumPy,
no self-loops); a mixing matrix $W$ is a symmetric, doubly stochastic matrix with
$W_{ij} \ne 0$ only on edges and the diagonal. Every decentralized method of
`jaxsolve.distributed` (and any later federated or gossip method) takes $W$ as
problem data, so the checks here are shared by all of them.

The Metropolis-Hastings weights are

$$
W_{ij} = \frac{1}{1 + \max(\deg_i, \deg_j)} \quad (ij \in E), \qquad
W_{ii} = 1 - \sum_{j \ne i} W_{ij},
$$

symmetric and doubly stochastic for any undirected graph, with eigenvalues in
$(-1, 1]$; $1$ is simple exactly when the graph is connected. The spectral gap is
$1 - \max(|\lambda_2|, |\lambda_n|)$.

**Neighbour lists.** A round of exchange is the product $WZ$ ($Z$ the agents' stacked
vectors, ``(n, d)``). Dense, it costs $n^2 d$ multiply-adds; over the graph, agent $i$
only sums its $\deg_i + 1$ terms. `neighbour_lists` stores $W$ padded to the widest
row (ELL format: per agent the column indices and weights of its row, short rows
padded with the agent's own index and weight 0) so that the simulation's ``mix``
(`jaxsolve.distributed.base.Simulated`) gathers $K$ rows of $Z$ per agent instead.
On the 2 CPU cores measured (n = 256, d = 1000, float64) the gathered sum of
$K = 26$ terms takes 0.55 ms against 1.9 ms for the dense product, and breaks even
near $K = n/4$ (BLAS's matrix product does more work per second than a gather), so
`make_problem` uses the lists when $K \le n/8$ (and $K \le 64$: the $K$ terms are
unrolled in the program).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from jaxsolve.core.validation import check_key, is_concrete

__all__ = [
    "ring",
    "grid",
    "erdos_renyi",
    "from_adjacency",
    "metropolis_hastings",
    "spectral_gap",
    "check_mixing",
    "is_connected",
    "neighbors",
    "Neighbours",
    "neighbour_lists",
]

#: `make_problem` stores $W$ as neighbour lists when the widest row has at most this
#: fraction of the agents (and at most `MAX_WIDTH` entries); see the module docstring.
SPARSE_FRACTION = 1 / 8
MAX_WIDTH = 64


def _count(name: str, n) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"{name} must be a positive int, got {n!r}")
    return int(n)


def is_connected(adjacency: ArrayLike) -> bool:
    """Whether the undirected graph of a 0/1 adjacency matrix is connected (a BFS)."""
    a = np.asarray(adjacency) != 0
    n = a.shape[0]
    seen = np.zeros(n, bool)
    seen[0] = True
    frontier = np.array([0])
    while frontier.size:
        nxt = np.flatnonzero(a[frontier].any(axis=0) & ~seen)
        seen[nxt] = True
        frontier = nxt
    return bool(seen.all())


def from_adjacency(adjacency: ArrayLike) -> np.ndarray:
    """A checked adjacency matrix: square, symmetric, 0/1, connected.

    The diagonal is ignored (set to zero). Raises ``ValueError`` naming what is wrong.

    Args:
        adjacency: an ``(n, n)`` array; nonzero off-diagonal entries are edges.

    Returns:
        An ``(n, n)`` NumPy bool-valued float array (1.0 on edges, 0 elsewhere).
    """
    a = np.asarray(adjacency)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"adjacency must be a non-empty square matrix, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.number) and a.dtype != np.bool_:
        raise TypeError(f"adjacency must be numeric or bool, got dtype {a.dtype}")
    a = (a != 0).astype(np.float64)
    np.fill_diagonal(a, 0.0)
    if not np.array_equal(a, a.T):
        raise ValueError("adjacency must be symmetric (an undirected graph)")
    if not is_connected(a):
        raise ValueError(
            "adjacency: the graph is disconnected; decentralized consensus needs a connected graph"
        )
    return a


def ring(n: int) -> np.ndarray:
    """The cycle on ``n >= 3`` agents (agent i talks to i-1 and i+1 mod n)."""
    n = _count("n", n)
    if n < 3:
        raise ValueError(f"n must be >= 3 for a ring, got {n}")
    a = np.zeros((n, n))
    i = np.arange(n)
    a[i, (i + 1) % n] = a[(i + 1) % n, i] = 1.0
    return a


def grid(r: int, c: int) -> np.ndarray:
    """The ``r x c`` 2-D grid (4-neighbour lattice, no wrap-around), agents row-major."""
    r, c = _count("r", r), _count("c", c)
    if r * c < 2:
        raise ValueError(f"a grid needs at least 2 agents, got {r}x{c}")
    a = np.zeros((r * c, r * c))
    idx = np.arange(r * c).reshape(r, c)
    for u, v in ((idx[:, :-1], idx[:, 1:]), (idx[:-1, :], idx[1:, :])):
        a[u.ravel(), v.ravel()] = a[v.ravel(), u.ravel()] = 1.0
    return a


def erdos_renyi(key: jax.Array, n: int, p: float, *, max_tries: int = 100) -> np.ndarray:
    """A connected Erdos-Renyi graph $G(n, p)$, re-drawn until connected.

    Args:
        key: a ``jax.random`` key (the draws are reproducible from it).
        n: number of agents (``>= 2``).
        p: edge probability in ``(0, 1]``.
        max_tries: draws before giving up with ``ValueError`` (``p`` too small for
            ``n``: connectivity needs roughly ``p > log(n) / n``).

    Returns:
        The ``(n, n)`` adjacency matrix (NumPy, 0/1 floats).
    """
    n = _count("n", n)
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    if not (0.0 < float(p) <= 1.0):
        raise ValueError(f"p must be in (0, 1], got {p}")
    check_key("key", key)
    seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
    rng = np.random.default_rng(seed)
    for _ in range(_count("max_tries", max_tries)):
        upper = np.triu(rng.random((n, n)) < p, 1)
        a = (upper | upper.T).astype(np.float64)
        if is_connected(a):
            return a
    raise ValueError(
        f"erdos_renyi: no connected G({n}, {p}) in {max_tries} draws; raise p "
        f"(about log(n)/n = {np.log(n) / n:.3f} is the connectivity threshold)"
    )


def metropolis_hastings(adjacency: ArrayLike) -> np.ndarray:
    r"""Metropolis-Hastings mixing weights of a connected graph.

    $W_{ij} = 1/(1 + \max(\deg_i, \deg_j))$ on edges, $W_{ii} = 1 - \sum_{j\ne i} W_{ij}$.

    Args:
        adjacency: an ``(n, n)`` adjacency matrix (checked by `from_adjacency`).

    Returns:
        The ``(n, n)`` float64 mixing matrix (symmetric, doubly stochastic).
    """
    a = from_adjacency(adjacency)
    deg = a.sum(axis=1)
    w = a / (1.0 + np.maximum(deg[:, None], deg[None, :]))
    w[np.diag_indices_from(w)] = 1.0 - w.sum(axis=1)
    return w


def neighbors(W: ArrayLike) -> tuple[tuple[int, ...], ...]:
    """Each agent's neighbours (the off-diagonal support of ``W``), as Python tuples."""
    w = np.asarray(W)
    return tuple(tuple(int(j) for j in np.flatnonzero(w[i]) if j != i) for i in range(len(w)))


class Neighbours(NamedTuple):
    """A mixing matrix as padded neighbour lists (ELL): row $i$ of $W$ is
    ``sum_k weight[i, k] * e_{index[i, k]}``.

    Attributes:
        index: ``(n, K)`` int32, the columns of row $i$'s nonzeros (its own index where
            padded).
        weight: ``(n, K)``, their values (0 where padded).
    """

    index: jax.Array
    weight: jax.Array

    def adjacency(self) -> Neighbours:
        """The graph's 0/1 adjacency without self-loops, in the same lists."""
        own = self.index == jnp.arange(self.index.shape[0], dtype=self.index.dtype)[:, None]
        return Neighbours(self.index, ((self.weight != 0) & ~own).astype(self.weight.dtype))


def neighbour_lists(W: ArrayLike, dtype=None) -> Neighbours:
    """``W`` (concrete, ``(n, n)``) as `Neighbours`, padded to its widest row (at least
    one entry: a zero row becomes its own index with weight 0). The order within a
    row is the column order. ``dtype``: of the weights (default ``W``'s)."""
    w = np.asarray(W)
    n = w.shape[0]
    nz = w != 0
    width = max(int(nz.sum(axis=1).max(initial=0)), 1)
    index = np.repeat(np.arange(n, dtype=np.int32)[:, None], width, axis=1)
    weight = np.zeros((n, width), w.dtype)
    for i in range(n):
        cols = np.flatnonzero(nz[i])
        index[i, : cols.size] = cols
        weight[i, : cols.size] = w[i, cols]
    return Neighbours(jnp.asarray(index), jnp.asarray(weight, dtype or w.dtype))


def sparse_enough(W: ArrayLike) -> bool:
    """Whether `neighbour_lists` mixes faster than the dense product (module docstring):
    the widest row of ``W`` (concrete) has at most ``SPARSE_FRACTION * n`` and at most
    ``MAX_WIDTH`` nonzeros."""
    w = np.asarray(W)
    width = int((w != 0).sum(axis=1).max(initial=0))
    return width <= min(SPARSE_FRACTION * w.shape[0], MAX_WIDTH)


def spectral_gap(W: Float[Array, "n n"]) -> float:
    r"""$1 - \max(|\lambda_2(W)|, |\lambda_n(W)|)$ of a symmetric mixing matrix."""
    ev = np.sort(np.linalg.eigvalsh(np.asarray(W, np.float64)))
    if ev.size == 1:
        return 1.0
    return float(1.0 - max(abs(ev[-2]), abs(ev[0])))


def check_mixing(W: ArrayLike, *, name: str = "W", atol: float = 1e-10) -> None:
    """Raise ``ValueError`` unless ``W`` is a valid mixing matrix.

    Checked: square, finite, symmetric, rows (hence columns) summing to one,
    eigenvalues in $(-1, 1]$ with $1$ simple (the support graph is connected).
    Skipped for traced values (inside a user's ``jit``/``vmap``).

    Args:
        W: the ``(n, n)`` matrix.
        name: the argument's name in the messages.
        atol: tolerance of the symmetry and row-sum checks.
    """
    if not is_concrete(W):
        return
    w = np.asarray(W, np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} contains NaN or Inf")
    if np.max(np.abs(w - w.T)) > atol:
        raise ValueError(
            f"{name} must be symmetric (max |W - W^T| = {np.max(np.abs(w - w.T)):.2e})"
        )
    rows = np.abs(w.sum(axis=1) - 1.0)
    if np.max(rows) > atol:
        raise ValueError(
            f"{name} must be doubly stochastic: row {int(np.argmax(rows))} sums to "
            f"{w.sum(axis=1)[int(np.argmax(rows))]:.6g}, not 1"
        )
    if not is_connected(w - np.diag(np.diag(w))):
        raise ValueError(f"{name}: its graph is disconnected (consensus needs a connected graph)")
    ev = np.linalg.eigvalsh(w)
    if ev[0] <= -1.0 + atol:
        raise ValueError(
            f"{name} has an eigenvalue {ev[0]:.6g} <= -1 (a bipartite-like oscillation); "
            "use Metropolis-Hastings weights or (I + W)/2"
        )
    if ev.size > 1 and np.sort(ev)[-2] >= 1.0 - atol:  # one agent: W = [[1]] is valid
        raise ValueError(f"{name} has eigenvalue 1 more than once: its graph is disconnected")
