r"""A small exact Gaussian-process EI batch BO baseline, as pure ask/tell on a pytree state.

Maximization, like `jaxsolve.blackbox.genbo`. The points live in the box
$[\ell, u]$ and are mapped to the unit cube, $z = (x - \ell)/(u - \ell)$; the
observed values are standardized, $\tilde y = (y - \bar y)/s_y$, before every fit.

**Model.** $f \sim \mathcal{GP}(0, k)$ with an ARD kernel of lengthscales $\lambda$ and
signal variance $\sigma_f^2$, $r^2 = \sum_i (z_i - z'_i)^2/\lambda_i^2$: RBF
$k = \sigma_f^2 e^{-r^2/2}$ or Matern-5/2
$k = \sigma_f^2 (1 + \sqrt5 r + \tfrac53 r^2) e^{-\sqrt5 r}$; Gaussian noise
$\sigma_n^2$. With $K = k(Z, Z) + (\sigma_n^2 + \text{jitter}) I = L L^\top$ (Cholesky)
and $\alpha = K^{-1}\tilde y$, the posterior of $f$ at $z_*$ has mean
$k_*^\top\alpha$ and variance $k(z_*, z_*) - \|L^{-1}k_*\|^2$.

**Hyperparameters** $\theta = (\log\lambda, \log\sigma_f^2, \log\sigma_n^2)$ maximize the
log marginal likelihood
$\log p(\tilde y \mid \theta) = -\tfrac12 \tilde y^\top\alpha - \sum_i \log L_{ii}
- \tfrac n2 \log 2\pi$ plus, by default, the log-normal lengthscale prior of Hvarfner et
al. (2024), $\log\lambda_i \sim N(\sqrt2 + \tfrac12\log d,\ 3)$ (a MAP fit: with a
handful of points the likelihood alone sends lengthscales to the bounds), by
``fit_steps`` Adam steps per round, warm-started from the previous round's $\theta$ and
clipped after each step to $\lambda \in [10^{-2}, 10^2]$, $\sigma_f^2 \in [0.05, 20]$,
$\sigma_n^2 \in [10^{-6}, 1]$; the first round starts from $\lambda = \sqrt d/4$,
$\sigma_f^2 = 1$, $\sigma_n^2 = 10^{-2}$.

**Acquisition**: expected improvement over the best standardized observation $\tilde y^*$,
$\mathrm{EI} = \sigma\,h\big((\mu - \tilde y^*)/\sigma\big)$ with
$h(t) = \varphi(t) + t\,\Phi(t)$, maximized in its logarithm (Ament et al. 2023's
LogEI, computed without underflow for $t \ll 0$).

**Batch by Kriging believer**: the $B$ points of a round are chosen one after
another; each is the best of ``n_candidates`` candidates (a ``local_fraction`` of them
Gaussian perturbations, std ``local_scale`` in the unit cube, of the 10 best points,
the rest uniform in the box; drawn once per round) refined by ``refine_steps`` Adam
steps on log EI, and is then added to the data with its posterior mean as a fantasy
observation, hyperparameters fixed (and the incumbent $\tilde y^*$ raised to that mean
when it is higher). A fantasy at the mean leaves the posterior mean unchanged and
shrinks the variance near the chosen point, so the next choice moves away from it. The Cholesky factor grows by one row per fantasy and the candidates'
$L^{-1}k_*$ by one row, $O(n^2 + n\,n_c)$ per point instead of a refactorization.

**Data** live in a fixed buffer of ``n_initial + rounds * batch_size`` rows (unfilled
rows and NaN observations masked out: their rows of $K$ are those of the identity),
so a whole run is one ``lax.scan`` that ``jax.vmap`` maps over seeds. ``max_data`` turns the
exact GP into a subset-of-data GP on the ``max_data`` best observations, the
$O(n^3)$ fit then independent of the run's length.

On XLA:CPU, a ``vmap`` over seeds turns the Cholesky factorizations and triangular
solves into batched LAPACK calls that jaxlib 0.10.2 spreads over the intra-op thread
pool; on a 2-core machine a 5-seed Ackley-20 run (600-point GP) deadlocked there, every
pool thread waiting, while the small runs of the tests finish. ``jax.lax.map`` over the
seeds (one compiled program, seeds in sequence) avoids it; ``bench/genbo.py`` does so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import erfcx
from jax.scipy.stats import norm

from jaxsolve.blackbox.genbo import record_batch, run_rounds

__all__ = [
    "rbf_kernel",
    "matern52_kernel",
    "GPParams",
    "gp_log_marginal_likelihood",
    "gp_posterior",
    "expected_improvement",
    "log_expected_improvement",
    "GPEIState",
    "GPEI",
    "gp_ei",
]

_LOG_LS = (math.log(1e-2), math.log(1e2))
_LOG_VAR = (math.log(0.05), math.log(20.0))
_LOG_NOISE = (math.log(1e-6), 0.0)
_N_BEST = 10  # local candidates perturb one of this many best points


# --- kernels and the GP -----------------------------------------------------------------------


def _sqdist(A, B, lengthscale):
    a, b = A / lengthscale, B / lengthscale
    r2 = jnp.sum(a * a, -1)[:, None] + jnp.sum(b * b, -1)[None, :] - 2 * a @ b.T
    return jnp.maximum(r2, 0)


def rbf_kernel(A, B, lengthscale, variance):
    """$\\sigma_f^2 \\exp(-r^2/2)$ between the rows of ``A`` ``(n, d)`` and ``B`` ``(m, d)``."""
    return variance * jnp.exp(-0.5 * _sqdist(A, B, lengthscale))


def matern52_kernel(A, B, lengthscale, variance):
    """Matern-5/2, $\\sigma_f^2 (1 + \\sqrt5 r + \\frac53 r^2) e^{-\\sqrt5 r}$ (its gradient
    is finite at $r = 0$)."""
    r2 = _sqdist(A, B, lengthscale)
    pos = r2 > 0
    s = math.sqrt(5.0) * jnp.where(pos, jnp.sqrt(jnp.where(pos, r2, 1.0)), 0.0)
    return variance * (1 + s + s * s / 3) * jnp.exp(-s)


_KERNELS = {"rbf": rbf_kernel, "matern52": matern52_kernel}


def _kernel(kernel):
    if callable(kernel):
        return kernel
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {sorted(_KERNELS)} or a callable, got {kernel!r}")
    return _KERNELS[kernel]


class GPParams(NamedTuple):
    """GP hyperparameters, all as logarithms (unconstrained for the fit).

    Attributes:
        log_lengthscale: ``(d,)`` $\\log\\lambda$, one lengthscale per input (ARD).
        log_variance: scalar $\\log\\sigma_f^2$, the signal variance.
        log_noise: scalar $\\log\\sigma_n^2$, the observation noise variance.
    """

    log_lengthscale: jax.Array
    log_variance: jax.Array
    log_noise: jax.Array


def _gram(kernel, params: GPParams, X, mask, jitter):
    K = kernel(X, X, jnp.exp(params.log_lengthscale), jnp.exp(params.log_variance))
    eye = jnp.eye(X.shape[0], dtype=K.dtype)
    mm = mask[:, None] & mask[None, :]
    return jnp.where(mm, K + (jnp.exp(params.log_noise) + jitter) * eye, eye)


def _mask(X, mask):
    return jnp.ones(X.shape[0], bool) if mask is None else jnp.asarray(mask)


def gp_log_marginal_likelihood(
    params: GPParams, X, y, mask=None, kernel="matern52", jitter: float = 1e-8
):
    """$\\log p(y \\mid X, \\theta)$ of the observations ``mask`` selects (default all)."""
    k, m = _kernel(kernel), _mask(X, mask)
    y = jnp.where(m, y, 0)
    L = jnp.linalg.cholesky(_gram(k, params, X, m, jitter))
    v = solve_triangular(L, y, lower=True)
    n = jnp.sum(m)
    return -0.5 * v @ v - jnp.sum(jnp.log(jnp.diagonal(L))) - 0.5 * n * jnp.log(2 * jnp.pi)


def gp_posterior(params: GPParams, X, y, Xs, mask=None, kernel="matern52", jitter: float = 1e-8):
    """Posterior mean and variance of the latent $f$ (noise not included) at the rows of
    ``Xs``, given the observations ``(X, y)`` that ``mask`` selects (default all)."""
    k, m = _kernel(kernel), _mask(X, mask)
    y = jnp.where(m, y, 0)
    L = jnp.linalg.cholesky(_gram(k, params, X, m, jitter))
    ls, var = jnp.exp(params.log_lengthscale), jnp.exp(params.log_variance)
    Ks = jnp.where(m[:, None], k(X, Xs, ls, var), 0)
    V = solve_triangular(L, Ks, lower=True)
    mean = Ks.T @ cho_solve((L, True), y)
    return mean, var - jnp.sum(V * V, 0)


# --- expected improvement -------------------------------------------------------------------


def expected_improvement(mean, std, best):
    """EI for maximization, $\\sigma\\,(\\varphi(t) + t\\Phi(t))$, $t = (\\mu - y^*)/\\sigma$."""
    t = (mean - best) / std
    return std * (norm.pdf(t) + t * norm.cdf(t))


def _log_h(t):
    """$\\log(\\varphi(t) + t\\Phi(t))$ without underflow: direct for $t > -1$; for
    $t \\le -1$, $\\log\\varphi(t) + \\log(1 + t\\,\\Phi(t)/\\varphi(t))$ with the Mills ratio
    $\\Phi(t)/\\varphi(t) = \\sqrt{\\pi/2}\\,\\mathrm{erfcx}(-t/\\sqrt2)$; for $t < -100$ the
    asymptotic $1 + t\\Phi/\\varphi = t^{-2}(1 - 3t^{-2} + 15t^{-4} - \\dots)$."""
    direct = t > -1
    td = jnp.where(direct, t, 0.0)
    big = jnp.log(norm.pdf(td) + td * norm.cdf(td))
    tm = jnp.where(direct, -1.0, jnp.maximum(t, -100.0))
    mills = math.sqrt(math.pi / 2) * erfcx(-tm / math.sqrt(2))
    mid = norm.logpdf(tm) + jnp.log1p(tm * mills)
    ta = jnp.minimum(t, -100.0)
    inv2 = 1 / (ta * ta)
    tail = norm.logpdf(ta) + jnp.log(inv2) + jnp.log1p(-3 * inv2 + 15 * inv2 * inv2)
    return jnp.where(direct, big, jnp.where(t >= -100, mid, tail))


def log_expected_improvement(mean, std, best):
    """$\\log$ EI, finite wherever $\\sigma > 0$ (EI itself underflows for
    $t \\lesssim -38$)."""
    return jnp.log(std) + _log_h((mean - best) / std)


# --- the BO loop --------------------------------------------------------------------------------


class GPEIState(NamedTuple):
    """The GP-EI loop's state (`GPEI.init`, `GPEI.ask`, `GPEI.tell`).

    Attributes:
        X: ``(capacity, d)`` the evaluated points (zeros in unfilled rows).
        y: ``(capacity,)`` their observed values (0 where not observed).
        observed: bool ``(capacity,)``, the rows holding a finite observation.
        count: int32 scalar, rows written so far.
        round: int32 scalar, rounds told so far.
        params: `GPParams`, the hyperparameters of the last fit (the next fit's start).
        best_x: ``(d,)`` the best finite point observed so far.
        best_y: its value (``-inf`` while none is finite).
        key: the PRNG key, split by every `GPEI.ask`.
    """

    X: jax.Array
    y: jax.Array
    observed: jax.Array
    count: jax.Array
    round: jax.Array
    params: GPParams
    best_x: jax.Array
    best_y: jax.Array
    key: jax.Array


class GPEI(eqx.Module):
    """Exact GP-EI batch BO with Kriging-believer batches (module docstring); build it
    with `gp_ei`."""

    lower: jax.Array
    upper: jax.Array
    kernel: str = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    capacity: int = eqx.field(static=True)
    max_data: int = eqx.field(static=True)
    fit_steps: int = eqx.field(static=True)
    n_candidates: int = eqx.field(static=True)
    n_local: int = eqx.field(static=True)
    refine_steps: int = eqx.field(static=True)
    learning_rate: float
    refine_rate: float
    local_scale: float
    jitter: float
    lengthscale_prior: bool = eqx.field(static=True)

    def init(self, X0, y0, key) -> GPEIState:
        """Start from initial observations ``(X0, y0)`` (NaN values are masked out)."""
        X0 = jnp.asarray(X0, jnp.result_type(self.lower))
        y0 = jnp.asarray(y0, X0.dtype)
        n0, d = X0.shape
        if n0 > self.capacity:
            raise ValueError(f"{n0} initial points do not fit the buffer of {self.capacity}")
        params = GPParams(
            jnp.full(d, math.log(math.sqrt(d) / 4), X0.dtype),
            jnp.zeros((), X0.dtype),
            jnp.asarray(math.log(1e-2), X0.dtype),
        )
        empty = GPEIState(
            jnp.zeros((self.capacity, d), X0.dtype),
            jnp.zeros(self.capacity, X0.dtype),
            jnp.zeros(self.capacity, bool),
            jnp.int32(0),
            jnp.int32(-1),
            params,
            X0[0],
            jnp.asarray(-jnp.inf, X0.dtype),
            key,
        )
        return record_batch(empty, X0, y0, self.capacity)  # round -1 + 1 = 0

    def _active(self, state: GPEIState):
        """The GP's data: the whole buffer, or its ``max_data`` best observations."""
        if self.max_data >= self.capacity:
            return state.X, state.y, state.observed
        _, idx = jax.lax.top_k(jnp.where(state.observed, state.y, -jnp.inf), self.max_data)
        return state.X[idx], state.y[idx], state.observed[idx]

    def fit(self, params: GPParams, Z, ys, mask) -> GPParams:
        """``fit_steps`` Adam steps on the negative log posterior of the hyperparameters
        (log marginal likelihood plus the lengthscale prior, when ``lengthscale_prior``),
        clipped to the boxes of the module docstring."""
        k = _kernel(self.kernel)
        opt = optax.adam(self.learning_rate)
        d = Z.shape[1]
        mu0, s0 = math.sqrt(2) + 0.5 * math.log(d), math.sqrt(3)

        def objective(p):
            lml = gp_log_marginal_likelihood(p, Z, ys, mask, k, self.jitter)
            prior = -0.5 * jnp.sum(((p.log_lengthscale - mu0) / s0) ** 2)
            return -(lml + prior) if self.lengthscale_prior else -lml

        def step(carry, _):
            p, s = carry
            g = jax.grad(objective)(p)
            upd, s = opt.update(g, s, p)
            p = optax.apply_updates(p, upd)
            p = GPParams(
                jnp.clip(p.log_lengthscale, *_LOG_LS),
                jnp.clip(p.log_variance, *_LOG_VAR),
                jnp.clip(p.log_noise, *_LOG_NOISE),
            )
            return (p, s), None

        (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, self.fit_steps)
        return params

    def candidates(self, key, Z, ys, mask):
        """``n_candidates`` unit-cube candidates: ``n_local`` Gaussian perturbations (std
        ``local_scale``) of the best observations, the rest uniform."""
        kc, kl, kp = jax.random.split(key, 3)
        top_v, top_i = jax.lax.top_k(jnp.where(mask, ys, -jnp.inf), min(_N_BEST, Z.shape[0]))
        pick = jax.random.categorical(
            kp, jnp.where(jnp.isfinite(top_v), 0.0, -jnp.inf), shape=(self.n_local,)
        )
        d = Z.shape[1]
        local = Z[top_i[pick]] + self.local_scale * jax.random.normal(
            kl, (self.n_local, d), Z.dtype
        )
        uniform = jax.random.uniform(kc, (self.n_candidates - self.n_local, d), Z.dtype)
        return jnp.concatenate([jnp.clip(local, 0, 1), uniform])

    def select(self, params: GPParams, Z, ys, mask, C):
        """The batch (unit-cube rows) by Kriging believer from the candidates ``C``, for the
        GP with hyperparameters ``params`` on the standardized data ``(Z, ys)``."""
        k = _kernel(self.kernel)
        Z, ys, mask, C = jnp.asarray(Z), jnp.asarray(ys), jnp.asarray(mask), jnp.asarray(C)
        B, n = self.batch_size, Z.shape[0]
        dt = Z.dtype
        ls, var = jnp.exp(params.log_lengthscale), jnp.exp(params.log_variance)
        # the data plus B fantasy rows, masked (identity rows of K) until chosen
        Za = jnp.concatenate([Z, jnp.zeros((B, Z.shape[1]), dt)])
        ma = jnp.concatenate([mask, jnp.zeros(B, bool)])
        L = jnp.linalg.cholesky(_gram(k, params, Za, ma, self.jitter))
        alpha = cho_solve((L, True), jnp.concatenate([ys, jnp.zeros(B, dt)]))
        best = jnp.max(jnp.where(mask, ys, -jnp.inf))
        diag = var + jnp.exp(params.log_noise) + self.jitter
        Kc = jnp.where(ma[:, None], k(Za, C, ls, var), 0)
        mean_c = Kc.T @ alpha
        V = solve_triangular(L, Kc, lower=True)
        floor = 1e-12 * var

        def log_ei_at(z, L, ma, Za, best):
            kv = jnp.where(ma, k(Za, z[None], ls, var)[:, 0], 0)
            v = solve_triangular(L, kv, lower=True)
            s2 = jnp.maximum(var - v @ v, floor)
            return log_expected_improvement(kv @ alpha, jnp.sqrt(s2), best)

        opt = optax.adam(self.refine_rate)

        def choose(carry, j):
            L, ma, Za, V, var_c, best = carry
            lei = log_expected_improvement(mean_c, jnp.sqrt(jnp.maximum(var_c, floor)), best)
            z0 = C[jnp.argmax(lei)]

            def refine(c, _):
                z, s = c
                g = jax.grad(lambda z: -log_ei_at(z, L, ma, Za, best))(z)
                upd, s = opt.update(g, s, z)
                return (jnp.clip(optax.apply_updates(z, upd), 0, 1), s), None

            (z1, _), _ = jax.lax.scan(refine, (z0, opt.init(z0)), None, self.refine_steps)
            z = jnp.where(log_ei_at(z1, L, ma, Za, best) > jnp.max(lei), z1, z0)
            # Kriging believer: z joins the data as row p, its fantasy at the posterior
            # mean (alpha unchanged; the incumbent rises to it if it is higher); rows
            # after p are still identity, so L gains row p alone
            p = n + j
            kv = jnp.where(ma, k(Za, z[None], ls, var)[:, 0], 0)
            best = jnp.maximum(best, kv @ alpha)
            w = solve_triangular(L, kv, lower=True)
            dpp = jnp.sqrt(jnp.maximum(diag - w @ w, 1e-12 * diag))
            L = L.at[p].set(w.at[p].set(dpp))
            vp = (k(z[None], C, ls, var)[0] - w @ V) / dpp
            V = V.at[p].set(vp)
            return (L, ma.at[p].set(True), Za.at[p].set(z), V, var_c - vp * vp, best), z

        var_c = var - jnp.sum(V * V, 0)
        _, Zb = jax.lax.scan(choose, (L, ma, Za, V, var_c, best), jnp.arange(B))
        return Zb

    def standardize(self, state: GPEIState):
        """The GP's data: unit-cube points, standardized values and mask (the whole
        buffer, or its ``max_data`` best observations)."""
        X, y, mask = self._active(state)
        n = jnp.maximum(jnp.sum(mask), 1)
        ybar = jnp.sum(jnp.where(mask, y, 0)) / n
        sd = jnp.sqrt(jnp.sum(jnp.where(mask, (y - ybar) ** 2, 0)) / n)
        sd = jnp.where(sd > 0, sd, 1.0)
        return (
            (X - self.lower) / (self.upper - self.lower),
            jnp.where(mask, (y - ybar) / sd, 0),
            mask,
        )

    def ask(self, state: GPEIState):
        """Fit the hyperparameters, then ``(X, state)``: the next batch of ``batch_size``
        points, chosen by Kriging believer (module docstring). With no finite observation
        yet, the batch is uniform in the box."""
        Z, ys, mask = self.standardize(state)
        params = self.fit(state.params, Z, ys, mask)
        key, kc, ku = jax.random.split(state.key, 3)
        Zb = self.select(params, Z, ys, mask, self.candidates(kc, Z, ys, mask))
        Zb = jnp.where(jnp.any(mask), Zb, jax.random.uniform(ku, Zb.shape, Zb.dtype))
        return self.lower + Zb * (self.upper - self.lower), state._replace(params=params, key=key)

    def tell(self, state: GPEIState, X, y) -> GPEIState:
        """Record the batch's observations; NaN observations are masked out of the fit."""
        return record_batch(state, X, y, self.capacity)

    def run(self, objective: Callable, state: GPEIState, rounds: int):
        """``rounds`` rounds for a JAX ``objective(X) -> y`` (batched), in one ``lax.scan``;
        returns ``(state, best_y per round)``."""
        return run_rounds(self, objective, state, rounds)


def gp_ei(
    lower,
    upper,
    *,
    batch_size: int,
    rounds: int,
    n_initial: int,
    kernel: str = "matern52",
    fit_steps: int = 50,
    learning_rate: float = 0.05,
    n_candidates: int = 1000,
    local_fraction: float = 0.5,
    local_scale: float = 0.05,
    refine_steps: int = 10,
    refine_rate: float = 0.01,
    max_data: int | None = None,
    jitter: float = 1e-8,
    lengthscale_prior: bool = True,
) -> GPEI:
    """The GP-EI batch BO loop on the box ``[lower, upper]`` (see the module docstring).

    The buffer holds ``n_initial + rounds * batch_size`` points; ``max_data`` (default:
    all) caps the GP's data at that many best observations. ``fit_steps`` Adam steps
    (rate ``learning_rate``) fit the hyperparameters each round; each batch point is the
    best of ``n_candidates`` candidates refined by ``refine_steps`` Adam steps (rate
    ``refine_rate``, unit-cube coordinates) on log EI. Use float64 (``jax_enable_x64``):
    the noise may fit down to $10^{-6}$ of the standardized variance.
    """
    lower, upper = jnp.asarray(lower), jnp.asarray(upper)
    if lower.ndim != 1 or lower.shape != upper.shape:
        raise ValueError(
            f"lower and upper must be vectors of one shape, got {lower.shape} and {upper.shape}"
        )
    if not np.all(np.asarray(lower) < np.asarray(upper)):
        raise ValueError("lower must be below upper in every coordinate")
    _kernel(kernel)
    for name, v in (
        ("batch_size", batch_size),
        ("rounds", rounds),
        ("n_initial", n_initial),
        ("fit_steps", fit_steps),
        ("n_candidates", n_candidates),
    ):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if isinstance(refine_steps, bool) or not isinstance(refine_steps, int) or refine_steps < 0:
        raise ValueError(f"refine_steps must be a non-negative int, got {refine_steps!r}")
    if not 0 <= local_fraction <= 1:
        raise ValueError(f"local_fraction must be in [0, 1], got {local_fraction!r}")
    capacity = int(n_initial + rounds * batch_size)
    if max_data is None:
        max_data = capacity
    if isinstance(max_data, bool) or not isinstance(max_data, int | np.integer) or max_data < 1:
        raise ValueError(f"max_data must be a positive int or None, got {max_data!r}")
    dt = jnp.result_type(float)
    return GPEI(
        lower.astype(dt),
        upper.astype(dt),
        kernel,
        int(batch_size),
        capacity,
        int(min(max_data, capacity)),
        int(fit_steps),
        int(n_candidates),
        int(round(local_fraction * n_candidates)),
        int(refine_steps),
        float(learning_rate),
        float(refine_rate),
        float(local_scale),
        float(jitter),
        bool(lengthscale_prior),
    )
