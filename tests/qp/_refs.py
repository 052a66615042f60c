"""Reference solvers for the QP tests (OSQP, proxsuite, SciPy HiGHS), in NumPy."""

import numpy as np
import scipy.optimize

import peers.osqp


def osqp_ref(qp, eps=1e-10):
    """OSQP at eps_abs = eps_rel = 1e-10 with polishing: (x, y, status)."""
    r = peers.osqp.solve_qp(qp, eps_abs=eps, eps_rel=eps, polishing=True, max_iter=400000)
    return np.asarray(r.x), np.asarray(r.y), r.info.status


def proxsuite_ref(qp, eps=1e-10):
    import proxsuite

    P, q, A, l, u = (np.asarray(v, np.float64) for v in qp)
    lo, hi = peers.osqp.finite_bounds(l, u)
    H = proxsuite.proxqp.dense.QP(len(q), 0, len(l))
    H.settings.eps_abs = eps
    H.settings.eps_rel = 0.0
    H.settings.max_iter = 100000
    H.init(P, q, None, None, A, lo, hi)
    H.solve()
    return np.asarray(H.results.x), np.asarray(H.results.z)


def min_l1_violation(qp):
    """min sum_i dist(a_i'x, [l_i, u_i]) by SciPy HiGHS: (value, per-row violation)."""
    A, l, u = (np.asarray(v, np.float64) for v in (qp.A, qp.l, qp.u))
    m, n = A.shape
    fu, fl = np.isfinite(u), np.isfinite(l)
    c = np.concatenate([np.zeros(n), np.ones(m), np.ones(m)])
    Au = np.hstack([A[fu], -np.eye(m)[fu], np.zeros((m, m))[fu]])
    Al = np.hstack([-A[fl], np.zeros((m, m))[fl], -np.eye(m)[fl]])
    r = scipy.optimize.linprog(
        c,
        A_ub=np.vstack([Au, Al]),
        b_ub=np.concatenate([u[fu], -l[fl]]),
        bounds=[(None, None)] * n + [(0, None)] * (2 * m),
        method="highs",
    )
    assert r.status == 0, r.message
    x = r.x[:n]
    v = np.maximum(A @ x - u, 0) + np.maximum(l - A @ x, 0)
    return float(r.fun), v


def rel(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(x - ref) / max(1.0, np.linalg.norm(ref)))
