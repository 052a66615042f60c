"""FlexQP's residuals computed in few reductions (issue 24, compile time) equal the
textbook formulas written one norm at a time, and differentiate like them."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.qp import flexqp, problems
from jaxsolve.qp.problem import interval_distance
from jaxsolve.qp.residuals import kkt_residuals
from jaxsolve.qp.scaling import amax


def _reference(d, x, z, y, pending_on):
    """The residuals one norm and one dot product at a time (OSQP 1.x's criteria on the
    relaxed problem, as `kkt_residuals` documents them)."""
    Px, Ax, Aty = d.P @ x, d.A @ x, d.A.T @ y
    Aty_abs = jnp.abs(d.A).T @ jnp.abs(y)
    Dinv, Einv = 1.0 / d.D, 1.0 / d.E
    Aty_n = jnp.where(pending_on, jnp.abs(Aty), Aty_abs)
    Px_u, Aty_u, q_u = Dinv * Px / d.c, Dinv * Aty_n / d.c, Dinv * d.q / d.c
    Ax_u, z_u = Einv * Ax, Einv * z
    rp_u = amax(Ax_u - z_u)
    rd_u = amax(Px_u + q_u + Dinv * Aty / d.c)
    xPx, qx, yz = x @ Px / d.c, d.q @ x / d.c, y @ z / d.c
    yz_abs = jnp.abs(y) @ jnp.abs(z) / d.c
    gap = jnp.abs(xPx + qx + yz) / (
        1.0 + jnp.maximum(jnp.maximum(jnp.abs(xPx), jnp.abs(qx)), yz_abs)
    )
    kkt = jnp.maximum(
        jnp.maximum(
            rp_u / (1.0 + jnp.maximum(amax(Ax_u), amax(z_u))),
            rd_u / (1.0 + jnp.maximum(jnp.maximum(amax(Px_u), amax(Aty_u)), amax(q_u))),
        ),
        gap,
    )
    row = 1.0 + jnp.maximum(jnp.maximum(jnp.abs(Ax_u), jnp.abs(z_u)), d.anorm * amax(d.D * x))
    kkt = jnp.maximum(kkt, amax(jnp.abs(Ax_u - z_u) / row))
    dist = interval_distance(z_u, d.lo, d.up)
    violation = jnp.maximum(amax(dist) / (1.0 + amax(z_u)), amax(dist / row))
    error = jnp.maximum(kkt, jnp.where(pending_on, violation, 0.0))
    return dict(
        kkt=kkt,
        violation=violation,
        error=error,
        primal=amax(Ax - z),
        dual=amax(Px + d.q + Aty),
        primal_scale=jnp.maximum(amax(Ax), amax(z)),
        dual_scale=jnp.maximum(jnp.maximum(amax(Px), amax(Aty)), amax(d.q)),
    )


def _state(seed=0, n=12, m=30, steps=2):
    qp = problems.random_qp(jax.random.key(seed), n, m)
    solver = flexqp()
    s = solver.init(jnp.zeros(n), qp)
    for _ in range(steps):
        s, _ = solver.step(s, qp)
    return s


def test_residuals_equal_the_norm_by_norm_formulas():
    s = _state()
    d, x, z, y = s.data, s.xs, s.zs, s.ys
    for pending in (True, False):
        got = jax.jit(kkt_residuals)(d, x, z, y, jnp.asarray(pending))
        want = jax.jit(_reference)(d, x, z, y, jnp.asarray(pending))
        # the maxima are exact in any order: bit for bit
        for f in ("primal", "dual", "primal_scale", "dual_scale", "violation"):
            assert float(getattr(got, f)) == float(want[f]), f
        # kkt and error include the duality gap, whose sums XLA may add in another order
        for f in ("kkt", "error"):
            np.testing.assert_allclose(float(getattr(got, f)), float(want[f]), rtol=1e-13)
        assert float(got.error) > 1e-4  # a point of an unfinished run, not a trivial zero
        np.testing.assert_array_equal(np.asarray(got.Ax), np.asarray(d.A @ x))


def test_residuals_differentiate_like_the_norm_by_norm_formulas():
    """The variadic reductions have custom JVPs (JAX has none for them): forward and
    reverse derivatives of the error match the reference's."""
    s = _state(seed=1)
    d, x, z, y = s.data, s.xs, s.zs, s.ys
    pending = jnp.asarray(True)

    def err(fn, x, z, y):
        r = fn(d, x, z, y, pending)
        r = r if isinstance(r, dict) else r._asdict()
        return r["kkt"] + r["violation"]

    g = jax.grad(lambda *a: err(kkt_residuals, *a), argnums=(0, 1, 2))(x, z, y)
    g_ref = jax.grad(lambda *a: err(_reference, *a), argnums=(0, 1, 2))(x, z, y)
    for a, b in zip(g, g_ref, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-14)
    assert float(jnp.max(jnp.abs(g[0]))) > 0.0
    # and under vmap (a batch's lanes)
    xs = jnp.stack([x, 2.0 * x])
    e = jax.vmap(lambda x: kkt_residuals(d, x, z, y, pending).error)(xs)
    e_ref = jnp.stack([_reference(d, x, z, y, pending)["error"] for x in xs])
    np.testing.assert_allclose(np.asarray(e), np.asarray(e_ref), rtol=1e-13)
