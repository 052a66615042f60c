"""``python -m jaxsolve.demo``: run every family that exists on built-in problems.

Each family contributes a module ``jaxsolve.<family>.demo`` with a function
``run(out_dir: pathlib.Path) -> list[dict]``. A row has the keys ``problem``,
``size``, ``solver``, ``status``, ``steps``, ``error``, ``time`` (seconds, after
compilation), ``reference`` (agreement with a reference, as text) and optionally
``history`` (per-step error, for the convergence plot). Families may save pictures
into ``out_dir``. This module only collects, prints and plots.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time
import traceback

import numpy as np

FAMILIES = (
    "first_order",
    "qp",
    "layers",
    "ot",
    "riemannian",
    "sensing",
    "cluster",
    "frank_wolfe",
    "regret",
    "submodular",
    "transforms",
    "losses",
    "second_order",
    "distributed",
    "blackbox",
    "evaluation",
    "nlp",
)

COLUMNS = ("family", "problem", "size", "solver", "status", "steps", "error", "time", "reference")


def timed(fn, *args, repeat: int = 1, **kwargs):
    """Call ``fn`` once to compile, then time ``repeat`` calls; returns (result, seconds)."""
    import jax

    out = jax.block_until_ready(fn(*args, **kwargs))
    t0 = time.perf_counter()
    for _ in range(repeat):
        out = jax.block_until_ready(fn(*args, **kwargs))
    return out, (time.perf_counter() - t0) / repeat


def row_from_solution(problem, size, solver, sol, seconds, reference="") -> dict:
    """A demo row from a `jaxsolve.Solution` (single, not batched)."""
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
    curves = [
        (f"{r['family']}: {r['solver']} / {r['problem']}", r["history"])
        for r in rows
        if r.get("history") is not None
    ]
    if not curves:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, h in curves:
        h = np.asarray(h, dtype=float)
        h = h[np.isfinite(h)]
        if h.size:
            ax.semilogy(np.arange(1, h.size + 1), np.maximum(h, 1e-300), label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("optimality measure (solver's error)")
    ax.set_title("jaxsolve demo: convergence")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo_output", help="folder for the table and pictures")
    parser.add_argument("--only", nargs="*", default=None, help="run only these families")
    ns = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    out = pathlib.Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, failed = [], []
    for fam in FAMILIES:
        if ns.only and fam not in ns.only:
            continue
        try:
            mod = importlib.import_module(f"jaxsolve.{fam}.demo")
        except ModuleNotFoundError as err:
            if err.name in (f"jaxsolve.{fam}", f"jaxsolve.{fam}.demo"):
                continue  # family not built yet
            raise
        print(f"-- {fam}", flush=True)
        try:
            for r in mod.run(out):
                rows.append({"family": fam, **r})
        except Exception:  # a broken family must not hide the others, but must fail the demo
            traceback.print_exc()
            failed.append(fam)
    print()
    text = print_table(rows)
    (out / "table.md").write_text(text + "\n")
    if plot_histories(rows, out / "convergence.png"):
        print(f"\nconvergence plot: {out / 'convergence.png'}")
    if failed:
        print(f"FAILED families: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
