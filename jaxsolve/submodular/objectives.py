r"""Sums of concave over modular functions (SCMs) and their concave extension.

An SCM on the ground set $V = \{0, \dots, n-1\}$ is

$$f(S) = \sum_{i=1}^m w_i\, \phi_i\Big(\sum_{j \in S} M_{ij}\Big),$$

with $M \ge 0$ (an $m \times n$ matrix, dense or a `jax.experimental.sparse.BCOO`),
$w \ge 0$ and each $\phi_i$ concave, nondecreasing, $\phi_i(0) = 0$; $f$ is then
monotone submodular. Its concave extension on $[0, 1]^n$ is "a linear layer and a
concave activation",

$$F(x) = \sum_i w_i\, \phi_i\big((Mx)_i\big),$$

equal to $f$ on $0/1$ points and, by Jensen's inequality, at least the multilinear
extension. Its supergradient is $g(x) = M^\top\big(w \odot \phi'_+(Mx)\big)$ with the
right derivative $\phi'_+$ (so at the kink of $\min(z, c)$ it is $0$); by concavity
$F(y) \le F(x) + \langle g(x), y - x\rangle$ for every $y \ge 0$, which is what makes
the Frank-Wolfe gap of `jaxsolve.submodular.aapga` a certified bound.

The concave function is one of the built-ins `sqrt`, `log1p`, `coverage`
($1 - e^{-z}$) and `saturate` ($\min(z, c_i)$, with the per-row cap `cap`), or
any elementwise JAX callable wrapped by `concave(fn)`.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse
from jaxtyping import Array, Float

from jaxsolve.core.validation import check_not_half, is_concrete

# phi's concavity check on a grid and the relaxation's certified gap both need more
# than 16-bit precision (bfloat16 rounds a concave phi into a non-concave one)
_HALF_WHY = "phi's concavity check and the certified gap need float32 or float64"

__all__ = [
    "Concave",
    "SCM",
    "concave",
    "sqrt",
    "log1p",
    "coverage",
    "saturate",
    "probabilistic_coverage",
    "feature_based",
    "saturated_coverage",
]


# --- concave functions -------------------------------------------------------------------


class Concave:
    """A concave, nondecreasing $\\phi$ with $\\phi(0) = 0$ and its right derivative.

    `value(z, cap)` and `deriv(z, cap)` are elementwise; `cap` is the SCM's per-row
    parameter (used by `saturate` only). Instances compare by identity of their
    functions, so they are hashable static parts of an `SCM`.
    """

    __slots__ = ("name", "_value", "_deriv", "uses_cap")

    def __init__(self, name: str, value: Callable, deriv: Callable | None, uses_cap: bool = False):
        self.name = name
        self._value = value
        self._deriv = deriv
        self.uses_cap = uses_cap

    def value(self, z, cap):
        return self._value(z, cap) if self.uses_cap else self._value(z)

    def deriv(self, z, cap):
        if self._deriv is not None:
            return self._deriv(z, cap) if self.uses_cap else self._deriv(z)
        # elementwise function: the forward derivative along ones is phi'(z)
        return jax.jvp(lambda u: self.value(u, cap), (z,), (jnp.ones_like(z),))[1]

    def __eq__(self, other):
        return (
            isinstance(other, Concave)
            and self.name == other.name
            and self._value is other._value
            and self._deriv is other._deriv
            and self.uses_cap == other.uses_cap
        )

    def __hash__(self):
        return hash((self.name, id(self._value), id(self._deriv)))

    @property
    def fn(self) -> Callable:
        return self._value

    def __repr__(self):
        return f"Concave({self.name})"


def _sqrt_deriv(z):
    # sqrt'(0+) = +inf: the derivative is taken at max(z, eps) (at most 0.5/sqrt(eps)),
    # so that M^T (w * phi') stays finite on a row with z = 0 and the line search can
    # still bound the curvature; elsewhere it is the exact derivative
    eps = jnp.finfo(jnp.result_type(z)).eps
    return 0.5 / jnp.sqrt(jnp.maximum(z, eps))


sqrt = Concave("sqrt", lambda z: jnp.sqrt(jnp.maximum(z, 0)), _sqrt_deriv)
log1p = Concave("log1p", jnp.log1p, lambda z: 1 / (1 + z))
coverage = Concave("coverage", lambda z: -jnp.expm1(-z), lambda z: jnp.exp(-z))
saturate = Concave(
    "saturate",
    lambda z, c: jnp.minimum(z, c),
    lambda z, c: (z < c).astype(jnp.result_type(z)),  # right derivative: 0 at the kink
    uses_cap=True,
)


def concave(fn: Callable, name: str | None = None) -> Concave:
    """Wrap an elementwise JAX function `fn(z)` as a concave $\\phi$.

    The derivative is JAX's (`jax.jvp`); at a kink that is JAX's convention, not
    necessarily the right derivative, so write kinked functions as built-ins or
    check `SCM.supergradient` there. Concavity, monotonicity and $\\phi(0) = 0$ are
    checked on a grid when an `SCM` is built.
    """
    if isinstance(fn, Concave):
        return fn
    if not callable(fn):
        raise TypeError(f"phi must be callable phi(z) or a Concave, got {type(fn).__name__}")
    return Concave(name or getattr(fn, "__name__", "user"), fn, None)


_NAMED = {"sqrt": sqrt, "log1p": log1p, "coverage": coverage, "saturate": saturate}


def _as_concave(phi) -> Concave:
    if isinstance(phi, str):
        if phi not in _NAMED:
            raise ValueError(f"phi must be one of {sorted(_NAMED)} or a callable, got {phi!r}")
        return _NAMED[phi]
    return concave(phi)


def _check_phi(phi: Concave, zmax: float, cap, dtype) -> None:
    """phi(0) = 0, nondecreasing and concave on a grid of [0, zmax] (before tracing)."""
    if not is_concrete(cap):
        return
    zmax = max(float(zmax), 1.0)
    z = jnp.linspace(0.0, zmax, 257, dtype=dtype)
    capv = jnp.asarray(cap, dtype)
    capv = jnp.max(capv) if capv.ndim else capv  # one cap (the largest) for the grid
    try:
        v = np.asarray(phi.value(z, capv), np.float64)
    except Exception as err:  # noqa: BLE001 - a user function that does not take arrays
        raise TypeError(f"phi must map an array of z to an array, failed with {err}") from None
    if v.shape != z.shape:
        raise ValueError(f"phi must be elementwise (shape {z.shape} in), got shape {v.shape} out")
    scale = max(1.0, float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0)))
    tol = 1e-6 * scale
    if not np.all(np.isfinite(v)):
        raise ValueError(f"phi ({phi.name}) is not finite on [0, {zmax:g}]")
    if abs(v[0]) > tol:
        raise ValueError(f"phi must satisfy phi(0) = 0, got phi(0) = {v[0]:.3g} ({phi.name})")
    dv = np.diff(v)
    if np.any(dv < -tol):
        raise ValueError(f"phi must be nondecreasing on [0, {zmax:g}] ({phi.name} decreases)")
    if np.any(np.diff(dv) > tol):
        raise ValueError(f"phi must be concave on [0, {zmax:g}] ({phi.name} is not)")


# --- the objective ---------------------------------------------------------------------------


def _nonneg_finite(name: str, a) -> None:
    if not is_concrete(a):
        return
    arr = np.asarray(a)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} contains NaN")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative (an SCM needs M >= 0, w >= 0)")


def _real(a) -> bool:
    dtype = jnp.result_type(a)
    return bool(jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating))


def _check_items(name: str, x, n: int) -> None:
    """A point or set over the ground set must be a vector of length n (static check)."""
    if jnp.shape(x) != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one entry per item), got {jnp.shape(x)}")


class SCM(eqx.Module):
    r"""$f(S) = \sum_i w_i \phi((MS)_i)$: a sum of concave over modular functions (a pytree).

    Build with `SCM.create(M, weights, phi, cap=None)` (validated), or the constructors
    `probabilistic_coverage`, `feature_based`, `saturated_coverage`. The arrays are
    leaves (an `SCM` goes in `args`, so it is vmapped and differentiated like data);
    `phi` is static.

    Attributes:
        M: $m \times n$ non-negative matrix (dense or `BCOO`); column $j$ is item $j$.
        weights: $w \ge 0$, shape `(m,)`.
        cap: per-row parameter of `phi` (the saturation level of `saturate`), `(m,)`.
        phi: the concave function (a `Concave`), static.
        columns: for a `BCOO` `M`, its columns padded to one length, `(rows, values)`
            of shape `(n, p)` (built by `create`; padding rows are `m`, out of range,
            with value 0). What $M^\top u$ (the supergradient), the per-item loops of
            the derandomized rounding and lazy/stochastic greedy read: a gather and a
            row sum instead of the scatter of a `BCOO` transpose product. It is a copy
            of `M`'s values, so differentiate `extension` (which reads `M`), not
            `supergradient`, with respect to `M`. None for dense `M`.
        row_width: static; set by `create` when it stored a `BCOO` `M` row by row,
            every row padded to this width (padding: column `n`, out of range as JAX
            pads a `BCOO`, value 0). Then $Mx$ is a gather and a row sum over
            `M.data` itself (2-3x faster than the `BCOO` product on CPU, which
            scatters); `create` keeps the plain layout when padding would more than
            double the stored entries (a few very long rows).
    """

    M: Float[Array, "m n"] | sparse.BCOO
    weights: Float[Array, " m"]
    cap: Float[Array, " m"]
    phi: Concave = eqx.field(static=True)
    columns: tuple | None = None
    row_width: int | None = eqx.field(static=True, default=None)

    @classmethod
    def create(cls, M, weights=None, phi="coverage", cap=None) -> SCM:
        """Validated constructor (errors name the argument); see the class docstring."""
        phi = _as_concave(phi)
        if isinstance(M, sparse.BCOO):
            if M.ndim != 2 or M.n_sparse != 2:
                raise ValueError(f"M must be a 2-d BCOO matrix, got shape {M.shape}")
            if not jnp.issubdtype(M.dtype, jnp.floating):
                raise TypeError(f"M must be floating point, got dtype {M.dtype}")
            _nonneg_finite("M", M.data)
            if is_concrete((M.indices, M.data)) and M.nse:
                # JAX pads a BCOO with out-of-range indices and zero data; an out-of-range
                # entry that holds a value would be dropped or clamped silently
                idx, val = np.asarray(M.indices), np.asarray(M.data)
                out = np.any((idx < 0) | (idx >= np.asarray(M.shape)), axis=1)
                if np.any(out & (val != 0)):
                    raise ValueError(
                        f"M's indices must lie inside its shape {M.shape} (a nonzero entry "
                        "out of range would be dropped or clamped silently)"
                    )
            dtype = M.dtype
            rowmax = (
                np.asarray(
                    jax.ops.segment_sum(M.data, M.indices[:, 0], M.shape[0]) if M.nse else [0.0]
                )
                if is_concrete(M.data)
                else None
            )
        else:
            M = jnp.asarray(M)
            if M.ndim != 2:
                raise ValueError(f"M must be a matrix (m, n), got shape {M.shape}")
            if not jnp.issubdtype(M.dtype, jnp.floating):
                raise TypeError(f"M must be floating point, got dtype {M.dtype}")
            _nonneg_finite("M", M)
            dtype = M.dtype
            rowmax = np.asarray(jnp.sum(M, axis=1)) if is_concrete(M) else None
        check_not_half("M", M.data if isinstance(M, sparse.BCOO) else M, _HALF_WHY)
        m, n = M.shape
        if m == 0 or n == 0:
            raise ValueError(f"M must be non-empty, got shape {M.shape}")
        if weights is not None and not _real(weights):
            raise TypeError(f"weights must be real, got dtype {jnp.result_type(weights)}")
        weights = jnp.ones(m, dtype) if weights is None else jnp.asarray(weights, dtype)
        if weights.shape != (m,):
            raise ValueError(
                f"weights must have shape ({m},) (one per row of M), got {weights.shape}"
            )
        _nonneg_finite("weights", weights)
        if cap is None:
            if phi.uses_cap:
                raise ValueError(f"phi {phi.name} needs cap (the saturation level per row)")
            cap = jnp.ones(m, dtype)
        if not _real(cap):
            raise TypeError(f"cap must be real, got dtype {jnp.result_type(cap)}")
        if jnp.shape(cap) not in ((), (m,)):
            raise ValueError(
                f"cap must be a scalar or have shape ({m},) (one per row of M), "
                f"got {jnp.shape(cap)}"
            )
        cap = jnp.broadcast_to(jnp.asarray(cap, dtype), (m,))
        _nonneg_finite("cap", cap)
        zmax = float(np.max(rowmax)) if rowmax is not None and rowmax.size else 1.0
        _check_phi(phi, zmax, cap, dtype)
        columns = width = None
        if isinstance(M, sparse.BCOO) and is_concrete((M.indices, M.data)):
            M = M.sum_duplicates() if M.nse else M
            columns = _padded_columns(M)
            M, width = _row_layout(M)
        return cls(M, weights, cap, phi, columns, width)

    @property
    def sparse(self) -> bool:
        return isinstance(self.M, sparse.BCOO)

    def column(self, j) -> Float[Array, " m"]:
        """Column $j$ of $M$ as a dense vector."""
        if isinstance(self.M, sparse.BCOO):
            rows, vals = self._columns()
            return jnp.zeros(self.weights.shape, vals.dtype).at[rows[j]].add(vals[j], mode="drop")
        return self.M[:, j]

    def _columns(self):
        if self.columns is None:
            raise ValueError(
                "this sparse SCM has no column index: build it with SCM.create "
                "(outside jit) for lazy/stochastic greedy and the derandomized rounding"
            )
        return self.columns

    def gains(self, z, idx) -> Float[Array, " s"]:
        """Marginal gains $f(S \\cup \\{j\\}) - f(S)$ of the items `idx` at $z = M 1_S$."""
        base = self.phi.value(z, self.cap)
        if isinstance(self.M, sparse.BCOO):
            rows, vals = self._columns()
            r, v = rows[idx], vals[idx]  # (s, p); padding (row m, clamped) adds 0: no gain
            d = self.phi.value(z[r] + v, self.cap[r]) - base[r]
            return jnp.sum(self.weights[r] * d, axis=1)
        cols = self.M[:, idx]
        return self.weights @ (self.phi.value(z[:, None] + cols, self.cap[:, None]) - base[:, None])

    @property
    def n(self) -> int:
        """Size of the ground set."""
        return self.M.shape[1]

    def modular(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        """$z = Mx$, the modular part."""
        x = x.astype(self.weights.dtype)
        if self.row_width is not None:  # rows padded to one width: gather, row sum
            shape = (self.weights.shape[0], self.row_width)
            cols = self.M.indices[:, 1].reshape(shape)
            return _gather_dot(self.M.data.reshape(shape), x, cols)
        return self.M @ x

    def value_from_z(self, z):
        r"""$\sum_i w_i \phi(z_i)$ at $z = Mx$ (the value `grad_from_z` differentiates)."""
        # dot products rather than sum/vdot: batch-invariant rounding, so a vmapped solve
        # follows the same iterates as a single one
        return jnp.dot(self.weights, self.phi.value(z, self.cap))

    def extension(self, x: Float[Array, " n"]) -> Float[Array, ""]:
        r"""The concave extension $F(x) = \sum_i w_i \phi((Mx)_i)$ ($= f$ on 0/1 points)."""
        _check_items("x", x, self.n)
        return self.value_from_z(self.modular(x))

    def value(self, S) -> Float[Array, ""]:
        """$f(S)$ for a 0/1 or boolean indicator vector `S` of shape `(n,)` (checked;
        a concrete `S` with another entry is refused: it returned the extension $F(S)$,
        which is not a set's value; call `extension` for fractional points)."""
        _check_items("S", S, self.n)
        if is_concrete(S):
            v = np.asarray(S)
            if not np.all((v == 0) | (v == 1)):
                raise ValueError(
                    "S must be a 0/1 (or boolean) indicator of a set; for a fractional "
                    "point x call f.extension(x)"
                )
        return self.extension(jnp.asarray(S).astype(self.weights.dtype))

    def supergradient(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        r"""$g(x) = M^\top(w \odot \phi'_+(Mx))$: the supergradient with right derivatives."""
        return self.value_and_supergradient(x)[1]

    def value_and_supergradient(self, x):
        """`(F(x), g(x))` sharing the one product $Mx$."""
        _check_items("x", x, self.n)
        z = self.modular(x)
        return self.value_from_z(z), self.grad_from_z(z)

    def grad_from_z(self, z):
        """$M^\\top(w \\odot \\phi'_+(z))$ for a known $z = Mx$."""
        u = self.weights * self.phi.deriv(z, self.cap)
        if self.columns is not None:  # gather and row sum: no scatter
            rows, vals = self.columns
            return _gather_dot(vals, u, rows)
        if isinstance(self.M, sparse.BCOO):
            return self.M.T @ u
        return u @ self.M

    def singleton_values(self) -> Float[Array, " n"]:
        """$f(\\{j\\})$ for every item $j$ (one pass over $M$)."""
        if self.columns is not None:  # per column: gathers, not the scatter below (~5x faster)
            rows, vals = self.columns
            w = jnp.take(self.weights, rows, mode="fill", fill_value=0)  # padding: weight 0
            cap = jnp.take(self.cap, rows, mode="fill", fill_value=1)
            return jnp.sum(w * self.phi.value(vals, cap), axis=1)
        if isinstance(self.M, sparse.BCOO):
            rows, cols = self.M.indices[:, 0], self.M.indices[:, 1]
            vals = self.weights[rows] * self.phi.value(self.M.data, self.cap[rows])
            return jax.ops.segment_sum(vals, cols, self.n)
        return self.weights @ self.phi.value(self.M, self.cap[:, None])


def _gather_dot(vals, u, idx):
    r"""Row sums of ``vals * u[idx]`` (``idx`` out of range: 0), the padded-layout product.

    ``u`` is materialized first: otherwise XLA fuses the computation of ``u`` (e.g.
    $w \odot \phi'(z)$, an exp) into the gather's fusion and recomputes it for every
    one of the ``vals.size`` gathered entries instead of once per entry of ``u`` (n =
    5000 ER, 400k entries, inside the solver's loop: the supergradient took ~1.2 ms,
    ~0.55 ms materialized). `jax.lax.optimization_barrier` does not stop this fusion on
    CPU (XLA drops the barrier before fusing); a reduction is never fused into a
    gather, so ``u`` goes through one: the exact sum ``u + 0`` over a trailing axis of
    two.
    """
    u = jnp.sum(jnp.stack([u, jnp.zeros_like(u)], axis=-1), axis=-1)
    return jnp.sum(vals * jnp.take(u, idx, mode="fill", fill_value=0), axis=1)


def _padded(key, other, vals, size: int, fill: int):
    """Entries grouped by `key` (stable), each group padded to the longest: `(other,
    values)` of shape `(size, width)`, padding `other = fill` and value 0."""
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=size)
    width = max(int(counts.max(initial=0)), 1)
    start = np.cumsum(counts) - counts
    slot = np.arange(len(key)) - np.repeat(start, counts)
    O = np.full((size, width), fill, np.int32)
    V = np.zeros((size, width), vals.dtype)
    O[key[order], slot] = other[order]
    V[key[order], slot] = vals[order]
    return O, V


def _entries(M: sparse.BCOO):
    """(rows, cols, values) of a BCOO's stored entries, its in-range ones only."""
    idx, vals = np.asarray(M.indices), np.asarray(M.data)
    keep = np.all((idx >= 0) & (idx < np.asarray(M.shape)), axis=1)
    return idx[keep, 0], idx[keep, 1], vals[keep]


def _padded_columns(M: sparse.BCOO):
    """The columns of a (duplicate-free) BCOO matrix as (rows, values), each (n, p);
    padding rows are `m` (out of range), values 0."""
    rows, cols, vals = _entries(M)
    R, V = _padded(cols, rows, vals, M.shape[1], M.shape[0])
    return jnp.asarray(R), jnp.asarray(V)


def _row_layout(M: sparse.BCOO):
    """`(M', width)`: the same matrix with its entries stored row by row, each row padded
    to `width` (see `SCM.row_width`); `(M, None)` when the padding would more than
    double the stored entries."""
    rows, cols, vals = _entries(M)
    m, n = M.shape
    width = max(int(np.bincount(rows, minlength=m).max(initial=0)), 1)
    if m * width > 2 * len(vals) + m:
        return M, None
    C, V = _padded(rows, cols, vals, m, n)
    indices = np.stack([np.repeat(np.arange(m, dtype=np.int32), width), C.ravel()], axis=1)
    return sparse.BCOO((jnp.asarray(V.ravel()), jnp.asarray(indices)), shape=M.shape), width


def _scm(M, weights, phi, cap=None) -> SCM:
    return SCM.create(M, weights, phi, cap)


def probabilistic_coverage(
    graph_probs: Float[Array, "n t"] | sparse.BCOO, weights: Float[Array, " t"] | None = None
) -> SCM:
    r"""Probabilistic coverage $f(S) = \sum_v w_v\big(1 - \prod_{u \in S}(1 - p_{uv})\big)$.

    With $M_{vu} = -\log(1 - p_{uv})$ this is the SCM $\sum_v w_v (1 - e^{-(MS)_v})$
    (`phi = coverage`). `graph_probs[u, v]` is the probability that item `u` covers
    target `v` (in $[0, 1)$; dense or `BCOO`); `weights` default to ones.
    """
    if isinstance(graph_probs, sparse.BCOO):
        _prob_check(graph_probs.data)
        data = -jnp.log1p(-graph_probs.data)
        M = sparse.BCOO((data, graph_probs.indices), shape=graph_probs.shape).T
    else:
        P = jnp.asarray(graph_probs)
        if P.ndim != 2:
            raise ValueError(f"graph_probs must be a matrix (items, targets), got shape {P.shape}")
        if 0 in P.shape:
            raise ValueError(f"graph_probs must be non-empty, got shape {P.shape}")
        if not jnp.issubdtype(P.dtype, jnp.floating):
            raise TypeError(f"graph_probs must be floating point, got dtype {P.dtype}")
        _prob_check(P)
        M = -jnp.log1p(-P).T
    return _scm(M, weights, coverage)


def _prob_check(P) -> None:
    if not is_concrete(P):
        return
    arr = np.asarray(P)
    if np.any(np.isnan(arr)):
        raise ValueError("graph_probs contains NaN")
    if np.any(arr < 0) or np.any(arr >= 1):
        raise ValueError("graph_probs must hold probabilities in [0, 1)")


def feature_based(
    X: Float[Array, "n d"], phi="sqrt", weights: Float[Array, " d"] | None = None
) -> SCM:
    r"""Feature-based function $f(S) = \sum_d w_d\, \phi\big(\sum_{j \in S} X_{jd}\big)$.

    `X` holds one non-negative feature row per item (apricot's and submodlib's
    FeatureBased, without their rescaling); `phi` a built-in name or callable.
    """
    X = jnp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a matrix (items, features), got shape {X.shape}")
    if 0 in X.shape:
        raise ValueError(f"X must be non-empty, got shape {X.shape}")
    if not jnp.issubdtype(X.dtype, jnp.floating):
        raise TypeError(f"X must be floating point, got dtype {X.dtype}")
    _nonneg_finite("X", X)
    return _scm(X.T, weights, phi)


def saturated_coverage(
    similarity: Float[Array, "n t"], cap: float | Float[Array, " t"], weights=None
) -> SCM:
    r"""Saturated coverage $f(S) = \sum_v w_v \min\big(\sum_{u \in S} s_{uv}, c_v\big)$.

    The SCM member of the facility-location family (apricot's SaturatedCoverage):
    `similarity[u, v] >= 0` is how much item `u` covers target `v`.
    """
    S = jnp.asarray(similarity)
    if S.ndim != 2:
        raise ValueError(f"similarity must be a matrix (items, targets), got shape {S.shape}")
    if 0 in S.shape:
        raise ValueError(f"similarity must be non-empty, got shape {S.shape}")
    if not jnp.issubdtype(S.dtype, jnp.floating):
        raise TypeError(f"similarity must be floating point, got dtype {S.dtype}")
    _nonneg_finite("similarity", S)
    return _scm(S.T, weights, saturate, cap)
