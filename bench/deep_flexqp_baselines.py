"""Deep FlexQP against its baselines: hand-tuned FlexQP, a scalar-parameter unrolled solver, OSQP.

For each class of `jaxsolve.qp.train.problem_set` (about ``--n`` variables; train and
test sets from different seeds) two solvers are trained by deep unfolding on the same
problems and targets (``K = 50`` unrolled, the paper's loss, Adam, ``--steps``
minibatches of 16, Ruiz-scaled problems):

* learned: the row-wise LSTM policies (`Policies.learned`, Adam ``--lr``, default 5e-3:
  at 100 steps Adam 1e-3, `train_policy`'s default, leaves them under-trained; on the
  random class, 200 training problems, the median error at 100 iterations was 6.4e-3
  with 1e-3 and 1.2e-3 with 5e-3, against hand-tuned FlexQP's 1.2e-2); as `train_policy` returns them, with ``horizon = 50``: from
  iteration 50 on they hold their last parameters (tables made before 3b319b4 ran the
  policies on at every iteration);
* scalar: `Policies.scalar` with ``--horizon`` iterations (default 50 = K): one
  trainable ``(rho, mu)`` for inequality rows, one for equality rows and one
  ``alpha`` per iteration, the same for every row and every problem, held at the
  iteration-50 values beyond the horizon; started at hand-tuned FlexQP's constants and
  trained with Adam ``--scalar-lr`` (default 0.05: with 1e-3, 40 steps move a logit by
  at most 0.04, i.e. the baseline would stay untrained).

On the test set, at a fixed budget of 100 iterations (no polish), with FlexQP's
relaxed-KKT error (`jaxsolve.qp.residuals.kkt_residuals`) throughout:

* median error after 100 iterations, and median iterations to 1e-3 within 400;
* hand-tuned `flexqp` (Ruiz scaling, adaptive rho, weight escalation; checks every 10
  iterations, so its counts are upper bounds within 9);
* OSQP (the ``osqp`` package, its defaults: scaling 10, adaptive rho every 50
  iterations, alpha 1.6; polishing off, ``eps_abs = eps_rel = 1e-14`` so that it
  never stops on its own test): OSQP returns no iterates, so it is run once per
  ``max_iter`` in 10, 20, ..., 400 from a cold start, and our error is evaluated on
  the returned ``(x, y)`` with ``z = clip(A x, l, u)`` (its primal residual is then the
  bound violation of ``A x``). OSQP's rho adaptation depends only on the iteration
  count, so the run with ``max_iter = k`` is the first k iterations of a longer run.
  Its counts are at the same 10-iteration grid as flexqp's.

``--gen`` adds the generalization section: the policies trained at ``--n`` are run on
``--gen-test`` problems of the same class at ``--gen-n`` variables (iteration ratio to
1e-3 against flexqp), the horizon checks (the learned solver's error after 4x the
trained horizon, 200 iterations, against its error at 50; and after 400 against 100;
problems whose error ends above its value at the horizon), and the exactness check:
400 learned iterations then FlexQP's active-set polish (`jaxsolve.qp.polish.polish`,
at the policies' last elastic weights), against OSQP at ``eps = 1e-10`` with
polishing, on the test problems OSQP solves.

``--horizon-check`` runs only the horizon checks, for four ways of running the
learned solver past its trained horizon (K = 50): the policies at every iteration
(``with_horizon(None)``, the LSTM extrapolating), the parameters held from iteration 50
on (what `train_policy` returns: ``horizon = 50``) returning the last iterate
(``keep_best=False``) or the best iterate since 50 (the default), and held from 50
on with the penalties rescaled by OSQP's rule (``past_horizon="adapt"``, best since 50).
The errors are those of the returned point after each budget. Per way: the
problems whose error after 200 (400) iterations is above their error at 50 (100), the
largest such final error, how many of them end above 1e-10 (above rounding), and the
median error at 100 and iterations to 1e-3 (the fixed-budget table's columns, which
holding from 50 can change). It writes ``bench/results/deep_flexqp_horizon.md``.
"""

