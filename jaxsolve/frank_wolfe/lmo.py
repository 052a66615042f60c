r"""Linear minimization oracles (LMOs): $g \mapsto \arg\min_{v \in C} \langle g, v\rangle$.

Every factory here returns an `LMO`, a callable ``lmo(g) -> v`` that is pure
JAX (``jit``/``vmap``-able; ``v`` has ``g``'s shape and dtype) and hashable by value,
so it can be a static option of a solver (building the same oracle twice does not
recompile). The sets follow FrankWolfe.jl's catalogue (Besançon, Carderera, Pokutta,
"FrankWolfe.jl", INFORMS J. Computing 2022); ties are broken by the first index.

Vector sets act on ``g`` flattened (any shape; ``v`` is reshaped back). Matrix sets
(`nuclear_ball`, `spectraplex`) need a 2-D ``g``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "LMO",
    "probability_simplex",
    "unit_simplex",
    "l1_ball",
    "l2_ball",
    "linf_ball",
    "box",
    "k_sparse",
    "hypersimplex",
    "nuclear_ball",
    "spectraplex",
    "knapsack",
    "product",
]


def _key(v):
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.str, v.tobytes())
    return v


class LMO:
    """A linear minimization oracle ``g -> argmin_{v in C} <g, v>``.

    Attributes:
        name: the set's name.
        polytope: True when ``C`` has finitely many vertices and the oracle returns
            one of them (away-step and pairwise Frank-Wolfe need this).
        params: the set's parameters (Python scalars or NumPy arrays).
    """

    __slots__ = ("name", "polytope", "params", "_fn", "_hash", "__weakref__")

    def __init__(self, name: str, fn: Callable, *, polytope: bool, **params):
        self.name = name
        self.polytope = polytope
        self.params = params
        self._fn = fn
        self._hash = hash((name, fn, tuple(sorted((k, _key(v)) for k, v in params.items()))))

    def __call__(self, g):
        return self._fn(g, **self.params)

    def violation(self, x):
        """How far ``x`` is outside ``C`` (0 inside; a real scalar), or ``None`` for a
        set without a membership test (a user-built LMO)."""
        fn = _VIOLATIONS.get(self.name)
        return None if fn is None else fn(x, **self.params)

    def __eq__(self, other):
        if not isinstance(other, LMO) or self.name != other.name or self._fn is not other._fn:
            return False
        if self.params.keys() != other.params.keys():
            return False
        return all(_key(self.params[k]) == _key(other.params[k]) for k in self.params)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        shown = {
            k: (v if not isinstance(v, np.ndarray) else f"array{v.shape}")
            for k, v in self.params.items()
        }
        return f"LMO({self.name}, {shown})"


def _radius(name, value):
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return value


def _count(name, value):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _flat(g):
    g = jnp.asarray(g)
    return g.reshape(-1), g.shape


# ---------------------------------------------------------------- vector sets


def _vertex(g, i, value):
    """``value * e_i`` shaped like ``g``: the vertex returned by the simplex and l1 LMOs."""
    flat, shape = _flat(g)
    return jnp.zeros_like(flat).at[i].set(jnp.asarray(value, flat.dtype)).reshape(shape)


def _simplex(g, *, radius):
    flat, _ = _flat(g)
    return _vertex(g, jnp.argmin(flat), radius)


def probability_simplex(radius: float = 1.0) -> LMO:
    r"""$\{v \ge 0, \sum_i v_i = \tau\}$: $\tau e_{i^\star}$ with $i^\star = \arg\min_i g_i$."""
    return LMO("probability_simplex", _simplex, polytope=True, radius=_radius("radius", radius))


def _unit_simplex(g, *, radius):
    flat, _ = _flat(g)
    i = jnp.argmin(flat)
    return _vertex(g, i, jnp.where(flat[i] < 0, radius, 0.0))


def unit_simplex(radius: float = 1.0) -> LMO:
    r"""$\{v \ge 0, \sum_i v_i \le \tau\}$: $\tau e_{i^\star}$ if $\min_i g_i < 0$, else 0."""
    return LMO("unit_simplex", _unit_simplex, polytope=True, radius=_radius("radius", radius))


def _l1(g, *, radius):
    flat, _ = _flat(g)
    i = jnp.argmax(jnp.abs(flat))
    return _vertex(g, i, jnp.where(flat[i] > 0, -radius, radius))


def l1_ball(radius: float = 1.0) -> LMO:
    r"""$\{\|v\|_1 \le \tau\}$: $-\tau\,\mathrm{sign}(g_i) e_i$ at $i = \arg\max |g_i|$."""
    return LMO("l1_ball", _l1, polytope=True, radius=_radius("radius", radius))


def _l2(g, *, radius):
    g = jnp.asarray(g)
    norm = jnp.linalg.norm(g)
    safe = jnp.where(norm > 0, norm, 1.0)
    return jnp.where(norm > 0, -radius * g / safe, jnp.zeros_like(g))


def l2_ball(radius: float = 1.0) -> LMO:
    r"""$\{\|v\|_2 \le \tau\}$: $-\tau g/\|g\|_2$ (0 for $g = 0$). Not a polytope."""
    return LMO("l2_ball", _l2, polytope=False, radius=_radius("radius", radius))


def _linf(g, *, radius):
    g = jnp.asarray(g)
    # g_i = 0: any value is optimal; take the vertex -radius so v stays a vertex.
    return jnp.where(g > 0, -radius, radius).astype(g.dtype)


def linf_ball(radius: float = 1.0) -> LMO:
    r"""$\{\|v\|_\infty \le \tau\}$: $v_i = -\tau$ where $g_i > 0$, else $+\tau$."""
    return LMO("linf_ball", _linf, polytope=True, radius=_radius("radius", radius))


def _box(g, *, lower, upper):
    g = jnp.asarray(g)
    lo = jnp.broadcast_to(jnp.asarray(lower, g.dtype), g.shape)
    hi = jnp.broadcast_to(jnp.asarray(upper, g.dtype), g.shape)
    return jnp.where(g > 0, lo, hi)


def box(lower, upper) -> LMO:
    r"""$\{l \le v \le u\}$ (finite bounds, scalars or arrays broadcast to ``g``):
    $v_i = l_i$ where $g_i > 0$, else $u_i$."""
    lo, hi = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("box: lower and upper must be finite")
    if np.any(lo > hi):
        raise ValueError("box: lower must be <= upper elementwise")
    lo = float(lo) if lo.ndim == 0 else lo
    hi = float(hi) if hi.ndim == 0 else hi
    return LMO("box", _box, polytope=True, lower=lo, upper=hi)


def _k_sparse(g, *, k, radius):
    flat, shape = _flat(g)
    k = min(k, flat.shape[0])
    _, idx = jax.lax.top_k(jnp.abs(flat), k)
    vals = jnp.where(flat[idx] > 0, -radius, radius).astype(flat.dtype)
    return jnp.zeros_like(flat).at[idx].set(vals).reshape(shape)


def k_sparse(k: int, radius: float = 1.0) -> LMO:
    r"""K-sparse polytope $\{\|v\|_1 \le K\tau,\ \|v\|_\infty \le \tau\}$:
    $-\tau\,\mathrm{sign}(g_i)$ on the $K$ largest $|g_i|$, 0 elsewhere."""
    return LMO(
        "k_sparse", _k_sparse, polytope=True, k=_count("k", k), radius=_radius("radius", radius)
    )


def _hypersimplex(g, *, k, radius):
    flat, shape = _flat(g)
    k = min(k, flat.shape[0])
    _, idx = jax.lax.top_k(-flat, k)
    return jnp.zeros_like(flat).at[idx].set(radius).reshape(shape)


def hypersimplex(k: int, radius: float = 1.0) -> LMO:
    r"""Hypersimplex $\{v \in [0,\tau]^n,\ \sum_i v_i = K\tau\}$: $\tau$ on the
    $K$ smallest $g_i$."""
    return LMO(
        "hypersimplex",
        _hypersimplex,
        polytope=True,
        k=_count("k", k),
        radius=_radius("radius", radius),
    )


def _knapsack(g, *, weights, budget, upper):
    flat, shape = _flat(g)
    w = jnp.asarray(weights, flat.dtype).reshape(-1)
    u = jnp.broadcast_to(jnp.asarray(upper, flat.dtype), flat.shape)
    # Fractional knapsack (Dantzig): take items with g_i < 0 by increasing g_i / w_i
    # until the budget is spent; the item that crosses it is taken fractionally.
    ratio = jnp.where(flat < 0, flat / w, jnp.inf)
    order = jnp.argsort(ratio)
    cw = jnp.cumsum((w * u)[order])
    before = cw - (w * u)[order]
    take = jnp.clip((budget - before) / w[order], 0.0, u[order])
    take = jnp.where(ratio[order] < 0, take, 0.0)
    return jnp.zeros_like(flat).at[order].set(take).reshape(shape)


def knapsack(weights, budget: float, upper=1.0) -> LMO:
    r"""Knapsack polytope $\{0 \le v \le u,\ w^\top v \le B\}$ with $w > 0$:
    the greedy fractional knapsack (Dantzig 1957) on the items with $g_i < 0$,
    in increasing order of $g_i / w_i$."""
    w = np.asarray(weights, np.float64).reshape(-1)
    if w.size == 0 or np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise ValueError("knapsack: weights must be a non-empty array of positive finite numbers")
    u = np.asarray(upper, np.float64)
    if np.any(~np.isfinite(u)) or np.any(u <= 0):
        raise ValueError("knapsack: upper must be positive and finite")
    return LMO(
        "knapsack",
        _knapsack,
        polytope=True,
        weights=w,
        budget=_radius("budget", budget),
        upper=float(u) if u.ndim == 0 else u,
    )


# ---------------------------------------------------------------- matrix sets


def _lanczos(matvec, n, dtype, steps, largest):
    """Extreme eigenpair of a symmetric operator by ``steps`` Lanczos steps.

    Full reorthogonalization (steps is small); after a breakdown (an invariant
    subspace was found) the remaining rows are masked so they cannot produce a
    spurious Ritz value.
    """
    q0 = jax.random.normal(jax.random.key(0), (n,), dtype)
    q0 = q0 / jnp.linalg.norm(q0)
    Q = jnp.zeros((steps, n), dtype)
    alphas = jnp.zeros((steps,), dtype)
    betas = jnp.zeros((steps,), dtype)
    valid = jnp.zeros((steps,), bool)
    tiny = jnp.finfo(dtype).eps

    def body(j, carry):
        Q, alphas, betas, valid, q, ok = carry
        Q = Q.at[j].set(q)
        w = matvec(q)
        a = jnp.vdot(q, w)
        w = w - Q.T @ (Q @ w)
        w = w - Q.T @ (Q @ w)
        b = jnp.linalg.norm(w)
        scale = jnp.maximum(jnp.abs(a), 1.0)
        alphas = alphas.at[j].set(a)
        valid = valid.at[j].set(ok)
        nxt_ok = ok & (b > 100 * tiny * scale)
        betas = betas.at[j].set(jnp.where(nxt_ok, b, 0.0))
        q = jnp.where(nxt_ok, w / jnp.where(nxt_ok, b, 1.0), 0.0)
        return Q, alphas, betas, valid, q, nxt_ok

    Q, alphas, betas, valid, _, _ = jax.lax.fori_loop(
        0, steps, body, (Q, alphas, betas, valid, q0, jnp.asarray(True))
    )
    big = jnp.sum(jnp.abs(alphas)) + 2 * jnp.sum(betas) + 1.0
    diag = jnp.where(valid, alphas, -big if largest else big)
    T = jnp.diag(diag) + jnp.diag(betas[:-1], 1) + jnp.diag(betas[:-1], -1)
    vals, vecs = jnp.linalg.eigh(T)
    idx = steps - 1 if largest else 0
    y = jnp.where(valid, vecs[:, idx], 0.0)
    vec = Q.T @ y
    return vals[idx], vec / jnp.maximum(jnp.linalg.norm(vec), tiny)


def _unit(z):
    nz = jnp.linalg.norm(z)
    return jnp.where(nz > 0, z / jnp.where(nz > 0, nz, 1.0), 0.0)


def _nuclear(g, *, radius, steps, method):
    g = jnp.asarray(g)
    if g.ndim != 2:
        raise ValueError(f"nuclear_ball: g must be a matrix, got shape {g.shape}")
    m, n = g.shape
    if method == "svd":
        U, _, Vt = jnp.linalg.svd(g, full_matrices=False)
        u, v = U[:, 0], Vt[0]
    else:
        k = min(steps, min(m, n))
        if n <= m:
            _, v = _lanczos(lambda z: g.T @ (g @ z), n, g.dtype, k, True)
            u = _unit(g @ v)
        else:
            _, u = _lanczos(lambda z: g @ (g.T @ z), m, g.dtype, k, True)
            v = _unit(g.T @ u)
    return -radius * jnp.outer(u, v)


def nuclear_ball(radius: float = 1.0, *, steps: int = 32, method: str = "lanczos") -> LMO:
    r"""Nuclear-norm ball $\{\|V\|_* \le \tau\}$: $-\tau u_1 v_1^\top$ with
    $(u_1, v_1)$ the top singular pair of ``g``.

    ``method="lanczos"`` (default) runs ``steps`` Lanczos steps with full
    reorthogonalization on $g^\top g$ (or $g g^\top$, the smaller side)
    from a fixed start vector; with ``steps >= min(m, n)`` it is exact up to rounding.
    With fewer steps the Ritz value underestimates $\sigma_1$, and a gap computed
    from it is then not a certified bound. ``method="svd"`` uses a full SVD.
    """
    if method not in ("lanczos", "svd"):
        raise ValueError(f"nuclear_ball: method must be 'lanczos' or 'svd', got {method!r}")
    return LMO(
        "nuclear_ball",
        _nuclear,
        polytope=False,
        radius=_radius("radius", radius),
        steps=_count("steps", steps),
        method=method,
    )


def _spectraplex(g, *, radius, steps, method):
    g = jnp.asarray(g)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(f"spectraplex: g must be a square matrix, got shape {g.shape}")
    s = 0.5 * (g + g.T)
    n = s.shape[0]
    if method == "eigh":
        _, vecs = jnp.linalg.eigh(s)
        u = vecs[:, 0]
    else:
        _, u = _lanczos(lambda z: s @ z, n, s.dtype, min(steps, n), False)
    return radius * jnp.outer(u, u)


def spectraplex(radius: float = 1.0, *, steps: int = 32, method: str = "lanczos") -> LMO:
    r"""Spectraplex $\{V \succeq 0,\ \mathrm{tr}\,V = \tau\}$: $\tau u u^\top$ with
    $u$ the eigenvector of the smallest eigenvalue of $(g + g^\top)/2$
    (``steps`` Lanczos steps, exact once ``steps >= n``; or ``method="eigh"``)."""
    if method not in ("lanczos", "eigh"):
        raise ValueError(f"spectraplex: method must be 'lanczos' or 'eigh', got {method!r}")
    return LMO(
        "spectraplex",
        _spectraplex,
        polytope=False,
        radius=_radius("radius", radius),
        steps=_count("steps", steps),
        method=method,
    )


# ---------------------------------------------------------------- products


def _product(g, *, lmos, treedef):
    g_leaves = treedef.flatten_up_to(g)
    return jax.tree.unflatten(treedef, [o(gi) for o, gi in zip(lmos, g_leaves, strict=True)])


def product(blocks) -> LMO:
    r"""Cartesian product $C_1 \times \dots \times C_m$ over a pytree of LMOs: the
    oracle acts blockwise on a gradient with the same pytree structure (leaves of the
    gradient may themselves be pytrees when the block's oracle is a product)."""
    lmos, treedef = jax.tree.flatten(blocks, is_leaf=lambda o: isinstance(o, LMO))
    if not lmos or not all(isinstance(o, LMO) for o in lmos):
        raise TypeError("product: blocks must be a non-empty pytree of LMO objects")
    return LMO(
        "product",
        _product,
        polytope=all(o.polytope for o in lmos),
        lmos=tuple(lmos),
        treedef=treedef,
    )


# ---------------------------------------------------------------- membership


def _pos(v):
    return jnp.maximum(v, 0.0)


def _neg_part(x):
    return jnp.max(_pos(-jnp.asarray(x)), initial=0.0)


def _viol_simplex(x, *, radius):
    x = jnp.asarray(x)
    return jnp.maximum(jnp.abs(jnp.sum(x) - radius), _neg_part(x))


def _viol_unit_simplex(x, *, radius):
    x = jnp.asarray(x)
    return jnp.maximum(_pos(jnp.sum(x) - radius), _neg_part(x))


def _viol_box(x, *, lower, upper):
    x = jnp.asarray(x)
    return jnp.max(_pos(x - upper) + _pos(lower - x), initial=0.0)


def _viol_k_sparse(x, *, k, radius):
    x = jnp.asarray(x)
    return jnp.maximum(_pos(jnp.max(jnp.abs(x)) - radius), _pos(jnp.sum(jnp.abs(x)) - k * radius))


def _viol_hypersimplex(x, *, k, radius):
    x = jnp.asarray(x)
    k = min(k, x.size)
    return jnp.maximum(jnp.abs(jnp.sum(x) - k * radius), _viol_box(x, lower=0.0, upper=radius))


def _viol_knapsack(x, *, weights, budget, upper):
    x = jnp.asarray(x).reshape(-1)
    w = jnp.asarray(weights, x.dtype)
    return jnp.maximum(_pos(w @ x - budget), _viol_box(x, lower=0.0, upper=jnp.asarray(upper)))


def _viol_nuclear(x, *, radius, steps, method):
    return _pos(jnp.sum(jnp.linalg.svd(jnp.asarray(x), compute_uv=False)) - radius)


def _viol_spectraplex(x, *, radius, steps, method):
    x = jnp.asarray(x)
    lam = jnp.linalg.eigvalsh(0.5 * (x + x.T))
    asym = jnp.max(jnp.abs(x - x.T))
    return jnp.maximum(jnp.maximum(jnp.abs(jnp.trace(x) - radius), _pos(-lam[0])), asym)


def _viol_product(x, *, lmos, treedef):
    parts = [o.violation(xi) for o, xi in zip(lmos, treedef.flatten_up_to(x), strict=True)]
    if any(p is None for p in parts):
        return None
    return jnp.max(jnp.stack([jnp.asarray(p) for p in parts]))


_VIOLATIONS = {
    "probability_simplex": _viol_simplex,
    "unit_simplex": _viol_unit_simplex,
    "l1_ball": lambda x, *, radius: _pos(jnp.sum(jnp.abs(jnp.asarray(x))) - radius),
    "l2_ball": lambda x, *, radius: _pos(jnp.linalg.norm(jnp.asarray(x).ravel()) - radius),
    "linf_ball": lambda x, *, radius: _pos(jnp.max(jnp.abs(jnp.asarray(x))) - radius),
    "box": _viol_box,
    "k_sparse": _viol_k_sparse,
    "hypersimplex": _viol_hypersimplex,
    "knapsack": _viol_knapsack,
    "nuclear_ball": _viol_nuclear,
    "spectraplex": _viol_spectraplex,
    "product": _viol_product,
}
