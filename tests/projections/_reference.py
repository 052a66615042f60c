"""Reference projections: OSQP (eps 1e-10, polished) on min 1/2||y - x||^2 s.t. l <= C y <= u."""

from __future__ import annotations

import numpy as np

import peers.osqp
from peers.problems.first_order import osqp_ls_l1


def qp_project(x, C, lo, hi) -> np.ndarray:
    """Euclidean projection of ``x`` onto ``{y : lo <= C y <= hi}`` by OSQP at 1e-10 + polish."""
    settings = dict(eps_abs=1e-10, eps_rel=1e-10, polishing=True, max_iter=200000)
    return peers.osqp.solution(peers.osqp.project(x, C, lo, hi, raise_error=False, **settings))


def _box_rows(n, lo, hi):
    return np.eye(n), np.broadcast_to(lo, (n,)), np.broadcast_to(hi, (n,))


def ref_simplex(x, s=1.0):
    n = x.size
    C = np.vstack([np.eye(n), np.ones((1, n))])
    return qp_project(x, C, np.r_[np.zeros(n), s], np.r_[np.full(n, np.inf), s])


def ref_l1_ball(x, r=1.0):
    # the projection is the least-squares problem with A = I, b = x
    x = np.asarray(x, np.float64)
    return osqp_ls_l1(np.eye(x.size), x, r)


def ref_box(x, lo, hi):
    C, l, u = _box_rows(x.size, lo, hi)
    return qp_project(x, C, l, u)


def ref_capped_simplex(x, k):
    n = x.size
    C = np.vstack([np.eye(n), np.ones((1, n))])
    return qp_project(x, C, np.r_[np.zeros(n), k], np.r_[np.ones(n), k])


def ref_knapsack(x, w, budget, upper=1.0):
    n = x.size
    C = np.vstack([np.eye(n), np.asarray(w)[None, :]])
    return qp_project(
        x, C, np.r_[np.zeros(n), -np.inf], np.r_[np.broadcast_to(upper, (n,)), budget]
    )


def ref_partition_matroid(x, groups, caps):
    n = x.size
    G = np.zeros((len(caps), n))
    G[np.asarray(groups), np.arange(n)] = 1.0
    C = np.vstack([np.eye(n), G])
    return qp_project(
        x, C, np.r_[np.zeros(n), np.full(len(caps), -np.inf)], np.r_[np.ones(n), caps]
    )


def ref_affine(x, A, b):
    return qp_project(x, A, b, b)


def ref_halfspace(x, a, b):
    return qp_project(x, np.asarray(a)[None, :], [-np.inf], [b])


def ref_l2_ball(x, r):
    """Closed form is the reference for the l2 ball (the set is not polyhedral)."""
    nrm = np.linalg.norm(x)
    return x if nrm <= r else x * (r / nrm)
