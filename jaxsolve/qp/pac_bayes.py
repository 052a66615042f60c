r"""PAC-Bayes certificates on a learned QP solver's failure probability.

Deep FlexQP (Oshin, Ghosh, Saravanos, Theodorou, ICLR 2026, arXiv:2512.01565)
certifies its learned solver with a PAC-Bayes bound on the probability, over the
problem distribution $\mathcal D$, that the residual after $K$ iterations exceeds a
tolerance. For a Gaussian posterior
$Q = \mathcal N(\theta, s^2 I)$ over the policies' weights and a prior
$\Pi = \mathcal N(\theta_0, \lambda^2 I)$ fixed before the $N$ certification problems
$\xi_1..\xi_N \sim \mathcal D$ are drawn, the loss $\ell(\theta', \xi) =
\mathbb 1[\mathrm{res}_K(\theta', \xi) > \mathrm{tol}]$ has, with probability at least
$1 - \delta$ (Maurer 2004's form of Seeger's PAC-Bayes-kl bound),

$$
\mathrm{kl}\bigl(\hat R_S(Q)\,\|\,R(Q)\bigr) \le
\frac{\mathrm{KL}(Q\|\Pi) + \log(2\sqrt N/\delta)}{N},
\qquad
\mathrm{KL}(Q\|\Pi) = \tfrac12\Bigl[\tfrac{d s^2 + \|\theta - \theta_0\|^2}{\lambda^2}
- d + 2d\log\tfrac{\lambda}{s}\Bigr],
$$

so $R(Q) \le \mathrm{kl}^{-1}(\hat R_S(Q), \cdot)$, the largest $q$ with
$\mathrm{kl}(\hat R\|q)$ at most the right side ($\mathrm{kl}$: the Bernoulli relative
entropy). $\hat R_S(Q) = \frac1N\sum_i \mathbb E_{\theta'\sim Q}\,\ell(\theta', \xi_i)$
is not computed exactly: each problem is solved with its own weight draw
$\theta_i \sim Q$, and the $\ell(\theta_i, \xi_i)$ are independent with mean
$\hat R_S(Q)$ given $S$, so by Chernoff's bound $\hat R_S(Q) \le
\mathrm{kl}^{-1}(\hat e, \log(1/\delta')/N)$ with probability $1 - \delta'$ (one solve
per problem, where Langford and Caruana's sample-convergence bound needs many draws per
problem). The two bounds compose because $\mathrm{kl}^{-1}$ is increasing in its first
argument; over $T$ tolerances each gets $\delta/T$ and $\delta'/T$ (a union bound), so
all $T$ certificates hold at once with probability $1 - \delta - \delta'$.

Which prior: on problems held out from training (the default, ``prior=None``) the
prior may depend on the training data, so it is the posterior itself
($\mathrm{KL} = 0$, the bound is a test-set bound). To certify on the training problems,
pass a data-independent ``prior`` (the policies at their initialization, drawn from a
fixed key) and ``prior_scale``; then $\mathrm{KL}$ grows with the distance training
moved the weights, and with the ~2e4 weights of `Policies.learned
<jaxsolve.qp.deep.Policies.learned>` the bound is informative only when that distance
is small against ``prior_scale``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core import solve
from jaxsolve.qp.deep import DeepFlexQP, Policies
from jaxsolve.qp.problem import QP

__all__ = ["PACBayesBound", "pac_bayes_bound", "kl_inverse", "gaussian_kl", "residuals_after"]


class PACBayesBound(NamedTuple):
    """`pac_bayes_bound`'s result, one entry per tolerance.

    Attributes:
        tols: the tolerances ``(T,)``.
        bound: the certificate: with probability at least ``1 - delta - delta_sample``
            over the certification problems, ``P[residual after K > tol] <= bound``
            for every tolerance at once (for the stochastic solver ``Q``).
        empirical: the failure rate measured on the certification problems (one weight
            draw per problem).
        kl: ``KL(Q || prior)`` (0 when the prior is the posterior).
        residuals: the ``(N,)`` residuals after ``K`` iterations behind ``empirical``.
    """

    tols: np.ndarray
    bound: np.ndarray
    empirical: np.ndarray
    kl: float
    residuals: np.ndarray


def _kl_bernoulli(p, q):
    """``kl(p || q)``, the relative entropy of Bernoulli(p) from Bernoulli(q) (NumPy)."""
    p = np.clip(p, 0.0, 1.0)
    q = np.clip(q, 1e-300, 1.0 - 1e-16)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p > 0, p * np.log(p / q), 0.0)
        b = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return a + b


def kl_inverse(p: Any, c: Any, iters: int = 100) -> np.ndarray:
    r"""Upper inverse of the Bernoulli relative entropy: $\max\{q \in [p, 1]:
    \mathrm{kl}(p\|q) \le c\}$, by bisection (``kl(p||q)`` increases in ``q >= p``).

    Exact values to check it by: ``kl_inverse(0, c) = 1 - exp(-c)``; ``c <= 0`` gives
    ``p``. Vectorized over ``p`` and ``c`` (NumPy).
    """
    p, c = np.broadcast_arrays(np.asarray(p, np.float64), np.asarray(c, np.float64))
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p must lie in [0, 1]")
    lo, hi = p.copy(), np.ones_like(p)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        over = _kl_bernoulli(p, mid) > c
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    return np.where(c <= 0, p, hi)


def gaussian_kl(mean_q, mean_p, scale_q: float, scale_p: float) -> float:
    r"""$\mathrm{KL}(\mathcal N(m_q, s_q^2 I)\,\|\,\mathcal N(m_p, s_p^2 I))$ over the
    inexact array leaves of two pytrees of the same structure (the weights)."""
    leaves_q = jax.tree.leaves(eqx.filter(mean_q, eqx.is_inexact_array))
    leaves_p = jax.tree.leaves(eqx.filter(mean_p, eqx.is_inexact_array))
    if len(leaves_q) != len(leaves_p) or any(
        a.shape != b.shape for a, b in zip(leaves_q, leaves_p, strict=True)
    ):
        raise ValueError("the prior's policies must have the posterior's structure")
    d = sum(int(np.size(a)) for a in leaves_q)
    dist_sq = sum(float(jnp.sum((a - b) ** 2)) for a, b in zip(leaves_q, leaves_p, strict=True))
    ratio = (scale_q / scale_p) ** 2
    return 0.5 * (d * ratio + dist_sq / scale_p**2 - d - d * math.log(ratio))


def _check_scale(name, s, allow_zero):
    if not (isinstance(s, int | float) and math.isfinite(s) and (s > 0 or (allow_zero and s == 0))):
        raise ValueError(
            f"{name} must be a {'non-negative' if allow_zero else 'positive'} number, got {s!r}"
        )


@eqx.filter_jit
def _residuals_chunk(policies, qps, keys, scale, K):
    """The residual after ``K`` iterations on each QP of the chunk ``qps``, each with
    its own weight draw from ``N(policies, scale^2 I)`` (one key per QP)."""
    params, static = eqx.partition(policies, eqx.is_inexact_array)

    def one(qp, key):
        leaves, treedef = jax.tree.flatten(params)
        leaf_keys = jax.random.split(key, len(leaves))
        noisy = [
            a + scale * jax.random.normal(leaf_key, a.shape, a.dtype)
            for a, leaf_key in zip(leaves, leaf_keys, strict=True)
        ]
        pol = eqx.combine(jax.tree.unflatten(treedef, noisy), static)
        sol = solve(DeepFlexQP(policies=pol), jnp.zeros_like(qp.q), qp, tol=0.0, max_steps=K)
        return sol.error

    return jax.vmap(one)(qps, keys)


def residuals_after(
    policies: Policies,
    qps: QP,
    K: int,
    *,
    scale: float = 0.0,
    key: Any = None,
    chunk: int = 1024,
) -> np.ndarray:
    """Deep FlexQP's residual (``error``, the relative KKT residual) after ``K``
    iterations from zero on each QP of the batch ``qps``, each solved with its own draw
    of the weights from ``N(policies, scale^2 I)`` (``scale = 0``: the policies as they
    are). One compiled call per ``chunk`` problems; NaN residuals are kept (they count as
    failures)."""
    count = qps.q.shape[0]
    key = jax.random.key(0) if key is None else key
    keys = jax.random.split(key, count)
    chunk = min(chunk, count)
    # every chunk has the same shape, so one compile serves them all: the last one is
    # padded with copies of the final problem, whose results are dropped
    pad = -count % chunk
    idx = jnp.concatenate([jnp.arange(count), jnp.full((pad,), count - 1)])
    qps, keys = jax.tree.map(lambda v: v[idx], (qps, keys))
    out = []
    for start in range(0, count + pad, chunk):
        part = jax.tree.map(lambda v, start=start: v[start : start + chunk], qps)
        part_keys = keys[start : start + chunk]
        out.append(np.asarray(_residuals_chunk(policies, part, part_keys, jnp.asarray(scale), K)))
    return np.concatenate(out)[:count]


def pac_bayes_bound(
    policies: Policies,
    qps: QP,
    *,
    K: int,
    tols: Any,
    posterior_scale: float = 1e-3,
    prior: Policies | None = None,
    prior_scale: float | None = None,
    delta: float = 0.01,
    delta_sample: float = 0.01,
    key: Any = None,
) -> PACBayesBound:
    r"""A PAC-Bayes certificate on ``P[residual after K iterations > tol]`` for the
    learned Deep FlexQP solver, at each of ``tols`` (module docstring for the math).

    Args:
        policies: the posterior mean ``theta`` (trained `jaxsolve.qp.deep.Policies`).
        qps: ``N`` certification problems (a batched `QP`) drawn from the distribution,
            independent of the prior (held out from training when ``prior`` is None).
        K: iterations the solver runs (its budget at deployment).
        tols: tolerances on the residual (any shape, flattened).
        posterior_scale: ``s``, the posterior's standard deviation per weight.
        prior: the prior mean ``theta_0``; None: the posterior itself (KL = 0; valid
            only when ``qps`` were not used in training).
        prior_scale: ``lambda`` (default ``posterior_scale``).
        delta: the PAC-Bayes bound's confidence parameter.
        delta_sample: the confidence given up for estimating the empirical risk with
            one weight draw per problem.
        key: the weight draws (default ``jax.random.key(0)``).

    Returns:
        A `PACBayesBound`; every certificate holds at once with probability at least
        ``1 - delta - delta_sample``.
    """
    if not isinstance(policies, Policies):
        raise TypeError(
            f"policies must be a jaxsolve.qp.deep.Policies, got {type(policies).__name__}"
        )
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K must be a positive int, got {K!r}")
    _check_scale("posterior_scale", posterior_scale, allow_zero=prior is None)
    for name, d in (("delta", delta), ("delta_sample", delta_sample)):
        if not (isinstance(d, int | float) and 0 < d < 1):
            raise ValueError(f"{name} must lie in (0, 1), got {d!r}")
    tols = np.asarray(tols, np.float64).ravel()
    if tols.size == 0 or not np.all(np.isfinite(tols)) or np.any(tols < 0):
        raise ValueError("tols must be non-empty, finite and non-negative")
    if prior is None:
        kl = 0.0
    else:
        lam = posterior_scale if prior_scale is None else prior_scale
        _check_scale("prior_scale", lam, allow_zero=False)
        kl = gaussian_kl(policies, prior, posterior_scale, lam)
    n = int(qps.q.shape[0])
    res = residuals_after(policies, qps, K, scale=posterior_scale, key=key)
    fail = ~(res[None, :] <= tols[:, None])  # NaN counts as a failure
    empirical = fail.mean(axis=1)
    n_tols = tols.size
    # Chernoff's bound on the empirical risk of Q, then the PAC-Bayes-kl bound (module
    # docstring), each at confidence delta / n_tols (a union bound over the tolerances)
    risk_sample = kl_inverse(empirical, math.log(n_tols / delta_sample) / n)
    bound = kl_inverse(risk_sample, (kl + math.log(2.0 * math.sqrt(n) * n_tols / delta)) / n)
    return PACBayesBound(tols, bound, empirical, float(kl), res)
