r"""Quality-diversity archives as pytrees: a tessellation of measure space into cells, each holding its best solution.

Two tessellations share one insertion rule (`CellArchive`): `GridArchive` and
`CVTArchive` differ only in `index_of`, which maps measures to a cell.

`GridArchive` tessellates a box of measure space into ``dims`` cells per axis; a
solution with measures $m$ falls in cell
$\lfloor (\text{dims}\,(m - \ell) + \epsilon) / (u - \ell) \rfloor$, clipped to the grid
(measures outside the box land in the border cells, as pyribs does).

`CVTArchive` (Vassiliades, Chatzilygeroudis, Mouret, "Using Centroidal Voronoi
Tessellations to Scale Up the Multidimensional Archive of Phenotypic Elites
Algorithm", IEEE TEVC 2018) has ``cells`` centroids $c_1, \dots, c_k$; a solution falls
in the Voronoi cell of its nearest centroid, $\arg\min_e \|m - c_e\|^2$ (the lowest
index on ties). The centroids come from k-means on uniform samples of the box
(`cvt_centroids`), so the cells have about equal volume.

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
and ``CVTArchive`` (checked solution by solution in the tests).

One module, about 580 lines: the two tessellations are a few lines each on top of the
shared insertion rule, and the CVT's k-means (`cvt_centroids`) is how that archive is
built; split, each would import the others' private checks (`_check_ranges`, ...).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_key, float_dtype

__all__ = [
    "ArchiveState",
    "AddInfo",
    "ArchiveStats",
    "CellArchive",
    "GridArchive",
    "grid_archive",
    "CVTArchive",
    "cvt_archive",
    "cvt_centroids",
]


class ArchiveState(NamedTuple):
    r"""An archive's contents, one row per cell (a pytree; `CellArchive.init` builds it).

    Attributes:
        solution: ``(cells, solution_dim)`` float, each cell's elite (zeros where empty).
        objective: ``(cells,)`` float, the elite's objective (0 where empty).
        measures: ``(cells, measure_dim)`` float, the elite's measures (0 where empty).
        threshold: ``(cells,)`` float, CMA-MAE's threshold $t_e$ (``threshold_min`` until
            the cell is first filled).
        occupied: ``(cells,)`` bool, whether the cell holds an elite.
    """

    solution: jax.Array
    objective: jax.Array
    measures: jax.Array
    threshold: jax.Array
    occupied: jax.Array


class AddInfo(NamedTuple):
    r"""What `CellArchive.add` reports, one entry per solution of the batch.

    Attributes:
        status: ``(batch,)`` int32, 0 not added, 1 improved an occupied cell, 2 new cell
            (against the archive before the batch).
        value: ``(batch,)`` float, the improvement $f - t_e$ emitters rank by (NaN for a
            NaN objective or measure).
        index: ``(batch,)`` int32, the cell the solution falls in.
    """

    status: jax.Array
    value: jax.Array
    index: jax.Array


class ArchiveStats(NamedTuple):
    """Summary of an archive (`CellArchive.stats`).

    Attributes:
        coverage: float, the fraction of cells occupied.
        qd_score: float, the sum over elites of objective minus ``qd_score_offset``.
        norm_qd_score: float, ``qd_score`` divided by the number of cells.
        obj_max: float, the best elite's objective (-inf when empty).
        num_elites: int, the number of occupied cells.
    """

    coverage: jax.Array
    qd_score: jax.Array
    norm_qd_score: jax.Array
    obj_max: jax.Array
    num_elites: jax.Array


class CellArchive(eqx.Module):
    r"""What every archive shares once a solution's cell is known: `init`, the batched
    CMA-MAE insertion `add`, `stats` and `sample_elites` (see the module docstring).

    A tessellation subclasses it with its fields and `index_of` (measures to a flat
    cell index in ``[0, cells)``), `cells` and `measure_dim`.

    Attributes:
        solution_dim: length of a solution vector (static).
        learning_rate: CMA-MAE's $\alpha \in [0, 1]$ (1: CMA-ME's elitist archive).
        threshold_min: the cells' initial threshold (-inf: plain MAP-Elites).
        qd_score_offset: subtracted from each elite's objective in the QD score.
        elitist: whether ``threshold_min`` is -inf (static; then new cells' values are
            their objectives).
    """

    solution_dim: eqx.AbstractVar[int]
    learning_rate: eqx.AbstractVar[Any]
    threshold_min: eqx.AbstractVar[Any]
    qd_score_offset: eqx.AbstractVar[Any]
    elitist: eqx.AbstractVar[bool]  # threshold_min == -inf

    @property
    @abc.abstractmethod
    def cells(self) -> int:
        """Number of cells."""

    @property
    @abc.abstractmethod
    def measure_dim(self) -> int:
        """Length of a measure vector."""

    @abc.abstractmethod
    def index_of(self, measures) -> jax.Array:
        """Flat cell index (int32) of each row of ``measures`` ``(batch, measure_dim)``."""

    def init(self, dtype=None) -> ArchiveState:
        """An empty archive (``dtype``: default float64 under x64, else float32)."""
        dtype = float_dtype(dtype)
        c, m = self.cells, self.measure_dim
        tmin = jnp.asarray(self.threshold_min, dtype)
        return ArchiveState(
            solution=jnp.zeros((c, self.solution_dim), dtype),
            objective=jnp.zeros(c, dtype),
            measures=jnp.zeros((c, m), dtype),
            threshold=jnp.full(c, tmin, dtype),
            occupied=jnp.zeros(c, bool),
        )

    def add(self, state: ArchiveState, solution, objective, measures):
        """Add a batch; returns ``(state, AddInfo)`` (see the module docstring)."""
        dt = state.objective.dtype
        solution = jnp.asarray(solution, dt)
        objective = jnp.asarray(objective, dt)
        measures = jnp.asarray(measures, dt)
        b = objective.shape[0] if objective.ndim == 1 else None
        if b is None or solution.shape != (b, self.solution_dim):
            raise ValueError(
                f"solution must be (batch, {self.solution_dim}) and objective (batch,), got "
                f"shapes {solution.shape} and {objective.shape}"
            )
        if measures.shape != (b, self.measure_dim):
            raise ValueError(
                f"measures must have shape ({b}, {self.measure_dim}) (batch, measure_dim), "
                f"got {measures.shape}"
            )
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

    def with_thresholds(
        self,
        learning_rate: float | None = None,
        threshold_min: float = -np.inf,
        qd_score_offset: float | None = None,
    ):
        """The same cells with other CMA-MAE settings (checked as the constructors do);
        ``qd_score_offset=None`` keeps this archive's."""
        lr, tmin = _cma_mae_settings(learning_rate, threshold_min)
        offset = self.qd_score_offset if qd_score_offset is None else _offset(qd_score_offset)
        return dataclasses.replace(
            self,
            learning_rate=lr,
            threshold_min=tmin,
            qd_score_offset=offset,
            elitist=bool(tmin == -np.inf),
        )


