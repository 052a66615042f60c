"""Execute notebooks (files, or every notebook in a folder): fails on the first cell error.

``python tools/run_notebooks.py [--write] [targets...]``: ``--write`` saves each executed
notebook with its outputs (how the committed notebooks are produced); without it the
files are left as they are (what CI runs: re-execution must not fail).
"""

from __future__ import annotations

import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient


def main(*targets: str) -> int:
    write = "--write" in targets
    targets = tuple(t for t in targets if t != "--write")
    paths = []
    for target in targets or ("notebooks",):
        t = pathlib.Path(target)
        paths += [t] if t.suffix == ".ipynb" else sorted(t.glob("*.ipynb"))
    if not paths:
        print("no notebooks found")
        return 1
    for path in paths:
        t0 = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb,
            timeout=900,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )
        client.execute()
        if write:
            nbformat.write(nb, path)
        print(f"{path}: ok ({time.perf_counter() - t0:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
