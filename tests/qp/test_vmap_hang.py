"""Regression (issue 23): ``jax.jit(jax.vmap(lambda p: solve_qp(p, ...)))`` over 1024 QPs.

It hung for ever on XLA:CPU: the vmapped single-QP loop called jaxlib's batched LAPACK
Cholesky with the whole batch from inside a while loop, where its parallel batch map
waits on tasks no thread-pool worker picks up (see ``jaxsolve.qp.solve._vmappable_single``).
The case runs in a subprocess under a timeout (a hang must fail, not block the suite).
"""

import subprocess
import sys
import textwrap

import pytest

_PROGRAM = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jaxsolve.qp import solve_qp, problems
    from jaxsolve.qp.solve import kkt_residual

    base = problems.random_qp(jax.random.key(0), 20, 40)
    import sys
    lanes = int(sys.argv[1])
    history = sys.argv[2] == "history"
    qs = jax.random.normal(jax.random.key(1), (lanes, 20))
    batch = jax.vmap(lambda q: base._replace(q=q))(qs)
    sol = jax.jit(jax.vmap(lambda p: solve_qp(p, tol=1e-4, max_steps=20000, history=history)))(batch)
    jax.block_until_ready(sol)
    st = np.asarray(sol.status)
    # each lane's own KKT residual at the returned point, recomputed here
    P, A, l, u = (np.asarray(v) for v in (base.P, base.A, base.l, base.u))
    x, y = np.asarray(sol.x), np.asarray(sol.state.y)
    Ax = x @ A.T
    prim = np.max(np.maximum(Ax - u, 0) + np.maximum(l - Ax, 0), axis=1)
    dual = np.max(np.abs(x @ P + np.asarray(qs) + y @ A), axis=1)
    print("STATUS", np.bincount(st, minlength=6).tolist())
    print("RES", float(prim.max()), float(dual.max()))
    """
)


@pytest.mark.parametrize(
    "lanes,mode",
    [
        (256, "plain"),
        pytest.param(1024, "plain", marks=pytest.mark.slow),
        pytest.param(256, "history", marks=pytest.mark.slow),
    ],
)
def test_jit_vmap_solve_qp_many_lanes_returns(lanes, mode):
    """256 lanes hung as 1024 did (192 did not); the 1024-lane case of the issue is slow
    (about 25 s, mostly compilation), and so is ``history=True`` (the lanes then run one
    after another: it hung the same way)."""
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(lanes), mode],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["STATUS"] == str([lanes, 0, 0, 0, 0, 0])
    prim, dual = map(float, lines["RES"].split())
    assert prim <= 1e-3 and dual <= 1e-3
