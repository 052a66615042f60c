"""``make demo`` entry: K-means by Riemannian Newton on a Gaussian mixture, Ratio Cut on RIM."""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax
import jax.numpy as jnp
import numpy as np

from examples._common import main
from peers.timing import timed


def mixture(n=150, seed=0):
    """``n`` points from three unit-variance 2-D Gaussians (in turn) and their labels."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [7.0, 0.0], [3.5, 6.0]])
    labels = np.arange(n) % 3
    return centres[labels] + rng.normal(size=(n, 2)), labels


def _ari(a, b):
    from collections import Counter

    a, b = np.asarray(a), np.asarray(b)
    comb = lambda m: m * (m - 1) / 2
    nij = sum(comb(v) for v in Counter(zip(a, b, strict=True)).values())
    ai = sum(comb(v) for v in Counter(a).values())
    bj = sum(comb(v) for v in Counter(b).values())
    exp = ai * bj / comb(len(a))
    return (nij - exp) / (0.5 * (ai + bj) - exp)


def run(out_dir) -> list[dict]:
    from jaxsolve.cluster import kmeans, ratio_cut, ratio_cut_cost
    from jaxsolve.core import Status

    x, y = mixture()
    rows, newton_labels = [], None
    for method in ("newton", "nlr"):
        km, secs = timed(kmeans, x, 3, key=jax.random.key(0), method=method, polish=0)
        labels, sol = km.state.labels, km.state.relaxation
        newton_labels = labels if method == "newton" else newton_labels
        rows.append(
            {
                "problem": "K-means SDP, Gaussian mixture",
                "size": "150x2, K=3",
                "solver": f"kmeans(method={method!r})",
                "status": Status(int(sol.status)).name,
                "steps": int(sol.num_steps),
                "error": float(sol.error),
                "time": secs,
                "reference": f"ARI vs truth {_ari(y, labels):.3f}",
            }
        )
    # Ratio Cut on a k-NN graph of the same points.
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    nn = np.argsort(d, axis=1)[:, 1:9]
    a = np.zeros_like(d)
    a[np.repeat(np.arange(len(x)), 8), nn.ravel()] = 1.0
    w = 0.5 * (a + a.T)
    rc, secs = timed(ratio_cut, w, 3, max_steps=300)
    labels, f, sol = rc.state.labels, rc.x, rc.state.relaxation
    rows.append(
        {
            "problem": "Ratio Cut, 8-NN graph",
            "size": "150 nodes, c=3",
            "solver": "ratio_cut(manifold='rim', solver='cg')",
            "status": Status(int(sol.status)).name,
            "steps": int(sol.num_steps),
            "error": float(sol.error),
            "time": secs,
            "reference": f"ARI {_ari(y, labels):.3f}, cost {float(ratio_cut_cost(f, jnp.asarray(w / w.sum(1).max()))):.3f}",
        }
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        # the picture shows the rows' own solves: a kmeans call with other options here
        # would be one more compilation (11 s of the family's 34 s CPU)
        fig, ax = plt.subplots(1, 2, figsize=(8, 4))
        ax[0].scatter(x[:, 0], x[:, 1], c=np.asarray(newton_labels), s=10)
        ax[0].set_title("K-means (Riemannian Newton)")
        ax[1].scatter(x[:, 0], x[:, 1], c=np.asarray(labels), s=10)
        ax[1].set_title("Ratio Cut on RIM")
        fig.tight_layout()
        fig.savefig(out_dir / "cluster.png", dpi=100)
        plt.close(fig)
    except ImportError:  # pragma: no cover
        pass
    return rows


if __name__ == "__main__":
    sys.exit(main("cluster", run))
