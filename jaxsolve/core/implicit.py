r"""Implicit differentiation of solutions: ``custom_root``, ``custom_fixed_point``, ``known_value``.

If $x^\star(\theta)$ solves $F(x, \theta) = 0$ with $\partial_x F$
invertible, the implicit function theorem gives

$$
\partial_x F \; \dot x^\star = -\partial_\theta F \; \dot\theta .
$$

The rule is registered with ``jax.custom_jvp``; the linear solve goes through
``lax.custom_linear_solve`` with an explicit transpose solve, so JAX can transpose
the JVP and both forward mode (``jvp``) and reverse mode (``grad``) work without
storing the solver's iterations.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

__all__ = ["custom_root", "custom_fixed_point", "known_value", "linear_solve"]


def _dense_solve(matvec, b):
    flat_b, unravel = ravel_pytree(b)

    # Materialize the Jacobian column by column; fine for the small systems this is for.
    def mv_flat(v):
        return ravel_pytree(matvec(unravel(v)))[0]

    J = jax.jacfwd(mv_flat)(flat_b)
    return unravel(jnp.linalg.solve(J, flat_b))


def _krylov(method, matvec, b, *, tol=1e-10, maxiter=None):
    if method == "cg":
        out, _ = jax.scipy.sparse.linalg.cg(matvec, b, tol=tol, maxiter=maxiter)
    elif method == "bicgstab":
        out, _ = jax.scipy.sparse.linalg.bicgstab(matvec, b, tol=tol, maxiter=maxiter)
    else:
        out, _ = jax.scipy.sparse.linalg.gmres(matvec, b, tol=tol, maxiter=maxiter, restart=50)
    return out


def linear_solve(
    matvec: Callable,
    b,
    *,
    method: str | Callable = "dense",
    symmetric: bool = False,
    tol: float = 1e-10,
):
    r"""Solve $A v = b$ for a linear ``matvec`` over pytrees, transposable by JAX.

    ``method``: ``"dense"`` (materialize and LU, for small systems), ``"cg"``
    (symmetric positive definite), ``"gmres"``, ``"bicgstab"``, or a callable
    ``solver(matvec, b) -> v``. The transpose solve uses ``jax.linear_transpose`` of
    ``matvec``, so the result is differentiable in both modes.
    """

    def solve(mv, rhs):
        if callable(method):
            return method(mv, rhs)
        if method == "dense":
            return _dense_solve(mv, rhs)
        return _krylov(method, mv, rhs, tol=tol)

    def transpose_solve(vecmat, rhs):
        return solve(vecmat, rhs)

    return jax.lax.custom_linear_solve(
        matvec,
        b,
        solve,
        transpose_solve=None if symmetric else transpose_solve,
        symmetric=symmetric,
    )


def _zero_tangent(x):
    dtype = jnp.result_type(x)
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.zeros_like(x)
    return jnp.zeros(jnp.shape(x), dtype=jax.dtypes.float0)


def _on_pytrees(method, unravel):
    """``method``, or a callable solve run on the iterate's pytrees (as a user's
    ``solve(matvec, b)`` expects them) from flat vectors."""
    if not callable(method):
        return method

    def solve(mv, b):
        tree_mv = lambda v: unravel(mv(ravel_pytree(v)[0]))
        return ravel_pytree(method(tree_mv, unravel(b)))[0]

    return solve


def custom_root(
    optimality_fn: Callable,
    *,
    solve: str | Callable = "dense",
    symmetric: bool = False,
    has_aux: bool = False,
    tol: float = 1e-10,
):
    r"""Decorator: give ``solver_fn(init, *params)`` implicit derivatives.

    ``optimality_fn(x, *params)`` returns a residual with the structure of ``x`` that
    vanishes at the solution. The decorated ``solver_fn`` is run as usual in the
    forward pass; its derivatives with respect to ``params`` come from the implicit
    function theorem at the returned ``x`` (the derivative with respect to ``init``
    is zero). With ``has_aux=True`` the solver returns ``(x, aux)`` and ``aux`` is
    treated as a constant (status, iteration counts, ...).

    ``solve`` picks the linear solver for $\partial_x F$ (see `linear_solve`);
    ``symmetric=True`` declares $\partial_x F$ symmetric (e.g. a gradient map),
    which saves the transpose.
    """

    def wrapper(solver_fn: Callable) -> Callable:
        @jax.custom_jvp
        def solved(init, *params):
            return solver_fn(init, *params)

        @solved.defjvp
        def solved_jvp(primals, tangents):
            init, *params = primals
            _, *dparams = tangents
            out = solved(init, *params)
            x = out[0] if has_aux else out
            x = jax.lax.stop_gradient(x)
            # right-hand side: -dF/dtheta . dtheta
            _, rhs = jax.jvp(lambda *p: optimality_fn(x, *p), tuple(params), tuple(dparams))
            # Solve on flat vectors: a leaf of ``rhs`` that does not depend on the
            # tangents (dF/dtheta identically zero there) is a constant, and
            # ``custom_linear_solve`` cannot transpose a right-hand side whose leaves are
            # not all linear. Raveled, the whole right-hand side is one linear array.
            flat_rhs, _ = ravel_pytree(rhs)
            _, unravel = ravel_pytree(x)

            def matvec(v):
                jv = jax.jvp(lambda z: optimality_fn(z, *params), (x,), (unravel(v),))[1]
                return ravel_pytree(jv)[0]

            flat_dx = linear_solve(
                matvec, -flat_rhs, method=_on_pytrees(solve, unravel), symmetric=symmetric, tol=tol
            )
            dx = unravel(flat_dx)
            if has_aux:
                return out, (dx, jax.tree.map(_zero_tangent, out[1]))
            return out, dx

        return solved

    return wrapper


def custom_fixed_point(fixed_point_fn: Callable, **kwargs):
    r"""Decorator like `custom_root` for ``x = T(x, *params)``.

    The residual is $F(x, \theta) = T(x, \theta) - x$; ``solve`` defaults to
    GMRES (the Jacobian $\partial_x T - I$ is rarely symmetric).
    """
    kwargs.setdefault("solve", "gmres")
    residual = lambda x, *p: jax.tree.map(jnp.subtract, fixed_point_fn(x, *p), x)
    return custom_root(residual, **kwargs)


def known_value(value, fn: Callable, args: tuple, consts: tuple = ()):
    r"""``fn(*args, *consts)`` whose value a solve has already found: ``value``.

    Returns ``value`` without evaluating ``fn``; the derivatives are those of ``fn`` in
    ``args`` (none flow to ``value`` or ``consts``). It is for a map that a solver
    evaluates, to tolerance, on its way (the projection a line search accepted, the
    affine projection an active-set solve ends on): the forward pass pays nothing
    twice, and a derivative is that of the map, not of the iterations that found its
    value. When ``fn`` is linear in ``args`` its JVP is ``fn`` of the tangents, so
    ``fn`` may be written as the tangent map itself; under ``jit`` the unused primal
    evaluation inside the JVP is dead code and compiles away.
    """

    @jax.custom_jvp
    def known(value, args, consts):
        return value

    @known.defjvp
    def known_jvp(primals, tangents):
        value, args, consts = primals
        _, dargs, _ = tangents
        _, dout = jax.jvp(lambda *a: fn(*a, *consts), tuple(args), tuple(dargs))
        return value, dout

    return known(value, tuple(args), tuple(consts))
