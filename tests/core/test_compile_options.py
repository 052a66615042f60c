"""`jaxsolve.core.compile_options`: per-program XLA options, their fallback, and the
solver hook (``compiler_options``) through which `jaxsolve.solve` uses them."""

import jax
import jax.numpy as jnp
import pytest

import jaxsolve
from jaxsolve.core import compile_options as co
from jaxsolve.core import driver
from jaxsolve.qp import flexqp
from jaxsolve.qp.problems import random_qp


def _double(x):
    return 2.0 * x


def _options_of(jitted, *args) -> dict:
    # the options JAX hands to XLA for this jit (a private field of the lowering)
    return dict(jitted.lower(*args)._lowering._compiler_options_kvs)


def test_options_reach_the_top_level_program_only(monkeypatch):
    """At top level the program is compiled with the options, inside a user's ``jit``
    or ``grad`` it is inlined without them (JAX refuses them there); one `OptionsJit`
    per function and option set is shared by every caller."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    f = co.options_jit(_double, co.LOOP_EMITTERS_O1)
    assert f is co.options_jit(_double, co.LOOP_EMITTERS_O1)
    assert f is not co.options_jit(_double, co.LOOP_EMITTERS)
    g = co.OptionsJit(_double, co.LOOP_EMITTERS_O1)  # built under this XLA_FLAGS
    assert _options_of(g.with_options, 1.0) == co.LOOP_EMITTERS_O1
    assert _options_of(g.plain, 1.0) == {}
    assert float(g(jnp.float64(1.5))) == 3.0
    assert g.with_options._cache_size() == 1 and g.plain._cache_size() == 0
    # inside a trace JAX refuses compiler_options; the plain program is inlined there
    assert float(jax.jit(lambda x: g(x) + 1.0)(jnp.float64(1.5))) == 4.0
    assert float(jax.jit(lambda: g(jnp.float64(2.0)))()) == 4.0  # no tracer in the args
    assert float(jax.grad(g)(jnp.float64(1.0))) == 2.0
    assert g._cache_size() == 1


def test_xla_flags_keep_their_own_values(monkeypatch):
    """An option that ``XLA_FLAGS`` names is left to it (the test suite's -O0)."""
    flags = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    assert co.unset_options(co.LOOP_EMITTERS_O1, flags) == co.LOOP_EMITTERS
    assert co.unset_options(co.LOOP_EMITTERS, flags + " --xla_cpu_use_fusion_emitters=false") == {}
    monkeypatch.setenv("XLA_FLAGS", flags)
    g = co.OptionsJit(_double, co.LOOP_EMITTERS_O1)
    assert _options_of(g.with_options, 1.0) == co.LOOP_EMITTERS
    monkeypatch.setenv("XLA_FLAGS", flags + " --xla_cpu_use_fusion_emitters=false")
    h = co.OptionsJit(_double, co.LOOP_EMITTERS_O1)
    assert h.with_options is h.plain


def test_an_unknown_option_falls_back_once_and_other_errors_raise(monkeypatch):
    """An XLA that rejects an option ("No such compile option") gets the same program
    without the options, decided once per option set; other errors still raise."""
    monkeypatch.setattr(co, "_REJECTED", {})
    f = co.OptionsJit(_double, {"xla_cpu_no_such_option": True})
    assert float(f(jnp.float64(1.0))) == 2.0
    (why,) = co._REJECTED.values()
    assert "xla_cpu_no_such_option" in why
    calls = []
    f._with_options = lambda x: calls.append(x)
    assert float(f(jnp.float64(3.0))) == 6.0  # not retried
    assert calls == [] and f.plain._cache_size() == 1

    def fails(x):
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: out of memory")

    g = co.OptionsJit(_double, co.LOOP_EMITTERS)
    g._with_options = fails
    with pytest.raises(jax.errors.JaxRuntimeError, match="out of memory"):
        g(jnp.float64(1.0))


def test_solve_compiles_flexqp_through_its_options_and_sweeps_reuse_it(monkeypatch):
    """FlexQP declares ``compiler_options``: `jaxsolve.solve` runs its while loop
    through `options_jit` (not the plain program), and a sweep over a float
    hyperparameter reuses that one compilation."""
    assert flexqp().compiler_options == co.LOOP_EMITTERS_O1
    qp = random_qp(jax.random.key(3), 7, 11)
    x0 = jnp.zeros(7)
    run = co.options_jit(
        driver._solve_while_program, co.LOOP_EMITTERS_O1, static_argnames=driver._WHILE_STATIC
    )
    calls, total = [], None
    spy = co.OptionsJit.__call__
    monkeypatch.setattr(
        co.OptionsJit, "__call__", lambda s, *a, **k: calls.append(s) or spy(s, *a, **k)
    )
    for rho in (0.1, 0.3):
        sol = jaxsolve.solve(flexqp(rho=rho), x0, qp, tol=1e-8)
        assert int(sol.status) == 0
        total = total or driver.solve_while_cache_size()
    assert calls == [run, run]
    assert driver.solve_while_cache_size() == total
