"""Clustering on manifolds: K-means by cubic-regularized Riemannian Newton, Ratio Cut on RIM.

K-means through the Burer-Monteiro factor of its SDP relaxation (Xu, Hou, Chen, Zhang,
ICLR 2026; `kmeans`, `kmeans_newton`, with the first-order baseline `nlr`), and Ratio
Cut over the relaxed indicator matrix manifold (Yuan, Xie, Nie, Li, ICLR 2026;
`ratio_cut`).
"""

from jaxsolve.cluster._problem import (
    feasible_point,
    kmeans_manifold,
    lift,
    prepare_data,
    round_candidates,
)
from jaxsolve.cluster.centred_sphere import CentredSphere
from jaxsolve.cluster.kmeans import KMeansState, kmeans
from jaxsolve.cluster.kmeans_newton import kmeans_newton
from jaxsolve.cluster.nlr import nlr, nlr_reference_options, nlr_start
from jaxsolve.cluster.ratio_cut import (
    RatioCutState,
    laplacian,
    ratio_cut,
    ratio_cut_cost,
    spectral_start,
)

__all__ = [
    "CentredSphere",
    "KMeansState",
    "RatioCutState",
    "laplacian",
    "ratio_cut",
    "ratio_cut_cost",
    "spectral_start",
    "feasible_point",
    "kmeans",
    "kmeans_manifold",
    "kmeans_newton",
    "lift",
    "nlr",
    "nlr_reference_options",
    "nlr_start",
    "prepare_data",
    "round_candidates",
]
