"""Frank-Wolfe (conditional gradient) methods with certified primal-dual gaps."""

from jaxsolve.frank_wolfe import lmo
from jaxsolve.frank_wolfe.lmo import LMO

__all__ = ["LMO", "lmo"]
