"""Second-order benchmark: gradient-regularized Newton vs L-BFGS, Gauss-Newton/LM vs Adam.

1. L2-regularized logistic regression (breast_cancer, 569 x 30) and softmax regression
   (digits, 1,797 x 64, 10 classes), standardized, float64, C = 1 (sklearn's objective
   divided by n). Stop at ||grad|| <= 1e-8. Ours: ``gradient_regularized_newton``
   (arXiv 2506.13710) with the exact Hessian, dense and matrix-free CG solves. Peers:
   ``optax.lbfgs`` (zoom line search), ``jaxopt.LBFGS`` (if installed), scikit-learn
   ``LogisticRegression(newton-cholesky, tol=1e-12)`` (also the accuracy reference).
   Reported: iterations, compile time, steady-state time (best of repeats), relative
   distance to sklearn's solution, and ratios ours / peer.
2. Spectral bias (arXiv 2601.03162): fit sin(2 pi 8 x) on 128 points of [0, 1] with a
   one-hidden-layer tanh MLP (width 64; first-layer weights N(0, 20^2), biases
   U(-20, 20), so its features can represent the frequency; same init for all). Steps
   to MSE 1e-4: Levenberg-Marquardt (adaptive damping, the solver), LM with fixed
   damping 1e-3 and learning rate 0.2 as an optax chain (``scale_by_gauss_newton``:
   the paper's preconditioned GD; lr 1 is unstable here without LM's acceptance
   test), and Adam at 3 learning
   rates with a budget of 10,000 steps (3,000 in --quick).
3. ``--full`` only (slow): modular-addition grokking (a + b mod 23, 50% of the pairs
   for training; one-hot inputs, a width-128 MLP with quadratic activation, MSE on
   one-hot targets): steps until train and test accuracy reach 95% for AdamW
   (weight decay) and for Gauss-Newton-preconditioned GD (matrix-free CG), with and
   without decoupled weight decay. Settings are ours (the paper's were not readable).
   One GN step costs up to 50 CG iterations (a JVP and a VJP each), one AdamW step one
   gradient: compare step counts with that in mind (wall-clock is in the table).

``--quick`` (CI): part 1 with fewer repeats, part 2 with the smaller Adam budget.
"""

from __future__ import annotations

import argparse
import sys
import time

from _util import peer, setup, write_results

setup(threads=None)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxsolve  # noqa: E402
from jaxsolve.second_order import (  # noqa: E402
    gauss_newton,
    gradient_regularized_newton,
    scale_by_gauss_newton,
)
from jaxsolve.second_order.problems import (  # noqa: E402
    logistic_objective,
    sine_mlp_problem,
    sine_mlp_residual,
    softmax_objective,
)
from peers.timing import compile_and_steady  # noqa: E402

jaxopt, JAXOPT_MISSING = peer("jaxopt")

TOL = 1e-8


# ----------------------------------------------------------------------------- part 1


def problems():
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.preprocessing import StandardScaler

    out = {}
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    out["logistic / breast_cancer"] = (
        X,
        y,
        logistic_objective,
        (jnp.asarray(X), jnp.asarray(y, jnp.float64), 1.0 / X.shape[0]),
        {"w": jnp.zeros(X.shape[1]), "b": jnp.zeros(())},
    )
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    out["softmax / digits"] = (
        X,
        y,
        softmax_objective,
        (jnp.asarray(X), jnp.asarray(np.eye(10)[y]), 1.0 / X.shape[0]),
        {"W": jnp.zeros((X.shape[1], 10)), "b": jnp.zeros(10)},
    )
    return out


def sklearn_solution(X, y):
    import threadpoolctl
    from sklearn.linear_model import LogisticRegression

    with threadpoolctl.threadpool_limits(1):  # shared machine: avoid BLAS oversubscription
        t0 = time.perf_counter()
        clf = LogisticRegression(C=1.0, tol=1e-12, max_iter=1000, solver="newton-cholesky").fit(
            X, y
        )
        seconds = time.perf_counter() - t0
    if clf.coef_.shape[0] == 1:
        flat = np.concatenate([clf.coef_.ravel(), clf.intercept_])
    else:
        flat = np.concatenate([clf.coef_.ravel(), clf.intercept_ - clf.intercept_.mean()])
    return flat, int(np.max(clf.n_iter_)), seconds


