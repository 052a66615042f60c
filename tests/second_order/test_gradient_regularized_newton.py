"""Gradient-regularized Newton (arXiv 2506.13710) on L2-regularized logistic/softmax regression.

References: scikit-learn's LogisticRegression (newton-cholesky, tol 1e-12) on the same
objective, and optax's L-BFGS for the iteration count.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import threadpoolctl
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

import jaxsolve
from jaxsolve.second_order import gradient_regularized_newton
from jaxsolve.second_order.problems import logistic_objective, softmax_objective

C = 1.0


def sklearn_fit(X, y):
    # one BLAS thread: the machine is shared, and oversubscription makes sklearn 50x slower
    with threadpoolctl.threadpool_limits(1):
        return LogisticRegression(C=C, tol=1e-12, max_iter=1000, solver="newton-cholesky").fit(X, y)


def lbfgs_iterations(fun, x0, args, tol, max_iter=3000):
    """optax.lbfgs (zoom line search) iterations until ||grad|| <= tol."""
    opt = optax.lbfgs()
    f = lambda p: fun(p, args)
    vg = optax.value_and_grad_from_state(f)

    @jax.jit
    def run(p):
        state = opt.init(p)

        def cond(c):
            _, s, k = c
            g = optax.tree.get(s, "grad")
            return (k == 0) | ((optax.tree.norm(g) > tol) & (k < max_iter))

        def body(c):
            p, s, k = c
            v, g = vg(p, state=s)
            u, s = opt.update(g, s, p, value=v, grad=g, value_fn=f)
            return optax.apply_updates(p, u), s, k + 1

        return jax.lax.while_loop(cond, body, (p, state, 0))

    p, _, k = run(x0)
    return int(k), float(optax.tree.norm(jax.grad(f)(p)))


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    args = (jnp.asarray(X), jnp.asarray(y, jnp.float64), 1.0 / (C * X.shape[0]))
    x0 = {"w": jnp.zeros(X.shape[1]), "b": jnp.zeros(())}
    return X, y, args, x0, sklearn_fit(X, y)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    Y = np.eye(10)[y]
    args = (jnp.asarray(X), jnp.asarray(Y), 1.0 / (C * X.shape[0]))
    x0 = {"W": jnp.zeros((64, 10)), "b": jnp.zeros(10)}
    return X, y, args, x0, sklearn_fit(X, y)


def _rel(a, b):
    a, b = np.ravel(a), np.ravel(b)
    return np.linalg.norm(a - b) / max(1.0, np.linalg.norm(b))


def test_logistic_breast_cancer_matches_sklearn_and_beats_lbfgs(cancer):
    X, y, args, x0, clf = cancer
    sol = jaxsolve.solve(
        gradient_regularized_newton(logistic_objective), x0, args, tol=1e-8, max_steps=100
    )
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    assert float(sol.error) <= 1e-8
    ours = np.concatenate([np.asarray(sol.x["w"]), np.atleast_1d(np.asarray(sol.x["b"]))])
    ref = np.concatenate([clf.coef_.ravel(), clf.intercept_])
    assert _rel(ours, ref) <= 1e-6
    # sklearn's answer is itself a stationary point of our objective (same problem)
    g_ref = jax.grad(logistic_objective)(
        {"w": jnp.asarray(clf.coef_.ravel()), "b": jnp.asarray(clf.intercept_[0])}, args
    )
    assert float(optax.tree.norm(g_ref)) < 1e-7
    k_lbfgs, g_lbfgs = lbfgs_iterations(logistic_objective, x0, args, 1e-8)
    assert g_lbfgs <= 1e-8
    assert int(sol.num_steps) < k_lbfgs, (int(sol.num_steps), k_lbfgs)
    assert int(sol.num_steps) <= 15


@pytest.mark.slow  # digits softmax regression against scikit-learn and L-BFGS (7 s)
def test_softmax_digits_matches_sklearn_and_beats_lbfgs(digits):
    X, y, args, x0, clf = digits
    solver = gradient_regularized_newton(softmax_objective, linear_solver="cg", cg_maxiter=200)
    sol = jaxsolve.solve(solver, x0, args, tol=1e-8, max_steps=100)
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    assert float(sol.error) <= 1e-8
    W, b = np.asarray(sol.x["W"]).T, np.asarray(sol.x["b"])
    # softmax is invariant to a common shift of the (unpenalized) intercepts: compare
    # them centered (ours stay centered: their gradient sums to zero)
    ours = np.concatenate([W.ravel(), b - b.mean()])
    ref = np.concatenate([clf.coef_.ravel(), clf.intercept_ - clf.intercept_.mean()])
    assert _rel(ours, ref) <= 1e-6
    k_lbfgs, g_lbfgs = lbfgs_iterations(softmax_objective, x0, args, 1e-8)
    assert g_lbfgs <= 1e-8
    assert int(sol.num_steps) < k_lbfgs / 5, (int(sol.num_steps), k_lbfgs)


def test_hessian_models_reach_the_same_solution(cancer):
    X, y, args, x0, clf = cancer
    ref = np.concatenate([clf.coef_.ravel(), clf.intercept_])
    Xj, yj, mu = args

    def model(p, args):  # linear model; the L2 term rides along as the second output
        X, _, _ = args
        return X @ p["w"] + p["b"], p["w"]

    def outer(zw, args):
        z, w = zw
        _, y, mu = args
        return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 0.5 * mu * jnp.sum(w**2)

    def per_example(p, args):
        X, y, mu = args
        z = X @ p["w"] + p["b"]
        return jnp.logaddexp(0.0, z) - y * z + 0.5 * mu * jnp.sum(p["w"] ** 2)

    def exact_hvp(p, args, v):
        return jax.jvp(jax.grad(lambda q: logistic_objective(q, args)), (p,), (v,))[1]

    solvers = {
        "gauss_newton": gradient_regularized_newton(
            hessian="gauss_newton", model=model, outer_loss=outer
        ),
        "fisher": gradient_regularized_newton(hessian="fisher", per_example_loss=per_example),
        "callable": gradient_regularized_newton(logistic_objective, hessian=exact_hvp),
        "exact+B": gradient_regularized_newton(
            logistic_objective, norm_weights={"w": jnp.full(X.shape[1], 2.0), "b": jnp.asarray(0.5)}
        ),
    }
    steps = {}
    for name, solver in solvers.items():
        sol = jaxsolve.solve(solver, x0, args, tol=1e-8, max_steps=300)
        assert int(sol.status) == jaxsolve.Status.SUCCESS, name
        ours = np.concatenate([np.asarray(sol.x["w"]), np.atleast_1d(np.asarray(sol.x["b"]))])
        assert _rel(ours, ref) <= 1e-6, name
        steps[name] = int(sol.num_steps)
    # GGN of a linear model is the exact Hessian: Newton-like step counts
    assert steps["gauss_newton"] <= 15
    # the empirical Fisher is only an approximation: it converges, more slowly (linear rate)
    assert steps["fisher"] > steps["gauss_newton"]


def test_rosenbrock_nonconvex_exact_hessian():
    """The paper's 2-D Rosenbrock experiment (a=1, b=100): exact Hessian, indefinite regions."""

    def rosen(x, args):
        a, b = args
        return (a - x[0]) ** 2 + b * (x[1] - x[0] ** 2) ** 2

    solver = gradient_regularized_newton(rosen)
    sol = jaxsolve.solve(solver, jnp.array([-1.2, 1.0]), (1.0, 100.0), tol=1e-10, max_steps=200)
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    np.testing.assert_allclose(np.asarray(sol.x), [1.0, 1.0], atol=1e-8)
    assert int(sol.num_steps) <= 60
    # and the matrix-free CG variant agrees
    sol_cg = jaxsolve.solve(
        gradient_regularized_newton(rosen, linear_solver="cg", cg_maxiter=10),
        jnp.array([-1.2, 1.0]),
        (1.0, 100.0),
        tol=1e-10,
        max_steps=200,
    )
    np.testing.assert_allclose(np.asarray(sol_cg.x), [1.0, 1.0], atol=1e-8)


