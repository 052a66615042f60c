"""The guidance family's contract cases through every check of ``jaxsolve.testing``.

(``tests/test_contract.py`` runs the same cases once "guidance" is in its FAMILIES.)
"""

import pytest

from jaxsolve.testing import CHECKS
from tests.guidance.contract_cases import CASES


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_contract(case, check):
    CHECKS[check](case)