def flat_solution(p):
    if "w" in p:
        return np.concatenate([np.asarray(p["w"]), np.atleast_1d(np.asarray(p["b"]))])
    b = np.asarray(p["b"])
    return np.concatenate([np.asarray(p["W"]).T.ravel(), b - b.mean()])


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(1.0, np.linalg.norm(b)))


def timed(fn, *args, repeat=3):
    """``(out, compile seconds, best of repeat seconds)`` of ``jax.jit(fn)(*args)``."""
    jitted = jax.jit(fn)
    out, best, compile_s = compile_and_steady(lambda: jitted(*args), repeat, stat="min")
    return out, compile_s, best


def run_grn(fun, x0, args, linear_solver, repeat):
    solver = gradient_regularized_newton(fun, linear_solver=linear_solver, cg_maxiter=200)
    sol, c, t = timed(
        lambda x, a: jaxsolve.solve(solver, x, a, tol=TOL, max_steps=200), x0, args, repeat=repeat
    )
    return sol.x, int(sol.num_steps), float(sol.error), c, t


def run_optax_lbfgs(fun, x0, args, repeat, max_iter=5000):
    opt = optax.lbfgs()

    def solve(p, args):
        f = lambda q: fun(q, args)
        vg = optax.value_and_grad_from_state(f)

        def cond(c):
            _, s, k = c
            return (k == 0) | ((optax.tree.norm(optax.tree.get(s, "grad")) > TOL) & (k < max_iter))

        def body(c):
            p, s, k = c
            v, g = vg(p, state=s)
            u, s = opt.update(g, s, p, value=v, grad=g, value_fn=f)
            return optax.apply_updates(p, u), s, k + 1

        p, _, k = jax.lax.while_loop(cond, body, (p, opt.init(p), 0))
        return p, k

    (p, k), c, t = timed(solve, x0, args, repeat=repeat)
    return p, int(k), float(optax.tree.norm(jax.grad(fun)(p, args))), c, t


def run_jaxopt_lbfgs(fun, x0, args, repeat):
    solver = jaxopt.LBFGS(fun=fun, tol=TOL, maxiter=5000)
    (p, state), c, t = timed(lambda x, a: solver.run(x, a), x0, args, repeat=repeat)
    return p, int(state.iter_num), float(optax.tree.norm(jax.grad(fun)(p, args))), c, t


