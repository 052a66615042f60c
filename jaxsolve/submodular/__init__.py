"""Submodular maximization of sums of concave over modular functions (SCMs).

Relax, maximize the concave extension by AAPGA, round (Lv, Wang, Xu and Yang, ICLR
2026); greedy baselines in JAX.
"""

from jaxsolve.submodular.aapga import AAPGA, AAPGAInfo, AAPGAState, aapga, frank_wolfe_gap, pga
from jaxsolve.submodular.constraints import (
    Cardinality,
    Knapsack,
    PartitionMatroid,
    cardinality,
    knapsack,
    partition_matroid,
)
from jaxsolve.submodular.greedy import (
    GreedyResult,
    cost_benefit_greedy,
    lazy_greedy,
    naive_greedy,
    partition_greedy,
    stochastic_greedy,
)
from jaxsolve.submodular.maximize import MaximizeResult, maximize
from jaxsolve.submodular.objectives import (
    SCM,
    Concave,
    concave,
    coverage,
    feature_based,
    log1p,
    probabilistic_coverage,
    saturate,
    saturated_coverage,
    sqrt,
)
from jaxsolve.submodular.rounding import fill, knapsack_rounding, pipage, round_solution

__all__ = [
    "AAPGA",
    "AAPGAInfo",
    "AAPGAState",
    "Cardinality",
    "Concave",
    "GreedyResult",
    "Knapsack",
    "MaximizeResult",
    "PartitionMatroid",
    "SCM",
    "aapga",
    "cardinality",
    "concave",
    "cost_benefit_greedy",
    "coverage",
    "feature_based",
    "fill",
    "frank_wolfe_gap",
    "knapsack",
    "knapsack_rounding",
    "lazy_greedy",
    "log1p",
    "maximize",
    "naive_greedy",
    "partition_greedy",
    "partition_matroid",
    "pga",
    "pipage",
    "probabilistic_coverage",
    "round_solution",
    "saturate",
    "saturated_coverage",
    "sqrt",
    "stochastic_greedy",
]
