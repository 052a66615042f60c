r"""Generative batch Bayesian optimization (GenBO): a generative model trained on utilities is the batch sampler.

Oliveira, Steinberg and Bonilla, "Generative Bayesian Optimization: Generative Models
as Acquisition Functions" (ICLR 2026, arXiv 2510.25240). Maximization. Round $t$
fits a model $q$ toward $p^*_t(x) \propto p_0(x)\, a_t(x)$, the prior times the
expected utility of the observations, *directly from the utilities of the observed
points* (no surrogate regression), then samples the next batch from $q$.

**Utilities** of an observation $y$ against a threshold $\tau$ (annealed: the
``quantile`` of the values seen so far): PI $1[y \ge \tau]$, EI $\max(y - \tau, 0)$,
soft EI $\mathrm{softplus}(y - \tau)$, or the value $y$ itself.

**Losses** (each a pure function, tested on its own):

* preference (Bradley-Terry, DPO-style) on pairs $(i, j)$ with $u_i \ne u_j$:
  $-\log\sigma(\eta\,\mathrm{sign}(u_i - u_j)(r_i - r_j))$, $r = \log q - \log p_0$; its
  minimizer is $q \propto p_0 \exp(E[u]/\eta)$ in the Bradley-Terry model;
* robust preference (label flips with probability $\epsilon$, Chowdhury et al. 2024):
  $[(1 - \epsilon)\ell(\Delta u) - \epsilon\,\ell(-\Delta u)] / (1 - 2\epsilon)$, unbiased for the
  clean loss. It is not bounded below (the second term rewards ever larger margins), so a
  flexible model trained on it for long can run away: measured on Ackley-20 it did
  worse than random search (`bench/results/blackbox.md`); prefer the plain preference
  loss unless labels are known to flip;
* forward KL with importance weights $w_i = p_0(x_i)/q_{\text{prev}}(x_i)$ (the proposal
  $x_i$ was drawn from): $-\frac1n\sum_i w_i u_i \log q(x_i)$;
* balanced forward KL: adds $\frac1n\sum_i q(x_i)/q_{\text{prev}}(x_i)$, which penalizes
  mass where the utility is zero; its minimizer is $q = p_0 u / Z$ exactly.

**Models** are ``equinox`` modules with ``log_prob`` and ``sample``: `DiagonalGaussian`
on a box (samples clipped to the box; its density is that of the unclipped
Gaussian), `MeanFieldCategorical` (independent positions) and `MarkovCategorical`
(autoregressive, first order) over sequences.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsolve.core.validation import check_floating, check_int, check_key, is_concrete

__all__ = [
    "pi",
    "ei",
    "soft_ei",
    "value",
    "quantile_threshold",
    "random_pairs",
    "distinct_pair_fraction",
    "preference_loss",
    "robust_preference_loss",
    "forward_kl_loss",
    "balanced_forward_kl_loss",
    "DiagonalGaussian",
    "MeanFieldCategorical",
    "MarkovCategorical",
    "UniformBox",
    "GenBOState",
    "GenBO",
    "genbo",
]


# --- utilities -------------------------------------------------------------------------------


def pi(y, tau):
    """Probability of improvement utility $1[y \\ge \\tau]$."""
    return (y >= tau).astype(jnp.result_type(y, float))


def ei(y, tau):
    """Expected improvement utility $\\max(y - \\tau, 0)$."""
    return jnp.maximum(y - tau, 0)


def soft_ei(y, tau):
    """Soft expected improvement $\\mathrm{softplus}(y - \\tau)$ (positive everywhere)."""
    return jax.nn.softplus(y - tau)


def value(y, tau=None):
    """The value itself (needs a loss that accepts negative utilities: the preference ones)."""
    return y


def quantile_threshold(y, q: float, mask=None):
    """The ``q``-quantile of the observed values (``mask``: which entries are observed)."""
    y = jnp.asarray(y)
    m = jnp.ones(y.shape, bool) if mask is None else mask
    ys = jnp.sort(jnp.where(m, y, jnp.inf))
    n = jnp.sum(m)
    i = jnp.clip(jnp.floor(q * (n - 1)).astype(jnp.int32), 0, y.shape[0] - 1)
    return ys[i]


# --- losses -----------------------------------------------------------------------------------


def _pair_terms(r, u, mask, pairs, labels):
    if pairs is None:  # every pair i < j
        dr = r[:, None] - r[None, :]
        du = u[:, None] - u[None, :]
        pair = jnp.triu((du != 0) & mask[:, None] & mask[None, :], k=1)
        return dr, jnp.sign(du), pair
    i, j = pairs
    s = jnp.sign(u[i] - u[j]) if labels is None else jnp.sign(labels)
    return r[i] - r[j], s, (s != 0) & mask[i] & mask[j] & (i != j)


def random_pairs(key, n: int, per_point: int = 8):
    """``per_point`` random partners for each of ``n`` points: index arrays ``(i, j)``.

    All $n^2/2$ pairs cost quadratic time and memory in the number of observations;
    random pairs keep the loss an unbiased estimate of the all-pairs mean at $O(n)$.
    """
    i = jnp.tile(jnp.arange(n), per_point)
    j = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(key, per_point)).ravel()
    return i, j


def _pair_sum(r, u, eta, flip, mask, pairs, labels):
    """``(sum of the pair terms, number of pairs)`` of the (robust, if ``flip``) preference
    loss: the losses divide one by the other, the minibatch fit by its expectation."""
    m = jnp.ones(r.shape, bool) if mask is None else mask
    dr, s, pair = _pair_terms(r, u, m, pairs, labels)
    terms = -jax.nn.log_sigmoid(eta * s * dr)
    if flip is not None:
        flipped = -jax.nn.log_sigmoid(-eta * s * dr)
        terms = ((1 - flip) * terms - flip * flipped) / (1 - 2 * flip)
    return jnp.sum(jnp.where(pair, terms, 0)), jnp.sum(pair)


def preference_loss(r, u, eta: float = 1.0, mask=None, pairs=None, labels=None):
    """Bradley-Terry loss over pairs of distinct utility; ``r = log q - log p0``.

    ``pairs``: ``(i, j)`` index arrays (e.g. `random_pairs`); default every pair.
    ``labels``: observed preferences per pair (+1: ``i`` preferred, -1: ``j``) instead of
    the signs of the utility differences.
    """
    total, count = _pair_sum(r, u, eta, None, mask, pairs, labels)
    return total / jnp.maximum(count, 1)


def robust_preference_loss(
    r, u, eta: float = 1.0, flip: float = 0.1, mask=None, pairs=None, labels=None
):
    """The preference loss corrected for labels flipped with probability ``flip`` < 1/2."""
    if not 0 <= flip < 0.5:
        raise ValueError(f"flip must be in [0, 0.5), got {flip!r}")
    total, count = _pair_sum(r, u, eta, flip, mask, pairs, labels)
    return total / jnp.maximum(count, 1)


def distinct_pair_fraction(u, mask=None):
    r"""$\rho$: the fraction of the $n^2$ ordered pairs $(i, j)$ of observed points
    (``mask``) whose utilities differ, $1 - \sum_v c_v^2 / n^2$ with $c_v$ the number of
    points of utility $v$. One sort, $O(n \log n)$. The all-pairs preference loss is the
    sum of the pair terms over $\rho n^2 / 2$ pairs; the minibatch fit divides by it."""
    u = jnp.asarray(u)
    m = jnp.ones(u.shape, bool) if mask is None else mask
    us = jnp.sort(jnp.where(m, u, jnp.inf))
    ties = jnp.searchsorted(us, us, side="right") - jnp.searchsorted(us, us, side="left")
    n = jnp.sum(m)
    in_obs = jnp.arange(u.shape[0]) < n  # the sorted observed values come first
    same = jnp.sum(jnp.where(in_obs, ties, 0)).astype(u.dtype)
    nf = jnp.maximum(n, 1).astype(u.dtype)
    return 1 - same / nf**2


def forward_kl_loss(log_q, u, log_w=None, mask=None):
    """$-\\frac1n\\sum_i w_i u_i \\log q(x_i)$ (``log_w``: log importance weights, default 0)."""
    m = jnp.ones(log_q.shape, bool) if mask is None else mask
    w = jnp.ones_like(log_q) if log_w is None else jnp.exp(log_w)
    n = jnp.maximum(jnp.sum(m), 1)
    return -jnp.sum(jnp.where(m, w * u * log_q, 0)) / n


def balanced_forward_kl_loss(log_q, u, log_q_prev, log_p0, mask=None):
    """Balanced forward KL: $\\frac1n\\sum_i [-\\frac{p_0}{q_{\\text{prev}}} u_i \\log q(x_i)
    + \\frac{q(x_i)}{q_{\\text{prev}}(x_i)}]$ for $x_i \\sim q_{\\text{prev}}$."""
    m = jnp.ones(log_q.shape, bool) if mask is None else mask
    w = jnp.exp(log_p0 - log_q_prev)
    ratio = jnp.exp(log_q - log_q_prev)
    n = jnp.maximum(jnp.sum(m), 1)
    return jnp.sum(jnp.where(m, -w * u * log_q + ratio, 0)) / n


# --- models -----------------------------------------------------------------------------------


class DiagonalGaussian(eqx.Module):
    """$N(\\text{mean}, \\text{diag}(e^{2\\,\\text{log\\_std}}))$, samples clipped to ``[lower, upper]``."""

    mean: jax.Array
    log_std: jax.Array
    lower: jax.Array
    upper: jax.Array

    def log_prob(self, x):
        z = (x - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z**2 - self.log_std - 0.5 * jnp.log(2 * jnp.pi), axis=-1)

    def sample(self, key, n: int):
        z = jax.random.normal(key, (n,) + self.mean.shape, self.mean.dtype)
        return jnp.clip(self.mean + jnp.exp(self.log_std) * z, self.lower, self.upper)


class UniformBox(eqx.Module):
    """The uniform prior on ``[lower, upper]``."""

    lower: jax.Array
    upper: jax.Array

    def __check_init__(self):
        # integer bounds passed here and failed at the first sample (jax.random.uniform)
        check_floating("lower", self.lower, real=True)
        check_floating("upper", self.upper, real=True)
        if jnp.shape(self.lower) != jnp.shape(self.upper):
            raise ValueError(
                f"lower and upper must have one shape, got {jnp.shape(self.lower)} "
                f"and {jnp.shape(self.upper)}"
            )
        if is_concrete((self.lower, self.upper)) and not np.all(
            np.asarray(self.lower) < np.asarray(self.upper)
        ):
            raise ValueError("lower must be below upper in every coordinate (a box of volume > 0)")

    def log_prob(self, x):
        inside = jnp.all((x >= self.lower) & (x <= self.upper), axis=-1)
        return jnp.where(inside, -jnp.sum(jnp.log(self.upper - self.lower)), -jnp.inf)

    def sample(self, key, n: int):
        return jax.random.uniform(
            key, (n,) + self.lower.shape, self.lower.dtype, self.lower, self.upper
        )


def _in_states(x, n_states: int, log_prob):
    """``log_prob`` where every state of the sequence lies in ``[0, n_states)``, else -inf
    (probability zero: outside the support). A ``where``, so in-range values are exact."""
    inside = jnp.all((x >= 0) & (x < n_states), axis=-1)
    return jnp.where(inside, log_prob, -jnp.inf)


class MeanFieldCategorical(eqx.Module):
    """Independent categorical positions: ``logits`` ``(length, n_states)``; samples are ints."""

    logits: jax.Array

    def log_prob(self, x):
        r"""$\log q(x)$; $-\infty$ for a sequence holding a state outside
        ``[0, n_states)`` (JAX's indexing clamped it to a valid state's probability, so
        `GenBO.init` could not see an initial sequence outside the prior's support)."""
        lp = jax.nn.log_softmax(self.logits, axis=-1)
        return _in_states(x, lp.shape[-1], jnp.sum(lp[jnp.arange(lp.shape[0]), x], axis=-1))

    def sample(self, key, n: int):
        return jax.random.categorical(key, self.logits, shape=(n,) + self.logits.shape[:-1])


class MarkovCategorical(eqx.Module):
    r"""An autoregressive (first-order Markov) model over sequences of ints:
    $q(x) = q_1(x_1) \prod_{t \ge 2} q_t(x_t \mid x_{t-1})$ with
    $q_t(\cdot \mid a) = \mathrm{softmax}(U_t + T_a)$.

    ``unary`` ``(length, n_states)`` holds $U$ (per-position preferences), ``pair``
    ``(n_states, n_states)`` holds $T$ (row $a$: the logits of what may follow $a$,
    shared across positions). Unlike `MeanFieldCategorical` it can learn which
    transitions are allowed, the feasibility of a DMP-constrained objective such as an
    Ehrlich function; ``log_prob`` is exact and ``sample`` is ancestral (a ``lax.scan``
    over positions).

    ``log_prob`` of $n$ sequences normalizes either the $n(L-1)$ rows of logits the
    sequences visit or, when $n \ge$ ``n_states``, the whole table of
    $(L-1) \times S$ conditionals once and gathers from it: the same numbers, at
    $(L-1)S^2$ instead of $n(L-1)S$ exponentials (for 256 sequences of length 32 over 32
    states the gradient takes 0.3 ms instead of 2.2 ms).
    """

    unary: jax.Array
    pair: jax.Array

    def log_prob(self, x):
        r"""$\log q(x)$; $-\infty$ for a sequence holding a state outside
        ``[0, n_states)`` (it was a clamped state's value or NaN)."""
        x = jnp.asarray(x)
        first = jax.nn.log_softmax(self.unary[0])[x[..., 0]]
        n_states = self.pair.shape[0]
        if x.ndim >= 2 and np.prod(x.shape[:-1]) >= n_states:
            table = jax.nn.log_softmax(self.unary[1:, None, :] + self.pair, -1)  # (L-1, S, S)
            lp = table[jnp.arange(x.shape[-1] - 1), x[..., :-1], x[..., 1:]]
            return _in_states(x, n_states, first + jnp.sum(lp, axis=-1))
        logits = self.unary[1:] + self.pair[x[..., :-1]]  # (..., length - 1, n_states)
        lp = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), x[..., 1:, None], -1)
        return _in_states(x, n_states, first + jnp.sum(lp[..., 0], axis=-1))

    def sample(self, key, n: int):
        k0, k1 = jax.random.split(key)
        x0 = jax.random.categorical(k0, self.unary[0], shape=(n,))

        def step(prev, inputs):
            k, u = inputs
            nxt = jax.random.categorical(k, u + self.pair[prev])
            return nxt, nxt

        length = self.unary.shape[0]
        _, rest = jax.lax.scan(step, x0, (jax.random.split(k1, length - 1), self.unary[1:]))
        return jnp.concatenate([x0[:, None], rest.T], axis=1)


