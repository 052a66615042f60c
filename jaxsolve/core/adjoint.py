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

**Conditions in other unknowns, or at the final state** (optional hook). A solver
whose optimality condition is not a function of ``x`` alone (a QP's KKT conditions
are in the primal-dual pair) or needs quantities of its final state held fixed (an
elastic weight, an active set) defines

* ``implicit_root(self, state, args) -> (z, restore)``: the unknowns ``z`` (a pytree;
  a single array keeps the linear solve's right-hand side in one block) at the final
  ``state``, and ``restore(z) -> state``, the state with ``z`` put back (``Solution.x``
  is then ``restore(z).x``);
* ``optimality(self, z, args, state)``: the residual in ``z``, with the final
  ``state`` as a constant (no derivative flows through it).

The driver then runs the solve with its inputs held constant and differentiates the
condition at its end (`implicit_solution`); any engine that computes a ``Solution``
(a lockstep batch, a custom loop) attaches the same derivatives with
`implicit_solution`. A solver names the linear solver its condition suits with an
``implicit_solve`` attribute (a method name of `Implicit` or a callable
``solve(matvec, b)``), read when ``adjoint`` is None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax

__all__ = ["Implicit", "Unrolled", "resolve_adjoint", "implicit_solution"]


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


def implicit_solution(solver, args, sol, adjoint: Implicit | None = None, *, batch_axes=None):
    """``sol`` (a `Solution` of ``solver`` on ``args``, computed by any engine with
    constant inputs) with implicit derivatives of its root w.r.t. ``args`` and the
    solver's arrays, by the solver's ``implicit_root``/``optimality(z, args, state)``
    hook (module docstring). ``adjoint``: default ``Implicit`` with the solver's
    ``implicit_solve``. ``batch_axes``: None, or ``sol`` has a leading lane axis and
    ``args`` one where ``batch_axes`` (a ``vmap`` ``in_axes`` prefix of ``args``:
    0, or None for shared leaves) says; the condition is then solved lane by lane.
    """
    from jaxsolve.core.implicit import custom_root
    from jaxsolve.core.protocol import pack

    if adjoint is None:
        adjoint = Implicit(solve=_implicit_solve(solver))
    packed = pack(solver)

    def one(args, state):
        const = jax.lax.stop_gradient(state)

        def optimality(z, solver, args, const):
            return solver.optimality(z, args, const)

        @custom_root(optimality, solve=adjoint.solve, symmetric=adjoint.symmetric, tol=adjoint.tol)
        def solved(z, solver, args, const):
            return z

        z, restore = packed.implicit_root(const, args)
        return restore(solved(jax.lax.stop_gradient(z), packed, args, const))

    if batch_axes is None:
        state = one(args, sol.state)
    else:
        state = jax.vmap(one, in_axes=(batch_axes, 0))(args, sol.state)
    return sol._replace(x=state.x, state=state)
