"""SparseEval against the authors' PyTorch reference: same data, split, seed and schedule.

Issue 32 asks that ``sparse_eval``'s test MAE lie within the 10-repeat standard
deviation of the reference (taolinzhang/SparseEval, ``methods/gd_cluster_mlp.py``)
with the same seed, data and hyperparameters, and that the full pipeline run at least
3x faster on 2 cores, compile apart.

The reference is imported from a path given on the command line (``--reference``, its
``gd_cluster_mlp.py``; nothing of it is copied here) and run as its ``main`` runs it:

* its data loader reads ``./preprocess_data/<scenario>.pt``; the adapter writes our
  synthetic 2PL matrix (``synthetic_benchmark``, 5000 models x 1000 items, d = 10, the
  matrix of ``bench/evaluation.py``'s seed 0) there in a temporary folder and calls
  ``load_base_data`` on it, so the item vectors are the reference's own;
* the split is the reference's: ``np.random.default_rng(42).permutation``, 200 test,
  200 validation, the rest training; ours gets the same indices (``split=``);
* the module seeds ``random``, NumPy and torch with 42 when imported, and the 10
  repeats run one after the other in that one process, as ``main``'s loop does (so
  they differ only by the torch and ``random`` states: same split, same k-means);
* ``generate_anchors_mlp_high`` (k-means start, ``rounds`` swap rounds of
  ``epochs`` Adam steps each) and ``gradient_descent_mlp_evaluation`` (up to
  ``final`` epochs, checked every 500, patience 30) with lr 5e-4, K = 100; the test
  MAE is the one it reports (at the kept checkpoint).

Ours, two protocols, with the same split, schedule and hyperparameters, keys 42, 43,
...:

* ``ours``: ``sparse_eval``'s defaults: k-means on the training models only, the
  refinement round of least validation MAE kept (``keep="best"``);
* ``ours_ref``: the reference's protocol through public options: the k-means start
  computed here on the item vectors of *all* models, test models included, as the
  reference's ``load_base_data`` builds them (``kmeans_anchors(Y, K, key(seed))``,
  passed as ``init_anchors``; this lets the test models' answers choose the anchors,
  a leak the library's default avoids), and the anchors after the last swap kept
  (``keep="last"``). The k-means itself stays ours (k-means++ then 50 Lloyd
  iterations, not sklearn's to convergence), one start per key;
* ``ours_ref_sk``: as ``ours_ref``, but from the reference's own start: sklearn's
  ``KMeans(K, random_state=42, n_init="auto")`` on the reference's item vectors (all
  models), the items nearest the centroids, duplicates filled at random (seeded), as
  ``generate_anchors_mlp_high`` does; one start shared by every key, as the
  reference's repeats share it (its ``KMeans`` seed is fixed), so ours' spread, like
  the reference's, is over the training draws only. sklearn is there: the reference
  imports it.

(JAX's generator cannot reproduce torch's draws; the reference's spread is over
those draws too). Its first call compiles; the timings use the later calls (compile
apart), and report both wall and CPU seconds, interleaved with the reference's
repeats. tqdm's progress bars are disabled (``TQDM_DISABLE=1``: display is not the
method's cost, and that favours the reference). torch runs on ``--torch-threads``
threads, ``1,2`` by default: the reference is timed at each count (the issue says "on
2 cores", so the fair reference is torch's faster configuration: on a quiet 2-core
machine a 4600 x 100 training epoch takes 12-12.7 ms wall, 24-25 ms CPU, on 2 threads
against 15-15.5 ms on one; under other jobs its two OpenMP threads spin against them,
300 ms against 17-35 ms on one at load 6), and the speed row compares ours against
the faster median wall time (the other counts run on the first ``--thread-repeats``
repeats only, 3 by default: they are timing runs). The MAE rows are the first count's: the random states
(torch, NumPy, ``random``) are saved before that run and restored around the others,
so the first count's repeats follow ``main``'s sequence and the others repeat its
draws. Ours lets XLA:CPU use both cores (its products run on two threads when a core
is free).

torch is not a dependency of jaxsolve: install the CPU wheel into the bench
environment yourself. Without ``--reference`` or torch the script says so and exits.

    python bench/evaluation_torch.py --reference ../SparseEval/SparseEval/methods/gd_cluster_mlp.py
    python bench/evaluation_torch.py --reference ... --epochs 200 --final 4000   # shorter
    python bench/evaluation_torch.py --reference ... --quick
    python bench/evaluation_torch.py --reference ... --sides ours,ours_ref --reuse runs.jsonl

``--sides`` runs only some sides; ``--reuse LOG`` takes the other sides' rows from an
earlier ``--log`` (the reference's MAEs are deterministic: its seeds are fixed), and
the speed row is then left out (timings of another run are not comparable).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import sys
import tempfile
import time

from _util import optional, setup, write_results

setup(x64=False)
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxsolve import evaluation as ev  # noqa: E402

SEED = 42  # the reference's global seed


def load_reference(path):
    """The reference module, imported from its file (it seeds everything with 42)."""
    spec = importlib.util.spec_from_file_location("sparseeval_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference_data(ref, torch, Y):
    """The reference's ``load_base_data`` on our matrix (written where it looks)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "preprocess_data").mkdir()
        torch.save(
            {"matrix": torch.from_numpy(Y), "models": [f"m{i}" for i in range(Y.shape[0])]},
            pathlib.Path(tmp) / "preprocess_data" / "synthetic.pt",
        )
        os.chdir(tmp)
        try:
            return ref.load_base_data("synthetic")
        finally:
            os.chdir(cwd)


