"""Frank-Wolfe: certified gaps against f* from OSQP / SciPy / FISTA, accuracy, edge cases."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.core import Status
from jaxsolve.frank_wolfe import (
    frank_wolfe,
    lmo,
    optimistic_frank_wolfe,
    primal_dual_short_step,
    steps,
)
from jaxsolve.projections import simplex as project_simplex
from peers.problems import frank_wolfe as P

PROBLEMS = {mk.__name__: mk for mk in P.ALL}


@functools.partial(jax.jit, static_argnames=("num_steps",))
def _trajectory(solver, x0, args, *, num_steps):
    """(f(x_t), certified error_t) for t = 0..num_steps."""
    s0 = solver.init(x0, args)

    def body(s, _):
        s, _ = solver.step(s, args)
        return s, (s.value, s.error)

    sT, (vals, errs) = jax.lax.scan(body, s0, None, length=num_steps)
    return jnp.r_[s0.value, vals], jnp.r_[s0.error, errs], sT


def _solvers(p):
    out = {
        "vanilla/primal_dual": frank_wolfe(p.fun, p.lmo, step="primal_dual", lipschitz=p.lipschitz),
        "optimistic": optimistic_frank_wolfe(p.fun, p.lmo),
    }
    if p.lmo.polytope:
        out["pairwise/exact"] = frank_wolfe(p.fun, p.lmo, step="exact", variant="pairwise")
    else:
        out["vanilla/open_loop"] = frank_wolfe(p.fun, p.lmo)
    return out


@functools.cache
def _run(name, label):
    p = PROBLEMS[name]()
    vals, errs, final = _trajectory(_solvers(p)[label], p.x0, p.args, num_steps=NUM_STEPS[name])
    return np.asarray(vals), np.asarray(errs), final


NUM_STEPS = {"simplex_qp": 400, "l1_logistic": 400, "ksparse_qp": 400, "matrix_completion": 300}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_certificate_never_below_true_gap(name):
    """error_t >= f(x_t) - f* at every step, for every method, on all four problems."""
    p = PROBLEMS[name]()
    slack = 1e-9 * max(1.0, abs(p.fstar))
    for label in _solvers(p):
        vals, errs, _ = _run(name, label)
        true_gap = vals - p.fstar
        assert np.all(np.isfinite(errs)), label
        assert np.all(errs >= true_gap - slack), (
            f"{name} {label}: certificate below the true gap by {np.max(true_gap - errs):.3e}"
        )
        # and it is a useful certificate: it shrank by 10x from the start
        assert errs[-1] <= 0.1 * errs[0], f"{name} {label}: {errs[0]:.3e} -> {errs[-1]:.3e}"


@pytest.mark.parametrize("name", ["simplex_qp", "l1_logistic", "ksparse_qp"])
def test_pairwise_reaches_reference(name):
    """Pairwise FW with exact line search, 400 oracle calls: certified gap <= 1e-10 |f*|
    and f within 1e-6 relative of f* (OSQP / SLSQP)."""
    p = PROBLEMS[name]()
    vals, errs, final = _run(name, "pairwise/exact")
    assert errs[-1] <= 1e-10 * abs(p.fstar)
    assert abs(vals[-1] - p.fstar) <= 1e-6 * abs(p.fstar)
    assert int(final.num_oracle) == NUM_STEPS[name] + 1


def test_away_steps_reach_reference_simplex():
    p = P.simplex_qp()
    sol = jaxsolve.solve(
        frank_wolfe(p.fun, p.lmo, step="short", variant="away", lipschitz=p.lipschitz),
        p.x0, p.args, tol=1e-11, max_steps=3000,
    )  # fmt: skip
    assert int(sol.status) == Status.SUCCESS
    assert abs(float(p.fun(sol.x, p.args)) - p.fstar) <= 1e-6 * abs(p.fstar)
    w = np.asarray(sol.state.weights)
    assert abs(w.sum() - 1) < 1e-12 and w.min() >= 0
    # the active set represents x exactly
    np.testing.assert_allclose(w @ np.asarray(sol.state.atoms), np.asarray(sol.x), atol=1e-14)


@pytest.mark.slow
def test_matrix_completion_reaches_reference():
    """Nuclear-norm completion (50x40): open-loop FW, 20000 oracle calls (~30 s), f within
    1e-6 relative of FISTA's f*; the nuclear ball is not a polytope, so no away steps."""
    p = P.matrix_completion()
    sol = jaxsolve.solve(frank_wolfe(p.fun, p.lmo), p.x0, p.args, tol=0.0, max_steps=20000)
    f = float(p.fun(sol.x, p.args))
    assert abs(f - p.fstar) <= 1e-6 * abs(p.fstar)
    assert f - p.fstar <= float(sol.error)
    assert np.linalg.svd(np.asarray(sol.x), compute_uv=False).sum() <= p.lmo.params["radius"] * (
        1 + 1e-12
    )


