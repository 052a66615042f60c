r"""QP problem generators (OSQP benchmark classes) and the Maros-Meszaros loader.

The classes follow the OSQP benchmark suite (Stellato et al., "OSQP: an operator
splitting solver for quadratic programs", 2020, Appendix; ``osqp_benchmarks``
``problem_classes``), the suite FlexQP is evaluated on (Oshin et al., 2025). Each
generator takes a ``jax.random`` key and returns a dense `QP`
(``sparse(r, c, d)`` below = Gaussian entries kept with probability ``d``).
Generators are pure functions of the key, so ``jax.vmap`` over keys gives a batch.
``dtype`` defaults to JAX's default float: float64 when x64 is enabled, else float32.
"""

from __future__ import annotations

import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import float_dtype
from jaxsolve.qp.problem import QP

__all__ = [
    "random_qp",
    "eq_qp",
    "portfolio",
    "lasso",
    "huber",
    "svm",
    "mpc",
    "infeasible_qp",
    "load_maros_meszaros",
    "maros_meszaros_names",
    "shift_mpc_warm_start",
]

_INF = jnp.inf


def _sparse(key, shape, density, dtype):
    """``sparse(r, c, d)``: Gaussian entries, each kept with probability ``density``."""
    k1, k2 = jax.random.split(key)
    mask = jax.random.bernoulli(k1, density, shape)
    return jnp.where(mask, jax.random.normal(k2, shape, dtype), 0.0).astype(dtype)


def random_qp(key, n: int, m: int | None = None, *, dtype=None, density: float = 0.15) -> QP:
    r"""Random QP: ``P = M M' + 1e-2 I`` (``M = sparse(n, n, d)``), ``q ~ N(0, I)``,
    ``A = sparse(m, n, d)``, ``u = A v + delta`` (``v ~ N``, ``delta ~ U[0, 1]``),
    ``l = A v - delta'`` on half of the rows and ``-inf`` on the rest (two-sided rows
    exercise both signs of ``y``); feasible by construction (``v`` is interior).
    ``m`` defaults to ``10 n`` as in the OSQP suite.
    """
    dtype = float_dtype(dtype)
    m = 10 * n if m is None else m
    kM, kq, kA, kv, kd, kl = jax.random.split(key, 6)
    M = _sparse(kM, (n, n), density, dtype)
    P = M @ M.T + 1e-2 * jnp.eye(n, dtype=dtype)
    q = jax.random.normal(kq, (n,), dtype)
    A = _sparse(kA, (m, n), density, dtype)
    v = jax.random.normal(kv, (n,), dtype)
    Av = A @ v
    u = Av + jax.random.uniform(kd, (m,), dtype)
    lo = Av - jax.random.uniform(kl, (m,), dtype)
    l = jnp.where(jnp.arange(m) % 2 == 0, lo, -_INF).astype(dtype)
    return QP(P, q, A, l, u)


def eq_qp(key, n: int, m: int | None = None, *, dtype=None, density: float = 0.15) -> QP:
    r"""Equality-constrained QP: random ``P, q`` as `random_qp`, ``A = sparse(m, n)``,
    ``l = u = A x_sol`` with ``x_sol ~ N`` and ``m = n // 2``."""
    dtype = float_dtype(dtype)
    m = n // 2 if m is None else m
    kM, kq, kA, kx = jax.random.split(key, 4)
    M = _sparse(kM, (n, n), density, dtype)
    P = M @ M.T + 1e-2 * jnp.eye(n, dtype=dtype)
    q = jax.random.normal(kq, (n,), dtype)
    A = _sparse(kA, (m, n), density, dtype)
    b = A @ jax.random.normal(kx, (n,), dtype)
    return QP(P, q, A, b, b)


