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
a thirtieth of an eigendecomposition at $n = 100$, so `cma_es` recomputes it every
generation (``eigen_every=1`` by default); `jaxsolve.blackbox.cma_mae`, with 15 emitters
of 100 dimensions, keeps the lazy gap for it too. With it, `scale` is
$\sigma \max_i \sqrt{C_{ii}}$ (pycma's ``tolx`` measure, within $\sqrt n$ of
$\sigma\sqrt{\lambda_{\max}}$) and `condition` is $(\max_i L_{ii} / \min_i L_{ii})^2$, a
lower bound of the condition number; a $C$ that lost positive definiteness in rounding
gives a non-finite factor, which `scale` reports.
``separable=True`` is sep-CMA-ES (Ros and Hansen 2008): a diagonal $C$, $O(n)$ per
sample, with the learning rates scaled by $(n + 2)/3$.

The $z_k$ are drawn by `standard_normal`: in float64 by inverse-transform sampling,
Threefry-2x32 bits (JAX's default generator, written out so that XLA:CPU fuses it) through
Wichura's AS241 normal quantile, at full double precision and about half the cost of
``jax.random.normal`` there.

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
from jaxsolve.core.random import threefry2x32
from jaxsolve.core.status import Status
from jaxsolve.core.validation import check_floating, check_key, check_shape

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
        """The state centred at ``x0`` (a real ``(dim,)`` vector, checked) with step size
        ``sigma0`` and ``C = I``."""
        x0 = jnp.asarray(x0)
        # a start of another length or an integer dtype gave a state that failed (or, for
        # ints, sampled with sigma = 0) only generations later
        check_floating("x0", x0, real=True)
        check_shape("x0", x0, (self.dim,))
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
        check_key("key", key)
        z = standard_normal(key, (self.popsize, self.dim), state.mean.dtype)
        if self.separable:
            y = z * state.D
        elif self.factor == "cholesky":
            y = z @ state.B.T  # D is ones
        else:
            y = (z * state.D) @ state.B.T
        return state.mean + state.sigma * y

    def tell(self, state: CMAState, solutions, fitness, *, refresh: bool = True) -> CMAState:
        """Update from ``solutions`` ``(popsize, dim)`` and their ``fitness`` (lower is better).

        ``refresh=False`` leaves the eigensystem to the caller (`refresh`): a scheduler of
        many emitters refreshes them all at once, one after another, which is cheaper
        than a vmapped conditional (that would decompose every emitter every time).
        """
        dt = state.mean.dtype
        check_shape("solutions", solutions, (self.popsize, self.dim))
        check_shape("fitness", fitness, (self.popsize,))
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
            # L^-1 y_w as the solve with L^T transposed: LAPACK reads column-major, and
            # the column-major L^T is L's row-major storage, so no transposed copy of L
            inv_sqrt_yw = jax.scipy.linalg.solve_triangular(state.B.T, yw, trans="T", lower=False)
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


# Wichura's AS241 (PPND16) rational approximations of the standard normal quantile:
# |p - 1/2| <= 0.425, then r = sqrt(-log(min(p, 1 - p))) <= 5, then r > 5 (relative
# error about 1e-16; numerator and denominator coefficients, constant term first)
_AS241 = (
    (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
     1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
     3.3430575583588128105e4, 2.5090809287301226727e3),
    (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
     2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
     5.2264952788528545610e3),
    (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
     3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
     2.27238449892691845833e-2, 7.74545014278341407640e-4),
    (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
     1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
     1.05075007164441684324e-9),
    (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
     2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
     2.71155556874348757815e-5, 2.01033439929228813265e-7),
    (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
     7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
     2.04426310338993978564e-15),
)  # fmt: skip


def _horner(coefs, x):
    acc = coefs[-1]
    for c in coefs[-2::-1]:
        acc = acc * x + c
    return acc


def ndtri(p):
    r"""The standard normal quantile $\Phi^{-1}(p)$ for $p \in (0, 1)$ (float64), by
    Wichura's AS241 (Applied Statistics 37, 1988): relative error about $10^{-16}$. All
    three branches are computed and selected, so it vectorizes."""
    a, b, c, d, e, f = _AS241
    q = p - 0.5
    r = 0.180625 - q * q
    central = q * _horner(a, r) / _horner(b, r)
    t = jnp.sqrt(-jnp.log(jnp.minimum(p, 1 - p)))
    tail = jnp.where(
        t <= 5.0,
        _horner(c, t - 1.6) / _horner(d, t - 1.6),
        _horner(e, t - 5.0) / _horner(f, t - 5.0),
    )
    return jnp.where(jnp.abs(q) <= 0.425, central, jnp.where(q < 0, -tail, tail))


def standard_normal(key, shape, dtype) -> jax.Array:
    r"""``shape`` independent $N(0, 1)$ draws of ``dtype`` from ``key``.

    float64: 64 random bits per draw from `threefry2x32` (key words from ``key``,
    counters $0, 1, \dots$), $p = (\lfloor b / 2^{11} \rfloor + \frac12) 2^{-53}
    \in (0, 1)$, and $z = \Phi^{-1}(p)$ (`ndtri`): inverse-transform sampling at full
    double precision (tails to $|z| \approx 8.3$), like ``jax.random.normal`` but about
    half its cost on XLA:CPU, where its rolled threefry and ``erf_inv`` were a quarter
    of a 100-D CMA-MAE iteration. Other dtypes: ``jax.random.normal``.
    """
    if jnp.dtype(dtype) != jnp.float64:
        return jax.random.normal(key, shape, dtype)
    k = jax.random.bits(key, (2,), jnp.uint32)
    c = jnp.arange(math.prod(shape), dtype=jnp.uint32)
    hi, lo = threefry2x32(k[0], k[1], c, jnp.zeros_like(c))
    b = (hi.astype(jnp.uint64) << np.uint64(32)) | lo.astype(jnp.uint64)
    p = ((b >> np.uint64(11)).astype(jnp.float64) + 0.5) * 2.0**-53
    return ndtri(p).reshape(shape)


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
        f0 = jnp.asarray(self.fun(x0, args))
        if f0.shape != ():  # a vector failed deep in the first tell's ranking
            raise ValueError(f"fun(x0, args) must return a scalar, got shape {f0.shape}")
        f0 = f0.astype(x0.dtype)
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
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    return CMAESSolver(fun, cma_es(dim, **options), int(seed))
