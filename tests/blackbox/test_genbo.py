"""GenBO: the losses' minimizers in closed form, robustness to flips, the loop against random search."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize

from jaxsolve.blackbox.genbo import (
    DiagonalGaussian,
    MeanFieldCategorical,
    UniformBox,
    balanced_forward_kl_loss,
    distinct_pair_fraction,
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


def _buffer_state(loss, minibatch, utility="ei", quantile=0.5):
    """A GenBO state on a 2-d box whose full buffer of 32 rows holds 29 observations and 3
    NaN rows, with ties in the utilities (EI is 0 below the threshold) and random
    proposal densities."""
    d, B, T = 2, 8, 3
    lo, hi = jnp.full(d, -5.0), jnp.full(d, 10.0)
    prior = UniformBox(lo, hi)
    g = genbo(
        prior,
        utility=utility,
        loss=loss,
        batch_size=B,
        rounds=T,
        n_initial=B,
        fit_steps=5,
        quantile=quantile,
        minibatch=minibatch,
    )
    model = DiagonalGaussian(jnp.asarray([1.0, -2.0]), jnp.asarray([0.5, 1.2]), lo, hi)
    X = prior.sample(jax.random.key(4), g.capacity)
    y = _ackley(X).at[jnp.asarray([3, 17, 31])].set(jnp.nan)
    st = g.init(model, X[:B], y[:B], jax.random.key(5))
    st = g.tell(st, X[B : 2 * B], y[B : 2 * B])
    st = g.tell(st, X[2 * B : 3 * B], y[2 * B : 3 * B])
    st = g.tell(st, X[3 * B :], y[3 * B :])
    lq_prev = jax.random.normal(jax.random.key(6), (g.capacity,)) - 6.0
    return g, st._replace(log_q_prev=lq_prev)


def test_distinct_pair_fraction_counts_ordered_pairs():
    u = jnp.asarray([0.0, 0.0, 1.5, 0.0, 2.0, 1.5, 7.0, 0.0])
    m = jnp.asarray([True, True, True, False, True, True, True, False])
    uo = np.asarray(u)[np.asarray(m)]
    brute = np.mean(uo[:, None] != uo[None, :])  # 6 observed: (0,0,1.5,2,1.5,7) -> 1 - 10/36
    np.testing.assert_allclose(float(distinct_pair_fraction(u, m)), brute, rtol=1e-12)
    np.testing.assert_allclose(brute, 26 / 36, rtol=1e-12)
    assert float(distinct_pair_fraction(jnp.zeros(5))) == 0.0  # all tied: no pair counts


@pytest.mark.parametrize(
    "loss", ["preference", "robust_preference", "forward_kl", "balanced_forward_kl"]
)
def test_minibatch_gradient_is_unbiased(loss):
    """The fit's minibatch gradient (8 of 29 observed rows, with replacement) averaged over
    20000 keys equals the full-buffer gradient (all pairs, for the preference losses)
    within 4 Monte Carlo standard errors in every coordinate, and within 2% of its norm.
    A self-normalized minibatch preference loss is 11.7 standard errors off."""
    g, st = _buffer_state(loss, 8)
    mb_loss, _ = g.fit_loss(st, jax.random.key(0))
    model = st.model
    keys = jax.random.split(jax.random.key(9), 20000)
    grads = jax.jit(jax.vmap(lambda k: jax.grad(mb_loss)(model, k).mean))(keys)
    grads_s = jax.jit(jax.vmap(lambda k: jax.grad(mb_loss)(model, k).log_std))(keys)

    u = g.utilities(st)
    lp0 = g.prior.log_prob(st.X)
    m = st.observed
    assert int(jnp.sum(m)) == 29

    def full(mod):
        lq = mod.log_prob(st.X)
        if loss == "preference":
            return preference_loss(lq - lp0, u, g.eta, m)  # every pair
        if loss == "robust_preference":
            return robust_preference_loss(lq - lp0, u, g.eta, g.flip, m)
        if loss == "forward_kl":
            return forward_kl_loss(lq, u, lp0 - st.log_q_prev, m)
        return balanced_forward_kl_loss(lq, u, st.log_q_prev, lp0, m)

    ref = jax.grad(full)(model)
    for est, r in ((grads, ref.mean), (grads_s, ref.log_std)):
        est, r = np.asarray(est), np.asarray(r)
        se = est.std(0) / np.sqrt(est.shape[0])
        assert np.all(np.abs(est.mean(0) - r) < 4 * se), (est.mean(0), r, se)
        assert np.linalg.norm(est.mean(0) - r) < 0.02 * np.linalg.norm(r)
    if loss == "preference":
        # dividing by the minibatch's own count of pairs instead of rho b(b-1)/2 is biased
        rows = jnp.nonzero(m, size=g.capacity)[0]

        def ratio(mod, k):
            i = rows[jax.random.randint(k, (8,), 0, 29)]
            return preference_loss(mod.log_prob(st.X[i]) - lp0[i], u[i], g.eta, m[i])

        est = np.asarray(jax.jit(jax.vmap(lambda k: jax.grad(ratio)(model, k).mean))(keys))
        se = est.std(0) / np.sqrt(est.shape[0])
        assert np.max(np.abs(est.mean(0) - np.asarray(ref.mean)) / se) > 8


@pytest.mark.parametrize("loss", ["preference", "balanced_forward_kl"])
def test_full_buffer_option_reproduces_the_full_batch_fit(loss):
    """``minibatch=None`` is the fit on the whole buffer, bit for bit: Adam on the loss of
    every observation (8 random partners per row, drawn from the state's key, for the
    preference loss), written out here; the default fits minibatches of 256."""
    box = UniformBox(jnp.zeros(1), jnp.ones(1))
    assert genbo(box, batch_size=1, rounds=1, n_initial=1).minibatch == 256
    with pytest.raises(ValueError, match="minibatch"):
        genbo(box, batch_size=1, rounds=1, n_initial=1, minibatch=1)
    g, st = _buffer_state(loss, None)
    fitted = jax.jit(lambda s: g.fit(s))(st)
    key, sub = jax.random.split(st.key)
    pairs = random_pairs(sub, g.capacity)
    u = g.utilities(st)
    lp0 = g.prior.log_prob(st.X)
    params, static = eqx.partition(st.model, eqx.is_inexact_array)

    def full(p):
        lq = eqx.combine(p, static).log_prob(st.X)
        if loss == "preference":
            return preference_loss(lq - lp0, u, g.eta, st.observed, pairs)
        return balanced_forward_kl_loss(lq, u, st.log_q_prev, lp0, st.observed)

    opt = optax.adam(g.learning_rate)
    s = st.opt_state
    for _ in range(g.fit_steps):
        upd, s = opt.update(jax.grad(full)(params), s, params)
        params = optax.apply_updates(params, upd)
    got = eqx.partition(fitted.model, eqx.is_inexact_array)[0]
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(got), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
    assert jnp.array_equal(jax.random.key_data(fitted.key), jax.random.key_data(key))
    # the default minibatch fit moves the model too, from other keys
    g_mb, _ = _buffer_state(loss, 256)
    moved = jax.jit(lambda s: g_mb.fit(s))(st).model.mean
    assert not np.allclose(np.asarray(moved), np.asarray(st.model.mean))


def test_markov_log_prob_table_path_equals_the_row_path():
    """`MarkovCategorical.log_prob` normalizes the whole conditional table once when it
    scores at least ``n_states`` sequences: values and gradients equal those of the
    row-by-row path (sequences scored one at a time) to 1e-12."""
    from jaxsolve.blackbox.genbo import MarkovCategorical

    L, S, n = 12, 7, 20
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    m = MarkovCategorical(jax.random.normal(k1, (L, S)), jax.random.normal(k2, (S, S)))
    x = jax.random.randint(k3, (n, L), 0, S)

    def table(m):
        return m.log_prob(x)  # n = 20 >= 7 states: the table path

    def rows(m):
        return jnp.concatenate([m.log_prob(x[i : i + 1]) for i in range(n)])  # n = 1 < 7

    np.testing.assert_allclose(np.asarray(table(m)), np.asarray(rows(m)), rtol=1e-12)
    w = jnp.linspace(-1.0, 2.0, n)
    ga = jax.grad(lambda m: jnp.sum(w * table(m)))(m)
    gb = jax.grad(lambda m: jnp.sum(w * rows(m)))(m)
    np.testing.assert_allclose(np.asarray(ga.unary), np.asarray(gb.unary), atol=1e-12)
    np.testing.assert_allclose(np.asarray(ga.pair), np.asarray(gb.pair), atol=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_equal_utilities_give_a_zero_loss_and_finite_fit(dtype):
    """A constant objective: every utility is equal, no pair is distinct (rho = 0), so
    the preference loss is 0 and the fitted model must stay finite (no 0/0 reaching the
    gradient through a where), in float32 (x64 off) as in float64."""
    # float32 as a float32 user runs it: x64 off, so rho itself is float32
    with jax.enable_x64(dtype == jnp.float64):
        d, B = 3, 8
        lo, hi = jnp.zeros(d, dtype), jnp.ones(d, dtype)
        prior = UniformBox(lo, hi)
        g = genbo(
            prior, utility="ei", loss="preference", batch_size=B, rounds=2, n_initial=B, fit_steps=5
        )
        model = DiagonalGaussian(jnp.full(d, 0.5, dtype), jnp.full(d, -1.0, dtype), lo, hi)
        X0 = prior.sample(jax.random.key(0), B)
        flat = lambda X: jnp.zeros(X.shape[0], dtype)
        state, best = jax.jit(lambda s: g.run(flat, s, 2))(
            g.init(model, X0, flat(X0), jax.random.key(1))
        )
        leaves = [x for x in jax.tree.leaves(state.model) if jnp.issubdtype(x.dtype, jnp.floating)]
        assert all(bool(jnp.all(jnp.isfinite(x))) for x in leaves)
        np.testing.assert_array_equal(np.asarray(state.model.mean), np.asarray(model.mean))


def test_starts_and_search_box_outside_the_prior_are_refused():
    prior = UniformBox(jnp.zeros(2), jnp.ones(2))
    g = genbo(prior, utility="ei", loss="preference", batch_size=4, rounds=1, n_initial=4)
    inside = DiagonalGaussian(jnp.full(2, 0.5), jnp.zeros(2), jnp.zeros(2), jnp.ones(2))
    X0 = prior.sample(jax.random.key(0), 4)
    y0 = -jnp.sum(X0**2, 1)
    g.init(inside, X0, y0, jax.random.key(1))  # fine
    with pytest.raises(ValueError, match=r"X0 has 1 point\(s\) outside the prior's support"):
        g.init(inside, X0.at[2].set(jnp.asarray([0.5, 1.5])), y0, jax.random.key(1))
    wide = DiagonalGaussian(jnp.full(2, 0.5), jnp.zeros(2), jnp.full(2, -1.0), jnp.ones(2))
    with pytest.raises(ValueError, match="search box"):
        g.init(wide, X0, y0, jax.random.key(1))
