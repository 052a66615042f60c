"""Evaluation family (SparseEval, anchors, baselines, metrics) on hostile input: every
case is refused before compiling, by an error that names the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import evaluation as ev

K0 = jax.random.key(0)
Y = (np.random.default_rng(0).uniform(size=(60, 12)) < 0.6).astype(float)
YJ = jnp.asarray(Y)
SMALL = dict(n_test=10, n_val=10)


@pytest.fixture(scope="module")
def result():
    """A SparseEvalResult without training (estimate's checks need only its fields)."""
    anchors = jnp.array([10, 2, 0])
    params = [(jnp.zeros((3, 4)), jnp.zeros(4)), (jnp.zeros((4, 1)), jnp.zeros(1))]
    return ev.SparseEvalResult(anchors, params, jnp.ones(()), 0.1, None, None)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # the correctness matrix: NaN/inf, range (1e8 scales), shapes, dtypes, empty
        (lambda: ev.sparse_eval(np.where(Y > 0.5, np.nan, Y), 5, K0, **SMALL), ValueError, "NaN"),
        (
            lambda: ev.sparse_eval(np.where(Y > 0.5, np.inf, Y), 5, K0, **SMALL),
            ValueError,
            "Y must lie",
        ),
        (lambda: ev.sparse_eval(Y * 2, 5, K0, **SMALL), ValueError, r"Y must lie in \[0, 1\]"),
        (lambda: ev.sparse_eval(Y * 1e8, 5, K0, **SMALL), ValueError, r"Y must lie in \[0, 1\]"),
        (lambda: ev.check_matrix(Y[0]), ValueError, "Y must be a .models, items. matrix"),
        (lambda: ev.check_matrix(Y[:0]), ValueError, "Y is empty"),
        (lambda: ev.check_matrix(Y.astype(complex)), TypeError, "Y must hold numbers"),
        (lambda: ev.check_matrix(jnp.asarray(Y, jnp.bfloat16)), TypeError, "Y must hold numbers"),
        (lambda: ev.check_matrix(np.array([["a"]])), TypeError, "Y must hold numbers"),
        (lambda: ev.check_matrix(Y, min_models=100), ValueError, "at least 100 are needed"),
        (lambda: ev.load_matrix("/nonexistent/y.npy"), FileNotFoundError, "no matrix at"),
        (lambda: ev.load_matrix(__file__), ValueError, "unknown matrix format"),
        # sparse_eval's arguments
        (lambda: ev.sparse_eval(Y, 12, K0, **SMALL), ValueError, "fewer than the 12 items"),
        (lambda: ev.sparse_eval(Y, 0, K0, **SMALL), ValueError, "K must be a positive int"),
        (lambda: ev.sparse_eval(Y, 2.5, K0, **SMALL), ValueError, "K must be a positive int"),
        (lambda: ev.sparse_eval(Y, 5, None, **SMALL), TypeError, "key must be a jax.random key"),
        (lambda: ev.sparse_eval(Y, 5, jnp.zeros(3, jnp.uint32), **SMALL), TypeError, "key must"),
        (lambda: ev.sparse_eval(Y, 5, K0, split_key=3, **SMALL), TypeError, "split_key must be"),
        (lambda: ev.sparse_eval(Y, 5, K0, n_test=100), ValueError, "n_test = 100"),
        (lambda: ev.sparse_eval(Y[:15], 5, K0, **SMALL), ValueError, "cannot be split"),
        (lambda: ev.sparse_eval(Y, 5, K0, init="spectral", **SMALL), ValueError, "init"),
        (lambda: ev.sparse_eval(Y, 5, K0, lr=-1.0, **SMALL), ValueError, "lr must be"),
        (lambda: ev.sparse_eval(Y, 5, K0, lr=float("nan"), **SMALL), ValueError, "lr must be"),
        (lambda: ev.sparse_eval(Y, 5, K0, hidden=(0,), **SMALL), ValueError, "hidden must be"),
        (lambda: ev.sparse_eval(Y, 5, K0, hidden="abc", **SMALL), ValueError, "hidden must be"),
        (lambda: ev.sparse_eval(Y, 5, K0, dropout=float("nan"), **SMALL), ValueError, "dropout"),
        (lambda: ev.sparse_eval(Y, 5, K0, alpha=1.5, **SMALL), ValueError, "alpha"),
        (lambda: ev.sparse_eval(Y, 5, K0, rounds=-1, **SMALL), ValueError, "rounds must be"),
        (lambda: ev.sparse_eval(Y, 5, K0, patience=0, **SMALL), ValueError, "patience must be"),
        # an explicit split: indices outside the models, overlapping, non-integer, short
        (lambda: ev.sparse_eval(Y, 2, K0, split=([0, 1, 100], [2], [3])), ValueError, "in .0, 60."),
        (lambda: ev.sparse_eval(Y, 2, K0, split=([0, 1, 2], [2], [3])), ValueError, "distinct"),
        (lambda: ev.sparse_eval(Y, 2, K0, split=([0.5, 1, 2], [4], [3])), ValueError, "of ints"),
        (lambda: ev.sparse_eval(Y, 2, K0, split=([0], [4], [3])), ValueError, "train of 2"),
        (lambda: ev.sparse_eval(Y, 2, K0, split=([0, 1], [4])), ValueError, "split must be"),
        # the sweep
        (lambda: ev.sparse_eval_sweep(Y, [], [], **SMALL), ValueError, "Ks and keys"),
        (lambda: ev.sparse_eval_sweep(Y, [2, 3], [K0], **SMALL), ValueError, "Ks and keys"),
        (lambda: ev.sparse_eval_sweep(Y, [2], [0], **SMALL), TypeError, r"keys\[0\] must be"),
        (lambda: ev.sparse_eval_sweep(Y, [2.5], [K0], **SMALL), ValueError, "K must be"),
        (lambda: ev.sparse_eval_sweep(Y, [2], [K0], split_key=0, **SMALL), TypeError, "split_key"),
        (lambda: ev.sparse_eval_sweep(Y, [2], [K0], foo=1, **SMALL), TypeError, "unknown options"),
        # splits and the synthetic generator
        (lambda: ev.split_models(3, 30, 5, 5), TypeError, "key must be a jax.random key"),
        (lambda: ev.split_models(K0, 30, 2.5, 5), ValueError, "n_test must be an int"),
        (lambda: ev.split_models(K0, 30, 0, 5), ValueError, "n_test = 0"),
        (lambda: ev.synthetic_benchmark(0, 10, 5), TypeError, "key must be a jax.random key"),
        (lambda: ev.synthetic_benchmark(K0, 0, 5), ValueError, "n_models must be"),
        (lambda: ev.synthetic_benchmark(K0, 10, 5, dtype=jnp.int32), TypeError, "dtype must be"),
        (lambda: ev.synthetic_benchmark(K0, 10, 5, n_families=11), ValueError, "n_families"),
        (lambda: ev.synthetic_benchmark(K0, 10, 5, a_scale=-1.0), ValueError, "a_scale must be"),
        (
            lambda: ev.synthetic_benchmark(K0, 10, 5, family_spread=float("nan")),
            ValueError,
            "family_spread must be",
        ),
        # anchors
        (lambda: ev.item_vectors(jnp.ones(3)), ValueError, "Y must be a non-empty"),
        (lambda: ev.item_vectors(jnp.full((3, 3), jnp.nan)), ValueError, "Y contains NaN"),
        (lambda: ev.item_vectors(jnp.ones((3, 3), int)), TypeError, "Y must be a real"),
        (lambda: ev.kmeans_anchors(YJ, 20, K0), ValueError, r"k must be an int in \[1, 12\]"),
        (lambda: ev.kmeans_anchors(YJ, 0, K0), ValueError, r"k must be an int in \[1, 12\]"),
        (lambda: ev.kmeans_anchors(YJ, 3, 0), TypeError, "key must be a jax.random key"),
        (lambda: ev.kmeans_anchors(YJ.at[0, 0].set(jnp.nan), 3, K0), ValueError, "Y contains"),
        (lambda: ev.kmeans_anchors(YJ, 3, K0, k_max=2), ValueError, "k_max must lie"),
        (lambda: ev.kmeans_anchors(YJ, 3, K0, iters=-1), ValueError, "iters must be"),
        (lambda: ev.random_anchors(5, 8, K0), ValueError, r"k must be an int in \[1, 5\]"),
        (lambda: ev.random_anchors(5, 2, 0), TypeError, "key must be a jax.random key"),
        (lambda: ev.random_anchors(0, 2, K0), ValueError, "n_items must be"),
        # baselines
        (lambda: ev.random_mean(YJ, 20, K0), ValueError, "K must be an int in"),
        (lambda: ev.random_mean(jnp.full((3, 4), jnp.nan), 2, K0), ValueError, "Y contains NaN"),
        (lambda: ev.random_mean(YJ, 2, 0), TypeError, "key must be a jax.random key"),
        (lambda: ev.anchor_points(YJ, 0, K0), ValueError, "K must be an int in"),
        (lambda: ev.anchor_points(YJ * 1e8, 2, K0), ValueError, r"Y must lie in \[0, 1\]"),
        (lambda: ev.linear_weights(YJ, 2, 0, steps=5), TypeError, "key must be"),
        (lambda: ev.linear_weights(YJ, 2, K0, steps=-1), ValueError, "steps must be"),
        (lambda: ev.linear_weights(YJ, 2, K0, lr=0.0), ValueError, "lr must be"),
        (lambda: ev.irt(YJ, 20, K0), ValueError, "K must be an int in"),
        (lambda: ev.irt(YJ, 2, K0, dim=0), ValueError, "dim must be"),
        (lambda: ev.irt(YJ.astype(complex), 2, K0), TypeError, "Y must hold numbers"),
        # metrics
        (lambda: ev.kendall_tau(np.ones(5), np.ones(4)), ValueError, "x and y must be score"),
        (lambda: ev.kendall_tau(np.ones(0), np.ones(0)), ValueError, "x is empty"),
        (lambda: ev.kendall_tau(np.ones(3), np.ones(3), np.ones(4)), ValueError, "weights must"),
        (lambda: ev.kendall_tau(np.ones(3, complex), np.ones(3)), TypeError, "x must be real"),
        (lambda: ev.mae(jnp.ones(3), jnp.ones(4)), ValueError, "pred and true must have one"),
        (lambda: ev.mae(jnp.ones(0), jnp.ones(0)), ValueError, "pred is empty"),
        (lambda: ev.coverage(jnp.ones(3), jnp.ones(4), jnp.ones(3)), ValueError, "lower, upper"),
        # the swap scores
        (
            lambda: ev.importance_scores(
                None,
                jnp.ones((4, 3)),
                jnp.ones(5),
                jnp.ones((4, 12)),
                jnp.zeros(3, int),
                jnp.ones(3),
            ),
            ValueError,
            r"y must have shape \(4,\)",
        ),
        (
            lambda: ev.importance_scores(
                None,
                jnp.ones((4, 3)),
                jnp.ones(4),
                jnp.ones((5, 12)),
                jnp.zeros(3, int),
                jnp.ones(3),
            ),
            ValueError,
            "same models",
        ),
        (
            lambda: ev.importance_scores(
                None,
                jnp.ones((4, 3)),
                jnp.ones(4),
                jnp.ones((4, 12)),
                jnp.zeros(2, int),
                jnp.ones(3),
            ),
            ValueError,
            r"anchors must have shape \(3,\)",
        ),
    ],
)
def test_bad_arguments_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    "answers, exc, match",
    [
        (np.ones((4, 5)), ValueError, "answers must have 3 columns"),
        (np.full((4, 3), np.nan), ValueError, "answers contains NaN"),
        (np.full((4, 3), 1e8), ValueError, r"answers must lie in \[0, 1\]"),
        (np.ones(3), ValueError, "answers must be a .models, items. matrix"),
        (np.ones((0, 3)), ValueError, "answers is empty"),
        (np.ones((4, 3), complex), TypeError, "answers must hold numbers"),
    ],
)
def test_estimate_names_bad_answers(result, answers, exc, match):
    with pytest.raises(exc, match=match):
        ev.estimate(result, answers)


def test_estimate_names_a_non_result():
    with pytest.raises(TypeError, match="result must be a SparseEvalResult"):
        ev.estimate(3, np.ones((4, 3)))
    stacked = ev.SparseEvalResult(jnp.zeros((2, 3), int), None, None, 0.1, None, None)
    with pytest.raises(ValueError, match="estimate takes one result"):
        ev.estimate(stacked, np.ones((4, 3)))
