"""``jaxsolve.core.compile_options``: XLA options that shorten a program's compilation.

A first call pays XLA's compilation (issue 24, ``bench/results/compile.md``), and on
XLA:CPU most of it is LLVM's time on the code of the program's many small kernels.
Two options of XLA:CPU cut it without slowing the compiled program on this library's
programs (each use below was measured, compile time and steady state):

* ``xla_cpu_use_fusion_emitters=False``: XLA's loop emitters instead of its MLIR fusion
  emitters. Fewer ops are fused, and each kernel is much cheaper to compile.
* ``xla_backend_optimization_level=1`` (default 2): LLVM's ``-O1`` pipeline, without
  the loop vectorizer, on those kernels. The heavy work of a small solver runs in
  library calls (Eigen's products, LAPACK's factorizations), not in generated loops.
  Level 0 would cut compilation again by about 3x, but the generated code then runs
  1.5-2.4x slower (FlexQP, `bench/results/compile.md`).

The options are given per program (``jax.jit(..., compiler_options=...)``), never
through ``XLA_FLAGS``, so a user's own programs are compiled as they ask. They apply
to a library program called at top level: JAX takes ``compiler_options`` on a
top-level ``jit`` only, and a library program called inside a user's ``jax.jit``
(or ``vmap``, ``grad``) is traced into the user's program and compiled with its
options (a user may pass ``compiler_options=LOOP_EMITTERS_O1`` to that ``jit``).
An option that ``XLA_FLAGS`` sets is left out (the process's choice wins: the test
suite compiles everything at ``-O0``, `tests/conftest.py`).
They were measured on XLA:CPU only, so `options_jit` gives them on a CPU default
backend and compiles the plain program elsewhere. An XLA that does not know an option
rejects the program with "No such compile option"; `options_jit` then compiles the
same program without the options (decided once per option set, remembered).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import jax

__all__ = [
    "LOOP_EMITTERS",
    "LOOP_EMITTERS_O1",
    "OptionsJit",
    "at_top_level",
    "options_cache_size",
    "options_jit",
    "unset_options",
]

LOOP_EMITTERS = {"xla_cpu_use_fusion_emitters": False}
"""XLA:CPU's loop emitters instead of its MLIR fusion emitters (`jaxsolve.cluster.kmeans`)."""

LOOP_EMITTERS_O1 = {**LOOP_EMITTERS, "xla_backend_optimization_level": 1}
"""`LOOP_EMITTERS` with LLVM at ``-O1`` (FlexQP's programs, `jaxsolve.qp.flexqp.FlexQP`)."""

# option sets an XLA rejected ("No such compile option"): key -> the error's text
_REJECTED: dict[tuple, str] = {}


def _key(options: dict) -> tuple:
    return tuple(sorted(options.items()))


def unset_options(options: dict, xla_flags: str | None = None) -> dict:
    """The options that ``XLA_FLAGS`` (``xla_flags``, default the environment's) does not
    name: a process that sets one (the test suite's ``-O0``, a user's choice) keeps its
    own value, which a per-program option would override."""
    flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    named = {tok.split("=")[0].lstrip("-") for tok in flags.split()}
    return {k: v for k, v in options.items() if k not in named}


def at_top_level() -> bool:
    """True outside every JAX transformation (``jit``, ``vmap``, ``grad``): JAX takes
    ``compiler_options`` on a top-level ``jax.jit`` only (inside another ``jit`` the
    program is inlined there, and JAX raises)."""
    try:
        from jax._src.core import trace_state_clean
    except ImportError:  # another JAX: the ValueError in OptionsJit.__call__ decides
        return True
    return trace_state_clean()


class OptionsJit:
    """``jax.jit(fun, compiler_options=options, **jit_kwargs)`` called at top level on a
    CPU backend, else the plain ``jax.jit(fun, **jit_kwargs)``: inside a user's ``jit``,
    ``vmap`` or ``grad``, on another backend, and on an XLA that rejects one of the
    options (they change compile and run time, not the program's meaning). Options that
    ``XLA_FLAGS`` sets are left to it (`unset_options`). ``_cache_size()`` counts both
    compilations."""

    def __init__(self, fun: Callable, options: dict, **jit_kwargs: Any):
        self.options = dict(options)
        self.plain = jax.jit(fun, **jit_kwargs)
        self._fun, self._jit_kwargs, self._with_options = fun, jit_kwargs, None
        functools.update_wrapper(self, fun)

    @property
    def with_options(self):
        """The jit with the options that ``XLA_FLAGS`` does not set (built on first use,
        when the process's flags are known; the plain jit when none is left)."""
        if self._with_options is None:
            left = unset_options(self.options)
            self._with_options = (
                jax.jit(self._fun, compiler_options=left, **self._jit_kwargs)
                if left
                else self.plain
            )
        return self._with_options

    def __call__(self, *args, **kwargs):
        key = _key(self.options)
        if key not in _REJECTED and at_top_level() and jax.default_backend() == "cpu":
            try:
                return self.with_options(*args, **kwargs)
            except jax.errors.JaxRuntimeError as e:
                if "No such compile option" not in str(e):
                    raise
                _REJECTED[key] = str(e)
            except ValueError as e:  # inside a trace at_top_level could not see
                if "top-level" not in str(e):
                    raise
        return self.plain(*args, **kwargs)

    def _options_cache_size(self) -> int:
        """Compilations with the options (JAX shares the plain jit's cache with every
        other plain ``jax.jit`` of the same function and keywords)."""
        extra = self._with_options
        return 0 if extra is None or extra is self.plain else extra._cache_size()

    def _cache_size(self) -> int:
        return self.plain._cache_size() + self._options_cache_size()


_MADE: dict[tuple, OptionsJit] = {}


def options_jit(fun: Callable | None = None, options: dict | None = None, **jit_kwargs: Any):
    """`OptionsJit` of ``fun`` (one per ``fun``, option set and jit keywords, so the
    compilation cache is shared by every caller); usable as a decorator with
    ``functools.partial(options_jit, options=..., static_argnames=...)``."""
    if fun is None:
        return functools.partial(options_jit, options=options, **jit_kwargs)
    if options is None:
        raise TypeError("options_jit needs options (a dict of XLA compile options)")
    frozen = tuple(
        sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in jit_kwargs.items())
    )
    key = (fun, _key(options), frozen)
    made = _MADE.get(key)
    if made is None:
        made = _MADE[key] = OptionsJit(fun, options, **jit_kwargs)
    return made


def options_cache_size(fun: Callable) -> int:
    """Compilations of ``fun`` with options, by every `options_jit` of it (any option
    set); those without options are the plain ``jax.jit(fun)``'s, shared with it."""
    return sum(j._options_cache_size() for (f, *_), j in _MADE.items() if f is fun)
