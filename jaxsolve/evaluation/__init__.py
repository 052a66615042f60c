"""Efficient benchmarking: SparseEval anchor selection with calibrated error bars, and its baselines."""

from jaxsolve.evaluation.anchors import item_vectors, kmeans_anchors, random_anchors
from jaxsolve.evaluation.baselines import Baseline, anchor_points, irt, linear_weights, random_mean
from jaxsolve.evaluation.benchmarks import (
    Benchmark,
    check_matrix,
    load_matrix,
    split_models,
    synthetic_benchmark,
)
from jaxsolve.evaluation.metrics import coverage, kendall_tau, mae
from jaxsolve.evaluation.posterior import PosteriorAccuracy, posterior_accuracy
from jaxsolve.evaluation.sparse_eval import (
    Diagnostics,
    Estimate,
    SparseEvalResult,
    estimate,
    importance_scores,
    sparse_eval,
    sparse_eval_sweep,
)

__all__ = [
    "Baseline",
    "anchor_points",
    "irt",
    "linear_weights",
    "random_mean",
    "Benchmark",
    "Diagnostics",
    "Estimate",
    "PosteriorAccuracy",
    "SparseEvalResult",
    "check_matrix",
    "coverage",
    "estimate",
    "importance_scores",
    "item_vectors",
    "kendall_tau",
    "kmeans_anchors",
    "load_matrix",
    "mae",
    "posterior_accuracy",
    "random_anchors",
    "sparse_eval",
    "sparse_eval_sweep",
    "split_models",
    "synthetic_benchmark",
]