def test_matrix_completion_optimistic_progress():
    """3000 optimistic steps: within 1e-5 relative, certificate valid, nuclear norm feasible."""
    p = P.matrix_completion()
    sol = jaxsolve.solve(
        optimistic_frank_wolfe(p.fun, p.lmo), p.x0, p.args, tol=0.0, max_steps=3000
    )
    f = float(p.fun(sol.x, p.args))
    assert 0 <= f - p.fstar <= 1e-5 * p.fstar
    assert f - p.fstar <= float(sol.error) <= 0.05


def test_optimistic_rate_and_beats_vanilla_gap():
    """Paper A's claims on the simplex QP: certified gap G_t = O(L D^2 / t), and at 1000
    oracle calls it is below vanilla FW's gap."""
    p = P.simplex_qp()
    _, errs, _ = _trajectory(optimistic_frank_wolfe(p.fun, p.lmo), p.x0, p.args, num_steps=1000)
    errs = np.asarray(errs)
    t = np.arange(errs.size)
    scaled = errs[1:] * (t[1:] + 1) / (p.lipschitz * p.diameter_sq)
    assert scaled.max() <= 2.0, scaled.max()
    _, _, sv = _trajectory(frank_wolfe(p.fun, p.lmo), p.x0, p.args, num_steps=1000)
    assert errs[-1] < float(sv.fw_gap) and errs[-1] < float(sv.error)


def test_primal_dual_step_for_projected_gradient():
    """The generalized short step drives projected gradient too (simplex projection from
    jaxsolve.projections), with a valid certificate."""
    p = P.simplex_qp()
    L = p.lipschitz
    fg = jax.value_and_grad(p.fun)

    @jax.jit
    def run(x):
        def body(c, _):
            x, W, low = c
            f, g = fg(x, p.args)
            fw_gap = g @ x - jnp.min(g)  # simplex LMO
            low = jnp.maximum(low, f - fw_gap)
            d = project_simplex(x - g / L) - x
            gamma = primal_dual_short_step(f - W, fw_gap, -g @ d, d @ d, L, 1.0)
            W = (1 - gamma) * W + gamma * (f - fw_gap)
            return (x + gamma * d, W, jnp.maximum(low, W)), (f, f - low)

        f0, g0 = fg(x, p.args)
        lb = f0 - (g0 @ x - jnp.min(g0))
        return jax.lax.scan(body, (x, lb, lb), None, length=400)

    (x, _, _), (vals, cert) = run(p.x0)
    vals, cert = np.asarray(vals), np.asarray(cert)
    assert np.all(cert >= vals - p.fstar - 1e-12)
    assert vals[-1] - p.fstar <= 1e-6 * abs(p.fstar)


def test_step_rules_unit():
    # primal-dual step = short step when the gap is the FW gap
    np.testing.assert_allclose(primal_dual_short_step(0.3, 0.3, 0.3, 2.0, 1.5), 0.1)
    np.testing.assert_allclose(steps.short_step(0.3, 2.0, 1.5), 0.1)
    # a larger primal-dual gap gives a longer step, capped at min(1, gamma_max)
    assert float(primal_dual_short_step(0.6, 0.3, 0.3, 2.0, 1.5)) == pytest.approx(0.2)
    assert float(primal_dual_short_step(60.0, 0.3, 0.3, 2.0, 1.5, 5.0)) == 1.0
    # zero direction / zero slope: step 0, never NaN
    for val in (steps.short_step(0.0, 0.0, 1.0), primal_dual_short_step(1.0, 0.0, 0.0, 0.0, 1.0)):
        assert float(val) == 0.0
    assert float(steps.open_loop_step(0)) == 1.0 and float(steps.open_loop_step(8)) == 0.2


ALL_CONFIGS = [
    ("vanilla", "open_loop"),
    ("vanilla", "backtracking"),
    ("vanilla", "primal_dual"),
    ("away", "short"),
    ("pairwise", "exact"),
]


def _lin(x, c):
    return c @ x


def _const(x, c):
    return 0.0 * jnp.sum(x) + 3.0


