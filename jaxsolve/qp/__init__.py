"""Quadratic programming: the QP problem type, FlexQP, Deep FlexQP, problem generators.

``jaxsolve.qp.deep`` (learned per-row parameter policies), ``jaxsolve.qp.train``
(deep-unfolding training) and ``jaxsolve.qp.pac_bayes`` (certificates on the learned
solver).
"""

from jaxsolve.qp import problems
from jaxsolve.qp.deep import DeepFlexQP, Policies, deep_flexqp
from jaxsolve.qp.flexqp import FlexQPInfo, FlexQPState, WarmStart, flexqp
from jaxsolve.qp.pac_bayes import pac_bayes_bound
from jaxsolve.qp.problem import QP, validate_qp
from jaxsolve.qp.problems import load_maros_meszaros
from jaxsolve.qp.solve import kkt_residual, single_qp_solver, solve_qp, warm_start_from
from jaxsolve.qp.train import train_policy

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
    "pac_bayes_bound",
    "problems",
    "single_qp_solver",
    "solve_qp",
    "train_policy",
    "validate_qp",
    "warm_start_from",
]
