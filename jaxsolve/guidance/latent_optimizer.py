r"""A few gradient steps on the guidance energy, as a solver on the shared protocol."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxsolve
from jaxsolve.core.validation import is_concrete
from jaxsolve.guidance.energy import check_options
from jaxsolve.guidance.guided_step import check_latent, check_weights, guidance_energy

__all__ = ["LatentOptimizer", "latent_optimizer", "State"]


class State(NamedTuple):
    """The latent optimizer's state."""

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array


class LatentOptimizer(jaxsolve.AbstractSolver):
    r"""Masked gradient descent on $G(z) = E(\phi(z), r) + \frac{\lambda}{2}\|z - z_{pivot}\|^2$.

    ``args`` is ``(reference, pivot)`` (``pivot`` may be ``None``, then the pivot
    term is dropped), so a batch of references and pivots can be ``vmap``ped.
    One step is $z \leftarrow z - \eta\, m \odot \nabla G(z)$; ``error`` is
    $\|m \odot \nabla G(z)\|_2$ at the current iterate, which vanishes at a
    stationary point of $G$ restricted to the masked entries. ``optimality`` is that
    masked gradient, so ``solve(..., adjoint=Implicit())`` differentiates the solution
    with respect to the pivot; with respect to the reference the gradient is zero by
    design (the reference sits under `jax.lax.stop_gradient`).

    Attributes:
        feature_fn (Callable): $\phi$, ``feature_fn(z) -> (n_points, channels)``.
        kind (str): the energy kind of `feature_energy`.
        matcher (str): the matcher of `feature_energy`.
        stepsize (float): $\eta > 0$.
        lam (float): the pivot weight $\lambda \ge 0$.
        p (float): the energy scale.
        alpha (float): the dragon energy's offset.
        mask (jax.Array | None): latent-space weights broadcastable to ``z``.
        mask_gen (jax.Array | None): weights of the generated feature points.
        mask_ref (jax.Array | None): reference points that may be matched.
    """

    feature_fn: Callable = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="l2")
    matcher: str = eqx.field(static=True, default="identity")
    stepsize: float = 0.1
    lam: float = 0.0
    p: float = 1.0
    alpha: float = 1.0
    mask: Any = None
    mask_gen: Any = None
    mask_ref: Any = None

    def _grad(self, z, args):
        reference, pivot = args
        g = jax.grad(guidance_energy)(
            z,
            self.feature_fn,
            reference,
            pivot=pivot,
            lam=self.lam,
            kind=self.kind,
            matcher=self.matcher,
            p=self.p,
            alpha=self.alpha,
            mask_gen=self.mask_gen,
            mask_ref=self.mask_ref,
        )
        return g if self.mask is None else jaxsolve.hyper(self.mask, z) * g

    def init(self, x0, args):
        if not (isinstance(args, tuple | list) and len(args) == 2):
            raise TypeError(
                "args must be the pair (reference, pivot) (pivot may be None), got "
                + ("an array" if hasattr(args, "shape") else type(args).__name__)
            )
        check_latent("x0", x0)
        g = self._grad(x0, args)
        return State(x0, jnp.int32(0), jnp.linalg.norm(g.ravel()), jnp.int32(0))

    def step(self, state, args):
        g = self._grad(state.x, args)
        x = state.x - jaxsolve.hyper(self.stepsize, state.x) * g
        err = jnp.linalg.norm(self._grad(x, args).ravel())
        return State(x, state.iter_num + 1, err, state.status), None

    def optimality(self, x, args):
        return self._grad(x, args)


def latent_optimizer(
    feature_fn: Callable,
    *,
    stepsize: float = 0.1,
    lam: float = 0.0,
    kind: str = "l2",
    matcher: str = "identity",
    p: float = 1.0,
    alpha: float = 1.0,
    mask=None,
    mask_gen=None,
    mask_ref=None,
) -> LatentOptimizer:
    r"""Build a `LatentOptimizer` (validated): run it by ``jaxsolve.solve(opt, z, (ref, pivot))``.

    Inside a sampler, call ``jaxsolve.solve(opt, z_t, (reference, pivot),
    max_steps=k)`` after (or instead of) a `guided_step` to take ``k`` gradient
    steps on the energy per sampling step.

    Args:
        feature_fn (Callable): $\phi$, ``feature_fn(z) -> (n_points, channels)``.
        stepsize (float): $\eta > 0$.
        lam (float): the pivot weight $\lambda \ge 0$.
        kind (str): ``"dragon"``, ``"cosine"`` or ``"l2"``.
        matcher (str): ``"nearest"``, ``"reverse"`` or ``"identity"``.
        p (float): the energy scale, positive.
        alpha (float): the dragon offset, positive.
        mask (jax.Array | None): latent-space weights broadcastable to ``z``.
        mask_gen (jax.Array | None): weights of the generated feature points.
        mask_ref (jax.Array | None): reference points that may be matched.

    Returns:
        LatentOptimizer: the solver.

    Raises:
        TypeError: a non-callable ``feature_fn``, a complex mask; at ``init``, a
            non-float ``x0`` or ``args`` that is not ``(reference, pivot)``.
        ValueError: a ``stepsize`` that is not positive and finite, a negative or
            non-finite ``lam``, negative or non-finite mask weights, an all-zero
            ``mask``/``mask_gen``/``mask_ref``, a bad energy option; at ``init``, a ``pivot``
            not shaped like ``x0``.
    """
    if not callable(feature_fn):
        raise TypeError(f"feature_fn must be callable, got {type(feature_fn).__name__}")
    check_options(matcher=matcher, kind=kind, p=p, alpha=alpha)
    if is_concrete(stepsize):
        v = np.asarray(stepsize)
        if not (np.isrealobj(v) and np.all(np.isfinite(v)) and np.all(v > 0)):
            raise ValueError(f"stepsize must be positive and finite, got {stepsize}")
    if is_concrete(lam):
        v = np.asarray(lam)
        if not (np.isrealobj(v) and np.all(np.isfinite(v)) and np.all(v >= 0)):
            raise ValueError(f"lam must be non-negative and finite, got {lam}")
    for name, m in (("mask", mask), ("mask_gen", mask_gen), ("mask_ref", mask_ref)):
        check_weights(name, m)  # also refuses an all-zero mask
    return LatentOptimizer(
        feature_fn, kind, matcher, stepsize, lam, p, alpha, mask, mask_gen, mask_ref
    )
