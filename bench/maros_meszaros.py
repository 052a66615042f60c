"""Maros-Meszaros benchmark: FlexQP vs OSQP vs proxsuite on the problems with n <= 300, m <= 600.

Every solver runs at the same tolerance (1e-6: FlexQP ``tol``, OSQP ``eps_abs = eps_rel``
with polishing, proxsuite ``eps_abs``) and is judged against a high-accuracy reference
(the best feasible answer of proxsuite, OSQP with polishing, HiGHS and
Clarabel at 1e-10; see :func:`reference`): a problem counts as solved when the
solver reports success, the objective is within 1e-6 relative
(``|f - f*| <= 1e-6 max(1, |f*|)``) and the violation within 1e-6 relative
(``max dist(Ax, [l, u]) <= 1e-6 max(1, ||Ax||_inf)``). Every failure is listed with its reason.

    python bench/maros_meszaros.py [--quick] [--names HS21 QAFIRO ...] [--out bench/results/qp_maros_meszaros.md]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from _util import setup

setup(x64=False)

import numpy as np  # noqa: E402

TOL = 1e-6


def _objective(qp, x):
    P, q = np.asarray(qp.P), np.asarray(qp.q)
    return 0.5 * x @ P @ x + q @ x


def _viol(qp, x):
    A, l, u = (np.asarray(v) for v in (qp.A, qp.l, qp.u))
    ax = A @ x
    v = np.maximum(ax - u, 0) + np.maximum(l - ax, 0)
    return float(np.max(v, initial=0.0) / max(1.0, np.max(np.abs(ax), initial=0.0)))


def _bounds(qp):
    l, u = np.asarray(qp.l), np.asarray(qp.u)
    return np.where(np.isinf(l), -1e30, l), np.where(np.isinf(u), 1e30, u)


def run_osqp(qp, eps, max_iter=100000, time_limit=60.0):
    import peers.osqp

    s = peers.osqp.setup_qp(
        (qp.P, qp.q, qp.A, qp.l, qp.u),
        eps_abs=eps,
        eps_rel=eps,
        polishing=True,
        max_iter=max_iter,
        time_limit=time_limit,
    )
    t0 = time.perf_counter()
    r = s.solve()
    dt = time.perf_counter() - t0
    status = r.info.status
    ok = status in ("solved",)
    return r.x, ok, status, dt


def run_proxsuite(qp, eps, max_iter=100000):
    import proxsuite

    P, q, A = (np.asarray(v) for v in (qp.P, qp.q, qp.A))
    l, u = _bounds(qp)
    n, m = len(q), len(l)
    H = proxsuite.proxqp.dense.QP(n, 0, m)
    H.settings.eps_abs = eps
    H.settings.eps_rel = 0.0
    H.settings.max_iter = max_iter
    H.settings.verbose = False
    t0 = time.perf_counter()
    H.init(P, q, None, None, A, l, u)
    H.solve()
    dt = time.perf_counter() - t0
    st = H.results.info.status
    ok = st == proxsuite.proxqp.QPSolverOutput.PROXQP_SOLVED
    return np.asarray(H.results.x), ok, str(st).split(".")[-1], dt


_BUCKETS = (8, 16, 32, 64, 128, 192, 256, 320, 384, 512, 640)


def _bucket(k):
    return next(b for b in _BUCKETS if b >= k)


def pad_qp(qp):
    """Pad to this script's bucketed sizes (`jaxsolve.qp.QP.padded`), so that problems
    share compilations; the padded problem has the same solution in the first n
    variables."""
    return qp.padded(_bucket(qp.n), _bucket(qp.m))


def run_ours(qp, tol, max_steps, once=False):
    import jax

    from jaxsolve.core import Status
    from jaxsolve.qp import solve_qp

    n = qp.n
    qp = pad_qp(qp)
    t0 = time.perf_counter()
    sol = jax.block_until_ready(solve_qp(qp, tol=tol, max_steps=max_steps, implicit=False))
    t_first = time.perf_counter() - t0
    if once:  # one call: the time includes compilation (shared with earlier problems of the bucket)
        dt = t_first
    else:
        t0 = time.perf_counter()
        sol = jax.block_until_ready(solve_qp(qp, tol=tol, max_steps=max_steps, implicit=False))
        dt = time.perf_counter() - t0
    st = Status(int(sol.status))
    return (
        np.asarray(sol.x)[:n],
        st == Status.SUCCESS,
        f"{st.name} ({int(sol.state.admm_iters)} it)",
        dt,
        t_first - dt,
    )


def run_highs(qp, eps):
    """HiGHS (its active-set QP solver; simplex on an LP), feasibility tolerances ``eps``."""
    import highspy
    import scipy.sparse as sp

    P, q, A, l, u = (np.asarray(v) for v in qp)
    n, m = len(q), len(l)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for k in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
        h.setOptionValue(k, max(eps, 1e-10))
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, m
    lp.col_cost_ = q
    lp.col_lower_, lp.col_upper_ = np.full(n, -inf), np.full(n, inf)
    lp.row_lower_ = np.where(np.isinf(l), -inf, l)
    lp.row_upper_ = np.where(np.isinf(u), inf, u)
    Ac = sp.csc_matrix(A)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = Ac.indptr, Ac.indices, Ac.data
    model = highspy.HighsModel()
    model.lp_ = lp
    if np.any(P):
        Pl = sp.csc_matrix(np.tril(P))
        hs = highspy.HighsHessian()
        hs.dim_, hs.format_ = n, highspy.HessianFormat.kTriangular
        hs.start_, hs.index_, hs.value_ = Pl.indptr, Pl.indices, Pl.data
        model.hessian_ = hs
    h.passModel(model)
    t0 = time.perf_counter()
    h.run()
    dt = time.perf_counter() - t0
    st = h.getModelStatus()
    x = np.array(h.getSolution().col_value)
    return x, st == highspy.HighsModelStatus.kOptimal, h.modelStatusToString(st), dt


def run_clarabel(qp, eps):
    """Clarabel (interior point): ``l <= Ax <= u`` as a zero cone (equalities) and a
    nonnegative cone (finite one-sided bounds), gap and feasibility tolerances ``eps``."""
    import clarabel
    import scipy.sparse as sp

    P, q, A, l, u = (np.asarray(v) for v in qp)
    eq = np.isfinite(l) & np.isfinite(u) & (l == u)
    fu, fl = np.isfinite(u) & ~eq, np.isfinite(l) & ~eq
    Am = np.vstack([A[eq], A[fu], -A[fl]])
    b = np.concatenate([u[eq], u[fu], -l[fl]])
    cones = []
    if eq.any():
        cones.append(clarabel.ZeroConeT(int(eq.sum())))
    if fu.any() or fl.any():
        cones.append(clarabel.NonnegativeConeT(int(fu.sum() + fl.sum())))
    s = clarabel.DefaultSettings()
    s.verbose = False
    s.tol_gap_abs = s.tol_gap_rel = s.tol_feas = s.tol_ktratio = eps
    t0 = time.perf_counter()
    solver = clarabel.DefaultSolver(sp.csc_matrix(np.triu(P)), q, sp.csc_matrix(Am), b, cones, s)
    r = solver.solve()
    dt = time.perf_counter() - t0
    return np.array(r.x), str(r.status) == "Solved", str(r.status), dt


_MISSING: set[str] = set()


def reference(qp):
    """High-accuracy reference from four solvers at 1e-10 (else 1e-9, 1e-8).

    proxsuite, OSQP (polished), HiGHS and Clarabel all run (the last two when installed:
    ``pip install jaxsolve[bench]``); among the answers that report success and are
    feasible to 1e-9 the one with the lower objective is kept (for feasible points a
    lower objective is closer to the optimum). One solver alone is not enough: on QPTEST
    proxsuite reports success at 1e-10 with f = 4.3718812, 1.4e-6 above the published
    optimum 4.371875; on QSHARE1B HiGHS reports optimal 1.3% above the optimum; on
    QBEACONF Clarabel is 1.8e-6 above it; on QSHARE2B neither proxsuite nor OSQP
    succeeds (HiGHS and Clarabel agree to 10 digits).
    """
    runners = [
        # 20000 iterations: at 1e-10 proxsuite may spin for minutes (QPCBOEI2)
        ("proxsuite", lambda qp, eps: run_proxsuite(qp, eps, max_iter=20000)),
        ("OSQP", lambda qp, eps: run_osqp(qp, eps, max_iter=400000, time_limit=30.0)),
        ("HiGHS", run_highs),
        ("Clarabel", run_clarabel),
    ]
    for eps in (1e-10, 1e-9, 1e-8):
        cands = []
        for name, run in runners:
            try:
                x, ok, _, _ = run(qp, eps)
            except ImportError:
                if name not in _MISSING:  # a weaker reference, not a silent one
                    _MISSING.add(name)
                    print(f"reference solver {name} not installed (pip install -e '.[bench]')")
                continue
            except Exception:  # pragma: no cover
                continue
            if ok and np.all(np.isfinite(x)):
                cands.append((x, f"{name} {eps:g}"))
        feas = [c for c in cands if _viol(qp, c[0]) <= 1e-9]
        if feas:
            x, name = min(feas, key=lambda c: _objective(qp, c[0]))
            return x, True, name
        if cands:
            x, name = min(cands, key=lambda c: _viol(qp, c[0]))
            return x, True, name
    return None, False, ""


# Why FlexQP fails where it does (diagnosed by hand, tol 1e-6, 20000 ADMM iterations);
# the table lists only the problems that fail in the run.
WHY = {
    "QISRAEL": (
        "needs about 25000 ADMM iterations (solved at 24900 with the 100000 budget). Up to "
        "there the ADMM plateaus near KKT 9e-6 (rho 2e-4 fixed: the OSQP rule sees a "
        "balanced ratio) with objective and violation already within 1e-6, and the polish "
        "cannot finish it early: the iterate marks 143 rows active for n = 142 (rank 136, 2 "
        "active rows missed, 28 degenerate rows given multipliers the reference sets to 0) "
        "and the primal-dual active-set passes oscillate (109, 128, 141 rows). OSQP fails it."
    ),
    "QPCBOEI2": (
        "its optimal multipliers reach 1.26e8 (Clarabel) for |q| <= 7 and |A| <= 3000, far "
        "above the elastic cap mu_max / c = 1.1e6 (user units): the relaxed problem converges "
        "(71000 ADMM iterations) to a point that violates rows by 4.8e-6 relative with "
        "multipliers at the cap. FlexQP now reports MAX_STEPS (error 4.8e-6 = the relative "
        "violation), no longer a false INFEASIBLE: the infeasibility certificate "
        "(jaxsolve.qp.certify) excludes feasible points only within 0.98 of x, while "
        "||x||_inf = 658 (INFEASIBLE needs 10 max(1, ||x||_inf)). A higher cap does not "
        "rescue it: mu_max = 1e9 ends at MAX_STEPS after 100000 iterations (KKT 4e-5, the "
        "weight grown only to 1.1e7, multipliers at it), mu = 1e7 with mu_max = 1e10 at KKT "
        "3e-3 after 20000. OSQP declares it primal infeasible (its relative Farkas test passes "
        "here: A'w = -(Px + q)/mu is small, but x is large); proxsuite solves it in seconds."
    ),
    "QSHARE1B": (
        "LP-like (P on a few variables): needs about 33000 ADMM iterations (at 20000 the "
        "KKT error is still 0.3, rho adapted to 6e-5, no usable active set); solved within "
        "the 100000 budget. OSQP fails it."
    ),
    "QSHARE2B": (
        "LP-like: the ADMM converges too slowly, KKT 1.2e-2 after 100000 iterations (rho "
        "bounces between 0.07 and 2.9; the primal residual is 40x the dual one in user "
        "units while the scaled ratio that drives rho looks balanced); fixed rho (0.01, 1), "
        "alpha = 1, 25 Ruiz passes, sigma 1e-3, a larger elastic weight all stay at 3e-4 or "
        "worse after 10000 iterations. Ends MAX_STEPS, never a false SUCCESS. OSQP at 1e-10 "
        "with 400000 iterations reaches only violation 2.8e-5 and proxsuite declares it "
        "infeasible: the reference is HiGHS and Clarabel (they agree to 10 digits). Tried "
        "since: rho changed at most every 10 or 50 checks (rho_every) converges, at 32500 and "
        "52500 iterations, but a general damping rule (the wait between rho changes doubled "
        "after each reversal, up to 64 checks) does not (KKT 1.4e-2 at 100000, rho still "
        "between 0.07 and 0.4): which rho the iteration settles on decides it, not the number "
        "of changes, and QSCAGR7 and QE226 need rho adapted at every check, so no general fix."
    ),
}


def judge(qp, x, ok, fref):
    if x is None or not np.all(np.isfinite(x)):
        return False, "no finite solution"
    f = _objective(qp, x)
    rel = abs(f - fref) / max(1.0, abs(fref))
    v = _viol(qp, x)
    reasons = []
    if not ok:
        reasons.append("solver status")
    if rel > TOL:
        reasons.append(f"objective rel err {rel:.1e}")
    if v > TOL:
        reasons.append(f"violation {v:.1e}")
    return not reasons, ", ".join(reasons)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 small problems only")
    ap.add_argument("--names", nargs="*", default=None)
    # 10000 steps = 100000 ADMM iterations: the iteration budget OSQP and proxsuite get
    ap.add_argument(
        "--max-steps", type=int, default=10000, help="FlexQP steps (x10 ADMM iterations)"
    )
    ap.add_argument("--out", default=None)
    ap.add_argument("--once", action="store_true", help="time one FlexQP call (compile included)")
    ns = ap.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    from jaxsolve.qp.problems import load_maros_meszaros, maros_meszaros_names

    if ns.names:
        names = ns.names
    elif ns.quick:
        names = ["HS21", "HS35", "HS76", "HS118", "QAFIRO", "GENHS28", "DUAL4", "LOTSCHD"]
    else:
        names = maros_meszaros_names(300, 600)
    rows = []
    refs = {}
    counts = {"FlexQP": 0, "OSQP": 0, "proxsuite": 0}
    for name in names:
        qp = load_maros_meszaros(name)
        xr, okr, refname = reference(qp)
        if not okr:
            rows.append((name, qp.n, qp.m, "no reference", "", "", "", "", "", ""))
            print(f"{name}: no reference solution", flush=True)
            continue
        fref = _objective(qp, xr)
        res = {}
        try:
            xo, oko, so, to, tc = run_ours(qp, TOL, ns.max_steps, ns.once)
            res["FlexQP"] = (*judge(qp, xo, oko, fref), so, to)
        except ValueError as e:  # refused up front (VALUES: P is indefinite, -1.3e-5)
            res["FlexQP"], tc = (False, str(e).split(":")[0], "refused", 0.0), 0.0
        try:
            x1, ok1, s1, t1 = run_osqp(qp, TOL)
            res["OSQP"] = (*judge(qp, x1, ok1, fref), s1, t1)
        except Exception as err:  # pragma: no cover
            res["OSQP"] = (False, f"error {err}", "error", 0.0)
        try:
            x2, ok2, s2, t2 = run_proxsuite(qp, TOL)
            res["proxsuite"] = (*judge(qp, x2, ok2, fref), s2, t2)
        except Exception as err:  # pragma: no cover
            res["proxsuite"] = (False, f"error {err}", "error", 0.0)
        for k, v in res.items():
            counts[k] += bool(v[0])
        rows.append((name, qp.n, qp.m, fref, res, tc))
        refs[name] = refname
        print(
            f"{name:10s} n={qp.n:3d} m={qp.m:3d} "
            + " | ".join(
                f"{k}: {'ok ' if v[0] else 'FAIL'} {v[2]} {v[3] * 1e3:.1f}ms {v[1]}"
                for k, v in res.items()
            )
            + f" | compile {tc:.1f}s",
            flush=True,
        )
    total = sum(1 for r in rows if isinstance(r[4], dict))
    lines = [
        "# Maros-Meszaros (n <= 300, m <= 600): FlexQP vs OSQP vs proxsuite",
        "",
        f"Tolerance {TOL:g} for every solver; solved = success status, objective within {TOL:g} "
        "relative and violation within 1e-6 relative of a 1e-10 reference (proxsuite, OSQP "
        "with polishing, HiGHS and Clarabel all run; the feasible one with the lower objective "
        "is kept: proxsuite alone is 1.4e-6 off the published optimum on QPTEST, HiGHS 1.3% "
        "off on QSHARE1B, Clarabel 1.8e-6 off on QBEACONF, and only HiGHS and Clarabel solve "
        "QSHARE2B). "
        "Times are steady-state (FlexQP: second call, after compilation; compile time apart). "
        "FlexQP runs each problem padded to bucketed sizes (extra variables with P = I, extra "
        "free rows) so problems share compilations; the first call of a new bucket pays it. "
        f"FlexQP budget: {ns.max_steps} steps of 10 ADMM iterations (OSQP and proxsuite: "
        "100000 iterations).",
        "",
        "| solver | solved |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v}/{total} |" for k, v in counts.items()]
    lines += [
        "",
        "| problem | n | m | f* (reference) | FlexQP | OSQP | proxsuite | FlexQP compile (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failures = []
    for r in rows:
        if not isinstance(r[4], dict):
            lines.append(f"| {r[0]} | {r[1]} | {r[2]} | no reference | | | | |")
            continue
        name, n, m, fref, res, tc = r
        cells = []
        for k, v in res.items():
            it = f" ({v[2].split('(')[-1].rstrip(')')})" if k == "FlexQP" else ""
            cells.append(f"{'ok' if v[0] else '**fail**'} {v[3] * 1e3:.1f} ms{it}")
            if not v[0]:
                failures.append(f"- {k} on {name}: {v[1]} (status {v[2]})")
        lines.append(
            f"| {name} | {n} | {m} | {fref:.7e} ({refs[name]}) | "
            + " | ".join(cells)
            + f" | {tc:.1f} |"
        )
    lines += ["", "## Failures and reasons", ""] + (failures or ["none"])
    ours = [r[0] for r in rows if isinstance(r[4], dict) and not r[4]["FlexQP"][0]]
    if ours:
        lines += ["", "## Why FlexQP fails these", ""]
        lines += [f"- {k}: {WHY.get(k, 'not diagnosed')}" for k in ours]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ns.out
    if out is None:
        out = (
            "bench/results/qp_maros_meszaros_quick.md"
            if ns.quick
            else "bench/results/qp_maros_meszaros.md"
        )
    if not ns.names or ns.out:
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
