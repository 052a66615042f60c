"""CMA-ES against pycma, the grid archive against pyribs (solution by solution), CMA-MAE."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.blackbox import cma_es, cma_es_solver, cma_mae, grid_archive, sphere_linear_projection

ribs = pytest.importorskip("ribs")


@pytest.mark.parametrize(
    "learning_rate, threshold_min",
    [
        (0.01, 0.0),
        pytest.param(None, -np.inf, marks=pytest.mark.slow),  # plain MAP-Elites, 7 s
        pytest.param(0.5, -3.0, marks=pytest.mark.slow),
        pytest.param(0.0, 0.0, marks=pytest.mark.slow),
    ],
)
def test_grid_archive_add_matches_pyribs(learning_rate, threshold_min):
    from ribs.archives import GridArchive

    rng = np.random.default_rng(0)
    kw = dict(solution_dim=3, dims=(4, 5), ranges=[(-1, 1), (0, 2)], threshold_min=threshold_min)
    if learning_rate is not None:
        kw["learning_rate"] = learning_rate
    ref, ours = GridArchive(**kw), grid_archive(**kw)
    state = ours.init()
    add = jax.jit(lambda s, *a: ours.add(s, *a))
    for t in range(150):
        B = int(rng.integers(1, 12))
        sol, obj = rng.normal(size=(B, 3)), 2 * rng.normal(size=B)
        meas = rng.uniform(-1.3, 2.3, size=(B, 2))  # some outside the ranges: clipped
        if t % 3 == 0:
            meas[: B // 2] = meas[0]  # several insertions into one cell in a batch
        r = ref.add(sol, obj, meas)
        state, info = add(state, sol, obj, meas)
        np.testing.assert_array_equal(np.asarray(info.status), r["status"])
        np.testing.assert_allclose(np.asarray(info.value), r["value"], rtol=1e-12, atol=1e-12)
    d = ref.data()
    idx = np.sort(d["index"])
    order = np.argsort(d["index"])
    assert set(np.flatnonzero(np.asarray(state.occupied))) == set(idx.tolist())
    for name in ("objective", "threshold", "solution", "measures"):
        np.testing.assert_allclose(
            np.asarray(getattr(state, name))[idx], d[name][order], rtol=1e-12
        )
    s = ours.stats(state)
    np.testing.assert_allclose(float(s.qd_score), ref.stats.qd_score, rtol=1e-12)
    np.testing.assert_allclose(float(s.coverage), ref.stats.coverage)


def test_archive_checks_and_nan_objectives():
    with pytest.raises(ValueError, match="learning_rate"):
        grid_archive(solution_dim=2, dims=(3,), ranges=[(0, 1)], threshold_min=0.0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        grid_archive(
            solution_dim=2, dims=(3,), ranges=[(0, 1)], learning_rate=1.5, threshold_min=0.0
        )
    with pytest.raises(ValueError, match="ranges"):
        grid_archive(solution_dim=2, dims=(3, 3), ranges=[(0, 1)])
    a = grid_archive(
        solution_dim=1, dims=(3,), ranges=[(0, 1)], learning_rate=0.1, threshold_min=0.0
    )
    s, info = a.add(
        a.init(),
        jnp.zeros((3, 1)),
        jnp.asarray([jnp.nan, 1.0, 2.0]),
        jnp.asarray([[0.1], [jnp.nan], [0.5]]),
    )
    assert info.status.tolist() == [0, 0, 2] and int(a.stats(s).num_elites) == 1


def _pycma_evals(fun, x0, sigma0, target, seed, budget):
    import cma

    es = cma.CMAEvolutionStrategy(
        np.array(x0, copy=True),  # pycma updates its start vector in place
        sigma0,
        {"seed": seed, "verbose": -9, "maxfevals": budget, "tolfun": 0, "tolx": 0, "tolfunhist": 0},
    )
    while not es.stop() and es.result.fbest > target:
        X = es.ask()
        es.tell(X, [fun(np.asarray(x)) for x in X])
    return es.countevals if es.result.fbest <= target else np.inf


@pytest.mark.parametrize(
    ("name", "factor"),
    [
        ("sphere", "eigh"),
        ("sphere", "cholesky"),
        pytest.param("rosenbrock", "eigh", marks=pytest.mark.slow),  # 8 s: test-slow
        pytest.param("rosenbrock", "cholesky", marks=pytest.mark.slow),
    ],
)
def test_cma_es_matches_pycma_evaluations_to_a_target(name, factor):
    """Evaluations to reach f <= 1e-8, medians over 5 seeds: within 1.5x of pycma's
    (pycma has active covariance updates, which jaxsolve's plain CMA-ES lacks)."""
    n, target = 10, 1e-8
    fun = {
        "sphere": lambda x: float(np.sum(x**2)),
        "rosenbrock": lambda x: float(np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)),
    }[name]
    jfun = {
        "sphere": lambda x, a: jnp.sum(x**2),
        "rosenbrock": lambda x, a: jnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2),
    }[name]
    x0 = np.full(n, 1.5) if name == "sphere" else np.zeros(n)
    ours, theirs = [], []
    for seed in range(5):
        s = cma_es_solver(jfun, n, seed=seed, sigma0=0.5, factor=factor)
        sol = jaxsolve.solve(s, jnp.asarray(x0), None, tol=0.0, max_steps=1500, history=True)
        best = np.asarray(sol.info["best"])
        hit = np.flatnonzero(best <= target)
        ours.append((hit[0] + 1) * s.es.popsize if hit.size else np.inf)
        theirs.append(_pycma_evals(fun, x0, 0.5, target, seed + 1, 15000))
    assert np.median(ours) <= 1.5 * np.median(theirs), (ours, theirs)


