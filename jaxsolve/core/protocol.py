"""The solver protocol: a pure ``init``/``step`` pair over pytrees.

A :class:`Solver` is a NamedTuple of three callables::

    state = solver.init(x0, args)            # -> State
    state, info = solver.step(state, args)   # -> (State, Info)
    state = solver.finalize(state, args, converged)   # optional, once, after the loop

Every ``State`` is a NamedTuple with at least the fields ``x`` (the iterate, any
pytree), ``iter_num`` (int32 scalar), ``error`` (the solver's own optimality
measure, a real scalar) and ``status`` (int32 scalar, see :class:`~jaxsolve.Status`).
Structure, shapes and dtypes never change between ``init`` and ``step``, so the
driver can run it in ``lax.while_loop``/``lax.scan``.

Functions (objective, projection, oracle, manifold) are fixed when a factory builds
a solver; problem data travels in ``args`` so it can be vmapped, sharded and
differentiated. Numeric hyperparameters are *array leaves* of the solver itself:
``make_solver`` binds them with :class:`BoundFn`, a pytree whose leaves are the
hyperparameters and whose static part (the function and structural options) is
compared by value. Hence a sweep over a step size reuses one compilation of
``jaxsolve.solve``, while changing a structural option recompiles, as it must.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Solver", "BoundFn", "make_solver", "State"]


class State(NamedTuple):
    """The minimal state; solvers define their own NamedTuple with these fields first."""

    x: Any
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


def _freeze(value):
    """Make a static option hashable (lists -> tuples, dicts -> sorted tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _accepted(fn: Callable, options: dict) -> dict:
    """The options ``fn`` declares (all of them if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: pass everything
        return dict(options)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(options)
    names = {p.name for p in params}
    return {k: v for k, v in options.items() if k in names}


class _Static:
    """The static part of a BoundFn: compared and hashed by value."""

    __slots__ = ("fn", "options", "call_options", "key")

    def __init__(self, fn: Callable, options: dict):
        self.fn = fn
        self.options = options
        self.call_options = _accepted(fn, options)
        key = (fn, tuple(sorted((k, _freeze(v)) for k, v in options.items())))
        try:
            hash(key)
        except TypeError as err:  # an unhashable static option is a bug in the factory
            raise TypeError(f"static options of {fn!r} must be hashable: {err}") from None
        self.key = key

    def __eq__(self, other):
        return isinstance(other, _Static) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


@jax.tree_util.register_pytree_node_class
class BoundFn:
    """``fn`` with numeric hyperparameters ``hp`` (pytree leaves) and static options.

    Calling ``BoundFn(fn, hp, **static)(*a)`` runs ``fn(*a, hp=hp, **opts)``, where
    ``opts`` are the static options that ``fn`` declares (all of them if it takes
    ``**kwargs``): ``init``, ``step`` and ``finalize`` of one solver share one set of
    options, and each takes just the ones it uses.
    Two BoundFns with the same ``fn`` and equal static options have equal treedefs,
    so ``jit`` reuses its compilation across different hyperparameter values.
    """

    # __weakref__: jax.jit(solver.step) needs a weak-referenceable callable.
    __slots__ = ("hp", "_static", "__weakref__")

    def __init__(self, fn: Callable, hp: Any = None, **static):
        self.hp = hp
        self._static = _Static(fn, static)

    @property
    def fn(self) -> Callable:
        return self._static.fn

    @property
    def static(self) -> dict:
        return self._static.options

    def __call__(self, *args):
        return self._static.fn(*args, hp=self.hp, **self._static.call_options)

    def tree_flatten(self):
        return (self.hp,), self._static

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj._static = aux
        obj.hp = children[0]
        return obj

    def __repr__(self):
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        return f"BoundFn({name}, static={sorted(self.static)})"


class Solver(NamedTuple):
    """A pure iterative method: ``init(x0, args) -> State``, ``step(state, args) -> (State, Info)``.

    ``finalize(state, args, converged) -> State`` is optional: it runs once after the
    loop (polishing, recovering a primal from a dual, deciding a terminal status
    such as ``INFEASIBLE`` only when the iteration converged).
    """

    init: Callable
    step: Callable
    finalize: Callable | None = None


def make_solver(
    init: Callable,
    step: Callable,
    finalize: Callable | None = None,
    *,
    hp: Any = None,
    **static,
) -> Solver:
    """Build a :class:`Solver` whose numeric hyperparameters ``hp`` are pytree leaves.

    ``init(x0, args, *, hp, ...)``, ``step(state, args, *, hp, ...)`` and
    ``finalize(state, args, converged, *, hp, ...)`` are module-level functions, each
    receiving the options of ``static`` it declares as keyword parameters;
    ``static`` holds the functions and structural options (must be hashable: user
    functions compare by identity, so define them once, not per call).
    """
    if hp is not None:
        hp = jax.tree.map(_as_hyper_leaf, hp)
    return Solver(
        init=BoundFn(init, hp, **static),
        step=BoundFn(step, hp, **static),
        finalize=None if finalize is None else BoundFn(finalize, hp, **static),
    )


def _as_hyper_leaf(v):
    if isinstance(v, jax.Array) or hasattr(v, "dtype"):
        return v
    if isinstance(v, bool):
        raise TypeError("boolean hyperparameters are structural: pass them as static options")
    return jnp.asarray(v)
