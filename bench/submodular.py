"""Submodular benchmark: AAPGA + rounding against greedy peers on the same instances.

Instances: probabilistic coverage $f(S) = \\sum_v (1 - \\prod_{u \\in S}(1 - p_{uv}))$ over
networkx graphs, $p_{uv} \\sim U(0, 0.2)$ i.i.d. on every directed edge (a guess: the paper's
choice was not read), so $M_{vu} = -\\log(1 - p_{uv})$ (BCOO) and $\\phi(z) = 1 - e^{-z}$:

1. acceleration: Erdos-Renyi n = 2000, p = 0.01, k = 50: supergradient evaluations AAPGA
   needs to reach PGA's 500-iteration value (to 1e-9 relative), under the paper's
   non-decreasing L (shrink = 1) and the default shrink = 0.9;
2. cardinality, ER (p = 0.01) and a 5-block SBM (p_in = 0.04, p_out = 0.0025), n = 5000:
   value at k = 50 against submodlib's LazyGreedy (its C++ ProbabilisticSetCover), and
   wall time (compile apart) over k against submodlib's fastest greedy (Lazy,
   LazierThanLazy, Stochastic), the k where the times cross;
3. knapsack (ER n = 2000, costs U(0.5, 2), budget 50) against apricot's cost-benefit
   greedy (FeatureBased with phi = 1 - exp(-z): the same function);
4. partition matroid (ER n = 5000, 10 groups of 5) against a NumPy partition greedy;
5. our naive greedy against apricot's on FeatureBased-sqrt over scikit-learn digits, k = 50.

Ours: `maximize` at its defaults (AAPGA to a 1e-3 relative certified gap, the best of the
derandomized rounding and 8 randomized ones, 1 when more than 200 items are fractional).
Values are recomputed in NumPy from the selected sets. Peers not installed are skipped.
`--quick`: n = 1000 (acceleration n = 500), k in {10, 50}, ER only.
"""

from __future__ import annotations

import argparse
import datetime
import time

from _util import optional, setup, write_results

setup(threads=None)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sps  # noqa: E402
from jax.experimental import sparse  # noqa: E402

import jaxsolve  # noqa: E402
from jaxsolve import submodular as sm  # noqa: E402

nx = optional("networkx")
_submodlib = optional("submodlib.functions.probabilisticSetCover")
ProbabilisticSetCoverFunction = _submodlib and _submodlib.ProbabilisticSetCoverFunction
apricot = optional("apricot")


