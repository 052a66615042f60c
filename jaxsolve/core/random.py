"""Counter-based random bits written for XLA to fuse: Threefry-2x32 round by round.

`threefry2x32` is JAX's default generator (Salmon, Moraes, Dror and Shaw, "Parallel
random numbers: as easy as 1, 2, 3", SC 2011), 20 rounds on uint32 key words and
counter arrays. XLA:CPU compiles JAX's own as a rolled loop over the rounds, one
array pass each; written out here, XLA fuses the whole generator into the operation
that consumes its bits (CMA-ES's normal draws, SparseEval's dropout masks), which
halved those costs. Its output equals `jax.extend.random.threefry_2x32` and
Random123's known answers (tests/blackbox/test_quality_diversity.py,
tests/evaluation/test_mlp_train.py).
"""

from __future__ import annotations

import numpy as np

__all__ = ["threefry2x32"]


def _rotl(x, r):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, c0, c1):
    """Threefry-2x32, 20 rounds, on uint32 key words ``k0, k1`` and uint32 counter
    arrays ``c0, c1`` (broadcast together); returns the two output words."""
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0, x1 = c0 + ks[0], c1 + ks[1]
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    for i in range(5):
        for r in rotations[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1
