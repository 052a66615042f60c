"""Helpers shared by the benchmark scripts (run as ``python bench/<family>.py``).

* where results go: ``bench/results/<name>.md``, or ``<name>_quick.md`` for a
  ``--quick`` run, so that CI's quick runs never overwrite the full tables;
* timing: compile time apart from steady-state time, and interleaved best-of
  timing so ours and a peer see the same background load.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def results_path(name: str, quick: bool = False) -> pathlib.Path:
    """``bench/results/<name>.md`` (``<name>_quick.md`` for a quick run)."""
    return ROOT / "bench" / "results" / f"{name}{'_quick' if quick else ''}.md"


def write_results(name: str, text: str, *, quick: bool = False, out=None) -> pathlib.Path:
    """Write a results table (to ``out`` if given) and say where it went."""
    path = pathlib.Path(out) if out else results_path(name, quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return path


def _ready(out):
    import jax

    return jax.block_until_ready(out)


def compile_and_steady(fn, repeat: int):
    """``(out, steady, compile)``: median time of ``repeat`` calls after the first, and
    the first call's extra time (compilation) over that median."""
    t0 = time.perf_counter()
    out = _ready(fn())
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = _ready(fn())
        times.append(time.perf_counter() - t0)
    steady = float(np.median(times))
    return out, steady, max(first - steady, 0.0)


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