def test_gradient_norm_decreases_locally_superlinearly(cancer):
    _, _, args, x0, _ = cancer
    sol = jaxsolve.solve(
        gradient_regularized_newton(logistic_objective),
        x0,
        args,
        tol=1e-12,
        max_steps=100,
        history=True,
    )
    h = np.asarray(sol.history)[: int(sol.num_steps)]
    tail = h[-4:]
    ratios = tail[1:] / tail[:-1]
    assert np.all(ratios < 0.1), h  # faster than any fixed linear rate near the solution


def test_float32(cancer):
    _, _, args, x0, clf = cancer
    args32 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), args)
    x32 = jax.tree.map(lambda a: a.astype(jnp.float32), x0)
    sol = jaxsolve.solve(
        gradient_regularized_newton(logistic_objective), x32, args32, max_steps=100
    )
    assert int(sol.status) == jaxsolve.Status.SUCCESS
    assert sol.x["w"].dtype == jnp.float32
    ours = np.concatenate([np.asarray(sol.x["w"]), np.atleast_1d(np.asarray(sol.x["b"]))])
    assert _rel(ours, np.concatenate([clf.coef_.ravel(), clf.intercept_])) <= 1e-3


def test_bad_input():
    with pytest.raises(ValueError, match="hessian"):
        gradient_regularized_newton(logistic_objective, hessian="bfgs")
    with pytest.raises(ValueError, match="per_example_loss"):
        gradient_regularized_newton(logistic_objective, hessian="fisher")
    with pytest.raises(ValueError, match="gamma_min"):
        gradient_regularized_newton(logistic_objective, gamma_min=0.0)
    with pytest.raises(ValueError, match="max_backtracks"):
        gradient_regularized_newton(logistic_objective, max_backtracks=0)
    with pytest.raises(ValueError, match="norm_weights"):
        gradient_regularized_newton(logistic_objective, norm_weights=jnp.array([1.0, -1.0]))
    with pytest.raises(TypeError, match="fun"):
        gradient_regularized_newton("f")


def test_implicit_derivative_matches_finite_differences():
    """adjoint=Implicit() differentiates grad f = 0 (the solver's optimality) on a pytree
    iterate: d x*/d X along a direction."""
    rng = np.random.default_rng(0)
    X, D = jnp.asarray(rng.normal(size=(30, 3))), jnp.asarray(rng.normal(size=(30, 3)))
    y = (X @ jnp.array([1.0, -2.0, 0.5]) > 0.2).astype(X.dtype)
    solver = gradient_regularized_newton(logistic_objective)
    p0 = {"w": jnp.zeros(3), "b": jnp.zeros(())}

    def loss(X):
        sol = jaxsolve.solve(solver, p0, (X, y, 0.1), tol=1e-13, adjoint=jaxsolve.Implicit())
        return jnp.sum(jnp.arange(1.0, 4.0) * sol.x["w"]) + sol.x["b"]

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one compilation for all three
    h = 1e-6
    fd = (value_and_grad(X + h * D)[0] - value_and_grad(X - h * D)[0]) / (2 * h)
    np.testing.assert_allclose(float(jnp.vdot(value_and_grad(X)[1], D)), float(fd), rtol=1e-6)
