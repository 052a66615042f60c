"""Core of jaxsolve: the solver protocol, the driver, adjoints, statuses, batching."""

from jaxsolve.core.adjoint import Implicit, Unrolled
from jaxsolve.core.batch import batch_mesh, solve_batch
from jaxsolve.core.driver import Solution, SolverError, default_tol, run_steps, solve
from jaxsolve.core.implicit import custom_fixed_point, custom_root, linear_solve
from jaxsolve.core.protocol import (
    AbstractSolver,
    Packed,
    Solver,
    State,
    hyper,
    pack,
)
from jaxsolve.core.status import Status, as_status_array, status_counts, status_message

__all__ = [
    "AbstractSolver",
    "Implicit",
    "Unrolled",
    "batch_mesh",
    "solve_batch",
    "Packed",
    "Solution",
    "Solver",
    "SolverError",
    "State",
    "Status",
    "as_status_array",
    "custom_fixed_point",
    "custom_root",
    "default_tol",
    "hyper",
    "linear_solve",
    "pack",
    "run_steps",
    "solve",
    "status_counts",
    "status_message",
]
