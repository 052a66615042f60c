"""Bad input to the preference losses (issue 23): errors that name the argument; NaN
propagates (a loss never turns NaN into a finite number)."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.losses import dpo_loss

_A = jnp.array([-1.0, -2.0, -0.5, -3.0])


ERRORS = [
    ("shape", lambda: dpo_loss(_A, _A[:3], _A, _A), ValueError, "policy_rejected_logps"),
    ("int", lambda: dpo_loss(jnp.zeros(4, jnp.int32), _A, _A, _A), TypeError, "policy_chosen"),
    ("beta < 0", lambda: dpo_loss(_A, _A, _A, _A, beta=-1.0), ValueError, "beta"),
    ("beta nan", lambda: dpo_loss(_A, _A, _A, _A, beta=float("nan")), ValueError, "beta"),
    ("kind", lambda: dpo_loss(_A, _A, _A, _A, kind="nope"), ValueError, "kind"),
    # a Python list reached jnp.result_type's raw 'Cannot determine dtype'
    ("list", lambda: dpo_loss(_A, _A, [-1.0, -2.0, -0.5, -3.0], _A), TypeError, "ref_chosen_logps"),
    (
        "complex",
        lambda: dpo_loss(_A + 0j, _A, _A, _A),
        TypeError,
        "policy_chosen_logps",
    ),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_nan_propagates_and_other_rows_are_exact():
    chosen = _A.at[0].set(jnp.nan)
    out = np.asarray(dpo_loss(chosen, _A - 1.0, _A, _A, beta=0.1))
    assert np.isnan(out[0])
    # -log sigmoid(beta * ((c - r_c) - (r - r_r))) with margin 1: log(1 + exp(-0.1))
    np.testing.assert_allclose(out[1:], np.log1p(np.exp(-0.1)), rtol=1e-12)


def test_empty_batch_gives_an_empty_loss():
    e = jnp.zeros(0)
    assert dpo_loss(e, e, e, e).shape == (0,)
