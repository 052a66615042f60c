r"""Active-set (KKT) solves of the projection: polishing the forward, the exact backward.

At the projection $x^\star$ of $y$ onto
$\{Ax = b,\ l \le Cx \le u,\ lb \le x \le ub\}$, let $R = [I_n; C]$ be the
rows of the bounds and inequalities (only the ``C`` rows when the polytope has no
bounds), $\mu$ the rows active at $x^\star$ (at ``l``/``lb`` or at
``u``/``ub``) and $h_\mu$ their bound values. Then $x^\star$ is the
projection of $y$ onto the affine set $\{Ax = b,\ R_\mu x = h_\mu\}$:

$$
x^\star = x_A - P_A R_\mu^\top \lambda,\qquad
(R_\mu P_A R_\mu^\top)\,\lambda = R_\mu x_A - h_\mu,\qquad
x_A = P_A y + A^{+} b,
$$

with $P_A = ZZ^\top$ the projector onto $\ker A$. Every matrix but the mask
is shared by the batch and computed once in `jaxsolve.layers.factorize`
($Z$, $A^{+}$, the row-normalized $\mathrm{diag}(g) R Z$); the
per-example system is the masked Gram system
$(\mu G \mu + I - \mu)\,\lambda_g = \mu g (R x_A - h)$,
$G = \mathrm{diag}(g) R P_A R^\top \mathrm{diag}(g)$ (unit diagonal), solved by
batched conjugate gradients whose matrix products are
$(B, |R|) \times (|R|, k_A)$ GEMMs. In exact arithmetic CG ends in at most
$|\mu|$ + 1 iterations (the number of distinct eigenvalues the right-hand side
excites), and the Douglas-Rachford iterates identify $\mu$ long before they
converge (an observation, not a theorem: on the DC3 problems all 1024 active sets are
right after 30 steps of 100/50/50 and 50 of 1000/500/500, where the iterates are
still 6e-4 and 2e-6 away).

**Polish** (forward; as in OSQP's solution polishing, Stellato et al. 2020, section
4.3, here for a projection): the active set is read off the Douglas-Rachford
reflection $r = 2z - s$ (a row is active when the box clips it), the system
above is solved, and the candidate is accepted only if it is primal feasible and its
multipliers have the right signs ($\lambda \ge 0$ at an upper bound,
$\le 0$ at a lower one), both to ``tol``: then it is the exact projection of
``y`` onto the polytope relaxed by ``tol`` (the KKT conditions hold to ``tol``).

**Backward** (implicit function theorem on the KKT system at a fixed active set,
which is how Pinet's fixed-point backward ends too, Grontas, Terpin et al., arXiv
2508.10480, section 3.2; Amos and Kolter, OptNet, ICML 2017, for the KKT form): with
$K = [A; R_\mu]$, $x = y - K^\top (KK^\top)^{-1}(Ky - h)$, so for a
cotangent $\bar x$

$$
(R_\mu P_A R_\mu^\top)\lambda = R_\mu P_A \bar x,\quad
v = \bar x - R_\mu^\top\lambda,\quad \bar y = P_A v,\quad \bar b = (A^{+})^\top v,
\quad \bar h_\mu = \lambda,
$$

and $\bar h$ goes to ``u``/``ub`` on rows active at their upper bound, to
``l``/``lb`` on the others. One CG solve of the same masked system per backward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.implicit import known_value
from jaxsolve.layers.polytope import Factors

__all__ = [
    "masked_cg",
    "polish",
    "refine",
    "affine_projection",
    "cg_budget",
    "gram_for",
    "accurate_residual",
    "accurate_product",
]


def cg_budget(rows: int) -> int:
    """CG iterations allowed to the polish: ``rows + 10`` (exact-arithmetic bound), at most 150."""
    return max(20, min(rows + 10, 150))


def _rows(factors: Factors, bounds: bool, dtype):
    n = factors.n
    rz, g = factors.rz.astype(dtype), factors.rz_scale.astype(dtype)
    if not bounds:
        rz, g = rz[n:], g[n:]
    return rz, g


def _active(factors: Factors, bounds: bool, dtype, act):
    """Set-up shared by `polish`, `refine` and `affine_projection`: the null-space
    basis ``Z``, ``C``, the rows in use ``(rz, g)``, ``act`` restricted to those rows and
    the mask ``mu`` of the active ones."""
    rz, g = _rows(factors, bounds, dtype)
    act = act if bounds else act[..., factors.n :]
    mu = ((act != 0) & (g > 0)).astype(dtype)
    return factors.null_a.astype(dtype), factors.C.astype(dtype), rz, g, act, mu


def _in_use(factors: Factors, bounds: bool, v):
    """``v`` (lifted, ``(..., n + m)``) restricted to the rows in use."""
    return v if bounds else v[..., factors.n :]


def gram_for(factors: Factors, bounds: bool, dtype):
    """The stored $G$ of the rows in use, or ``None`` when two ``rz`` products are cheaper."""
    n = factors.n
    rows = factors.rz.shape[0] - (0 if bounds else n)
    if factors.gram.shape[0] == 0 or rows >= 2 * factors.rz.shape[1]:
        return None
    G = factors.gram.astype(dtype)
    return G if bounds else G[n:, n:]


def _apply_r(x, C, bounds):
    cx = x @ C.T
    return jnp.concatenate([x, cx], axis=-1) if bounds else cx


def _apply_rt(lam, C, n, bounds):
    if bounds:
        return lam[..., :n] + lam[..., n:] @ C
    return lam @ C


def _proj_a(v, Z):
    return (v @ Z) @ Z.T


def masked_cg(rz, mu, rhs, x0, weight, thr, maxiter, gram=None):
    r"""Batched CG on $(\mu\, G\, \mu + I - \mu)\lambda = \text{rhs}$, $G = rz\, rz^\top$.

    ``mu`` (``(B, r)``, 0/1) masks the rows; ``rhs`` must vanish off the mask. A lane
    stops (its iterate is frozen) once $\max_j |\text{res}_j|\, \text{weight}_j
    \le \text{thr}$; the loop ends when every lane has, or after ``maxiter``
    iterations. ``gram``: $G$ itself (one product per iteration instead of two,
    cheaper when ``rz`` has more than half as many columns as rows). Returns
    ``(lambda, iterations)``.
    """

    def mv(v):
        if gram is not None:
            return mu * ((mu * v) @ gram) + (1 - mu) * v
        return mu * (((mu * v) @ rz) @ rz.T) + (1 - mu) * v

    def small(r):
        return jnp.max(jnp.abs(r) * weight, axis=-1, initial=0.0) <= thr

    r0 = rhs - mv(x0)
    rr0 = jnp.sum(r0 * r0, axis=-1)

    def cond(c):
        _, r, _, _, k = c
        return (k < maxiter) & ~jnp.all(small(r))

    def body(c):
        x, r, p, rr, k = c
        live = ~small(r)
        Ap = mv(p)
        pAp = jnp.sum(p * Ap, axis=-1)
        ok = live & (pAp > 0)
        a = jnp.where(ok, rr / jnp.where(ok, pAp, 1), 0)
        x = x + a[:, None] * p
        r = r - a[:, None] * Ap
        rr2 = jnp.sum(r * r, axis=-1)
        beta = jnp.where(ok & (rr > 0), rr2 / jnp.where(rr > 0, rr, 1), 0)
        p = jnp.where(ok[:, None], r + beta[:, None] * p, p)
        return x, r, p, jnp.where(ok, rr2, rr), k + 1

    x, *_, k = jax.lax.while_loop(cond, body, (x0, r0, r0, rr0, jnp.int32(0)))
    return x, k


def polish(
    factors: Factors, bounds: bool, y, b, lo, hi, act, lam0, tol, maxiter, lanes=None, gram=None
):
    r"""Exact projection onto the affine set of the active rows ``act``; checked (module docstring).

    Batched over the leading axis: ``y`` ``(B, n)``, ``b`` ``(B, p)``, ``lo``/``hi``
    ``(B, n + m)`` (lifted bounds ``(lb, l)``, ``(ub, u)``), ``act`` ``(B, n + m)`` in
    {-1, 0, 1} (at the lower bound, inactive, at the upper bound), ``lam0`` the CG
    warm start ``(B, rows)``, ``lanes`` (``(B,)`` bool, optional) the lanes to polish
    (the CG stops when these have converged; the others' results are meaningless),
    ``gram`` (optional) $G$ itself, used for the masked products when given. Returns ``(x, lam, error)``: ``error`` is the largest
    violation of primal feasibility and of the multipliers' signs, in units of ``x``,
    relative to $\max(1, \|(x, Cx)\|_\infty)$ (the Douglas-Rachford ``error``'s
    scale); the candidate is the projection (to ``tol``) when ``error <= tol``.
    """
    dtype = y.dtype
    Z, C, rz, g, act, mu = _active(factors, bounds, dtype, act)
    lo, hi = _in_use(factors, bounds, lo), _in_use(factors, bounds, hi)
    h = jnp.where(act > 0, hi, jnp.where(act < 0, lo, 0))
    h = jnp.where(mu > 0, h, 0)
    xa = _proj_a(y, Z)
    if factors.p:
        xa = xa + b @ factors.apinv_t.astype(dtype)
    rxa = _apply_r(xa, C, bounds)
    scale0 = jnp.maximum(
        1, jnp.maximum(jnp.max(jnp.abs(xa), -1), jnp.max(jnp.abs(rxa), -1, initial=0.0))
    )
    rho = mu * (rxa - h) * g
    inv_g = jnp.where(g > 0, 1 / jnp.where(g > 0, g, 1), 0)
    lam0 = jnp.where((mu > 0) & jnp.isfinite(lam0), lam0, 0)
    thr = 0.1 * tol * scale0
    if lanes is not None:
        thr = jnp.where(lanes, thr, jnp.inf)
    lam, _ = masked_cg(rz, mu, rho, lam0, inv_g, thr, maxiter, gram)
    x = xa - ((mu * lam) @ rz) @ Z.T
    rx = _apply_r(x, C, bounds)
    primal = jnp.maximum(jnp.maximum(lo - rx, rx - hi), 0)
    primal = jnp.maximum(primal, mu * jnp.abs(rx - h))
    two_sided = lo < hi
    dual = jnp.where(two_sided, jnp.maximum(-jnp.sign(act).astype(dtype) * lam * mu, 0), 0)
    scale = jnp.maximum(
        1, jnp.max(jnp.abs(rx if bounds else jnp.concatenate([x, rx], -1)), -1, initial=0.0)
    )
    # each row's violation against its own size |(R x)_i|: relative to the largest row
    # alone, a row scaled by 1e8 would hide a bound violated by 0.0056 in another
    primal = primal / jnp.maximum(1, jnp.abs(rx))
    err = jnp.maximum(jnp.max(primal, -1, initial=0.0), jnp.max(dual, -1, initial=0.0) / scale)
    err = jnp.where(jnp.all(jnp.isfinite(x), -1), err, jnp.inf)
    return x, lam, err


def _slice(v, bits):
    r"""``(hi, v - hi)``: ``hi`` is ``v`` rounded, row by row, to multiples of
    $2^{e - \text{bits}}$, $2^e \ge \max_j |v_j|$ (exact in binary floating point)."""
    mx = jnp.max(jnp.abs(v), axis=-1, keepdims=True)
    _, e = jnp.frexp(jnp.where(mx > 0, mx, 1))  # mx <= 2^e
    step = jnp.ldexp(jnp.ones_like(mx), e - bits)
    hi = jnp.round(v / step) * step  # division and product by a power of two are exact
    return hi, v - hi


def _slice_bits(dtype, n: int) -> int:
    """Bits per slice for which a product of two slices, summed over ``n`` terms, is exact."""
    digits = int(jnp.finfo(dtype).nmant) + 1
    return (digits - int(np.ceil(np.log2(max(n, 2))))) // 2


def accurate_residual(x, M, rhs):
    r"""$x M^\top - \text{rhs}$ to about twice the working precision, with ordinary matmuls.

    An error-free splitting in the manner of Ozaki, Ogita, Oishi and Rump ("Error-free
    transformations of matrix multiplication by using fast routines of matrix
    multiplication and its applications", Numer. Algorithms 59, 2012): each row of
    ``x`` (``(B, n)``) and of ``M`` (``(k, n)``) is cut as $v = v_1 + v_{21} +
    v_{22}$, where $v_1$ is $v$ rounded to multiples of
    $2^{e-\beta}$ ($2^e \ge \max|v|$) and $v_{21}$ the same rounding
    of $v - v_1$, with $2\beta + \lceil\log_2 n\rceil \le$ the mantissa
    length ($\beta = 7$ for float32 at $n \le 1024$). Then every partial sum
    of $x_1 M_1^\top$, $x_1 M_{21}^\top$ and $x_{21} M_1^\top$ is an
    integer multiple of one power of two below $2^{24}$ of it: these three
    products are *exact* whatever the summation order of the matmul, and the remaining
    terms $x_1 M_{22}^\top + x_{22} M_1^\top + (x - x_1)(M - M_1)^\top$ are
    $2^{-2\beta}$ times smaller, so their rounding is too; these parts are added
    by Neumaier's compensated summation (`accurate_product`), and ``rhs`` is
    subtracted from the rounded sum before its correction is added. Six matmuls in all,
    instead of one whose float32 error, on DC3 1000/500/500, reaches 1e-4 (XLA:CPU's
    accumulation), 20 times the distance of the exact projection's float32 rounding to
    the constraints; the result's error is about $\varepsilon |x M^\top - \text{rhs}|$
    plus $2^{-2\beta}$ of that. In float64, or when $\beta < 3$, it is the
    plain product.
    """
    s, c = accurate_product(x, M)
    return (s - rhs) + c


def accurate_product(x, M):
    r"""$x M^\top$ as an unevaluated sum ``s + c`` (`accurate_residual`'s method).

    ``s`` is the product rounded to the working precision, ``c`` the correction
    (Neumaier's compensation): a residual against any ``rhs`` near ``s`` is then
    ``(s - rhs) + c``, with no cancellation error (``s - rhs`` is exact when ``rhs`` is
    within a factor 2 of ``s``). In float64, or when $\beta < 3$, ``c = 0``.
    """
    dtype = x.dtype
    n = x.shape[-1]
    bits = _slice_bits(dtype, n)
    hp = jax.lax.Precision.HIGHEST  # no reduced-precision (TF32/bf16) passes on accelerators
    mm = lambda a, c: jnp.matmul(a, c.T, precision=hp)
    if dtype == jnp.float64 or bits < 3:
        p = mm(x, M)
        return p, jnp.zeros_like(p)
    x1, x2 = _slice(x, bits)
    x21, x22 = _slice(x2, bits)
    m1, m2 = _slice(M, bits)
    m21, m22 = _slice(m2, bits)
    low = mm(x1, m22) + mm(x22, m1) + mm(x2, m2)
    return _sum2([mm(x1, m1), mm(x1, m21), mm(x21, m1), low])


def _sum2(terms):
    """Neumaier's compensated sum of a few arrays (TwoSum on each addition): ``(s, c)``,
    the rounded sum and its correction."""
    s, c = terms[0], jnp.zeros_like(terms[0])
    for t in terms[1:]:
        s_new = s + t
        c = c + jnp.where(jnp.abs(s) >= jnp.abs(t), (s - s_new) + t, (t - s_new) + s)
        s = s_new
    return s, c


def refine(factors: Factors, bounds: bool, x, b, lo, hi, act, tol, maxiter):
    r"""One correction step onto the affine set of the active rows: feasibility to round-off.

    $x_1 = x - A^{+}(Ax - b)$, then $x_2 = x_1 - P_A R_\mu^\top\lambda$ with
    $(R_\mu P_A R_\mu^\top)\lambda = R_\mu x_1 - h_\mu$ (the masked system of
    `polish`, right-hand side the tiny residual). At an exact projection it changes
    nothing; on a point computed in float32 it removes the residual left by the rounding
    of the long products of the polish (about $\varepsilon_{32}\sqrt{n}$ per
    coordinate of ``x``, hence up to 5e-5 of violation on DC3 1000/500/500).

    $\mu$ is ``act`` plus the rows that $x_1$ violates (at the bound they
    violate): a lane that stopped on the Douglas-Rachford residual test rather than
    the polish may have left a nearly active row out of ``act`` (on DC3 1000/500/500,
    one lane in 1024 violated such a row by 2.5e-5 in float32).

    The residuals $Ax - b$ and $Rx_1 - h$ are computed by
    `accurate_residual` / `accurate_product` below float64: a plain float32
    matmul gets them wrong by as much as they are (its accumulation error on a
    1000-term row reaches 1e-4), so the correction could not see them. The corrections
    themselves are tiny and need only working precision; the violation that remains is
    the rounding of $x_2$ to the working precision (about that of the exact
    projection rounded). Batched like `polish`.
    """
    dtype = x.dtype
    Z, C, rz, g, act, mu = _active(factors, bounds, dtype, act)
    lo, hi = _in_use(factors, bounds, lo), _in_use(factors, bounds, hi)
    if factors.p:
        A = factors.A.astype(dtype)
        x = x - accurate_residual(x, A, b) @ factors.apinv_t.astype(dtype)
    s, c = accurate_product(x, C)
    if bounds:
        s, c = jnp.concatenate([x, s], -1), jnp.concatenate([jnp.zeros_like(x), c], -1)
    above, below = (s - hi) + c, (s - lo) + c  # R x - hi, R x - lo
    # rows violated at x join the active set, at the bound they violate
    violated = jnp.where(above > 0, 1, jnp.where(below < 0, -1, 0)).astype(act.dtype)
    act = jnp.where(mu > 0, act, violated)
    mu = ((act != 0) & (g > 0)).astype(dtype)
    rho = jnp.where(mu > 0, jnp.where(act > 0, above, below), 0) * g
    scale = jnp.maximum(1, jnp.max(jnp.abs(x), -1))
    inv_g = jnp.where(g > 0, 1 / jnp.where(g > 0, g, 1), 0)
    gram = gram_for(factors, bounds, dtype)
    lam, _ = masked_cg(rz, mu, rho, jnp.zeros_like(rho), inv_g, 0.1 * tol * scale, maxiter, gram)
    return x - ((mu * lam) @ rz) @ Z.T


def _affine_tangent(factors: Factors, bounds: bool, act, dy, db, dlo, dhi, tol, maxiter):
    r"""Tangent of the projection onto $\{Ax = b,\ R_\mu x = h_\mu\}$ (one example).

    With the masked Gram system of `polish`,
    $\dot x = \dot x_A - P_A R^\top \mathrm{diag}(g)\,\mu\dot\lambda_g$,
    $(\mu G\mu + I - \mu)\,\dot\lambda_g = \mu g (R\dot x_A - \dot h)$,
    $\dot x_A = P_A\dot y + A^{+}\dot b$; the solve is a ``custom_linear_solve``
    (batched CG, relative tolerance ``tol``, budget ``maxiter``), so JAX transposes it:
    its transpose is the module docstring's backward, one CG solve per cotangent.
    """
    dtype = dy.dtype
    Z, C, rz, g, act_r, mu = _active(factors, bounds, dtype, act)
    dh = jnp.where(act_r > 0, _in_use(factors, bounds, dhi), 0)
    dh = jnp.where(act_r < 0, _in_use(factors, bounds, dlo), dh)
    dh = jnp.where(mu > 0, dh, 0)
    dxa = _proj_a(dy, Z)
    if factors.p:
        dxa = dxa + db @ factors.apinv_t.astype(dtype)
    rhs = mu * (_apply_r(dxa, C, bounds) - dh) * g
    gram = gram_for(factors, bounds, dtype)

    def matvec(v):
        if gram is not None:
            return mu * ((mu * v) @ gram) + (1 - mu) * v
        return mu * (((mu * v) @ rz) @ rz.T) + (1 - mu) * v

    def cg(_, r):
        thr = tol * jnp.max(jnp.abs(r), initial=0.0)
        one = lambda v: v[None]  # noqa: E731 - masked_cg is batched
        lam, _ = masked_cg(rz, one(mu), one(r), jnp.zeros_like(one(r)), 1.0, thr, maxiter, gram)
        return lam[0]

    lam = jax.lax.custom_linear_solve(matvec, rhs, cg, symmetric=True)
    return dxa - ((mu * lam) @ rz) @ Z.T


def affine_projection(bounds: bool, maxiter: int, factors: Factors, act, x, y, b, lo, hi, tol):
    r"""The projection ``x`` of ``y`` at the active set ``act`` (one example), differentiable.

    The value is the known ``x`` (the solve's answer: it is the projection of ``y``
    onto the affine set of the active rows, to ``tol``); the derivatives in
    ``y, b, lo, hi`` are those of that affine projection, none flow to ``factors``,
    ``act``, ``x`` or ``tol`` (`jaxsolve.core.implicit.known_value`). At a fixed active
    set the projection is linear in ``(y, b, lo, hi)``, so its derivative is its
    tangent map `_affine_tangent` applied to the tangents. It is the map whose fixed
    point the Pinet solver's implicit rule differentiates
    (`jaxsolve.layers.pinet.PinetProjection.optimality`).
    """

    def linear_map(y, b, lo, hi, factors, act, tol):
        return _affine_tangent(factors, bounds, act, y, b, lo, hi, tol, maxiter)

    return known_value(x, linear_map, (y, b, lo, hi), (factors, act, tol))
