"""Regret matching (RM, RM+, predictive and alternating RM+) as a constrained optimizer."""

from jaxsolve.regret import domains
from jaxsolve.regret.regret_matching import RMState, kkt_gap, regret_matching

__all__ = ["RMState", "domains", "kkt_gap", "regret_matching"]
