"""Helpers shared by the benchmark scripts (run as ``python bench/<family>.py``).

* where results go: ``bench/results/<name>.md``, or ``<name>_quick.md`` for a
  ``--quick`` run, so that CI's quick runs never overwrite the full tables;
* provenance: every table ends with the command that regenerates it, the machine
  and the commit and date it was measured at (`provenance`);
* timing: compile time apart from steady-state time, and interleaved best-of
  timing so ours and a peer see the same background load.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def results_path(name: str, quick: bool = False) -> pathlib.Path:
    """``bench/results/<name>.md`` (``<name>_quick.md`` for a quick run)."""
    return ROOT / "bench" / "results" / f"{name}{'_quick' if quick else ''}.md"


def provenance() -> str:
    """One Markdown line: the command that made the table, the machine, the commit, the date."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    import jax

    script = pathlib.Path(sys.argv[0]).name
    command = " ".join(["python", f"bench/{script}", *sys.argv[1:]])
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {jax.default_backend()}"
    today = datetime.date.today().isoformat()
    return f"Made by `{command}` on {machine} (jax {jax.__version__}), commit {commit}, {today}."


def write_results(name: str, text: str, *, quick: bool = False, out=None) -> pathlib.Path:
    """Write a results table (to ``out`` if given), ending with its `provenance`, and say
    where it went."""
    path = pathlib.Path(out) if out else results_path(name, quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n\n" + provenance() + "\n")
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
