"""Every public solver runs through the contract of ``jaxsolve.testing``.

Adding a solver is one step: describe it as ``SolverCase``s in
``tests/<family>/contract_cases.py`` (a list ``CASES``) and add it to ``REGISTRY`` below.
"""

import pytest

from jaxsolve.testing import CHECKS

REGISTRY = []

# Each line: the family's contract cases (the module names below are the solver modules).
# -- registry entries (keep one per line) --
from tests.frank_wolfe.contract_cases import CASES as _FW  # frank_wolfe.conditional_gradient, frank_wolfe.optimistic  # noqa: E402, I001
REGISTRY += _FW
from tests.regret.contract_cases import CASES as _RM  # regret.regret_matching  # noqa: E402, I001
REGISTRY += _RM
from tests.first_order.contract_cases import CASES as _FO  # first_order.projected_gradient  # noqa: E402, I001
REGISTRY += _FO
from tests.qp.contract_cases import CASES as _QP  # qp.flexqp  # noqa: E402, I001
REGISTRY += _QP
from tests.riemannian.contract_cases import CASES as _RIEM  # riemannian.gradient_descent, riemannian.conjugate_gradient, riemannian.trust_region, riemannian.cubic_newton  # noqa: E402, I001
REGISTRY += _RIEM
from tests.sensing.contract_cases import CASES as _SENS  # sensing.weight_normalized, sensing.burer_monteiro  # noqa: E402, I001
REGISTRY += _SENS
from tests.second_order.contract_cases import CASES as _SO  # second_order.gradient_regularized_newton, second_order.gauss_newton  # noqa: E402, I001
REGISTRY += _SO
from tests.layers.contract_cases import CASES as _LAYERS  # layers.pinet  # noqa: E402, I001
REGISTRY += _LAYERS
from tests.cluster.contract_cases import CASES as _CLUSTER  # cluster.kmeans_newton, cluster.nlr  # noqa: E402, I001
REGISTRY += _CLUSTER
from tests.ot.contract_cases import CASES as _OT  # ot.sobolev_barycenter  # noqa: E402, I001
REGISTRY += _OT


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("case", REGISTRY, ids=str)
def test_contract(case, check):
    CHECKS[check](case)
