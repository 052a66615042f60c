"""Gauss-Newton / Levenberg-Marquardt (arXiv 2601.03162): solver, preconditioner, optax transform."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxsolve
from jaxsolve.second_order import gauss_newton, gn_precondition, scale_by_gauss_newton
from jaxsolve.second_order.problems import sine_mlp_problem, sine_mlp_residual


@pytest.mark.parametrize(
    "shape,mu,form",
    [
        ((7, 4), 0.3, "primal"),
        ((7, 4), 0.3, "kernel"),
        ((4, 7), 0.3, "primal"),
        ((4, 7), 0.3, "kernel"),
        # mu = 0 needs the nonsingular Gram matrix: the one form="auto" picks
        ((7, 4), 0.0, "auto"),
        ((4, 7), 0.0, "auto"),
    ],
)
def test_precondition_forms_equal_explicit_solve(shape, mu, form):
    rng = np.random.default_rng(0)
    J = rng.normal(size=shape)
    c = 0.5
    m, n = shape
    if mu > 0:
        u = rng.normal(size=n)  # any vector
        expect = np.linalg.solve(c * J.T @ J + mu * np.eye(n), u)
    else:
        u = J.T @ rng.normal(size=m)  # a gradient: in the row space of J
        expect = np.linalg.pinv(c * J.T @ J) @ u  # minimum-norm Gauss-Newton step
    out = gn_precondition(jnp.asarray(J), jnp.asarray(u), jnp.asarray(mu), scale=c, form=form)
    np.testing.assert_allclose(np.asarray(out), expect, rtol=1e-9, atol=1e-11)


def test_linear_least_squares_one_step():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(30, 5))
    b = rng.normal(size=30)
    res = lambda x, args: args[0] @ x - args[1]
    sol = jaxsolve.solve(
        gauss_newton(res, damping=1e-12, adaptive=False),
        jnp.zeros(5),
        (jnp.asarray(A), jnp.asarray(b)),
        tol=1e-10,
        max_steps=5,
    )
    assert int(sol.num_steps) == 1
    np.testing.assert_allclose(np.asarray(sol.x), np.linalg.lstsq(A, b, rcond=None)[0], rtol=1e-9)


def test_spectral_bias_lm_vs_adam():
    """LM reaches MSE 1e-4 on sin(2 pi 8 x); the best of Adam at 3 rates does not in 10x the steps."""
    params, args = sine_mlp_problem()
    mse = lambda p: jnp.mean(sine_mlp_residual(p, args) ** 2)
    solver = gauss_newton(sine_mlp_residual, damping=1e-3)

    @jax.jit
    def lm_curve(params):
        def body(state, _):
            state, _ = solver.step(state, args)
            return state, mse(state.x)

        return jax.lax.scan(body, solver.init(params, args), None, length=300)[1]

    hit = np.nonzero(np.asarray(lm_curve(params)) <= 1e-4)[0]
    assert hit.size, "LM did not reach MSE 1e-4 in 300 steps"
    lm_steps = int(hit[0]) + 1
    budget = 10 * lm_steps

    @jax.jit
    def adam_best(lr):  # one compilation, vmapped over the three learning rates
        opt = optax.adam(lr)

        def body(c, _):
            p, s = c
            u, s = opt.update(jax.grad(mse)(p), s, p)
            p = optax.apply_updates(p, u)
            return (p, s), mse(p)

        return jnp.min(jax.lax.scan(body, (params, opt.init(params)), None, length=budget)[1])

    best = np.asarray(jax.vmap(adam_best)(jnp.array([1e-3, 3e-3, 1e-2])))
    assert np.all(best > 1e-4), f"Adam reached {best} within {budget} steps (LM: {lm_steps})"


# slow: 30-70 s of compilation; the contract (gradients/float32/vmap checks) covers the same property in the default suite
@pytest.mark.slow
def test_optax_transform_equals_fixed_damping_solver():
    params, args = sine_mlp_problem(width=16, n=24, freq=1.0, scale=3.0)
    mu = 1e-3
    m = args[0].shape[0]
    solver = gauss_newton(sine_mlp_residual, damping=mu, adaptive=False)
    state = solver.init(params, args)
    # loss 1/(2m) |r|^2 -> GN matrix J^T J / m; damping mu/m gives the same step as the solver
    loss = lambda p, batch: 0.5 * jnp.mean(sine_mlp_residual(p, batch) ** 2)
    for linear_solver in ("dense", "cg"):
        tx = optax.chain(
            scale_by_gauss_newton(sine_mlp_residual, damping=mu / m, linear_solver=linear_solver),
            optax.scale_by_learning_rate(1.0),
        )
        p, s, st = params, tx.init(params), state
        for _ in range(3):
            g = jax.grad(loss)(p, args)
            u, s = tx.update(g, s, p, batch=args)
            p = optax.apply_updates(p, u)
            st, _ = solver.step(st, args)
            for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(st.x), strict=True):
                # same step up to rounding amplified by the conditioning of J J^T
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-8)


def test_equinox_model_training_with_transform():
    key = jax.random.key(3)
    model = eqx.nn.MLP(1, 1, width_size=16, depth=1, activation=jnp.tanh, key=key)
    x = jnp.linspace(-1, 1, 40)[:, None]
    y = jnp.sin(3 * x)
    params, static = eqx.partition(model, eqx.is_array)

    def residual(p, batch):
        xb, yb = batch
        return jax.vmap(eqx.combine(p, static))(xb) - yb

    loss = lambda p, batch: 0.5 * jnp.mean(residual(p, batch) ** 2)
    tx = optax.chain(
        scale_by_gauss_newton(residual, damping=1e-4), optax.scale_by_learning_rate(1.0)
    )
    state = tx.init(params)

    @jax.jit
    def train_step(p, s):
        g = jax.grad(loss)(p, (x, y))
        u, s = tx.update(g, s, p, batch=(x, y))
        return optax.apply_updates(p, u), s

    for _ in range(30):
        params, state = train_step(params, state)
    assert float(loss(params, (x, y))) < 1e-6
    # the same model as a solver iterate (LM converges linearly here: an overparameterized
    # net has a degenerate zero-residual manifold; we ask for a small loss, not tol)
    x0 = eqx.filter(model, eqx.is_array)
    sol = jaxsolve.solve(gauss_newton(residual), x0, (x, y), tol=1e-12, max_steps=100)
    assert int(sol.status) in (jaxsolve.Status.SUCCESS, jaxsolve.Status.MAX_STEPS)
    assert float(loss(sol.x, (x, y))) < 1e-6 * float(loss(x0, (x, y)))


def test_matrix_free_cg_matches_dense():
    params, args = sine_mlp_problem(width=16, n=24, freq=1.0, scale=3.0)
    run = lambda solver: jaxsolve.solve(solver, params, args, tol=1e-12, max_steps=12)
    dense = run(gauss_newton(sine_mlp_residual, damping=1e-2))
    cg = run(gauss_newton(sine_mlp_residual, damping=1e-2, linear_solver="cg", cg_maxiter=200))
    # the same LM iterates: CG solves each damped system to tolerance
    for a, b in zip(jax.tree.leaves(dense.x), jax.tree.leaves(cg.x), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-8)
    r0 = float(jnp.sum(sine_mlp_residual(params, args) ** 2))
    assert float(jnp.sum(sine_mlp_residual(cg.x, args) ** 2)) < 1e-3 * r0


def test_fixed_damping_nan_is_reported():
    res = lambda x, args: jnp.log(x) - args  # log of a negative number after a big step
    sol = jaxsolve.solve(
        gauss_newton(res, damping=0.0, adaptive=False, learning_rate=50.0),
        jnp.array([1.0]),
        jnp.array([3.0]),
        max_steps=10,
    )
    assert int(sol.status) == jaxsolve.Status.NONFINITE


def test_bad_input():
    with pytest.raises(ValueError, match="damping"):
        gauss_newton(sine_mlp_residual, damping=0.0)
    with pytest.raises(ValueError, match="learning_rate"):
        gauss_newton(sine_mlp_residual, learning_rate=0.0)
    with pytest.raises(ValueError, match="damping"):
        scale_by_gauss_newton(sine_mlp_residual, damping=-1.0)
    with pytest.raises(ValueError, match="linear_solver"):
        scale_by_gauss_newton(sine_mlp_residual, linear_solver="lu")
    tx = scale_by_gauss_newton(sine_mlp_residual)
    with pytest.raises(ValueError, match="params"):
        tx.update(jnp.ones(2), tx.init(jnp.ones(2)))


def test_implicit_derivative_matches_finite_differences():
    """adjoint=Implicit() differentiates J^T r = 0 (GaussNewton.optimality): d x*/d y."""
    t = jnp.linspace(0.0, 1.0, 12)
    y = 1.3 * jnp.exp(-0.7 * t) + 0.4 + 0.01 * jnp.sin(7.0 * t)
    residual = lambda x, a: x[0] * jnp.exp(x[1] * a[0]) + x[2] - a[1]
    solver = gauss_newton(residual)
    w = jnp.array([0.3, -1.0, 2.0])

    def loss(y):
        sol = jaxsolve.solve(
            solver, jnp.array([1.0, 0.0, 0.0]), (t, y), tol=1e-13, adjoint=jaxsolve.Implicit()
        )
        return w @ sol.x

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one compilation for all three
    d, h = jnp.cos(3.0 * t), 1e-5
    fd = (value_and_grad(y + h * d)[0] - value_and_grad(y - h * d)[0]) / (2 * h)
    np.testing.assert_allclose(float(value_and_grad(y)[1] @ d), float(fd), rtol=1e-7)