def reference_split(n_models, cnt):
    """``main``'s split: a seeded permutation, ``cnt`` test, ``cnt`` validation, the rest."""
    perm = np.random.default_rng(seed=SEED).permutation(n_models)
    return perm[2 * cnt :], perm[cnt : 2 * cnt], perm[:cnt]


def run_reference(ref, torch, base, split, K, sched):
    tr, va, te = split
    Y = torch.tensor(base["Y"], dtype=torch.float32)
    argv = sys.argv
    sys.argv = [argv[0], "synthetic", str(K)]  # generate_anchors_mlp_high reads argv[1]
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        anchors = ref.generate_anchors_mlp_high(
            vectors=base["normalized_vectors"],
            Y_train=Y[tr],
            num_anchors=K,
            gpu_id=None,
            num_refinement_steps=sched["rounds"],
            partial_epochs=sched["epochs"],
            learning_rate=sched["lr"],
        )
        res = ref.gradient_descent_mlp_evaluation(
            Y_train=Y[tr],
            Y_valid=Y[va],
            Y_test=Y[te],
            anchor_points=anchors,
            learning_rate=sched["lr"],
            num_epochs=sched["final"],
            patience=sched["patience"],
            gpu_id=None,
        )
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    finally:
        sys.argv = argv
    return dict(
        mae=100 * res["best_test_error"], tau=float(res["best_test_tau"]), wall=wall, cpu=cpu
    )


def run_ours(Y, split, K, seed, sched, **options):
    w0, c0 = time.perf_counter(), time.process_time()
    r = ev.sparse_eval(
        Y,
        K,
        jax.random.key(seed),
        split=split,
        rounds=sched["rounds"],
        epochs=sched["epochs"],
        final_epochs=sched["final"],
        check_every=500,
        patience=sched["patience"],
        lr=sched["lr"],
        **options,
    )
    d = jax.block_until_ready(r.diagnostics)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return dict(
        mae=100 * float(d.test_mae),
        tau=float(d.test_tau),
        wall=wall,
        cpu=cpu,
        best_round=int(d.best_round),
        checks=int(d.checks_run),
    )


def run_ours_reference_protocol(Y, split, K, seed, sched):
    """The reference's protocol: k-means on all models' item vectors, last round kept."""
    w0, c0 = time.perf_counter(), time.process_time()
    start, _ = ev.kmeans_anchors(Y, K, jax.random.key(seed))  # all models: the leak
    row = run_ours(Y, split, K, seed, sched, init_anchors=start, keep="last")
    row.update(wall=time.perf_counter() - w0, cpu=time.process_time() - c0)
    return row


