"""Bad input to the OT barycenter (issue 23): errors that name the argument, and
non-probability weights under ``vmap`` end BREAKDOWN (they gave SUCCESS with negative
mass)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve.ot import barycenter

_x = jnp.linspace(0, 1, 32)
_D = jnp.stack([jnp.exp(-(((_x - 0.3) / 0.05) ** 2)), jnp.exp(-(((_x - 0.7) / 0.05) ** 2))])


def test_negative_weights_under_vmap_are_breakdown_and_good_lanes_kept():
    ws = jnp.array([[0.5, 0.5], [1.5, -0.5], [0.3, 0.7], [0.4, 0.4]])
    sol = jax.vmap(lambda w: barycenter(_D, w))(ws)
    st = np.asarray(sol.status)
    assert st[1] == Status.BREAKDOWN and st[3] == Status.BREAKDOWN
    assert st[0] == Status.SUCCESS and st[2] == Status.SUCCESS
    # the good lanes: a probability histogram whose mean is the weighted mean of the inputs
    centres = (np.arange(32) + 0.5) / 32
    m = np.asarray(_D / _D.sum(1, keepdims=True)) @ centres
    for i, w in ((0, ws[0]), (2, ws[2])):
        x = np.asarray(sol.x[i])
        assert x.min() >= 0 and abs(x.sum() - 1) <= 1e-12
        assert abs(x @ centres - np.asarray(w) @ m) <= 2e-3


ERRORS = [
    ("empty", lambda: barycenter(jnp.zeros((0, 64))), ValueError, "densities is empty"),
    ("bfloat16", lambda: barycenter(_D.astype(jnp.bfloat16)), TypeError, "densities"),
    ("int", lambda: barycenter(jnp.ones((2, 8), jnp.int32)), TypeError, "densities"),
    ("nan", lambda: barycenter(_D.at[0, 3].set(jnp.nan)), ValueError, "densities"),
    ("negative", lambda: barycenter(_D.at[0, 3].set(-1.0)), ValueError, "densities"),
    (
        "one 2-D density read as rows",
        lambda: barycenter(jnp.zeros((64, 64)).at[:8].set(1.0)),
        ValueError,
        r"densities\[None\]",
    ),
    ("weights length", lambda: barycenter(_D, jnp.ones(3) / 3), ValueError, "weights"),
    ("weights negative", lambda: barycenter(_D, jnp.array([1.5, -0.5])), ValueError, "weights"),
    ("weights sum", lambda: barycenter(_D, jnp.array([0.4, 0.4])), ValueError, "weights"),
    ("1-D input", lambda: barycenter(_D[0]), ValueError, "densities"),
    ("grids differ", lambda: barycenter([_D[0], _D[0, :16]]), ValueError, "grids"),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()
