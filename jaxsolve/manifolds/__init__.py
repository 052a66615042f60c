"""Manifolds for Riemannian optimization: static, hashable objects over pytree points.

See `jaxsolve.manifolds.base` for the interface (``inner``, ``norm``, ``proj``,
``retract``, ``egrad_to_rgrad``, ``ehess_to_rhess``, ``transport``, ``random_point``,
``random_tangent``, ``dist``, ``dim``, ``typical_dist``, ``residual``).
"""

from jaxsolve.manifolds.base import Manifold
from jaxsolve.manifolds.checks import TaylorCheck, check_gradient, check_hessian, hessian_spectrum
from jaxsolve.manifolds.doubly_stochastic import DoublyStochastic, sinkhorn
from jaxsolve.manifolds.euclidean import Euclidean, Symmetric
from jaxsolve.manifolds.product import Product
from jaxsolve.manifolds.rim import RIM, rim_project
from jaxsolve.manifolds.sphere import Oblique, Sphere
from jaxsolve.manifolds.stiefel import Orthogonal, Stiefel

__all__ = [
    "DoublyStochastic",
    "Euclidean",
    "Manifold",
    "Oblique",
    "Orthogonal",
    "Product",
    "RIM",
    "Sphere",
    "Stiefel",
    "Symmetric",
    "TaylorCheck",
    "check_gradient",
    "check_hessian",
    "hessian_spectrum",
    "rim_project",
    "sinkhorn",
]