from __future__ import annotations

import argparse
import datetime
import time

from _util import setup, write_results

setup(threads=None)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxsolve  # noqa: E402
import peers.osqp  # noqa: E402
from jaxsolve.qp import flexqp  # noqa: E402
from jaxsolve.qp.deep import DeepFlexQP, Policies  # noqa: E402
from jaxsolve.qp.polish import polish  # noqa: E402
from jaxsolve.qp.residuals import kkt_residuals  # noqa: E402
from jaxsolve.qp.scaling import prepare_scaled, scaled_with, unscale  # noqa: E402
from jaxsolve.qp.train import CLASSES, problem_set, reference_solutions, train_policy  # noqa: E402

GRID = np.arange(10, 401, 10)  # OSQP's max_iter grid


def _run(solver, qps, steps):
    """Per-problem error after each step (``(B, steps)``) and the final solutions."""
    run = jax.jit(
        jax.vmap(
            lambda qp: jaxsolve.solve(
                solver, jnp.zeros(qp.q.shape[0]), qp, max_steps=steps, tol=0.0, history=True
            )
        )
    )
    sol = run(qps)
    return np.asarray(sol.history), sol


def _to_tol(hist, per_step, tol=1e-3):
    hit = hist <= tol
    return np.where(hit.any(1), hit.argmax(1) + 1, np.inf) * per_step


@jax.jit
def _our_error(qps, x, y):
    """FlexQP's relaxed-KKT error at ``(x, clip(A x, l, u), y)``, unscaled, per problem."""
    hparams = flexqp().hyper(qps.q.dtype)

    def one(qp, x, y):
        d = prepare_scaled(qp, hparams, 0)
        z = jnp.clip(qp.A @ x, qp.l, qp.u)
        return kkt_residuals(d, x, z, y, jnp.asarray(False)).kkt

    return jax.vmap(one)(qps, x, y)


def _osqp_solutions(qps, **settings):
    """OSQP's ``(x, y, status)`` on every problem of the batch."""
    xs, ys, st = [], [], []
    for i in range(qps.q.shape[0]):
        qp = jax.tree.map(lambda v, i=i: np.asarray(v[i]), qps)
        r = peers.osqp.solve_qp(qp, **settings)
        xs.append(np.asarray(r.x, float))
        ys.append(np.asarray(r.y, float))
        st.append(r.info.status)
    return np.stack(xs), np.stack(ys), st


def _osqp_history(qps):
    """``(B, len(GRID))`` our error after ``k`` OSQP iterations, ``k`` in `GRID`."""
    cols = []
    for k in GRID:
        x, y, _ = _osqp_solutions(
            qps, max_iter=int(k), eps_abs=1e-14, eps_rel=1e-14, polishing=False
        )
        cols.append(np.asarray(_our_error(qps, jnp.asarray(x), jnp.asarray(y))))
    return np.stack(cols, axis=1)


@jax.jit
def _polished(qps, sol):
    """The learned solver's final iterates polished (FlexQP's active-set polish at the
    policies' last per-row elastic weights), in the problem's units."""
    hparams = flexqp().hyper(qps.q.dtype)

    def one(qp, st):
        d = scaled_with(qp, hparams, *st.scale)
        xs, zs, ys = st.x / d.D, st.z * d.E, st.y * d.c / d.E
        level = st.mu * d.E  # row_mu(d, level) = level / E = the policies' mu
        res0 = kkt_residuals(d, xs, zs, ys, jnp.asarray(False))
        delta = jnp.maximum(hparams.delta, 1e3 * jnp.finfo(xs.dtype).eps)
        x, z, y, _ = polish(
            d, xs, zs, ys, level, delta, 5, 3, jnp.asarray(False), res0, fine=6, fine_refine=20
        )
        return unscale(d, x, z, y)[0]

    return jax.vmap(one)(qps, sol.state)


