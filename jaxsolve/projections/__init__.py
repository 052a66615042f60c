"""Exact Euclidean projections onto simple convex sets (pure, jit/vmap-able, differentiable)."""

from jaxsolve.projections.affine import affine, halfspace
from jaxsolve.projections.balls import l1_ball, l2_ball
from jaxsolve.projections.box import box
from jaxsolve.projections.knapsack import knapsack, partition_matroid
from jaxsolve.projections.simplex import capped_simplex, simplex

__all__ = [
    "affine",
    "box",
    "capped_simplex",
    "halfspace",
    "knapsack",
    "l1_ball",
    "l2_ball",
    "partition_matroid",
    "simplex",
]