def test_cma_es_ask_tell_and_nan_fitness():
    es = cma_es(4, popsize=8, sigma0=0.3)
    st = es.init(jnp.ones(4))
    X = es.ask(st, jax.random.key(0))
    assert X.shape == (8, 4)
    f = jnp.sum(X**2, 1).at[0].set(jnp.nan)
    st2 = es.tell(st, X, f)
    # a NaN sample is ranked last: the update equals that with +inf in its place
    st3 = es.tell(st, X, f.at[0].set(jnp.inf))
    np.testing.assert_allclose(np.asarray(st2.mean), np.asarray(st3.mean))
    with pytest.raises(ValueError, match="sigma0"):
        cma_es(4, sigma0=-1.0)
    with pytest.raises(ValueError, match="popsize"):
        cma_es(4, popsize=1)


def test_cma_es_solver_leaves_a_nan_start():
    """fun(x0) = NaN is the worst value: the first finite sample replaces it as the best
    (it stayed at x0 and NaN for the whole run, since nothing compares below NaN)."""

    def fun(x, args):
        return jnp.where(jnp.all(x == 0), jnp.nan, jnp.sum((x - 1.0) ** 2))

    sol = jaxsolve.solve(cma_es_solver(fun, 3, sigma0=0.5), jnp.zeros(3), None, max_steps=200)
    assert np.isfinite(float(sol.state.f_x))
    np.testing.assert_allclose(float(sol.state.f_x), float(fun(sol.x, None)))
    assert float(sol.state.f_x) < 1e-3


def _ribs_sphere(n, iters, seed):
    from peers.pyribs import cma_mae_scheduler

    mb = n / 2 * 5.12
    sch, result = cma_mae_scheduler(
        n,
        (50, 50),
        [(-mb, mb)] * 2,
        batch_size=12,
        seed=seed,
        emitter_seeds=[100 * seed + i for i in range(4)],
    )
    for _ in range(iters):
        X = sch.ask()
        o, m = sphere_linear_projection(jnp.asarray(X))
        sch.tell(np.asarray(o), np.asarray(m))
    return result.stats.norm_qd_score, result.stats.coverage


