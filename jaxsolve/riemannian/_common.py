"""Shared pieces of the Riemannian solvers: oracles from autodiff, validation, line search."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxsolve.core.validation import check_positive
from jaxsolve.manifolds import Manifold

__all__ = ["validate", "dtype_of", "value_and_rgrad", "hessian_operator", "backtrack"]


def validate(cost, manifold, **positive):
    """Check the factory arguments before anything is traced."""
    if not callable(cost):
        raise TypeError(f"cost must be a callable cost(x, args), got {type(cost).__name__}")
    if not isinstance(manifold, Manifold):
        raise TypeError(
            f"manifold must be a jaxsolve.manifolds.Manifold, got {type(manifold).__name__}"
        )
    for name, value in positive.items():
        if value is not None:
            check_positive(name, value)


def dtype_of(x):
    return jax.tree.leaves(x)[0].dtype


def value_and_rgrad(cost, manifold, x, args):
    """``f(x)``, the Euclidean gradient and the Riemannian gradient (autodiff of ``cost``)."""
    f, eg = jax.value_and_grad(cost)(x, args)
    return f, eg, manifold.egrad_to_rgrad(x, eg)


def hessian_operator(cost, manifold, x, args, eg):
    """``u -> Hess f(x)[u]``: forward-over-reverse HVP, linearized once per outer step."""
    _, lin = jax.linearize(lambda z: jax.grad(cost)(z, args), x)
    return lambda u: manifold.ehess_to_rhess(x, eg, lin(u), u)


def roundoff_slack(f):
    """Slack for sufficient-decrease tests: a few ulps of ``|f|``.

    Near a minimizer the decrease ``c * alpha * ||g||^2`` falls below the rounding error
    of ``f`` itself (for ``||g|| ~ 1e-8``); without this slack an Armijo test rejects
    good steps because of noise and the method stalls short of the tolerance.
    """
    eps = jnp.finfo(f.dtype).eps
    return 8 * eps * jnp.maximum(1.0, jnp.abs(f))


def backtrack(cost, manifold, x, args, d, f0, df0, alpha0, *, c, contraction, max_iter):
    """Armijo backtracking along ``R_x(alpha d)`` (pymanopt/Manopt semantics).

    Tries ``alpha0``, then multiplies by ``contraction`` while
    ``f(R_x(alpha d)) > f0 + c alpha df0`` and at most ``max_iter`` times in all (a
    bounded ``lax.while_loop``). Returns ``(alpha, x_new, f_new, evaluations, accepted, strict)``;
    when no trial decreased the cost, ``accepted`` is False and ``x_new = x``.
    """
    slack = roundoff_slack(f0)

    def trial(alpha):
        y = manifold.retract(x, optax.tree.scale(alpha, d))
        return y, cost(y, args)

    y0, fy0 = trial(alpha0)

    def cond(carry):
        alpha, _, fy, k = carry
        return (fy > f0 + c * alpha * df0 + slack) & (k <= max_iter)

    def body(carry):
        alpha, _, _, k = carry
        alpha = contraction * alpha
        y, fy = trial(alpha)
        return alpha, y, fy, k + 1

    alpha, y, fy, k = jax.lax.while_loop(cond, body, (alpha0, y0, fy0, jnp.int32(1)))
    accepted = fy <= f0 + slack
    strict = fy <= f0 + c * alpha * df0  # Armijo holds without the round-off slack
    y = optax.tree.where(accepted, y, x)
    fy = jnp.where(accepted, fy, f0)
    alpha = jnp.where(accepted, alpha, 0.0)
    return alpha, y, fy, k, accepted, strict


def secant_step(cost, manifold, x, args, d, df0, alpha):
    """Step along ``d`` from the directional derivatives, for when ``f`` is too noisy.

    When the Armijo decrease is below the rounding error of ``f`` the cost values no
    longer rank trial points, but gradients are still accurate: the secant root of
    ``phi'(t) = <grad f(R_x(t d)), T d>`` from ``phi'(0) = df0`` and ``phi'(alpha)``
    gives the step (an exact line search on a quadratic). Falls back to ``alpha`` when
    the curvature estimate is not positive.
    """
    y = manifold.retract(x, optax.tree.scale(alpha, d))
    _, _, gy = value_and_rgrad(cost, manifold, y, args)
    dfa = manifold.inner(y, gy, manifold.transport(x, y, d))
    curv = dfa - df0
    a2 = alpha * df0 / jnp.where(curv > 0, -curv, -1.0)
    a2 = jnp.where((curv > 0) & jnp.isfinite(a2) & (a2 > 0), -a2, alpha)
    a2 = jnp.abs(a2)
    y2 = manifold.retract(x, optax.tree.scale(a2, d))
    return a2, y2, cost(y2, args)


def start(cost, manifold, x0, args):
    """What every Riemannian solver's ``init`` computes first.

    Checks ``x0``'s shapes (`check_point`), then returns ``(head, f, egrad, rgrad)``:
    ``head = (x0, 0, ||rgrad||, start_status)``, the four leading fields every Riemannian
    State shares (iterate, step count, error, status), and the cost with its Euclidean and
    Riemannian gradients at ``x0``. A State is built as ``State(*head, ...)``.
    """
    check_point(manifold, x0)
    f, eg, g = value_and_rgrad(cost, manifold, x0, args)
    return (x0, jnp.int32(0), manifold.norm(x0, g), start_status(manifold, x0)), f, eg, g


def next_head(state, manifold, x, g, status):
    """The four leading State fields after a step: ``(x, iter_num + 1, ||g||_x, status)``."""
    return x, state.iter_num + 1, manifold.norm(x, g), jnp.asarray(status, jnp.int32)


def accept_or_keep(accept, cost, manifold, args, x_prop, state):
    """Evaluate the cost at the proposal ``x_prop`` and keep it where ``accept``, else the
    current point: returns ``(x, f, egrad, rgrad)`` (the trust-region and ARC acceptance)."""
    f, eg, g = value_and_rgrad(cost, manifold, x_prop, args)
    pick = lambda a, b: optax.tree.where(accept, a, b)  # noqa: E731
    return (
        pick(x_prop, state.x),
        jnp.where(accept, f, state.f),
        pick(eg, state.egrad),
        pick(g, state.grad),
    )


def start_status(manifold, x0):
    """``SUCCESS`` when ``x0`` lies on the manifold, else ``BREAKDOWN`` (int32).

    The Riemannian solvers *check* the start, they do not project it: a point off the
    manifold (``x0 = 0`` on a sphere, NaN) makes the tangent-space projections and
    retractions meaningless, so a run from it could end SUCCESS at a non-point.
    The test is ``manifold.residual(x0) <= 10 sqrt(eps)`` (1.5e-7 in float64, 3.5e-3
    in float32: rounding, not a wrong start); manifolds without ``residual`` pass.
    """
    from jaxsolve.core.status import Status

    try:
        res = manifold.residual(x0)
    except NotImplementedError:
        return jnp.int32(Status.SUCCESS)
    thr = 10.0 * jnp.sqrt(jnp.finfo(dtype_of(x0)).eps)
    return jnp.where(res <= thr, jnp.int32(Status.SUCCESS), jnp.int32(Status.BREAKDOWN)).astype(
        jnp.int32
    )


def check_point(manifold, x, name: str = "x0") -> None:
    """Raise ``ValueError`` if the pytree ``x`` does not have the manifold's point shapes
    (``TypeError`` if a leaf is not a real floating array).

    Runs at trace time on static shapes, so a wrong start fails before anything runs.
    Manifolds without ``point_shape`` are not checked.
    """
    from jaxsolve.manifolds import Product

    if isinstance(manifold, Product):
        if not isinstance(x, tuple) or len(x) != len(manifold.manifolds):
            raise ValueError(
                f"{name} must be a tuple of {len(manifold.manifolds)} points for {manifold!r}"
            )
        for i, (m, xi) in enumerate(zip(manifold.manifolds, x, strict=True)):
            check_point(m, xi, f"{name}[{i}]")
        return
    from jaxsolve.core.validation import check_floating

    check_floating(name, x, real=True)  # the manifolds are real; integers cannot move
    try:
        want = tuple(manifold.point_shape)
    except NotImplementedError:
        return
    got = tuple(jnp.shape(x))
    if got != want:
        raise ValueError(f"{name} must have shape {want} for {manifold!r}, got {got}")
