"""Data for the cluster family (tests and ``bench/cluster.py``): well-separated Gaussian mixtures."""

import math

import numpy as np


def mixture(seed, n=150, d=4, k=3, gap=None, sigma=1.0):
    """``k`` equal Gaussian clusters with centres on a scaled simplex.

    ``gap`` is the distance between centres; by default it is 2x the exact-recovery
    threshold of the Peng-Wei SDP (Chen and Yang 2021): separation^2 above
    ``4 sigma^2 (1 + sqrt(1 + k d / (n log n))) log n`` recovers the clusters exactly with
    high probability, so 2x that squared distance is the safe side.
    """
    rng = np.random.default_rng(seed)
    if gap is None:
        thr = 4 * sigma**2 * (1 + math.sqrt(1 + k * d / (n * math.log(n)))) * math.log(n)
        gap = math.sqrt(2 * thr)
    centres = np.zeros((k, d))
    centres[: min(k, d), : min(k, d)] = np.eye(min(k, d)) * gap / math.sqrt(2)
    labels = np.repeat(np.arange(k), n // k)
    labels = np.concatenate([labels, np.arange(n - labels.size) % k])
    return centres[labels] + sigma * rng.normal(size=(n, d)), labels
