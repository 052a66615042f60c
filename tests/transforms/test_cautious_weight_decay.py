"""Cautious weight decay (arXiv 2510.12402): the paper's rule, optax equivalences, its claim."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxsolve.transforms import (
    cautious_adamw,
    cautious_lion,
    cautious_mask,
    cautious_muon,
    cautious_weight_decay,
)

X_STAR = np.array([1.5, -2.0, 3.0, -0.7, 0.4])


def _numpy_adam_cwd(grad_fn, x0, steps, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
    """Algorithm 1 of the paper with Adam's u_t, written from the formulas in NumPy."""
    x = np.array(x0, dtype=np.float64)
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    traj = []
    for t in range(1, steps + 1):
        g = grad_fn(x)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        mask = (u * x >= 0).astype(np.float64)
        x = x - lr(t - 1) * (u + wd * mask * x)
        traj.append(x.copy())
    return np.array(traj)


def _run(tx, grad_fn, x0, steps):
    x = jnp.asarray(x0)
    state = tx.init(x)

    def body(carry, _):
        x, s = carry
        u, s = tx.update(grad_fn(x), s, x)
        x = optax.apply_updates(x, u)
        return (x, s), x

    (_, _), traj = jax.lax.scan(body, (x, state), None, length=steps)
    return traj


def _quad_grad(x):
    return x - X_STAR


def test_matches_paper_rule_coordinatewise():
    # a nonseparable, rotating gradient field so the mask changes from step to step
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    A = A @ A.T / 5 + np.eye(5)
    b = rng.normal(size=5)
    grad_np = lambda x: A @ x - b
    grad_jx = lambda x: jnp.asarray(A) @ x - jnp.asarray(b)
    x0 = rng.normal(size=5)
    sched = optax.cosine_decay_schedule(0.05, 200)
    ref = _numpy_adam_cwd(grad_np, x0, 200, lambda t: float(sched(t)), wd=0.3)
    ours = np.asarray(_run(cautious_adamw(sched, weight_decay=0.3), grad_jx, x0, 200))
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)
    # the mask really switched on and off along the way (the test exercises both branches)
    u_signs = np.sign(np.diff(np.vstack([x0, ref]), axis=0))
    assert 0 < np.mean(u_signs * np.sign(ref) < 0) < 1


def test_equals_adamw_when_mask_all_ones():
    # f = sum(x^2)/2 from a positive start: g = x > 0, Adam's u > 0, so u*x >= 0 everywhere
    x0 = np.linspace(0.5, 3.0, 6)
    g = lambda x: x
    ours = _run(cautious_adamw(5e-3, weight_decay=0.1), g, x0, 60)
    ref = _run(optax.adamw(5e-3, weight_decay=0.1), g, x0, 60)
    assert np.all(np.asarray(ours) > 0)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-13, atol=0)
    # and cautious_adamw with wd=0 is Adam
    rng = np.random.default_rng(1)
    y0 = rng.normal(size=6)
    np.testing.assert_allclose(
        np.asarray(_run(cautious_adamw(1e-2, weight_decay=0.0), _quad_grad_6, y0, 50)),
        np.asarray(_run(optax.adam(1e-2), _quad_grad_6, y0, 50)),
        rtol=1e-13,
    )


def _quad_grad_6(x):
    return x - jnp.arange(6.0) + 2.5


def test_sgd_cwd_converges_to_true_minimizer_decoupled_shrinks():
    lam, steps = 0.5, 3000
    sched = optax.linear_schedule(0.1, 0.0, steps)
    x0 = np.zeros(5)
    cwd = _run(
        optax.chain(cautious_weight_decay(lam), optax.scale_by_learning_rate(sched)),
        _quad_grad,
        x0,
        steps,
    )[-1]
    dec = _run(
        optax.chain(optax.add_decayed_weights(lam), optax.scale_by_learning_rate(sched)),
        _quad_grad,
        x0,
        steps,
    )[-1]
    np.testing.assert_allclose(np.asarray(cwd), X_STAR, atol=1e-8)
    # decoupled decay minimizes f + lam/2 |x|^2: x*/(1+lam)
    np.testing.assert_allclose(np.asarray(dec), X_STAR / (1 + lam), atol=1e-8)


