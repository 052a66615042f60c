"""First-order methods on the solver protocol."""

from jaxsolve.first_order.projected_gradient import (
    PGInfo,
    PGState,
    minimize_projected,
    projected_gradient,
)

__all__ = ["PGInfo", "PGState", "minimize_projected", "projected_gradient"]
