"""The timer: the first call (compilation) apart from steady-state calls."""

from __future__ import annotations

import time

import numpy as np

_STATS = {"median": np.median, "min": np.min, "mean": np.mean}


def _ready(out):
    import jax

    return jax.block_until_ready(out)


def compile_and_steady(fn, repeat: int = 1, *, stat: str = "median"):
    """``(out, steady, compile)`` for a zero-argument ``fn``: ``steady`` is the ``stat``
    (``"median"``, ``"min"`` or ``"mean"``) of ``repeat`` calls after the first, and
    ``compile`` the first call's extra time over it (zero at the least)."""
    t0 = time.perf_counter()
    out = _ready(fn())
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = _ready(fn())
        times.append(time.perf_counter() - t0)
    steady = float(_STATS[stat](times))
    return out, steady, max(first - steady, 0.0)


def timed(fn, *args, repeat: int = 1, **kwargs):
    """``(fn(*args, **kwargs), seconds)``: called once to compile, then the mean time
    of ``repeat`` calls."""
    out, steady, _ = compile_and_steady(lambda: fn(*args, **kwargs), repeat, stat="mean")
    return out, steady


def best_of_interleaved(calls, repeat: int) -> list[float]:
    """Best-of-``repeat`` time of each zero-argument call, the calls interleaved (after
    one warm-up call each): ours and the peer run under the same background load, and
    the minimum is the least noisy statistic on a shared machine."""
    for call in calls:
        _ready(call())
    times = [[] for _ in calls]
    for _ in range(repeat):
        for call, ts in zip(calls, times, strict=True):
            t0 = time.perf_counter()
            _ready(call())
            ts.append(time.perf_counter() - t0)
    return [float(np.min(ts)) for ts in times]
