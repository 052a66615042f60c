"""``ProjectionLayer``: an equinox module that makes a network's output feasible by design."""

from __future__ import annotations

import equinox as eqx
import jax

from jaxsolve.layers.polytope import Polytope
from jaxsolve.layers.project import project

__all__ = ["ProjectionLayer"]


class ProjectionLayer(eqx.Module):
    r"""Pinet output layer: $y \mapsto \Pi_{\mathcal C(b, l, u, lb, ub)}(y)$.

    Put it at the end of an MLP (Pinet, arXiv 2508.10480): the prediction satisfies
    $Ax = b,\ l \le Cx \le u,\ lb \le x \le ub$ up to ``tol``, and gradients
    flow back to the network (and to per-example ``b, l, u, lb, ub``) through the
    implicit backward of `jaxsolve.layers.project`.

    The polytope is factorized once at construction. Its arrays are leaves of the
    module but receive no gradient (``A``, ``C`` are structure): keep the layer out
    of the optimizer's parameters (e.g. optimize only the MLP, or filter with
    ``eqx.partition``) so that weight decay never touches them.

    ``polytope`` is the constraint set (its data are defaults, overridable per call);
    ``max_steps``, ``tol``, ``sigma``, ``omega``, ``backward`` and ``backward_steps`` are as
    in `project` (static configuration of the layer).

    Call: ``layer(y, b=None, l=None, u=None, lb=None, ub=None, warm_start=None,
    return_solution=False)`` with ``y`` of shape ``(..., n)`` and optional per-example
    data returns the projections ``x``, as a network layer does; with
    ``return_solution=True`` it returns `project`'s whole `jaxsolve.Solution` (statuses,
    residuals, the governing sequence for ``warm_start``).
    """

    polytope: Polytope
    max_steps: int = eqx.field(static=True, default=1000)
    tol: float | None = eqx.field(static=True, default=None)
    sigma: float | None = eqx.field(static=True, default=None)
    omega: float = eqx.field(static=True, default=1.7)
    backward: str = eqx.field(static=True, default="kkt")
    backward_steps: int = eqx.field(static=True, default=200)

    def __init__(
        self,
        polytope: Polytope,
        *,
        max_steps: int = 1000,
        tol: float | None = None,
        sigma: float | None = None,
        omega: float = 1.7,
        backward: str = "kkt",
        backward_steps: int = 200,
    ):
        if not isinstance(polytope, Polytope):
            raise TypeError(
                f"polytope must be a jaxsolve.layers.Polytope, got {type(polytope).__name__}"
            )
        self.polytope = polytope if polytope.factors is not None else polytope.factorize()
        self.max_steps, self.tol, self.sigma, self.omega = max_steps, tol, sigma, omega
        self.backward, self.backward_steps = backward, backward_steps

    def __call__(
        self,
        y: jax.Array,
        *,
        b=None,
        l=None,
        u=None,
        lb=None,
        ub=None,
        warm_start=None,
        return_solution: bool = False,
    ):
        data = {k: v for k, v in dict(b=b, l=l, u=u, lb=lb, ub=ub).items() if v is not None}
        poly = self.polytope.update(**data) if data else self.polytope
        sol = project(
            y,
            poly,
            max_steps=self.max_steps,
            tol=self.tol,
            warm_start=warm_start,
            sigma=self.sigma,
            omega=self.omega,
            backward=self.backward,
            backward_steps=self.backward_steps,
        )
        return sol if return_solution else sol.x
