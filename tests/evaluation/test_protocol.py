"""SparseEval's protocol options: which round's anchors are kept (``keep``) and a
user-given start (``init_anchors``), with their argument checks."""

import jax
import numpy as np
import pytest

from jaxsolve import evaluation as ev

K0 = jax.random.key(0)
Y = (np.random.default_rng(0).uniform(size=(120, 20)) < 0.6).astype(np.float64)
# a tiny schedule: these tests check which anchors come back, not accuracy
TINY = dict(
    n_test=20, n_val=20, epochs=20, final_epochs=50, check_every=25, patience=2, hidden=(8,)
)
A0 = np.array([3, 17, 0, 9])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(keep="first"), r"keep must be one of \('best', 'last'\), got 'first'"),
        (dict(keep=None), "keep must be one of"),
        (dict(init_anchors=[3, 17, 0]), r"init_anchors must be a vector of K = 4 ints"),
        (dict(init_anchors=[3.0, 17, 0, 9]), "init_anchors must be a vector of K = 4 ints"),
        (dict(init_anchors=[[3, 17, 0, 9]]), "init_anchors must be a vector of K = 4 ints"),
        (dict(init_anchors=[3, 17, 0, 20]), r"init_anchors must lie in \[0, 20\)"),
        (dict(init_anchors=[3, -1, 0, 9]), r"init_anchors must lie in \[0, 20\)"),
        (dict(init_anchors=[3, 17, 3, 9]), "init_anchors must be distinct"),
        (dict(init_anchors=A0, init="random"), "init_anchors replaces init"),
    ],
)
def test_protocol_options_are_checked_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ev.sparse_eval(Y, 4, K0, **TINY, **kwargs)


def test_sweep_checks_keep_and_takes_no_init_anchors():
    with pytest.raises(ValueError, match="keep must be one of"):
        ev.sparse_eval_sweep(Y, [4], [K0], keep="middle", **TINY)
    with pytest.raises(TypeError, match=r"unknown options \['init_anchors'\]"):
        ev.sparse_eval_sweep(Y, [4], [K0], init_anchors=A0, **TINY)


@pytest.mark.parametrize("keep", ["best", "last"])
def test_init_anchors_are_used_as_given(keep):
    """With no swap round the given start is the returned anchor set, in its order."""
    r = ev.sparse_eval(Y, 4, K0, rounds=0, keep=keep, init_anchors=A0, **TINY)
    np.testing.assert_array_equal(np.asarray(r.anchors), A0)
    np.testing.assert_array_equal(np.asarray(r.diagnostics.round_anchors), A0[None])
    assert int(r.diagnostics.best_round) == 0


def test_keep_last_returns_the_last_rounds_anchors():
    """Same key, same start: both modes walk the same swaps (round i trains with the
    same keys), so "last" must return the best mode's set after the last swap, and
    "best" the set of least validation MAE."""
    rounds = 3
    best = ev.sparse_eval(Y, 4, K0, rounds=rounds, keep="best", init_anchors=A0, **TINY)
    last = ev.sparse_eval(Y, 4, K0, rounds=rounds, keep="last", init_anchors=A0, **TINY)
    hist = np.asarray(best.diagnostics.round_anchors)
    assert hist.shape == (rounds + 1, 4)
    np.testing.assert_array_equal(hist[0], A0)
    # each round swaps exactly one anchor for an item not in the set
    for a, b in zip(hist[:-1], hist[1:], strict=True):
        assert np.sum(a != b) == 1 and len(set(b)) == 4
    # "best": the least validation MAE of the rounds + 1 proxies
    val = np.asarray(best.diagnostics.round_val_mae)
    assert val.shape == (rounds + 1,) and int(best.diagnostics.best_round) == np.argmin(val)
    np.testing.assert_array_equal(np.asarray(best.anchors), hist[np.argmin(val)])
    # "last": after the last swap, no proxy trained on it (rounds proxies, not rounds + 1)
    assert int(last.diagnostics.best_round) == rounds
    np.testing.assert_array_equal(np.asarray(last.anchors), hist[rounds])
    np.testing.assert_array_equal(np.asarray(last.diagnostics.round_anchors), hist)
    np.testing.assert_allclose(np.asarray(last.diagnostics.round_val_mae), val[:rounds], rtol=1e-12)
