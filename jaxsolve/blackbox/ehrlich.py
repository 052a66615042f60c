r"""Ehrlich functions: closed-form test functions for discrete sequence design, in JAX.

Stanton, Alberstein, Frey, Watkins, Cho, "Closed-Form Test Functions for Biophysical
Sequence Design" (arXiv 2407.00236, 2024); the reference implementation is
pytorch-holo's ``holo.test_functions.closed_form.Ehrlich``, whose definition this
module follows term for term (its construction, not its random numbers: see below).

A sequence $x \in \{0, \dots, v-1\}^L$ is *feasible* when every transition
$x_{t-1} \to x_t$ has positive probability under a sparse ergodic transition matrix
$A$ (a discrete Markov process, DMP; the first state is uniform). The function has
$c$ motifs $a^{(i)} \in \{0..v-1\}^k$ with spacings $s^{(i)} \in \mathbb{N}^{k-1}$
(offsets $o^{(i)} = (0, s_1, s_1 + s_2, \dots)$). Motif $i$'s presence is the best
fraction of its elements found at some position $l$,

$$
h_i(x) = \max_{l} \frac{1}{k} \sum_{j=1}^{k} 1[x_{l + o^{(i)}_j} = a^{(i)}_j],
$$

quantized to $q$ levels ($f_1 = \lceil k/q \rceil$, $f_2 = k / f_1$:
$\lfloor k h_i / f_1 \rfloor / f_2$), passed through the epistatic response
$r(h) = h\,(1 + \epsilon\, h (h - 1))$, and

$$
f(x) = \prod_{i=1}^{c} r(h_i(x)) \text{ if } x \text{ is feasible, else } -\infty,
$$

so $f \in [0, 1]$ on feasible sequences with optimum 1, reached by
`Ehrlich.optimal_solution`. Maximization.

**Construction** (`ehrlich`) follows pytorch-holo's recipe with ``jax.random`` in place
of torch's generator: row-wise softmax of Gaussian logits at temperature 0.5, masked to
a band of half-width $\lfloor 0.4 v \rfloor$ (wrapping) whose rows are shuffled, with the
diagonal kept (repeats always possible), renormalized and checked ergodic ($A^m > 0$,
$m = (v-1)^2 + 1$); the motifs are one DMP sample of length $c k$ from the stationary
distribution, cut into $c$ pieces (so a sequence holding all motifs exists); each
spacing is $1 + \lfloor \lfloor (L - ck)/c \rfloor w \rfloor$ with $w$ uniform on the
simplex. The same seed therefore gives a different instance than holo's (the random
streams differ); `Ehrlich.from_holo` imports holo's exact instance, on which the values
are equal (checked in ``bench/genbo.py --holo`` and ``tests/blackbox/test_ehrlich.py``
when pytorch-holo is installed).
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_key

__all__ = ["Ehrlich", "ehrlich"]


class Ehrlich(eqx.Module):
    """An Ehrlich function (module docstring); call it on int sequences ``(..., dim)``.

    Attributes:
        transition_matrix: ``(num_states, num_states)`` the DMP's transition matrix $A$
            (rows sum to one); a zero entry makes the transition infeasible.
        motifs: int32 ``(num_motifs, motif_length)``, the motifs $a^{(i)}$.
        spacings: int32 ``(num_motifs, motif_length - 1)``, the gaps $s^{(i)}$ between
            a motif's consecutive elements (each at least 1).
        dim: the sequence length $L$ (static).
        quantization: the number of levels $q$ of a motif's presence (static).
        epistasis_factor: $\\epsilon$ of the response $r(h) = h(1 + \\epsilon h (h-1))$.
    """

    transition_matrix: jax.Array
    motifs: jax.Array
    spacings: jax.Array
    dim: int = eqx.field(static=True)
    quantization: int = eqx.field(static=True)
    epistasis_factor: float = eqx.field(static=True)

    @property
    def num_states(self) -> int:
        """The alphabet size $v$."""
        return self.transition_matrix.shape[0]

    def presence(self, x) -> jax.Array:
        """The quantized presence $h_i(x)$ of each motif, ``(..., num_motifs)``."""
        x = jnp.asarray(x)
        L = x.shape[-1]
        k = self.motifs.shape[1]
        offsets = jnp.concatenate(
            [jnp.zeros((self.spacings.shape[0], 1), jnp.int32), jnp.cumsum(self.spacings, 1)], 1
        )  # (c, k)
        starts = jnp.arange(L)
        idx = starts[None, :, None] + offsets[:, None, :]  # (c, L, k)
        valid = idx[..., -1] < L  # positions where the whole motif fits
        gathered = jnp.take(x, jnp.minimum(idx, L - 1), axis=-1)  # (..., c, L, k)
        hits = jnp.sum(gathered == self.motifs[:, None, :], axis=-1)  # (..., c, L)
        count = jnp.max(jnp.where(valid, hits, 0), axis=-1)  # (..., c)
        f1 = math.ceil(k / self.quantization)
        f2 = k / f1
        return jnp.floor(count / f1) / f2

    def feasible(self, x) -> jax.Array:
        """Whether every transition of ``x`` has positive probability, ``(...,)``."""
        x = jnp.asarray(x)
        return jnp.all(self.transition_matrix[x[..., :-1], x[..., 1:]] > 0, axis=-1)

    def __call__(self, x) -> jax.Array:
        """$f(x)$ (``-inf`` where infeasible), ``(...,)`` in the matrix's dtype."""
        h = self.presence(x).astype(self.transition_matrix.dtype)
        r = h * (self.epistasis_factor * h * (h - 1.0) + 1.0)
        return jnp.where(self.feasible(x), jnp.prod(r, axis=-1), -jnp.inf)

    def optimal_solution(self) -> np.ndarray:
        """A sequence with $f = 1$: the motifs laid out one after another at their
        spacings, each gap filled by repeating the previous element, the tail by the last
        one (feasible: repeats and the motifs' own transitions have positive probability)."""
        motifs, spacings = np.asarray(self.motifs), np.asarray(self.spacings)
        out = []
        for motif, spacing in zip(motifs, spacings, strict=True):
            for element, gap in zip(motif, np.append(spacing, 1), strict=True):
                out += [int(element)] * int(gap)
        out = out[: self.dim]
        out += [out[-1]] * (self.dim - len(out))
        return np.asarray(out, np.int32)

    def stationary_distribution(self) -> jax.Array:
        r"""The DMP's stationary distribution $\pi = \pi A$, $\sum \pi = 1$ (least squares;
        traceable, so `initial_solution` runs under ``jit``/``vmap`` over instances)."""
        A = self.transition_matrix
        n = A.shape[0]
        M = jnp.concatenate([(jnp.eye(n, dtype=A.dtype) - A).T, jnp.ones((1, n), A.dtype)])
        b = jnp.zeros(n + 1, A.dtype).at[-1].set(1.0)
        pi = jnp.maximum(jnp.linalg.lstsq(M, b)[0], 0)
        return pi / pi.sum()

    def initial_solution(self, key, n: int) -> jax.Array:
        """``n`` feasible sequences ``(n, dim)`` drawn from the DMP (stationary start):
        the usual initial designs for an optimizer."""
        check_key("key", key)
        return _sample_dmp(key, self.stationary_distribution(), self.transition_matrix, self.dim, n)

    def random_solution(self, key, n: int) -> jax.Array:
        """``n`` uniform sequences ``(n, dim)`` (mostly infeasible for long sequences)."""
        check_key("key", key)
        return jax.random.randint(key, (n, self.dim), 0, self.num_states, jnp.int32)

    @classmethod
    def from_holo(cls, fn: Any, dtype=jnp.float64) -> Ehrlich:
        """The same instance as a pytorch-holo ``Ehrlich`` object ``fn`` (its transition
        matrix, motifs, spacings, quantization and epistasis read off; nothing imported)."""
        motifs = np.stack([np.asarray(m.cpu().numpy()) for m in fn.motifs])
        spacings = np.stack([np.asarray(s.cpu().numpy()) for s in fn.spacings])
        q = fn._quantization if fn._quantization is not None else motifs.shape[1]
        return cls(
            jnp.asarray(fn.transition_matrix.cpu().numpy(), dtype),
            jnp.asarray(motifs, jnp.int32),
            jnp.asarray(spacings, jnp.int32),
            int(fn.dim),
            int(q),
            float(fn._epistasis_factor),
        )