def part1(repeat):
    lines = [
        "## 1. L2-regularized logistic / softmax regression to ||grad|| <= 1e-8 (float64)",
        "",
        "| problem | solver | iterations | final ||grad|| | rel. dist. to sklearn | compile s | run s |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for name, (X, y, fun, args, x0) in problems().items():
        ref, sk_iter, sk_s = sklearn_solution(X, y)
        rows = {
            "GRN exact, dense (ours)": run_grn(fun, x0, args, "dense", repeat),
            "GRN exact, CG (ours)": run_grn(fun, x0, args, "cg", repeat),
            "optax.lbfgs": run_optax_lbfgs(fun, x0, args, repeat),
        }
        if jaxopt is not None:
            rows["jaxopt.LBFGS"] = run_jaxopt_lbfgs(fun, x0, args, repeat)
        for solver, (p, k, g, c, t) in rows.items():
            lines.append(
                f"| {name} | {solver} | {k} | {g:.1e} | {rel(flat_solution(p), ref):.1e} | "
                f"{c:.2f} | {t:.3f} |"
            )
        lines.append(
            f"| {name} | sklearn newton-cholesky (1 thread) | {sk_iter} | - | 0 | - | {sk_s:.3f} |"
        )
        best_ours = min(
            ("GRN exact, dense (ours)", "GRN exact, CG (ours)"), key=lambda s: rows[s][4]
        )
        k_o, t_o = rows[best_ours][1], rows[best_ours][4]
        k_l, t_l = rows["optax.lbfgs"][1], rows["optax.lbfgs"][4]
        ratios.append(
            f"- {name}: {best_ours} / optax.lbfgs: iterations {k_o}/{k_l} = {k_o / k_l:.3f}, "
            f"time {t_o:.3f}/{t_l:.3f} s = {t_o / t_l:.2f}"
        )
    if jaxopt is None:
        lines.append(f"\n({JAXOPT_MISSING})")
    return lines + [""] + ratios


# ----------------------------------------------------------------------------- part 2


def first_hit(curve, target):
    hit = np.nonzero(np.asarray(curve) <= target)[0]
    return int(hit[0]) + 1 if hit.size else None


def part2(adam_budget, seeds=(0, 1, 2)):
    target = 1e-4
    lines = [
        "## 2. Spectral bias: sin(2 pi 8 x), one-hidden-layer MLP (width 64), steps to MSE 1e-4",
        "",
        "| seed | LM (solver) | GN-preconditioned GD, damping 1e-3, lr 0.2 (optax chain) | "
        "Adam 1e-3 | Adam 3e-3 | Adam 1e-2 | best Adam / LM |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for seed in seeds:
        params, args = sine_mlp_problem(seed)
        mse = lambda p, args=args: jnp.mean(sine_mlp_residual(p, args) ** 2)
        solver = gauss_newton(sine_mlp_residual, damping=1e-3)

        @jax.jit
        def lm_curve(params, solver=solver, args=args, mse=mse):
            def body(state, _):
                state, _ = solver.step(state, args)
                return state, mse(state.x)

            return jax.lax.scan(body, solver.init(params, args), None, length=500)[1]

        m = args[0].shape[0]
        tx = optax.chain(
            scale_by_gauss_newton(sine_mlp_residual, damping=1e-3 / m),
            optax.scale_by_learning_rate(0.2),
        )

        @jax.jit
        def tx_curve(params, tx=tx, args=args, mse=mse):
            loss = lambda p: 0.5 * jnp.mean(sine_mlp_residual(p, args) ** 2)

            def body(c, _):
                p, s = c
                u, s = tx.update(jax.grad(loss)(p), s, p, batch=args)
                p = optax.apply_updates(p, u)
                return (p, s), mse(p)

            return jax.lax.scan(body, (params, tx.init(params)), None, length=500)[1]

        @jax.jit
        def adam_curve(lr, params=params, mse=mse):
            opt = optax.adam(lr)

            def body(c, _):
                p, s = c
                u, s = opt.update(jax.grad(mse)(p), s, p)
                p = optax.apply_updates(p, u)
                return (p, s), mse(p)

            return jax.lax.scan(body, (params, opt.init(params)), None, length=adam_budget)[1]

        lm = first_hit(lm_curve(params), target)
        fixed = first_hit(tx_curve(params), target)
        lrs = (1e-3, 3e-3, 1e-2)
        curves = jax.vmap(adam_curve)(jnp.array(lrs))
        adam = [first_hit(cv, target) for cv in curves]
        adam_best_mse = [float(jnp.min(cv)) for cv in curves]
        hits = [a for a in adam if a is not None]
        best = min(hits) if hits else None
        fmt = lambda k, best_mse=None: (
            str(k) if k is not None else f"> {adam_budget} (min MSE {best_mse:.1e})"
        )
        if lm is None:
            ratio = "LM did not reach the target"
        elif best is None:
            ratio = f"> {adam_budget / lm:.0f}x"
        else:
            ratio = f"{best / lm:.1f}x"
        ratios.append(ratio)
        lines.append(
            f"| {seed} | {fmt(lm)} | {fmt(fixed) if fixed else '> 500'} | "
            + " | ".join(fmt(a, b) for a, b in zip(adam, adam_best_mse, strict=True))
            + f" | {ratio} |"
        )
    return lines, ratios


# ----------------------------------------------------------------------------- part 3


def grokking(p=23, frac=0.5, width=128, seed=0, adam_steps=5000, gn_steps=1500):
    """Modular addition; accuracy curves for AdamW and Gauss-Newton-preconditioned GD."""
    pairs = np.array([(a, b) for a in range(p) for b in range(p)])
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(pairs))
    n_train = int(frac * len(pairs))
    tr, te = perm[:n_train], perm[n_train:]
    X = np.concatenate([np.eye(p)[pairs[:, 0]], np.eye(p)[pairs[:, 1]]], axis=1)
    Y = np.eye(p)[(pairs[:, 0] + pairs[:, 1]) % p]
    Xtr, Ytr, Xte, Yte = (jnp.asarray(a) for a in (X[tr], Y[tr], X[te], Y[te]))
    k1, k2 = jax.random.split(jax.random.key(seed))
    params = {
        "W1": jax.random.normal(k1, (2 * p, width)) / np.sqrt(2 * p),
        "W2": jax.random.normal(k2, (width, p)) / np.sqrt(width),
    }
    net = lambda q, x: ((x @ q["W1"]) ** 2) @ q["W2"]
    resid = lambda q, batch: net(q, batch[0]) - batch[1]
    loss = lambda q: 0.5 * jnp.mean(resid(q, (Xtr, Ytr)) ** 2)
    acc = lambda q, x, y: jnp.mean(jnp.argmax(net(q, x), 1) == jnp.argmax(y, 1))

    def curves(tx, steps):
        @jax.jit
        def run(params):
            def body(c, _):
                q, s = c
                u, s = tx.update(jax.grad(loss)(q), s, q, batch=(Xtr, Ytr))
                q = optax.apply_updates(q, u)
                return (q, s), (acc(q, Xtr, Ytr), acc(q, Xte, Yte))

            return jax.lax.scan(body, (params, tx.init(params)), None, length=steps)[1]

        t0 = time.perf_counter()
        out = jax.block_until_ready(run(params))
        return np.asarray(out[0]), np.asarray(out[1]), time.perf_counter() - t0

    adamw = optax.with_extra_args_support(optax.adamw(1e-3, weight_decay=1.0))
    gn = optax.chain(
        scale_by_gauss_newton(resid, damping=1e-3, linear_solver="cg", cg_maxiter=50),
        optax.scale_by_learning_rate(0.5),
    )
    gn_wd = optax.chain(
        scale_by_gauss_newton(resid, damping=1e-3, linear_solver="cg", cg_maxiter=50),
        optax.add_decayed_weights(1e-2),
        optax.scale_by_learning_rate(0.5),
    )
    rows = []
    for name, tx, steps in (
        ("AdamW (lr 1e-3, wd 1.0)", adamw, adam_steps),
        ("GN-CG (mu 1e-3, lr 0.5)", gn, gn_steps),
        ("GN-CG + decoupled wd 1e-2", gn_wd, gn_steps),
    ):
        a_tr, a_te, seconds = curves(tx, steps)
        rows.append(
            (
                name,
                steps,
                first_hit(-a_tr, -0.95),
                first_hit(-a_te, -0.95),
                float(a_tr[-1]),
                float(a_te[-1]),
                seconds,
            )
        )
    return rows, n_train, len(pairs) - n_train


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer repeats, smaller Adam budget (CI)"
    )
    parser.add_argument("--full", action="store_true", help="also the grokking run (slow)")
    parser.add_argument("--out", default=None)
    ns = parser.parse_args(argv)
    repeat = 1 if ns.quick else 3
    budget = 3000 if ns.quick else 10000
    lines = [
        "# second_order: gradient-regularized Newton and Gauss-Newton/LM",
        "",
        f"Mode: {'--quick' if ns.quick else ('full + grokking' if ns.full else 'full')}; "
        f"CPU ({jax.devices()[0].device_kind}), shared machine (times are noisy; ratios were "
        "measured in one process).",
        "",
    ]
    lines += part1(repeat)
    lines.append("")
    l2, _ = part2(budget, seeds=(0,) if ns.quick else (0, 1, 2))
    lines += l2
    if ns.full:
        rows, n_tr, n_te = grokking()
        lines += [
            "",
            f"## 3. Grokking probe: a + b mod 23, {n_tr} train / {n_te} test pairs (slow part)",
            "",
            "| optimizer | steps run | step: train acc >= 95% | step: test acc >= 95% | final train acc | final test acc | s |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, steps, s_tr, s_te, f_tr, f_te, sec in rows:
            lines.append(
                f"| {name} | {steps} | {s_tr or 'never'} | {s_te or 'never'} | {f_tr:.3f} | {f_te:.3f} | {sec:.1f} |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    write_results("second_order", text, quick=ns.quick, out=ns.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
