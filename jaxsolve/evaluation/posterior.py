r"""The Bayes estimate of accuracy under a known 2PL model, from a model's anchor answers.

Given item parameters $(a_j, b_j)$ of a multidimensional 2PL model
$P(Y_j = 1 \mid \theta) = \sigma(a_j^\top\theta - b_j)$ (the generator's own, or a
fitted IRT model's) and a Gaussian prior $\theta \sim N(\mu, I_d)$ (the prior of
`synthetic_benchmark` with one family: $\mu = 0$), a model that answered $x$ on the
anchor set $A$ has full-benchmark accuracy $y = \frac1N(\sum_{j\in A} x_j +
\sum_{j\notin A} Y_j)$, and the unseen answers are independent given $\theta$. So

$$
E[y \mid x] = \frac1N\Big(\sum_{j\in A} x_j + \sum_{j\notin A}
E\big[\sigma(a_j^\top\theta - b_j) \mid x\big]\Big),
\qquad p(\theta \mid x) \propto N(\theta; \mu, I)\prod_{j\in A}
\sigma(z_j)^{x_j}\sigma(-z_j)^{1-x_j},\; z_j = a_j^\top\theta - b_j,
$$

the estimate of least mean squared error among all functions of $x$, and the
posterior median of $y$ the one of least mean absolute error. With the true item
parameters this is an *oracle*: its error is what no estimator that sees only the
anchor answers can beat on average (bench/results/evaluation.md uses it to ask how far
SparseEval's MAE can go); with fitted ones it is the posterior-mean version of the
p-IRT estimate of `jaxsolve.evaluation.irt` (which plugs in the MAP $\hat\theta$).

**How the posterior is computed.** Self-normalized importance sampling in two stages
(adaptive importance sampling, Cappé et al. 2004, "Population Monte Carlo"):

1. the MAP $\hat\theta$ by damped Newton steps (the log-posterior is concave: logistic
   log-likelihood plus a Gaussian prior; each step tries step lengths 1, 1/2, 1/4,
   1/8 and keeps the best, so the objective never increases) and the Hessian $H$ there;
2. ``n_samples`` draws from a multivariate $t_\nu$ ($\nu = 5$) centred at
   $\hat\theta$ with scale $c^2 H^{-1}$, $c = 1.5$ (heavier tails than the Laplace
   approximation: with nearly deterministic items the posterior is close to the prior
   cut by the half-spaces the anchors define, flat on one side of each wall);
3. ``n_samples`` fresh draws from a $t_\nu$ with the weighted mean and $1.2^2\times$
   the weighted covariance of stage 2 (blended with $H^{-1}$ while stage 2's
   effective sample size is small); the estimates use these weights.

The returned ``ess`` is stage 3's effective sample size $(\sum w)^2 / \sum w^2$; the
Monte Carlo error of the mean is about $\mathrm{sd}(y\mid x)/\sqrt{\mathrm{ess}}$.
``method="prior"`` samples the prior instead (plain likelihood weighting: exact in
the limit, but its effective sample size collapses as $K$ grows; for checks).

The posterior median of $y$: given $\theta$, $N y - \sum_A x_j$ is a sum of independent
Bernoullis with mean $m(\theta) = \sum_{j\notin A} p_j$ and variance
$v(\theta) = \sum_{j\notin A} p_j(1-p_j)$; its law is approximated by
$N(m, v + \frac1{12})$ (the $\frac1{12}$ spreads the integer lattice) and the weighted
mixture's median found by bisection.

The same standard draws serve every model (common random numbers); models are
processed ``batch_size`` at a time (memory ``batch_size x n_samples x n_items``).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxsolve.core.validation import check_int, check_key
from jaxsolve.evaluation.baselines import loglik_2pl

__all__ = ["PosteriorAccuracy", "posterior_accuracy"]

_METHODS = ("laplace", "prior")
_DF = 5.0  # the t proposal's degrees of freedom
_SCALE1, _SCALE2 = 1.5, 1.2  # stage-2 and stage-3 scale inflation
_STEPS = (1.0, 0.5, 0.25, 0.125)  # Newton step lengths tried


class PosteriorAccuracy(NamedTuple):
    """Posterior estimates of each model's full-benchmark accuracy.

    Attributes:
        mean: ``(n,)`` posterior mean $E[y \\mid x]$ (least squared error).
        median: ``(n,)`` posterior median of $y$ (least absolute error).
        ess: ``(n,)`` effective sample size of the final importance weights.
        theta: ``(n, d)`` posterior mean of the ability $\\theta$.
    """

    mean: jax.Array
    median: jax.Array
    ess: jax.Array
    theta: jax.Array


def _map(x, aA, bA, mu, steps):
    d = mu.shape[0]

    def obj(t):
        return -loglik_2pl(x, t, aA, bA) + 0.5 * jnp.sum((t - mu) ** 2, axis=-1)

    def hess(t):
        s = jax.nn.sigmoid(aA @ t - bA)
        return aA.T @ (aA * (s * (1 - s))[:, None]) + jnp.eye(d, dtype=t.dtype)

    def step(t, _):
        s = jax.nn.sigmoid(aA @ t - bA)
        g = aA.T @ (s - x) + (t - mu)
        delta = jnp.linalg.solve(hess(t), g)
        cands = t - jnp.asarray(_STEPS, t.dtype)[:, None] * delta
        cands = jnp.concatenate([t[None], cands])  # staying put is a candidate: monotone
        return cands[jnp.argmin(obj(cands))], None

    t = jax.lax.scan(step, mu, None, length=steps)[0]
    return t, hess(t)


def _t_draws(z, u, loc, chol):
    """Multivariate t draws and their log density (up to a shared constant)."""
    d = loc.shape[0]
    r = jnp.sqrt(_DF / u)
    theta = loc + (z * r[:, None]) @ chol.T
    logq = -0.5 * (_DF + d) * jnp.log1p(jnp.sum(z * z, axis=1) / u) - jnp.sum(
        jnp.log(jnp.diag(chol))
    )
    return theta, logq


def _weights(logw):
    w = jnp.exp(logw - jnp.max(logw))
    w = w / jnp.sum(w)
    return w, 1.0 / jnp.sum(w * w)


def _one(x, draws, a, b, anchors, rest, mu, *, method, newton_steps):
    aA, bA = a[anchors], b[anchors]
    d = mu.shape[0]
    eye = jnp.eye(d, dtype=a.dtype)
    log_prior = lambda t: -0.5 * jnp.sum((t - mu) ** 2, axis=-1)  # noqa: E731
    if method == "prior":
        theta = mu + draws[0]
        w, ess = _weights(loglik_2pl(x, theta, aA, bA))
    else:
        z1, u1, z2, u2 = draws
        t0, H = _map(x, aA, bA, mu, newton_steps)
        Hinv = jnp.linalg.inv(H)
        Hinv = 0.5 * (Hinv + Hinv.T)
        th1, lq1 = _t_draws(z1, u1, t0, _SCALE1 * jnp.linalg.cholesky(Hinv))
        w1, ess1 = _weights(loglik_2pl(x, th1, aA, bA) + log_prior(th1) - lq1)
        m1 = w1 @ th1
        c1 = (th1 - m1).T @ ((th1 - m1) * w1[:, None])
        # trust the weighted moments once stage 2 has a few dozen effective draws
        lam = jnp.clip(ess1 / 50.0, 0.0, 1.0)
        loc = lam * m1 + (1 - lam) * t0
        cov = lam * c1 + (1 - lam) * Hinv + 1e-9 * eye
        th2, lq2 = _t_draws(z2, u2, loc, _SCALE2 * jnp.linalg.cholesky(0.5 * (cov + cov.T)))
        w, ess = _weights(loglik_2pl(x, th2, aA, bA) + log_prior(th2) - lq2)
        theta = th2
    p = jax.nn.sigmoid(theta @ a.T - b)  # (S, N)
    m = p @ rest
    v = (p * (1 - p)) @ rest + 1.0 / 12
    seen = jnp.sum(x)
    n_items = a.shape[0]
    mean = (seen + w @ m) / n_items

    def cdf_below_half(r):
        return w @ jax.scipy.stats.norm.cdf((r - m) / jnp.sqrt(v)) < 0.5

    def bisect(c, _):
        lo, hi = c
        mid = 0.5 * (lo + hi)
        below = cdf_below_half(mid)
        return (jnp.where(below, mid, lo), jnp.where(below, hi, mid)), None

    zero = jnp.zeros((), a.dtype)
    lo, hi = jax.lax.scan(bisect, (zero, zero + jnp.sum(rest)), None, length=60)[0]
    median = (seen + 0.5 * (lo + hi)) / n_items
    return mean, median, ess, w @ theta


@partial(jax.jit, static_argnames=("method", "newton_steps", "batch_size"))
def _run(X, draws, a, b, anchors, mu, *, method, newton_steps, batch_size):
    rest = jnp.ones(a.shape[0], a.dtype).at[anchors].set(0)
    f = partial(_one, method=method, newton_steps=newton_steps)
    return jax.lax.map(
        lambda x: f(x, draws, a, b, anchors, rest, mu), X, batch_size=min(batch_size, X.shape[0])
    )


def posterior_accuracy(
    X: ArrayLike,
    anchors: ArrayLike,
    a: ArrayLike,
    b: ArrayLike,
    key: jax.Array,
    *,
    prior_mean: ArrayLike | None = None,
    n_samples: int = 4096,
    method: str = "laplace",
    newton_steps: int = 30,
    batch_size: int = 8,
) -> PosteriorAccuracy:
    r"""Posterior mean and median of full-benchmark accuracy from anchor answers.

    Args:
        X: ``(n, K)`` answers of ``n`` models on the anchors, in $[0, 1]$.
        anchors: ``(K,)`` distinct item indices (columns of ``X`` in this order).
        a: ``(N, d)`` item discriminations of all items.
        b: ``(N,)`` item difficulties.
        key: ``jax.random`` key of the importance samples.
        prior_mean: ``(d,)`` prior mean of $\theta$ (default 0; prior covariance $I$).
        n_samples: importance samples per stage (the Monte Carlo error falls as
            $1/\sqrt{\text{ess}}$).
        method: ``"laplace"`` (default: Laplace-then-adaptive $t$ proposal, see the
            module docstring) or ``"prior"`` (samples the prior; for checks).
        newton_steps: damped Newton steps to the MAP.
        batch_size: models processed at once (memory ``batch_size * n_samples * N``).

    Checked, naming the argument: shapes, finiteness, ``X`` in $[0, 1]$, distinct
    anchors in range, ``key``, positive counts and ``method``. Returns a
    `PosteriorAccuracy`.
    """
    check_key("key", key)
    a = jnp.asarray(a)
    if a.ndim != 2 or not jnp.issubdtype(a.dtype, jnp.floating):
        raise ValueError(f"a must be a floating (n_items, dim) matrix, got shape {a.shape}")
    n_items, d = a.shape
    dtype = a.dtype
    b = jnp.asarray(b, dtype)
    if b.shape != (n_items,):
        raise ValueError(f"b must have shape ({n_items},) like a's rows, got {b.shape}")
    anchors = np.asarray(anchors)
    if anchors.ndim != 1 or not np.issubdtype(anchors.dtype, np.integer):
        raise ValueError(f"anchors must be a vector of ints, got {anchors.dtype} {anchors.shape}")
    if anchors.size == 0 or anchors.min() < 0 or anchors.max() >= n_items:
        raise ValueError(f"anchors must lie in [0, {n_items}) and be non-empty")
    if len(set(anchors.tolist())) != anchors.size:
        raise ValueError("anchors must be distinct items (no repeats)")
    X = jnp.asarray(X, dtype)
    if X.ndim != 2 or X.shape[1] != anchors.size:
        raise ValueError(f"X must be (models, K = {anchors.size}) answers, got shape {X.shape}")
    for name, v in (("X", X), ("a", a), ("b", b)):
        if not bool(jnp.all(jnp.isfinite(v))):
            raise ValueError(f"{name} must be finite")
    if bool(jnp.any((X < 0) | (X > 1))):
        raise ValueError("X must lie in [0, 1] (1 = correct)")
    mu = jnp.zeros(d, dtype) if prior_mean is None else jnp.asarray(prior_mean, dtype)
    if mu.shape != (d,) or not bool(jnp.all(jnp.isfinite(mu))):
        raise ValueError(f"prior_mean must be a finite vector of length {d}")
    n_samples = check_int("n_samples", n_samples)
    newton_steps = check_int("newton_steps", newton_steps)
    batch_size = check_int("batch_size", batch_size)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    k1, k2, k3, k4 = jax.random.split(key, 4)
    S = int(n_samples)
    if method == "prior":
        draws = (jax.random.normal(k1, (S, d), dtype),)
    else:
        chi2 = lambda k: 2.0 * jax.random.gamma(k, _DF / 2, (S,), dtype)  # noqa: E731
        draws = (
            jax.random.normal(k1, (S, d), dtype),
            chi2(k2),
            jax.random.normal(k3, (S, d), dtype),
            chi2(k4),
        )
    mean, median, ess, theta = _run(
        X,
        draws,
        a,
        b,
        jnp.asarray(anchors),
        mu,
        method=method,
        newton_steps=int(newton_steps),
        batch_size=int(batch_size),
    )
    return PosteriorAccuracy(mean, median, ess, theta)