class GridArchive(CellArchive):
    r"""A grid archive (see the module docstring); build it with `grid_archive`.

    Attributes:
        dims: cells per measure axis (static); cells are numbered in C order.
        solution_dim: length of a solution vector (static).
        lower: ``(measure_dim,)`` lower bounds of the box.
        upper: ``(measure_dim,)`` upper bounds of the box.
        learning_rate: CMA-MAE's $\alpha$ (see `CellArchive`).
        threshold_min: the cells' initial threshold.
        qd_score_offset: subtracted from each elite's objective in the QD score.
        epsilon: the index computation's rounding guard (pyribs' ``epsilon``).
        elitist: whether ``threshold_min`` is -inf (static).
    """

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

    @property
    def measure_dim(self) -> int:
        return len(self.dims)

    def index_of(self, measures) -> jax.Array:
        """Flat cell index of each row of ``measures`` ``(batch, measure_dim)``."""
        dims = jnp.asarray(self.dims)
        lo, hi = self.lower.astype(measures.dtype), self.upper.astype(measures.dtype)
        eps = jnp.asarray(self.epsilon, measures.dtype)
        g = jnp.floor((dims * (measures - lo) + eps) / (hi - lo))
        g = jnp.clip(jnp.where(jnp.isfinite(g), g, 0), 0, dims - 1).astype(jnp.int32)
        return jnp.ravel_multi_index(tuple(g.T), self.dims, mode="clip")


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
    raw = np.atleast_1d(dims)
    # int() truncated a float count silently (dims=(2.5,) gave 2 cells)
    if raw.dtype.kind not in "iuf" or np.any(raw != np.round(raw)):
        raise ValueError(f"dims must be positive int cell counts per axis, got {dims}")
    dims = tuple(int(d) for d in raw)
    if not dims or min(dims) < 1:
        raise ValueError(f"dims must be positive cell counts per axis, got {dims}")
    if not np.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be finite and non-negative, got {epsilon!r}")
    ranges = _check_ranges(ranges, len(dims))
    _check_solution_dim(solution_dim)
    lr, tmin = _cma_mae_settings(learning_rate, threshold_min)
    return GridArchive(
        dims=dims,
        solution_dim=int(solution_dim),
        lower=jnp.asarray(ranges[:, 0]),
        upper=jnp.asarray(ranges[:, 1]),
        learning_rate=lr,
        threshold_min=tmin,
        qd_score_offset=_offset(qd_score_offset),
        epsilon=float(epsilon),
        elitist=bool(tmin == -np.inf),
    )