def portfolio(
    key, k: int, n_assets: int | None = None, *, returns=None, gamma: float = 1.0, dtype=None
) -> QP:
    r"""Portfolio optimization with ``k`` factors and ``n = 100 k`` assets (default).

    Variables ``(x, y)``, ``y = F'x``: ``min x'Dx + y'y - mu'x / gamma`` s.t.
    ``1'x = 1``, ``F'x - y = 0``, ``0 <= x <= 1``; ``F = sparse(n, k, 0.5)``,
    ``D = diag(U[0, 1] sqrt(k))``, expected returns ``mu ~ N`` unless ``returns`` is
    given (a parametric sequence: same ``key``, changing ``returns``).
    """
    dtype = float_dtype(dtype)
    n = 100 * k if n_assets is None else n_assets
    kF, kD, kmu = jax.random.split(key, 3)
    F = _sparse(kF, (n, k), 0.5, dtype)
    Dd = jax.random.uniform(kD, (n,), dtype) * jnp.sqrt(jnp.asarray(k, dtype))
    mu = jax.random.normal(kmu, (n,), dtype) if returns is None else jnp.asarray(returns, dtype)
    P = jnp.diag(jnp.concatenate([2 * Dd, 2 * jnp.ones((k,), dtype)]))
    q = jnp.concatenate([-mu / gamma, jnp.zeros((k,), dtype)])
    A = jnp.concatenate(
        [
            jnp.concatenate([jnp.ones((1, n), dtype), jnp.zeros((1, k), dtype)], axis=1),
            jnp.concatenate([F.T, -jnp.eye(k, dtype=dtype)], axis=1),
            jnp.concatenate([jnp.eye(n, dtype=dtype), jnp.zeros((n, k), dtype)], axis=1),
        ]
    )
    l = jnp.concatenate([jnp.ones((1,), dtype), jnp.zeros((k,), dtype), jnp.zeros((n,), dtype)])
    u = jnp.concatenate([jnp.ones((1,), dtype), jnp.zeros((k,), dtype), jnp.ones((n,), dtype)])
    return QP(P, q, A, l, u)


def lasso(key, n: int, m: int | None = None, *, dtype=None) -> QP:
    r"""Lasso ``min ||A_d x - b||^2 + lambda ||x||_1`` as a QP in ``(x, y, t)``:
    ``min y'y + lambda 1't`` s.t. ``y = A_d x - b``, ``-t <= x <= t``;
    ``A_d = sparse(m, n, 0.15)`` with ``m = 100 n``, ``x_true`` half zeros,
    ``b = A_d x_true + N(0, 1)``, ``lambda = ||A_d' b||_inf / 5``."""
    dtype = float_dtype(dtype)
    m = 100 * n if m is None else m
    kA, kx, km, kb = jax.random.split(key, 4)
    Ad = _sparse(kA, (m, n), 0.15, dtype)
    xt = jnp.where(
        jax.random.bernoulli(km, 0.5, (n,)), jax.random.normal(kx, (n,), dtype), 0.0
    ) / jnp.sqrt(n)
    b = Ad @ xt + jax.random.normal(kb, (m,), dtype)
    lam = jnp.max(jnp.abs(Ad.T @ b)) / 5
    N = n + m + n
    P = jnp.zeros((N, N), dtype).at[n : n + m, n : n + m].set(2 * jnp.eye(m, dtype=dtype))
    q = jnp.concatenate([jnp.zeros((n + m,), dtype), lam * jnp.ones((n,), dtype)])
    I_n, I_m = jnp.eye(n, dtype=dtype), jnp.eye(m, dtype=dtype)
    Z = lambda r, c: jnp.zeros((r, c), dtype)
    A = jnp.concatenate(
        [
            jnp.concatenate([Ad, -I_m, Z(m, n)], axis=1),
            jnp.concatenate([I_n, Z(n, m), -I_n], axis=1),
            jnp.concatenate([I_n, Z(n, m), I_n], axis=1),
        ]
    )
    l = jnp.concatenate([b, jnp.full((n,), -_INF, dtype), jnp.zeros((n,), dtype)])
    u = jnp.concatenate([b, jnp.zeros((n,), dtype), jnp.full((n,), _INF, dtype)])
    return QP(P, q, A, l, u)


