"""Riemannian solvers on the shared protocol: ``<solver>(cost, manifold, **hyper) -> Solver``.

``cost(x, args)`` is any JAX function of a point ``x`` of ``manifold`` (a
`jaxsolve.manifolds` object); gradients and Hessian-vector products come from
autodiff. ``error`` is the Riemannian gradient norm.
"""

from jaxsolve.riemannian._common import start_status
from jaxsolve.riemannian.conjugate_gradient import conjugate_gradient
from jaxsolve.riemannian.cubic_newton import (
    arc_ratio,
    arc_sigma_update,
    cubic_newton,
    solve_cubic_tridiagonal,
)
from jaxsolve.riemannian.gradient_descent import gradient_descent
from jaxsolve.riemannian.trust_region import trust_region

__all__ = [
    "arc_ratio",
    "arc_sigma_update",
    "conjugate_gradient",
    "cubic_newton",
    "gradient_descent",
    "solve_cubic_tridiagonal",
    "start_status",
    "trust_region",
]
