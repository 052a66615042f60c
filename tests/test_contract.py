"""Every public solver runs through the contract of ``jaxsolve.testing``.

Adding a solver is one step: describe it as ``SolverCase``s in
``tests/<family>/contract_cases.py`` (a list ``CASES``), add the family to ``FAMILIES``
and its solver modules to the list below.

Solver modules covered (every family's solver is a protocol-v2 ``AbstractSolver``
Module; user-written solvers of both shapes, Modules and ``Solver(init, step)`` of
functions, run through the same checks in ``tests/core/test_protocol.py``):

* first_order.projected_gradient (AbstractSolver)
* qp.flexqp
* layers.pinet
* ot.sobolev (ot.sobolev_barycenter)
* riemannian.gradient_descent, riemannian.conjugate_gradient,
  riemannian.trust_region, riemannian.cubic_newton
* sensing.weight_normalized, sensing.burer_monteiro
* cluster.kmeans_newton, cluster.nlr
* frank_wolfe.conditional_gradient, frank_wolfe.optimistic
* regret.regret_matching
* second_order.gradient_regularized_newton, second_order.gauss_newton
* distributed.ds_admm and its baselines, submodular.aapga / pga, blackbox.cma_es_solver,
  guidance.latent_optimizer (AbstractSolver)
"""

import importlib

import pytest

from jaxsolve.testing import CHECKS

FAMILIES = (
    "first_order",
    "qp",
    "layers",
    "ot",
    "riemannian",
    "sensing",
    "cluster",
    "frank_wolfe",
    "regret",
    "second_order",
    "distributed",
    "submodular",
    "blackbox",
    "guidance",
)

REGISTRY = [
    case
    for family in FAMILIES
    for case in importlib.import_module(f"tests.{family}.contract_cases").CASES
]


def test_registry_names_are_unique():
    names = [case.name for case in REGISTRY]
    assert len(names) == len(set(names)), names


def _params():
    # a case's `slow_checks` run in the slow tier only (make test-slow)
    for case in REGISTRY:
        for check in sorted(CHECKS):
            marks = (pytest.mark.slow,) if check in case.slow_checks else ()
            yield pytest.param(case, check, marks=marks, id=f"{case}-{check}")


@pytest.mark.parametrize(("case", "check"), list(_params()))
def test_contract(case, check):
    CHECKS[check](case)