def huber(key, n: int, m: int | None = None, *, dtype=None) -> QP:
    r"""Huber fitting as a QP in ``(x, z, r, s)``: ``min 1/2 z'z + 1'(r + s)`` s.t.
    ``A_d x - b - z = r - s``, ``r, s >= 0``; ``A_d = sparse(m, n, 0.15)``, ``m = 100 n``,
    ``b = A_d x_true + noise`` (``N(0, 1/4)`` on 95% of rows, ``10 U[0, 1]`` outliers)."""
    dtype = float_dtype(dtype)
    m = 100 * n if m is None else m
    kA, kx, kn, ko, kw = jax.random.split(key, 5)
    Ad = _sparse(kA, (m, n), 0.15, dtype)
    xt = jax.random.normal(kx, (n,), dtype) / jnp.sqrt(n)
    outlier = jax.random.bernoulli(kw, 0.05, (m,))
    noise = jnp.where(
        outlier, 10 * jax.random.uniform(ko, (m,), dtype), 0.5 * jax.random.normal(kn, (m,), dtype)
    )
    b = Ad @ xt + noise
    N = n + 3 * m
    P = jnp.zeros((N, N), dtype).at[n : n + m, n : n + m].set(jnp.eye(m, dtype=dtype))
    q = jnp.concatenate([jnp.zeros((n + m,), dtype), jnp.ones((2 * m,), dtype)])
    I_m = jnp.eye(m, dtype=dtype)
    Z = lambda r, c: jnp.zeros((r, c), dtype)
    A = jnp.concatenate(
        [
            jnp.concatenate([Ad, -I_m, -I_m, I_m], axis=1),
            jnp.concatenate([Z(m, n), Z(m, m), I_m, Z(m, m)], axis=1),
            jnp.concatenate([Z(m, n), Z(m, m), Z(m, m), I_m], axis=1),
        ]
    )
    l = jnp.concatenate([b, jnp.zeros((2 * m,), dtype)])
    u = jnp.concatenate([b, jnp.full((2 * m,), _INF, dtype)])
    return QP(P, q, A, l, u)


def svm(key, n: int, m: int | None = None, *, gamma: float = 1.0, dtype=None) -> QP:
    r"""Soft-margin SVM as a QP in ``(x, t)``: ``min x'x + gamma 1't`` s.t.
    ``t >= diag(b) A_d x + 1``, ``t >= 0``; ``m = 100 n`` samples, two classes
    (labels ``+-1``), features ``sparse(., n, 0.15) / sqrt(n)`` shifted by ``+-1/n``."""
    dtype = float_dtype(dtype)
    m = 100 * n if m is None else m
    half = m // 2
    m = 2 * half
    k1, k2 = jax.random.split(key)
    F1 = _sparse(k1, (half, n), 0.15, dtype) / jnp.sqrt(n)
    F2 = _sparse(k2, (half, n), 0.15, dtype) / jnp.sqrt(n)
    Ad = jnp.concatenate(
        [jnp.where(F1 != 0, F1 + 1.0 / n, 0.0), jnp.where(F2 != 0, F2 - 1.0 / n, 0.0)]
    )
    b = jnp.concatenate([jnp.ones((half,), dtype), -jnp.ones((half,), dtype)])
    N = n + m
    P = jnp.zeros((N, N), dtype).at[:n, :n].set(2 * jnp.eye(n, dtype=dtype))
    q = jnp.concatenate([jnp.zeros((n,), dtype), gamma * jnp.ones((m,), dtype)])
    I_m = jnp.eye(m, dtype=dtype)
    A = jnp.concatenate(
        [
            jnp.concatenate([b[:, None] * Ad, -I_m], axis=1),
            jnp.concatenate([jnp.zeros((m, n), dtype), I_m], axis=1),
        ]
    )
    l = jnp.concatenate([jnp.full((m,), -_INF, dtype), jnp.zeros((m,), dtype)])
    u = jnp.concatenate([-jnp.ones((m,), dtype), jnp.full((m,), _INF, dtype)])
    return QP(P, q, A, l, u)


