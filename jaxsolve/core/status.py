"""Solver status codes, shared by every solver and the driver."""

from __future__ import annotations

import enum

import jax.numpy as jnp
import numpy as np


class Status(enum.IntEnum):
    """Why a solve ended. The integer values are stable and part of the API.

    Inside a state, ``status`` holds a *solver-declared* condition: ``SUCCESS`` (0)
    while nothing special happened, or a terminal code a solver detected on its own
    (``INFEASIBLE``, ``UNBOUNDED``, ``BREAKDOWN``), which stops the driver's loop.
    The driver turns this into the final status of a `Solution`
    (see `jaxsolve.solve`).
    """

    SUCCESS = 0
    MAX_STEPS = 1
    NONFINITE = 2
    INFEASIBLE = 3
    UNBOUNDED = 4
    BREAKDOWN = 5

    @property
    def message(self) -> str:
        return MESSAGES[self]

    @property
    def failed(self) -> bool:
        """True for every status but ``SUCCESS``."""
        return self is not Status.SUCCESS


MESSAGES: dict[Status, str] = {
    Status.SUCCESS: "converged: the optimality measure reached the tolerance",
    Status.MAX_STEPS: "stopped at max_steps before reaching the tolerance",
    Status.NONFINITE: "a NaN or Inf appeared in the iterate or the optimality measure",
    Status.INFEASIBLE: "the constraints cannot all be satisfied (the solution returned "
    "is the solver's least-violation point)",
    Status.UNBOUNDED: "the objective is unbounded below on the feasible (or relaxed) set",
    Status.BREAKDOWN: "the method broke down (a step could not be computed, e.g. a "
    "singular system or a failed line search)",
}


def status_message(status) -> str | list[str]:
    """Message for a status code, or a list of messages for a batch of codes."""
    arr = np.asarray(status)
    if arr.ndim == 0:
        return Status(int(arr)).message
    return [Status(int(s)).message for s in arr.ravel()]


def status_counts(status) -> dict[str, int]:
    """Count how many lanes of a batched solve ended with each status (by name)."""
    arr = np.asarray(status).ravel()
    return {s.name: int(np.sum(arr == s.value)) for s in Status if np.any(arr == s.value)}


def as_status_array(code: int | Status) -> jnp.ndarray:
    """An int32 scalar status, the dtype every state uses."""
    return jnp.asarray(int(code), dtype=jnp.int32)
