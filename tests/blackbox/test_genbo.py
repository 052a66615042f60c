"""GenBO: the losses' minimizers in closed form, robustness to flips, the loop against random search."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from jaxsolve.blackbox.genbo import (
    DiagonalGaussian,
    MeanFieldCategorical,
    UniformBox,
    balanced_forward_kl_loss,
    ei,
    forward_kl_loss,
    genbo,
    pi,
    preference_loss,
    quantile_threshold,
    random_pairs,
    robust_preference_loss,
    soft_ei,
)


def _minimize(f, x0):
    res = scipy.optimize.minimize(
        lambda t: float(f(jnp.asarray(t))),
        np.asarray(x0),
        jac=lambda t: np.asarray(jax.grad(f)(jnp.asarray(t))),
        method="BFGS",
        options={"gtol": 1e-12, "maxiter": 5000},
    )
    return res.x


def test_balanced_forward_kl_minimizer_is_prior_times_utility():
    K = 6
    p0 = jnp.asarray([0.1, 0.2, 0.3, 0.15, 0.15, 0.1])
    u = jnp.asarray([0.0, 1.0, 0.5, 2.0, 0.0, 0.25])
    x = jnp.arange(K)  # every state once, as if drawn from a uniform q_prev
    log_q_prev = jnp.full(K, -jnp.log(K))

    def loss(theta):
        log_q = jax.nn.log_softmax(theta)[x]
        return balanced_forward_kl_loss(log_q, u, log_q_prev, jnp.log(p0)[x])

    theta = _minimize(loss, np.zeros(K))
    q = np.asarray(jax.nn.softmax(jnp.asarray(theta)))
    target = np.asarray(p0 * u / jnp.sum(p0 * u))
    np.testing.assert_allclose(q, target, atol=1e-6)
    # the plain forward KL has the same minimizer here (its weights are exact)
    theta2 = _minimize(
        lambda t: forward_kl_loss(jax.nn.log_softmax(t)[x], u, jnp.log(p0)[x] - log_q_prev),
        np.zeros(K),
    )
    np.testing.assert_allclose(np.asarray(jax.nn.softmax(jnp.asarray(theta2))), target, atol=1e-6)


def test_preference_loss_recovers_the_bradley_terry_optimum():
    """Labels drawn as Bradley-Terry prescribes, P(a beats b) = sigmoid(u_a - u_b), given in
    their exact proportions (1000 comparisons per pair): the minimizer has
    eta (r_a - r_b) = u_a - u_b."""
    u = np.asarray([0.0, 0.7, -0.4, 1.5])
    eta, N = 2.0, 1000
    i, j, lab = [], [], []
    for a in range(4):
        for b in range(a + 1, 4):
            wins = int(round(N / (1 + np.exp(-(u[a] - u[b])))))
            i += [a] * N
            j += [b] * N
            lab += [1] * wins + [-1] * (N - wins)
    pairs = (jnp.asarray(i), jnp.asarray(j))
    labels = jnp.asarray(lab, jnp.float64)

    def loss(r4):
        return preference_loss(r4, jnp.zeros(4), eta, pairs=pairs, labels=labels)

    r = _minimize(loss, np.zeros(4))
    np.testing.assert_allclose(eta * (r - r.mean()), u - u.mean(), atol=5e-3)


def test_robust_preference_loss_is_unbiased_under_flips():
    n, flip = 40, 0.2
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    r, u = jax.random.normal(k1, (n,)), jax.random.normal(k2, (n,))
    i, j = random_pairs(k3, n, 4)
    true = jnp.sign(u[i] - u[j])
    clean = float(preference_loss(r, u, 1.0, pairs=(i, j)))

    def flipped(key):
        return jnp.where(jax.random.bernoulli(key, flip, i.shape), -true, true)

    keys = jax.random.split(jax.random.key(2), 4000)
    robust = jax.vmap(
        lambda k: robust_preference_loss(r, u, 1.0, flip, pairs=(i, j), labels=flipped(k))
    )(keys)
    naive = jax.vmap(lambda k: preference_loss(r, u, 1.0, pairs=(i, j), labels=flipped(k)))(keys)
    se = float(jnp.std(robust)) / np.sqrt(len(keys))
    assert abs(float(robust.mean()) - clean) < 3 * se
    assert abs(float(naive.mean()) - clean) > 10 * se  # uncorrected, the noisy loss is biased


def test_utilities_and_threshold():
    y = jnp.asarray([1.0, 2.0, 3.0, 4.0, jnp.nan])
    m = jnp.asarray([True, True, True, True, False])
    assert float(quantile_threshold(y, 0.5, m)) == 2.0
    np.testing.assert_allclose(np.asarray(ei(y[:4], 2.5)), [0, 0, 0.5, 1.5])
    np.testing.assert_allclose(np.asarray(pi(y[:4], 2.5)), [0, 0, 1, 1])
    assert np.all(np.asarray(soft_ei(y[:4], 10.0)) > 0)
    with pytest.raises(ValueError, match="utility"):
        genbo(
            UniformBox(jnp.zeros(2), jnp.ones(2)),
            utility="ucb",
            batch_size=4,
            rounds=2,
            n_initial=4,
        )
    with pytest.raises(ValueError, match="non-negative"):
        genbo(
            UniformBox(jnp.zeros(2), jnp.ones(2)),
            utility="value",
            loss="forward_kl",
            batch_size=4,
            rounds=2,
            n_initial=4,
        )


def _ackley(X):
    return -(
        -20 * jnp.exp(-0.2 * jnp.sqrt(jnp.mean(X**2, 1)))
        - jnp.exp(jnp.mean(jnp.cos(2 * jnp.pi * X), 1))
        + 20
        + jnp.e
    )


@pytest.mark.slow  # a 10-round BO loop for 3 seeds plus a single run (15 s)
def test_genbo_beats_random_search_and_vmaps_over_seeds():
    d, B, T = 10, 50, 10
    lo, hi = jnp.full(d, -5.0), jnp.full(d, 10.0)
    prior = UniformBox(lo, hi)
    g = genbo(
        prior, utility="ei", loss="preference", batch_size=B, rounds=T, n_initial=B, fit_steps=60
    )
    model = DiagonalGaussian((lo + hi) / 2, jnp.log((hi - lo) / 4), lo, hi)

    def run(key):
        k0, k1 = jax.random.split(key)
        X0 = prior.sample(k0, B)
        y0 = _ackley(X0).at[0].set(jnp.nan)  # a failed evaluation is kept out of the fit
        return g.run(_ackley, g.init(model, X0, y0, k1), T)[1]

    keys = jax.random.split(jax.random.key(0), 3)
    best = np.asarray(jax.jit(jax.vmap(run))(keys))
    for s in range(3):
        rnd = float(_ackley(prior.sample(jax.random.key(50 + s), B * (T + 1))).max())
        assert best[s, -1] > rnd + 2.0, (best[s, -1], rnd)  # Ackley values: higher is better
    one = np.asarray(jax.jit(run)(keys[1]))
    np.testing.assert_allclose(one, best[1], rtol=1e-9)


def test_categorical_model_on_sequences():
    m = MeanFieldCategorical(jnp.zeros((5, 3)))
    x = m.sample(jax.random.key(0), 7)
    assert x.shape == (7, 5) and x.dtype in (jnp.int32, jnp.int64)
    np.testing.assert_allclose(np.asarray(m.log_prob(x)), 5 * np.log(1 / 3), rtol=1e-12)


def _rastrigin(X):
    return -(10 * X.shape[1] + jnp.sum(X**2 - 10 * jnp.cos(2 * jnp.pi * X), 1))


def test_16_seeds_x_2_problems_in_one_compiled_loop_equal_single_runs():
    """Issue 31: one compiled ``vmap`` over problems (Ackley, Rastrigin; the problem is an
    index, so one program holds both) of a ``vmap`` over 16 seeds of the whole GenBO loop
    equals the 32 runs made one at a time."""
    d, B, T = 3, 8, 3
    lo, hi = jnp.full(d, -5.0), jnp.full(d, 10.0)
    prior = UniformBox(lo, hi)
    g = genbo(
        prior, utility="ei", loss="preference", batch_size=B, rounds=T, n_initial=B, fit_steps=10
    )
    model = DiagonalGaussian((lo + hi) / 2, jnp.log((hi - lo) / 4), lo, hi)

    def run(problem, key):
        def f(X):
            return jax.lax.switch(problem, (_ackley, _rastrigin), X)

        k0, k1 = jax.random.split(key)
        X0 = prior.sample(k0, B)
        return g.run(f, g.init(model, X0, f(X0), k1), T)[1]

    keys = jax.random.split(jax.random.key(3), 16)
    batched = jax.jit(jax.vmap(lambda p: jax.vmap(lambda k: run(p, k))(keys)))(jnp.arange(2))
    batched = np.asarray(batched)
    assert batched.shape == (2, 16, T)
    single = jax.jit(run)
    for p in range(2):
        for s in range(16):
            np.testing.assert_allclose(np.asarray(single(p, keys[s])), batched[p, s], rtol=1e-9)
    assert np.all(np.diff(batched, axis=2) >= 0)  # best-so-far never falls
    assert not np.any(batched[0] == batched[1])  # the same seeds, two different problems