def _mpc_system(key, nx, nu, dtype):
    """The random system of `mpc`: ``(A, B, diag(Q), u_max, x_max)``."""
    kA, kB, kQ, kz, kub, kxb = jax.random.split(key, 6)
    Ad = jnp.eye(nx, dtype=dtype) + 0.1 * jax.random.normal(kA, (nx, nx), dtype)
    # shrink into the unit disk (OSQP suite: eigenvalues of modulus >= 0.99 are shrunk)
    rad = jnp.max(
        jnp.abs(
            jnp.linalg.eigvals(Ad.astype(jnp.complex128 if dtype == jnp.float64 else jnp.complex64))
        )
    )
    Ad = Ad * jnp.minimum(1.0, 0.99 / rad).astype(dtype)
    Bd = jax.random.normal(kB, (nx, nu), dtype)
    Qd = jnp.where(jax.random.bernoulli(kz, 0.7, (nx,)), jax.random.uniform(kQ, (nx,), dtype), 0.0)
    umax = jax.random.uniform(kub, (nu,), dtype)
    xmax = 1.0 + jax.random.uniform(kxb, (nx,), dtype)
    return Ad, Bd, Qd, umax, xmax


def _dare(Ad, Bd, Q, R, iters=300):
    """The discrete algebraic Riccati solution by ``iters`` fixed-point iterations."""

    def body(_, S):
        BtS = Bd.T @ S
        K = jnp.linalg.solve(R + BtS @ Bd, BtS @ Ad)
        S = Q + Ad.T @ S @ Ad - Ad.T @ S @ Bd @ K
        return 0.5 * (S + S.T)

    return jax.lax.fori_loop(0, iters, body, Q + 0.0)


