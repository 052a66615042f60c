"""Deep FlexQP: a constant policy is hand-tuned FlexQP, and unrolled training learns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.qp import flexqp, problems
from jaxsolve.qp.deep import DeepFlexQP, Policies, deep_flexqp
from jaxsolve.qp.train import reference_solutions, train_policy, unrolled_loss


@pytest.mark.parametrize("scaling", [0, 10])
def test_constant_policy_is_flexqp_iterate_for_iterate(scaling):
    """Unscaled: bit for bit in effect (1e-13); Ruiz-scaled (the scaled data are built
    from the factors carried in the state, FlexQP's once): to rounding."""
    with jax.enable_x64(True):
        qp = problems.random_qp(jax.random.key(0), 12, 18)
        hand = flexqp(
            scaling_iters=scaling,
            adaptive_rho=False,
            mu=1e6,
            mu_max=1e6,
            polish=False,
            check_every=5,
        )
        deep = deep_flexqp(Policies.fixed(rho=0.1, mu=1e6, alpha=1.6, scaling_iters=scaling))
        x0 = jnp.zeros(12)
        atol = 1e-13 if scaling == 0 else 1e-10
        for k in (1, 4):
            a = jaxsolve.solve(hand, x0, qp, max_steps=k, tol=0.0)
            b = jaxsolve.solve(deep, x0, qp, max_steps=5 * k, tol=0.0)
            np.testing.assert_allclose(np.asarray(b.x), np.asarray(a.x), rtol=0, atol=atol)
            np.testing.assert_allclose(np.asarray(b.state.y), np.asarray(a.state.y), atol=atol)
            np.testing.assert_allclose(float(b.error), float(a.error), rtol=1e-9)


@pytest.mark.slow  # reference solves plus the unrolled training compile: ~60 s on a loaded 2-core machine
def test_unrolled_training_lowers_the_loss_and_gradients_are_finite():
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(3), 12)
        qps = jax.tree.map(lambda *v: jnp.stack(v), *[problems.random_qp(k, 6, 9) for k in keys])
        xs, ys, status = reference_solutions(qps)
        assert np.all(np.asarray(status) == 0)
        pol = Policies.learned(jax.random.key(0))
        before = float(unrolled_loss(pol, qps, xs, ys, 10))
        res = train_policy(pol, qps, xs, ys, K=10, steps=12, batch_size=12, key=jax.random.key(1))
        assert np.all(np.isfinite(res.losses))
        after = float(unrolled_loss(res.policies, qps, xs, ys, 10))
        assert after < 0.97 * before, (before, after)
        # the trained policies know their horizon; run 4x past it, the parameters are
        # held and the fixed-point residual (sqrt(sigma) x, sqrt(rho) (z + y / rho)) never
        # grows (the KKT error
        # need not fall: on one of these 12 problems it goes from 3.0e-2 at 10 to 5.2e-2
        # at 40, fixed-parameter ADMM far from converged)
        assert res.policies.horizon == 10 and pol.horizon is None
        solver = DeepFlexQP(res.policies)
        step = jax.jit(jax.vmap(solver.step))
        state = jax.vmap(lambda qp: solver.init(jnp.zeros(6), qp))(qps)
        fpr, v_prev = [], None
        for k in range(40):
            state, _ = step(state, qps)
            # in the Ruiz-scaled units the iteration runs in: x / D, E z, c y / E
            D, E, c = (np.asarray(f) for f in state.scale)
            rho = np.asarray(state.rho)
            x_run, z_run, y_run, _ = (np.asarray(v) for v in state.run)  # not the best one
            v = np.concatenate(
                [
                    np.sqrt(solver.sigma) * x_run / D,
                    np.sqrt(rho) * (z_run * E + y_run * c[:, None] / E / rho),
                ],
                axis=1,
            )
            if k >= 10:
                fpr.append(np.linalg.norm(v - v_prev, axis=1))
            if k == 9:
                rho_h = np.asarray(state.rho)
            v_prev = v
        np.testing.assert_array_equal(np.asarray(state.rho), rho_h)
        fpr = np.asarray(fpr)
        assert np.all(fpr[1:] <= fpr[:-1] * (1 + 1e-9) + 1e-14), fpr
        # the trained solver is a protocol solver like any other
        sol = jaxsolve.solve(
            DeepFlexQP(res.policies), jnp.zeros(6), jax.tree.map(lambda v: v[0], qps)
        )
        assert np.isfinite(float(sol.error))


