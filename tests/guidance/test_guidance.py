import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve.guidance import (
    feature_energy,
    guided_step,
    latent_optimizer,
    nearest_match,
)

KINDS = ("dragon", "cosine", "l2")


def _ref(n=12, c=5, seed=0):
    return jax.random.normal(jax.random.key(seed), (n, c))


# --- a tiny DDIM sampler on a linear toy denoiser ------------------------------------------

T = 10
ALPHA_BAR = jnp.linspace(0.05, 0.99, T + 1)[::-1]  # alpha_bar[T] small (noisy), [0] clean


def _ddim(eps_fn):
    def step(z, t):
        ab, ab_prev = ALPHA_BAR[t], ALPHA_BAR[t - 1]
        eps = eps_fn(z, t)
        x0 = (z - jnp.sqrt(1 - ab) * eps) / jnp.sqrt(ab)
        return jnp.sqrt(ab_prev) * x0 + jnp.sqrt(1 - ab_prev) * eps

    return step


def _sample(step, zT):
    def body(z, t):
        return step(z, t), None

    z, _ = jax.lax.scan(body, zT, jnp.arange(T, 0, -1))
    return z


def _pixelwise_eps(z, t):  # a linear denoiser acting on each pixel alone
    return 0.3 * z * (1 + 0.05 * t)


W_MIX = 0.1 * jax.random.normal(jax.random.key(7), (64, 64))


def _mixing_eps(z, t):  # a linear denoiser that mixes all pixels
    return (W_MIX @ z.reshape(-1)).reshape(z.shape) * (1 + 0.05 * t)


def _pixels(z):  # identity feature map of an 8x8 latent: 64 points, 1 channel
    return z.reshape(-1, 1)


# --- the energy ----------------------------------------------------------------------------


def test_l2_identity_guidance_converges_to_reference():
    ref = _ref()
    opt = latent_optimizer(lambda z: z, kind="l2", matcher="identity", stepsize=2.0)
    sol = jaxsolve.solve(opt, jnp.zeros_like(ref), (ref, None), tol=1e-10, max_steps=500)
    assert sol.status == jaxsolve.Status.SUCCESS
    np.testing.assert_allclose(sol.x, ref, atol=1e-8)


def test_pivot_gives_the_lam_weighted_midpoint():
    ref = _ref()
    pivot = _ref(seed=1)
    lam, p = 0.3, 2.0
    n = ref.shape[0]
    opt = latent_optimizer(lambda z: z, kind="l2", matcher="identity", lam=lam, p=p, stepsize=1.0)
    sol = jaxsolve.solve(opt, jnp.zeros_like(ref), (ref, pivot), tol=1e-11, max_steps=2000)
    # grad: (2p/n)(z - ref) + lam (z - pivot) = 0
    a = 2 * p / n
    expected = (a * ref + lam * pivot) / (a + lam)
    assert sol.status == jaxsolve.Status.SUCCESS
    np.testing.assert_allclose(sol.x, expected, atol=1e-9)
    assert float(sol.state.error) < 1e-10


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("matcher", ("nearest", "identity"))
def test_no_gradient_reaches_the_reference(kind, matcher):
    ref = _ref()
    gen = _ref(seed=3)
    g_ref = jax.grad(lambda r: feature_energy(gen, r, kind=kind, matcher=matcher))(ref)
    np.testing.assert_array_equal(g_ref, 0.0)
    g_gen = jax.grad(lambda f: feature_energy(f, ref, kind=kind, matcher=matcher))(gen)
    assert float(jnp.linalg.norm(g_gen)) > 1e-3


def test_nearest_matcher_finds_a_permutation():
    ref = _ref(n=40, c=16)
    perm = jax.random.permutation(jax.random.key(4), 40)
    gen = 1.7 * ref[perm] + 0.01 * jax.random.normal(jax.random.key(5), ref.shape)
    np.testing.assert_array_equal(nearest_match(gen, ref), perm)
    e = feature_energy(gen, ref, kind="dragon", p=8.5)
    e_true = feature_energy(gen, ref[perm], kind="dragon", matcher="identity", p=8.5)
    np.testing.assert_allclose(e, e_true, rtol=1e-12)
    # a masked-out reference point is never matched
    mask_ref = jnp.arange(40) != perm[0]
    assert int(nearest_match(gen, ref, mask_ref=mask_ref)[0]) != int(perm[0])


