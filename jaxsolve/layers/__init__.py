"""Pinet projection layer: hard convex constraints on network outputs (arXiv 2508.10480)."""

from jaxsolve.layers.layer import ProjectionLayer
from jaxsolve.layers.pinet import ProjectionArgs, pinet_projection
from jaxsolve.layers.polytope import Factors, Polytope, factorize, ruiz_equilibration
from jaxsolve.layers.problems import DC3QP, dc3_simple_qp
from jaxsolve.layers.project import default_project_tol, project, projection_args

__all__ = [
    "DC3QP",
    "Factors",
    "Polytope",
    "ProjectionArgs",
    "ProjectionLayer",
    "dc3_simple_qp",
    "default_project_tol",
    "factorize",
    "pinet_projection",
    "project",
    "projection_args",
    "ruiz_equilibration",
]
