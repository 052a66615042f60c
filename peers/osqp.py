"""OSQP as a reference solver: min 1/2 x'Px + q'x s.t. l <= Ax <= u.

The settings (tolerances, iteration limit, polishing) are always the caller's, passed
to ``OSQP.setup`` unchanged; only ``verbose`` defaults to False. OSQP and SciPy are
imported when a function is called, so this module imports without them.
"""

from __future__ import annotations

import numpy as np

BIG = 1e30  # OSQP's infinity: +-inf bounds are sent as +-BIG where a caller asks


def _csc(M):
    import scipy.sparse as sp

    return sp.csc_matrix(M if sp.issparse(M) else np.atleast_2d(np.asarray(M, np.float64)))


def setup(P, q, A, l, u, **settings):
    """An ``osqp.OSQP`` set up on the problem (``P`` and ``A`` dense or sparse, sent
    as they are: pass ``np.triu(P)`` for the upper triangle only)."""
    import osqp

    settings.setdefault("verbose", False)
    solver = osqp.OSQP()
    q, l, u = (np.asarray(v, np.float64) for v in (q, l, u))
    solver.setup(_csc(P), q, _csc(A), l, u, **settings)
    return solver


def solve(P, q, A, l, u, *, raise_error=None, **settings):
    """OSQP's result on the problem (``raise_error`` goes to ``solve`` when given)."""
    solver = setup(P, q, A, l, u, **settings)
    return solver.solve() if raise_error is None else solver.solve(raise_error=raise_error)


def solution(result, accept=("solved",)):
    """``result.x`` as an array, after checking that OSQP's status is in ``accept``."""
    if result.info.status not in accept:
        raise AssertionError(f"OSQP status {result.info.status!r}, expected one of {accept}")
    return np.asarray(result.x)


def finite_bounds(l, u):
    """``(l, u)`` with infinite entries replaced by -BIG and +BIG."""
    l, u = np.asarray(l), np.asarray(u)
    return np.where(np.isinf(l), -BIG, l), np.where(np.isinf(u), BIG, u)


def setup_qp(qp, **settings):
    """`setup` for a ``(P, q, A, l, u)`` QP (a ``jaxsolve.qp.QP``): float64, the upper
    triangle of ``P``, infinite bounds as +-BIG."""
    P, q, A, l, u = (np.asarray(v, np.float64) for v in qp)
    return setup(np.triu(P), q, A, *finite_bounds(l, u), **settings)


def solve_qp(qp, **settings):
    """OSQP's result on a ``(P, q, A, l, u)`` QP (see `setup_qp`)."""
    return setup_qp(qp, **settings).solve()


def project(y, C, lo, hi, *, raise_error=None, **settings):
    """OSQP's result on the Euclidean projection argmin 1/2|x - y|^2 s.t. lo <= C x <= hi."""
    y = np.asarray(y, np.float64).ravel()
    return solve(np.eye(y.size), -y, C, lo, hi, raise_error=raise_error, **settings)


def least_squares(A, b, C, lo, hi, *, ridge=0.0, raise_error=None, **settings):
    """OSQP's result on min 1/2|A x - b|^2 (+ ridge/2 |x|^2) s.t. lo <= C x <= hi."""
    A = np.asarray(A, np.float64)
    b = np.asarray(b, np.float64)
    P = A.T @ A
    if ridge:
        P = P + ridge * np.eye(P.shape[0])
    return solve(P, -A.T @ b, C, lo, hi, raise_error=raise_error, **settings)