# --- the BO loop --------------------------------------------------------------------------------

_UTILITIES = {"pi": pi, "ei": ei, "soft_ei": soft_ei, "value": value}
_LOSSES = ("preference", "robust_preference", "forward_kl", "balanced_forward_kl")
DEFAULT_MINIBATCH = 256
"""`genbo`'s default rows per Adam step (`GenBO.fit`)."""


class GenBOState(NamedTuple):
    r"""The GenBO loop's state (`GenBO.init`, `GenBO.ask`, `GenBO.tell`).

    ``X``/``y``/``log_q_prev``/``observed`` hold every point evaluated so far in a fixed
    buffer of ``capacity = n_initial + rounds * batch_size`` rows.

    Attributes:
        model: the generative model $q$ (an ``equinox`` module with ``log_prob`` and
            ``sample``), refitted by every `GenBO.ask`.
        opt_state: the Adam state of the model's inexact-array leaves, carried from one
            fit to the next.
        X: ``(capacity, ...)`` the evaluated points (zeros in unfilled rows).
        y: ``(capacity,)`` their observed values (0 where not observed).
        log_q_prev: ``(capacity,)`` $\log q_{\text{prev}}(x_i)$, the log density of the
            proposal each point was drawn from (the prior $p_0$ for the initial points),
            for the importance weights of the KL losses.
        observed: bool ``(capacity,)``, the rows holding a finite observation (NaN
            observations and unfilled rows are kept out of the fit).
        count: int32 scalar, rows written so far (initial points plus ``batch_size`` per
            round; may pass ``capacity``, the extra rows then dropped).
        round: int32 scalar, rounds told so far.
        best_x: the best finite point observed so far.
        best_y: its value (``-inf`` while none is finite).
        key: the PRNG key, split by `GenBO.fit` for the preference pairs and by
            `GenBO.ask` for the batch.
    """

    model: Any
    opt_state: Any
    X: jax.Array
    y: jax.Array
    log_q_prev: jax.Array
    observed: jax.Array
    count: jax.Array
    round: jax.Array
    best_x: jax.Array
    best_y: jax.Array
    key: jax.Array