def test_bad_policies_are_named():
    with pytest.raises(TypeError, match="policies"):
        deep_flexqp(policies="lstm")


def test_bad_training_sets_are_named():
    """Targets for fewer problems than the batch trained silently toward clamped (other
    problems') targets; NaN targets (an infeasible QP's reference) made every loss NaN;
    batch_size=0 gave NaN losses; an int key, a single unbatched QP or K=0 failed with
    JAX's or the driver's errors. All are named before anything compiles."""
    from jaxsolve.qp.train import problem_set

    qps = problem_set("random", 4, 5, seed=0)
    xs, ys = jnp.zeros(qps.q.shape), jnp.zeros(qps.l.shape)
    pol = Policies.learned(jax.random.key(0))
    cases = [
        (dict(x_star=xs[:3]), ValueError, r"x_star must have shape \(4, 5\), got \(3, 5\)"),
        (dict(y_star=ys[:, :2]), ValueError, "y_star must have shape"),
        (dict(x_star=xs.at[2, 0].set(jnp.nan)), ValueError, r"x_star is not finite .* \[2\]"),
        (dict(batch_size=0), ValueError, "batch_size must be an int >= 1"),
        (dict(K=0), ValueError, "K must be an int >= 1"),
        (dict(key=0), TypeError, "key must be a jax.random key"),
        (dict(qps=jax.tree.map(lambda v: v[0], qps)), ValueError, "qps must be a batch of QPs"),
        (dict(policies="lstm"), TypeError, "policies must be"),
    ]
    for change, error, match in cases:
        kw = dict(policies=pol, qps=qps, x_star=xs, y_star=ys, K=3, steps=1) | change
        with pytest.raises(error, match=match):
            train_policy(
                kw.pop("policies"), kw.pop("qps"), kw.pop("x_star"), kw.pop("y_star"), **kw
            )
    with pytest.raises(ValueError, match="count must be an int >= 1"):
        problem_set("random", 0, 5, seed=0)
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        deep_flexqp(key=0)
    with pytest.raises(ValueError, match="sigma must be positive"):
        deep_flexqp(sigma=0.0)


@pytest.mark.parametrize("scaling", [0, 10])
def test_untrained_scalar_policy_is_the_constant_policy(scaling):
    """Policies.scalar starts at hand-tuned FlexQP's constants through the sigmoid and
    the log ranges: the same iterates as Policies.fixed to rounding."""
    with jax.enable_x64(True):
        qp = problems.random_qp(jax.random.key(0), 12, 18)
        x0 = jnp.zeros(12)
        a = jaxsolve.solve(
            deep_flexqp(Policies.fixed(scaling_iters=scaling)), x0, qp, max_steps=20, tol=0.0
        )
        b = jaxsolve.solve(
            deep_flexqp(Policies.scalar(3, scaling_iters=scaling)), x0, qp, max_steps=20, tol=0.0
        )
        np.testing.assert_allclose(np.asarray(b.x), np.asarray(a.x), rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(b.state.y), np.asarray(a.state.y), atol=1e-12)


def test_scalar_policy_follows_its_schedule_then_holds_the_last_value():
    """Iteration k uses logits[min(k, T - 1)]: sigmoid(-2), sigmoid(0), sigmoid(2) mapped
    log-linearly onto rho's range (1e-4, 1e4), then the last value held."""
    import equinox as eqx

    with jax.enable_x64(True):
        qp = problems.random_qp(jax.random.key(0), 12, 18)  # inequality rows only
        pol = Policies.scalar(3)
        pol = eqx.tree_at(
            lambda p: p.ineq.logits, pol, pol.ineq.logits.at[:, 0].set(jnp.array([-2.0, 0.0, 2.0]))
        )
        sol = jaxsolve.solve(
            deep_flexqp(pol), jnp.zeros(12), qp, max_steps=5, tol=0.0, loop="fixed"
        )
        s = 1 / (1 + np.exp(-np.array([-2.0, 0.0, 2.0, 2.0, 2.0])))
        np.testing.assert_allclose(np.asarray(sol.info.rho_mean), 1e-4 * 1e8**s, rtol=1e-12)
    with pytest.raises(ValueError, match="outside its range"):
        Policies.scalar(1, rho=1e5)


