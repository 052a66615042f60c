r"""CMA-ES as pure ask/tell on a pytree state, and as a solver for `jaxsolve.solve`.

The covariance matrix adaptation evolution strategy (Hansen and Ostermeier 2001;
the update below is the one of Hansen, "The CMA Evolution Strategy: A Tutorial",
arXiv:1604.00772, with positive recombination weights). Minimization: lower fitness
is better; a NaN fitness counts as the worst. One generation samples
$x_k = m + \sigma B D z_k$, $z_k \sim N(0, I)$, ranks the $\lambda$ samples, and with the
$\mu$ best and weights $w_i \propto \log(\mu + \frac12) - \log i$:

$$
\begin{aligned}
m' &= \textstyle\sum_i w_i x_{i:\lambda}, \qquad y_w = (m' - m)/\sigma \\
p_\sigma &\leftarrow (1 - c_\sigma) p_\sigma + \sqrt{c_\sigma (2 - c_\sigma) \mu_{\text{eff}}}\, C^{-1/2} y_w \\
p_c &\leftarrow (1 - c_c) p_c + h_\sigma \sqrt{c_c (2 - c_c) \mu_{\text{eff}}}\, y_w \\
C &\leftarrow (1 - c_1 - c_\mu) C + c_1 (p_c p_c^\top + \delta(h_\sigma) C)
   + c_\mu \textstyle\sum_i w_i y_i y_i^\top \\
\sigma &\leftarrow \sigma \exp\big(\tfrac{c_\sigma}{d_\sigma}(\|p_\sigma\| / E\|N(0, I)\| - 1)\big)
\end{aligned}
$$

The eigendecomposition $C = B D^2 B^\top$ is refreshed every ``eigen_every``
generations (default: the lazy gap of pycma and pyribs, $0.5\,\lambda/((c_1 + c_\mu)
n^2)$ evaluations), which is where most of the time of a 100-D search goes.

``factor="cholesky"`` is the Cholesky-CMA-ES of Krause, Arbonès and Igel (NeurIPS 2016,
"CMA-ES with optimal covariance update and storage complexity"): the samples are
$m + \sigma L z$ with $C = L L^\top$, and $C^{-1/2}$ in the $p_\sigma$ update becomes
$L^{-1}$ (a triangular solve). The sampling distribution is the same; the path is
whitened by another square root, which they show performs on par. A Cholesky costs about
a thirtieth of an eigendecomposition at $n = 100$, so it is recomputed every generation
(``eigen_every=1`` by default) and the lazy gap is not needed. With it, `scale` is
$\sigma \max_i \sqrt{C_{ii}}$ (pycma's ``tolx`` measure, within $\sqrt n$ of
$\sigma\sqrt{\lambda_{\max}}$) and `condition` is $(\max_i L_{ii} / \min_i L_{ii})^2$, a
lower bound of the condition number; a $C$ that lost positive definiteness in rounding
gives a non-finite factor, which `scale` reports.
``separable=True`` is sep-CMA-ES (Ros and Hansen 2008): a diagonal $C$, $O(n)$ per
sample, with the learning rates scaled by $(n + 2)/3$.

Stopping measure of the solver form: ``error`` $= \sigma \sqrt{\lambda_{\max}(C)}$, the
search distribution's largest standard deviation (pycma's ``tolx``-style
criterion): small means the search has contracted onto a point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.protocol import AbstractSolver, hyper
from jaxsolve.core.status import Status

__all__ = ["CMAState", "CMAES", "cma_es", "CMAESSolverState", "CMAESSolver", "cma_es_solver"]


class CMAState(NamedTuple):
    r"""CMA-ES state (`CMAES.init` / `CMAES.tell`): the search distribution $N(m, \sigma^2 C)$.

    Attributes:
        mean: the distribution's mean $m$, ``(n,)``.
        sigma: the step size $\sigma$, real scalar.
        C: the covariance $C$, ``(n, n)``, or its diagonal ``(n,)`` when ``separable``.
        B: the eigenvectors of $C$ as columns, ``(n, n)`` (stale between refreshes, see
            ``eigen_every``); the lower Cholesky factor $L$ with ``factor="cholesky"``;
            an unused scalar 1 when ``separable``.
        D: the square roots of the eigenvalues of $C$, ``(n,)`` (so $C = B D^2 B^\top$);
            ones with ``factor="cholesky"``; $\sqrt{C_{ii}}$ when ``separable``.
        pc: the evolution path $p_c$ of the covariance update, ``(n,)``.
        ps: the conjugate evolution path $p_\sigma$ of the step-size update, ``(n,)``.
        generation: int32 scalar, generations told so far (`tell` calls).
    """

    mean: jax.Array
    sigma: jax.Array
    C: jax.Array
    B: jax.Array
    D: jax.Array
    pc: jax.Array
    ps: jax.Array
    generation: jax.Array


class CMAES(eqx.Module):
    """CMA-ES with fixed population ``popsize`` and ``n_parents`` (see the module docstring)."""

    dim: int = eqx.field(static=True)
    popsize: int = eqx.field(static=True)
    n_parents: int = eqx.field(static=True)
    separable: bool = eqx.field(static=True)
    eigen_every: int = eqx.field(static=True)
    sigma0: Any = 0.5
    factor: str = eqx.field(static=True, default="eigh")

    def _params(self, dtype):
        n, mu = self.dim, self.n_parents
        w = np.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
        w = w / w.sum()
        mueff = 1.0 / np.sum(w**2)
        cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
        cs = (mueff + 2) / (n + mueff + 5)
        c1 = 2 / ((n + 1.3) ** 2 + mueff)
        cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
        if self.separable:
            c1, cmu = min(1.0, c1 * (n + 2) / 3), min(1 - c1, cmu * (n + 2) / 3)
        ds = 1 + 2 * max(0.0, math.sqrt((mueff - 1) / (n + 1)) - 1) + cs
        chin = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
        # Python floats (weakly typed): NumPy scalars would promote a float32 search
        scalars = tuple(float(v) for v in (mueff, cc, cs, c1, cmu, ds, chin))
        return (jnp.asarray(w, dtype), *scalars)

    def init(self, x0) -> CMAState:
        """The state centred at ``x0`` with step size ``sigma0`` and ``C = I``."""
        x0 = jnp.asarray(x0)
        n, dt = self.dim, x0.dtype
        C = jnp.ones(n, dt) if self.separable else jnp.eye(n, dtype=dt)
        return CMAState(
            mean=x0,
            sigma=hyper(self.sigma0, dt),
            C=C,
            B=jnp.eye(n, dtype=dt) if not self.separable else jnp.ones((), dt),
            D=jnp.ones(n, dt),
            pc=jnp.zeros(n, dt),
            ps=jnp.zeros(n, dt),
            generation=jnp.int32(0),
        )

    def ask(self, state: CMAState, key) -> jax.Array:
        """``popsize`` samples ``(popsize, dim)`` of $N(m, \\sigma^2 C)$."""
        z = jax.random.normal(key, (self.popsize, self.dim), state.mean.dtype)
        y = z * state.D if self.separable else (z * state.D) @ state.B.T
        return state.mean + state.sigma * y

    def tell(self, state: CMAState, solutions, fitness, *, refresh: bool = True) -> CMAState:
        """Update from ``solutions`` ``(popsize, dim)`` and their ``fitness`` (lower is better).

        ``refresh=False`` leaves the eigensystem to the caller (`refresh`): a scheduler of
        many emitters refreshes them all at once, one after another, which is cheaper
        than a vmapped conditional (that would decompose every emitter every time).
        """
        dt = state.mean.dtype
        w, mueff, cc, cs, c1, cmu, ds, chin = self._params(dt)
        n = self.dim
        fit = jnp.where(jnp.isnan(fitness), jnp.inf, fitness)
        order = jnp.argsort(fit, stable=True)[: self.n_parents]
        y = (solutions[order] - state.mean) / state.sigma  # (mu, n)
        yw = w @ y
        mean = state.mean + state.sigma * yw
        if self.separable:
            inv_sqrt_yw = yw / state.D
        elif self.factor == "cholesky":
            inv_sqrt_yw = jax.scipy.linalg.solve_triangular(state.B, yw, lower=True)
        else:
            inv_sqrt_yw = state.B @ ((state.B.T @ yw) / state.D)
        ps = (1 - cs) * state.ps + math.sqrt(cs * (2 - cs) * mueff) * inv_sqrt_yw
        g = state.generation + 1
        norm_ps = jnp.linalg.norm(ps)
        hsig = norm_ps / jnp.sqrt(1 - (1 - cs) ** (2 * g.astype(dt))) / chin < 1.4 + 2 / (n + 1)
        hsig = hsig.astype(dt)
        pc = (1 - cc) * state.pc + hsig * math.sqrt(cc * (2 - cc) * mueff) * yw
        dh = (1 - hsig) * cc * (2 - cc)
        if self.separable:
            C = (1 - c1 - cmu) * state.C + c1 * (pc**2 + dh * state.C) + cmu * (w @ (y**2))
        else:
            rank_mu = (y * w[:, None]).T @ y
            C = (1 - c1 - cmu) * state.C + c1 * (jnp.outer(pc, pc) + dh * state.C) + cmu * rank_mu
            C = (C + C.T) / 2
        sigma = state.sigma * jnp.exp(jnp.minimum(1.0, (cs / ds) * (norm_ps / chin - 1)))
        new = CMAState(mean, sigma, C, state.B, state.D, pc, ps, g)
        if self.separable:
            return new._replace(D=jnp.sqrt(jnp.maximum(C, 0)))
        if not refresh:
            return new
        return jax.lax.cond(
            (g % self.eigen_every) == 0, lambda s: self.refresh(s), lambda s: s, new
        )

    def refresh(self, state: CMAState) -> CMAState:
        r"""Recompute the eigensystem $C = B D^2 B^\top$ (or the factor $C = L L^\top$)."""
        if self.separable:
            return state._replace(D=jnp.sqrt(jnp.maximum(state.C, 0)))
        if self.factor == "cholesky":
            return state._replace(B=jnp.linalg.cholesky(state.C))
        vals, vecs = jnp.linalg.eigh(state.C)
        return state._replace(B=vecs, D=jnp.sqrt(jnp.maximum(vals, 0)))

    def scale(self, state: CMAState) -> jax.Array:
        """$\\sigma\\sqrt{\\lambda_{\\max}(C)}$ (with the current eigensystem); with
        ``factor="cholesky"`` $\\sigma \\max_i \\sqrt{C_{ii}}$ (non-finite if the factor is)."""
        if self.factor == "cholesky" and not self.separable:
            return state.sigma * jnp.sqrt(jnp.max(jnp.sum(state.B**2, axis=1)))
        return state.sigma * jnp.max(state.D)

    def condition(self, state: CMAState) -> jax.Array:
        """Condition number of $C$ (with the current eigensystem); with
        ``factor="cholesky"`` the lower bound $(\\max_i L_{ii} / \\min_i L_{ii})^2$."""
        if self.factor == "cholesky" and not self.separable:
            d = jnp.abs(jnp.diagonal(state.B))
            return (jnp.max(d) / jnp.maximum(jnp.min(d), 1e-300)) ** 2
        return (jnp.max(state.D) / jnp.maximum(jnp.min(state.D), 1e-300)) ** 2


def _lazy_gap(dim, popsize, mu, separable):
    r"""Generations between eigendecompositions: $0.5\,\lambda / ((c_1 + c_\mu) n^2)$
    evaluations (the gap pycma and pyribs use), at least one generation."""
    w = np.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
    w = w / w.sum()
    mueff = 1.0 / np.sum(w**2)
    c1 = 2 / ((dim + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((dim + 2) ** 2 + mueff))
    evals = 0.5 * dim * popsize / ((c1 + cmu) * dim**2)
    # refreshed once more than `evals` evaluations have passed since the last refresh
    return max(1, int(evals // popsize) + 1)


def cma_es(
    dim: int,
    *,
    popsize: int | None = None,
    n_parents: int | None = None,
    sigma0: float = 0.5,
    separable: bool = False,
    eigen_every: int | None = None,
    factor: str = "eigh",
) -> CMAES:
    """CMA-ES (or sep-CMA-ES) on ``dim`` variables with ask/tell on a pure state.

    Args:
        dim: number of variables (>= 1).
        popsize: samples per generation $\\lambda$ (default $4 + \\lfloor 3\\ln n\\rfloor$).
        n_parents: parents $\\mu$ (default $\\lfloor\\lambda/2\\rfloor$).
        sigma0: initial step size (> 0; a traced hyperparameter).
        separable: sep-CMA-ES (diagonal covariance).
        eigen_every: generations between eigendecompositions (default: Hansen's lazy rule;
            1 with ``factor="cholesky"``).
        factor: ``"eigh"`` (the tutorial's $C^{-1/2}$, pycma's and pyribs' choice) or
            ``"cholesky"`` (Cholesky-CMA-ES, see the module docstring: much cheaper at
            large ``dim``).

    Usage: ``state = es.init(x0)``; each generation ``X = es.ask(state, key)``,
    evaluate, ``state = es.tell(state, X, fitness)``.
    """
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    lam = 4 + int(3 * math.log(dim)) if popsize is None else popsize
    if isinstance(lam, bool) or not isinstance(lam, int | np.integer) or lam < 2:
        raise ValueError(f"popsize must be an int >= 2, got {popsize!r}")
    mu = lam // 2 if n_parents is None else n_parents
    if not isinstance(mu, int | np.integer) or not 1 <= mu <= lam:
        raise ValueError(f"n_parents must be an int in [1, popsize], got {n_parents!r}")
    if not np.isfinite(sigma0) or sigma0 <= 0:
        raise ValueError(f"sigma0 must be positive, got {sigma0!r}")
    if factor not in ("eigh", "cholesky"):
        raise ValueError(f"factor must be 'eigh' or 'cholesky', got {factor!r}")
    if eigen_every is not None:
        gap = int(eigen_every)
    else:
        gap = 1 if factor == "cholesky" else _lazy_gap(dim, lam, mu, separable)
    if gap < 1:
        raise ValueError(f"eigen_every must be a positive int, got {eigen_every!r}")
    return CMAES(int(dim), int(lam), int(mu), bool(separable), gap, float(sigma0), factor)


class CMAESSolverState(NamedTuple):
    r"""`CMAESSolver` state.

    Attributes:
        x: the best sample seen so far, ``(n,)`` (``x0`` until a sample beats it).
        iter_num: int32 scalar, generations taken.
        error: $\sigma\sqrt{\lambda_{\max}(C)}$ (`CMAES.scale`, from the current, possibly
            stale, eigensystem), the search distribution's largest standard deviation.
        status: int32 `Status`, set by `CMAESSolver.step`: ``NONFINITE`` when a whole
            generation's fitness was NaN, ``BREAKDOWN`` when the distribution collapsed
            numerically (non-finite scale or condition number above 1e14), else
            ``SUCCESS``.
        f_x: the value of ``fun`` at ``x`` (NaN samples are ranked worst, never best).
        es: the `CMAState` of the search distribution.
        key: the PRNG key as raw bits (``jax.random.key_data``), split each generation.
    """

    x: jax.Array
    iter_num: jax.Array
    error: jax.Array
    status: jax.Array
    f_x: jax.Array
    es: CMAState
    key: jax.Array


class CMAESSolver(AbstractSolver):
    """Minimize ``fun(x, args)`` by CMA-ES under `jaxsolve.solve` (``error``: see the module)."""

    fun: Callable = eqx.field(static=True)
    es: CMAES
    seed: int = eqx.field(static=True, default=0)

    def init(self, x0, args) -> CMAESSolverState:
        x0 = jnp.asarray(x0)
        if x0.shape != (self.es.dim,):
            raise ValueError(f"x0 must have shape ({self.es.dim},) (dim), got {x0.shape}")
        es = self.es.init(x0)
        f0 = jnp.asarray(self.fun(x0, args), x0.dtype)
        return CMAESSolverState(
            x0,
            jnp.int32(0),
            self.es.scale(es),
            jnp.int32(Status.SUCCESS),
            f0,
            es,
            jax.random.key_data(jax.random.key(self.seed)),  # raw bits: plain arrays in the state
        )

    def step(self, state: CMAESSolverState, args):
        key, sub = jax.random.split(jax.random.wrap_key_data(state.key))
        X = self.es.ask(state.es, sub)
        f = jax.vmap(lambda x: jnp.asarray(self.fun(x, args), X.dtype))(X)
        es = self.es.tell(state.es, X, f)
        fw = jnp.where(jnp.isnan(f), jnp.inf, f)
        i = jnp.argmin(fw)
        # some NaN samples are ranked worst; a generation of nothing but NaN means the
        # objective cannot be evaluated here: NONFINITE, not a search that goes on blind
        all_nan = jnp.all(jnp.isnan(f))
        # a NaN at the start (fun(x0)) is the worst value too: any finite sample beats it
        better = (fw[i] < state.f_x) | (jnp.isnan(state.f_x) & ~jnp.isnan(f[i]))
        x = jnp.where(better, X[i], state.x)
        f_x = jnp.where(better, fw[i], state.f_x)
        # a search that collapsed numerically cannot continue: BREAKDOWN, not a silent stall
        bad = ~jnp.isfinite(self.es.scale(es)) | (self.es.condition(es) > 1e14)
        status = jnp.where(bad, jnp.int32(Status.BREAKDOWN), state.status)
        status = jnp.where(all_nan, jnp.int32(Status.NONFINITE), status)
        new = CMAESSolverState(
            x, state.iter_num + 1, self.es.scale(es), status, f_x, es, jax.random.key_data(key)
        )
        return new, {"best": f_x, "sigma": es.sigma}


def cma_es_solver(fun: Callable, dim: int, *, seed: int = 0, **options) -> CMAESSolver:
    """CMA-ES as a solver: ``jaxsolve.solve(cma_es_solver(fun, n), x0, args, tol=...)``.

    Stops when $\\sigma\\sqrt{\\lambda_{\\max}(C)} \\le$ ``tol``; ``sol.x`` is the best
    sample seen (``sol.state.f_x`` its value). ``options`` go to `cma_es`.
    """
    if not callable(fun):
        raise TypeError(f"fun must be callable fun(x, args), got {type(fun).__name__}")
    return CMAESSolver(fun, cma_es(dim, **options), int(seed))
