"""Benchmark of the cluster family: K-means by Riemannian Newton vs NLR and scikit-learn,
Ratio Cut on the RIM manifold vs the doubly stochastic manifold and spectral clustering,
and the linear-time RIM retraction.

Run ``python bench/cluster.py`` (full) or ``--quick`` (CI, about a minute). Writes
``bench/results/cluster.md``. Times are steady state (a second call after compilation,
which is reported apart); the machine is shared, so ratios are what to read.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jaxsolve.cluster import kmeans, ratio_cut, ratio_cut_cost  # noqa: E402
from jaxsolve.manifolds import RIM  # noqa: E402

try:
    from sklearn import datasets
    from sklearn.cluster import KMeans, SpectralClustering
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
    from sklearn.neighbors import kneighbors_graph
    from sklearn.preprocessing import StandardScaler
except ImportError:  # pragma: no cover
    datasets = None
    print("scikit-learn is not installed: skipping the scikit-learn peers")


def _timed(fn, *a, **k):
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*a, **k))
    first = time.perf_counter() - t
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*a, **k))
    return out, first, time.perf_counter() - t


def _inertia(x, labels):
    labels = np.asarray(labels)
    return sum(((x[labels == k] - x[labels == k].mean(0)) ** 2).sum() for k in np.unique(labels))


def _accuracy(y, labels):
    from scipy.optimize import linear_sum_assignment

    k = max(y.max(), np.asarray(labels).max()) + 1
    m = np.zeros((k, k))
    for a, b in zip(y, np.asarray(labels), strict=True):
        m[a, b] += 1
    r, c = linear_sum_assignment(-m)
    return m[r, c].sum() / len(y)


def mixture(seed, n, d=4, k=3):
    sys.path.insert(0, str(ROOT))
    from tests.cluster._data import mixture as mx

    return mx(seed, n=n, d=d, k=k)


def bench_newton_vs_nlr(sizes, rows):
    out = [
        "## K-means: Riemannian Newton (ARC) vs NLR, Gaussian mixtures (2x the recovery threshold)",
        "",
    ]
    out.append(
        "| n | K | Newton steps | NLR steps | step ratio | Newton s | NLR s | time ratio (ours/NLR) | <A,Z> Newton | <A,Z> NLR | ARI Newton | ARI NLR | compile s (Newton) |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        x, y = mixture(0, n)
        (lab, _, sol), c1, t1 = _timed(kmeans, x, 3, key=jax.random.key(0), mu=1e-3, polish=0)
        (lab2, _, sol2), _, t2 = _timed(kmeans, x, 3, key=jax.random.key(0), method="nlr", polish=0)
        from jaxsolve.cluster import lift, prepare_data

        data, _ = prepare_data(jnp.asarray(x))
        u1 = lift(*sol.x)
        az1 = float(jnp.sum((data.T @ u1) ** 2))
        az2 = float(jnp.sum((data.T @ sol2.x) ** 2))
        s1, s2 = int(sol.num_steps), int(sol2.num_steps)
        out.append(
            f"| {n} | 3 | {s1} | {s2} | {s1 / s2:.4f} | {t1:.2f} | {t2:.2f} | {t1 / t2:.2f} | "
            f"{az1:.5f} | {az2:.5f} | {adjusted_rand_score(y, lab):.3f} | "
            f"{adjusted_rand_score(y, lab2):.3f} | {c1:.1f} |"
        )
        rows.append(dict(n=n, step_ratio=s1 / s2, time_ratio=t1 / t2))
    out.append("")
    out.append(
        "`<A,Z>` is the fraction of the total sum of squares explained by the relaxed "
        "cluster matrix (higher is better; the Newton iterate carries the barrier "
        "`mu = 1e-3`, NLR none). Both stop at their own rule (Newton: Riemannian gradient "
        "norm <= 1e-6; NLR: the reference code's max(step, row-sum residual) <= 1e-6)."
    )
    return out


def bench_datasets(names, rows):
    out = ["## K-means on scikit-learn datasets (standardized) vs KMeans(n_init=10)", ""]
    out.append(
        "| data | n x d | K | objective ratio (ours/sklearn) | raw rounding ratio | ARI ours | ARI sklearn | steps | ours s | sklearn s | time ratio | compile s |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        x, y = getattr(datasets, f"load_{name}")(return_X_y=True)
        x = StandardScaler().fit_transform(x)
        k = len(np.unique(y))
        (lab, _, sol), c1, t1 = _timed(kmeans, x, k, key=jax.random.key(0))
        lab0, _, _ = kmeans(x, k, key=jax.random.key(0), polish=0)
        t = time.perf_counter()
        km = KMeans(k, n_init=10, random_state=0).fit(x)
        t2 = time.perf_counter() - t
        ratio = _inertia(x, lab) / km.inertia_
        raw = _inertia(x, lab0) / km.inertia_
        out.append(
            f"| {name} | {x.shape[0]}x{x.shape[1]} | {k} | {ratio:.4f} | {raw:.4f} | "
            f"{adjusted_rand_score(y, lab):.3f} | {adjusted_rand_score(y, km.labels_):.3f} | "
            f"{int(sol.num_steps)} | {t1:.2f} | {t2:.2f} | {t1 / t2:.1f} | {c1:.1f} |"
        )
        rows.append(dict(data=name, ratio=ratio))
    out.append("")
    out.append(
        "Objective = K-means inertia of the returned labels (rounding of `Z = U U^T` + 20 "
        "Lloyd steps); 'raw rounding' is without the Lloyd polish."
    )
    return out


def bench_ratio_cut(n_sub, full, rows):
    x, y = datasets.load_digits(return_X_y=True)
    out = ["## Ratio Cut on a 10-NN graph of scikit-learn digits", ""]
    out.append("| n | manifold | solver | steps | cost | ACC | NMI | s | compile s |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    res = {}
    for n in sorted({n_sub, full} if full else {n_sub}):
        xs, ys = x[:n], y[:n]
        a = kneighbors_graph(xs, 10, include_self=False).toarray()
        w = 0.5 * (a + a.T)
        wn = jnp.asarray(w / w.sum(1).max())
        mans = ["rim", "doubly_stochastic"] if n == n_sub else ["rim"]
        for man in mans:
            (lab, f, sol), c1, t1 = _timed(ratio_cut, w, 10, manifold=man, max_steps=300)
            cost = float(ratio_cut_cost(f, wn))
            res[(n, man)] = (cost, t1)
            out.append(
                f"| {n} | {man} | CG | {int(sol.num_steps)} | {cost:.6f} | {_accuracy(ys, lab):.3f} | "
                f"{normalized_mutual_info_score(ys, lab):.3f} | {t1:.2f} | {c1:.1f} |"
            )
        t = time.perf_counter()
        sc = SpectralClustering(10, affinity="precomputed", random_state=0).fit(w)
        t2 = time.perf_counter() - t
        out.append(
            f"| {n} | sklearn SpectralClustering | - | - | "
            f"{float(ratio_cut_cost(jnp.asarray(np.eye(10)[sc.labels_]), wn)):.4f} | "
            f"{_accuracy(ys, sc.labels_):.3f} | {normalized_mutual_info_score(ys, sc.labels_):.3f} | {t2:.2f} | - |"
        )
    rim, ds = res[(n_sub, "rim")], res[(n_sub, "doubly_stochastic")]
    out.append("")
    out.append(
        f"At n = {n_sub}: cost ratio RIM/DS = {rim[0] / ds[0]:.6f}, time ratio RIM/DS = "
        f"{rim[1] / ds[1]:.3f}. Both start from a random point of their manifold, run "
        "Riemannian CG (Hestenes-Stiefel, Armijo) for at most 300 steps on the same "
        "normalized graph; the DS relaxation is `F = Z B` with `Z` doubly stochastic "
        "(Fisher metric, O(n^3) per operation). The spectral clustering row's cost is the "
        "Ratio Cut of its hard labels."
    )
    rows.append(dict(cost_ratio=rim[0] / ds[0], time_ratio=rim[1] / ds[1]))
    return out


def bench_linear_time(sizes, rows):
    out = ["## RIM retraction + projection time vs n (c = 10, 20 inner sweeps each)", ""]
    out.append("| n | retraction | s |")
    out.append("|---|---|---|")
    times = {}
    for ret in ("dykstra", "dual", "sinkhorn"):
        for n in sizes:
            # tol=0: exactly max_iter sweeps, so the ratio measures the cost per sweep
            m = RIM(n, 10, 0.5 * n / 10, 1.5 * n / 10, retraction=ret, max_iter=20, tol=0.0)
            x = m.random_point(jax.random.key(0))
            u = 0.5 * jax.random.normal(jax.random.key(1), (n, 10))
            f = jax.jit(lambda x, u, m=m: m.retract(x, m.proj(x, u)))
            _, _, t = _timed(f, x, u)
            times[(ret, n)] = t
            out.append(f"| {n} | {ret} | {t:.4f} |")
    out.append("")
    lo, hi = sizes
    for ret in ("dykstra", "dual", "sinkhorn"):
        out.append(
            f"- {ret}: time({hi}) / time({lo}) = {times[(ret, hi)] / times[(ret, lo)]:.1f} (linear: {hi / lo:.0f})"
        )
    rows.append({k: v for k, v in times.items()})
    return out


def _tv_cost(x, a):
    """1/2 ||X - A||^2 + 0.3 TV_eps(X) (anisotropic, smoothed with eps = 1e-2)."""
    lam, eps = 0.3, 1e-2
    dx, dy = jnp.diff(x, axis=0), jnp.diff(x, axis=1)
    return 0.5 * jnp.sum((x - a) ** 2) + lam * (
        jnp.sum(jnp.sqrt(dx**2 + eps**2)) + jnp.sum(jnp.sqrt(dy**2 + eps**2))
    )


def bench_denoise(stride, steps, rows):
    """Paper 14's demo: TV denoising of a noisy sample image on RIM (per RGB channel, row
    sums = the noisy row sums, lower = upper = the noisy column sums), Riemannian CG."""
    from sklearn.datasets import load_sample_image

    from jaxsolve.core import solve
    from jaxsolve.riemannian import conjugate_gradient

    img = load_sample_image("china.jpg")[::stride, ::stride].astype(np.float64) / 255.0
    rng = np.random.default_rng(0)
    noisy = np.maximum(img + 0.3 * rng.normal(size=img.shape), 0.01)
    out = np.zeros_like(img)
    t0 = time.perf_counter()
    for ch in range(3):
        a = noisy[:, :, ch]
        n, c = a.shape
        cols = tuple(a.sum(0))
        m = RIM(n, c, cols, cols, row_sums=tuple(a.sum(1)), max_iter=200, tol=1e-9)
        sol = solve(
            conjugate_gradient(_tv_cost, m),
            jnp.asarray(a),
            jnp.asarray(a),
            tol=1e-6,
            max_steps=steps,
        )
        out[:, :, ch] = np.asarray(sol.x)
    secs = time.perf_counter() - t0
    psnr = lambda x: 10 * np.log10(1.0 / np.mean((np.clip(x, 0, 1) - img) ** 2))
    lines = ["## TV denoising on RIM (china.jpg, noise 0.3, lambda 0.3)", ""]
    lines.append(
        "| variables | CG steps / channel | PSNR noisy | PSNR denoised | gain dB | s (incl. compile) |"
    )
    lines.append("|---|---|---|---|---|---|")
    lines.append(
        f"| {img.size} | {steps} | {psnr(noisy):.2f} | {psnr(out):.2f} | {psnr(out) - psnr(noisy):.2f} | {secs:.0f} |"
    )
    rows.append(dict(psnr_gain=psnr(out) - psnr(noisy)))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--denoise", action="store_true", help="only the TV denoising demo (full image)")
    ns = p.parse_args(argv)
    if datasets is None:
        return 0
    rows = []
    out = ROOT / "bench" / "results" / ("cluster_quick.md" if ns.quick else "cluster.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# cluster benchmark" + (" (--quick)" if ns.quick else ""), ""]
    if ns.denoise:
        out = out.with_name("cluster_denoise.md")
        sections = [lambda: bench_denoise(1, 30, rows)]
    elif ns.quick:
        sections = [
            lambda: bench_newton_vs_nlr([150], rows),
            lambda: bench_datasets(["iris"], rows),
            lambda: bench_ratio_cut(100, None, rows),
            lambda: bench_linear_time((10_000, 100_000), rows),
        ]
    else:
        sections = [
            lambda: bench_newton_vs_nlr([150, 300], rows),
            lambda: bench_linear_time((100_000, 1_000_000), rows),
            lambda: bench_ratio_cut(300, 1797, rows),
            lambda: bench_datasets(["iris", "wine", "breast_cancer", "digits"], rows),
        ]
    for section in sections:
        lines += section() + [""]
        text = "\n".join(lines) + "\n"
        print(text, flush=True)
        out.write_text(text)  # written after each section: partial results survive
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
