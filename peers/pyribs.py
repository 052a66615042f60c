"""pyribs' CMA-MAE as a reference (pyribs is imported when the function is called)."""

from __future__ import annotations

import numpy as np


def cma_mae_scheduler(solution_dim, dims, ranges, *, batch_size, seed, emitter_seeds):
    """pyribs' CMA-MAE set up as in its paper: a ``GridArchive`` with thresholds
    (learning rate 0.01, minimum 0), a result archive, and one
    ``EvolutionStrategyEmitter`` per entry of ``emitter_seeds`` (x0 = 0, sigma0 = 0.5,
    improvement ranking, mu selection, basic restarts). Returns ``(scheduler, result)``:
    ask/tell the scheduler, read the result archive's ``stats``."""
    from ribs.archives import GridArchive
    from ribs.emitters import EvolutionStrategyEmitter
    from ribs.schedulers import Scheduler

    kw = dict(solution_dim=solution_dim, dims=dims, ranges=ranges, seed=seed)
    archive = GridArchive(**kw, learning_rate=0.01, threshold_min=0.0)
    result = GridArchive(**kw)
    emitters = [
        EvolutionStrategyEmitter(
            archive,
            x0=np.zeros(solution_dim),
            sigma0=0.5,
            ranker="imp",
            selection_rule="mu",
            restart_rule="basic",
            batch_size=batch_size,
            seed=s,
        )
        for s in emitter_seeds
    ]
    return Scheduler(archive, emitters, result_archive=result), result
