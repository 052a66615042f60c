"""``make demo`` entry: gradient-regularized Newton and Levenberg-Marquardt.

1. L2-regularized logistic regression on scikit-learn's breast_cancer (standardized,
   float64): gradient-regularized Newton vs optax's L-BFGS (iterations), checked against
   scikit-learn's LogisticRegression.
2. sin(2 pi 8 x) with a one-hidden-layer MLP: Levenberg-Marquardt reaches MSE 1e-4; Adam
   (lr 1e-2) after ten times as many steps is reported next to it (spectral bias).
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxsolve
from examples._common import main, row_from_solution
from jaxsolve.second_order import gauss_newton, gradient_regularized_newton
from jaxsolve.second_order.problems import (
    logistic_objective,
    sine_mlp_problem,
    sine_mlp_residual,
)


def _lbfgs_iters(fun, x0, args, tol):
    opt = optax.lbfgs()
    f = lambda p: fun(p, args)
    vg = optax.value_and_grad_from_state(f)

    @jax.jit
    def run(p):
        def cond(c):
            _, s, k = c
            return (k == 0) | ((optax.tree.norm(optax.tree.get(s, "grad")) > tol) & (k < 2000))

        def body(c):
            p, s, k = c
            v, g = vg(p, state=s)
            u, s = opt.update(g, s, p, value=v, grad=g, value_fn=f)
            return optax.apply_updates(p, u), s, k + 1

        return jax.lax.while_loop(cond, body, (p, opt.init(p), 0))[2]

    return int(run(x0))


def run(out_dir) -> list[dict]:
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rows = []
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    args = (jnp.asarray(X), jnp.asarray(y, jnp.float64), 1.0 / X.shape[0])
    x0 = {"w": jnp.zeros(X.shape[1]), "b": jnp.zeros(())}
    solver = gradient_regularized_newton(logistic_objective)
    fn = jax.jit(lambda x, a: jaxsolve.solve(solver, x, a, tol=1e-8, max_steps=100, history=True))
    jax.block_until_ready(fn(x0, args))
    t0 = time.perf_counter()
    sol = jax.block_until_ready(fn(x0, args))
    seconds = time.perf_counter() - t0
    clf = LogisticRegression(C=1.0, tol=1e-12, max_iter=1000, solver="newton-cholesky").fit(X, y)
    ours = np.concatenate([np.asarray(sol.x["w"]), np.atleast_1d(np.asarray(sol.x["b"]))])
    ref = np.concatenate([clf.coef_.ravel(), clf.intercept_])
    dist = np.linalg.norm(ours - ref) / max(1.0, np.linalg.norm(ref))
    k_lbfgs = _lbfgs_iters(logistic_objective, x0, args, 1e-8)
    rows.append(
        row_from_solution(
            "logistic regression, breast_cancer",
            "569x30",
            "gradient_regularized_newton",
            sol,
            seconds,
            f"sklearn rel. dist {dist:.1e}; optax.lbfgs needs {k_lbfgs} iterations",
        )
    )

    # spectral bias
    params, data = sine_mlp_problem(seed=0, n=128, width=64, freq=8.0, scale=20.0)
    mse = lambda p: jnp.mean(sine_mlp_residual(p, data) ** 2)
    lm = gauss_newton(sine_mlp_residual, damping=1e-3)

    @jax.jit
    def lm_curve(p):
        def body(s, _):
            s, _ = lm.step(s, data)
            return s, mse(s.x)

        return jax.lax.scan(body, lm.init(p, data), None, length=250)[1]

    jax.block_until_ready(lm_curve(params))
    t0 = time.perf_counter()
    curve = np.asarray(lm_curve(params))
    seconds = time.perf_counter() - t0
    hit = np.nonzero(curve <= 1e-4)[0]
    k_lm = int(hit[0]) + 1 if hit.size else None
    opt = optax.adam(1e-2)

    @jax.jit
    def adam_min(p):
        def body(c, _):
            p, s = c
            u, s = opt.update(jax.grad(mse)(p), s, p)
            p = optax.apply_updates(p, u)
            return (p, s), mse(p)

        return jnp.min(jax.lax.scan(body, (p, opt.init(p)), None, length=2500)[1])

    adam_best = float(adam_min(params))
    rows.append(
        {
            "problem": "sin(2 pi 8 x), MLP width 64",
            "size": "128 pts",
            "solver": "gauss_newton (LM)",
            # 250 LM steps recorded by a scan: a fixed budget, not a solve with a stopping
            # test; the row reports the MSE reached and the step it first fell below 1e-4
            "status": "fixed budget",
            "steps": 250,
            "error": "",
            "metric": f"MSE {float(curve[-1]):.1e}"
            + (f" (<= 1e-4 at step {k_lm})" if k_lm is not None else " (never <= 1e-4)"),
            "time": seconds,
            "reference": f"Adam(1e-2) best MSE in 2500 steps: {adam_best:.1e}",
            "history": curve,
        }
    )
    return rows


if __name__ == "__main__":
    sys.exit(main("second_order", run))