def _check_ranges(ranges, measure_dim: int | None) -> np.ndarray:
    """``ranges`` as a ``(measure_dim, 2)`` float64 array of finite ``low < high`` pairs."""
    ranges = np.asarray(ranges, dtype=np.float64)
    if measure_dim is None:  # any number of axes, at least one
        if ranges.ndim != 2 or ranges.shape[0] < 1 or ranges.shape[1] != 2:
            raise ValueError(f"ranges must be (low, high) pairs, got shape {ranges.shape}")
    elif ranges.shape != (measure_dim, 2):
        raise ValueError(
            f"ranges must be {measure_dim} (low, high) pairs, got shape {ranges.shape}"
        )
    if not np.all(np.isfinite(ranges)) or np.any(ranges[:, 1] <= ranges[:, 0]):
        raise ValueError(f"ranges must be finite with low < high, got {ranges.tolist()}")
    return ranges


def _offset(qd_score_offset) -> float:
    """A finite ``qd_score_offset`` (NaN or inf made every QD score NaN or inf)."""
    offset = float(qd_score_offset)
    if not np.isfinite(offset):
        raise ValueError(f"qd_score_offset must be finite, got {qd_score_offset!r}")
    return offset


def _check_solution_dim(solution_dim) -> None:
    if isinstance(solution_dim, bool) or not isinstance(solution_dim, int) or solution_dim < 1:
        raise ValueError(f"solution_dim must be a positive int, got {solution_dim!r}")


def _cma_mae_settings(learning_rate, threshold_min) -> tuple[float, float]:
    """pyribs' checks of CMA-MAE's ``(learning_rate, threshold_min)``; ``None`` is 1."""
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
    return lr, float(threshold_min)


class CVTArchive(CellArchive):
    r"""A centroidal Voronoi tessellation archive (CVT-MAP-Elites' archive: Vassiliades
    et al. 2018); build it with `cvt_archive`.

    Cell $e$ is the Voronoi cell of ``centroids[e]``: measures $m$ fall in
    $\arg\min_e \|m - c_e\|^2$, the squared Euclidean distance computed as a sum of
    squared differences (pyribs' brute-force search; its default KD-tree finds the same
    nearest centroid), the lowest index on exact ties. Measures outside ``ranges`` are
    not clipped: they fall in their nearest centroid's cell, as in pyribs. Insertion,
    thresholds and statistics are `CellArchive`'s, the same as `GridArchive`'s.

    Attributes:
        solution_dim: length of a solution vector (static).
        centroids: ``(cells, measure_dim)`` float, the cells' centroids $c_e$.
        lower: ``(measure_dim,)`` lower bounds of ``ranges`` (where k-means sampled;
            not used to clip).
        upper: ``(measure_dim,)`` upper bounds of ``ranges``.
        learning_rate: CMA-MAE's $\alpha$ (see `CellArchive`).
        threshold_min: the cells' initial threshold.
        qd_score_offset: subtracted from each elite's objective in the QD score.
        elitist: whether ``threshold_min`` is -inf (static).
    """

    solution_dim: int = eqx.field(static=True)
    centroids: jax.Array  # (cells, measure_dim)
    lower: jax.Array
    upper: jax.Array
    learning_rate: Any
    threshold_min: Any
    qd_score_offset: Any
    elitist: bool = eqx.field(static=True)  # threshold_min == -inf

    @property
    def cells(self) -> int:
        return int(self.centroids.shape[0])

    @property
    def measure_dim(self) -> int:
        return int(self.centroids.shape[1])

    def index_of(self, measures) -> jax.Array:
        """Index of the nearest centroid to each row of ``measures`` ``(batch, measure_dim)``
        (0 for a row with a non-finite entry, which `add` never inserts)."""
        i = _nearest(measures, self.centroids.astype(measures.dtype))
        finite = jnp.all(jnp.isfinite(measures), axis=1)
        return jnp.where(finite, i, 0).astype(jnp.int32)