def test_reverse_matcher_on_a_subset():
    # the reference is a permuted subset of the generated points plus distractors
    gen = _ref(n=30, c=16, seed=6)
    perm = jax.random.permutation(jax.random.key(7), 30)[:10]
    ref = 0.5 * gen[perm]
    got = feature_energy(gen, ref, matcher="reverse", kind="cosine")
    np.testing.assert_allclose(got, 0.0, atol=1e-12)
    g = jax.grad(lambda f: feature_energy(f, ref, matcher="reverse", kind="dragon"))(gen + 0.1)
    touched = np.flatnonzero(np.abs(np.asarray(g)).sum(1) > 0)
    np.testing.assert_array_equal(touched, np.sort(np.asarray(perm)))


def test_energy_values():
    ref = _ref()
    np.testing.assert_allclose(feature_energy(ref, ref, kind="dragon", p=8.5), 8.5 / 2)
    np.testing.assert_allclose(feature_energy(ref, ref, kind="cosine"), 0.0, atol=1e-12)
    np.testing.assert_allclose(feature_energy(-ref, ref, kind="cosine", matcher="identity"), 2.0)
    gen = _ref(seed=2)
    w = jnp.zeros(12).at[:3].set(1.0)
    got = feature_energy(gen, ref, kind="l2", matcher="identity", mask_gen=w)
    np.testing.assert_allclose(got, jnp.sum((gen[:3] - ref[:3]) ** 2) / 3, rtol=1e-12)
    # spatial maps are flattened over their leading axes
    np.testing.assert_allclose(
        feature_energy(gen.reshape(3, 4, 5), ref), feature_energy(gen, ref), rtol=1e-12
    )


# --- guided sampling -----------------------------------------------------------------------


def _guided(eps_fn, mask, ref, scale=0.5):
    return guided_step(
        _ddim(eps_fn), _pixels, ref, scale=scale, t_threshold=7, mask=mask, kind="l2",
        matcher="identity",
    )  # fmt: skip


def test_mask_leaves_outside_pixels_unguided():
    zT = jax.random.normal(jax.random.key(8), (8, 8))
    ref = jnp.ones((64, 1))
    mask = jnp.zeros((8, 8)).at[2:5, 3:7].set(1.0)
    out = mask == 0
    # one step with a pixel-mixing denoiser: outside the mask exactly the unguided step
    z5 = jax.random.normal(jax.random.key(9), (8, 8))
    g1 = _guided(_mixing_eps, mask, ref)(z5, 5)
    u1 = _ddim(_mixing_eps)(z5, 5)
    np.testing.assert_array_equal(np.asarray(g1)[out], np.asarray(u1)[out])
    assert float(jnp.max(jnp.abs(g1 - u1))) > 1e-2
    # a whole trajectory with a pixelwise denoiser: the background is the unguided sample
    g = _sample(_guided(_pixelwise_eps, mask, ref), zT)
    u = _sample(_ddim(_pixelwise_eps), zT)
    np.testing.assert_allclose(np.asarray(g)[out], np.asarray(u)[out], atol=1e-6, rtol=0)
    inside = ~out
    # the guided region moved toward the reference (all ones)
    assert np.mean(np.abs(np.asarray(g)[inside] - 1)) < np.mean(np.abs(np.asarray(u)[inside] - 1))


def test_threshold_turns_guidance_off():
    z = jax.random.normal(jax.random.key(10), (8, 8))
    ref = jnp.ones((64, 1))
    g = _guided(_mixing_eps, None, ref)
    np.testing.assert_array_equal(g(z, 8), _ddim(_mixing_eps)(z, 8))
    assert float(jnp.max(jnp.abs(g(z, 3) - _ddim(_mixing_eps)(z, 3)))) > 1e-3