def reference_start(base, K):
    """The reference's k-means start (its ``generate_anchors_mlp_high``'s first step)."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import pairwise_distances_argmin_min

    V = np.asarray(base["normalized_vectors"])
    km = KMeans(n_clusters=K, random_state=SEED, n_init="auto").fit(V)
    nearest, _ = pairwise_distances_argmin_min(km.cluster_centers_, V)
    start = list(np.unique(nearest))
    rng = np.random.default_rng(SEED)
    while len(start) < K:  # the reference fills duplicates with random items too
        j = int(rng.integers(V.shape[0]))
        if j not in start:
            start.append(j)
    return np.array(start)


def _random_state(torch):
    import random

    # the legacy global state is the one the reference seeds and draws from
    return torch.get_rng_state(), np.random.get_state(), random.getstate()  # noqa: NPY002


def _set_random_state(torch, state):
    import random

    torch.set_rng_state(state[0])
    np.random.set_state(state[1])  # noqa: NPY002
    random.setstate(state[2])


def run_reference_threads(ref, torch, base, split, K, sched, threads, timing, log=None):
    """The reference at ``threads[0]`` (its row, in ``main``'s random sequence), then
    from the same random state at each other count (timing only); ``timing[t]`` gets
    every count's row (the others only on the first ``--thread-repeats`` repeats)."""
    before = _random_state(torch)
    torch.set_num_threads(threads[0])
    row = dict(run_reference(ref, torch, base, split, K, sched), threads=threads[0])
    timing[threads[0]].append(row)
    after = _random_state(torch)
    for t in threads[1:]:
        _set_random_state(torch, before)
        torch.set_num_threads(t)
        other = dict(run_reference(ref, torch, base, split, K, sched), threads=t)
        timing[t].append(other)
        line = json.dumps(dict(other, side=f"reference@{t}"))
        print(line, flush=True)
        if log:
            log.write(line + "\n")
    _set_random_state(torch, after)
    torch.set_num_threads(threads[0])
    return row


SIDES = ("reference", "ours", "ours_ref", "ours_ref_sk")
OURS = SIDES[1:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", help="path of the reference's methods/gd_cluster_mlp.py")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=2000, help="proxy epochs per round")
    ap.add_argument("--final", type=int, default=20000, help="final training epochs at most")
    ap.add_argument(
        "--torch-threads",
        default="1,2",
        help="comma-separated torch thread counts to time the reference at; the MAE rows "
        "are the first's",
    )
    ap.add_argument(
        "--thread-repeats",
        type=int,
        default=3,
        help="time the reference at the other thread counts on this many repeats only",
    )
    ap.add_argument("--log", default=None, help="append one JSON line per run here")
    ap.add_argument("--out", default=None)
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated: " + ",".join(SIDES))
    ap.add_argument("--reuse", default=None, help="a --log of an earlier run: the other sides")
    a = ap.parse_args(argv)
    sides = [x for x in a.sides.split(",") if x]
    if not sides or set(sides) - set(SIDES):
        ap.error(f"--sides must be a comma-separated subset of {SIDES}, got {a.sides!r}")
    torch = optional("torch")
    if a.reference is None or torch is None:
        print(
            "skipped: needs --reference <SparseEval/methods/gd_cluster_mlp.py> and torch "
            f"(torch {'missing' if torch is None else 'found'})"
        )
        return
    threads = [int(t) for t in str(a.torch_threads).split(",") if t]
    if not threads or min(threads) < 1:
        ap.error(f"--torch-threads must list positive ints, got {a.torch_threads!r}")
    torch.set_num_threads(threads[0])
    if a.quick:
        n_models, n_items, K, cnt, repeats = 700, 150, 10, 100, 2
        sched = dict(rounds=2, epochs=20, final=1000, patience=30, lr=5e-4)
    else:
        n_models, n_items, K, cnt, repeats = 5000, 1000, a.K, 200, a.repeats
        sched = dict(rounds=10, epochs=a.epochs, final=a.final, patience=30, lr=5e-4)
    bm = ev.synthetic_benchmark(jax.random.key(100), n_models, n_items, 10)
    Y = np.asarray(bm.Y, np.float32)
    ref = load_reference(a.reference)
    base = reference_data(ref, torch, Y)
    assert np.array_equal(base["Y"], Y)
    split = reference_split(n_models, cnt)

    runs = {s: [] for s in SIDES}
    timing = {t: [] for t in threads}  # the reference's rows at each thread count
    reused = []
    if a.reuse:
        old = [json.loads(line) for line in open(a.reuse)]
        for side in SIDES:
            if side not in sides:
                rows = {r["repeat"]: r for r in old if r["side"] == side}
                if all(i in rows for i in range(repeats)):
                    runs[side] = [rows[i] for i in range(repeats)]
                    reused.append(side)
    missing = [s for s in SIDES if s not in sides and s not in reused]
    if missing:
        ap.error(f"sides {missing} neither run (--sides) nor found in --reuse")
    log = open(a.log, "a") if a.log else None  # noqa: SIM115
    start = reference_start(base, K) if "ours_ref_sk" in sides else None
    for i in range(repeats):
        for side in sides:
            if side == "reference":
                counts = threads if i < a.thread_repeats else threads[:1]
                row = run_reference_threads(ref, torch, base, split, K, sched, counts, timing, log)
            elif side == "ours":
                row = run_ours(Y, split, K, SEED + i, sched)
            elif side == "ours_ref":
                row = run_ours_reference_protocol(Y, split, K, SEED + i, sched)
            else:
                row = run_ours(Y, split, K, SEED + i, sched, init_anchors=start, keep="last")
            row.update(side=side, repeat=i)
            runs[side].append(row)
            print(json.dumps(row), flush=True)
            if log:
                log.write(json.dumps(row) + "\n")
                log.flush()

    def sd(x):
        return float(np.std(x, ddof=1)) if len(x) > 1 else 0.0

    rm = np.array([r["mae"] for r in runs["reference"]])
    mu, rsd = rm.mean(), sd(rm)
    command = " ".join(
        ["python bench/evaluation_torch.py", *(sys.argv[1:] if argv is None else argv)]
    )
    full = sched["epochs"] == 2000 and sched["final"] == 20000
    names = {
        "ours": "ours, default protocol (k-means on training models, best round)",
        "ours_ref": "ours, reference protocol (ours' k-means on all models per key, last round)",
        "ours_ref_sk": "ours, reference protocol from the reference's own k-means start "
        "(sklearn, all models, shared), last round",
    }
    lines = [
        "# SparseEval against the authors' PyTorch reference",
        "",
        f"`{command}`, {datetime.date.today()}, {os.cpu_count()} cores (CPU), float32, "
        f"torch {torch.__version__} on {', '.join(map(str, threads))} threads (MAE rows: "
        f"{threads[0]}).",
        "",
        f"Data: `synthetic_benchmark(key(100), {n_models}, {n_items}, 10)`; split as the "
        f"reference's `main` ({cnt} test, {cnt} validation by `default_rng(42)`); K = {K}; "
        f"lr {sched['lr']}, {sched['rounds']} rounds x {sched['epochs']} epochs, final "
        f"training up to {sched['final']} epochs checked every 500, patience "
        f"{sched['patience']}"
        + ("" if full else " (a shortened schedule, the same for both sides)")
        + ". The reference's 10 repeats run in one process after its seed-42 import, as its "
        "`main` loop runs them; ours uses keys 42, 43, ... Ours runs under the library's "
        'defaults (`ours`) and under the reference\'s protocol (`keep="last"` and an '
        f"`init_anchors=` start clustered over all {n_models} models, test models included): "
        "ours' k-means per key (`ours_ref`), or the reference's own sklearn start shared by "
        "the keys (`ours_ref_sk`); see the script's docstring."
        + (f" Rows of {', '.join(reused)} reused from `{a.reuse}`." if reused else ""),
        "",
        "## Targets (issue 32)",
        "",
        "| target | measured | |",
        "|---|---|---|",
    ]
    shown = [side for side in OURS if runs[side]]
    for side in shown:
        om = np.array([r["mae"] for r in runs[side]])
        within = np.abs(om - mu) <= rsd
        inband = abs(om.mean() - mu) <= rsd
        lines.append(
            f"| MAE within the {len(rm)}-repeat std of the torch reference: {names[side]} | "
            f"reference {mu:.2f} +- {rsd:.2f} points; ours (key 42) {om[0]:.2f}, over "
            f"{len(om)} keys {om.mean():.2f} +- {sd(om):.2f}; {int(within.sum())} of "
            f"{len(om)} keys within | "
            f"{'met' if within[0] and inband else '**not met**'} (key 42 "
            f"{'in' if within[0] else 'out of'} the band, the {len(om)}-key mean "
            f"{'in' if inband else 'out of'} it) |"
        )
    if "reference" in reused:
        lines.append(
            "| full pipeline >= 3x faster on 2 cores, compile apart | not re-measured here "
            "(the reference's rows are reused from an earlier run) | |"
        )
    else:
        timed = runs["ours"][1:] or runs["ours"]  # the first call compiles
        ow = np.median([r["wall"] for r in timed])
        oc = np.median([r["cpu"] for r in timed])
        med = {
            t: (np.median([r["wall"] for r in rows]), np.median([r["cpu"] for r in rows]))
            for t, rows in timing.items()
            if rows  # a count not run (--thread-repeats 0) is left out
        }
        fast = min(med, key=lambda t: med[t][0])
        rw = med[fast][0]
        each = "; ".join(
            f"torch on {t} thread{'s' * (t > 1)} {w:.1f} s wall, {c:.1f} s CPU "
            f"(medians of {len(timing[t])}): "
            f"{w / ow:.2f}x wall, {c / oc:.2f}x CPU"
            for t, (w, c) in med.items()
        )
        lines.append(
            f"| full pipeline >= 3x faster on 2 cores, compile apart | ours {ow:.1f} s wall, "
            f"{oc:.1f} s CPU (medians of {len(timed)}); {each}; against the faster "
            f"({fast} thread{'s' * (fast > 1)}): {rw / ow:.2f}x wall | "
            f"{'met' if rw / ow >= 3 else '**not met**'} |"
        )
    lines += [
        "",
        "## Runs (MAE in points / Kendall tau_b on the test models; seconds wall / CPU)",
        "",
        "| repeat | reference | "
        + " | ".join(shown)
        + " | reference s | "
        + " | ".join(f"{x} s" for x in shown)
        + " | ours best round / checks |",
        "|---|---|" + "---|" * (2 * len(shown) + 2),
    ]
    for i, r in enumerate(runs["reference"]):
        mae = [f"{runs[x][i]['mae']:.2f} / {runs[x][i]['tau']:.3f}" for x in shown]
        sec = [f"{runs[x][i]['wall']:.1f} / {runs[x][i]['cpu']:.1f}" for x in shown]
        o = runs["ours"][i]
        lines.append(
            f"| {r['repeat']} | {r['mae']:.2f} / {r['tau']:.3f} | {' | '.join(mae)} | "
            f"{r['wall']:.1f} / {r['cpu']:.1f} | {' | '.join(sec)} | "
            f"{o['best_round']} / {o['checks']} |"
        )
    rt = np.array([r["tau"] for r in runs["reference"]])
    summary = f"Reference MAE {mu:.2f} +- {rsd:.2f} (range {rm.min():.2f}-{rm.max():.2f}), tau {rt.mean():.3f}"
    for side in shown:
        om = np.array([r["mae"] for r in runs[side]])
        ot = np.array([r["tau"] for r in runs[side]])
        summary += (
            f"; {names[side]} {om.mean():.2f} +- {sd(om):.2f} (range {om.min():.2f}-"
            f"{om.max():.2f}), tau {ot.mean():.3f}"
        )
    if "ours" in sides:
        timed = runs["ours"][1:] or runs["ours"]
        compile_s = runs["ours"][0]["wall"] - np.median([r["wall"] for r in timed])
        summary += (
            f". Ours' first call: {runs['ours'][0]['wall']:.1f} s, of which about "
            f"{compile_s:.1f} s compile"
        )
    lines += ["", summary + ".", ""]
    print("\n".join(lines))
    write_results("evaluation_torch", "\n".join(lines), quick=a.quick, out=a.out)


if __name__ == "__main__":
    main()
