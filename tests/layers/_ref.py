"""Exact projections onto polytopes by OSQP (polished, 1e-12) for the layer tests."""

import numpy as np

import peers.osqp


def exact_projection(y, A=None, b=None, C=None, l=None, u=None, lb=None, ub=None):
    """argmin 0.5|x - y|^2 s.t. Ax = b, l <= Cx <= u, lb <= x <= ub, by polished OSQP."""
    y = np.asarray(y, np.float64)
    n = y.shape[0]
    rows, lo, hi = [], [], []
    if A is not None:
        rows.append(np.asarray(A, np.float64))
        lo.append(np.asarray(b, np.float64))
        hi.append(np.asarray(b, np.float64))
    if C is not None:
        m = np.shape(C)[0]
        rows.append(np.asarray(C, np.float64))
        lo.append(np.full(m, -np.inf) if l is None else np.asarray(l, np.float64))
        hi.append(np.full(m, np.inf) if u is None else np.asarray(u, np.float64))
    if lb is not None or ub is not None:
        rows.append(np.eye(n))
        lo.append(np.full(n, -np.inf) if lb is None else np.asarray(lb, np.float64))
        hi.append(np.full(n, np.inf) if ub is None else np.asarray(ub, np.float64))
    settings = dict(eps_abs=1e-12, eps_rel=1e-12, max_iter=200000, polish=True)
    res = peers.osqp.project(y, np.vstack(rows), np.concatenate(lo), np.concatenate(hi), **settings)
    return peers.osqp.solution(res)
