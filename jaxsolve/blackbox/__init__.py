"""Black-box and quality-diversity search: CMA-ES, grid archives, CMA-MAE, AutoQD descriptors."""

from jaxsolve.blackbox.archives import (
    AddInfo,
    ArchiveState,
    ArchiveStats,
    GridArchive,
    grid_archive,
)
from jaxsolve.blackbox.autoqd import (
    RFF,
    Descriptor,
    fit_descriptors,
    gaussian_mmd2,
    occupancy_embedding,
    quality_vendi_score,
    rff_embedding,
    rff_features,
    vendi_score,
)
from jaxsolve.blackbox.cma_es import (
    CMAES,
    CMAESSolver,
    CMAESSolverState,
    CMAState,
    cma_es,
    cma_es_solver,
)
from jaxsolve.blackbox.cma_mae import CMAMAE, MAEState, cma_mae, sphere_linear_projection

__all__ = [
    "RFF",
    "Descriptor",
    "fit_descriptors",
    "gaussian_mmd2",
    "occupancy_embedding",
    "quality_vendi_score",
    "rff_embedding",
    "rff_features",
    "vendi_score",
    "AddInfo",
    "ArchiveState",
    "ArchiveStats",
    "CMAES",
    "CMAESSolver",
    "CMAESSolverState",
    "CMAMAE",
    "CMAState",
    "GridArchive",
    "MAEState",
    "cma_es",
    "cma_es_solver",
    "cma_mae",
    "grid_archive",
    "sphere_linear_projection",
]
