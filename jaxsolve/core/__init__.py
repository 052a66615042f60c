"""Core of jaxsolve: the solver protocol, the driver, statuses, implicit differentiation."""

from jaxsolve.core.batch import batch_mesh, solve_batch
from jaxsolve.core.driver import Solution, SolverError, default_tol, run_steps, solve
from jaxsolve.core.implicit import custom_fixed_point, custom_root, linear_solve
from jaxsolve.core.protocol import BoundFn, Solver, State, make_solver
from jaxsolve.core.status import Status, as_status_array, status_counts, status_message

__all__ = [
    "batch_mesh",
    "solve_batch",
    "BoundFn",
    "Solution",
    "Solver",
    "SolverError",
    "State",
    "Status",
    "as_status_array",
    "custom_fixed_point",
    "custom_root",
    "default_tol",
    "linear_solve",
    "make_solver",
    "run_steps",
    "solve",
    "status_counts",
    "status_message",
]
