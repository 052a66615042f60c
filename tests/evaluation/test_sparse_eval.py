"""SparseEval: generator, metrics against SciPy, anchors, swap scores, the pipeline, baselines."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from sklearn.cluster import KMeans

from jaxsolve import evaluation as ev
from jaxsolve.evaluation.mlp import init_mlp, mse

# A small benchmark the fast tests share (compiles once per process).
SMALL = dict(
    n_test=100, n_val=100, rounds=3, epochs=300, final_epochs=1500, check_every=250, patience=3
)


@pytest.fixture(scope="module")
def bench():
    return ev.synthetic_benchmark(jax.random.key(0), 700, 160, 6, dtype=jnp.float64)


def test_generator_is_the_2pl_model(bench):
    Y, acc = np.asarray(bench.Y), np.asarray(bench.accuracy)
    assert Y.shape == (700, 160) and set(np.unique(Y)) <= {0.0, 1.0}
    np.testing.assert_allclose(acc, Y.mean(1), rtol=1e-6)
    p = jax.nn.sigmoid(bench.theta @ bench.a.T - bench.b)
    # each item's empirical rate within 4 binomial standard errors of the model's
    se = np.sqrt(np.asarray(p).mean(0) * (1 - np.asarray(p).mean(0)) / 700) + 1e-3
    assert np.all(np.abs(Y.mean(0) - np.asarray(p).mean(0)) <= 4 * se + 1e-2)
    fam = ev.synthetic_benchmark(jax.random.key(1), 100, 20, 3, n_families=4).family
    assert np.bincount(np.asarray(fam)).tolist() == [25, 25, 25, 25]


def test_kendall_tau_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.normal(size=60)
        y = np.round(x + rng.normal(size=60), 1)  # many ties in y
        y[:10] = y[0]
        ref = scipy.stats.kendalltau(x, y).statistic
        np.testing.assert_allclose(float(ev.kendall_tau(x, y)), ref, rtol=1e-10)
    w = np.r_[np.ones(40), np.zeros(20)]
    ref = scipy.stats.kendalltau(x[:40], y[:40]).statistic
    np.testing.assert_allclose(float(ev.kendall_tau(x, y, weights=w)), ref, rtol=1e-10)


def test_kmeans_anchors_hit_each_planted_cluster_once():
    # 8 planted item clusters: items are noisy copies of 8 prototype answer columns
    rng = np.random.default_rng(1)
    proto = rng.integers(0, 2, size=(300, 8))
    labels = np.repeat(np.arange(8), 25)
    flips = rng.random((300, 200)) < 0.05
    Y = np.where(flips, 1 - proto[:, labels], proto[:, labels]).astype(np.float64)
    anchors, w = ev.kmeans_anchors(jnp.asarray(Y), 8, jax.random.key(0))
    assert sorted(labels[np.asarray(anchors)].tolist()) == list(range(8))
    np.testing.assert_allclose(np.sort(np.asarray(w)), np.full(8, 1 / 8), atol=1e-12)
    # the same partition as scikit-learn's k-means on the same vectors
    V = np.asarray(ev.item_vectors(jnp.asarray(Y)))
    km = KMeans(8, n_init=10, random_state=0).fit(V)
    assert (
        len(set(zip(km.labels_[np.asarray(anchors)], labels[np.asarray(anchors)], strict=True)))
        == 8
    )


def test_duplicates_are_refilled_and_padding_is_inert():
    from jaxsolve.evaluation.anchors import fill_duplicates

    a = jnp.asarray([3, 3, 5, 3, 7, 0])
    active = jnp.asarray([True, True, True, True, True, False])
    out = np.asarray(fill_duplicates(a, active, 10, jax.random.key(0)))
    assert len(set(out[:5].tolist())) == 5 and out[0] == 3 and out[2] == 5 and out[5] == 0
    # padded anchors: the first K slots equal the unpadded run
    Y = ev.synthetic_benchmark(jax.random.key(3), 200, 50, 4).Y
    a5, _ = ev.kmeans_anchors(Y, 5, jax.random.key(1))
    a5p, w5p = ev.kmeans_anchors(Y, 5, jax.random.key(1), k_max=9)
    np.testing.assert_array_equal(np.asarray(a5), np.asarray(a5p)[:5])
    np.testing.assert_allclose(np.asarray(w5p)[5:], 0)


@pytest.mark.slow  # eager finite differences of the MSE (10 s)
def test_importance_scores_are_the_saliency_and_the_residual_correlation(bench):
    Y = bench.Y.astype(jnp.float64)
    y = Y.mean(1)
    anchors = jnp.asarray([3, 10, 20, 40, 0])
    active = jnp.asarray([1.0, 1.0, 1.0, 1.0, 0.0])
    X = Y[:, anchors] * active
    params = init_mlp(jax.random.key(0), 5, (16, 8), jnp.float64, fan_in=4)
    ais, cis = ev.importance_scores(params, X, y, Y, anchors, active, 0.1)
    # AIS by central differences of the MSE in one input entry at a time
    eps = 1e-6
    for a in range(4):
        g = []
        for m in range(0, 700, 97):
            E = jnp.zeros_like(X).at[m, a].set(eps)
            g.append((mse(params, X + E, y, None) - mse(params, X - E, y, None)) / (2 * eps))
        full = jax.grad(mse, argnums=1)(params, X, y, None)[::97, a]
        np.testing.assert_allclose(np.asarray(g), np.asarray(full), rtol=1e-5, atol=1e-12)
    assert np.isinf(float(ais[4]))
    from jaxsolve.evaluation.mlp import apply_mlp

    r = np.asarray(apply_mlp(params, X) - y)
    ref = np.abs((np.asarray(Y) - 0.5).T @ r)
    ref[[3, 10, 20, 40]] = -1.0
    np.testing.assert_allclose(np.asarray(cis), ref, rtol=1e-10)


@pytest.fixture(scope="module")
def fitted(bench):
    return ev.sparse_eval(bench.Y, 12, jax.random.key(1), **SMALL)


@pytest.mark.slow  # 14 s plus its fitted fixture (~10 s): an accuracy check of the full pipeline
def test_sparse_eval_estimates_accuracies_with_calibrated_intervals(bench, fitted):
    r = fitted
    tr, va, te = r.split
    assert len(te) == 100 and len(va) == 100 and len(tr) == 500
    anchors = np.asarray(r.anchors)
    assert anchors.shape == (12,) and len(set(anchors.tolist())) == 12
    d = r.diagnostics
    acc = np.asarray(bench.accuracy)
    # the estimate from 12 of 160 items: a few accuracy points, ranks mostly kept. Over
    # keys 1-8 this setting gives 6.33 +- 0.39 points, at most 6.83 (key 1: 6.61), with
    # the fused dropout masks, and 6.34 +- 0.49, at most 7.25, with jax.random's
    assert float(d.test_mae) < 0.07 and float(d.test_tau) > 0.8
    # and better than the mean of 12 random items on the same test models (any of 5 draws)
    Yte = np.asarray(bench.Y)[te]
    for s in range(5):
        rnd = np.asarray(ev.random_anchors(160, 12, jax.random.key(7 + s)))
        assert float(d.test_mae) < np.abs(Yte[:, rnd].mean(1) - acc[te]).mean()
    est = ev.estimate(r, bench.Y[te])
    np.testing.assert_allclose(float(ev.mae(est.accuracy, acc[te])), float(d.test_mae), rtol=1e-5)
    cov = float(ev.coverage(est.lower, est.upper, acc[te]))
    assert cov >= 0.8 and cov == pytest.approx(float(d.test_coverage))
    assert np.all(np.asarray(est.lower) <= np.asarray(est.accuracy))
    # answers on the anchors only give the same estimate as full rows
    est2 = ev.estimate(r, np.asarray(bench.Y)[te][:, anchors])
    np.testing.assert_allclose(np.asarray(est2.accuracy), np.asarray(est.accuracy), rtol=1e-6)


@pytest.mark.slow  # three compilations of the whole pipeline (about 30 s)
def test_sweep_over_k_and_seeds_equals_separate_runs(bench):
    split_key = jax.random.key(5)
    opts = dict(SMALL, rounds=1, epochs=100, final_epochs=500)
    Ks, keys = (6, 9), (jax.random.key(2), jax.random.key(3))
    sw = ev.sparse_eval_sweep(bench.Y, Ks, keys, split_key=split_key, **opts)
    for i, (K, key) in enumerate(zip(Ks, keys, strict=True)):
        one = ev.sparse_eval(bench.Y, K, key, split_key=split_key, **opts)
        np.testing.assert_array_equal(np.asarray(sw.anchors[i])[:K], np.asarray(one.anchors))
        assert np.all(np.asarray(sw.anchors[i])[K:] == -1)
        np.testing.assert_allclose(
            float(sw.diagnostics.test_mae[i]), float(one.diagnostics.test_mae), rtol=1e-4
        )


@pytest.mark.slow  # four fits with their own compilations (about 10 s)
def test_baselines_run_on_the_same_split(bench):
    Y, acc = bench.Y, np.asarray(bench.accuracy)
    tr, _, te = ev.split_models(jax.random.key(4), 700, 100, 100)
    maes = {}
    for name, fn, kw in (
        ("random", ev.random_mean, {}),
        ("points", ev.anchor_points, {}),
        ("linear", ev.linear_weights, {"steps": 500}),
        ("irt", ev.irt, {"steps": 300, "theta_steps": 100}),
    ):
        b = fn(Y[tr], 12, jax.random.key(2), **kw)
        pred = np.asarray(b.predict(Y[te][:, np.asarray(b.anchors)]))
        maes[name] = np.abs(pred - acc[te]).mean()
        assert np.all((pred > -0.2) & (pred < 1.2))
    # fitted weights do at least as well as the fixed cluster-size weights on test models
    assert maes["linear"] < maes["points"] + 0.01
    assert max(maes.values()) < 0.12


def test_soft_scores_are_kept_and_files_load(tmp_path):
    Y = np.asarray(ev.synthetic_benchmark(jax.random.key(0), 50, 40, 3).Y)
    np.save(tmp_path / "y.npy", Y * 0.5)
    np.testing.assert_allclose(np.asarray(ev.load_matrix(tmp_path / "y.npy")), Y * 0.5)
    np.savetxt(tmp_path / "y.csv", Y[:5], delimiter=",")
    np.testing.assert_allclose(np.asarray(ev.load_matrix(tmp_path / "y.csv")), Y[:5])
