"""The in-graph batch modes of jaxsolve.core.batch on a toy batched loop: each lane
counts to its own target; chunked lockstep, gathered application and straggler
compaction must give every lane its own answer, whatever the chunking."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.batch import apply_gathered, compact_widths, lockstep_rounds, run_compacted

_TARGET = jnp.asarray(np.random.default_rng(0).integers(1, 40, size=96), jnp.int32)


def test_lockstep_rounds_and_gathered_application():
    @jax.jit
    def run(target):
        pool = (jnp.zeros_like(target), target, jnp.zeros_like(target))  # count, target, marks
        const = jnp.zeros_like(target)

        def advance(p, _, run):  # frozen lanes: only the running ones count on
            return (p[0] + run.astype(jnp.int32), p[1], p[2])

        def mark(p, _, want):
            return (p[0], p[1], p[2] + want.astype(jnp.int32))

        out = lockstep_rounds(
            advance,
            pool,
            const,
            g=8,
            keep=2,
            tail=0,
            active=lambda p: p[0] < p[1],
            # a lane pauses at 5 until it is marked between rounds (a QP's polish)
            running=lambda p: (p[0] < p[1]) & ((p[0] < 5) | (p[2] > 0)),
            between=(lambda p: (p[0] >= 5) & (p[2] == 0) & (p[0] < p[1]), mark),
        )
        return out, apply_gathered(mark, out, const, out[0] > 30, 8)

    (count, _, marked), again = run(_TARGET)
    np.testing.assert_array_equal(np.asarray(count), np.asarray(_TARGET))
    np.testing.assert_array_equal(np.asarray(marked), np.asarray(_TARGET) > 5)
    np.testing.assert_array_equal(np.asarray(again[2] - marked), np.asarray(_TARGET) > 30)


def test_run_compacted_freezes_lanes_and_scatters_back():
    target = jnp.concatenate([_TARGET, jnp.full((104,), 3, jnp.int32)])  # 200 lanes

    def phase(lanes, carry, k, max_live):
        def cond(c):
            (count, t), _ = c
            return jnp.sum(count < t) > max_live

        def body(c):
            (count, t), k = c
            return (count + (count < t).astype(jnp.int32), t), k + 1

        return jax.lax.while_loop(cond, body, (carry, k))

    def run(t):
        carry = (jnp.zeros_like(t), t)
        return run_compacted(phase, None, carry, jnp.int32(0), lambda c: c[0] >= c[1])

    (count, _), steps = jax.jit(run)(target)
    assert compact_widths(200) == [200, 25]
    np.testing.assert_array_equal(np.asarray(count), np.asarray(target))
    assert int(steps) == int(target.max())


def test_one_width_rule_for_both_compaction_engines():
    """The host-driven `solve_batch(compact=)` and in-graph `run_compacted` shrink by the
    same rule: 1/8 of the width, rounded up to a multiple of the device count."""
    from jaxsolve.core.batch import _smaller_width, shrunk_width

    assert compact_widths(4096) == [4096, 512, 64, 8]
    assert [shrunk_width(w) for w in (4096, 512, 64)] == [512, 64, 8]
    assert shrunk_width(200, unit=8) == 32  # ceil(200/8) = 25 -> 32 for 8 devices
    # host engine: the narrowest step of that chain still holding the running lanes
    assert _smaller_width(60, 4096, 1) == 64
    assert _smaller_width(65, 4096, 1) == 512
    assert _smaller_width(3000, 4096, 1) == 4096
