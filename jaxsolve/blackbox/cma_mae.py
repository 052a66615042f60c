r"""CMA-MAE: a scheduler of CMA-ES emitters over an annealing archive (CMA-ME and CMA-ES as cases).

Fontaine and Nikolaidis, "Covariance Matrix Adaptation MAP-Annealing" (GECCO 2023).
Each of ``n_emitters`` CMA-ES instances samples ``batch_size`` solutions per
iteration; the objective and measures of all of them are added to the archive in
one batch (`jaxsolve.blackbox.archives`), and each emitter ranks its own samples by
their archive *value* $f - t_e$ (improvement over the cell's threshold; pyribs'
``ranker="imp"``), takes the best half as parents (``selection_rule="mu"``) and
updates. An emitter restarts, from an elite drawn from the archive with step size
``sigma0``, when its search has collapsed (pycma's tolerances, as pyribs uses them:
condition number above $10^{14}$, $\sigma\sqrt{\lambda_{\max}} < 10^{-11}$, or all its
samples' values equal to $10^{-12}$). A second, elitist ``result`` archive keeps the
best solution ever seen per cell: that is the archive QD metrics are reported on.

Each emitter's square root of $C$ (the Cholesky factor $L$, or the eigensystem with
``factor="eigh"``) is refreshed lazily, as pycma and pyribs refresh their eigensystems:
every ``eigen_every`` generations, by default once more than
$0.5\,\lambda / ((c_1 + c_\mu) n^2)$ evaluations have passed (3 generations at
$n = 100$, $\lambda = 36$). Between refreshes the emitter samples and whitens its path
with the stale factor while $C$ itself is updated every generation; the gap $g$ keeps
the learning rate $C$ accumulates in between at $g (c_1 + c_\mu) \approx 0.5 / n$, so the
stale factor stays close to a square root of $C$. Refreshing every generation (``eigen_every=1``) made the
batched Cholesky a quarter of a 100-D iteration; the lazy rule cuts that to a twelfth,
with the same QD score and coverage on the sphere benchmark
(`bench/results/blackbox.md`).

``learning_rate`` $\alpha = 1$ with ``threshold_min = -inf`` is CMA-ME; $\alpha = 0$
is CMA-ES on the objective (thresholds never move). Everything is a pure function of
the state, so `run` compiles the whole loop (emitters vmapped, evaluation of a JAX
objective included) into one program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.blackbox.archives import ArchiveState, CellArchive, grid_archive
from jaxsolve.blackbox.cma_es import CMAES, CMAState, _lazy_gap, cma_es
from jaxsolve.core.validation import check_int, check_key, check_shape

__all__ = ["MAEState", "CMAMAE", "cma_mae"]


class MAEState(NamedTuple):
    r"""The CMA-MAE scheduler's state (`CMAMAE.init`, `CMAMAE.tell`).

    Attributes:
        archive: the annealing archive's `ArchiveState` (thresholds $t_e$ move by the
            learning rate $\alpha$); emitters rank their samples by their value in it.
        result: the elitist result archive's `ArchiveState`: the best solution ever seen
            per cell, the archive QD metrics are reported on.
        emitters: the `CMAState` of every emitter, stacked: each leaf has a leading
            ``n_emitters`` axis.
        key: the PRNG key (a typed or raw key, as given to `CMAMAE.init`), split by
            `CMAMAE.ask` for the samples and by `CMAMAE.tell` for the restart elites.
        iteration: int32 scalar, `CMAMAE.tell` calls so far (sets the eigensystem refresh
            schedule).
        restarts: int32 ``(n_emitters,)``, restarts of each emitter so far.
    """

    archive: ArchiveState
    result: ArchiveState
    emitters: CMAState
    key: jax.Array
    iteration: jax.Array
    restarts: jax.Array


class CMAMAE(eqx.Module):
    """The CMA-MAE scheduler; build it with `cma_mae`."""

    archive: CellArchive
    result_archive: CellArchive
    es: CMAES
    n_emitters: int = eqx.field(static=True)

    def init(self, x0, key) -> MAEState:
        """Every emitter starts at ``x0`` (``(solution_dim,)``) with ``sigma0``."""
        check_key("key", key)  # an int here failed at the first ask, deep in a split
        x0 = jnp.asarray(x0)
        one = self.es.init(x0)
        ems = jax.tree.map(lambda v: jnp.broadcast_to(v, (self.n_emitters,) + v.shape), one)
        return MAEState(
            self.archive.init(x0.dtype),
            self.result_archive.init(x0.dtype),
            ems,
            key,
            jnp.int32(0),
            jnp.zeros(self.n_emitters, jnp.int32),
        )

    def ask(self, state: MAEState):
        """``(solutions, state)``: ``(n_emitters, batch_size, solution_dim)`` samples."""
        key, sub = jax.random.split(state.key)
        keys = jax.random.split(sub, self.n_emitters)
        X = jax.vmap(self.es.ask)(state.emitters, keys)
        return X, state._replace(key=key)

    def tell(self, state: MAEState, solutions, objective, measures, *, refresh=None) -> MAEState:
        """Add all samples to both archives, update and (when stuck) restart each emitter.

        ``objective`` ``(n_emitters, batch_size)`` (higher is better, NaN worst) and
        ``measures`` ``(n_emitters, batch_size, measure_dim)`` for ``solutions`` from `ask`.
        """
        E, B = self.n_emitters, self.es.popsize
        check_shape("solutions", solutions, (E, B, self.es.dim))
        check_shape("objective", objective, (E, B))
        check_shape("measures", measures, (E, B, self.archive.measure_dim))
        flat = lambda v: v.reshape((E * B,) + v.shape[2:])  # noqa: E731
        arch, info = self.archive.add(
            state.archive, flat(solutions), flat(objective), flat(measures)
        )
        result, _ = self.result_archive.add(
            state.result, flat(solutions), flat(objective), flat(measures)
        )
        value = info.value.reshape(E, B)
        fitness = jnp.where(jnp.isnan(value), jnp.inf, -value)  # CMA-ES minimizes
        ems = jax.vmap(lambda e, x, f: self.es.tell(e, x, f, refresh=False))(
            state.emitters, solutions, fitness
        )
        if self.es.factor == "cholesky":
            refresh_all = jax.vmap(self.es.refresh)  # one batched LAPACK potrf
        else:
            refresh_all = lambda e: jax.lax.map(self.es.refresh, e)  # noqa: E731
        if self.es.eigen_every == 1:
            ems = refresh_all(ems)
        else:
            if refresh is None:
                refresh = (state.iteration + 1) % self.es.eigen_every == 0
            # (`run` passes the decision from its loop index: unbatched under a vmap over
            # seeds, so the factorizations stay a conditional instead of running always)
            ems = jax.lax.cond(refresh, refresh_all, lambda e: e, ems)
        srt = jnp.sort(fitness, axis=1)
        flat_values = jnp.abs(srt[:, 0] - srt[:, -1]) < 1e-12
        stuck = (
            (jax.vmap(self.es.condition)(ems) > 1e14)
            | (jax.vmap(self.es.scale)(ems) < 1e-11)
            | flat_values
            | ~jnp.isfinite(jax.vmap(self.es.scale)(ems))
        )
        key, sub = jax.random.split(state.key)
        starts = self.archive.sample_elites(arch, sub, E)
        starts = jnp.where(jnp.any(arch.occupied), starts, state.emitters.mean)
        fresh = jax.vmap(self.es.init)(starts)
        pick = lambda a, b: jnp.where(  # noqa: E731
            stuck.reshape((E,) + (1,) * (a.ndim - 1)), a, b
        )
        ems = jax.tree.map(pick, fresh, ems)
        return MAEState(
            arch, result, ems, key, state.iteration + 1, state.restarts + stuck.astype(jnp.int32)
        )

    def run(self, evaluate: Callable, state: MAEState, iterations: int, *, record: bool = True):
        """``iterations`` ask/evaluate/tell rounds in one ``lax.scan``.

        ``evaluate(solutions) -> (objective, measures)`` maps ``(batch, solution_dim)``
        to ``(batch,)`` and ``(batch, measure_dim)`` (a JAX function). Returns
        ``(state, stats)`` with the result archive's stats after each iteration.
        """

        def body(state, i):
            X, state = self.ask(state)
            E, B, n = X.shape
            obj, meas = evaluate(X.reshape(E * B, n))
            refresh = (i + 1) % self.es.eigen_every == 0
            state = self.tell(state, X, obj.reshape(E, B), meas.reshape(E, B, -1), refresh=refresh)
            return state, (self.result_archive.stats(state.result) if record else None)

        iterations = check_int("iterations", iterations, minimum=0)
        # the loop index assumes the run starts at a multiple of eigen_every iterations
        # (state.iteration), as every run from `init` does
        return jax.lax.scan(body, state, jnp.arange(int(iterations)))


def cma_mae(
    *,
    solution_dim: int,
    dims: Any = None,
    ranges: Any = None,
    archive: CellArchive | None = None,
    n_emitters: int = 15,
    batch_size: int = 36,
    sigma0: float = 0.5,
    learning_rate: float = 0.01,
    threshold_min: float = 0.0,
    qd_score_offset: float = 0.0,
    eigen_every: int | None = None,
    factor: str = "cholesky",
) -> CMAMAE:
    """CMA-MAE with pyribs' sphere-benchmark configuration as the defaults.

    Args:
        solution_dim: length of a solution.
        dims: cells per measure axis of the archive's grid.
        ranges: ``(low, high)`` per measure axis (with ``dims``).
        archive: instead of ``dims`` and ``ranges``, any `CellArchive` (a `GridArchive`
            or a `CVTArchive`) giving the cells; its own CMA-MAE settings are replaced
            by ``learning_rate`` and ``threshold_min`` here (`CellArchive.with_thresholds`),
            and the result archive is the same cells, elitist.
        n_emitters: number of CMA-ES emitters.
        batch_size: samples per emitter per iteration.
        sigma0: initial (and restart) step size.
        learning_rate: the annealing archive's $\\alpha$ (1 with ``threshold_min=-inf``:
            CMA-ME).
        threshold_min: the cells' starting threshold.
        qd_score_offset: subtracted per elite in the QD score of both archives.
        eigen_every: generations between refreshes of the emitters' factors of $C$
            (default: the lazy gap of pycma and pyribs, see the module docstring, for
            either ``factor``; 1 refreshes every generation).
        factor: the emitters' square root of $C$: ``"cholesky"`` (default; Cholesky-CMA-ES,
            refreshed every generation, see `jaxsolve.blackbox.cma_es`) or ``"eigh"``
            (pyribs' emitters exactly). Both sample the same distribution; the Cholesky
            refresh is about 30x cheaper at 100 dimensions (`bench/results/blackbox.md`).
    """
    for name, v in (("n_emitters", n_emitters), ("batch_size", batch_size)):
        if (
            isinstance(v, bool)
            or not isinstance(v, int | np.integer)
            or v < (1 if name == "n_emitters" else 2)
        ):
            raise ValueError(f"{name} must be a positive int (batch_size >= 2), got {v!r}")
    if archive is None:
        if dims is None or ranges is None:
            raise ValueError("give dims and ranges (a grid archive), or archive")
        archive = grid_archive(
            solution_dim=solution_dim, dims=dims, ranges=ranges, qd_score_offset=qd_score_offset
        )
    elif not isinstance(archive, CellArchive):
        raise ValueError(f"archive must be a CellArchive, got {type(archive).__name__}")
    elif dims is not None or ranges is not None:
        raise ValueError("give either archive or dims and ranges, not both")
    elif archive.solution_dim != solution_dim:
        raise ValueError(
            f"archive has solution_dim {archive.solution_dim}, but solution_dim is {solution_dim}"
        )
    result = archive.with_thresholds(qd_score_offset=qd_score_offset)
    archive = archive.with_thresholds(learning_rate, threshold_min, qd_score_offset)
    if eigen_every is None:  # pycma's and pyribs' lazy gap, for either factor
        eigen_every = _lazy_gap(solution_dim, batch_size, batch_size // 2, False)
    es = cma_es(
        solution_dim, popsize=batch_size, sigma0=sigma0, eigen_every=eigen_every, factor=factor
    )
    return CMAMAE(archive, result, es, int(n_emitters))


def sphere_linear_projection(X, *, bound: float = 5.12):
    """The QD sphere benchmark (Fontaine et al. 2020, pyribs' tutorial): objective in
    $[0, 100]$ (100 at $x_i = 0.4 \\cdot 5.12$), measures the sums of the two halves of
    $x$ with entries outside $[-5.12, 5.12]$ folded back as $5.12 / x_i$."""
    n = X.shape[1]
    shift = 0.4 * bound
    worst = n * (-bound - shift) ** 2
    raw = jnp.sum((X - shift) ** 2, axis=1)
    obj = (raw - worst) / (0 - worst) * 100
    out = jnp.abs(X) > bound
    folded = jnp.where(out, bound / jnp.where(out, X, 1), X)
    meas = jnp.stack([folded[:, : n // 2].sum(1), folded[:, n // 2 :].sum(1)], axis=1)
    return obj, meas


__all__ += ["sphere_linear_projection"]