class GenBO(eqx.Module):
    """The GenBO loop (see the module docstring); build it with `genbo`."""

    prior: Any
    utility: Callable = eqx.field(static=True)
    loss: str = eqx.field(static=True)
    batch_size: int = eqx.field(static=True)
    capacity: int = eqx.field(static=True)
    fit_steps: int = eqx.field(static=True)
    minibatch: int | None = eqx.field(static=True)
    learning_rate: float
    quantile: float
    eta: float
    flip: float

    def _opt(self):
        return optax.adam(self.learning_rate)

    def init(self, model, X0, y0, key) -> GenBOState:
        """Start from initial observations ``(X0, y0)`` (drawn from the prior).

        Raises ``ValueError`` (concrete inputs) when ``X0`` has a point outside the
        prior's support, or when the model's search box (``model.lower`` /
        ``model.upper``, where it has them) reaches outside it: there
        $\\log p_0 = -\\infty$, and every loss that weighs by $p_0$ would turn NaN."""
        X0, y0 = jnp.asarray(X0), jnp.asarray(y0)
        _check_start(self, model, X0, y0, key)
        n0 = X0.shape[0]
        _check_support(self.prior, model, X0)
        params, _ = eqx.partition(model, eqx.is_inexact_array)
        lq = jnp.zeros(self.capacity, y0.dtype).at[:n0].set(self.prior.log_prob(X0))
        empty = GenBOState(
            model,
            self._opt().init(params),
            jnp.zeros((self.capacity,) + X0.shape[1:], X0.dtype),
            jnp.zeros(self.capacity, y0.dtype),
            lq,
            jnp.zeros(self.capacity, bool),
            jnp.int32(0),
            jnp.int32(-1),
            X0[0],
            jnp.asarray(-jnp.inf, y0.dtype),
            key,
        )
        return record_batch(empty, X0, y0, self.capacity)  # round -1 + 1 = 0

    def _loss(self, model, state, u, pairs):
        lq = model.log_prob(state.X)
        lp0 = self.prior.log_prob(state.X)
        m = state.observed
        if self.loss == "preference":
            return preference_loss(lq - lp0, u, self.eta, m, pairs)
        if self.loss == "robust_preference":
            return robust_preference_loss(lq - lp0, u, self.eta, self.flip, m, pairs)
        if self.loss == "forward_kl":
            return forward_kl_loss(lq, u, lp0 - state.log_q_prev, m)
        return balanced_forward_kl_loss(lq, u, state.log_q_prev, lp0, m)

    def _minibatch_loss(self, model, X, u, lp0, log_q_prev, mask, rho, pairs):
        """The loss on a minibatch drawn uniformly with replacement from the observed rows:
        unbiased for the full-buffer loss (all pairs, for the preference losses)."""
        lq = model.log_prob(X)
        if self.loss.endswith("preference"):
            flip = self.flip if self.loss == "robust_preference" else None
            total, _ = _pair_sum(lq - lp0, u, self.eta, flip, mask, pairs, None)
            n_pairs = jnp.sum(pairs[0] != pairs[1])  # depends on the permutations only
            # no distinct pair (all utilities equal) or none drawn: the loss is 0; the
            # denominator is replaced before the division so no branch makes 0/0 (a NaN
            # there would reach the gradient through the where)
            denom = rho * n_pairs
            ok = denom > 0
            return jnp.where(ok, total / jnp.where(ok, denom, 1), 0)
        if self.loss == "forward_kl":
            return forward_kl_loss(lq, u, lp0 - log_q_prev, mask)
        return balanced_forward_kl_loss(lq, u, log_q_prev, lp0, mask)

    def utilities(self, state: GenBOState):
        """The utilities of the buffer's rows at the current threshold (0 where unobserved)."""
        tau = quantile_threshold(state.y, self.quantile, state.observed)
        u = jnp.where(state.observed, self.utility(state.y, tau), 0)
        # all-zero utilities (nothing above the threshold yet) would give a zero loss
        # for the KL losses: fall back to PI at the median, which is never all zero
        med = quantile_threshold(state.y, 0.5, state.observed)
        return jnp.where(
            jnp.any(u > 0) | (self.loss in ("preference", "robust_preference")),
            u,
            jnp.where(state.observed, pi(state.y, med), 0),
        )

    def fit(self, state: GenBOState) -> GenBOState:
        r"""``fit_steps`` Adam steps of the loss (utilities at the current threshold).

        With ``minibatch = b`` (the default, `genbo`) each step draws $b$ rows uniformly
        with replacement from the $n$ observed rows, $i_1, \dots, i_b$, from the state's
        key, and takes the gradient of

        * for the KL losses, $\frac1b\sum_k \ell_{i_k}$, whose expectation is the
          full-buffer loss $\frac1n\sum_i \ell_i$;
        * for the preference losses, 8 random partners per minibatch row
          (`random_pairs` within the minibatch, as the full-buffer fit pairs the buffer's
          rows), $\sum_{(k,l)} v_{kl}\,t_{kl} / (\rho N)$ over its $N$ pairs with
          $k \ne l$ ($t$: the pair's Bradley-Terry term, $v$: its utilities differ), with
          $\rho$ = `distinct_pair_fraction` of the buffer: each such pair $(i_k, i_l)$ is
          a uniform ordered pair of observed rows, so $E[v\,t] = \frac1{n^2}\sum_{i,j}
          v_{ij}t_{ij} = \rho\,\bar t$ and the estimate's expectation is $\bar t$, the
          all-pairs loss (`preference_loss` with ``pairs=None``).

        So each step is a stochastic gradient of the same loss, unbiased (the loss is
        linear in the terms, and the normalizers $n$, $\rho$ and $N$ do not depend on
        the rows drawn), at a cost of $b$ log densities and $8b$ pair terms whatever the
        buffer holds; once per fit the buffer is read in $O(n \log n)$ (threshold,
        $\rho$, the observed rows, $\log p_0$). Why: the full-buffer fit evaluated $q$
        on every observation at every step, so a round's cost grew with the rounds
        (2.7 s a round at 4224 Ehrlich observations, `bench/results/genbo_ehrlich.md`),
        while the model only needs a gradient direction. Random partners rather than
        every pair of the minibatch: every pair costs $b^2/2$ terms a step and did no
        better on Ehrlich-32 (median best of 5 seeds 0.5625 with either at $b = 256$,
        0.5 with every pair of 1024 rows): it fits the observed ranking harder (after one
        fit from a state of 12 rounds, all-pairs loss 0.003 against 0.06 for the
        full-buffer fit) and samples no better.

        ``minibatch=None``: every step uses the whole buffer, the preference losses on 8
        random partners per row (`random_pairs`, drawn once per fit).
        """
        key, sub = jax.random.split(state.key)
        state = state._replace(key=key)
        loss_at, keys = self.fit_loss(state, sub)
        params, static = eqx.partition(state.model, eqx.is_inexact_array)
        opt = self._opt()

        def step(carry, k):
            p, s = carry
            g = jax.grad(lambda p: loss_at(eqx.combine(p, static), k))(p)
            upd, s = opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), None

        (params, opt_state), _ = jax.lax.scan(
            step, (params, state.opt_state), keys, length=self.fit_steps
        )
        return state._replace(model=eqx.combine(params, static), opt_state=opt_state)

    def fit_loss(self, state: GenBOState, key):
        """``(loss, keys)``: `fit`'s step ``s`` descends ``loss(model, keys[s])`` (``keys``
        is ``None`` and the loss deterministic with ``minibatch=None``)."""
        u = self.utilities(state)
        if self.minibatch is None:
            pairs = random_pairs(key, self.capacity) if self.loss.endswith("preference") else None
            return (lambda model, _: self._loss(model, state, u, pairs)), None
        n = jnp.sum(state.observed)
        rows = jnp.nonzero(state.observed, size=self.capacity, fill_value=0)[0]
        lp0 = self.prior.log_prob(state.X)
        pref = self.loss.endswith("preference")
        rho = distinct_pair_fraction(u, state.observed) if pref else None

        def loss(model, k):
            k_rows, k_pairs = jax.random.split(k)
            i = rows[jax.random.randint(k_rows, (self.minibatch,), 0, jnp.maximum(n, 1))]
            return self._minibatch_loss(
                model,
                state.X[i],
                u[i],
                lp0[i],
                state.log_q_prev[i],
                state.observed[i],  # all False only when nothing is observed
                rho,
                random_pairs(k_pairs, self.minibatch) if pref else None,
            )

        return loss, jax.random.split(key, self.fit_steps)

    def ask(self, state: GenBOState):
        """Fit, then ``(X, state)``: the next batch sampled from the fitted model."""
        state = self.fit(state)
        key, sub = jax.random.split(state.key)
        X = state.model.sample(sub, self.batch_size)
        return X, state._replace(key=key)

    def tell(self, state: GenBOState, X, y) -> GenBOState:
        """Record the batch's observations; NaN observations are kept out of the fit.
        ``X`` is stored in the buffer's dtype (a model may sample int64 sequences into an
        int32 buffer)."""
        X = jnp.asarray(X, state.X.dtype)
        if X.shape[:1] != (self.batch_size,):
            raise ValueError(
                f"X must hold batch_size = {self.batch_size} rows (the batch from ask), got "
                f"shape {X.shape}"
            )
        idx = state.count + jnp.arange(self.batch_size)
        lq = state.model.log_prob(X)
        state = record_batch(state, X, y, self.capacity)
        return state._replace(log_q_prev=state.log_q_prev.at[idx].set(lq, mode="drop"))

    def run(self, objective: Callable, state: GenBOState, rounds: int):
        """``rounds`` rounds for a JAX ``objective(X) -> y`` (batched), in one ``lax.scan``;
        returns ``(state, best_y per round)``."""
        return run_rounds(self, objective, state, rounds)