@pytest.mark.slow  # 3 pyribs runs and 2 compiled CMA-MAE loops (20 s)
@pytest.mark.parametrize("factor", ["eigh", "cholesky"])
def test_cma_mae_tracks_pyribs_and_vmap_over_seeds_equals_the_loop(factor):
    n, iters = 20, 60
    mb = n / 2 * 5.12
    mae = cma_mae(
        solution_dim=n,
        dims=(50, 50),
        ranges=[(-mb, mb)] * 2,
        n_emitters=4,
        batch_size=12,
        factor=factor,
    )
    run = lambda key: mae.run(sphere_linear_projection, mae.init(jnp.zeros(n), key), iters)  # noqa: E731
    keys = jax.random.split(jax.random.key(0), 3)
    states, stats = jax.jit(jax.vmap(run))(keys)
    ours_qd = np.asarray(stats.norm_qd_score[:, -1])
    ours_cov = np.asarray(stats.coverage[:, -1])
    # lane 1 alone equals lane 1 of the batch
    s1, st1 = jax.jit(run)(keys[1])
    np.testing.assert_allclose(
        np.asarray(st1.norm_qd_score), np.asarray(stats.norm_qd_score[1]), rtol=1e-9
    )
    ref = np.asarray([_ribs_sphere(n, iters, seed) for seed in range(3)])
    # the same algorithm: mean normalized QD score and coverage within 15% of pyribs'
    assert abs(ours_qd.mean() / ref[:, 0].mean() - 1) < 0.15, (ours_qd, ref)
    assert abs(ours_cov.mean() / ref[:, 1].mean() - 1) < 0.15, (ours_cov, ref)
    # and the annealing archive matters: CMA-ES (learning rate 0) covers less
    es_only = cma_mae(
        solution_dim=n,
        dims=(50, 50),
        ranges=[(-mb, mb)] * 2,
        n_emitters=4,
        batch_size=12,
        learning_rate=0.0,
    )
    _, st0 = jax.jit(
        lambda k: es_only.run(sphere_linear_projection, es_only.init(jnp.zeros(n), k), iters)
    )(keys[0])
    assert float(st0.coverage[-1]) < ours_cov.mean()


@pytest.mark.parametrize("separable", [False, True])
def test_cholesky_factor_is_a_square_root_and_whitens(separable):
    """factor="cholesky" keeps C = L L^T (refreshed every generation), samples N(m, sigma^2 C)
    from it, and whitens the path with L^-1: ||L^-1 y|| = ||C^-1/2 y|| for every y, so the
    step-size control sees the same lengths as with the eigendecomposition."""
    n = 6
    es_e = cma_es(n, popsize=10, separable=separable, eigen_every=1)
    es_c = cma_es(n, popsize=10, separable=separable, factor="cholesky")
    assert es_c.eigen_every == 1
    fun = lambda X: jnp.sum((X - 1.0) ** 2 * jnp.arange(1, n + 1), axis=1)  # noqa: E731
    se, sc = es_e.init(jnp.zeros(n)), es_c.init(jnp.zeros(n))
    key = jax.random.key(3)
    for _ in range(15):  # the same samples drive both (sep-CMA-ES ignores the factor)
        key, sub = jax.random.split(key)
        X = es_e.ask(se, sub)
        se, sc = es_e.tell(se, X, fun(X)), es_c.tell(sc, X, fun(X))
    if separable:
        np.testing.assert_allclose(np.asarray(sc.D), np.asarray(se.D), rtol=1e-12)
        return
    C, L = np.asarray(sc.C), np.asarray(sc.B)
    np.testing.assert_allclose(L @ L.T, C, rtol=1e-12, atol=1e-14)
    assert np.allclose(L, np.tril(L))
    y = np.random.default_rng(0).standard_normal(n)
    w, V = np.linalg.eigh(C)
    inv_sqrt = V @ np.diag(w**-0.5) @ V.T
    np.testing.assert_allclose(
        np.linalg.norm(np.linalg.solve(L, y)), np.linalg.norm(inv_sqrt @ y), rtol=1e-10
    )
    # samples are N(m, sigma^2 C): empirical covariance of many asks
    big = cma_es(n, popsize=20000, factor="cholesky")
    S = np.asarray(big.ask(sc._replace(mean=jnp.zeros(n), sigma=jnp.float64(1.0)), key))
    np.testing.assert_allclose(np.cov(S.T), C, atol=0.05 * np.abs(C).max())
    # scale and condition: pycma's tolx measure and a lower bound of cond(C)
    assert float(es_c.scale(sc)) == pytest.approx(float(sc.sigma) * np.sqrt(C.diagonal().max()))
    assert float(es_c.condition(sc)) <= np.linalg.cond(C) * (1 + 1e-9)


