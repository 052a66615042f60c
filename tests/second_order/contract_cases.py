"""Contract cases for jaxsolve.second_order (tiny problems: the contract runs 8 checks each)."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from jaxsolve.second_order import gauss_newton, gradient_regularized_newton
from jaxsolve.testing import SolverCase

# ------------------------------------------------ L2-regularized logistic regression


def logistic_fun(x, args):
    """mean log-loss + mu/2 |w|^2, x = (w, b) flat, the intercept b unpenalized."""
    X, y, mu = args
    z = X @ x[:-1] + x[-1]
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 0.5 * mu * jnp.sum(x[:-1] ** 2)


def _logistic_problem(key, dtype):
    k1, k2, k3 = jax.random.split(key, 3)
    scale = 1.0 + 3.0 * jax.random.uniform(k3)  # different separability -> different step counts
    X = jax.random.normal(k1, (40, 3), dtype)
    w = jnp.array([1.5, -2.0, 0.5], dtype) * scale
    p = jax.nn.sigmoid(X @ w)
    y = (jax.random.uniform(k2, (40,)) < p).astype(dtype)
    return jnp.zeros(4, dtype), (X, y, jnp.asarray(0.05, dtype))


def _logistic_reference(args):
    X, y, mu = (np.asarray(a, np.float64) for a in args)
    f = lambda x: float(logistic_fun(jnp.asarray(x), (X, y, mu)))
    g = lambda x: np.asarray(jax.grad(logistic_fun)(jnp.asarray(x), (X, y, mu)))
    res = scipy.optimize.minimize(f, np.zeros(4), jac=g, method="BFGS", options={"gtol": 1e-12})
    return res.x


def _with_nan(args):
    X, y, mu = args
    return X.at[0, 0].set(jnp.nan), y, mu


GRN_CASE = SolverCase(
    name="gradient_regularized_newton.gradient_regularized_newton",
    make_solver=lambda **hp: gradient_regularized_newton(logistic_fun, **hp),
    make_problem=_logistic_problem,
    reference=_logistic_reference,
    tol=1e-10,
    max_steps=100,
    accuracy=1e-7,
    hyper_variants=({"gamma0": 1.0}, {"gamma0": 3.0}, {"gamma_min": 1e-6}),
    nan_args=_with_nan,
    bad_inputs=(
        lambda: gradient_regularized_newton(logistic_fun, hessian="bogus"),
        lambda: gradient_regularized_newton(logistic_fun, linear_solver="qr"),
        lambda: gradient_regularized_newton(logistic_fun, gamma0=-1.0),
        lambda: gradient_regularized_newton(None),
        lambda: gradient_regularized_newton(logistic_fun, hessian="gauss_newton"),
    ),
)

# ------------------------------------------------ nonlinear least squares: exponential fit

T = np.linspace(0.0, 1.0, 12)


def exp_residual(x, args):
    t, y = args
    return x[0] * jnp.exp(x[1] * t) + x[2] - y


def _exp_problem(key, dtype):
    k1, k2 = jax.random.split(key)
    truth = jnp.array([1.0, -1.0, 0.5]) + 0.5 * jax.random.normal(k1, (3,))
    t = jnp.asarray(T, dtype)
    y = exp_residual(truth.astype(dtype), (t, jnp.zeros_like(t))) + 0.01 * jax.random.normal(
        k2, (12,), dtype
    )
    return jnp.array([1.0, 0.0, 0.0], dtype), (t, y.astype(dtype))


def _exp_reference(args):
    t, y = (np.asarray(a, np.float64) for a in args)
    res = scipy.optimize.least_squares(
        lambda x: x[0] * np.exp(x[1] * t) + x[2] - y,
        np.array([1.0, 0.0, 0.0]),
        method="lm",
        xtol=1e-15,
        ftol=1e-15,
        gtol=1e-15,
    )
    return res.x


def _exp_nan(args):
    t, y = args
    return t, y.at[3].set(jnp.nan)


GN_CASE = SolverCase(
    name="gauss_newton.gauss_newton",
    make_solver=lambda **hp: gauss_newton(exp_residual, **hp),
    make_problem=_exp_problem,
    reference=_exp_reference,
    tol=1e-10,
    max_steps=200,
    accuracy=1e-6,
    hyper_variants=({"damping": 1e-3}, {"damping": 1e-1}, {"damping": 1.0}),
    nan_args=_exp_nan,
    bad_inputs=(
        lambda: gauss_newton(exp_residual, damping=-1.0),
        lambda: gauss_newton(exp_residual, damping=0.0),  # adaptive LM needs mu > 0
        lambda: gauss_newton(exp_residual, linear_solver="qr"),
        lambda: gauss_newton(exp_residual, form="dual"),
        lambda: gauss_newton("not a function"),
    ),
)

CASES = [GRN_CASE, GN_CASE]