def _sample_dmp(key, initial, transition, length: int, n: int) -> jax.Array:
    """``n`` DMP sequences of ``length`` states: first from ``initial``, then row by row."""
    log_t = jnp.log(jnp.asarray(transition))
    k0, k1 = jax.random.split(key)
    x0 = jax.random.categorical(k0, jnp.log(jnp.asarray(initial)), shape=(n,))

    def step(x, k):
        nxt = jax.random.categorical(k, log_t[x])
        return nxt, nxt

    _, rest = jax.lax.scan(step, x0, jax.random.split(k1, length - 1))
    return jnp.concatenate([x0[:, None], rest.T], axis=1).astype(jnp.int32)


def _transition_matrix(key, v: int, dtype) -> np.ndarray | None:
    """One draw of the sparse transition matrix (module docstring); None if not ergodic."""
    k1, k2 = jax.random.split(key)
    logits = np.asarray(jax.random.normal(k1, (v, v), jnp.float64)) / 0.5
    dense = np.exp(logits - logits.max(1, keepdims=True))
    dense /= dense.sum(1, keepdims=True)
    band = int(v * 0.4)
    mask = np.zeros((v, v), bool)
    for i in range(v):
        mask[i, [j % v for j in range(i - band, i + band + 1)]] = True
    mask = mask[np.asarray(jax.random.permutation(k2, v))] | np.eye(v, dtype=bool)
    A = np.where(mask, dense, 0.0)
    A /= A.sum(1, keepdims=True)
    power = np.linalg.matrix_power(A, (v - 1) ** 2 + 1)
    return A.astype(dtype) if np.all(power > 0) else None


