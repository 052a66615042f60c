"""Clustering on manifolds: K-means by cubic-regularized Riemannian Newton (paper 12)."""

from jaxsolve.cluster._problem import feasible_point, kmeans_manifold, lift, prepare_data
from jaxsolve.cluster.centred_sphere import CentredSphere
from jaxsolve.cluster.kmeans import kmeans
from jaxsolve.cluster.kmeans_newton import kmeans_newton
from jaxsolve.cluster.nlr import nlr, nlr_start

__all__ = [
    "CentredSphere",
    "feasible_point",
    "kmeans",
    "kmeans_manifold",
    "kmeans_newton",
    "lift",
    "nlr",
    "nlr_start",
    "prepare_data",
]