def _check_start(loop, model, X0, y0, key) -> None:
    """Shapes, dtypes and the key of `GenBO.init`'s start, named (each failed with a JAX
    error from inside the buffer writes or the models' log densities)."""
    check_key("key", key)
    check_floating("y0", y0, real=True)  # an int buffer cannot hold the -inf of "no best"
    if X0.ndim < 1 or X0.shape[0] == 0:
        raise ValueError(f"X0 must hold at least one point (one per row), got shape {X0.shape}")
    n0 = X0.shape[0]
    if y0.shape != (n0,):
        raise ValueError(f"y0 must have shape ({n0},) (one value per row of X0), got {y0.shape}")
    if n0 > loop.capacity:
        raise ValueError(
            f"{n0} initial points do not fit the buffer of {loop.capacity} "
            "(n_initial + rounds * batch_size)"
        )
    for name, dist in (("the prior", loop.prior), ("the model", model)):
        try:
            out = jax.eval_shape(dist.log_prob, X0)
        except (TypeError, ValueError, IndexError) as err:
            raise ValueError(
                f"X0 of shape {X0.shape} does not fit {name} "
                f"({type(dist).__name__}.log_prob): {str(err).splitlines()[0]}"
            ) from None
        if out.shape != (n0,):
            raise ValueError(
                f"X0 of shape {X0.shape} does not fit {name}: {type(dist).__name__}.log_prob "
                f"gave shape {out.shape}, not ({n0},) (one log density per row)"
            )


