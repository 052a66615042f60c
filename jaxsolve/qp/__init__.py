"""Quadratic programming: the QP problem type, FlexQP, Deep FlexQP, problem generators.

``jaxsolve.qp.deep`` (learned per-row parameter policies) and ``jaxsolve.qp.train``
(deep-unfolding training) load on first use.
"""

from jaxsolve.qp import problems
from jaxsolve.qp.deep import DeepFlexQP, Policies, deep_flexqp
from jaxsolve.qp.flexqp import FlexQPInfo, FlexQPState, WarmStart, flexqp
from jaxsolve.qp.problem import QP, validate_qp
from jaxsolve.qp.problems import load_maros_meszaros
from jaxsolve.qp.solve import kkt_residual, single_qp_solver, solve_qp, warm_start_from

__all__ = [
    "QP",
    "DeepFlexQP",
    "Policies",
    "deep_flexqp",
    "FlexQPInfo",
    "FlexQPState",
    "WarmStart",
    "flexqp",
    "kkt_residual",
    "load_maros_meszaros",
    "problems",
    "single_qp_solver",
    "solve_qp",
    "validate_qp",
    "warm_start_from",
]
