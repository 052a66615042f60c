"""jaxsolve: JAX-native optimization solvers that jit, vmap, shard and differentiate.

Every algorithm is an `AbstractSolver` (an equinox Module with pure ``init``/``step``
methods) run by one driver, `solve`. Families live in subpackages (``jaxsolve.qp``,
``jaxsolve.projections``, ``jaxsolve.first_order``, ...), imported on first use.
"""

import importlib

from jaxsolve.core import (
    AbstractSolver,
    Implicit,
    Solution,
    Solver,
    SolverError,
    Status,
    Unrolled,
    batch_mesh,
    custom_fixed_point,
    custom_root,
    default_tol,
    hyper,
    solve,
    solve_batch,
    status_message,
)

__version__ = "0.1.0"

_SUBPACKAGES = (
    "blackbox",
    "cluster",
    "core",
    "distributed",
    "evaluation",
    "first_order",
    "frank_wolfe",
    "guidance",
    "layers",
    "losses",
    "manifolds",
    "nlp",
    "ot",
    "projections",
    "qp",
    "regret",
    "riemannian",
    "second_order",
    "sensing",
    "submodular",
    "testing",
    "transforms",
)


def __getattr__(name):
    # Lazy subpackages: `import jaxsolve` stays fast and a family's optional
    # dependencies are only imported when that family is used.
    if name in _SUBPACKAGES:
        return importlib.import_module(f"jaxsolve.{name}")
    raise AttributeError(f"module 'jaxsolve' has no attribute {name!r}")


def __dir__():
    # the lazy families show up in tab completion too
    return sorted(set(globals()) | set(_SUBPACKAGES))


__all__ = [
    "AbstractSolver",
    "Implicit",
    "Unrolled",
    "hyper",
    "Solution",
    "Solver",
    "SolverError",
    "Status",
    "batch_mesh",
    "custom_fixed_point",
    "custom_root",
    "default_tol",
    "solve",
    "solve_batch",
    "status_message",
]