def _perturbed_past(H, scaling=0):
    """A scalar schedule over 4H iterations whose penalty, after iteration H, jumps
    between the ends of its range (1e-4 and 1e4, logits -4 / 4) every iteration: a
    policy that misbehaves beyond the horizon it would have been trained for."""
    import equinox as eqx

    pol = Policies.scalar(4 * H, scaling_iters=scaling)
    alt = jnp.where(jnp.arange(4 * H) % 2 == 0, 4.0, -4.0)
    return eqx.tree_at(lambda p: p.ineq.logits, pol, pol.ineq.logits.at[H:, 0].set(alt[H:]))


def test_parameters_are_held_past_the_horizon():
    """With horizon H, iterations H..4H-1 use exactly the parameters of iteration H-1,
    and the error after 4H iterations is below its value at H on every problem; run on
    (no horizon), the same policy ends above it (about 1, from 0.16-0.24). Past the
    horizon the fixed-point residual of v = z + y / rho (the ADMM variable; rho is then
    fixed) never grows: relaxed ADMM with fixed parameters is averaged."""
    import equinox as eqx

    H = 10
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(0), 4)
        qps = jax.tree.map(lambda *v: jnp.stack(v), *[problems.random_qp(k, 12, 18) for k in keys])
        pol = _perturbed_past(H)

        def run(p, steps):
            s = deep_flexqp(p)
            return jax.vmap(
                lambda qp: jaxsolve.solve(
                    s, jnp.zeros(12), qp, max_steps=steps, tol=0.0, loop="fixed", history=True
                )
            )(qps)

        held, free = run(pol.with_horizon(H), 4 * H), run(pol, 4 * H)
        for name in ("rho_mean", "mu_mean", "alpha"):
            v = np.asarray(getattr(held.info, name))
            np.testing.assert_array_equal(v[:, H:], np.repeat(v[:, H - 1 : H], 3 * H, axis=1))
        h_held, h_free = np.asarray(held.history), np.asarray(free.history)
        np.testing.assert_array_equal(h_held[:, :H], h_free[:, :H])  # within: the same
        assert np.all(h_held[:, -1] < h_held[:, H - 1]), h_held[:, [H - 1, -1]]
        assert np.all(h_free[:, -1] > 3 * h_free[:, H - 1]), h_free[:, [H - 1, -1]]

        s = deep_flexqp(pol.with_horizon(H))
        step = eqx.filter_jit(lambda solver, state, qp: solver.step(state, qp))
        qp = jax.tree.map(lambda v: v[0], qps)
        state, v_prev, fpr = s.init(jnp.zeros(12), qp), None, []
        for k in range(4 * H):
            state, _ = step(s, state, qp)
            if k == H - 1:
                at_h = state
            _, z_run, y_run, _ = state.run  # the iteration's own iterate, not the best
            v = np.asarray(z_run) + np.asarray(y_run) / np.asarray(state.rho)
            if v_prev is not None:
                fpr.append(np.linalg.norm(np.sqrt(np.asarray(state.rho)) * (v - v_prev)))
            v_prev = v
        for name in ("rho", "mu", "alpha"):  # the per-row parameters: exactly the last ones
            np.testing.assert_array_equal(
                np.asarray(getattr(state, name)), np.asarray(getattr(at_h, name))
            )
        tail = np.asarray(fpr[H - 1 :])
        assert np.all(tail[1:] <= tail[:-1] * (1 + 1e-12)), tail


