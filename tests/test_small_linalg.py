"""The small-array kernels of `jaxsolve.small_linalg` against their jnp/lax counterparts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.small_linalg import eigh_small, small_einsum, top_k_smallest


@pytest.mark.parametrize("n", [1, 9, 50, 900])
def test_top_k_smallest_matches_lax_top_k(n):
    """The argmin rounds that replace ``lax.top_k`` (a full sort on CPU) give its values
    and indices, ties included (rounded data, constant data)."""
    rng = np.random.default_rng(n)
    k = min(9, n)
    for a in (rng.standard_normal(n), np.round(rng.standard_normal(n), 1), np.ones(n)):
        v1, i1 = jax.lax.top_k(-jnp.asarray(a), k)
        v2, i2 = top_k_smallest(jnp.asarray(a), k)
        np.testing.assert_array_equal(np.asarray(v2), np.asarray(v1))
        np.testing.assert_array_equal(np.asarray(i2), np.asarray(i1))


@pytest.mark.parametrize(
    "spec, sx, sy",
    [
        ("jia,iab->jib", (6, 7, 3), (7, 3, 3)),
        ("ib,icb->ic", (7, 4), (7, 4, 4)),
        ("kib,ab->kia", (5, 7, 4), (4, 4)),
        ("ia,kab->kib", (7, 3), (2, 3, 3)),
        ("ia,iab->ib", (7, 6), (7, 6, 6)),  # above UNROLL_MAX: the einsum itself
    ],
)
def test_small_einsum_matches_einsum(spec, sx, sy):
    """The unrolled multiply-adds that replace small per-row contractions give the
    einsum's numbers (to rounding), for every index arrangement K-means Newton uses."""
    k1, k2 = jax.random.split(jax.random.key(len(spec) + sx[0]))
    x, y = jax.random.normal(k1, sx), jax.random.normal(k2, sy)
    ref = jnp.einsum(spec, x, y)
    got = small_einsum(spec, x, y)
    assert got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("p", [2, 3])
def test_eigh_small_jacobi_accuracy(p):
    """The fixed-sweep Jacobi eigen-decomposition of the 2 x 2 / 3 x 3 blocks: random,
    graded (eigenvalues 1, 1e-4, 1e-8 in a random basis), repeated and diagonal blocks
    are reconstructed to 1e-14 relative with orthonormal vectors, and the eigenvalues
    equal LAPACK's."""
    rng = np.random.default_rng(p)
    m = 500
    a = rng.standard_normal((m, p, p))
    blocks = [a + a.transpose(0, 2, 1)]
    qs = np.linalg.qr(rng.standard_normal((m, p, p)))[0]
    for spec in ([1.0, 1e-4, 1e-8], [1.0, 1.0, -2.0], [3.0, 3.0, 3.0]):
        d = np.asarray(spec[:p]) * rng.uniform(0.5, 2.0, (m, 1))
        blocks.append(np.einsum("iab,ib,icb->iac", qs, d, qs))
    blocks.append(np.stack([np.diag(v) for v in rng.standard_normal((m, p))]))
    b = np.concatenate(blocks)
    e, v = map(np.asarray, eigh_small(jnp.asarray(b)))
    scale = np.max(np.abs(b), axis=(1, 2))
    rec = np.einsum("iab,ib,icb->iac", v, e, v)
    assert np.max(np.max(np.abs(rec - b), axis=(1, 2)) / scale) <= 1e-14
    assert np.max(np.abs(np.einsum("iab,iac->ibc", v, v) - np.eye(p))) <= 1e-14
    ref = np.linalg.eigvalsh(b)
    assert np.max(np.abs(np.sort(e, axis=1) - ref).max(axis=1) / scale) <= 1e-14