def _check_support(prior, model, X0) -> None:
    """Refuse starts and search boxes outside the prior's support (see `GenBO.init`)."""
    if not is_concrete(X0) or not is_concrete(prior):
        return
    bad = ~np.isfinite(np.asarray(prior.log_prob(X0)))
    if bad.any():
        raise ValueError(
            f"X0 has {int(bad.sum())} point(s) outside the prior's support (log p0 = -inf), "
            f"the first at row {int(np.argmax(bad))}: draw X0 from the prior"
        )
    box = [getattr(model, name, None) for name in ("lower", "upper")]
    if all(b is not None and is_concrete(b) for b in box):
        corners = jnp.stack([jnp.asarray(b, X0.dtype) for b in box])
        if not np.all(np.isfinite(np.asarray(prior.log_prob(corners)))):
            raise ValueError(
                "the model's search box [model.lower, model.upper] reaches outside the "
                "prior's support (log p0 = -inf at a corner): shrink the box or widen the prior"
            )


def record_batch(state, X, y, capacity: int):
    """A batch's observations written into a fixed-capacity buffer state (fields ``X``,
    ``y``, ``observed``, ``count``, ``round``, ``best_x``, ``best_y``): rows past
    ``capacity`` are dropped, NaN observations are stored as unobserved, and the best
    finite point seen is kept. Shared by the batch BO loops (`GenBO`, ``gp.GPEI``)."""
    X = jnp.asarray(X, state.X.dtype)
    if X.ndim < 1 or X.shape[1:] != state.X.shape[1:]:  # it broadcast into the buffer silently
        raise ValueError(
            f"X must have shape (batch,) + {state.X.shape[1:]} (rows like the buffer's), "
            f"got {X.shape}"
        )
    if jnp.shape(y) != X.shape[:1]:
        raise ValueError(
            f"y must have shape ({X.shape[0]},) (one per row of X), got {jnp.shape(y)}"
        )
    y = jnp.asarray(y, state.y.dtype)
    idx = state.count + jnp.arange(X.shape[0])
    ok = jnp.isfinite(y) & (idx < capacity)
    yb = jnp.where(ok, y, -jnp.inf)
    i = jnp.argmax(yb)
    better = yb[i] > state.best_y
    return state._replace(
        X=state.X.at[idx].set(X, mode="drop"),
        y=state.y.at[idx].set(jnp.where(ok, y, 0), mode="drop"),
        observed=state.observed.at[idx].set(ok, mode="drop"),
        count=state.count + X.shape[0],
        round=state.round + 1,
        best_x=jnp.where(better, X[i], state.best_x),
        best_y=jnp.where(better, yb[i], state.best_y),
    )