def test_a_horizon_leaves_a_constant_policy_unchanged():
    """Held constants are the constants: Policies.fixed with a horizon gives the same
    iterates bit for bit (so hand-tuned FlexQP is still reproduced), and past_horizon is
    checked."""
    with jax.enable_x64(True):
        qp = problems.random_qp(jax.random.key(1), 12, 18)
        a = jaxsolve.solve(deep_flexqp(Policies.fixed()), jnp.zeros(12), qp, max_steps=20, tol=0.0)
        b = jaxsolve.solve(
            deep_flexqp(Policies.fixed().with_horizon(3)), jnp.zeros(12), qp, max_steps=20, tol=0.0
        )
        # the iteration is the same; what it returns past the horizon is its best iterate
        np.testing.assert_array_equal(np.asarray(b.state.run[0]), np.asarray(a.x))
        np.testing.assert_array_equal(np.asarray(b.state.run[2]), np.asarray(a.state.y))
        c = jaxsolve.solve(
            deep_flexqp(Policies.fixed().with_horizon(3), keep_best=False),
            jnp.zeros(12),
            qp,
            max_steps=20,
            tol=0.0,
        )
        np.testing.assert_array_equal(np.asarray(c.x), np.asarray(a.x))
        np.testing.assert_array_equal(np.asarray(c.state.y), np.asarray(a.state.y))
    with pytest.raises(ValueError, match="past_horizon must be"):
        deep_flexqp(past_horizon="lstm")
    with pytest.raises(ValueError, match="horizon must be an int >= 1"):
        Policies.fixed().with_horizon(0)


def test_past_the_horizon_the_best_iterate_since_it_is_returned():
    """Past the horizon H the returned (x, z, y, error) is the iterate with the smallest
    error among iterations H..k: so the returned error after 4H is at most the error at
    H on every problem, it never grows with the budget, and it is FlexQP's KKT error
    recomputed at the returned point. The case it exists for: a slowly converging
    fixed-parameter tail (penalty 1e-3 held on well-scaled random QPs) whose last
    iterate's error rises above its horizon value on some problems. Within the horizon
    the returned point is the last iterate. A NaN error never wins."""
    from jaxsolve.qp.residuals import kkt_residuals
    from jaxsolve.qp.scaling import prepare_scaled

    H, steps = 5, 60
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(2), 24)
        qps = jax.tree.map(lambda *v: jnp.stack(v), *[problems.random_qp(k, 10, 16) for k in keys])
        pol = Policies.fixed(rho=1e-3, alpha=1.0).with_horizon(H)

        def run(keep_best, k):
            s = deep_flexqp(pol, keep_best=keep_best)
            return jax.vmap(
                lambda qp: jaxsolve.solve(
                    s, jnp.zeros(10), qp, max_steps=k, tol=0.0, loop="fixed", history=True
                )
            )(qps)

        best, last = run(True, steps), run(False, steps)
        h_best, h_last = np.asarray(best.history), np.asarray(last.history)
        np.testing.assert_array_equal(h_best[:, :H], h_last[:, :H])  # within: the last
        running_min = np.minimum.accumulate(h_last[:, H - 1 :], axis=1)
        np.testing.assert_array_equal(h_best[:, H - 1 :], running_min)  # so never above H's
        rising = h_last[:, -1] > h_last[:, H - 1]
        assert rising.sum() >= 1, "no problem whose last iterate ends above its horizon value"
        assert np.all(h_best[rising, -1] < h_last[rising, -1])

        def kkt(qp, st):
            d = prepare_scaled(qp, flexqp().hyper(qp.q.dtype), 0)
            return kkt_residuals(d, st.x, st.z, st.y, jnp.asarray(False)).kkt

        recomputed = np.asarray(jax.vmap(kkt)(qps, best.state))
        np.testing.assert_allclose(recomputed, np.asarray(best.error), rtol=1e-10)
        # one step more with a NaN error in the running iterate: the best one stays
        s = deep_flexqp(pol)
        qp = jax.tree.map(lambda v: v[0], qps)
        st = jax.tree.map(lambda v: v[0], best.state)
        x_run, z_run, y_run, _ = st.run
        st = st._replace(run=(x_run * jnp.nan, z_run, y_run, jnp.nan))
        nxt, _ = s.step(st, qp)
        assert float(nxt.error) == float(st.error)
        np.testing.assert_array_equal(np.asarray(nxt.x), np.asarray(st.x))
        # and a NaN returned error loses to the next finite one
        st = jax.tree.map(lambda v: v[0], best.state)._replace(error=jnp.asarray(jnp.nan))
        nxt, _ = s.step(st, qp)
        assert np.isfinite(float(nxt.error)) and float(nxt.error) == float(nxt.run[3])
        np.testing.assert_array_equal(np.asarray(nxt.x), np.asarray(nxt.run[0]))
    with pytest.raises(TypeError, match="keep_best must be a bool"):
        deep_flexqp(keep_best=1)
