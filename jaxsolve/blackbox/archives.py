r"""Quality-diversity archives as pytrees: a grid of cells, each holding its best solution.

`GridArchive` tessellates a box of measure space into ``dims`` cells per axis; a
solution with measures $m$ falls in cell
$\lfloor (\text{dims}\,(m - \ell) + \epsilon) / (u - \ell) \rfloor$, clipped to the grid
(measures outside the box land in the border cells, as pyribs does).

CMA-MAE's thresholds (Fontaine and Nikolaidis, "Covariance Matrix Adaptation
MAP-Annealing", GECCO 2023): each cell $e$ keeps a threshold $t_e$, starting at
``threshold_min``. A solution of objective $f$ is added when $f > t_e$ and its
*value* (what emitters rank by) is $f - t_e$. When $n_e$ solutions of a batch can be
added to one cell, with mean objective $\bar f_e$, the threshold moves by the batch
rule (the paper's appendix):

$$
t_e \leftarrow (1 - \alpha)^{n_e}\, t_e + \big(1 - (1 - \alpha)^{n_e}\big)\,\bar f_e ,
$$

$\alpha$ the ``learning_rate``: $\alpha = 1$ is CMA-ME's elitist archive (the threshold
is the elite's objective), $\alpha = 0$ never raises it. The cell's elite is the
best of the batch's candidates if it beats the threshold (the first one on ties).
Statuses are computed against the archive *before* the batch: 0 not added, 1
improved an occupied cell, 2 found a new cell. With ``threshold_min = -inf``
(then ``learning_rate`` must be 1) new cells' values are the objectives themselves.

NaN objectives or measures are never added (status 0, value NaN): a failed
evaluation is the worst possible one. These semantics match pyribs' ``GridArchive``
(checked solution by solution in the tests).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import float_dtype

__all__ = ["ArchiveState", "AddInfo", "ArchiveStats", "GridArchive", "grid_archive"]


class ArchiveState(NamedTuple):
    """Per cell: ``solution`` ``(cells, dim)``, ``objective``, ``measures``, ``threshold``,
    ``occupied``."""

    solution: jax.Array
    objective: jax.Array
    measures: jax.Array
    threshold: jax.Array
    occupied: jax.Array


class AddInfo(NamedTuple):
    """Per added solution: ``status`` (0 / 1 improved / 2 new), ``value`` and ``index`` (cell)."""

    status: jax.Array
    value: jax.Array
    index: jax.Array


class ArchiveStats(NamedTuple):
    """``coverage`` (occupied fraction), ``qd_score`` (sum of elites' objective minus
    ``qd_score_offset`` each), ``norm_qd_score`` (``qd_score`` / cells), ``obj_max``,
    ``num_elites``."""

    coverage: jax.Array
    qd_score: jax.Array
    norm_qd_score: jax.Array
    obj_max: jax.Array
    num_elites: jax.Array


class GridArchive(eqx.Module):
    """A grid archive (see the module docstring); build it with `grid_archive`."""

    dims: tuple = eqx.field(static=True)
    solution_dim: int = eqx.field(static=True)
    lower: jax.Array
    upper: jax.Array
    learning_rate: Any
    threshold_min: Any
    qd_score_offset: Any
    epsilon: Any
    elitist: bool = eqx.field(static=True)  # threshold_min == -inf

    @property
    def cells(self) -> int:
        return int(np.prod(self.dims))

    def init(self, dtype=None) -> ArchiveState:
        """An empty archive (``dtype``: default float64 under x64, else float32)."""
        dtype = float_dtype(dtype)
        c, m = self.cells, len(self.dims)
        tmin = jnp.asarray(self.threshold_min, dtype)
        return ArchiveState(
            solution=jnp.zeros((c, self.solution_dim), dtype),
            objective=jnp.zeros(c, dtype),
            measures=jnp.zeros((c, m), dtype),
            threshold=jnp.full(c, tmin, dtype),
            occupied=jnp.zeros(c, bool),
        )

    def index_of(self, measures) -> jax.Array:
        """Flat cell index of each row of ``measures`` ``(batch, measure_dim)``."""
        dims = jnp.asarray(self.dims)
        lo, hi = self.lower.astype(measures.dtype), self.upper.astype(measures.dtype)
        eps = jnp.asarray(self.epsilon, measures.dtype)
        g = jnp.floor((dims * (measures - lo) + eps) / (hi - lo))
        g = jnp.clip(jnp.where(jnp.isfinite(g), g, 0), 0, dims - 1).astype(jnp.int32)
        return jnp.ravel_multi_index(tuple(g.T), self.dims, mode="clip")

    def add(self, state: ArchiveState, solution, objective, measures):
        """Add a batch; returns ``(state, AddInfo)`` (see the module docstring)."""
        dt = state.objective.dtype
        solution = jnp.asarray(solution, dt)
        objective = jnp.asarray(objective, dt)
        measures = jnp.asarray(measures, dt)
        c = self.cells
        idx = self.index_of(measures)
        valid = jnp.isfinite(objective) & jnp.all(jnp.isfinite(measures), axis=1)
        occ = state.occupied[idx]
        tmin = jnp.asarray(self.threshold_min, dt)
        cur = jnp.where(occ, state.threshold[idx], tmin)
        can = valid & (objective > cur)
        status = jnp.where(can, jnp.where(occ, 1, 2), 0).astype(jnp.int32)
        # CMA-ME (elitist): a new cell's value is its objective
        base = jnp.where(can & ~occ, 0.0, cur) if self.elitist else cur
        value = jnp.where(valid, objective - base, jnp.nan)

        # per cell: how many can be added, their sum, the best and the first best
        cell = jnp.where(can, idx, c)  # c: a dump segment
        n = jax.ops.segment_sum(can.astype(dt), cell, c + 1)[:c]
        s = jax.ops.segment_sum(jnp.where(can, objective, 0), cell, c + 1)[:c]
        best = jax.ops.segment_max(jnp.where(can, objective, -jnp.inf), cell, c + 1)[:c]
        order = jnp.arange(objective.shape[0])
        is_best = can & (objective == best[jnp.minimum(idx, c - 1)])
        first = jax.ops.segment_min(jnp.where(is_best, order, objective.shape[0]), cell, c + 1)
        winner = can & (first[idx] == order)

        if self.elitist:
            new_t = best
        else:
            ratio = (1 - jnp.asarray(self.learning_rate, dt)) ** n
            cur_cell = jnp.where(state.occupied, state.threshold, tmin)
            new_t = ratio * cur_cell + (1 - ratio) * s / jnp.where(n > 0, n, 1)
        threshold = jnp.where(n > 0, new_t, state.threshold)
        put = jnp.where(winner, idx, c)  # index c is out of bounds: dropped
        new = ArchiveState(
            solution=state.solution.at[put].set(solution, mode="drop"),
            objective=state.objective.at[put].set(objective, mode="drop"),
            measures=state.measures.at[put].set(measures, mode="drop"),
            threshold=threshold,
            occupied=state.occupied.at[put].set(True, mode="drop"),
        )
        return new, AddInfo(status, value, idx)

    def stats(self, state: ArchiveState) -> ArchiveStats:
        """Coverage, QD score (with ``qd_score_offset``), normalized QD score, best objective."""
        dt = state.objective.dtype
        k = jnp.sum(state.occupied)
        total = jnp.sum(jnp.where(state.occupied, state.objective, 0))
        qd = total - k.astype(dt) * jnp.asarray(self.qd_score_offset, dt)
        best = jnp.max(jnp.where(state.occupied, state.objective, -jnp.inf))
        return ArchiveStats(k.astype(dt) / self.cells, qd, qd / self.cells, best, k)

    def sample_elites(self, state: ArchiveState, key, n: int) -> jax.Array:
        """``n`` elites' solutions uniformly at random (with replacement)."""
        p = state.occupied / jnp.maximum(jnp.sum(state.occupied), 1)
        i = jax.random.choice(key, self.cells, (n,), p=p)
        return state.solution[i]


