"""DS-ADMM: the two-round message-passing form against the stacked-matrix symmetric
ADMM, r = 0 against plain ADMM, accuracy against centralized solutions, linear rate."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import distributed as D
from tests.distributed import _reference as ref

N_AGENTS = 30


def _small(key=0, n=6, m=4, d=3):
    k1, k2, k3 = jax.random.split(jax.random.key(key), 3)
    A = jax.random.normal(k1, (n, m, d))
    b = jax.random.normal(k2, (n, m))
    W = D.metropolis_hastings(D.erdos_renyi(k3, n, 0.5))
    x0 = jax.random.normal(jax.random.key(key + 7), (n, d))
    return A, b, W, x0


def _iterates(solver, x0, problem, steps):
    step = jax.jit(solver.step)
    state = jax.jit(solver.init)(x0, problem)
    out = []
    for _ in range(steps):
        state, _ = step(state, problem)
        out.append((np.asarray(state.u), np.asarray(state.x)))
    return state, out


@pytest.mark.parametrize("f_step", ["prox", "gradient"])
def test_message_passing_equals_stacked_symmetric_admm(f_step):
    A, b, W, x0 = _small()
    lam, beta, r, s, tau = 0.3, 0.7, 0.99, 1.0, 0.01
    problem = D.make_problem((A, b), W, lam)
    solver = D.ds_admm(D.LeastSquares(), D.L1(), beta=beta, r=r, s=s, tau=tau, f_step=f_step)
    _, ours = _iterates(solver, x0, problem, 40)
    theirs = ref.stacked_symmetric_admm(
        A, b, W, lam, x0, beta=beta, r=r, s=s, tau=tau, steps=40, f_step=f_step
    )
    for t, ((u, v), (u_ref, v_ref)) in enumerate(zip(ours, theirs, strict=True)):
        assert np.max(np.abs(u - u_ref)) <= 1e-12, (t, np.max(np.abs(u - u_ref)))
        assert np.max(np.abs(v - v_ref)) <= 1e-12, (t, np.max(np.abs(v - v_ref)))
    assert np.max(np.abs(theirs[-1][1] - theirs[0][1])) > 1e-2  # the iterates did move


def test_newton_prox_is_exact_on_least_squares():
    """One Newton step solves the quadratic prox exactly: the newton u-step reproduces
    the closed-form prox's iterates."""
    A, b, W, x0 = _small(key=5)
    problem = D.make_problem((A, b), W, 0.3)
    _, exact = _iterates(D.ds_admm(D.LeastSquares(), D.L1(), beta=0.7), x0, problem, 25)
    newton = D.ds_admm(D.LeastSquares(), D.L1(), beta=0.7, f_step="newton", newton_steps=1)
    _, ours = _iterates(newton, x0, problem, 25)
    for (u, v), (u_ref, v_ref) in zip(ours, exact, strict=True):
        np.testing.assert_allclose(u, u_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(v, v_ref, rtol=0, atol=1e-12)


def test_r_zero_is_plain_admm_on_the_same_constraints():
    A, b, W, x0 = _small(key=3)
    lam, beta, tau = 0.2, 1.3, 0.01
    problem = D.make_problem((A, b), W, lam)
    _, ours = _iterates(
        D.ds_admm(D.LeastSquares(), D.L1(), beta=beta, r=0.0, tau=tau), x0, problem, 30
    )
    plain = ref.stacked_plain_admm(A, b, W, lam, x0, beta=beta, tau=tau, steps=30)
    for (u, v), (u_ref, v_ref) in zip(ours, plain, strict=True):
        np.testing.assert_allclose(u, u_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(v, v_ref, rtol=0, atol=1e-12)
    _, sym = _iterates(
        D.ds_admm(D.LeastSquares(), D.L1(), beta=beta, r=0.99, tau=tau), x0, problem, 30
    )
    assert np.max(np.abs(sym[-1][1] - ours[-1][1])) > 1e-4  # r matters: the test can fail


def test_ledger_two_rounds_four_vectors_per_iteration():
    A, b, W, x0 = _small()
    problem = D.make_problem((A, b), W, 0.1)
    sol = jaxsolve.solve(
        D.ds_admm(D.LeastSquares(), D.L1(), beta=1.0), x0, problem, max_steps=17, tol=0.0
    )
    d = x0.shape[1]
    assert int(sol.num_steps) == 17
    assert [int(v) for v in sol.state.ledger] == [2 + 2 * 17, 2 + 4 * 17, (2 + 4 * 17) * d]


# --- accuracy against centralized solutions (breast_cancer, 30 agents) -----------------------


@pytest.fixture(scope="module")
def cancer():
    return D.breast_cancer(N_AGENTS)


def _graph(name):
    if name == "er05":
        return D.erdos_renyi(jax.random.key(0), N_AGENTS, 0.5)
    if name == "er02":
        return D.erdos_renyi(jax.random.key(0), N_AGENTS, 0.2)
    if name == "ring":
        return D.ring(N_AGENTS)
    return D.grid(5, 6)


def _accuracy(cancer, task, graph, max_steps):
    A, b = cancer
    W = D.metropolis_hastings(_graph(graph))
    if task == "lasso":
        lam = 3.0
        solver, x_star = D.ds_admm(D.LeastSquares(), D.L1()), ref.lasso(A, b, lam)
    else:
        lam = 3.0
        solver, x_star = D.ds_admm(D.Logistic(), D.L2Squared()), ref.logistic_l2(A, b, lam)
    problem = D.make_problem((A, b), W, lam)
    sol = jaxsolve.solve(
        solver, jnp.zeros((N_AGENTS, A.shape[2])), problem, tol=1e-11, max_steps=max_steps,
        history=True,
    )  # fmt: skip
    assert int(sol.status) == jaxsolve.Status.SUCCESS, (int(sol.num_steps), float(sol.error))
    X = np.asarray(sol.x)
    spread = np.linalg.norm(X - X.mean(0)) / (np.sqrt(N_AGENTS) * np.linalg.norm(x_star))
    assert spread <= 1e-8
    assert ref.consensus_distance(X, x_star) <= 1e-8
    return np.asarray(sol.history)[: int(sol.num_steps)]


def _assert_linear(errors):
    """Stable negative log-slope over the last half: the slopes of its two quarters agree."""
    k = len(errors)
    h = k // 2
    q = (k - h) // 2
    logs = np.log(errors)
    slope = lambda a, z: np.polyfit(np.arange(a, z), logs[a:z], 1)[0]
    s1, s2 = slope(h, h + q), slope(h + q, k)
    assert s1 < 0 and s2 < 0, (s1, s2)
    assert 0.5 <= s2 / s1 <= 2.0, (s1, s2)


_FAST = {("lasso", "er05"), ("logistic", "er02"), ("lasso", "ring"), ("logistic", "grid")}


@pytest.mark.parametrize(
    ("task", "graph"),
    [
        pytest.param(t, g, marks=() if (t, g) in _FAST else pytest.mark.slow)
        for t in ("lasso", "logistic")
        for g in ("er05", "er02", "grid", "ring")
    ],
)
def test_reaches_centralized_solution_linearly(cancer, task, graph):
    """Default beta rule and u-step (lasso: exact prox; logistic: Newton prox), 30 agents:
    consensus and distance to the centralized solution <= 1e-8, with a stable log-slope
    over the last half."""
    errors = _accuracy(cancer, task, graph, 60000)
    _assert_linear(errors)


def test_references_agree_with_scikit_learn(cancer):
    from sklearn.linear_model import Lasso, LogisticRegression

    A, b = cancer
    X, y, m = ref.stack(A, b)
    lam = 3.0
    # ours: 1/(2m)||Xw - y||^2 + lam||w||_1 = n * [1/(2N)||Xw - y||^2 + (lam/n)||w||_1]
    sk = Lasso(alpha=lam / N_AGENTS, fit_intercept=False, tol=1e-14, max_iter=100000).fit(X, y)
    np.testing.assert_allclose(ref.lasso(A, b, lam), sk.coef_, atol=1e-7)
    # ours: 1/m sum log(1 + e^-t) + lam/2||w||^2 = lam * [C sum log(...) + 1/2||w||^2], C = 1/(m lam)
    lr = LogisticRegression(C=1 / (m * lam), fit_intercept=False, tol=1e-12, max_iter=10000)
    lr.fit(X, y)
    np.testing.assert_allclose(ref.logistic_l2(A, b, lam), lr.coef_[0], atol=1e-6)


# --- bad input ---------------------------------------------------------------------------------


def test_bad_input_raises_before_tracing():
    A, b, W, _ = _small()
    with pytest.raises(ValueError, match="beta"):
        D.ds_admm(D.LeastSquares(), D.L1(), beta=0.0)
    with pytest.raises(ValueError, match="beta"):
        D.ds_admm(D.LeastSquares(), beta=-1.0)
    with pytest.raises(ValueError, match="tau"):
        D.ds_admm(D.LeastSquares(), tau=0.0)
    with pytest.raises(ValueError, match="convergent region"):
        D.ds_admm(D.LeastSquares(), r=1.0)
    with pytest.raises(ValueError, match="f_step"):
        D.ds_admm(D.Logistic(), f_step="prox")
    with pytest.raises(ValueError, match="newton_steps"):
        D.ds_admm(D.Logistic(), newton_steps=0)
    with pytest.raises(TypeError, match="loss"):
        D.ds_admm("least squares")
    with pytest.raises(ValueError, match="agent"):
        D.make_problem((A[:5], b[:5]), W, 0.1)
    disconnected = np.kron(np.eye(2), np.full((3, 3), 1 / 3))
    with pytest.raises(ValueError, match="disconnected"):
        D.make_problem((A, b), disconnected, 0.1)
    with pytest.raises(ValueError, match="doubly stochastic"):
        D.make_problem((A, b), np.asarray(W) * 1.1, 0.1)
    with pytest.raises(ValueError, match="symmetric"):
        D.make_problem((A, b), np.asarray(W) + np.triu(np.full_like(np.asarray(W), 1e-3), 1), 0.1)


@pytest.mark.slow  # implicit gradient against 2 finite-difference solves (10 s)
def test_implicit_gradient_matches_finite_differences():
    """d/db of a linear function of the decentralized logistic solution: implicit
    differentiation of `optimality` against central differences of tight solves."""
    k1, k2, k3 = jax.random.split(jax.random.key(4), 3)
    n, m, d = 5, 6, 3
    A = jax.random.normal(k1, (n, m, d))
    b0 = jnp.tanh(jax.random.normal(k2, (n, m)))  # soft labels: smooth in b
    W = D.metropolis_hastings(D.ring(n))
    c = jax.random.normal(k3, (n, d))
    solver = D.ds_admm(D.Logistic(), D.L2Squared())

    def loss(b):
        problem = D.Problem((A, b), jnp.asarray(W), jnp.asarray(0.5))
        sol = jaxsolve.solve(solver, jnp.zeros((n, d)), problem, tol=1e-13, max_steps=20000)
        return jnp.vdot(c, sol.x)

    direction = jax.random.normal(jax.random.key(8), (n, m))
    g = jax.grad(loss)(b0)
    eps = 1e-5
    fd = (loss(b0 + eps * direction) - loss(b0 - eps * direction)) / (2 * eps)
    assert abs(float(jnp.vdot(g, direction)) - float(fd)) <= 1e-6 * max(1.0, abs(float(fd)))
    assert abs(float(fd)) > 1e-3  # the derivative is not trivially zero