def test_standard_normal_threefry_and_ndtri_against_references():
    """The float64 sampler: Threefry-2x32 gives Random123's known answers, AS241's
    quantile matches scipy's ndtri to 1e-15 from p = 1e-300 to 1 - 1e-16, and 10^6 draws
    pass moment and Kolmogorov-Smirnov checks (float32 goes to jax.random.normal)."""
    from scipy import special, stats

    from jaxsolve.blackbox.cma_es import ndtri, standard_normal
    from jaxsolve.core.random import threefry2x32

    kat = [  # (key, counter) -> output, Random123's kat_vectors for threefry2x32_20
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]
    for k, c, want in kat:
        got = threefry2x32(*(jnp.asarray(v, jnp.uint32) for v in k + c))
        assert tuple(int(g) for g in got) == want
    p = np.concatenate(
        [np.linspace(0, 1, 20001)[1:-1], np.logspace(-300, -1, 500), 1 - np.logspace(-16, -1, 500)]
    )
    ref = special.ndtri(p)
    np.testing.assert_allclose(np.asarray(ndtri(jnp.asarray(p))), ref, rtol=2e-15, atol=1e-300)
    z = np.asarray(
        jax.jit(lambda k: standard_normal(k, (1000, 1000), jnp.float64))(jax.random.key(1))
    )
    z = z.ravel()
    assert abs(z.mean()) < 5e-3 and abs(z.var() - 1) < 5e-3
    assert abs(stats.skew(z)) < 1e-2 and abs(stats.kurtosis(z)) < 2e-2
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert standard_normal(jax.random.key(0), (3,), jnp.float32).dtype == jnp.float32


def test_cma_mae_refreshes_factors_on_the_lazy_gap():
    """cma_mae's default eigen_every is pycma's lazy gap for either factor (3 generations at
    n = 100, lambda = 36), and a lazy run keeps C = L L^T right after each refresh."""
    m = cma_mae(solution_dim=100, dims=(10, 10), ranges=[(-1, 1)] * 2)
    assert m.es.eigen_every == 3 and m.es.factor == "cholesky"
    assert (
        cma_mae(solution_dim=100, dims=(10, 10), ranges=[(-1, 1)] * 2, factor="eigh").es.eigen_every
        == 3
    )
    n = 8
    m = cma_mae(solution_dim=n, dims=(10, 10), ranges=[(-20, 20)] * 2, n_emitters=2, batch_size=6)
    g = m.es.eigen_every
    st, _ = m.run(sphere_linear_projection, m.init(jnp.zeros(n), jax.random.key(0)), 2 * g)
    C, L = np.asarray(st.emitters.C), np.asarray(st.emitters.B)
    fresh = np.asarray(st.restarts) == 0  # a restart since the refresh resets both to I
    np.testing.assert_allclose((L @ np.swapaxes(L, 1, 2))[fresh], C[fresh], rtol=1e-12, atol=1e-14)
