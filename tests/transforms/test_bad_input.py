"""Bad input to ``cautious_weight_decay`` (issue 23): a mask that does not match the
params is named (it was a raw pytree structure error), bad weight decays are named, and
non-finite params give non-finite updates (never silently finite ones)."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxsolve.transforms import cautious_weight_decay

_PARAMS = {"w": jnp.array([1.0, -2.0]), "b": jnp.array(0.5)}


@pytest.mark.parametrize(
    "mask",
    [
        {"w": True},  # a missing key
        {"w": True, "b": True, "c": False},  # an extra key
        [True, False],  # a list for a dict
    ],
)
def test_mismatched_mask_is_named(mask):
    tx = cautious_weight_decay(0.1, mask=mask)
    with pytest.raises(ValueError, match="mask"):
        state = tx.init(_PARAMS)
        tx.update(_PARAMS, state, _PARAMS)


def test_matching_mask_and_prefix_still_work():
    tx = cautious_weight_decay(0.1, mask={"w": True, "b": False})
    state = tx.init(_PARAMS)
    upd, _ = tx.update(_PARAMS, state, _PARAMS)
    np.testing.assert_allclose(upd["w"], 1.1 * _PARAMS["w"])
    np.testing.assert_allclose(upd["b"], _PARAMS["b"])
    tx = cautious_weight_decay(0.1, mask=lambda p: {"w": False, "b": True})
    upd, _ = tx.update(_PARAMS, tx.init(_PARAMS), _PARAMS)
    np.testing.assert_allclose(upd["b"], 1.1 * 0.5)


@pytest.mark.parametrize("wd", [-1.0, float("nan")])
def test_bad_weight_decay_is_named(wd):
    with pytest.raises(ValueError, match="weight_decay"):
        cautious_weight_decay(wd)


def test_missing_params_is_named():
    tx = cautious_weight_decay(0.1)
    with pytest.raises(ValueError, match="params"):
        tx.update(_PARAMS, tx.init(_PARAMS))


def test_nan_params_give_nan_updates():
    p = {"w": jnp.array([jnp.nan, 1.0]), "b": jnp.array(0.5)}
    tx = optax.chain(cautious_weight_decay(0.1))
    upd, _ = tx.update(p, tx.init(p), p)
    assert np.isnan(np.asarray(upd["w"][0]))
