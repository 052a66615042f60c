r"""The QP problem type: ``min 1/2 x'Px + q'x  s.t.  l <= A x <= u``.

Equalities are rows with ``l = u``; absent bounds are ``-inf``/``+inf``. A batch of
problems is a `QP` whose leaves carry a leading batch axis (``jax.vmap`` it).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxsolve.core.validation import check_floating, check_not_half, is_concrete

__all__ = ["QP", "validate_qp"]


class QP(NamedTuple):
    r"""A convex quadratic program in OSQP form (a pytree of dense arrays).

    $$
    \min_x\ \tfrac12 x^\top P x + q^\top x \quad\text{s.t.}\quad l \le A x \le u
    $$

    Attributes:
        P: ``(n, n)`` symmetric positive semidefinite matrix (zeros for an LP).
        q: ``(n,)`` linear cost.
        A: ``(m, n)`` constraint matrix; ``QP(P, q)`` (``A, l, u`` None) is a QP
            without constraints, which `validate_qp` (and so `solve_qp`) gives one
            free row ``-inf <= 0 x <= inf`` (``m = 0`` arrays are given it too: XLA
            aborts the process on some zero-size reductions).
        l: ``(m,)`` lower bounds (``-inf`` where absent).
        u: ``(m,)`` upper bounds (``+inf`` where absent; ``l = u`` for an equality).
    """

    P: Float[Array, "n n"]
    q: Float[Array, " n"]
    A: Float[Array, "m n"] | None = None
    l: Float[Array, " m"] | None = None
    u: Float[Array, " m"] | None = None

    @property
    def n(self) -> int:
        return self.q.shape[-1]

    @property
    def m(self) -> int:
        return 0 if self.l is None else self.l.shape[-1]

    @classmethod
    def from_standard_form(
        cls,
        P,
        q,
        G=None,
        h=None,
        A_eq=None,
        b_eq=None,
        lb=None,
        ub=None,
        *,
        dtype=None,
    ) -> QP:
        r"""Build a QP from the ``G x <= h, A_eq x = b_eq, lb <= x <= ub`` form.

        The rows are stacked as ``[G; A_eq; I]`` with bounds ``[-inf, h]``,
        ``[b_eq, b_eq]`` and ``[lb, ub]`` (the identity block only when ``lb`` or
        ``ub`` is given; a missing side is infinite). This is the form of qpax,
        cvxopt and the FlexQP paper (Oshin et al., 2025, eq. (1)).
        """
        P = jnp.asarray(P, dtype=dtype)
        q = jnp.asarray(q, dtype=dtype)
        check_floating("P", P)
        check_floating("q", q)
        dtype = jnp.result_type(P, q)
        n = q.shape[-1]
        rows, lows, ups = [], [], []
        if (G is None) != (h is None):
            raise ValueError("G and h must be given together")
        if (A_eq is None) != (b_eq is None):
            raise ValueError("A_eq and b_eq must be given together")
        if G is not None:
            G = jnp.asarray(G, dtype)
            h = jnp.asarray(h, dtype)
            _check_rows("G", G, n)
            if h.shape != G.shape[:1]:
                raise ValueError(f"h must have shape ({G.shape[0]},), got {h.shape}")
            rows.append(G)
            lows.append(jnp.full_like(h, -jnp.inf))
            ups.append(h)
        if A_eq is not None:
            A_eq = jnp.asarray(A_eq, dtype)
            b_eq = jnp.asarray(b_eq, dtype)
            _check_rows("A_eq", A_eq, n)
            if b_eq.shape != A_eq.shape[:1]:
                raise ValueError(f"b_eq must have shape ({A_eq.shape[0]},), got {b_eq.shape}")
            rows.append(A_eq)
            lows.append(b_eq)
            ups.append(b_eq)
        if lb is not None or ub is not None:
            lo = (
                jnp.full((n,), -jnp.inf, dtype)
                if lb is None
                else jnp.broadcast_to(jnp.asarray(lb, dtype), (n,))
            )
            hi = (
                jnp.full((n,), jnp.inf, dtype)
                if ub is None
                else jnp.broadcast_to(jnp.asarray(ub, dtype), (n,))
            )
            rows.append(jnp.eye(n, dtype=dtype))
            lows.append(lo)
            ups.append(hi)
        if not rows:
            raise ValueError("give at least one of (G, h), (A_eq, b_eq), lb, ub")
        return cls(P, q, jnp.concatenate(rows), jnp.concatenate(lows), jnp.concatenate(ups))

    def objective(self, x):
        """``1/2 x'Px + q'x``."""
        return 0.5 * x @ (self.P @ x) + self.q @ x

    def violation(self, x):
        """Per-row violation ``dist(A x, [l, u])`` (>= 0)."""
        return interval_distance(self.A @ x, self.l, self.u)

    def padded(self, n: int | None = None, m: int | None = None) -> QP:
        r"""This QP grown to ``n`` variables and ``m`` rows (default: `bucket` sizes), so
        that problems of many sizes share a few compiled programs.

        Each added variable has ``P_ii = 1``, ``q_i = 0`` and a zero column in ``A``
        (its solution is 0, decoupled from the rest); each added row is
        ``-inf <= 0 x <= inf`` (never active, multiplier 0). The solution of the
        original QP is ``sol.x[..., :self.n]`` with multipliers ``sol.state.y[...,
        :self.m]``, at the same tolerance (the relative KKT measures take max norms,
        which the zeros leave unchanged). Works on a batch (a leading axis).
        """
        n0, m0 = self.n, self.m
        qp = with_constraint_rows(self)
        n = bucket(n0) if n is None else int(n)
        m = bucket(m0) if m is None else int(m)
        if n < n0 or m < qp.m:
            raise ValueError(
                f"padded(n={n}, m={m}) cannot shrink a QP with n={n0} variables and m={qp.m} rows"
            )
        P, q, A, l, u = (jnp.asarray(v) for v in qp)
        dn, dm = n - n0, m - qp.m
        lead = [(0, 0)] * (q.ndim - 1)
        P = jnp.pad(P, lead + [(0, dn), (0, dn)])
        P = P.at[..., n0:, n0:].set(jnp.eye(dn, dtype=P.dtype))
        q = jnp.pad(q, lead + [(0, dn)])
        A = jnp.pad(A, lead + [(0, dm), (0, dn)])
        l = jnp.pad(l, lead + [(0, dm)], constant_values=-jnp.inf)
        u = jnp.pad(u, lead + [(0, dm)], constant_values=jnp.inf)
        return QP(P, q, A, l, u)


def bucket(k: int) -> int:
    """The padding size `QP.padded` uses for a size ``k``: the smallest of
    ``2^j * (1, 1.25, 1.5, 1.75)`` (and 1, 2, ..., 8) at least ``k``.

    Four buckets per doubling: a padded problem is less than 25% larger in each
    dimension (at most about twice the dense factorization work), and the sizes 1 to
    1000 fall into 36 buckets.
    """
    k = int(k)
    if k <= 8:
        return max(k, 1)
    j = (k - 1).bit_length() - 1  # 2^j < k <= 2^(j+1)
    for f in (1.25, 1.5, 1.75, 2.0):
        size = int(round(f * 2**j))
        if size >= k:
            return size
    return 2 ** (j + 1)


def interval_distance(v, lo, up):
    """Per-entry distance of ``v`` to the interval ``[lo, up]`` (FlexQP's row violation)."""
    return jnp.maximum(v - up, 0) + jnp.maximum(lo - v, 0)


def _check_rows(name, M, n):
    if M.ndim != 2 or M.shape[1] != n:
        raise ValueError(f"{name} must have shape (*, {n}), got {M.shape}")


def validate_qp(qp: QP, *, batched: bool | None = None) -> QP:
    """Check a QP before tracing; raise ``ValueError``/``TypeError`` naming the field.

    Checks: a ``QP`` instance (its fields arrays, nested lists or numbers), real
    floating dtypes (all the same), shapes ``P (n, n)``,
    ``q (n,)``, ``A (m, n)``, ``l, u (m,)`` (with one optional leading batch axis),
    ``P`` symmetric (relative tolerance 1e-8 in float64, 1e-5 in float32), no NaN
    anywhere, ``l <= u``, and no ``+inf`` lower / ``-inf`` upper bound. Values that are
    tracers (inside ``jit``/``vmap``) are not inspected; a NaN there gives ``NONFINITE``.
    """
    if not isinstance(qp, QP):
        raise TypeError(f"qp must be a jaxsolve.qp.QP, got {type(qp).__name__}")
    # nested lists and Python numbers are arrays too (jnp.asarray of a list of floats is
    # the default float); other leaves keep their type, tracers included
    qp = QP(*(jnp.asarray(v) if isinstance(v, list | tuple | int | float) else v for v in qp))
    if qp.q is not None and np.ndim(qp.q) == 0:
        raise ValueError(f"q must have shape (n,) (or (batch, n)), got a scalar {qp.q!r}")
    qp = with_constraint_rows(qp)
    for name, leaf in zip(QP._fields, qp, strict=True):
        if leaf is None:
            raise TypeError(
                f"{name} is None: a QP needs P and q, and A, l, u together (all three "
                "None: no constraints, QP(P, q))"
            )
        check_floating(name, leaf, real=True)
        check_not_half(
            name,
            leaf,
            "FlexQP factorizes with LAPACK, which runs in float32/float64 only",
            "the QP converted with jax.tree.map(lambda v: v.astype(jnp.float32), qp)",
        )
    dtypes = {jnp.result_type(v) for v in qp}
    if len(dtypes) > 1:
        raise TypeError(f"P, q, A, l, u must share one dtype, got {sorted(map(str, dtypes))}")
    P, q, A, l, u = qp
    lead = q.ndim - 1
    if batched is None:
        batched = lead == 1
    if lead not in (0, 1) or (lead == 1) != batched:
        raise ValueError(f"q must have shape (n,) (or (batch, n)), got {q.shape}")
    bshape = q.shape[:lead]
    n = q.shape[-1]
    m = l.shape[-1] if l.ndim else -1
    if n == 0:
        raise ValueError("q is empty: the QP has no variables")
    if lead == 1 and q.shape[0] == 0:
        raise ValueError("q has an empty batch axis (shape (0, n)): the batch holds no QP")
    # name the argument that disagrees with the others: P square of order n_P, q of
    # length n (a wrong-length q is reported as q, not as a wrong P)
    if P.ndim == lead + 2 and P.shape[-1] == P.shape[-2] and P.shape[-1] != n:
        raise ValueError(
            f"q must have shape {(*bshape, P.shape[-1])} (n={P.shape[-1]} from P), got {q.shape}"
        )
    if (
        A.ndim == lead + 2
        and A.shape[-1] == n
        and l.shape == u.shape
        and l.ndim == lead + 1
        and l.shape[-1] != A.shape[-2]
    ):
        raise ValueError(
            f"l and u must have {A.shape[-2]} entries (m from A's rows), got {l.shape[-1]}"
        )
    expect = {"P": (*bshape, n, n), "A": (*bshape, m, n), "l": (*bshape, m), "u": (*bshape, m)}
    for name in ("P", "A", "l", "u"):
        got = getattr(qp, name).shape
        if got != expect[name]:
            want = "(" + ", ".join(map(str, expect[name])) + ")"
            raise ValueError(
                f"{name} must have shape {want} (n={n} from q, m={m} from l), got {got}"
            )
    if not is_concrete(qp):
        return qp
    Pn, ln, un = np.asarray(P), np.asarray(l), np.asarray(u)
    for name, leaf in zip(QP._fields, qp, strict=True):
        if np.any(np.isnan(np.asarray(leaf))):
            raise ValueError(f"{name} contains NaN")
    for name, leaf in (("P", P), ("q", q), ("A", A)):
        if not np.all(np.isfinite(np.asarray(leaf))):
            raise ValueError(f"{name} contains Inf (only the bounds l, u may be infinite)")
    rtol = 1e-5 if Pn.dtype == np.float32 else 1e-8
    asym = np.max(np.abs(Pn - np.swapaxes(Pn, -1, -2)), initial=0.0)
    if asym > rtol * max(1.0, np.max(np.abs(Pn), initial=0.0)):
        raise ValueError(f"P must be symmetric, max |P - P'| = {asym:.3e}")
    if np.any(ln > un):
        i = np.argwhere(ln > un)[0]
        raise ValueError(f"l must be <= u elementwise; l > u at index {tuple(i.tolist())}")
    if np.any(ln == np.inf) or np.any(un == -np.inf):
        raise ValueError("l may not be +inf and u may not be -inf")
    _check_psd(Pn)
    return qp


def with_constraint_rows(qp: QP) -> QP:
    """``QP(P, q)`` or zero constraint rows: one free row ``-inf <= 0 x <= inf`` instead
    (the same problem; XLA aborts on some zero-size reductions, so ``m = 0`` never
    reaches a solver). Anything else is returned as it is."""
    P, q, A, l, u = qp
    if q is None or not hasattr(q, "shape"):
        return qp
    empty = A is None and l is None and u is None
    if not empty and all(hasattr(v, "shape") for v in (A, l, u)):
        empty = A.shape[-2:-1] == (0,) and l.shape[-1:] == (0,) and u.shape[-1:] == (0,)
    if not empty:
        return qp
    dt = jnp.result_type(q)
    lead = tuple(q.shape[:-1])
    return qp._replace(
        A=jnp.zeros((*lead, 1, q.shape[-1]), dt),
        l=jnp.full((*lead, 1), -jnp.inf, dt),
        u=jnp.full((*lead, 1), jnp.inf, dt),
    )


def psd_shift(P):
    """The diagonal shift below which a negative eigenvalue of ``P`` counts as rounding:
    ``sqrt(eps) * (1 + max|P|)`` (1.5e-8 relative in float64, 3.5e-4 in float32)."""
    eps = np.finfo(P.dtype).eps
    return float(np.sqrt(eps)) * (1.0 + np.max(np.abs(P), axis=(-2, -1), initial=0.0))


def _check_psd(Pn):
    """Refuse a concrete ``P`` that is not positive semidefinite (FlexQP is a convex
    method: on an indefinite ``P`` its ADMM converges to a stationary point, not a
    minimum, and reported it as a solution)."""
    n = Pn.shape[-1]
    shift = np.asarray(psd_shift(Pn))[..., None, None]
    try:
        np.linalg.cholesky(Pn + shift * np.eye(n))
        return
    except np.linalg.LinAlgError:
        pass
    w = np.linalg.eigvalsh(Pn).min(axis=-1)
    bad = np.argwhere(np.atleast_1d(w + np.asarray(psd_shift(Pn)) < 0)).ravel()
    lane = f" (batch index {int(bad[0])})" if Pn.ndim == 3 and bad.size else ""
    raise ValueError(
        f"P is not positive semidefinite{lane}: smallest eigenvalue "
        f"{float(np.atleast_1d(w)[bad[0] if bad.size else 0]):.3e}; FlexQP solves convex QPs only"
    )


def as_qp(P, q, A, l, u, dtype=None) -> QP:
    """``QP`` from array-likes (refusing integer data unless ``dtype`` is given)."""
    leaves = [jnp.asarray(v, dtype=dtype) for v in (P, q, A, l, u)]
    return QP(*leaves)
