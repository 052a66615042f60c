"""`make demo` entry: reference-guided latent optimization (the optimization inside
OmniPortrait's pivotal guidance) on a small latent, with checks that have a known answer.

Row 1: identity features, the l2 energy and a pivot term. The optimum is the closed-form
weighted midpoint $(a\\,r + \\lambda z_{pivot}) / (a + \\lambda)$, $a = 2p/n$, so the row
reports the distance to it. Row 2: random linear features (a stand-in for a network's),
the cosine energy with nearest-neighbour matching and a mask over half of the latent: the
row reports the masked mean cosine to the reference before and after, and that the
unmasked half did not move. Inside a sampler the optimizer takes a few steps per sampling
step (``max_steps=k``), not a solve to a tolerance, so this row's status is ``MAX_STEPS``
by design: the cosine energy is scale invariant and its gradient fades slowly.
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import jax
import jax.numpy as jnp

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve.guidance import feature_energy, latent_optimizer
from peers.timing import timed

H, W, C = 8, 8, 4


def run(out_dir) -> list[dict]:
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    z_ref = jax.random.normal(k1, (H, W, C))
    z_pivot = jax.random.normal(k2, (H, W, C))
    z_t = jax.random.normal(k3, (H, W, C))

    identity = lambda z: z.reshape(-1, C)
    lam, p = 0.5, 2.0
    opt = latent_optimizer(identity, kind="l2", matcher="identity", lam=lam, p=p, stepsize=2.0)
    args = (identity(z_ref), z_pivot)
    sol, secs = timed(jaxsolve.solve, opt, z_t, args, tol=1e-10, max_steps=2000, history=True)
    a = 2 * p / (H * W)
    midpoint = (a * z_ref + lam * z_pivot) / (a + lam)
    gap = float(jnp.max(jnp.abs(sol.x - midpoint)))
    rows = [
        row_from_solution(
            "identity features, l2 + pivot",
            f"{H}x{W}x{C} latent",
            "latent_optimizer",
            sol,
            secs,
            f"max|z - closed-form midpoint| {gap:.1e}",
        )
    ]

    proj = jax.random.normal(k4, (C, 16)) / jnp.sqrt(C)
    features = lambda z: jnp.tanh(z.reshape(-1, C) @ proj)
    mask = jnp.zeros((H, W, 1)).at[:, : W // 2].set(1.0)  # guide the left half only
    opt = latent_optimizer(
        features, kind="cosine", matcher="nearest", stepsize=8.0, p=1.0, mask=mask
    )
    ref = features(z_ref)
    args = (ref, z_t)
    sol, secs = timed(jaxsolve.solve, opt, z_t, args, tol=1e-6, max_steps=20, history=True)
    gen_mask = jnp.broadcast_to(mask, (H, W, 1)).reshape(-1)
    cosine = lambda z: (
        1
        - float(
            feature_energy(features(z), ref, kind="cosine", matcher="nearest", mask_gen=gen_mask)
        )
    )
    moved = float(jnp.max(jnp.abs((sol.x - z_t) * (1 - mask))))
    row = row_from_solution(
        "random features, cosine, nearest match",
        f"{H}x{W}x{C}, left half masked in",
        "latent_optimizer",
        sol,
        secs,
        f"unmasked half moved {moved:.0e}",
    )
    row["metric"] = f"masked cosine {cosine(z_t):.2f} -> {cosine(sol.x):.2f}"
    return rows + [row]


if __name__ == "__main__":
    sys.exit(main("guidance", run))