def graph_probs(kind: str, n: int, seed: int) -> sps.csr_matrix:
    """P[u, v]: probability that u covers its neighbour v (U(0, 0.2) per directed edge)."""
    if nx is not None:
        if kind == "ER":
            G = nx.gnp_random_graph(n, 0.01, seed=seed)
        else:
            sizes = [n // 5] * 5
            probs = np.full((5, 5), 0.0025) + np.eye(5) * (0.04 - 0.0025)
            G = nx.stochastic_block_model(sizes, probs.tolist(), seed=seed)
        A = nx.to_scipy_sparse_array(G, format="coo")
        rows, cols = A.row, A.col
    else:  # a NumPy ER graph when networkx is missing
        rng = np.random.default_rng(seed)
        U = sps.random(n, n, density=0.005, random_state=rng, format="coo")
        rows, cols = np.r_[U.row, U.col], np.r_[U.col, U.row]
    rng = np.random.default_rng(seed + 1)
    p = rng.uniform(0.0, 0.2, rows.shape[0])
    return sps.csr_matrix((p, (rows, cols)), shape=(n, n))


def scm_of(P: sps.csr_matrix) -> sm.SCM:
    Mt = P.T.tocoo()  # rows: targets v, columns: items u
    data = -np.log1p(-Mt.data)
    bcoo = sparse.BCOO(
        (jnp.asarray(data), jnp.asarray(np.stack([Mt.row, Mt.col], 1).astype(np.int32))),
        shape=Mt.shape,
    )
    return sm.SCM.create(bcoo, None, "coverage")


def coverage_value(P: sps.csr_matrix, S) -> float:
    """f(S) in NumPy from the probabilities (independent of jaxsolve)."""
    S = np.asarray(S, bool)
    logs = np.asarray((-P[S]).log1p().sum(axis=0)).ravel() if S.any() else np.zeros(P.shape[1])
    return float(np.sum(-np.expm1(logs)))


def compile_and_best(fn, repeat: int = 3, cpu: bool = False):
    """(out, best steady seconds, compile seconds): the first call minus the best of
    `repeat` (the minimum: the least noisy statistic on a shared machine, as the peers').
    `cpu=True` appends the best CPU seconds of the process (`time.process_time`) over
    the same calls."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    best = best_cpu = np.inf
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return (out, best, max(first - best, 0.0)) + ((best_cpu,) if cpu else ())


def as_mask(n, idx):
    S = np.zeros(n, bool)
    S[list(idx)] = True
    return S


# --- 1. acceleration -------------------------------------------------------------------


def acceleration(n: int, k: int, lines: list[str]) -> None:
    P = graph_probs("ER", n, 0)
    f = scm_of(P)
    c = sm.cardinality(k)
    x0 = c.start(n, jnp.float64)
    lines += [
        f"## 1. Acceleration: ER n = {n}, p = 0.01, k = {k}",
        "",
        "Supergradient evaluations to reach PGA's 500-iteration value F500 (to 1e-9 relative). "
        "AAPGA counts the certificate's extra evaluation (every step, or every 10th).",
        "",
        "| L rule | PGA: F500 | PGA: evals to reach F500 | AAPGA evals | ratio vs 500 | "
        "ratio vs PGA's own | AAPGA (check_every=10) evals | ratio vs 500 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shrink in (1.0, 0.9):
        plain = jaxsolve.solve(sm.pga(shrink=shrink), x0, (f, c), loop="fixed", max_steps=500)
        vals = np.asarray(plain.info.value)
        target = vals[-1]
        thr = target - 1e-9 * abs(target)
        pga_reach = int(np.asarray(plain.info.num_grads)[np.argmax(vals >= thr)])
        row = [f"shrink = {shrink:g}", f"{target:.6f}", str(pga_reach)]
        for every in (1, 10):
            fast = jaxsolve.solve(
                sm.aapga(shrink=shrink, check_every=every), x0, (f, c), loop="fixed", max_steps=500
            )
            v, g = np.asarray(fast.info.value), np.asarray(fast.info.num_grads)
            hit = v >= thr
            evals = int(g[np.argmax(hit)]) if hit.any() else None
            if every == 1:
                row += [
                    str(evals),
                    f"{evals / 500:.3f}" if evals else "not reached",
                    f"{evals / pga_reach:.2f}" if evals else "-",
                ]
            else:
                row += [str(evals), f"{evals / 500:.3f}" if evals else "not reached"]
        lines.append("| " + " | ".join(row) + " |")
        print(lines[-1], flush=True)
    lines.append("")


# --- 2. cardinality against submodlib -----------------------------------------------------


def ours_maximize(f, c, key=jax.random.key(0)):
    return lambda: sm.maximize(f, c, key, max_steps=300)


def submodlib_function(P):
    n = P.shape[0]
    return ProbabilisticSetCoverFunction(n=n, probs=P.toarray(), num_concepts=n)


def submodlib_runs(fn, n, k):
    """{optimizer: (seconds, set, CPU seconds)} with submodlib's greedy optimizers (best
    of 2)."""
    out = {}
    for opt in ("LazyGreedy", "LazierThanLazyGreedy", "StochasticGreedy"):
        best = best_cpu = np.inf
        for _ in range(2):
            t0, c0 = time.perf_counter(), time.process_time()
            res = fn.maximize(budget=k, optimizer=opt, show_progress=False)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        out[opt] = (best, as_mask(n, [i for i, _ in res]), best_cpu)
    return out


def cardinality_vs_peers(n: int, ks, lines: list[str], quick: bool = False) -> None:
    if ProbabilisticSetCoverFunction is None:
        lines += ["## 2. Cardinality vs submodlib: skipped (submodlib-py not installed)", ""]
        print(lines[-2])
        return
    lines += [
        f"## 2. Cardinality: probabilistic coverage, n = {n}, vs submodlib",
        "",
        "Times in seconds; ours = maximize (AAPGA + rounding), best of 3 after the compiling "
        "call (compile apart); submodlib: best of 2 per optimizer; ratio = ours / submodlib's "
        "fastest greedy. Shared 2-core machine: times vary by up to 2x between runs; the "
        "last two columns compare CPU seconds of the process (time.process_time, best of "
        "the same calls), which other agents' load inflates less than wall time.",
        "",
        "| graph | k | ours value | LazyGreedy value | value ratio | our lazy greedy value | "
        "ours s | compile s | steps | Lazy s | LazierThanLazy s | Stochastic s | "
        "time ratio vs fastest | ours CPU s | CPU ratio vs fastest |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in ("ER",) if quick else ("ER", "SBM"):
        P = graph_probs(kind, n, 1)
        f = scm_of(P)
        fn = submodlib_function(P)
        cross = cross_lazy = cross_cpu = None
        for k in ks:
            c = sm.cardinality(k)
            res, steady, compile_s, steady_cpu = compile_and_best(
                ours_maximize(f, c), repeat=3, cpu=True
            )
            ours = coverage_value(P, res.selected)
            peers = submodlib_runs(fn, n, k)
            lazy_val = coverage_value(P, peers["LazyGreedy"][1])
            fastest = min(t for t, _, _ in peers.values())
            fastest_cpu = min(c for _, _, c in peers.values())
            greedy = sm.lazy_greedy(f, c)
            row = [
                kind,
                str(k),
                f"{ours:.2f}",
                f"{lazy_val:.2f}",
                f"{ours / lazy_val:.4f}",
                f"{coverage_value(P, greedy.selected):.2f}",
                f"{steady:.3f}",
                f"{compile_s:.2f}",
                str(int(res.num_steps)),
            ]
            row += [
                f"{peers[o][0]:.3f}"
                for o in ("LazyGreedy", "LazierThanLazyGreedy", "StochasticGreedy")
            ]
            row += [
                f"{steady / fastest:.2f}",
                f"{steady_cpu:.3f}",
                f"{steady_cpu / fastest_cpu:.2f}",
            ]
            if cross is None and steady <= fastest:
                cross = k
            if cross_cpu is None and steady_cpu <= fastest_cpu:
                cross_cpu = k
            if cross_lazy is None and steady <= peers["LazyGreedy"][0]:
                cross_lazy = k
            lines.append("| " + " | ".join(row) + " |")
            print(lines[-1], flush=True)
        lines.append(
            f"| {kind} | crossing | ours at most the fastest greedy's time from k = {cross} |"
            if cross
            else f"| {kind} | crossing | not reached for k <= {max(ks)} |"
        )
        lines.append(
            f"| {kind} | crossing (CPU s) | ours at most the fastest greedy's CPU time from "
            f"k = {cross_cpu} |"
            if cross_cpu
            else f"| {kind} | crossing (CPU s) | not reached for k <= {max(ks)} |"
        )
        lines.append(
            f"| {kind} | crossing (LazyGreedy) | ours at most LazyGreedy's time from k = "
            f"{cross_lazy} |"
            if cross_lazy
            else f"| {kind} | crossing (LazyGreedy) | not reached for k <= {max(ks)} |"
        )
    lines.append("")


# --- 3. knapsack against apricot -------------------------------------------------------


def knapsack_vs_apricot(n: int, budget: float, lines: list[str]) -> None:
    P = graph_probs("ER", n, 2)
    f = scm_of(P)
    costs = np.random.default_rng(3).uniform(0.5, 2.0, n)
    c = sm.knapsack(jnp.asarray(costs), budget)
    res, steady, compile_s = compile_and_best(ours_maximize(f, c), repeat=3)
    ours = coverage_value(P, res.selected)
    cb = sm.cost_benefit_greedy(f, c)
    lines += [
        f"## 3. Knapsack: ER n = {n}, costs U(0.5, 2), budget {budget:g}",
        "",
        "| method | value | ratio ours / it | cost used | seconds |",
        "|---|---|---|---|---|",
        f"| ours (maximize) | {ours:.2f} | 1 | {costs[np.asarray(res.selected)].sum():.2f} | "
        f"{steady:.3f} (compile {compile_s:.1f}) |",
        f"| our cost-benefit greedy | {coverage_value(P, cb.selected):.2f} | "
        f"{ours / coverage_value(P, cb.selected):.4f} | {costs[np.asarray(cb.selected)].sum():.2f} | - |",
    ]
    if apricot is None:
        lines += ["| apricot | skipped (not installed) | | | |", ""]
        return
    X = sps.csr_matrix(P)  # items x concepts
    X.data = -np.log1p(-X.data)
    import numba  # apricot's sparse kernels are numba functions: phi must be one too

    coverage = numba.njit(lambda z: 1.0 - np.exp(-z))
    sel = apricot.FeatureBasedSelection(budget, concave_func=coverage, optimizer="naive")
    t0 = time.perf_counter()
    sel.fit(X, sample_cost=costs)
    t_ap = time.perf_counter() - t0
    S = as_mask(n, sel.ranking)
    v = coverage_value(P, S)
    lines += [
        f"| apricot cost-benefit (naive) | {v:.2f} | {ours / v:.4f} | {costs[S].sum():.2f} | "
        f"{t_ap:.3f} |",
        "",
    ]
    print("\n".join(lines[-6:]), flush=True)


# --- 4. partition matroid against a NumPy greedy ---------------------------------------


def numpy_partition_greedy(P, groups, caps):
    """Partition greedy in NumPy/SciPy: the best gain among items whose group has room."""
    Mt = sps.csc_matrix(P.T)  # targets x items
    Mt.data = -np.log1p(-Mt.data)
    n = P.shape[0]
    z = np.zeros(P.shape[1])
    S = np.zeros(n, bool)
    room = caps.astype(int).copy()
    rows = Mt.indices
    item = np.repeat(np.arange(n), np.diff(Mt.indptr))
    while True:
        ok = ~S & (room[groups] > 0)
        if not ok.any():
            return S
        d = np.exp(-z[rows]) * (-np.expm1(-Mt.data))  # phi(z + m) - phi(z)
        gains = np.bincount(item, weights=d, minlength=n)
        j = int(np.argmax(np.where(ok, gains, -np.inf)))
        S[j] = True
        room[groups[j]] -= 1
        z[rows[Mt.indptr[j] : Mt.indptr[j + 1]]] += Mt.data[Mt.indptr[j] : Mt.indptr[j + 1]]


def partition_vs_numpy(n: int, lines: list[str]) -> None:
    P = graph_probs("ER", n, 4)
    f = scm_of(P)
    groups = np.arange(n) % 10
    caps = np.full(10, 5.0)
    c = sm.partition_matroid(jnp.asarray(groups), jnp.asarray(caps))
    res, steady, compile_s = compile_and_best(ours_maximize(f, c), repeat=3)
    ours = coverage_value(P, res.selected)
    t0 = time.perf_counter()
    S = numpy_partition_greedy(P, groups, caps)
    t_np = time.perf_counter() - t0
    ref = coverage_value(P, S)
    pg = sm.partition_greedy(f, c)
    lines += [
        f"## 4. Partition matroid: ER n = {n}, 10 groups, cap 5 each (no peer library has it)",
        "",
        "| method | value | ratio ours / it | seconds |",
        "|---|---|---|---|",
        f"| ours (maximize) | {ours:.2f} | 1 | {steady:.3f} (compile {compile_s:.1f}) |",
        f"| NumPy partition greedy | {ref:.2f} | {ours / ref:.4f} | {t_np:.3f} |",
        f"| our partition_greedy (lazy) | {coverage_value(P, pg.selected):.2f} | "
        f"{ours / coverage_value(P, pg.selected):.4f} | - |",
        "",
    ]
    print("\n".join(lines[-8:]), flush=True)


# --- 5. naive greedy = apricot's on digits ---------------------------------------------


def digits_vs_apricot(k: int, lines: list[str]) -> None:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        lines += ["## 5. Digits: skipped (scikit-learn not installed)", ""]
        return
    X = load_digits().data.astype(np.float64)
    ours = sm.naive_greedy(sm.feature_based(jnp.asarray(X), "sqrt"), sm.cardinality(k))
    order = [int(i) for i in np.asarray(ours.order) if i >= 0]
    if apricot is None:
        lines += ["## 5. Digits: apricot not installed, skipped", ""]
        return
    sel = apricot.FeatureBasedSelection(k, concave_func="sqrt", optimizer="naive").fit(X)
    same = order == [int(i) for i in sel.ranking]
    lines += [
        f"## 5. Naive greedy, FeatureBased-sqrt over scikit-learn digits (1797 x 64), k = {k}",
        "",
        f"Our selection equals apricot's naive greedy ranking, in order: **{same}**.",
        "",
    ]
    print(lines[-2], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (CI)")
    ap.add_argument("--out", default=None, help="results file (default bench/results/)")
    args = ap.parse_args()
    if args.quick:
        n_acc, n, n_knap, ks = 500, 1000, 500, (10, 50)
    else:
        n_acc, n, n_knap, ks = 2000, 5000, 2000, (10, 25, 50, 100, 200, 500, 1000, 2000)
    t0 = time.perf_counter()
    cmd = "python bench/submodular.py" + (" --quick" if args.quick else "")
    lines = [
        "# Submodular: AAPGA + rounding vs greedy",
        "",
        f"Command: `{cmd}`; {datetime.date.today().isoformat()}; "
        f"JAX {jax.__version__} on {jax.devices()[0].platform}, float64.",
        "",
    ]
    acceleration(n_acc, 50 if not args.quick else 10, lines)
    cardinality_vs_peers(n, ks, lines, args.quick)
    knapsack_vs_apricot(n_knap, 50.0 if not args.quick else 20.0, lines)
    partition_vs_numpy(n, lines)
    digits_vs_apricot(50, lines)
    lines.append(f"Total bench time {time.perf_counter() - t0:.0f} s.")
    write_results("submodular", "\n".join(lines) + "\n", quick=args.quick, out=args.out)


if __name__ == "__main__":
    main()
