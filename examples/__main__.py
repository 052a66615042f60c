"""``python -m examples`` (``make demo``): every family's example on built-in problems.

Collects each family script's rows (see `examples._common`), prints one table in the
order of `FAMILIES` and the seconds each family took (compilation included), writes
``<out>/table.md`` and the convergence plot. Families run in ``--jobs`` worker
processes (default: two, or one on a one-core machine): the run is bound by XLA
compiles, each of which uses one core, so two workers nearly halve the wall time on
two cores. A family's rows do not depend on which worker runs it; its timings (after
compilation) share the machine with the other worker. A script that lists ``PARTS``
(``examples/qp.py``: four solves, each its own compilations) has its parts run as
separate tasks, its rows kept in part order. The workers take the tasks heaviest first
(`COST`); the table keeps the order of `FAMILIES`. Each family's rows are printed as it
finishes; a family whose optional package is missing is skipped with one line naming
what to install, and does not fail the run (a broken family does).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import pathlib
import sys
import time

from examples._common import SKIP, parts, plot_histories, print_table, row_line, run_family

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
    "nlp",
    "guidance",
    "blackbox",
    "evaluation",
)


# CPU seconds per task, measured (2 cores, fresh clone; qp in its four parts): the pool
# starts the heaviest first, so the last ones to finish are short and the two workers
# end together (in FAMILIES order, cluster started late and ran alone at the end).
COST = {
    "cluster": 22,
    ("qp", 1): 20,
    ("qp", 3): 15,
    "evaluation": 11,  # ~7 of it compiling the SparseEval pipeline once
    "first_order": 11,
    "nlp": 11,
    "layers": 9,
    "second_order": 9,
    "submodular": 8,
    "ot": 8,
    ("qp", 0): 7,
    ("qp", 2): 6,
    "riemannian": 6,
    "blackbox": 6,
    "losses": 6,
    "transforms": 5,
    "sensing": 5,
    "distributed": 5,
    "frank_wolfe": 3,
    "regret": 3,
    "guidance": 3,
}


# import name -> pip name, where they differ (the skip line says what to install)
PIP_NAMES = {"sklearn": "scikit-learn", "ot": "POT", "ribs": "ribs", "cma": "cma"}


def _cost(task) -> float:
    return COST.get(task, COST.get(task[0], 5))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo_output", help="folder for the table and pictures")
    parser.add_argument("--only", nargs="*", default=None, help="run only these families")
    parser.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes"
    )
    ns = parser.parse_args(argv)
    families = [f for f in FAMILIES if not ns.only or f in ns.only]
    out = pathlib.Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    start, wall_start = time.perf_counter(), time.time() - 1
    nparts = {fam: parts(fam) for fam in families}
    tasks = [(fam, i) for fam in families for i in range(nparts[fam])]
    label = lambda fam, i: fam if nparts[fam] == 1 else f"{fam} (part {i + 1}/{nparts[fam]})"
    results = {}
    if ns.jobs <= 1:
        for task in tasks:
            print(f"-- {label(*task)}", flush=True)
            results[task] = run_family(task[0], out, task[1])
            for r in results[task][0]:
                print(row_line(r), flush=True)
    else:
        # spawn, not fork: a forked JAX process can deadlock
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(ns.jobs, mp_context=ctx) as pool:
            futures = {
                pool.submit(run_family, fam, out, i): (fam, i)
                for fam, i in sorted(tasks, key=_cost, reverse=True)
            }
            for fut in concurrent.futures.as_completed(futures):
                task = futures[fut]
                results[task] = fut.result()
                task_rows, secs, cpu_secs, _ = results[task]
                print(f"-- {label(*task)}: {secs:.1f} s, CPU {cpu_secs:.1f} s", flush=True)
                for r in task_rows:
                    print(row_line(r), flush=True)
    rows, failed, seconds, cpu = [], [], dict.fromkeys(families, 0.0), dict.fromkeys(families, 0.0)
    for fam, i in tasks:
        part_rows, secs, cpu_secs, error = results[fam, i]
        rows += part_rows
        seconds[fam] += secs
        cpu[fam] += cpu_secs
        if error is not None and error.startswith(SKIP):
            package = error[len(SKIP) :]
            pip_name = PIP_NAMES.get(package.split(".")[0], package.split(".")[0])
            print(f"-- {fam} skipped: it needs `{package}` (pip install {pip_name})")
        elif error is not None:
            print(f"-- {label(fam, i)} failed:\n{error}", file=sys.stderr)
            failed += [fam] if fam not in failed else []
    print()
    text = print_table(rows)
    (out / "table.md").write_text(text + "\n")
    plot_histories(rows, out / "convergence.png")
    written = sorted(p for p in out.rglob("*") if p.is_file() and p.stat().st_mtime >= wall_start)
    print(f"\nfiles written ({len(written)}): " + ", ".join(str(p) for p in written))
    total = time.perf_counter() - start
    print(
        f"\nseconds per family, wall / CPU (compilation included; {ns.jobs} workers, "
        f"{total:.0f} s wall, {sum(cpu.values()):.0f} s CPU in the workers):"
    )
    print(", ".join(f"{fam} {seconds[fam]:.0f}/{cpu[fam]:.0f}" for fam in families))
    if failed:
        print(f"FAILED families: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
