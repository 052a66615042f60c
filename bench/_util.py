"""Helpers shared by the benchmark scripts (run as ``python bench/<family>.py``).

* where results go: ``bench/results/<name>.md``, or ``<name>_quick.md`` for a
  ``--quick`` run, so that CI's quick runs never overwrite the full tables;
* provenance: every table ends with the command that regenerates it, the machine
  and the commit and date it was measured at (`provenance`);
* the common header (`setup`): one BLAS/OpenMP thread, XLA flags, float64, and the
  repository root on ``sys.path`` (so that a script imports ``jaxsolve`` and ``peers``,
  the reference-solver wrappers and the timer, after ``_util``); `optional` and `peer`
  import a peer that may not be installed.

Every script starts the same way, before numpy or jax is imported::

    from _util import setup

    setup()  # or setup(threads=None, x64=False, host_devices=8, ...)

    import jax  # noqa: E402
"""

from __future__ import annotations

import datetime
import importlib
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def setup(*, threads: int | None = 1, x64: bool = True, host_devices: int | None = None) -> None:
    """The header every bench script runs first, before numpy, scipy or jax is imported.

    Args:
      threads: default for the BLAS/OpenMP thread variables (`THREAD_VARS`; a value
        already in the environment wins); ``None`` leaves them alone. One thread because
        on a small shared machine OpenBLAS's and OpenMP's idle threads spin: they turned
        1 ms Cholesky factorizations into 20-300 ms, and scikit-learn's KMeans left
        threads that slowed the next XLA computations 10x.
      x64: enable float64 in JAX (``jax_enable_x64``); scripts that must set up the
        process before JAX starts (``bench/qp.py --one-core``) pass ``False`` and enable
        it themselves.
      host_devices: default ``XLA_FLAGS`` to that many XLA:CPU devices
        (``--xla_force_host_platform_device_count``), for the device-mesh runs.
    """
    if threads is not None:
        for var in THREAD_VARS:
            os.environ.setdefault(var, str(threads))
    if host_devices is not None:
        flag = f"--xla_force_host_platform_device_count={host_devices}"
        os.environ.setdefault("XLA_FLAGS", flag)
    if x64:
        import jax

        jax.config.update("jax_enable_x64", True)


def optional(name: str):
    """The module ``name``, or ``None`` when that peer is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def peer(*names: str) -> tuple:
    """Import a peer that may be missing or broken: ``(*modules, "")`` for the modules
    ``names`` (a package and the submodules a script uses), or ``(None, ..., why)`` when
    one fails to import; ``why`` names the error and the install command. Any error
    counts (a peer built for another JAX version can raise more than ImportError)."""
    try:
        return (*(importlib.import_module(name) for name in names), "")
    except Exception as err:  # a broken peer is skipped like a missing one
        top = names[0].split(".")[0]
        why = f"{top} not available ({type(err).__name__}: {err}); pip install {top}"
        return (*(None for _ in names), why)


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
