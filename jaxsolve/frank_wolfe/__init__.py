"""Frank-Wolfe (conditional gradient) methods with certified primal-dual gaps."""

from jaxsolve.frank_wolfe import lmo, steps
from jaxsolve.frank_wolfe.conditional_gradient import FWInfo, FWState, frank_wolfe
from jaxsolve.frank_wolfe.lmo import LMO
from jaxsolve.frank_wolfe.optimistic import OptimisticState, optimistic_frank_wolfe
from jaxsolve.frank_wolfe.steps import primal_dual_short_step

__all__ = [
    "LMO",
    "FWInfo",
    "FWState",
    "OptimisticState",
    "frank_wolfe",
    "lmo",
    "optimistic_frank_wolfe",
    "primal_dual_short_step",
    "steps",
]
