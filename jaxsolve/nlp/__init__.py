"""Constrained nonlinear programming: SQP with always-feasible FlexQP subproblems.

`sqp` / `minimize_sqp` (line-search SQP, l1 merit, damped BFGS or exact Hessian
models) and test problems (`jaxsolve.nlp.problems`: Hock-Schittkowski, unicycle
trajectories with obstacles, a predictive safety filter).
"""

from jaxsolve.nlp import problems
from jaxsolve.nlp.sqp import SQP, SQPInfo, SQPState, minimize_sqp, sqp

__all__ = ["SQP", "SQPInfo", "SQPState", "sqp", "minimize_sqp", "problems"]