def test_time_dependent_features_and_inner_solver_in_a_sampler():
    ref = jnp.zeros((64, 1))
    seen = []

    def features(z, t):
        seen.append(t)
        return (z * (1.0 + t)).reshape(-1, 1)

    step = guided_step(
        _ddim(_mixing_eps), features, ref, scale=0.1, t_threshold=7, kind="l2",
        matcher="identity", feature_time=True,
    )  # fmt: skip
    z = jax.random.normal(jax.random.key(14), (8, 8))
    delta = _ddim(_mixing_eps)(z, 3) - step(z, 3)
    np.testing.assert_allclose(delta, 0.1 * 2 * 16 * z / 64, rtol=1e-12)  # grad of mean (4z)^2
    assert seen
    # a few inner gradient steps on the energy per sampling step, under jit
    opt = latent_optimizer(_pixels, stepsize=0.5, mask=jnp.ones((8, 8)))
    refine = jax.jit(
        lambda z: jaxsolve.solve(opt, _ddim(_mixing_eps)(z, 3), (ref, None), max_steps=3).x
    )
    out = refine(z)
    base = _ddim(_mixing_eps)(z, 3)
    np.testing.assert_allclose(out, base * (1 - 0.5 * 2 / 64) ** 3, rtol=1e-12)


def test_vmap_batch_of_256_equals_the_loop():
    zT = jax.random.normal(jax.random.key(11), (256, 8, 8))
    ref = jax.random.normal(jax.random.key(12), (64, 4))
    proj = jax.random.normal(jax.random.key(13), (1, 4))

    def features(z):  # a nonlinear feature map: 64 points x 4 channels
        return jnp.tanh(z.reshape(-1, 1) * proj + 0.1)

    step = guided_step(
        _ddim(_mixing_eps), features, ref, scale=0.2, t_threshold=7, kind="dragon", p=8.5,
        alpha=2.0,
    )  # fmt: skip
    batch = jax.jit(jax.vmap(lambda z: _sample(step, z)))(zT)
    one = jax.jit(lambda z: _sample(step, z))
    for i in (0, 101, 255):
        np.testing.assert_allclose(batch[i], one(zT[i]), rtol=1e-10, atol=1e-12)
    unguided = jax.vmap(lambda z: _sample(_ddim(_mixing_eps), z))(zT)
    assert float(jnp.max(jnp.abs(batch - unguided))) > 1e-3


def test_per_sample_references_under_vmap_equal_the_loop():
    """The bench's population form: `guided_step` built inside the vmapped sampler, one
    reference per lane and the scale, threshold and p as traced arguments (one compile for
    a sweep), equals building it per lane with concrete values."""
    zT = jax.random.normal(jax.random.key(31), (6, 8, 8))
    refs = jax.random.normal(jax.random.key(32), (6, 64, 4))
    proj = jax.random.normal(jax.random.key(33), (1, 4))

    def features(z):
        return jnp.tanh(z.reshape(-1, 1) * proj + 0.1)

    def sample(z, ref, scale, t_thr, p):
        step = guided_step(
            _ddim(_mixing_eps), features, ref, scale=scale, t_threshold=t_thr, kind="dragon",
            p=p, alpha=2.0,
        )  # fmt: skip
        return _sample(step, z)

    batch = jax.jit(jax.vmap(sample, in_axes=(0, 0, None, None, None)))
    for scale, t_thr, p in ((0.2, 7.0, 8.5), (0.5, 4.0, 3.0)):
        out = batch(zT, refs, scale, t_thr, p)
        one = jax.jit(lambda z, r, s=scale, c=t_thr, q=p: sample(z, r, s, c, q))  # concrete
        for i in range(6):
            np.testing.assert_allclose(out[i], one(zT[i], refs[i]), rtol=1e-10, atol=1e-12)
    # each lane went toward its own reference: lanes 0 and 1 swapped references differ
    swapped = batch(zT[:2], refs[1::-1], 0.5, 4.0, 3.0)
    assert float(jnp.max(jnp.abs(swapped[0] - out[0]))) > 1e-3


def test_energy_under_vmap_and_jit_skips_checks():
    ref = _ref()
    gens = jax.random.normal(jax.random.key(20), (6, 12, 5))
    masks = jnp.ones((6, 12))
    f = jax.jit(jax.vmap(lambda g, m: feature_energy(g, ref, mask_gen=m)))
    np.testing.assert_allclose(f(gens, masks)[2], feature_energy(gens[2], ref), rtol=1e-12)


def test_float32_stays_float32():
    ref = _ref().astype(jnp.float32)
    opt = latent_optimizer(lambda z: z, stepsize=2.0)
    sol = jaxsolve.solve(opt, jnp.zeros_like(ref), (ref, None), tol=1e-5, max_steps=200)
    assert sol.x.dtype == jnp.float32
    np.testing.assert_allclose(sol.x, ref, atol=1e-4)
    e = feature_energy(ref, ref, kind="dragon")
    assert e.dtype == jnp.float32
