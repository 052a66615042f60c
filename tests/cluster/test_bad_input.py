"""Bad input to ``kmeans`` (issue 23): errors name the argument; empty clusters, k = n and
small n give real answers (an empty cluster got the invented centre 0 with SUCCESS, k = n
raised an error about ``rank``, an argument the user never passed)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve.cluster import kmeans, ratio_cut
from peers.problems.cluster import mixture

_KEY = jax.random.key(0)
_X = np.random.default_rng(0).normal(size=(12, 2))

ERRORS = [
    ("key int", lambda: kmeans(_X, 2, key=3), TypeError, "key"),
    ("key float array", lambda: kmeans(_X, 2, key=jnp.ones(2)), TypeError, "key"),
    ("bfloat16", lambda: kmeans(jnp.asarray(_X, jnp.bfloat16), 2, key=_KEY), TypeError, "X"),
    (
        "float16",
        lambda: kmeans(jnp.asarray(_X, jnp.float16), 2, key=_KEY),
        TypeError,
        r"^X has dtype float16: .*; pass X.astype",
    ),
    ("int X", lambda: kmeans(_X.astype(np.int32), 2, key=_KEY), TypeError, "X"),
    ("nan X", lambda: kmeans(np.where(_X > 1, np.nan, _X), 2, key=_KEY), ValueError, "X"),
    ("inf X", lambda: kmeans(np.where(_X > 1, np.inf, _X), 2, key=_KEY), ValueError, "X"),
    ("empty X", lambda: kmeans(np.zeros((0, 2)), 2, key=_KEY), ValueError, "X"),
    ("1-D X", lambda: kmeans(_X[:, 0], 2, key=_KEY), ValueError, "X"),
    ("k = 0", lambda: kmeans(_X, 0, key=_KEY), ValueError, "n_clusters"),
    ("k > n", lambda: kmeans(_X, 13, key=_KEY), ValueError, "n_clusters"),
    ("k float", lambda: kmeans(_X, 2.0, key=_KEY), TypeError, "n_clusters"),
    ("n_init 0", lambda: kmeans(_X, 2, key=_KEY, n_init=0), ValueError, "n_init"),
    ("complex X", lambda: kmeans(_X.astype(complex), 2, key=_KEY), TypeError, "X must be real"),
    ("max_steps 0", lambda: kmeans(_X, 2, key=_KEY, max_steps=0), ValueError, "max_steps"),
    (
        "ratio_cut float16 W",
        lambda: ratio_cut(np.ones((6, 6), np.float16), 2),
        TypeError,
        "W has dtype float16",
    ),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_all_equal_points_no_invented_centre():
    """kmeans(ones((24, 2)), 2): every centre is a data point (the mean of a nonempty
    cluster), inertia 0."""
    km = kmeans(jnp.ones((24, 2)), 2, key=_KEY)
    labels, centers = km.state.labels, km.x
    np.testing.assert_array_equal(np.asarray(centers), np.ones((2, 2)))
    assert sorted(np.bincount(np.asarray(labels), minlength=2) > 0) == [True, True]


def test_k_equals_n_every_point_its_own_cluster():
    km = kmeans(_X[:5], 5, key=_KEY)
    labels, centers, sol = km.state.labels, km.x, km
    assert sorted(np.asarray(labels).tolist()) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(np.asarray(centers)[np.asarray(labels)], _X[:5])
    assert int(sol.status) == Status.SUCCESS


@pytest.mark.slow  # enumerates every partition of small problems (11 s)
def test_small_n_no_rank_error_and_optimal_partition():
    """n = 4, k = 3: the default rank (k + 1 = 4 = n) is valid; the answer is the exact
    optimum (by enumeration of all partitions into 3 nonempty clusters)."""
    import itertools

    x = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [9.0, 0.0]])
    km = kmeans(x, 3, key=_KEY)
    labels, centers = km.state.labels, km.x
    got = np.sum((x - np.asarray(centers)[np.asarray(labels)]) ** 2)
    best = np.inf
    for lab in itertools.product(range(3), repeat=4):
        lab = np.array(lab)
        if len(set(lab)) < 3:
            continue
        c = np.stack([x[lab == j].mean(0) for j in range(3)])
        best = min(best, np.sum((x - c[lab]) ** 2))
    assert abs(got - best) <= 1e-12


@pytest.mark.slow
def test_restarts_never_worse_than_one_run():
    x, _ = mixture(3, n=90, d=3, k=3, gap=2.0)
    km = kmeans(x, 3, key=_KEY)
    l1, c1 = km.state.labels, km.x
    km = kmeans(x, 3, key=_KEY, n_init=2)
    lab, c4 = km.state.labels, km.x
    f1 = np.sum((x - np.asarray(c1)[np.asarray(l1)]) ** 2)
    f4 = np.sum((x - np.asarray(c4)[np.asarray(lab)]) ** 2)
    assert f4 <= f1 + 1e-9
