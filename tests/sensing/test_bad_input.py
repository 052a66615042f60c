"""Bad input to matrix sensing (issue 23): starts off the domain end BREAKDOWN (a zero
start ended SUCCESS at Z = 0), NaN ends NONFINITE, bad arguments are named."""

import jax
import jax.numpy as jnp
import pytest

import jaxsolve
from jaxsolve import Status
from jaxsolve import sensing as S

_MEAS = S.make_problem(jax.random.key(0), 6, 2, 500)
if isinstance(_MEAS, tuple):
    _MEAS = _MEAS[0]
_X0 = S.initial_point(jax.random.key(1), 6, 2)


CASES = [
    ("wn zero", S.weight_normalized(), jax.tree.map(jnp.zeros_like, _X0), Status.BREAKDOWN),
    ("wn scaled X", S.weight_normalized(), (2 * _X0[0], _X0[1]), Status.BREAKDOWN),
    ("wn nan", S.weight_normalized(), jax.tree.map(lambda v: v * jnp.nan, _X0), None),
    ("bm zero", S.burer_monteiro(), jnp.zeros((6, 2)), Status.BREAKDOWN),
    ("bm nan", S.burer_monteiro(), jnp.full((6, 2), jnp.nan), None),
]


@pytest.mark.parametrize("case,solver,x0,want", CASES, ids=[c[0] for c in CASES])
def test_bad_start_is_not_success(case, solver, x0, want):
    sol = jaxsolve.solve(solver, x0, _MEAS, max_steps=5)
    if want is None:
        assert int(sol.status) in (Status.NONFINITE, Status.BREAKDOWN)
    else:
        assert int(sol.status) == want


def test_good_start_still_descends():
    sol = jaxsolve.solve(S.weight_normalized(), _X0, _MEAS, max_steps=20)
    f0 = S.sensing_loss(_X0[0] @ _X0[1] @ _X0[0].T, _MEAS)
    assert int(sol.status) != Status.BREAKDOWN
    assert float(sol.state.f) < float(f0)


ERRORS = [
    ("direction_step", lambda: S.weight_normalized(direction_step=-1.0), "direction_step"),
    ("stepsize", lambda: S.burer_monteiro(stepsize=0.0), "stepsize"),
    ("m", lambda: S.make_problem(jax.random.key(0), 0, 2, 500), "m"),
    ("cond", lambda: S.make_problem(jax.random.key(0), 6, 2, 500, cond=-1.0), "cond"),
    ("chunk", lambda: S.make_problem(jax.random.key(0), 6, 2, 300), "chunk"),
    (
        "x0 size",
        lambda: jaxsolve.solve(S.burer_monteiro(), jnp.ones((5, 2)), _MEAS, max_steps=2),
        "shape",
    ),
]


@pytest.mark.parametrize("case,call,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments_are_named(case, call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
