"""Exact Euclidean projections onto simple convex sets (pure, jit/vmap-able, differentiable)."""

from jaxsolve.projections.box import box
from jaxsolve.projections.simplex import capped_simplex, simplex

__all__ = ["box", "capped_simplex", "simplex"]