def _train(policies, tr, xs, ys, steps, lr):
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(lr))
    return train_policy(policies, tr, xs, ys, K=50, steps=steps, batch_size=16, optimizer=opt)


def _fmt_it(v):
    return "inf" if not np.isfinite(v) else f"{v:.0f}"


def _write(rows, gens, a):
    cmd = (
        f"python bench/deep_flexqp_baselines.py --classes {a.classes} --n {a.n} --train {a.train} "
        f"--test {a.test} --steps {a.steps}"
        + (f" --gen --gen-n {a.gen_n} --gen-test {a.gen_test}" if a.gen else "")
    )
    lines = [
        "# Deep FlexQP against hand-tuned FlexQP, a scalar-parameter unrolled baseline and OSQP",
        "",
        f"`{cmd}` on {datetime.date.today()}, float64, {jax.default_backend()}; K = 50 "
        f"unrolled, minibatches of 16, {a.steps} training steps (learned: Adam {a.lr}; scalar: "
        f"Adam {a.scalar_lr}, horizon {a.horizon}). Method and settings: the docstring of "
        "`bench/deep_flexqp_baselines.py`.",
        "",
        "Median relaxed-KKT error after 100 iterations (no polish):",
        "",
        "| class | n | m | flexqp | OSQP | scalar | learned | learned/flexqp | train learned / "
        "scalar (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cls']} | {r['n']} | {r['m']} | {r['e_hand']:.2e} | {r['e_osqp']:.2e} | "
            f"{r['e_scalar']:.2e} | {r['e_learn']:.2e} | {r['e_learn'] / r['e_hand']:.2g} | "
            f"{r['t_learn']:.0f} / {r['t_scalar']:.0f} |"
        )
    lines += [
        "",
        "Median iterations to 1e-3 (within 400; flexqp and OSQP on a 10-iteration grid):",
        "",
        "| class | flexqp | OSQP | scalar | learned | learned/flexqp | learned/OSQP | "
        "learned/scalar |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ih, io, isc, il = r["i_hand"], r["i_osqp"], r["i_scalar"], r["i_learn"]
        lines.append(
            f"| {r['cls']} | {_fmt_it(ih)} | {_fmt_it(io)} | {_fmt_it(isc)} | {_fmt_it(il)} | "
            f"{il / ih:.2f} | {il / io:.2f} | {il / isc:.2f} |"
        )
    if gens:
        lines += [
            "",
            f"Generalization: the policies trained at n = {a.n} run on {a.gen_test} problems "
            f"of the class at --gen-n {a.gen_n}; horizon checks on the {a.test} test problems "
            "at the training size (error after 200 vs 50 iterations, 400 vs 100: the count of "
            "problems whose error ends above its value at the horizon, and the largest ratio); "
            "exactness: 400 learned iterations + polish against OSQP (eps 1e-10, polished), "
            "max over the problems OSQP solves of ||x - x_osqp||_inf.",
            "",
            "| class | n, m (test) | flexqp it. | learned it. | ratio | err@100 flexqp / "
            "learned | 200 > 50 | max ratio | their max err | 400 > 100 | max ratio | their max err | "
            "max dist. no polish | polished | within 1e-4 |",
            "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for g in gens:
            lines.append(
                f"| {g['cls']} | {g['n']}, {g['m']} | {_fmt_it(g['i_hand'])} | "
                f"{_fmt_it(g['i_learn'])} | {g['i_learn'] / g['i_hand']:.2f} | "
                f"{g['e_hand']:.1e} / {g['e_learn']:.1e} | {g['up50']} | {g['r50']:.2g} | "
                f"{g['e50']:.1e} | {g['up100']} | {g['r100']:.2g} | {g['e100']:.1e} | {g['d_raw']:.1e} | {g['d_pol']:.1e} | "
                f"{g['ok']}/{g['n_ok']} |"
            )
    write_results("deep_flexqp", "\n".join(lines) + "\n", quick=a.quick, out=a.out)


def _horizon_check(a):
    """``--horizon-check`` (module docstring)."""
    import os

    rows = []
    for cls in a.classes.split(","):
        t0, load0 = time.process_time(), os.getloadavg()[0]
        tr = problem_set(cls, a.train, a.n, seed=0)
        te = problem_set(cls, a.test, a.n, seed=1)
        xs, ys, st = reference_solutions(tr)
        keep = np.flatnonzero(np.asarray(st) == 0)
        tr, xs, ys = jax.tree.map(lambda v, k=keep: v[k], (tr, xs, ys))
        pol = _train(Policies.learned(jax.random.key(0)), tr, xs, ys, a.steps, a.lr).policies
        for way, solver in (
            ("policies run on", DeepFlexQP(pol.with_horizon(None))),
            ("held from 50, last iterate", DeepFlexQP(pol, keep_best=False)),
            ("held from 50, best since 50 (default)", DeepFlexQP(pol)),
            ("adapt from 50, best since 50", DeepFlexQP(pol, past_horizon="adapt")),
        ):
            h, _ = _run(solver, te, 400)
            r = dict(cls=cls, way=way, med100=np.median(h[:, 99]), it=np.median(_to_tol(h, 1)))
            for hz in (50, 100):
                end = h[:, 4 * hz - 1]
                up = end > h[:, hz - 1]
                r[f"up{hz}"] = int(up.sum())
                r[f"big{hz}"] = int(np.sum(up & (end > 1e-10)))
                r[f"e{hz}"] = float(np.max(end[up], initial=0.0))
            rows.append(r)
            print(r, flush=True)
        rows[-1]["cost"] = (
            f"{time.process_time() - t0:.0f} CPU s, load {load0:.1f}-{os.getloadavg()[0]:.1f}"
        )
        lines = [
            "# Deep FlexQP past its training horizon (K = 50): policies run on, or parameters held",
            "",
            f"`python bench/deep_flexqp_baselines.py --horizon-check --classes {a.classes} "
            f"--n {a.n} --train {a.train} --test {a.test} --steps {a.steps}` on "
            f"{datetime.date.today()}, float64, {jax.default_backend()}; the learned policies "
            f"as in deep_flexqp.md (K = 50, Adam {a.lr}, minibatches of 16). Per class and way: "
            "problems whose error after 200 (400) iterations ends above its error at 50 (100), "
            "how many of them end above 1e-10, the largest such final error; the median error "
            "at 100 and iterations to 1e-3 (within 400). Method: the docstring of "
            "`bench/deep_flexqp_baselines.py`.",
            "",
            "| class | past the horizon | 200 > 50 | of them > 1e-10 | their max err | "
            "400 > 100 | of them > 1e-10 | their max err | err@100 | it. to 1e-3 | CPU, load |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        lines += [
            f"| {r['cls']} | {r['way']} | {r['up50']} | {r['big50']} | {r['e50']:.1e} | "
            f"{r['up100']} | {r['big100']} | {r['e100']:.1e} | {r['med100']:.2e} | "
            f"{_fmt_it(r['it'])} | {r.get('cost', '')} |"
            for r in rows
        ]
        write_results("deep_flexqp_horizon", "\n".join(lines) + "\n", quick=a.quick, out=a.out)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--train", type=int, default=64)
    ap.add_argument("--test", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--horizon", type=int, default=50)
    ap.add_argument("--scalar-lr", type=float, default=0.05)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--gen", action="store_true")
    ap.add_argument("--gen-n", type=int, default=200)
    ap.add_argument("--gen-test", type=int, default=16)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--horizon-check", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.classes, a.n, a.train, a.test, a.steps, a.gen_n, a.gen_test = "random", 8, 16, 8, 3, 16, 4
    if a.horizon_check:
        return _horizon_check(a)
    hand = flexqp(polish=False, check_every=10)
    rows, gens = [], []
    for cls in a.classes.split(","):
        t0 = time.perf_counter()
        tr = problem_set(cls, a.train, a.n, seed=0)
        te = problem_set(cls, a.test, a.n, seed=1)
        xs, ys, st = reference_solutions(tr)
        keep = np.flatnonzero(np.asarray(st) == 0)
        if keep.size < a.train:
            print(f"{cls}: {a.train - keep.size} training problems without a reference dropped")
            tr, xs, ys = jax.tree.map(lambda v, k=keep: v[k], (tr, xs, ys))
        res_l = _train(Policies.learned(jax.random.key(0)), tr, xs, ys, a.steps, a.lr)
        res_s = _train(Policies.scalar(a.horizon), tr, xs, ys, a.steps, a.scalar_lr)
        learned, scalar = DeepFlexQP(res_l.policies), DeepFlexQP(res_s.policies)
        h_hand, _ = _run(hand, te, 40)
        h_learn, sol_learn = _run(learned, te, 400)
        h_scalar, _ = _run(scalar, te, 400)
        h_osqp = _osqp_history(te)
        r = dict(
            cls=cls,
            n=tr.q.shape[1],
            m=tr.l.shape[1],
            e_hand=np.median(h_hand[:, 9]),
            e_osqp=np.median(h_osqp[:, 9]),
            e_scalar=np.median(h_scalar[:, 99]),
            e_learn=np.median(h_learn[:, 99]),
            i_hand=np.median(_to_tol(h_hand, 10)),
            i_osqp=np.median(_to_tol(h_osqp, 10)),
            i_scalar=np.median(_to_tol(h_scalar, 1)),
            i_learn=np.median(_to_tol(h_learn, 1)),
            t_learn=res_l.seconds,
            t_scalar=res_s.seconds,
        )
        rows.append(r)
        print(
            f"{cls}: err@100 flexqp {r['e_hand']:.2e} osqp {r['e_osqp']:.2e} scalar "
            f"{r['e_scalar']:.2e} learned {r['e_learn']:.2e}; it. to 1e-3 {r['i_hand']} / "
            f"{r['i_osqp']} / {r['i_scalar']} / {r['i_learn']} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        if a.gen:
            g = dict(cls=cls)
            # horizon: 4x the trained 50 (200 vs 50) and 4x the 100 budget (400 vs 100)
            for hz, name in ((50, "50"), (100, "100")):
                ratio = h_learn[:, 4 * hz - 1] / h_learn[:, hz - 1]
                up = ratio > 1.0
                g["up" + name] = int(np.sum(up))
                g["r" + name] = float(np.max(ratio))
                # how large the errors that end above their horizon value are (rounding?)
                g["e" + name] = float(np.max(h_learn[up, 4 * hz - 1], initial=0.0))
            xo, _, sto = _osqp_solutions(
                te, eps_abs=1e-10, eps_rel=1e-10, polishing=True, max_iter=100000
            )
            ok = np.array([s == "solved" for s in sto])
            x_raw = np.asarray(sol_learn.x)
            x_pol = np.asarray(_polished(te, sol_learn))
            d_raw = np.max(np.abs(x_raw - xo), axis=1)[ok]
            d_pol = np.max(np.abs(x_pol - xo), axis=1)[ok]
            g.update(
                d_raw=d_raw.max(),
                d_pol=d_pol.max(),
                ok=int(np.sum(d_pol <= 1e-4)),
                n_ok=int(ok.sum()),
            )
            big = problem_set(cls, a.gen_test, a.gen_n, seed=2)
            hb_hand, _ = _run(hand, big, 40)
            hb_learn, _ = _run(learned, big, 400)
            g.update(
                n=big.q.shape[1],
                m=big.l.shape[1],
                i_hand=np.median(_to_tol(hb_hand, 10)),
                i_learn=np.median(_to_tol(hb_learn, 1)),
                e_hand=np.median(hb_hand[:, 9]),
                e_learn=np.median(hb_learn[:, 99]),
            )
            gens.append(g)
            print(f"{cls} generalization: {g} ({time.perf_counter() - t0:.0f} s)", flush=True)
        _write(rows, gens, a)  # after every class, so a stopped run keeps its table


if __name__ == "__main__":
    main()
