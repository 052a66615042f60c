"""``make demo`` entry: SparseEval on a synthetic 2PL correctness matrix, against random anchors.

A models x items matrix from `jaxsolve.evaluation.synthetic_benchmark` (600 models, 150
items); `sparse_eval` picks K = 15 anchors (k-means start, two AIS/CIS swap rounds) and
trains the MLP proxy on 400 training models, 100 more calibrate the 90% intervals, and
the row scores the 100 test models. The schedule is a short one (the reference code
runs 10 rounds of 2000 epochs and up to 20000 final epochs; ``bench/evaluation.py``), so
it has a larger learning rate. Training is a budget of epochs with validation early
stopping, not a solve: the status says ``early stop`` or ``fixed budget`` and ``metric``
holds the test MAE (accuracy points), Kendall's tau_b and the intervals' coverage. The
reference column is the module's ``random_mean`` baseline (the mean of K random items) on
the same test models.
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax
import numpy as np
import scipy.stats

from examples._common import build, main
from jaxsolve import evaluation as ev
from peers.timing import timed

SCHEDULE = dict(
    n_test=100, n_val=100, rounds=2, epochs=100, final_epochs=400, check_every=100, patience=2
)


def run(out_dir) -> list[dict]:
    n_models, n_items, K = 600, 150, 15
    # problem data under the fast-compile options (the same bits, a quarter of the CPU)
    bench = build(lambda key: ev.synthetic_benchmark(key, n_models, n_items, 10))(jax.random.key(0))
    acc = np.asarray(bench.accuracy)
    r, secs = timed(ev.sparse_eval, bench.Y, K, jax.random.key(1), lr=5e-3, **SCHEDULE)
    tr, _, te = r.split
    d = r.diagnostics
    base = ev.random_mean(bench.Y[tr], K, jax.random.key(1))
    pred = np.asarray(base.predict(bench.Y[te][:, np.asarray(base.anchors)]))
    base_mae = 100 * float(np.abs(pred - acc[te]).mean())
    base_tau = scipy.stats.kendalltau(pred, acc[te]).statistic
    checks = int(d.checks_run)
    n_checks = SCHEDULE["final_epochs"] // SCHEDULE["check_every"]
    epochs = (SCHEDULE["rounds"] + 1) * SCHEDULE["epochs"] + checks * SCHEDULE["check_every"]
    return [
        {
            "problem": "2PL correctness matrix, accuracy from K anchors",
            "size": f"{n_models}x{n_items}, K={K}",
            "solver": "sparse_eval (k-means, MLP proxy, AIS/CIS swaps)",
            "status": "early stop" if checks < n_checks else "fixed budget",
            "steps": epochs,
            "error": "",
            "metric": (
                f"test MAE {100 * float(d.test_mae):.2f} pts, tau {float(d.test_tau):.3f}, "
                f"90% coverage {100 * float(d.test_coverage):.0f}%"
            ),
            "time": secs,
            "reference": f"random + mean (K={K}): MAE {base_mae:.2f} pts, tau {base_tau:.3f}",
        }
    ]


if __name__ == "__main__":
    sys.exit(main("evaluation", run))
