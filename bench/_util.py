"""Helpers shared by the benchmark scripts (run as ``python bench/<family>.py``).

* where results go: ``bench/results/<name>.md``, or ``<name>_quick.md`` for a
  ``--quick`` run, so that CI's quick runs never overwrite the full tables;
* provenance: every table ends with the command that regenerates it, the machine
  and the commit and date it was measured at (`provenance`);
* the repository root on ``sys.path``, so that a script imports ``peers`` (the
  reference-solver wrappers and the timer, `peers.timing`) after ``_util``.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


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