def test_adam_cwd_converges_to_true_minimizer_adamw_does_not():
    lam, steps = 0.5, 3000
    sched = optax.linear_schedule(0.05, 0.0, steps)
    x0 = np.zeros(5)
    cwd = np.asarray(_run(cautious_adamw(sched, weight_decay=lam), _quad_grad, x0, steps)[-1])
    adamw = np.asarray(_run(optax.adamw(sched, weight_decay=lam), _quad_grad, x0, steps)[-1])
    assert np.max(np.abs(cwd - X_STAR)) < 1e-3
    # AdamW solves a box-constrained problem (|x| <= 1/lam): x*=3 lands near 2, and
    # every coordinate is shrunk towards 0
    assert abs(adamw[2] - 1 / lam) < 0.1
    assert np.all(np.abs(adamw) < np.abs(X_STAR))
    assert np.max(np.abs(adamw - X_STAR)) > 0.9


def test_tie_rule_and_sign_based_mask():
    u = jnp.array([0.0, 1.0, -1.0, 2.0, -3.0, 0.0])
    x = jnp.array([1.0, 0.0, 2.0, -1.0, -1.0, 0.0])
    m = np.asarray(cautious_mask(u, x))
    np.testing.assert_array_equal(m, [True, True, False, False, True, True])
    tx = cautious_weight_decay(0.5)
    out, _ = tx.update(u, tx.init(x), x)
    np.testing.assert_allclose(np.asarray(out), [0.5, 1.0, -1.0, 2.0, -3.5, 0.0])
    # underflow: u*x == 0 in float32 although the signs disagree -> no decay
    u32 = jnp.array([1e-30], jnp.float32)
    x32 = jnp.array([-1e-30], jnp.float32)
    assert float((u32 * x32)[0]) == 0.0
    out, _ = tx.update(u32, tx.init(x32), x32)
    assert float(out[0]) == pytest.approx(1e-30, rel=1e-6)


def test_schedule_pytree_mask_and_callable_mask():
    params = {"w": jnp.ones((2, 2)), "b": jnp.ones(2)}
    upd = jax.tree.map(jnp.ones_like, params)
    sched = lambda count: 0.1 * (count + 1)
    tx = cautious_weight_decay(sched, mask={"w": True, "b": False})
    s = tx.init(params)
    o1, s = tx.update(upd, s, params)
    o2, s = tx.update(upd, s, params)
    np.testing.assert_allclose(np.asarray(o1["w"]), 1.1)
    np.testing.assert_allclose(np.asarray(o2["w"]), 1.2)
    np.testing.assert_allclose(np.asarray(o2["b"]), 1.0)
    tx = cautious_weight_decay(0.3, mask=lambda p: jax.tree.map(lambda v: v.ndim == 2, p))
    o, _ = tx.update(upd, tx.init(params), params)
    np.testing.assert_allclose(np.asarray(o["w"]), 1.3)
    np.testing.assert_allclose(np.asarray(o["b"]), 1.0)


def test_inject_hyperparams_and_jit():
    params = jnp.array([1.0, -1.0, 2.0])
    upd = jnp.array([1.0, 1.0, -1.0])
    tx = optax.inject_hyperparams(cautious_weight_decay)(weight_decay=0.2)
    s = tx.init(params)
    out, s = jax.jit(tx.update)(upd, s, params)
    np.testing.assert_allclose(np.asarray(out), [1.2, 1.0, -1.0])
    s.hyperparams["weight_decay"] = jnp.asarray(0.5)
    out, s = jax.jit(tx.update)(upd, s, params)
    np.testing.assert_allclose(np.asarray(out), [1.5, 1.0, -1.0])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_low_precision_keeps_dtype(dtype):
    params = {"w": jnp.linspace(-1, 1, 12, dtype=dtype).reshape(3, 4), "b": jnp.ones(4, dtype)}
    grads = jax.tree.map(lambda v: jnp.cos(v * 3).astype(dtype), params)
    for tx in (
        cautious_adamw(optax.linear_schedule(1e-2, 0.0, 10), weight_decay=0.1),
        cautious_lion(1e-3, weight_decay=0.1),
        cautious_muon(1e-2, weight_decay=0.1),
    ):
        s = tx.init(params)
        u, s = tx.update(grads, s, params)
        for leaf, p in zip(jax.tree.leaves(u), jax.tree.leaves(params), strict=True):
            assert leaf.dtype == p.dtype
            assert bool(jnp.all(jnp.isfinite(leaf.astype(jnp.float32))))