def ehrlich(
    key,
    num_states: int = 32,
    dim: int = 32,
    num_motifs: int = 2,
    motif_length: int = 4,
    *,
    quantization: int | None = None,
    epistasis_factor: float = 0.0,
    dtype=jnp.float64,
) -> Ehrlich:
    """A random Ehrlich function (module docstring), by pytorch-holo's recipe.

    Defaults are the paper's standard setting (32 states, length 32, 2 motifs of length 4);
    ``quantization`` defaults to ``motif_length`` (no quantization). Raises ``ValueError``
    when the motifs cannot all fit (``dim < num_motifs * motif_length``), on a
    quantization outside ``1..motif_length`` or a non-positive size; an ergodic matrix is
    redrawn (at most 100 times) if a draw is not.
    """
    check_key("key", key)
    for name, val in (
        ("num_states", num_states),
        ("dim", dim),
        ("num_motifs", num_motifs),
        ("motif_length", motif_length),
    ):
        if isinstance(val, bool) or not isinstance(val, int | np.integer) or val < 1:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    if motif_length < 2:
        raise ValueError(f"motif_length must be at least 2, got {motif_length}")
    q = motif_length if quantization is None else quantization
    if isinstance(q, bool) or not isinstance(q, int | np.integer) or not 1 <= q <= motif_length:
        raise ValueError(f"quantization must be an int in 1..motif_length, got {quantization!r}")
    slack = dim - num_motifs * motif_length
    if slack < 0:
        raise ValueError(
            f"dim={dim} cannot hold {num_motifs} motifs of length {motif_length}: "
            "a sequence with every motif would not exist"
        )
    if not np.isfinite(epistasis_factor):
        raise ValueError(f"epistasis_factor must be finite, got {epistasis_factor!r}")
    k_mat, k_motif, k_space = jax.random.split(key, 3)
    for attempt in range(100):
        A = _transition_matrix(jax.random.fold_in(k_mat, attempt), num_states, np.float64)
        if A is not None:
            break
    else:  # pragma: no cover - the diagonal makes a non-ergodic draw rare
        raise RuntimeError("no ergodic transition matrix in 100 draws")
    proto = Ehrlich(
        jnp.asarray(A, dtype),
        jnp.zeros((num_motifs, motif_length), jnp.int32),
        jnp.ones((num_motifs, motif_length - 1), jnp.int32),
        int(dim),
        int(q),
        float(epistasis_factor),
    )
    chain = _sample_dmp(k_motif, proto.stationary_distribution(), A, num_motifs * motif_length, 1)[
        0
    ]
    motifs = chain.reshape(num_motifs, motif_length)
    w = jax.random.uniform(k_space, (num_motifs, motif_length - 1), jnp.float64)
    w = w / w.sum(1, keepdims=True)
    spacings = 1 + jnp.floor((slack // num_motifs) * w).astype(jnp.int32)
    return Ehrlich(
        proto.transition_matrix, motifs, spacings, int(dim), int(q), float(epistasis_factor)
    )
