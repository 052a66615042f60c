"""Weight-normalized overparameterized matrix sensing (arXiv 2510.01175) and its baseline."""

from jaxsolve.sensing.burer_monteiro import burer_monteiro, small_initial_point
from jaxsolve.sensing.problem import (
    GaussianMeasurements,
    GramMeasurements,
    adjoint_residual,
    make_problem,
    measure,
    relative_error,
    sensing_loss,
)
from jaxsolve.sensing.weight_normalized import initial_point, weight_normalized

__all__ = [
    "GaussianMeasurements",
    "GramMeasurements",
    "adjoint_residual",
    "burer_monteiro",
    "initial_point",
    "make_problem",
    "measure",
    "relative_error",
    "sensing_loss",
    "small_initial_point",
    "weight_normalized",
]