def grid_archive(
    *,
    solution_dim: int,
    dims: Any,
    ranges: Any,
    learning_rate: float | None = None,
    threshold_min: float = -np.inf,
    qd_score_offset: float = 0.0,
    epsilon: float = 1e-6,
) -> GridArchive:
    """A `GridArchive` with pyribs' argument names and checks.

    Args:
        solution_dim: length of a solution vector.
        dims: cells per measure axis, e.g. ``(100, 100)``.
        ranges: ``[(low, high), ...]`` per measure axis.
        learning_rate: CMA-MAE's $\\alpha \\in [0, 1]$ (default 1 = elitist).
        threshold_min: initial cell threshold; needs ``learning_rate`` when finite.
        qd_score_offset: subtracted from each elite's objective in the QD score.
        epsilon: the index computation's rounding guard.
    """
    dims = tuple(int(d) for d in np.atleast_1d(dims))
    if not dims or min(dims) < 1:
        raise ValueError(f"dims must be positive cell counts per axis, got {dims}")
    ranges = np.asarray(ranges, dtype=np.float64)
    if ranges.shape != (len(dims), 2):
        raise ValueError(f"ranges must be {len(dims)} (low, high) pairs, got shape {ranges.shape}")
    if not np.all(np.isfinite(ranges)) or np.any(ranges[:, 1] <= ranges[:, 0]):
        raise ValueError(f"ranges must be finite with low < high, got {ranges.tolist()}")
    if isinstance(solution_dim, bool) or not isinstance(solution_dim, int) or solution_dim < 1:
        raise ValueError(f"solution_dim must be a positive int, got {solution_dim!r}")
    if threshold_min != -np.inf and learning_rate is None:
        raise ValueError(
            "threshold_min was set without learning_rate: the threshold is only used by "
            "CMA-MAE; set learning_rate too (1.0 for CMA-ME)"
        )
    lr = 1.0 if learning_rate is None else float(learning_rate)
    if not 0 <= lr <= 1:
        raise ValueError(f"learning_rate must be in [0, 1], got {learning_rate!r}")
    if threshold_min == -np.inf and lr != 1.0:
        raise ValueError("threshold_min can only be -inf with learning_rate 1.0")
    if np.isnan(threshold_min):
        raise ValueError("threshold_min must not be NaN")
    return GridArchive(
        dims=dims,
        solution_dim=int(solution_dim),
        lower=jnp.asarray(ranges[:, 0]),
        upper=jnp.asarray(ranges[:, 1]),
        learning_rate=lr,
        threshold_min=float(threshold_min),
        qd_score_offset=float(qd_score_offset),
        epsilon=float(epsilon),
        elitist=bool(threshold_min == -np.inf),
    )