def mpc(key, nx: int, nu: int | None = None, T: int = 10, *, x0=None, dtype=None) -> QP:
    r"""Linear MPC / optimal control over horizon ``T`` (OSQP suite "Control").

    ``min sum_t x_t'Q x_t + u_t'R u_t + x_T'Q_T x_T`` s.t. ``x_{t+1} = A x_t + B u_t``,
    ``x_0`` given, ``|u_t| <= u_max``, ``|x_t| <= x_max``; ``A = I + 0.1 N`` scaled into the
    unit disk, ``B ~ N``, ``Q = diag(U[0, 1])`` with 30% zeros, ``R = 0.1 I``, ``Q_T``
    from the discrete Riccati equation (fixed-point iteration). Variables
    ``(x_0..x_T, u_0..u_{T-1})``; dynamics and ``x_0`` are equality rows. The system
    depends only on ``key``: change ``x0`` for a parametric (warm-start) sequence.
    """
    dtype = float_dtype(dtype)
    nu = max(1, nx // 2) if nu is None else nu
    Ad, Bd, Qd, umax, xmax = _mpc_system(key, nx, nu, dtype)
    Q = jnp.diag(Qd)
    R = 0.1 * jnp.eye(nu, dtype=dtype)
    QT = _dare(Ad, Bd, Q, R)
    if x0 is None:
        x0 = 0.5 * xmax * jax.random.uniform(jax.random.fold_in(key, 7), (nx,), dtype, -1.0, 1.0)
    x0 = jnp.asarray(x0, dtype)
    Nx, Nu = (T + 1) * nx, T * nu
    P = jnp.zeros((Nx + Nu, Nx + Nu), dtype)
    P = P.at[: T * nx, : T * nx].set(jnp.kron(jnp.eye(T, dtype=dtype), Q))
    P = P.at[T * nx : Nx, T * nx : Nx].set(QT)
    P = P.at[Nx:, Nx:].set(jnp.kron(jnp.eye(T, dtype=dtype), R))
    P = 2 * P
    q = jnp.zeros((Nx + Nu,), dtype)
    # dynamics: -x_{t+1} + A x_t + B u_t = 0 ; x_0 = x0
    Ax = jnp.kron(jnp.eye(T + 1, dtype=dtype), -jnp.eye(nx, dtype=dtype)) + jnp.kron(
        jnp.eye(T + 1, k=-1, dtype=dtype), Ad
    )
    Bu = jnp.kron(jnp.vstack([jnp.zeros((1, T), dtype), jnp.eye(T, dtype=dtype)]), Bd)
    Aeq = jnp.concatenate([Ax, Bu], axis=1)
    beq = jnp.concatenate([-x0, jnp.zeros((T * nx,), dtype)])
    Aineq = jnp.eye(Nx + Nu, dtype=dtype)
    lineq = jnp.concatenate([-jnp.tile(xmax, T + 1), -jnp.tile(umax, T)])
    A = jnp.concatenate([Aeq, Aineq])
    l = jnp.concatenate([beq, lineq])
    u = jnp.concatenate([beq, -lineq])
    return QP(P, q, A, l, u)


def infeasible_qp(
    key, n: int, m: int | None = None, *, k: int = 2, gap: float = 1.0, dtype=None
) -> QP:
    r"""An infeasible variant of `random_qp` with a unique least-l1-violation set.

    ``k`` rows ``a_i'x <= u_i`` of a feasible random QP get a conflicting copy
    ``2 a_i'x >= 2 (u_i + gap)``. Meeting the copy costs ``2 gap`` of violation per
    pair, violating the original row costs ``gap``: the least l1 violation (if the
    other rows allow it) violates exactly the ``k`` original rows by ``gap``.
    """
    dtype = float_dtype(dtype)
    base = random_qp(key, n, m, dtype=dtype)
    idx = jnp.arange(k) * 2 + 1  # odd rows have l = -inf (one-sided)
    Ak = 2 * base.A[idx]
    lk = 2 * (base.u[idx] + gap)
    return QP(
        base.P,
        base.q,
        jnp.concatenate([base.A, Ak]),
        jnp.concatenate([base.l, lk]),
        jnp.concatenate([base.u, jnp.full((k,), _INF, dtype)]),
    )


_MM_BUNDLED = pathlib.Path(__file__).resolve().parent / "data" / "maros_meszaros"


def _mm_dirs() -> list[pathlib.Path]:
    """Folders searched for Maros-Meszaros problems, first match wins: the folder in
    ``$JAXSOLVE_MAROS_MESZAROS`` (the full set of 138, when a user has it), then the 44
    small problems shipped with jaxsolve (``n <= 300``, ``m <= 600``)."""
    env = os.environ.get("JAXSOLVE_MAROS_MESZAROS")
    return ([pathlib.Path(env)] if env else []) + [_MM_BUNDLED]


def _mm_path(name: str) -> pathlib.Path | None:
    """The ``.mat`` file of the problem ``name`` in the first folder holding it, or None."""
    for d in _mm_dirs():
        if (d / f"{name}.mat").exists():
            return d / f"{name}.mat"
    return None


def maros_meszaros_names(max_n: int | None = None, max_m: int | None = None) -> list[str]:
    """Names of the Maros-Meszaros problems found on disk (optionally ``n <= max_n``,
    ``m <= max_m``; reading the sizes loads each file, which needs SciPy): the 44 shipped
    ones plus any in ``$JAXSOLVE_MAROS_MESZAROS``."""
    names = sorted({p.stem for d in _mm_dirs() if d.is_dir() for p in d.glob("*.mat")})
    if max_n is None and max_m is None:
        return names
    import scipy.io  # lazy: scipy is a test/bench dependency, not a runtime one

    out = []
    for name in names:
        d = scipy.io.loadmat(_mm_path(name), variable_names=("n", "m"))
        n, m = int(d["n"].ravel()[0]), int(d["m"].ravel()[0])
        if (max_n is None or n <= max_n) and (max_m is None or m <= max_m):
            out.append(name)
    return out


def load_maros_meszaros(name_or_path: str | os.PathLike, *, dtype=None) -> QP:
    r"""Load a Maros-Meszaros problem (``.mat`` in the qpbenchmark/OSQP format) as a dense QP.

    ``name_or_path`` is a problem name (``"HS21"``) or a path to a ``.mat`` file with
    keys ``P, q, A, l, u`` (and the objective constant ``r``, dropped here). A name is
    looked up first in the folder ``$JAXSOLVE_MAROS_MESZAROS`` (set it to use the full
    set of 138 problems), then among the 44 small problems (``n <= 300``, ``m <= 600``,
    about 210 KB, public test data) shipped inside jaxsolve, so the loader works on a
    fresh install. Bounds with ``|value| >= 1e20`` become infinite.

    This loader imports ``scipy.io`` lazily, inside the function: SciPy is *not* a
    runtime dependency of jaxsolve, only of this loader (install ``jaxsolve[dev]``).
    """
    dtype = float_dtype(dtype)
    path = pathlib.Path(name_or_path)
    if path.suffix != ".mat":
        found = _mm_path(str(name_or_path))
        if found is None:
            where = " or ".join(str(d) for d in _mm_dirs())
            raise ValueError(
                f"Maros-Meszaros problem {name_or_path!r} not found in {where} "
                "(set JAXSOLVE_MAROS_MESZAROS to the folder holding the full set of .mat files)"
            )
        path = found
    elif not path.exists():
        raise ValueError(f"Maros-Meszaros problem file {str(path)!r} not found")
    try:
        import scipy.io
        import scipy.sparse
    except ImportError as err:  # pragma: no cover
        raise ImportError("load_maros_meszaros needs scipy (pip install scipy)") from err
    d = scipy.io.loadmat(path)

    def dense(v):
        return np.asarray(v.toarray() if scipy.sparse.issparse(v) else v, np.float64)

    P = dense(d["P"])
    q = dense(d["q"]).ravel()
    A = dense(d["A"])
    l = dense(d["l"]).ravel()
    u = dense(d["u"]).ravel()
    l = np.where(l <= -1e20, -np.inf, l)
    u = np.where(u >= 1e20, np.inf, u)
    P = 0.5 * (P + P.T)
    return QP(*(jnp.asarray(v, dtype) for v in (P, q, A, l, u)))


def shift_mpc_warm_start(previous, qp: QP, nx: int, nu: int, T: int):
    r"""The standard MPC warm start: the previous solution shifted by one time step.

    ``previous`` is a `Solution` of `mpc` (same ``nx, nu, T``);
    ``qp`` the next problem. States ``(x_1..x_T, x_T)``, inputs ``(u_1..u_{T-1},
    u_{T-1})`` and the multipliers of the dynamics and bound rows are shifted the same
    way; the relaxed copy is ``clip(A x, l, u)`` of the new problem.
    Returns a `WarmStart` for ``solve_qp(qp, x0=...)``.
    """
    from jaxsolve.qp.flexqp import WarmStart

    prev = previous.state
    Nx = (T + 1) * nx

    def shift_vars(v):
        xs = v[:Nx].reshape(T + 1, nx)
        us = v[Nx:].reshape(T, nu)
        xs = jnp.concatenate([xs[1:], xs[-1:]])
        us = jnp.concatenate([us[1:], us[-1:]])
        return jnp.concatenate([xs.ravel(), us.ravel()])

    x = shift_vars(prev.x)
    y_eq = prev.y[:Nx].reshape(T + 1, nx)  # row 0: x_0 = x0, rows 1..T: dynamics
    y_eq = jnp.concatenate([y_eq[1:2], y_eq[2:], y_eq[-1:]]).ravel()
    y = jnp.concatenate([y_eq, shift_vars(prev.y[Nx:])])
    z = jnp.clip(qp.A @ x, qp.l, qp.u)
    return WarmStart(x, y, z, prev.rho, prev.mu)
