"""Bad input to ``solve_qp`` (issue 23): an error naming the argument, or an honest
non-SUCCESS status; and SUCCESS recomputed from the returned point on the problem as
given (badly scaled rows, indefinite P)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import Status
from jaxsolve.qp import QP, problems, solve_qp
from tests.qp._refs import proxsuite_ref

_P = jnp.diag(jnp.array([2.0, 1.0, 3.0]))
_BOX = QP(_P, jnp.array([1.0, -1.0, 0.5]), jnp.eye(3), -jnp.ones(3), jnp.ones(3))


def _bf16(qp):
    return jax.tree.map(lambda v: v.astype(jnp.bfloat16), qp)


def _ws_from_other():
    other = QP(jnp.eye(4), jnp.ones(4), jnp.eye(4), -jnp.ones(4), jnp.ones(4))
    return solve_qp(other, max_steps=50)


# (case, call, error type, message fragment that names the argument)
ERRORS = [
    ("nan q", lambda: solve_qp(_BOX._replace(q=_BOX.q.at[0].set(jnp.nan))), ValueError, "q"),
    ("inf P", lambda: solve_qp(_BOX._replace(P=_BOX.P.at[0, 0].set(jnp.inf))), ValueError, "P"),
    ("inf A", lambda: solve_qp(_BOX._replace(A=_BOX.A.at[0, 0].set(jnp.inf))), ValueError, "A"),
    ("l > u", lambda: solve_qp(_BOX._replace(l=_BOX.l.at[1].set(2.0))), ValueError, "l must"),
    ("short q", lambda: solve_qp(_BOX._replace(q=jnp.zeros(4))), ValueError, "q must"),
    (
        "short l",
        lambda: solve_qp(_BOX._replace(l=-jnp.ones(2), u=jnp.ones(2))),
        ValueError,
        "l and u",
    ),
    ("int P", lambda: solve_qp(_BOX._replace(P=jnp.eye(3, dtype=jnp.int32))), TypeError, "P"),
    ("scalar q", lambda: solve_qp(QP(jnp.ones((1, 1)), 1.0)), ValueError, "q must have shape"),
    (
        "complex QP",
        lambda: solve_qp(jax.tree.map(lambda v: v.astype(jnp.complex128), _BOX)),
        TypeError,
        "P must be real",
    ),
    ("bfloat16", lambda: solve_qp(_bf16(_BOX)), TypeError, "bfloat16"),
    (
        "float16 q only",
        lambda: solve_qp(_BOX._replace(q=_BOX.q.astype(jnp.float16))),
        TypeError,
        r"^q has dtype float16: .*; pass the QP converted",
    ),
    ("None A", lambda: solve_qp(QP(_P, _BOX.q, None, _BOX.l, _BOX.u)), TypeError, "A is None"),
    (
        "empty batch",
        lambda: solve_qp(jax.tree.map(lambda v: jnp.zeros((0, *v.shape)), _BOX)),
        ValueError,
        "empty batch",
    ),
    ("tol -1", lambda: solve_qp(_BOX, tol=-1.0), ValueError, "tol"),
    ("tol nan", lambda: solve_qp(_BOX, tol=float("nan")), ValueError, "tol"),
    ("max_steps 0", lambda: solve_qp(_BOX, max_steps=0), ValueError, "max_steps"),
    ("x0 shape", lambda: solve_qp(_BOX, x0=jnp.zeros(5)), ValueError, "x0"),
    (
        "warm start size",
        lambda: solve_qp(_BOX, warm_start=_ws_from_other()),
        ValueError,
        "warm_start",
    ),
    (
        "indefinite P (box)",
        lambda: solve_qp(_BOX._replace(P=jnp.diag(jnp.array([1.0, -1.0, 1.0])))),
        ValueError,
        "P is not positive semidefinite",
    ),
    (
        "indefinite P (free)",
        lambda: solve_qp(
            QP(
                jnp.diag(jnp.array([1.0, -1.0])),
                jnp.ones(2),
                jnp.zeros((0, 2)),
                jnp.zeros(0),
                jnp.zeros(0),
            )
        ),
        ValueError,
        "P is not positive semidefinite",
    ),
]


@pytest.mark.parametrize("case,call,err,match", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input_raises_naming_the_argument(case, call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_indefinite_p_under_jit_is_breakdown_not_success():
    """Traced P cannot be checked before tracing: the run ends BREAKDOWN at once (it was
    SUCCESS at x = 0, f = 0, where the minimum over the box is -0.5)."""
    qp = _BOX._replace(P=jnp.diag(jnp.array([1.0, -1.0, 1.0])), q=jnp.zeros(3))
    sol = jax.jit(lambda p: solve_qp(p))(qp)
    assert int(sol.status) == Status.BREAKDOWN


def test_nan_under_jit_is_not_success():
    qp = _BOX._replace(q=_BOX.q.at[0].set(jnp.nan))
    sol = jax.jit(lambda p: solve_qp(p))(qp)
    assert int(sol.status) != Status.SUCCESS


def _with_box(key, n=10, meq=4):
    qp = problems.eq_qp(key, n, meq)
    A = jnp.concatenate([qp.A, jnp.eye(n)])
    return QP(
        qp.P, qp.q, A, jnp.concatenate([qp.l, -jnp.ones(n)]), jnp.concatenate([qp.u, jnp.ones(n)])
    )


def test_duplicated_equality_row_scaled_1e8_success_means_every_row_meets_tol():
    """An equality row duplicated with the copy scaled by 1e8: the error was relative to
    the largest row, and SUCCESS came with another row violated by 0.023 and the objective
    off (-2.31605 vs -2.30326). Every row now meets tol against its own size."""
    base = _with_box(jax.random.key(1))
    A, l, u = base.A, base.l, base.u
    qp = base._replace(
        A=jnp.concatenate([A, 1e8 * A[:1]]),
        l=jnp.concatenate([l, 1e8 * l[:1]]),
        u=jnp.concatenate([u, 1e8 * u[:1]]),
    )
    x_ref, _ = proxsuite_ref(base)
    tol = 1e-4
    sol = solve_qp(qp, tol=tol)
    assert int(sol.status) == Status.SUCCESS
    x = np.asarray(sol.x)
    Ax = np.asarray(qp.A) @ x
    viol = np.maximum(Ax - np.asarray(qp.u), 0) + np.maximum(np.asarray(qp.l) - Ax, 0)
    scale = 1 + np.maximum(np.abs(Ax), np.max(np.abs(np.asarray(qp.A)), axis=1) * np.max(np.abs(x)))
    assert np.max(viol / scale) <= tol
    f, f_ref = float(base.objective(sol.x)), float(base.objective(x_ref))
    assert abs(f - f_ref) <= 1e-3 * (1 + abs(f_ref))


def test_single_equality_row_scaled_1e8_matches_reference():
    base = _with_box(jax.random.key(1))
    s = jnp.ones(base.m).at[0].set(1e8)
    qp = base._replace(A=base.A * s[:, None], l=base.l * s, u=base.u * s)
    x_ref, _ = proxsuite_ref(base)
    sol = solve_qp(qp, tol=1e-6)
    assert int(sol.status) == Status.SUCCESS
    np.testing.assert_allclose(sol.x, x_ref, atol=1e-5)


def test_unconstrained_qp_and_zero_rows():
    """``QP(P, q)`` is the unconstrained QP (x = -P^-1 q); explicit zero-row A, l, u mean
    the same (they aborted the process inside XLA); A, l, u are all or nothing."""
    with jax.enable_x64(True):
        P, q, ref = _unconstrained()
        for qp in (QP(P, q), QP(P, q, jnp.zeros((0, 2)), jnp.zeros(0), jnp.zeros(0))):
            sol = solve_qp(qp)
            assert int(sol.status) == Status.SUCCESS
            np.testing.assert_allclose(np.asarray(sol.x), ref, rtol=1e-8)
        with pytest.raises(TypeError, match="l is None"):
            solve_qp(QP(P, q, jnp.ones((1, 2))))


@pytest.mark.slow  # three more compiles (batch, vmap, the bare solver)
def test_unconstrained_qp_batched_vmapped_and_direct():
    with jax.enable_x64(True):
        P, q, ref = _unconstrained()
        batch = solve_qp(QP(jnp.stack([P, P]), jnp.stack([q, -q])))
        np.testing.assert_allclose(np.asarray(batch.x), [ref, -ref], rtol=1e-8)
        mapped = jax.vmap(lambda c: solve_qp(QP(P, c)).x)(jnp.stack([q, -q]))
        np.testing.assert_allclose(np.asarray(mapped), [ref, -ref], rtol=1e-8)
        # the solver itself, without solve_qp's checks, takes QP(P, q) too
        from jaxsolve import solve
        from jaxsolve.qp import flexqp

        direct = solve(flexqp(), jnp.zeros(2), QP(P, q), tol=1e-9)
        np.testing.assert_allclose(np.asarray(direct.x), ref, rtol=1e-7)


def _unconstrained():
    P = jnp.array([[2.0, 0.5], [0.5, 1.0]])
    q = jnp.array([1.0, -1.0])
    return P, q, np.linalg.solve(np.asarray(P), -np.asarray(q))


def test_generators_default_to_jax_default_float():
    """Without x64 the generators build float32 (a float64 default warned and truncated);
    with x64 they keep float64."""
    import warnings

    key = jax.random.key(0)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert problems.random_qp(key, 3, 4).P.dtype == jnp.float32
        assert problems.mpc(key, 2, T=2).q.dtype == jnp.float32
    assert problems.random_qp(key, 3, 4).P.dtype == jnp.float64


def test_nested_lists_are_a_qp():
    """QP fields given as nested lists (raised 'Cannot determine dtype')."""
    lists = QP(*(np.asarray(v).tolist() for v in _BOX))
    sol = solve_qp(lists)
    assert int(sol.status) == Status.SUCCESS
    np.testing.assert_allclose(np.asarray(sol.x), [-0.5, 1.0, -1 / 6], atol=1e-6)
