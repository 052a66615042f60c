"""The CVT archive (issue 30): parity with pyribs' CVTArchive, centroids, bad input, CMA-MAE."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.blackbox.archives import cvt_archive, cvt_centroids
from jaxsolve.blackbox.cma_mae import cma_mae, sphere_linear_projection

ribs = pytest.importorskip("ribs")


@pytest.mark.parametrize("learning_rate, threshold_min", [(None, -np.inf), (0.01, 0.0)])
def test_cvt_archive_add_matches_pyribs(learning_rate, threshold_min):
    from ribs.archives import CVTArchive

    rng = np.random.default_rng(1)
    ranges = [(-1, 1), (0, 2)]
    C = np.asarray(cvt_centroids(jax.random.key(0), ranges, 30, samples=3000, iterations=20))
    kw = dict(solution_dim=3, ranges=ranges, threshold_min=threshold_min)
    if learning_rate is not None:
        kw["learning_rate"] = learning_rate
    ref, ours = CVTArchive(centroids=C, **kw), cvt_archive(centroids=C, **kw)
    state = ours.init()
    add = jax.jit(lambda s, *a: ours.add(s, *a))
    dev = 0.0
    for t in range(200):
        B = 12
        sol, obj = rng.normal(size=(B, 3)), 2 * rng.normal(size=B)
        meas = rng.uniform(-1.3, 2.3, size=(B, 2))  # some outside the ranges: not clipped
        if t % 3 == 0:
            meas[: B // 2] = meas[0]  # several insertions into one cell in a batch
        if t % 5 == 0:
            obj[-2:] = np.nan  # pyribs rejects NaN: it gets the batch without those rows
        ok = np.isfinite(obj)
        r = ref.add(sol[ok], obj[ok], meas[ok])
        state, info = add(state, sol, obj, meas)
        st, val = np.asarray(info.status), np.asarray(info.value)
        assert np.all(st[~ok] == 0) and np.all(np.isnan(val[~ok]))
        np.testing.assert_array_equal(st[ok], r["status"])
        np.testing.assert_array_equal(np.asarray(info.index)[ok], ref.index_of(meas[ok]))
        np.testing.assert_allclose(val[ok], r["value"], rtol=1e-6, atol=1e-6)
        dev = max(dev, float(np.max(np.abs(val[ok] - r["value"]), initial=0)))
    d = ref.data()
    order = np.argsort(d["index"])
    idx = d["index"][order]
    assert set(np.flatnonzero(np.asarray(state.occupied))) == set(idx.tolist())
    for name in ("objective", "threshold", "solution", "measures"):
        a, b = np.asarray(getattr(state, name))[idx], d[name][order]
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        dev = max(dev, float(np.max(np.abs(a - b))))
    s = ours.stats(state)
    np.testing.assert_allclose(float(s.qd_score), ref.stats.qd_score, rtol=1e-6)
    np.testing.assert_allclose(float(s.coverage), ref.stats.coverage)
    print(f"max deviation {dev:.3g}")


def _cv(C, X):
    d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
    n = np.bincount(d.argmin(1), minlength=len(C))
    return n.std() / n.mean()


def test_cvt_centroids_deterministic_and_equal_volume():
    ranges = [(0, 1), (-2, 2)]
    a = cvt_centroids(jax.random.key(3), ranges, 50, samples=20_000, iterations=50)
    b = cvt_centroids(jax.random.key(3), ranges, 50, samples=20_000, iterations=50)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    C = np.asarray(a)
    assert np.all((C >= [0, -2]) & (C <= [1, 2]))
    rng = np.random.default_rng(0)
    X = rng.uniform([0, -2], [1, 2], size=(100_000, 2))
    R = rng.uniform([0, -2], [1, 2], size=(50, 2))
    cv_cvt, cv_rand = _cv(C, X), _cv(R, X)
    print(f"CV k-means {cv_cvt:.3f}, random {cv_rand:.3f}")
    assert cv_cvt < 0.2 and cv_cvt < 0.5 * cv_rand


def test_index_of_lowest_index_on_ties():
    arch = cvt_archive(solution_dim=1, ranges=[(0, 1)], centroids=[[0.75], [0.25], [0.75]])
    i = arch.index_of(jnp.asarray([[0.5], [0.9], [0.1]]))
    assert i.tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: cvt_archive(solution_dim=2, cells=0, ranges=[(0, 1)]), "cells"),
        (lambda: cvt_archive(solution_dim=2, cells=4, ranges=[(1, 0)]), "ranges"),
        (lambda: cvt_archive(solution_dim=2, cells=4, ranges=[0, 1]), "ranges"),
        (lambda: cvt_archive(solution_dim=2, cells=40, ranges=[(0, 1)], samples=10), "samples"),
        (
            lambda: cvt_archive(solution_dim=2, cells=4, ranges=[(0, 1)], threshold_min=0.0),
            "learning_rate",
        ),
        (
            lambda: cvt_archive(
                solution_dim=2, cells=4, ranges=[(0, 1)], learning_rate=2.0, threshold_min=0.0
            ),
            r"\[0, 1\]",
        ),
    ],
)
def test_cvt_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cvt_add_checks_measure_length():
    arch = cvt_archive(solution_dim=2, cells=4, ranges=[(0, 1), (0, 1)], samples=100)
    with pytest.raises(ValueError, match="measures"):
        arch.add(arch.init(), jnp.zeros((3, 2)), jnp.zeros(3), jnp.zeros((3, 3)))


def test_cma_mae_runs_on_cvt_archive():
    arch = cvt_archive(solution_dim=6, cells=50, ranges=[(-15.36, 15.36)] * 2, samples=5000)
    mae = cma_mae(solution_dim=6, archive=arch, n_emitters=2, batch_size=8)
    state = mae.init(jnp.zeros(6), jax.random.key(0))
    state, stats = jax.jit(lambda s: mae.run(sphere_linear_projection, s, 50))(state)
    cov = np.asarray(stats.coverage)
    assert cov[-1] > cov[0] and cov[-1] > 0.1
