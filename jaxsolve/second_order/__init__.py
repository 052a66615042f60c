"""Second-order methods: gradient-regularized Newton (arXiv 2506.13710), Gauss-Newton / LM (arXiv 2601.03162)."""

from jaxsolve.second_order.gauss_newton import (
    GNInfo,
    GNState,
    gauss_newton,
    gn_precondition,
    scale_by_gauss_newton,
)
from jaxsolve.second_order.gradient_regularized_newton import (
    GRNInfo,
    GRNState,
    gradient_regularized_newton,
)

__all__ = [
    "GNInfo",
    "GNState",
    "GRNInfo",
    "GRNState",
    "gauss_newton",
    "gn_precondition",
    "gradient_regularized_newton",
    "scale_by_gauss_newton",
]