@pytest.mark.parametrize("fun", [_lin, _const], ids=["optimum_at_start", "zero_gradient"])
def test_edge_start_at_optimum_and_zero_gradient(fun):
    """Start at the optimum (a vertex, gradient nonzero) or with a zero gradient: every
    rule takes step 0, error 0, no NaN, x unchanged."""
    c = jnp.array([0.5, -1.0, 2.0, 0.0])
    x0 = jnp.array([0.0, 1.0, 0.0, 0.0])
    o = lmo.probability_simplex()
    solvers = [frank_wolfe(fun, o, step=s, variant=v, lipschitz=1.0) for v, s in ALL_CONFIGS]
    solvers.append(optimistic_frank_wolfe(fun, o))
    for solver in solvers:
        state = solver.init(x0, c)
        assert float(state.error) == 0.0
        _, errs, final = _trajectory(solver, x0, c, num_steps=3)
        np.testing.assert_array_equal(np.asarray(final.x), np.asarray(x0))
        assert np.all(np.asarray(errs) == 0.0)
    sol = jaxsolve.solve(solvers[0], x0, c)
    assert int(sol.status) == Status.SUCCESS and int(sol.num_steps) == 0


def test_badly_scaled_objective():
    """f and 1e8 f: scale-free rules give the same iterates; no NaN/Inf; gap scales by 1e8."""
    p = P.simplex_qp()
    big = (p.args[0] * 1e8, p.args[1] * 1e8)
    for v, s in [("vanilla", "open_loop"), ("vanilla", "short"), ("pairwise", "backtracking")]:
        a = frank_wolfe(p.fun, p.lmo, step=s, variant=v, lipschitz=p.lipschitz)
        b = frank_wolfe(p.fun, p.lmo, step=s, variant=v, lipschitz=p.lipschitz * 1e8)
        sa = jaxsolve.solve(a, p.x0, p.args, tol=0.0, max_steps=50)
        sb = jaxsolve.solve(b, p.x0, big, tol=0.0, max_steps=50)
        assert np.all(np.isfinite(np.asarray(sb.x))) and np.isfinite(float(sb.error))
        np.testing.assert_allclose(
            np.asarray(sb.x), np.asarray(sa.x), atol=1e-9, err_msg=f"{v}/{s}"
        )
        np.testing.assert_allclose(float(sb.error), 1e8 * float(sa.error), rtol=1e-5)


def test_float32_and_vmap_batch():
    p = P.simplex_qp()
    args32 = jax.tree.map(lambda a: a.astype(jnp.float32), p.args)
    x32 = p.x0.astype(jnp.float32)
    solver = frank_wolfe(p.fun, p.lmo, step="exact", variant="pairwise")
    sol = jaxsolve.solve(solver, x32, args32, max_steps=2000)
    assert sol.x.dtype == jnp.float32 and int(sol.status) == Status.SUCCESS
    assert abs(float(p.fun(sol.x.astype(jnp.float64), p.args)) - p.fstar) <= 1e-4
    # a batch of linear costs over the simplex, vmapped: each lands on its argmin vertex
    C = jax.random.normal(jax.random.key(0), (5, 6))
    opt = optimistic_frank_wolfe(_lin, lmo.probability_simplex())
    out = jax.vmap(lambda c: jaxsolve.solve(opt, jnp.full(6, 1 / 6), c, tol=1e-9).x)(C)
    np.testing.assert_allclose(np.asarray(out).argmax(1), np.asarray(C).argmin(1))


def test_capacity_exhausted_is_breakdown():
    p = P.simplex_qp()
    solver = frank_wolfe(
        p.fun, p.lmo, step="short", variant="away", lipschitz=p.lipschitz, capacity=2
    )
    sol = jaxsolve.solve(solver, p.x0, p.args, max_steps=100)
    assert int(sol.status) == Status.BREAKDOWN
    assert np.all(np.isfinite(np.asarray(sol.x)))


def test_validation_errors():
    o = lmo.probability_simplex()
    with pytest.raises(ValueError, match="variant"):
        frank_wolfe(_lin, o, variant="bogus")
    with pytest.raises(ValueError, match="step"):
        frank_wolfe(_lin, o, step="armijo")
    with pytest.raises(ValueError, match="lipschitz"):
        frank_wolfe(_lin, o, step="short")
    with pytest.raises(ValueError, match="lipschitz"):
        frank_wolfe(_lin, o, step="short", lipschitz=-1.0)
    with pytest.raises(ValueError, match="polytope"):
        frank_wolfe(_lin, lmo.l2_ball(), step="short", variant="away", lipschitz=1.0)
    with pytest.raises(ValueError, match="open_loop"):
        frank_wolfe(_lin, o, variant="pairwise")
    with pytest.raises(TypeError, match="lmo"):
        optimistic_frank_wolfe(_lin, 3)
    with pytest.raises(ValueError, match="capacity"):
        frank_wolfe(_lin, o, step="exact", variant="away", capacity=1)
