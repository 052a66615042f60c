r"""``project``: batched Pinet projection, differentiated implicitly by the driver's adjoint.

Forward: Pinet's Douglas-Rachford iteration (`jaxsolve.layers.pinet`) run on the
whole batch at once, as matrix-matrix products with the factors shared by every
example (computed once by `jaxsolve.layers.factorize`). Every ``check_every``
steps the batch is checked: the relative fixed-point residual (``error``), the
infeasibility certificate, and, once a lane's active set (read off the reflection
$r = 2z - s$) has not changed since the previous check, an exact *polish*: the
projection onto the affine set of those active rows, accepted when it is feasible and
its multipliers have the right signs to ``tol`` (`jaxsolve.layers.active.polish`).
A lane ends at the first check where either test passes; its outputs are frozen there,
so a batched call returns, lane for lane, what single calls return. The polish pays
because Douglas-Rachford identifies the active set well before its iterates reach
``tol``. The start, the step and its certificate are the Pinet solver's own
(`PinetProjection.init` and `PinetProjection.step`, vmapped over the lanes). The loop
itself is `jaxsolve.layers._batched`; this module holds the front door, its argument
checks and the derivatives.

Derivatives (implicit function theorem, Pinet, arXiv 2508.10480, section 3.2, extended
to the constraint data $\theta = (y, b, l, u, lb, ub)$): the forward runs on
constant inputs and `jaxsolve.core.adjoint.implicit_solution` differentiates the
Pinet solver's optimality condition at each lane's end
(`optimality`), so ``jax.grad`` and
``jax.jvp`` both work; ``backward`` picks the condition:

* ``backward="kkt"`` (default): at the active set of the returned point, the KKT
  system of the projection, reduced to one masked Gram system shared with the polish
  and solved by batched CG (`jaxsolve.layers.active.affine_projection`: the
  condition is $x = \Pi(y, b, h)$ at that active set). Its size is the
  number of inequality (and bound) rows, and it needs no iteration count tuned to the
  forward.
* ``"bicgstab"``, ``"gmres"``, ``"fixed_point"``: Pinet's form, at the fixed point
  $s^\star = T(s^\star; \theta)$ of the Douglas-Rachford map with
  $x = D_x[P s^\star + W b]_x$: for $\bar z = (D_x \bar x, 0)$, the adjoint system
  $(I - \partial_s T^\top)\,\xi = P \bar z$ gives
  $\bar\theta = \partial_\theta T^\top \xi + (0, W^\top \bar z, 0, \dots)$,
  solved matrix-free per example (BiCGSTAB, GMRES, or fixed-point sweeps
  $\xi \leftarrow \partial_s T^\top \xi + P\bar z$, Pinet's ``fpi``). At the
  same active set both give the same derivative.
* ``"unroll"``: exactly ``max_steps`` steps in a ``lax.scan``, differentiated through.

Unlike the ``pinet-hcnn`` package, cotangents reach ``b, l, u, lb, ub`` as well as
``y``. ``A`` and ``C`` are structure: no gradient flows to them.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import Solution, solve
from jaxsolve.core.adjoint import implicit_solution
from jaxsolve.core.validation import check_floating, is_concrete
from jaxsolve.layers._batched import Config, forward
from jaxsolve.layers.pinet import (
    PinetProjection,
    ProjectionArgs,
    State,
    auto_sigma,
)
from jaxsolve.layers.polytope import Polytope

__all__ = ["project", "projection_args", "default_project_tol", "auto_sigma"]

_BACKWARDS = ("kkt", "bicgstab", "gmres", "fixed_point", "unroll")


def default_project_tol(dtype) -> float:
    """Default ``tol`` of `project`: 1e-8 in float64, 1e-6 in float32 (1e-2 below).

    Tighter than `jaxsolve.default_tol` in float32 because ``error`` bounds the
    (relative) constraint violation, which a projection layer should keep near 1e-5.
    """
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return 1e-8
    if dtype == np.float32:
        return 1e-6
    return 1e-2


def _run(cfg: Config, y, b, lo, hi, x0, factors, solver: PinetProjection, tol):
    args = ProjectionArgs(factors, y, b, lo, hi)
    loop = "fixed" if cfg.backward == "unroll" else "while"
    sol = solve(solver, x0, args, tol=tol, max_steps=cfg.steps, loop=loop)
    return sol.x, sol.state.s, sol.status, sol.num_steps, sol.error


def _implicit(state: State, y, b, lo, hi, factors, solver: PinetProjection) -> jax.Array:
    """``state.x`` (each lane's final `State`, from the forward) with the implicit
    derivatives of the Pinet solver's optimality condition at each lane's end
    (`PinetProjection.optimality`), by the driver's adjoint
    (`jaxsolve.core.adjoint.implicit_solution`), lane by lane."""
    sol = Solution(state.x, state, state.status, state.iter_num, state.error, None, None)
    args = ProjectionArgs(factors, y, b, lo, hi)
    axes = ProjectionArgs(None, 0, 0, 0, 0)
    return implicit_solution(solver, args, sol, batch_axes=axes).x


@partial(jax.jit, static_argnums=(0, 1))
def _compute(cfg: Config, batch: tuple, leaves: dict, factors, solver: PinetProjection, tol):
    """The traced part of `project`, compiled once per configuration and shapes
    (so eager calls with the same shapes reuse it; inside a user's ``jit`` it is inlined)."""
    size = int(np.prod(batch)) if batch else 1
    if cfg.dr_tol is not None:
        solver = dataclasses.replace(solver, backward_tol=cfg.dr_tol)
    if cfg.backward == "unroll":
        flat, axes = {}, {}
        for k, v in leaves.items():
            if v.shape[:-1] == () or not batch:
                flat[k], axes[k] = v, None
            else:
                flat[k] = jnp.broadcast_to(v, batch + v.shape[-1:]).reshape(size, v.shape[-1])
                axes[k] = 0
        x0 = flat.get("warm", flat["y"])
        x0_axis = axes.get("warm", axes["y"])

        def one(y_, b_, lo_, hi_, x0_):
            return _run(cfg, y_, b_, lo_, hi_, x0_, factors, solver, tol)

        if batch:
            in_axes = (axes["y"], axes["b"], axes["lo"], axes["hi"], x0_axis)
            out = jax.vmap(one, in_axes=in_axes)(flat["y"], flat["b"], flat["lo"], flat["hi"], x0)
        else:
            out = one(flat["y"], flat["b"], flat["lo"], flat["hi"], x0)
        x, s, status, k, err = out
    else:
        # One (size, .) array per leaf: the forward is written for a batch axis.
        flat = {
            k: jnp.broadcast_to(v, batch + v.shape[-1:]).reshape(size, v.shape[-1])
            for k, v in leaves.items()
        }
        x0 = flat.get("warm", flat["y"])
        data = (flat["y"], flat["b"], flat["lo"], flat["hi"])
        # the forward on constant inputs; the derivatives are the implicit rule's
        out = forward(cfg, *jax.lax.stop_gradient((*data, x0, factors, solver, tol)))
        x = _implicit(out, *data, factors, solver)
        s, status, k, err = out.s, out.status, out.iter_num, out.error
    unflat = lambda a: a.reshape(batch + a.shape[1:]) if batch else a[0]
    if cfg.backward != "unroll" or batch:
        x, s, status, k, err = map(unflat, (x, s, status, k, err))
    return x, s, status, k, err


def projection_args(y, polytope: Polytope) -> ProjectionArgs:
    """``ProjectionArgs`` of one projection (unbatched data) for `pinet_projection`."""
    y = jnp.asarray(y)
    if polytope.factors is None:
        polytope = polytope.factorize()
    lo, hi, b = polytope.lifted_bounds(y.dtype)
    if lo.ndim != 1 or b.ndim != 1 or y.ndim != 1:
        raise ValueError("projection_args builds one problem: y, b, l, u, lb, ub must be unbatched")
    if y.shape != (polytope.n,):
        raise ValueError(f"y must have shape ({polytope.n},) to match the polytope, got {y.shape}")
    check_floating("y", y)
    return ProjectionArgs(polytope.factors.astype(y.dtype), y, b, lo, hi)


def _check_number(name, value, *, allow_none=True):
    if value is None:
        if allow_none:
            return
        raise ValueError(f"{name} must be given")
    if is_concrete(value):
        v = np.asarray(value)
        if v.ndim != 0 or not np.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")


def project(
    y: jax.Array,
    polytope: Polytope,
    *,
    max_steps: int = 1000,
    tol: float | None = None,
    warm_start: Solution | jax.Array | None = None,
    sigma: float | None = None,
    omega: float = 1.7,
    backward: str = "kkt",
    backward_steps: int = 200,
    backward_tol: float | None = None,
    infeasible_tol: float = 1e-6,
    check_every: int = 5,
    polish: bool | None = None,
    refine: bool | None = None,
) -> Solution:
    r"""Euclidean projection of ``y`` onto a `Polytope`, batched, implicitly differentiable.

    $$
    x = \operatorname*{argmin}_x \tfrac12\|x - y\|^2 \ \text{ s.t. }\
    Ax = b,\ l \le Cx \le u,\ lb \le x \le ub
    $$

    by Pinet's Douglas-Rachford iteration on the lifted, Ruiz-equilibrated problem
    (Grontas, Terpin et al., arXiv 2508.10480), run on the whole batch until, for each
    example, the fixed-point residual (a bound on the violation of ``x``) is at most
    ``tol``, or the polish on the identified active set gives a point that satisfies
    the KKT conditions to ``tol`` (module docstring), or ``max_steps`` steps.

    Batching: ``y`` is ``(..., n)``; ``b, l, u, lb, ub`` in ``polytope`` may carry their
    own leading batch shapes; all broadcast together. The factorization of ``A``/``C``
    is computed once (pass ``polytope.factorize()`` to reuse it across calls).

    Differentiation: reverse and forward mode by the implicit function theorem, the
    driver's adjoint (module docstring), giving cotangents for ``y``, ``b``, ``l``, ``u``,
    ``lb``, ``ub``; ``backward="unroll"`` instead runs exactly ``max_steps`` steps of the
    per-example solver in a ``lax.scan`` and backpropagates through them (forward mode
    works too).

    Args:
        y: points to project, ``(..., n)``, floating.
        polytope: the constraint set (its data may be batched).
        max_steps: maximal number of Douglas-Rachford steps (static).
        tol: tolerance on the residual (default `default_project_tol`).
        warm_start: where to start: an earlier call's `Solution` (or its ``state``, the
            governing sequence ``(..., n + m)``).
        sigma: Douglas-Rachford step (twice Pinet's); default `auto_sigma`.
        omega: relaxation in (0, 2).
        backward: ``"kkt"`` (default: one CG solve of the active-set KKT system),
            ``"bicgstab"``, ``"gmres"``, ``"fixed_point"`` (Pinet's linear system of the
            Douglas-Rachford map, per example) or ``"unroll"``.
        backward_steps: iteration budget of the backward linear solve.
        backward_tol: relative tolerance of the backward solve (default: 1e-10 in
            float64, 1e-6 in float32: the backward is as accurate as the forward).
        infeasible_tol: threshold of the infeasibility certificate.
        check_every: steps between two checks of the batch (static).
        polish: try the exact active-set polish at the checks (static). Default: on
            with ``backward="kkt"``, off with the Douglas-Rachford backward solvers,
            which linearize the map at its fixed point (a polished lane stops before it).
        refine: end with one feasibility correction onto the affine set of the active
            rows (`jaxsolve.layers.active.refine`; static). Default: on below
            float64 when polishing, off in float64. Its residuals are computed with an
            error-free split (`jaxsolve.layers.active.accurate_residual`), so in float32
            the violation comes down to that of the exact projection rounded to float32.

    Returns:
        A `jaxsolve.Solution`, every field batched like ``x`` (its fields below).

    The fields of the returned `jaxsolve.Solution`:

    - ``x``: the projections, broadcast batch shape + ``(n,)`` (differentiable);
    - ``status``: `Status` codes: ``SUCCESS``, ``INFEASIBLE`` (empty polytope, by the
      certificate), ``MAX_STEPS``, ``NONFINITE``; failures are statuses, never
      exceptions inside ``jit``;
    - ``num_steps``: Douglas-Rachford steps taken;
    - ``error``: the final relative fixed-point residual
      $\|D_c(t - z)\|_\infty / \max(1, \|D_c z\|_\infty)$, so the returned point
      violates the constraints by at most ``error * max(1, |(x, Cx)|_inf)``;
    - ``state``: the final governing sequence $s$, ``(..., n + m)``, without
      gradient: pass it as ``warm_start=`` to the next call.

    In a network, take ``project(y, polytope).x`` (or use `ProjectionLayer`).
    """
    if not isinstance(polytope, Polytope):
        raise TypeError(
            f"polytope must be a jaxsolve.layers.Polytope, got {type(polytope).__name__}"
        )
    check_floating("y", y)
    y = jnp.asarray(y)
    n = polytope.n
    if y.ndim == 0 or y.shape[-1] != n:
        raise ValueError(f"y must have shape (..., {n}) to match the polytope, got {y.shape}")
    if 0 in y.shape:
        raise ValueError(f"y has an empty axis (shape {y.shape})")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    if backward not in _BACKWARDS:
        raise ValueError(f"backward must be one of {_BACKWARDS}, got {backward!r}")
    if isinstance(backward_steps, bool) or not isinstance(backward_steps, int | np.integer):
        raise ValueError(f"backward_steps must be a positive int, got {backward_steps!r}")
    if backward_steps < 1:
        raise ValueError(f"backward_steps must be a positive int, got {backward_steps!r}")
    if isinstance(check_every, bool) or not isinstance(check_every, int | np.integer):
        raise ValueError(f"check_every must be an int >= 2, got {check_every!r}")
    if check_every < 2:
        raise ValueError(f"check_every must be an int >= 2, got {check_every!r}")
    if polish is None:
        polish = backward == "kkt"
    if not isinstance(polish, bool):
        raise ValueError(f"polish must be True, False or None, got {polish!r}")
    for name, val in (("tol", tol), ("backward_tol", backward_tol)):
        _check_number(name, val)
    for name, val in (("sigma", sigma), ("infeasible_tol", infeasible_tol)):
        if val is None and name == "sigma":
            continue
        _check_number(name, val, allow_none=False)
        if is_concrete(val) and not float(val) > 0:
            raise ValueError(f"{name} must be positive, got {val!r}")
    if is_concrete(omega) and not 0 < float(omega) < 2:
        raise ValueError(f"omega must lie in (0, 2), got {omega!r}")

    dtype = y.dtype
    if polytope.factors is None:
        polytope = polytope.factorize()
    factors = polytope.factors.astype(dtype)
    N = n + polytope.m
    lo, hi, b = polytope.lifted_bounds(dtype)
    warm = warm_start.state if isinstance(warm_start, Solution) else warm_start
    if warm is not None:
        check_floating("warm_start", warm)
        warm = jnp.asarray(warm, dtype)
        if warm.ndim == 0 or warm.shape[-1] != N:
            raise ValueError(
                f"warm_start must have shape (..., {N}) (a previous Solution.state), got {warm.shape}"
            )
    if tol is None:
        tol = default_project_tol(dtype)
    if backward_tol is None:
        backward_tol = 1e-10 if dtype == jnp.float64 else 1e-6
    dr = backward not in ("kkt", "unroll")
    solver = PinetProjection(
        None if sigma is None else jnp.asarray(sigma, dtype),
        jnp.asarray(omega, dtype),
        jnp.asarray(infeasible_tol, dtype),
        None if dr else jnp.asarray(backward_tol, dtype),  # dr: cfg.dr_tol
        start="point" if warm is None else "governing",
        backward="kkt" if backward == "unroll" else backward,
        backward_steps=int(backward_steps),
        bounds=polytope.lb is not None or polytope.ub is not None,
    )
    cfg = Config(
        int(max_steps),
        "point" if warm is None else "governing",
        backward,
        int(backward_steps),
        int(check_every),
        polish,
        polytope.lb is not None or polytope.ub is not None,
        bool(refine) if refine is not None else bool(polish and dtype != jnp.float64),
        float(backward_tol) if dr else None,
    )

    leaves = {"y": y, "b": b, "lo": lo, "hi": hi}
    if warm is not None:
        leaves["warm"] = warm
    try:
        batch = tuple(np.broadcast_shapes(*(v.shape[:-1] for v in leaves.values())))
    except ValueError:
        shapes = {k: v.shape for k, v in leaves.items()}
        raise ValueError(
            f"batch shapes of y and the polytope data do not broadcast: {shapes}"
        ) from None

    x, s, status, k, err = _compute(cfg, batch, leaves, factors, solver, jnp.asarray(tol, dtype))
    return Solution(x, jax.lax.stop_gradient(s), status, k, err)
