"""Shape stability: a second call with new data of the same shapes and the same static
options reuses the compiled programs (nothing is traced or lowered again)."""

import contextlib
import logging

import jax
import numpy as np
import pytest

from jaxsolve import evaluation as ev

TINY = dict(n_test=10, n_val=10, rounds=1, epochs=5, final_epochs=10, check_every=5, patience=2)


@contextlib.contextmanager
def compiles():
    """JAX's log of what it traces for ``jit`` and lowers for compilation inside the
    block (eager operations included; a persistent-cache hit still counts)."""
    names = []
    handler = logging.Handler()
    handler.emit = lambda r: names.append(r.getMessage().split(" with ")[0])
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles(True):
            yield names
    finally:
        logger.removeHandler(handler)


def _data(seed):
    return ev.synthetic_benchmark(jax.random.key(seed), 60, 20, 3).Y


CALLS = {
    "synthetic_benchmark": lambda s: (
        ev.synthetic_benchmark(jax.random.key(s), 60, 20, 3, n_families=2, a_scale=0.5 + s).Y
    ),
    "linear_weights": lambda s: ev.linear_weights(
        _data(s), 4, jax.random.key(s), steps=10, lr=0.01 * (s + 1)
    ).predict(_data(s)[:, :4]),
    "irt": lambda s: ev.irt(
        _data(s), 4, jax.random.key(s), steps=10, lr=0.05 * (s + 1), theta_steps=5
    ).predict(_data(s)[:, :4]),
    "sparse_eval_sweep": lambda s: (
        ev.sparse_eval_sweep(
            _data(s), [3, 4], [jax.random.key(s), jax.random.key(s + 5)], lr=1e-3 * (s + 1), **TINY
        ).diagnostics.round_val_mae
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_second_call_with_new_data_compiles_nothing(name):
    _data(1), _data(2)  # the test data themselves are not counted
    first = np.asarray(CALLS[name](1))
    with compiles() as names:
        second = np.asarray(CALLS[name](2))
    assert names == []
    # new data, new answer (not a cached result)
    assert first.shape == second.shape and not np.array_equal(first, second)
