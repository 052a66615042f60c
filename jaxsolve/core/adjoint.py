r"""How ``jaxsolve.solve`` is differentiated: ``Implicit()`` or ``Unrolled()``.

``Implicit`` differentiates the solver's declared optimality condition at the
returned point. If $x^\star(\theta)$ solves $F(x, \theta) = 0$
(``solver.optimality(x, args)``) with $\partial_x F$ invertible, the implicit
function theorem gives $\partial_x F\,\dot x^\star = -\partial_\theta F\,\dot\theta$;
`jaxsolve.core.custom_root` registers that rule as a ``custom_jvp`` whose
linear solve JAX can transpose, so ``jvp`` and ``grad`` both work and no iteration
is stored. $\theta$ is everything the solve depends on through arrays: the
problem data ``args`` and the solver's own array leaves (a learned step size, an
objective held as an ``equinox`` Module). The start ``x0`` has zero derivative.

``Unrolled`` differentiates through the iterations themselves. With
``loop="fixed"`` that is the ``lax.scan``; with ``loop="while"`` the loop is run as
a scan of ``max_steps`` steps in which a finished solve is frozen (the same
iterates, steps and status as the while loop), each step checkpointed, so reverse
mode works at the price of always running ``max_steps`` steps.

Only ``Solution.x`` carries derivatives; the rest of the Solution (state, status,
counts) is treated as constant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

__all__ = ["Implicit", "Unrolled", "resolve_adjoint"]


@dataclasses.dataclass(frozen=True)
class Implicit:
    """Implicit differentiation of ``solver.optimality`` at the solution.

    Attributes:
        solve: the linear solver for $\\partial_x F$: ``"dense"`` (materialize
            and LU: small problems), ``"cg"`` (symmetric positive definite),
            ``"gmres"``, ``"bicgstab"``, or a callable ``solve(matvec, b) -> v``.
        symmetric: declare $\\partial_x F$ symmetric (a gradient map): saves
            the transpose solve.
        tol: tolerance of the Krylov solvers.
    """

    solve: str | Callable = "dense"
    symmetric: bool = False
    tol: float = 1e-10


@dataclasses.dataclass(frozen=True)
class Unrolled:
    """Differentiate through the iterations (``loop="while"``: a frozen, checkpointed scan)."""

    checkpoint: bool = True


def _implicit_solve(solver):
    from jaxsolve.core.protocol import Packed

    target = solver.unpack() if isinstance(solver, Packed) else solver
    return getattr(target, "implicit_solve", None) or "dense"


def resolve_adjoint(adjoint, solver, loop: str):
    """The adjoint to use: ``None`` picks ``Implicit()`` for a ``while`` loop of a
    solver that declares ``optimality`` (with the solver's ``implicit_solve``
    attribute as the linear solver, if it has one), and plain autodiff of the loop
    otherwise (forward mode through ``while``, both modes through ``fixed``)."""
    from jaxsolve.core.protocol import solver_attr

    has_opt = solver_attr(solver, "optimality") is not None
    if adjoint is None:
        if not (has_opt and loop == "while"):
            return None
        # a solver may name the linear solver its optimality condition suits
        return Implicit(solve=_implicit_solve(solver))
    if isinstance(adjoint, Implicit):
        if not has_opt:
            raise ValueError(
                "adjoint=Implicit() needs the solver's optimality condition: this solver "
                "declares no optimality(x, args); use adjoint=Unrolled()"
            )
        return adjoint
    if isinstance(adjoint, Unrolled):
        return adjoint
    raise TypeError(
        f"adjoint must be jaxsolve.Implicit(), jaxsolve.Unrolled() or None, got {adjoint!r}"
    )
