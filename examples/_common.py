"""What the example scripts share: the row format, the table, the convergence plot.

A family script defines ``run(out_dir: pathlib.Path) -> list[dict]``. A row has the
keys ``problem``, ``size``, ``solver``, ``status``, ``steps``, ``error``, ``time``
(seconds, after compilation), ``reference`` (agreement with a reference, as text) and
optionally ``metric`` and ``history`` (per-step error, for the convergence plot).
Scripts may save pictures into ``out_dir``.

``status`` is the solver's own `jaxsolve.core.Status` name on a real solve. A
training loop (a fixed number of optimizer steps, no convergence test) has no such
status: its row says ``fixed budget``, leaves ``error`` empty unless the run has a
known target point, and reports what it trains for (a loss, an expected reward) in
``metric``, named there ("train loss 0.0123").
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import time
import traceback

import numpy as np

COLUMNS = (
    "family",
    "problem",
    "size",
    "solver",
    "status",
    "steps",
    "error",
    "metric",
    "time",
    "reference",
)


# XLA:CPU's fast-compile options (docs/guide.md, "Compile time"): LLVM at -O0 without its
# expensive passes, the older loop emitters. For building a row's problem data only (the
# random draws of a generator, compiled once and never timed): there they cut the
# compile several times (256 random QPs and an infeasible QP: 4.1 s -> 0.95 s CPU), and
# the data agree with a default compile to the last bit or one ulp. Solves, whose times
# the rows report, always compile with the defaults, as users' do.
FAST_COMPILE = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


def build(fn):
    """``jax.jit(fn)`` compiled with `FAST_COMPILE`: for problem data, never a timed solve."""
    import jax

    return jax.jit(fn, compiler_options=FAST_COMPILE)


def row_from_solution(problem, size, solver, sol, seconds, reference="") -> dict:
    """A row from a `jaxsolve.Solution` (single, not batched)."""
    from jaxsolve.core import Status

    hist = None if sol.history is None else np.asarray(sol.history)
    return {
        "problem": problem,
        "size": size,
        "solver": solver,
        "status": Status(int(sol.status)).name,
        "steps": int(sol.num_steps),
        "error": float(sol.error),
        "time": seconds,
        "reference": reference,
        "history": hist,
    }


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.2e}"
    return str(v)


def print_table(rows: list[dict]) -> str:
    """Print the rows as a Markdown table; returns its text."""
    cells = [[_fmt(r.get(c, "")) for c in COLUMNS] for r in rows]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) if cells else len(c)
        for i, c in enumerate(COLUMNS)
    ]
    line = lambda vals: (
        "| " + " | ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)) + " |"
    )
    out = [line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(c) for c in cells]
    text = "\n".join(out)
    print(text)
    return text


def plot_histories(rows: list[dict], path: pathlib.Path) -> bool:
    """Save the rows' convergence histories, one small semilog panel per family (False:
    none to plot). One axes for every curve made twenty lines with repeating colours
    under one legend; a panel holds a family's few rows, labelled by solver and problem."""
    panels: dict[str, list] = {}
    for r in rows:
        h = None if r.get("history") is None else np.asarray(r["history"], dtype=float)
        if h is not None and np.isfinite(h).any():
            label = f"{r['solver']} / {r['problem']}"
            panels.setdefault(r["family"], []).append((label, h[np.isfinite(h)]))
    if not panels:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.7 * nrows), squeeze=False)
    for ax, (family, curves) in zip(axes.flat, panels.items(), strict=False):
        for label, h in curves:
            ax.semilogy(np.arange(1, h.size + 1), np.maximum(h, 1e-300), label=label)
        ax.set_title(family, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=5.5, loc="best")
        ax.set_xlabel("step", fontsize=8)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("solver's error", fontsize=8)
    fig.suptitle("jaxsolve demo: convergence per family (each solver's own optimality measure)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def parts(fam: str) -> int:
    """How many parts ``examples.<fam>`` has: ``len(PARTS)`` where a script splits its
    rows into parts with their own compilations (the driver runs them in parallel),
    else one (``run``)."""
    try:
        return len(getattr(importlib.import_module(f"examples.{fam}"), "PARTS", (None,)))
    except Exception:  # the worker that runs it reports the error
        return 1


SKIP = "skipped: needs the package "
"""Prefix of `run_family`'s error text for a family skipped for a missing optional package."""


def row_line(row: dict) -> str:
    """One row as a short line, printed as its family finishes."""
    err = row.get("error", "")
    err = f"{err:.1e}" if isinstance(err, float) else str(err)
    extra = row.get("metric") or row.get("reference") or ""
    return f"   {row['solver']} / {row['problem']}: {row['status']}, error {err}  {extra}"


def run_family(fam: str, out: pathlib.Path, part: int | None = None):
    """``(rows, seconds, CPU seconds, traceback text or None)`` of
    ``examples.<fam>.run(out)``, or
    of ``PARTS[part](out)`` (the driver's worker task: a function of an importable
    module, as spawn needs)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        mod = importlib.import_module(f"examples.{fam}")
        fn = mod.run if part is None else getattr(mod, "PARTS", (mod.run,))[part]
        rows = [{"family": fam, **r} for r in fn(out)]
        return rows, time.perf_counter() - t0, time.process_time() - c0, None
    except ModuleNotFoundError as e:  # an optional package: skip the family, say what to get
        if e.name and e.name.split(".")[0] in ("jaxsolve", "examples", "peers"):
            return [], time.perf_counter() - t0, time.process_time() - c0, traceback.format_exc()
        return [], time.perf_counter() - t0, time.process_time() - c0, f"{SKIP}{e.name}"
    except Exception:  # a broken family must not hide the others, but must fail the demo
        return [], time.perf_counter() - t0, time.process_time() - c0, traceback.format_exc()


def main(family: str, run, argv=None) -> int:
    """``python examples/<family>.py [--out DIR]``: run one family, print its rows."""
    parser = argparse.ArgumentParser(description=f"jaxsolve example: {family}")
    parser.add_argument("--out", default="demo_output", help="folder for the pictures")
    ns = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    out = pathlib.Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    print_table([{"family": family, **r} for r in run(out)])
    return 0
