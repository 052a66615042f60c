"""Optimal transport on grids: c-transforms, pushforwards, Sobolev gradient ascent barycenters."""

from jaxsolve.ot.distance import W2State, w2
from jaxsolve.ot.grid import Grid
from jaxsolve.ot.sobolev import barycenter, barycenter_functional, sobolev_barycenter
from jaxsolve.ot.transforms import (
    c_transform,
    inverse_laplacian,
    legendre,
    pushforward,
    transport_map,
)

__all__ = [
    "Grid",
    "W2State",
    "barycenter",
    "barycenter_functional",
    "c_transform",
    "inverse_laplacian",
    "legendre",
    "pushforward",
    "sobolev_barycenter",
    "transport_map",
    "w2",
]
