r"""The solver protocol: a pure ``init``/``step`` pair over pytrees, and how the driver holds it.

A solver is any object with ``init`` and ``step`` (and optionally ``finalize`` and
``optimality``)::

    state = solver.init(x0, args)                    # -> State
    state, info = solver.step(state, args)           # -> (State, Info)
    state = solver.finalize(state, args, converged)  # optional, once, after the loop
    residual = solver.optimality(x, args)            # optional: zero at a solution
    solver.check_args(x0, args)                      # optional: eager data check

Two shapes are first-class and pass the same contract (`jaxsolve.testing`):

* `AbstractSolver`, an ``equinox.Module`` (the optimistix shape): functions and
  structural options are ``eqx.field(static=True)``, numeric hyperparameters are
  fields holding floats or arrays::

      class GD(jaxsolve.AbstractSolver):
          fun: Callable = eqx.field(static=True)
          lr: float = 0.1
          def init(self, x0, args): ...
          def step(self, state, args): ...

* `Solver`, a NamedTuple of plain functions ``Solver(init, step)``, for a
  user who would rather not write a class. Functions may close over arrays (they
  become compile-time constants).

The driver never traces a solver as written: `pack` splits it into its
*dynamic* leaves (arrays, and Python floats, which become weakly typed 0-d arrays)
and a hashable *static* rest (the tree structure, functions, ints, bools, strings).
The dynamic leaves are traced; the static rest keys the compilation cache. Hence a
sweep over a float hyperparameter reuses one compilation while a change of a
function or a structural option recompiles, as it must. Why floats and not ints:
ints are usually structural (a memory size, a number of inner rounds); give an int
hyperparameter as an array to make it dynamic.

Every ``State`` is a NamedTuple with at least the fields ``x`` (the iterate, any
pytree), ``iter_num`` (int32 scalar), ``error`` (the solver's own optimality
measure, a real scalar) and ``status`` (int32 scalar, see `Status`).
Structure, shapes and dtypes never change between ``init`` and ``step``, so the
driver can run it in ``lax.while_loop``/``lax.scan``.

``check_args(x0, args)`` is the one hook that runs outside the trace: `jaxsolve.solve`
calls it in Python before compiling, with the data as the user passed them (concrete
arrays in an eager call, tracers inside a user's ``jit``), so a solver can reject data
it would otherwise solve to a wrong answer with SUCCESS (value checks a trace cannot
make, e.g. labels that must be $\pm1$). It returns nothing and raises ``ValueError``
naming the argument; it must skip tracers (`jaxsolve.core.validation.is_concrete`).

Run-time options (``solve(..., options=...)``) reach ``step`` as the keyword
``options`` (a dict), and only when given; a solver that takes none need not
declare it.

A solver class may declare ``compiler_options`` (a class attribute, a dict of XLA
options, `jaxsolve.core.compile_options`): `jaxsolve.solve` then compiles its
program with them (``jax.jit(..., compiler_options=...)``) when called outside a
user's ``jit``; they change compile and run time, not what is computed.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "AbstractSolver",
    "Solver",
    "State",
    "pack",
    "Packed",
    "hyper",
]


class State(NamedTuple):
    """The minimal state; solvers define their own NamedTuple with these fields first.

    Attributes:
        x: the iterate, any pytree (its structure, shapes and dtypes fixed by ``init``).
        iter_num: int32 scalar, the number of ``step`` calls made so far.
        error: real scalar in the iterate's dtype, the solver's own optimality measure
            (the driver stops once it is at most ``tol``).
        status: int32 scalar `Status` code: ``SUCCESS`` (0) while nothing terminal
            happened; a solver sets ``INFEASIBLE``/``UNBOUNDED``/``BREAKDOWN`` itself to
            stop the loop.
    """

    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


class AbstractSolver(eqx.Module):
    """Base class of solvers written as ``equinox`` Modules.

    Subclasses implement `init` and `step`; `finalize` defaults to
    the identity and `optimality` to "not declared" (then
    ``solve(..., adjoint=Implicit())`` raises). Mark functions and structural options
    ``eqx.field(static=True)``; leave numeric hyperparameters as plain fields (floats
    or arrays) and cast them with `hyper` where they meet the iterate.
    """

    @abc.abstractmethod
    def init(self, x0, args):
        """The state at ``x0`` for problem data ``args``."""

    @abc.abstractmethod
    def step(self, state, args):
        """One iteration: ``(state, args) -> (state, info)``."""

    def finalize(self, state, args, converged):
        """Runs once after the loop (polish, terminal status); the identity by default."""
        return state


class Solver(NamedTuple):
    """A solver of plain functions: ``Solver(init, step, finalize=None, optimality=None)``.

    ``init(x0, args) -> State``, ``step(state, args) -> (State, Info)``;
    ``finalize(state, args, converged) -> State`` runs once after the loop;
    ``optimality(x, args)`` is a residual with the structure of ``x`` that vanishes at
    a solution (what ``adjoint=Implicit()`` differentiates).
    """

    init: Callable
    step: Callable
    finalize: Callable | None = None
    optimality: Callable | None = None


def hyper(value, like):
    """A numeric hyperparameter (a leaf or pytree) in the floating dtype of ``like``.

    The one place hyperparameters meet the iterate's precision: float64
    hyperparameters must not promote a float32 iterate, and a weakly typed Python
    float must not fix the dtype either. ``like`` is an array, a pytree (its first
    floating leaf decides) or a dtype.
    """
    if isinstance(like, np.dtype | type) or (
        hasattr(like, "itemsize") and not hasattr(like, "shape")
    ):
        dtype = np.dtype(like)
    else:
        leaves = [
            v for v in jax.tree.leaves(like) if jnp.issubdtype(jnp.result_type(v), jnp.inexact)
        ]
        dtype = jnp.result_type(leaves[0]) if leaves else jnp.result_type(float)
    return jax.tree.map(lambda v: jnp.asarray(v, dtype), value)


# --- packing: any solver as a pytree of arrays plus a hashable static part -----------------


def _is_dynamic(leaf) -> bool:
    if isinstance(leaf, bool | np.bool_):
        return False
    return isinstance(leaf, jax.Array | np.ndarray | np.generic | float | complex) or (
        isinstance(leaf, jax.core.Tracer)
    )


def _as_dynamic(leaf):
    # Python floats stay as they are: jit traces them as weakly typed scalars (they take
    # the iterate's precision), and converting each call would cost more than the solve
    if isinstance(leaf, float | complex | jax.Array | jax.core.Tracer):
        return leaf
    return jnp.asarray(leaf)


class _StaticPart:
    """The static part of a packed pytree: compared and hashed by value."""

    __slots__ = ("treedef", "mask", "statics", "_hash")

    def __init__(self, treedef, mask, statics):
        self.treedef = treedef
        self.mask = mask
        self.statics = statics
        try:
            self._hash = hash((treedef, mask, statics))
        except TypeError as err:
            kinds = sorted({type(s).__name__ for s in statics})
            raise TypeError(
                f"a solver's static parts must be hashable (got leaves of types {kinds}): "
                f"{err}; hold arrays as array fields and lists as tuples"
            ) from None

    def __eq__(self, other):
        return (
            isinstance(other, _StaticPart)
            and self.treedef == other.treedef
            and self.mask == other.mask
            and _same(self.statics, other.statics)
        )

    def __hash__(self):
        return self._hash


def _same(a: tuple, b: tuple) -> bool:
    # identity first: `==` on two distinct functions is identity anyway, and `==` on
    # user objects may be elementwise (numpy) or raise
    if len(a) != len(b):
        return False
    for u, v in zip(a, b, strict=True):
        if u is v:
            continue
        try:
            if not bool(u == v):
                return False
        except Exception:  # noqa: BLE001 - an incomparable static is a different one
            return False
    return True


@jax.tree_util.register_pytree_node_class
class Packed:
    """A solver (or any pytree) as traced leaves plus a hashable static part.

    ``Packed`` is itself a pytree whose leaves are arrays only, so it passes through
    ``jax.jit``, ``vmap`` and ``grad`` as an argument whatever the solver holds.
    Attribute access (``packed.step``, ``packed.init`` ...) rebuilds the solver from
    the current leaves (tracers inside a trace) and reads it there.
    """

    __slots__ = ("leaves", "static")

    def __init__(self, leaves, static: _StaticPart):
        self.leaves = tuple(leaves)
        self.static = static

    def unpack(self):
        dynamic = iter(self.leaves)
        static = iter(self.static.statics)
        full = [next(dynamic) if dyn else next(static) for dyn in self.static.mask]
        return jax.tree.unflatten(self.static.treedef, full)

    def __getattr__(self, name):
        if name in Packed.__slots__:
            raise AttributeError(name)
        return getattr(self.unpack(), name)

    def tree_flatten(self):
        return self.leaves, self.static

    @classmethod
    def tree_unflatten(cls, static, leaves):
        obj = object.__new__(cls)
        obj.leaves = tuple(leaves)
        obj.static = static
        return obj

    def __repr__(self):
        return f"Packed({type(self.unpack()).__name__}, {len(self.leaves)} array leaves)"


def pack(tree) -> Packed:
    """Split ``tree`` (a solver, options ...) into traced leaves and a static part.

    Arrays and Python floats are dynamic; everything else (functions, ints, bools,
    strings, ``None``) is static and must be hashable. Idempotent.
    """
    if isinstance(tree, Packed):
        return tree
    leaves, treedef = jax.tree.flatten(tree)
    mask = tuple(_is_dynamic(v) for v in leaves)
    dyn = [_as_dynamic(v) for v, d in zip(leaves, mask, strict=True) if d]
    statics = tuple(v for v, d in zip(leaves, mask, strict=True) if not d)
    return Packed(dyn, _StaticPart(treedef, mask, statics))


def solver_attr(solver, name: str):
    """``getattr(solver, name, None)`` without building a bound method of a Module
    (equinox makes one per access: tens of microseconds, paid on every ``solve``)."""
    target = solver.unpack() if isinstance(solver, Packed) else solver
    if isinstance(target, eqx.Module):
        return getattr(type(target), name, None)
    return getattr(target, name, None)


def run_check_args(solver, x0, args) -> None:
    """Call the solver's optional ``check_args(x0, args)`` hook (see the module docstring);
    a no-op for a solver without one."""
    target = solver.unpack() if isinstance(solver, Packed) else solver
    hook = solver_attr(target, "check_args")
    if hook is None:
        return
    if isinstance(target, eqx.Module):
        hook(target, x0, args)  # solver_attr returns the class's function, unbound
    else:
        hook(x0, args)


def check_solver(solver) -> None:
    """Raise ``TypeError`` unless ``solver`` has callable ``init`` and ``step``."""
    target = solver.unpack() if isinstance(solver, Packed) else solver
    missing = [m for m in ("init", "step") if not callable(solver_attr(target, m))]
    if missing:
        raise TypeError(
            f"solver must have callable init(x0, args) and step(state, args) "
            f"(a jaxsolve.AbstractSolver or jaxsolve.Solver(init, step)); "
            f"{type(target).__name__} lacks {', '.join(missing)}"
        )
