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