def test_lion_matches_formula():
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=8))
    g = jnp.asarray(rng.normal(size=8))
    lr, wd = 1e-2, 0.7
    lion0 = optax.lion(lr, weight_decay=0.0)
    base, _ = lion0.update(g, lion0.init(x), x)  # -lr * sign(...)
    tx = cautious_lion(lr, weight_decay=wd)
    ours, _ = tx.update(g, tx.init(x), x)
    u = -np.asarray(base) / lr
    expect = np.asarray(base) - lr * wd * (u * np.asarray(x) >= 0) * np.asarray(x)
    np.testing.assert_allclose(np.asarray(ours), expect, rtol=1e-14)
    assert 0 < np.mean(u * np.asarray(x) >= 0) < 1


def test_muon_mask_on_orthogonalized_update():
    rng = np.random.default_rng(4)
    params = {"w": jnp.asarray(rng.normal(size=(6, 4))), "b": jnp.asarray(rng.normal(size=4))}
    grads = jax.tree.map(lambda v: jnp.asarray(rng.normal(size=v.shape)), params)
    lr, wd = 0.02, 0.4
    base = optax.contrib.muon(lr)
    ub, _ = base.update(grads, base.init(params), params)
    tx = cautious_muon(lr)  # wd = 0: identical to optax's Muon
    u0, _ = tx.update(grads, tx.init(params), params)
    for a, b in zip(jax.tree.leaves(u0), jax.tree.leaves(ub), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    tx = cautious_muon(lr, weight_decay=wd)
    u1, _ = tx.update(grads, tx.init(params), params)
    O = -np.asarray(ub["w"]) / lr  # the orthogonalized, shape-scaled update
    W = np.asarray(params["w"])
    mask = O * W >= 0
    assert 0 < mask.mean() < 1
    np.testing.assert_allclose(np.asarray(u1["w"]), np.asarray(ub["w"]) - lr * wd * mask * W)
    np.testing.assert_array_equal(np.asarray(u1["b"]), np.asarray(ub["b"]))  # adam_wd = 0


def test_bad_input():
    with pytest.raises(ValueError, match="weight_decay"):
        cautious_weight_decay(-0.1)
    with pytest.raises(ValueError, match="weight_decay"):
        cautious_weight_decay(float("nan"))
    with pytest.raises(TypeError, match="weight_decay"):
        cautious_weight_decay(jnp.ones(3))
    tx = cautious_weight_decay(0.1)
    with pytest.raises(ValueError, match="params"):
        tx.update(jnp.ones(2), tx.init(jnp.ones(2)))


def test_state_count_reads_as_optax_adamw():
    """``tree_get(state, "count")`` finds one count, as for ``optax.adamw`` (a constant
    decay keeps no counter of its own; a schedule keeps one, as optax's does)."""
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    grads = {"w": jnp.array([0.5, 0.5, -0.5])}
    ours, ref = cautious_adamw(1e-2, weight_decay=0.1), optax.adamw(1e-2, weight_decay=0.1)
    s, r = ours.init(params), ref.init(params)
    for _ in range(3):
        _, s = ours.update(grads, s, params)
        _, r = ref.update(grads, r, params)
    assert int(optax.tree_utils.tree_get(s, "count")) == 3
    assert int(optax.tree_utils.tree_get(r, "count")) == 3
    sched = cautious_weight_decay(lambda c: 0.1 / (1.0 + c))
    st = sched.init(params)
    out, st = sched.update(grads, st, params)
    np.testing.assert_allclose(np.asarray(out["w"]), [0.6, 0.5, -0.5])  # signs agree on 1 only
    assert int(st.count) == 1
