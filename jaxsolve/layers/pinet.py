r"""Pinet's projection solver on the shared protocol: Douglas-Rachford on the lifted set.

Projects a point $y$ onto $\{x : Ax = b,\ l \le Cx \le u,\ lb \le x \le ub\}$
as in Pinet (Grontas, Terpin, Balta, D'Andrea, Lygeros; "Pinet: optimizing
hard-constrained neural networks with orthogonal projection layers", arXiv
2508.10480, section 3, eq. (8)). In the equilibrated lifted variables
$\tilde w = D_c^{-1}(x, s)$ (see `jaxsolve.layers.polytope`) the problem is

$$
\min_{\tilde w}\ \underbrace{\iota_{\tilde{\mathcal A}}(\tilde w)}_{f}
+ \underbrace{\tfrac12\|D_x \tilde w_x - y\|^2 + \iota_{\tilde{\mathcal K}}(\tilde w)}_{g},
$$

and Douglas-Rachford with step $\sigma$ and relaxation $\omega$ on the
governing sequence $s^k$ reads

$$
z^k = \Pi_{\tilde{\mathcal A}}(s^k),\quad
t^k = \operatorname{prox}_{\sigma g}(2z^k - s^k),\quad
s^{k+1} = s^k + \omega (t^k - z^k),
$$

where $\operatorname{prox}_{\sigma g}$ is, coordinate by coordinate, the clip of
$(\sigma d_i y_i + r_i)/(1 + \sigma d_i^2)$ ($x$-block) or of $r_i$
($s$-block) to the scaled box. (Pinet writes the objective as
$\|x - y\|^2$, so its $\sigma$ is half of ours.) The iterate reported
is $x^k = D_x z^k_x$, which satisfies $Ax = b$ exactly; at a fixed point
$z^\star = t^\star$ is the projection.
``error`` $= \|D_c(t^k - z^k)\|_\infty / \max(1, \|D_c z^k\|_\infty)$ is relative
to the size of $(x, Cx)$: the returned point violates the inequalities and bounds
by at most ``error`` $\cdot \max(1, \|(x, Cx)\|_\infty)$ and $Ax = b$ only
by round-off. (Relative because float32 cannot represent $Cx$ more finely than
$\varepsilon_{32}\sum_j |C_{ij} x_j|$, about 2e-5 on the n = 1000 DC3 problem.)

**Infeasibility** (``status = INFEASIBLE``). If the affine set and the box do not
meet, $t^k - z^k$ tends to the gap vector between them. Each step tests the
previous difference $\delta = t^{k-1} - z^{k-1}$ as a Farkas certificate
(`infeasibility_certificate`; derived here, the paper runs a fixed number of
iterations): with $v = -(I - P)\delta$ (its component normal to the affine
set, obtained from the $P s$ products the iteration computes anyway, so it
costs no extra matrix product), every affine point has $\langle v, a\rangle =
\langle v, q\rangle$ and every box point $\langle v, k\rangle \le
\sigma_{\mathcal K}(v)$, so $\langle v, q\rangle - \sigma_{\mathcal K}(v) > 0$
proves the sets disjoint. It is declared above ``infeasible_tol`` times
$(1 + \|q\|_\infty)\|v\|_\infty$ (scaled up as
$\sqrt{\varepsilon_{\text{dtype}}/\varepsilon_{64}}$ below float64).
Inconsistent ``Ax = b`` (rank-deficient ``A``) is caught at ``init``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Status
from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.layers.active import affine_projection
from jaxsolve.layers.polytope import Factors
from jaxsolve.projections import box

__all__ = [
    "ProjectionArgs",
    "State",
    "Info",
    "PinetProjection",
    "pinet_projection",
    "dr_map",
    "dr_step",
    "DRStep",
    "governing_start",
    "start_infeasible",
    "relative_residual",
    "infeasibility_certificate",
    "auto_sigma",
]

_EPS64 = float(np.finfo(np.float64).eps)


class ProjectionArgs(NamedTuple):
    """Problem data of one projection (vmap over everything but the factors' static sizes).

    Attributes:
        factors: `Factors` of the polytope.
        y: the point to project, ``(n,)``.
        b: equality right-hand side, ``(p,)`` (``(0,)`` if there is none).
        lo, hi: lifted bounds ``(lb, l)`` and ``(ub, u)``, ``(n + m,)``, may be infinite.
    """

    factors: Factors
    y: jax.Array
    b: jax.Array
    lo: jax.Array
    hi: jax.Array


class State(NamedTuple):
    """Douglas-Rachford state.

    ``x`` is the current projection estimate $D_x z_x$ (original units); ``s``
    the governing sequence (scaled, lifted; pass it back as a warm start); ``q`` the
    affine offset; ``ps`` and ``delta`` the last $P s$ and $t - z$
    (for the infeasibility certificate); ``act`` the active set of the last step
    (int8 per lifted row: +1 / -1 where the box clipped the prox at its upper /
    lower bound, 0 elsewhere; the implicit rule differentiates at it).
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    s: jax.Array
    q: jax.Array
    ps: jax.Array
    delta: jax.Array
    act: jax.Array


class Info(NamedTuple):
    """Per-step diagnostics: ``gap`` is the infeasibility certificate value (> 0: disjoint)."""

    gap: jax.Array


def _scaled_bounds(args: ProjectionArgs, dtype):
    d = args.factors.d_c.astype(dtype)
    return args.lo.astype(dtype) / d, args.hi.astype(dtype) / d


class DRStep(NamedTuple):
    r"""One Douglas-Rachford step (`dr_step`); every field has the shape of ``s``.

    Attributes:
        ps: $P s$, the projection of ``s`` onto the null space of the scaled constraints.
        z: $\Pi_{\tilde{\mathcal A}}(s) = P s + q$.
        t: $\operatorname{prox}_{\sigma g}(2z - s)$.
        s: the next governing sequence $s + \omega (t - z)$.
        act: int8 active set of the prox: +1 / -1 where the box clipped it at its
            upper / lower bound, 0 elsewhere.
    """

    ps: jax.Array
    z: jax.Array
    t: jax.Array
    s: jax.Array
    act: jax.Array


def dr_step(s, q, y, lo_s, hi_s, factors: Factors, sigma, omega) -> DRStep:
    r"""One Douglas-Rachford step $s \mapsto s + \omega(t - z)$ (module docstring).

    ``s``, ``q``, ``lo_s``, ``hi_s`` are ``(..., n + m)`` and ``y`` is ``(..., n)``.
    `PinetProjection.step` calls it; `jaxsolve.layers.project` vmaps that step over a
    batch, which makes its products matrix-matrix ones with the factors shared by
    every lane, each lane computed as alone.
    """
    n = factors.n
    d = factors.d_c.astype(s.dtype)
    dx = d[:n]
    ps = factors.proj_null(s)
    z = ps + q
    r = 2 * z - s
    tx = (sigma * dx * y + r[..., :n]) / (1 + sigma * dx * dx)
    v = jnp.concatenate([tx, r[..., n:]], axis=-1)  # the prox before the clip
    t = box(v, lo_s, hi_s)
    act = jnp.where(v > hi_s, 1, jnp.where(v < lo_s, -1, 0)).astype(jnp.int8)
    return DRStep(ps, z, t, s + omega * (t - z), act)


def dr_map(s, q, y, lo_s, hi_s, factors: Factors, sigma, omega):
    r"""One Douglas-Rachford step $s \mapsto s + \omega(t - z)$; returns ``(ps, z, t, s_new)``.

    This is the fixed-point map $T(s; y, b, l, u, lb, ub)$ whose fixed point the
    implicit backward of `jaxsolve.layers.project` differentiates with
    ``backward="bicgstab"``, ``"gmres"`` or ``"fixed_point"``.
    """
    return dr_step(s, q, y, lo_s, hi_s, factors, sigma, omega)[:4]


def governing_start(factors: Factors, x0):
    """The governing sequence of a point: $D_c^{-1}(x_0, C x_0)$, ``(..., n + m)``."""
    d = factors.d_c.astype(x0.dtype)
    n = factors.n
    return jnp.concatenate([x0 / d[:n], (x0 @ factors.C.astype(x0.dtype).T) / d[n:]], axis=-1)


def start_infeasible(factors: Factors, q, b, lo_s, hi_s, tol):
    """Infeasibility known before any step (bool, one per lane of the last axis).

    An empty box (``lo_s > hi_s`` somewhere) or an inconsistent ``Ax = b``: the
    affine offset ``q`` misses ``b`` by more than ``tol (1 + |b|_inf)``.
    """
    infeasible = jnp.any(lo_s > hi_s, axis=-1)
    if factors.p:
        n = factors.n
        dx = factors.d_c.astype(q.dtype)[:n]
        res = jnp.max(jnp.abs((dx * q[..., :n]) @ factors.A.astype(q.dtype).T - b), axis=-1)
        infeasible |= res > tol * (1 + jnp.max(jnp.abs(b), axis=-1))
    return infeasible


def relative_residual(d, z, delta):
    r"""``error``: $\|D_c \delta\|_\infty / \max(1, \|D_c z\|_\infty)$ over the last axis."""
    return jnp.max(jnp.abs(d * delta), axis=-1) / jnp.maximum(1, jnp.max(jnp.abs(d * z), axis=-1))


def infeasibility_certificate(delta_prev, ps_prev, ps, q, lo_s, hi_s, omega, tol):
    r"""The Farkas test of the module docstring on the previous step's $t - z$.

    ``delta_prev`` and ``ps_prev`` are the previous step's $t - z$ and $P s$, ``ps``
    this step's: $P\delta_{prev} = (P s_k - P s_{k-1}) / \omega$ reuses this step's
    product, so $v = -(I - P)\delta_{prev}$ costs no matrix product. All arrays are
    ``(..., n + m)``; returns ``(certified, gap)`` per lane, ``gap > 0`` proving the
    affine set and the box disjoint, ``certified`` when it exceeds
    ``tol (1 + |q|_inf)`` (``tol`` from `scaled_infeasible_tol`).
    """
    v = -(delta_prev - (ps - ps_prev) / omega)
    vmax = jnp.max(jnp.abs(v), axis=-1, keepdims=True)
    vn = v / jnp.where(vmax > 0, vmax, 1)
    # Round-off leaves tiny entries on coordinates with an infinite bound, where the
    # exact gap vector is zero; they are dropped (finite-bound entries are kept exactly).
    theta = float(np.sqrt(np.finfo(v.dtype).eps))
    free = jnp.where(vn > 0, jnp.isinf(hi_s), jnp.isinf(lo_s))
    vn = jnp.where(free & (jnp.abs(vn) <= theta), 0, vn)
    support = jnp.sum(
        jnp.where(vn > 0, vn * jnp.where(vn > 0, hi_s, 0), 0)
        + jnp.where(vn < 0, vn * jnp.where(vn < 0, lo_s, 0), 0),
        axis=-1,
    )
    gap = jnp.sum(vn * q, axis=-1) - support
    certified = (vmax[..., 0] > 0) & (gap > tol * (1 + jnp.max(jnp.abs(q), axis=-1)))
    return certified, gap


def auto_sigma(factors) -> jax.Array:
    r"""Default step $\sigma = 0.3 / \operatorname{mean}(d_x^2)$.

    After equilibration the proximal step acts on $x$ through $\sigma d_x^2$, so
    its mean is what a default can fix; 0.3 gave the fewest steps on DC3 simple QPs of
    several sizes and output scales (Pinet tunes $\sigma$ per problem instead).
    """
    dx = factors.d_c[: factors.n]
    return 0.3 / jnp.mean(dx * dx)


def resolve_sigma(sigma, factors, like):
    """The step: ``sigma``, or `auto_sigma` when it is None, in the dtype of ``like``."""
    return hyper(auto_sigma(factors) if sigma is None else sigma, like)


def scaled_infeasible_tol(infeasible_tol, like):
    """The certificate's threshold, scaled up as ``sqrt(eps / eps64)`` below float64."""
    dtype = jnp.result_type(like)
    factor = float(np.sqrt(max(float(np.finfo(dtype).eps), _EPS64) / _EPS64))
    return hyper(infeasible_tol, like) * factor


class PinetProjection(AbstractSolver):
    """Douglas-Rachford projection (see `pinet_projection`, which builds it).

    ``sigma`` (None: `auto_sigma`), ``omega``, ``infeasible_tol`` and
    ``backward_tol`` (the implicit rule's linear solve; None: 1e-10 in float64, 1e-6
    below) are traced hyperparameters; ``start``, ``backward`` (the implicit rule's
    form: ``"kkt"``, ``"bicgstab"``, ``"gmres"`` or ``"fixed_point"``, see
    `jaxsolve.layers.project`), ``backward_steps`` (its iteration budget) and
    ``bounds`` (the box rows ``lb <= x <= ub`` are constraints, as opposed to all
    infinite) are structural.
    """

    sigma: Any = None
    omega: Any = 1.7
    infeasible_tol: Any = 1e-6
    backward_tol: Any = None
    start: str = eqx.field(static=True, default="point")
    backward: str = eqx.field(static=True, default="kkt")
    backward_steps: int = eqx.field(static=True, default=200)
    bounds: bool = eqx.field(static=True, default=True)

    def init(self, x0, args: ProjectionArgs) -> State:
        f = args.factors
        dtype = jnp.result_type(x0)
        d = f.d_c.astype(dtype)
        s0 = governing_start(f, x0) if self.start == "point" else x0
        q = f.offset(args.b.astype(dtype))
        itol = scaled_infeasible_tol(self.infeasible_tol, s0)
        lo_s, hi_s = _scaled_bounds(args, dtype)
        infeasible = start_infeasible(f, q, args.b.astype(dtype), lo_s, hi_s, itol)
        status = jnp.where(infeasible, jnp.int32(Status.INFEASIBLE), jnp.int32(Status.SUCCESS))
        finite = jnp.all(jnp.isfinite(s0))
        big = jnp.asarray(jnp.finfo(dtype).max, dtype)
        error = jnp.where(finite, big, jnp.asarray(jnp.nan, dtype))
        x = d[: f.n] * s0[: f.n]
        zeros = jnp.zeros_like(s0)
        act = jnp.zeros(s0.shape, jnp.int8)
        return State(x, jnp.int32(0), error, status.astype(jnp.int32), s0, q, zeros, zeros, act)

    def step(self, state: State, args: ProjectionArgs) -> tuple[State, Info]:
        f = args.factors
        dtype = state.s.dtype
        sigma, omega = resolve_sigma(self.sigma, f, state.s), hyper(self.omega, state.s)
        itol = scaled_infeasible_tol(self.infeasible_tol, state.s)
        d = f.d_c.astype(dtype)
        lo_s, hi_s = _scaled_bounds(args, dtype)
        y = args.y.astype(dtype)
        ps, z, t, s_new, act = dr_step(state.s, state.q, y, lo_s, hi_s, f, sigma, omega)
        delta = t - z
        error = relative_residual(d, z, delta)
        x = d[: f.n] * z[: f.n]
        certified, gap = infeasibility_certificate(
            state.delta, state.ps, ps, state.q, lo_s, hi_s, omega, itol
        )
        certified = certified & (state.iter_num > 0)
        status = jnp.where(certified, jnp.int32(Status.INFEASIBLE), state.status)
        new = State(x, state.iter_num + 1, error, status, s_new, state.q, ps, delta, act)
        return new, Info(gap)

    # --- implicit differentiation (jaxsolve.core.adjoint's implicit_root hook) ---------

    def implicit_root(self, state: State, args: ProjectionArgs):
        """``backward="kkt"``: the projection ``x``; otherwise the governing sequence
        ``s``, with ``x = D_x[P s + W b]_x`` (its value kept: the returned ``x``)."""
        if self.backward == "kkt":
            return state.x, lambda x: state._replace(x=x)
        f = args.factors

        def restore(s):
            d = f.d_c.astype(s.dtype)
            x = d[: f.n] * (f.proj_null(s) + f.offset(args.b.astype(s.dtype)))[: f.n]
            return state._replace(s=s, x=state.x + (x - jax.lax.stop_gradient(x)))

        return state.s, restore

    def optimality(self, z, args: ProjectionArgs, state: State):
        r"""Zero at the projection.

        ``backward="kkt"``: $x - \Pi(y, b, h)$, $\Pi$ the projection onto
        the affine set of the rows active at the solution (``state.act``;
        `jaxsolve.layers.active.affine_projection`): its Jacobian in ``x`` is the
        identity (``implicit_solve`` is the identity), and the derivative in the data is
        one masked CG solve of the active-set KKT system. Otherwise Pinet's form, the
        Douglas-Rachford fixed point $T(s; y, b, l, u, lb, ub) - s$
        (`dr_map`), solved by BiCGSTAB, GMRES or fixed-point sweeps.
        """
        f = args.factors
        dtype = z.dtype
        if self.backward == "kkt":
            tol = 1e-10 if dtype == jnp.float64 else 1e-6
            tol = hyper(tol if self.backward_tol is None else self.backward_tol, z)
            return z - affine_projection(
                self.bounds,
                self.backward_steps,
                f,
                state.act,
                state.x,
                args.y.astype(dtype),
                args.b.astype(dtype),
                args.lo.astype(dtype),
                args.hi.astype(dtype),
                tol,
            )
        sigma, omega = resolve_sigma(self.sigma, f, z), hyper(self.omega, z)
        lo_s, hi_s = _scaled_bounds(args, dtype)
        q = f.offset(args.b.astype(dtype))
        return dr_step(z, q, args.y.astype(dtype), lo_s, hi_s, f, sigma, omega).s - z

    @property
    def implicit_solve(self):
        """The linear solver of `optimality`'s Jacobian (see there)."""
        if self.backward == "kkt":
            return _identity_solve
        tol = 1e-10 if self.backward_tol is None else self.backward_tol
        return _DRSolve(self.backward, self.backward_steps, tol)


def _identity_solve(matvec, b):
    """The solve of an identity Jacobian."""
    return b


@dataclasses.dataclass(frozen=True)
class _DRSolve:
    """Pinet's backward solvers for the Douglas-Rachford Jacobian ``J = dT/ds - I``:
    BiCGSTAB (``tol`` relative, ``steps`` iterations), GMRES (restarts of at most 30)
    or ``steps`` fixed-point sweeps ``v <- dT/ds v - b`` (Pinet's ``fpi``)."""

    method: str
    steps: int
    tol: Any

    def __call__(self, matvec, b):
        if self.method == "fixed_point":
            return jax.lax.fori_loop(0, self.steps, lambda _, v: matvec(v) + v - b, -b)
        tol = jnp.asarray(self.tol, b.dtype)
        if self.method == "gmres":
            restart = int(min(b.shape[-1], 30))
            maxiter = max(1, self.steps // restart)
            out, _ = jax.scipy.sparse.linalg.gmres(
                matvec, b, tol=tol, atol=0.0, restart=restart, maxiter=maxiter
            )
            return out
        out, _ = jax.scipy.sparse.linalg.bicgstab(matvec, b, tol=tol, atol=0.0, maxiter=self.steps)
        return out


def pinet_projection(
    *,
    sigma: float | None = None,
    omega: float = 1.7,
    infeasible_tol: float = 1e-6,
    start: str = "point",
) -> PinetProjection:
    r"""Douglas-Rachford projection onto a polytope (Pinet, arXiv 2508.10480), as a ``Solver``.

    Solves $\min_x \tfrac12\|x - y\|^2$ s.t. $Ax = b,\ l \le Cx \le u,\
    lb \le x \le ub$ by the iteration of the module docstring, on
    ``args = ProjectionArgs(factors, y, b, lo, hi)`` (build it with
    `jaxsolve.layers.projection_args`). Run it with ``jaxsolve.solve``; under
    ``vmap`` only the data changes per lane, the factorization is shared.

    Args:
        sigma: Douglas-Rachford step (numeric hyperparameter: no recompilation).
            Pinet's $\sigma$ is half of this one. ``None``: the scaling-aware
            default $0.3/\operatorname{mean}(d_x^2)$ of `auto_sigma`.
        omega: relaxation in (0, 2).
        infeasible_tol: threshold of the infeasibility certificate (relative, see the
            module docstring).
        start: ``"point"``: ``x0`` is a point of $\mathbb{R}^n$, lifted to
            $D_c^{-1}(x_0, Cx_0)$; ``"governing"``: ``x0`` is a governing
            sequence (``state.s`` of an earlier solve), a warm start.

    Returns:
        The solver; its ``state.x`` is the projection estimate.
    """
    if start not in ("point", "governing"):
        raise ValueError(f"start must be 'point' or 'governing', got {start!r}")
    for name, val in (("sigma", sigma), ("infeasible_tol", infeasible_tol)):
        if isinstance(val, int | float) and not val > 0:
            raise ValueError(f"{name} must be positive, got {val}")
    if isinstance(omega, int | float) and not 0 < omega < 2:
        raise ValueError(f"omega must lie in (0, 2), got {omega}")
    num = lambda v: float(v) if isinstance(v, int) else v  # noqa: E731 - ints would be static
    return PinetProjection(
        sigma=num(sigma), omega=num(omega), infeasible_tol=num(infeasible_tol), start=start
    )