def run_rounds(loop, objective: Callable, state, rounds: int):
    """``rounds`` ask/evaluate/tell rounds of a batch BO ``loop`` in one ``lax.scan``:
    ``(state, best_y after each round)``."""

    def body(state, _):
        X, state = loop.ask(state)
        state = loop.tell(state, X, objective(X))
        return state, state.best_y

    return jax.lax.scan(body, state, None, length=check_int("rounds", rounds, minimum=0))


def genbo(
    prior,
    *,
    utility: str = "ei",
    loss: str = "balanced_forward_kl",
    batch_size: int,
    rounds: int,
    n_initial: int,
    fit_steps: int = 100,
    minibatch: int | None = DEFAULT_MINIBATCH,
    learning_rate: float = 0.05,
    quantile: float = 0.9,
    eta: float = 1.0,
    flip: float = 0.1,
) -> GenBO:
    """The GenBO loop: ``prior`` ($p_0$, with ``log_prob``), a utility by name, a loss by name.

    The data buffer holds ``n_initial + rounds * batch_size`` points. ``quantile`` sets
    the annealed threshold $\\tau$ (the quantile of the values observed so far).
    ``minibatch``: observations per Adam step (default `DEFAULT_MINIBATCH` = 256), drawn
    uniformly from the buffer, an unbiased stochastic gradient of the full-buffer loss
    whose cost does not grow with the rounds (`GenBO.fit`); ``None`` fits on the whole
    buffer at every step.
    """
    if not callable(getattr(prior, "log_prob", None)):
        raise TypeError(
            f"prior must be a distribution with log_prob (e.g. UniformBox(lower, upper)), "
            f"got {type(prior).__name__}"
        )
    # a zero, negative or NaN step or temperature ran without error to a model that never
    # moved or turned NaN; flip = 1/2 divides the robust loss by 1 - 2 flip = 0
    for name, v in (("learning_rate", learning_rate), ("eta", eta)):
        if not np.isfinite(float(v)) or float(v) <= 0:
            raise ValueError(f"{name} must be positive and finite, got {v!r}")
    if not 0 <= float(flip) < 0.5:
        raise ValueError(f"flip must be in [0, 0.5), got {flip!r}")
    if utility not in _UTILITIES:
        raise ValueError(f"utility must be one of {sorted(_UTILITIES)}, got {utility!r}")
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {_LOSSES}, got {loss!r}")
    if utility == "value" and loss in ("forward_kl", "balanced_forward_kl"):
        raise ValueError("the KL losses need non-negative utilities: use pi, ei or soft_ei")
    for name, v in (
        ("batch_size", batch_size),
        ("rounds", rounds),
        ("n_initial", n_initial),
        ("fit_steps", fit_steps),
    ):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile!r}")
    if minibatch is not None and (
        isinstance(minibatch, bool) or not isinstance(minibatch, int | np.integer) or minibatch < 2
    ):
        raise ValueError(
            f"minibatch must be an int >= 2 or None (the full buffer), got {minibatch!r}"
        )
    return GenBO(
        prior,
        _UTILITIES[utility],
        loss,
        int(batch_size),
        int(n_initial + rounds * batch_size),
        int(fit_steps),
        None if minibatch is None else int(minibatch),
        float(learning_rate),
        float(quantile),
        float(eta),
        float(flip),
    )