def _nearest(points, centroids) -> jax.Array:
    """Row-wise index of the nearest centroid (squared distances as summed squared
    differences, exact for nearby pairs; ``argmin`` takes the first of equals)."""
    d = jnp.sum(jnp.square(points[:, None, :] - centroids[None, :, :]), axis=-1)
    return jnp.argmin(d, axis=1)


def _lloyd(samples, init, iterations: int, chunk: int):
    """``iterations`` rounds of Lloyd's k-means from ``init``; an empty cluster keeps its
    centroid. The nearest-centroid search runs ``chunk`` samples at a time."""
    k = init.shape[0]

    def step(C, _):
        near = lambda x: _nearest(x[None], C)[0]  # noqa: E731
        a = jax.lax.map(near, samples, batch_size=chunk)
        n = jax.ops.segment_sum(jnp.ones(samples.shape[0], samples.dtype), a, k)
        s = jax.ops.segment_sum(samples, a, k)
        return jnp.where(n[:, None] > 0, s / jnp.maximum(n, 1)[:, None], C), None

    C, _ = jax.lax.scan(step, init, None, length=iterations)
    return C


def cvt_centroids(
    key: jax.Array,
    ranges: Any,
    cells: int,
    *,
    samples: Any = 100_000,
    iterations: int = 100,
    dtype: Any = None,
) -> jax.Array:
    r"""``(cells, measure_dim)`` centroids of an approximate CVT of the ``ranges`` box.

    As pyribs' ``k_means_centroids`` (and Vassiliades et al. 2018): ``samples`` points
    uniform in the box (or the given ``(n, measure_dim)`` array of points), clustered by
    Lloyd's k-means started from ``cells`` distinct samples drawn at random (scikit-learn's
    ``init="random"``, which pyribs uses). Lloyd runs a fixed ``iterations`` rounds (one
    compiled loop, no tolerance test; scikit-learn stops at a tolerance, at most 300
    rounds): each round moves every centroid to the mean of its samples, and a centroid
    without samples stays where it is. The centroids are means of samples, so they lie
    in the box. The cost is ``iterations * n * cells * measure_dim`` operations, once per
    archive: pass the centroids to `cvt_archive` to reuse them.

    Args:
        key: a ``jax.random`` key (the samples and the initial centroids).
        ranges: ``[(low, high), ...]`` per measure axis.
        cells: number of centroids, at most the number of samples.
        samples: number of uniform samples, or an ``(n, measure_dim)`` array of points.
        iterations: Lloyd rounds.
        dtype: float dtype (default float64 under x64, else float32).
    """
    check_key("key", key)
    ranges = _check_ranges(ranges, None)
    m = ranges.shape[0]
    dtype = float_dtype(dtype)
    if isinstance(cells, bool) or not isinstance(cells, int | np.integer) or cells < 1:
        raise ValueError(f"cells must be a positive int, got {cells!r}")
    if (
        isinstance(iterations, bool)
        or not isinstance(iterations, int | np.integer)
        or iterations < 0
    ):
        raise ValueError(f"iterations must be a non-negative int, got {iterations!r}")
    k_samples, k_init = jax.random.split(key)
    if isinstance(samples, int | np.integer) and not isinstance(samples, bool):
        if samples < cells:
            raise ValueError(f"samples must be at least cells = {cells}, got {samples}")
        lo, hi = jnp.asarray(ranges[:, 0], dtype), jnp.asarray(ranges[:, 1], dtype)
        X = jax.random.uniform(k_samples, (int(samples), m), dtype, lo, hi)
    else:
        X = np.asarray(samples, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != m:
            raise ValueError(f"samples must be an int or an (n, {m}) array, got shape {X.shape}")
        if X.shape[0] < cells:
            raise ValueError(f"samples must hold at least cells = {cells} points, got {X.shape[0]}")
        if not np.all(np.isfinite(X)):
            raise ValueError("samples must be finite")
        X = jnp.asarray(X, dtype)
    n = X.shape[0]
    init = X[jax.random.choice(k_init, n, (int(cells),), replace=False)]
    chunk = int(max(1, min(n, 2**22 // (int(cells) * m))))
    run = jax.jit(_lloyd, static_argnums=(2, 3))
    return run(X, init, int(iterations), chunk)


def cvt_archive(
    *,
    solution_dim: int,
    cells: int | None = None,
    ranges: Any,
    learning_rate: float | None = None,
    threshold_min: float = -np.inf,
    qd_score_offset: float = 0.0,
    centroids: Any = None,
    samples: Any = 100_000,
    iterations: int = 100,
    key: jax.Array | None = None,
    seed: int = 0,
) -> CVTArchive:
    """A `CVTArchive` with pyribs' argument names and checks.

    The centroids are ``centroids`` if given, else `cvt_centroids` (k-means on
    ``samples`` uniform points of the box, ``iterations`` Lloyd rounds) from ``key``
    (default ``jax.random.key(seed)``). pyribs' ``CVTArchive(centroids=...)`` takes
    these centroids as they are, so both archives then have the same cells.

    Args:
        solution_dim: length of a solution vector.
        cells: number of cells (centroids); may be omitted with ``centroids``.
        ranges: ``[(low, high), ...]`` per measure axis: the box the k-means samples
            fill. Measures outside it are not clipped: they fall in the nearest cell.
        learning_rate: CMA-MAE's $\\alpha \\in [0, 1]$ (default 1 = elitist).
        threshold_min: initial cell threshold; needs ``learning_rate`` when finite.
        qd_score_offset: subtracted from each elite's objective in the QD score.
        centroids: ``(cells, measure_dim)`` finite centroids to use instead of k-means.
        samples: k-means' number of uniform samples, or an ``(n, measure_dim)`` array.
        iterations: k-means' Lloyd rounds.
        key: ``jax.random`` key for the k-means samples and initial centroids.
        seed: the key's seed when ``key`` is None.
    """
    _check_solution_dim(solution_dim)
    ranges = _check_ranges(ranges, None)
    m = ranges.shape[0]
    lr, tmin = _cma_mae_settings(learning_rate, threshold_min)
    if centroids is None:
        if cells is None:
            raise ValueError("cells must be given when centroids is not")
        key = jax.random.key(seed) if key is None else key
        C = cvt_centroids(key, ranges, cells, samples=samples, iterations=iterations)
    else:
        C = np.asarray(centroids, dtype=np.float64)
        if C.ndim != 2 or C.shape[1] != m or C.shape[0] < 1:
            raise ValueError(
                f"centroids must be a (cells, {m}) array (one row per cell, {m} measures "
                f"as ranges has), got shape {C.shape}"
            )
        if cells is not None and cells != C.shape[0]:
            raise ValueError(f"cells = {cells!r} but centroids has {C.shape[0]} rows")
        if not np.all(np.isfinite(C)):
            raise ValueError("centroids must be finite")
        C = jnp.asarray(C)
    return CVTArchive(
        solution_dim=int(solution_dim),
        centroids=C,
        lower=jnp.asarray(ranges[:, 0]),
        upper=jnp.asarray(ranges[:, 1]),
        learning_rate=lr,
        threshold_min=tmin,
        qd_score_offset=_offset(qd_score_offset),
        elitist=bool(tmin == -np.inf),
    )
