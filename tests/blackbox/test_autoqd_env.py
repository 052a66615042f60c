"""AutoQD on the point-mass environment: the env, the masked descriptor fit, the driver."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.blackbox.archives import grid_archive
from jaxsolve.blackbox.autoqd import fit_descriptors
from jaxsolve.blackbox.autoqd_driver import AutoQDResult, autoqd
from jaxsolve.blackbox.envs import PointMass, linear_policy, mlp_policy

ENV = PointMass()
POL = linear_policy(ENV.obs_dim, ENV.act_dim)


def _rollouts(params, seed=0):
    keys = jax.random.split(jax.random.key(seed), params.shape[0])
    return jax.jit(jax.vmap(lambda p, k: ENV.rollout(POL, p, k)))(params, keys)


def test_rollout_jits_and_vmaps_and_walls_hold():
    params = 3.0 * jax.random.normal(jax.random.key(1), (64, POL.n_params))
    ro = _rollouts(params)
    T = ENV.horizon
    assert ro.states.shape == (64, T, 4) and ro.actions.shape == (64, T, 2)
    assert ro.state_actions.shape == (64, T, 6)
    pos = np.asarray(ro.states[..., :2])
    assert np.all(np.abs(pos) <= 1.0) and np.all(np.abs(np.asarray(ro.descriptors)) <= 1.0)
    # large random policies do push into the walls
    assert np.any(np.abs(np.asarray(ro.descriptors)) == 1.0)
    ret = np.asarray(ro.ret)
    assert np.all((ret >= 0) & (ret <= 1))
    # one unbatched rollout equals the vmapped one
    one = ENV.rollout(POL, params[3], jax.random.split(jax.random.key(0), 64)[3])
    np.testing.assert_allclose(one.ret, ro.ret[3], rtol=1e-6)


def test_mlp_policy_and_nan_params_give_nan_not_error():
    mlp = mlp_policy(ENV.obs_dim, ENV.act_dim, 4)
    ro = ENV.rollout(mlp, jnp.full(mlp.n_params, jnp.nan), jax.random.key(0))
    assert np.isnan(float(ro.ret)) and np.all(np.isnan(np.asarray(ro.descriptors)))
    ok = ENV.rollout(mlp, jnp.zeros(mlp.n_params), jax.random.key(0))
    assert float(ok.ret) == pytest.approx(1.0)  # zero action: no control cost
    with pytest.raises(ValueError, match="hidden"):
        mlp_policy(5, 2, 0)


def test_fit_descriptors_mask_equals_fit_on_subset():
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        P = jnp.asarray(rng.normal(size=(40, 7)))
        f = jnp.asarray(rng.normal(size=40))
        mask = jnp.asarray(rng.random(40) < 0.6)
        sub = fit_descriptors(P[mask], f[mask], 3)
        masked = jax.jit(lambda P, f, m: fit_descriptors(P, f, 3, mask=m))(P, f, mask)
        # eigenvectors carry a sign: compare the maps on the subset up to the axes' signs
        a, b = np.asarray(sub(P[mask])), np.asarray(masked(P[mask]))
        sign = np.sign(np.sum(a * b, axis=0))
        np.testing.assert_allclose(a, b * sign, atol=1e-10)
        # garbage outside the mask changes nothing
        P2 = P.at[~mask].set(1e6)
        again = fit_descriptors(P2, f.at[~mask].set(jnp.nan), 3, mask=mask)
        np.testing.assert_allclose(np.asarray(again(P[mask])), b, atol=1e-10)
        with pytest.raises(ValueError, match="mask"):
            fit_descriptors(P, f, 3, mask=mask[:5])


def _reference():
    return grid_archive(solution_dim=POL.n_params, dims=(20, 20), ranges=ENV.descriptor_ranges)


def test_autoqd_coverage_grows_and_beats_random_policies():
    ref = _reference()
    it, E, B, R = 30, 4, 16, 2
    out = autoqd(
        ENV,
        POL,
        key=jax.random.key(0),
        iterations=it,
        n_emitters=E,
        batch_size=B,
        n_rollouts=R,
        refit_every=10,
        reference=ref,
    )
    assert isinstance(out, AutoQDResult)
    h = out.history
    cov = np.asarray(h.reference_coverage)
    assert cov.shape == (it,) and np.all(np.diff(cov) >= 0)  # every policy is kept
    assert cov[-1] > 2 * cov[0]
    assert np.asarray(h.refit).sum() == it // 10
    assert int(h.evaluations[-1]) == it * E * B
    # the twins hold the same elites as the archives they shadow
    st = out.state
    np.testing.assert_array_equal(st.result_embeddings.occupied, st.mae.result.occupied)
    np.testing.assert_array_equal(st.embeddings.occupied, st.mae.archive.occupied)
    assert np.all(np.abs(np.asarray(out.archive.measures)[np.asarray(out.archive.occupied)]) <= 1)
    # random policies, as many, from the same start distribution N(x0, sigma0^2 I)
    n = it * E * B
    X = 0.5 * jax.random.normal(jax.random.key(7), (n, POL.n_params))
    keys = jax.random.split(jax.random.key(8), (n, R))
    ro = jax.jit(jax.vmap(lambda p, ks: jax.vmap(lambda k: ENV.rollout(POL, p, k))(ks)))(X, keys)
    rnd, _ = ref.add(ref.init(jnp.float32), X, ro.ret.mean(1), ro.descriptors.mean(1))
    rnd_cov = float(ref.stats(rnd).coverage)
    assert cov[-1] > rnd_cov + 0.05, (cov[-1], rnd_cov)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(iterations=0), "iterations"),
        (dict(refit_every=1.5), "refit_every"),
        (dict(n_rollouts=-1), "n_rollouts"),
        (dict(gamma=1.0), "gamma"),
        (dict(bandwidth=0.0), "bandwidth"),
        (dict(sigma0=float("nan")), "sigma0"),
        (dict(k=3, n_features=2), "k"),
        (dict(k=2, dims=(5, 5, 5)), "dims"),
        (dict(x0=jnp.zeros(3)), "x0"),
        (dict(n_emitters=0), "n_emitters"),
        (dict(learning_rate=2.0), "learning_rate"),
        (
            dict(reference=grid_archive(solution_dim=3, dims=(4, 4), ranges=[(-1, 1)] * 2)),
            "reference",
        ),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        autoqd(ENV, POL, key=jax.random.key(0), **kwargs)


def test_bad_env_policy_key():
    with pytest.raises(TypeError, match="env"):
        autoqd(object(), POL, key=jax.random.key(0))
    with pytest.raises(TypeError, match="policy"):
        autoqd(ENV, 3, key=jax.random.key(0))
    with pytest.raises(TypeError, match="key"):
        autoqd(ENV, POL, key=0)
