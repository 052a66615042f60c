"""Guidance family on hostile input: a clear error naming the argument, an honest
status, or a SUCCESS whose masked gradient is recomputed here."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve
from jaxsolve import Status
from jaxsolve.guidance import (
    cosine_similarity,
    feature_energy,
    guidance_energy,
    guided_step,
    latent_optimizer,
    nearest_match,
)

REF = jax.random.normal(jax.random.key(0), (12, 5))
GEN = jax.random.normal(jax.random.key(1), (12, 5))
R64 = jax.random.normal(jax.random.key(2), (64, 1))  # pixel features of an 8x8 latent


def _pixels(z):
    return z.reshape(-1, 1)


def _step(z, t):
    return 0.9 * z


def _gs(**kw):
    return guided_step(_step, _pixels, R64, **{"scale": 1.0, "t_threshold": 5, **kw})


_IDENT = lambda z: z  # noqa: E731
_OPT = latent_optimizer(_IDENT, stepsize=0.5)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # feature_energy: shapes, NaN/inf, dtypes, empty, masks, options
        (lambda: feature_energy(GEN[:, :3], REF), ValueError, "features_gen and features_ref"),
        (lambda: feature_energy(GEN[0], REF), ValueError, r"features_gen must have shape"),
        (lambda: feature_energy(GEN[:0], REF), ValueError, "features_gen has an empty axis"),
        (lambda: feature_energy(GEN[:5], REF, matcher="identity"), ValueError, "points in"),
        (lambda: feature_energy(GEN, REF.at[0, 0].set(jnp.nan)), ValueError, "features_ref"),
        (lambda: feature_energy(GEN, REF.at[0, 0].set(jnp.inf)), ValueError, "features_ref"),
        (lambda: feature_energy(GEN.at[0, 0].set(jnp.nan), REF), ValueError, "features_gen"),
        (lambda: feature_energy(jnp.ones((12, 5), int), REF), TypeError, "features_gen"),
        (lambda: feature_energy(GEN.astype(complex), REF), TypeError, "features_gen must be real"),
        (lambda: feature_energy(GEN, REF.astype(complex)), TypeError, "features_ref must be real"),
        (lambda: feature_energy(GEN, REF, mask_gen=jnp.zeros(12)), ValueError, "mask_gen is empty"),
        (lambda: feature_energy(GEN, REF, mask_gen=jnp.full(12, jnp.inf)), ValueError, "mask_gen"),
        (lambda: feature_energy(GEN, REF, mask_gen=jnp.ones(12, complex)), TypeError, "mask_gen"),
        (lambda: feature_energy(GEN, REF, mask_ref=jnp.zeros(3)), ValueError, "mask_ref"),
        (lambda: feature_energy(GEN, REF, mask_ref=-jnp.ones(12)), ValueError, "mask_ref"),
        (
            lambda: feature_energy(
                GEN, REF, matcher="identity", mask_gen=jnp.arange(12) < 6, mask_ref=jnp.arange(12) >= 6
            ),
            ValueError,
            "overlap",
        ),
        (lambda: feature_energy(GEN, REF, kind="l1"), ValueError, "kind"),
        (lambda: feature_energy(GEN, REF, matcher="hungarian"), ValueError, "matcher"),
        (lambda: feature_energy(GEN, REF, p=0.0), ValueError, "p must be positive"),
        (lambda: feature_energy(GEN, REF, p=float("inf")), ValueError, "p must be positive"),
        (lambda: feature_energy(GEN, REF, p=jnp.ones(3)), ValueError, "p must be a scalar"),
        (lambda: feature_energy(GEN, REF, alpha=-1.0), ValueError, "alpha"),
        # nearest_match and cosine_similarity
        (lambda: nearest_match(GEN, REF.at[0, 0].set(jnp.nan)), ValueError, "features_ref"),
        (lambda: nearest_match(GEN.astype(complex), REF), TypeError, "features_gen must be real"),
        (lambda: nearest_match(GEN, REF, mask_ref=jnp.ones(3)), ValueError, r"mask_ref .*\(12,\),"),
        (lambda: cosine_similarity(GEN[:, :3], REF), ValueError, "same number of channels"),
        (lambda: cosine_similarity(GEN[0], REF), ValueError, "features_gen must have shape"),
        (lambda: cosine_similarity(jnp.ones((3, 5), int), REF), TypeError, "features_gen"),
        # guidance_energy
        (lambda: guidance_energy(GEN, 3, REF), TypeError, "feature_fn must be callable"),
        (lambda: guidance_energy(GEN, _IDENT, REF, pivot=jnp.zeros(3), lam=1.0), ValueError, "pivot"),
        (lambda: guidance_energy(GEN, _IDENT, REF, pivot=GEN, lam=-1.0), ValueError, "lam"),
        (lambda: guidance_energy(jnp.ones((12, 5), int), _IDENT, REF), TypeError, "z must be"),
        # guided_step: construction
        (lambda: guided_step(None, _pixels, R64, scale=1, t_threshold=1), TypeError, "step_fn"),
        (lambda: guided_step(_step, 3, R64, scale=1, t_threshold=1), TypeError, "feature_fn"),
        (lambda: _gs(scale=-1.0), ValueError, "scale"),
        (lambda: _gs(scale=float("nan")), ValueError, "scale"),
        (lambda: _gs(scale=float("inf")), ValueError, "scale"),
        (lambda: _gs(t_threshold=float("nan")), ValueError, "t_threshold"),
        (lambda: _gs(lam=-1.0), ValueError, "lam"),
        (lambda: _gs(lam=float("nan")), ValueError, "lam"),
        (lambda: guided_step(_step, _pixels, R64.at[1].set(jnp.nan), scale=1, t_threshold=1), ValueError, "reference"),
        (lambda: guided_step(_step, _pixels, R64.at[1].set(jnp.inf), scale=1, t_threshold=1), ValueError, "reference"),
        (lambda: guided_step(_step, _pixels, R64.astype(complex), scale=1, t_threshold=1), TypeError, "reference"),
        (lambda: guided_step(_step, _pixels, R64[:, 0], scale=1, t_threshold=1), ValueError, "reference must have"),
        (lambda: guided_step(_step, _pixels, R64[:0], scale=1, t_threshold=1), ValueError, "reference has an empty"),
        (lambda: _gs(pivot=jnp.full((8, 8), jnp.nan), lam=1.0), ValueError, "pivot contains"),
        (lambda: _gs(pivot=jnp.zeros((8, 8), int), lam=1.0), TypeError, "pivot"),
        (lambda: _gs(mask=-jnp.ones((8, 8))), ValueError, "mask"),
        (lambda: _gs(mask=jnp.ones((8, 8), complex)), TypeError, "mask must hold real"),
        (lambda: _gs(mask_ref=jnp.ones(3)), ValueError, "mask_ref"),
        (lambda: _gs(mask_gen=-jnp.ones(64)), ValueError, "mask_gen"),
        (lambda: _gs(knd="l2"), TypeError, "energy option"),
        (lambda: _gs(kind="x"), ValueError, "kind"),
        (lambda: _gs(feature_time=1), TypeError, "feature_time"),
        # guided_step: the returned step on a bad latent
        (lambda: _gs()(jnp.zeros((8, 8), int), 1), TypeError, "z must be a real"),
        (lambda: _gs(mask=jnp.ones((3, 3)))(jnp.zeros((8, 8)), 1), ValueError, "mask .* must broadcast"),
        (lambda: _gs(mask=jnp.ones((2, 8, 8)))(jnp.zeros((8, 8)), 1), ValueError, "must broadcast"),
        (
            lambda: guided_step(lambda z, t: z[:4], _pixels, R64, scale=1, t_threshold=5)(jnp.zeros((8, 8)), 1),
            ValueError,
            "step_fn must return z_next of z's shape",
        ),
        (
            lambda: guided_step(_step, lambda z: z.reshape(-1, 2), R64, scale=1, t_threshold=5)(jnp.zeros((8, 8)), 1),
            ValueError,
            "same number of channels",
        ),
        # latent_optimizer: construction and init
        (lambda: latent_optimizer("pixels"), TypeError, "feature_fn"),
        (lambda: latent_optimizer(_IDENT, stepsize=0.0), ValueError, "stepsize"),
        (lambda: latent_optimizer(_IDENT, stepsize=float("inf")), ValueError, "stepsize"),
        (lambda: latent_optimizer(_IDENT, lam=-0.5), ValueError, "lam"),
        (lambda: latent_optimizer(_IDENT, mask=jnp.full((12, 5), jnp.nan)), ValueError, "mask"),
        (lambda: latent_optimizer(_IDENT, mask=-jnp.ones((12, 5))), ValueError, "mask"),
        (lambda: latent_optimizer(_IDENT, mask_gen=jnp.zeros(12)), ValueError, "mask_gen is empty"),
        (lambda: latent_optimizer(_IDENT, kind="l1"), ValueError, "kind"),
        (lambda: jaxsolve.solve(_OPT, jnp.zeros((12, 5), int), (REF, None)), TypeError, "x0 must be"),
        (lambda: jaxsolve.solve(_OPT, jnp.zeros((12, 5), complex), (REF, None)), TypeError, "x0 must be"),
        (lambda: jaxsolve.solve(_OPT, jnp.zeros((3, 5)), (REF, None)), ValueError, "points in features_gen"),
        (lambda: jaxsolve.solve(_OPT, jnp.zeros((12, 5)), REF), TypeError, "args must be the pair"),
        (
            lambda: jaxsolve.solve(latent_optimizer(_IDENT, lam=1.0), jnp.zeros((12, 5)), (REF, jnp.zeros(3))),
            ValueError,
            "pivot must have the shape",
        ),
    ],
)  # fmt: skip
def test_bad_arguments_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_a_zero_feature_vector_has_a_zero_gradient():
    """x / ||x|| has no direction at x = 0: the gradient there is 0, not 1/sqrt(tiny)."""
    g = jax.grad(lambda f: feature_energy(f, REF, kind="cosine"))(GEN.at[0].set(0.0))
    assert np.all(np.isfinite(np.asarray(g)))
    np.testing.assert_array_equal(np.asarray(g[0]), 0.0)
    assert float(jnp.max(jnp.abs(_gs()(jnp.zeros((8, 8)), 1)))) == 0.0


_FAST = latent_optimizer(_IDENT, stepsize=5.0)  # same compiled solve: stepsize is a leaf


@pytest.mark.parametrize(
    "opt, x0, ref, status",
    [
        (_OPT, jnp.full((12, 5), jnp.nan), REF, Status.NONFINITE),
        (_OPT, jnp.zeros((12, 5)), REF.at[0, 0].set(jnp.nan), Status.NONFINITE),
        (_OPT, jnp.zeros((12, 5)), REF.at[0, 0].set(jnp.inf), Status.NONFINITE),
        # a start 1e8 away, a reference scaled by 1e8: too slow at stepsize 0.5 (the
        # status says so), SUCCESS at 5.0, where the measure is recomputed
        (_OPT, jnp.full((12, 5), 1e8), REF, Status.MAX_STEPS),
        (_OPT, jnp.zeros((12, 5)), REF * 1e8, Status.MAX_STEPS),
        (_FAST, jnp.full((12, 5), 1e8), REF, Status.SUCCESS),
        (_FAST, jnp.zeros((12, 5)), REF * 1e8, Status.SUCCESS),
    ],
    ids=["nan_x0", "nan_ref", "inf_ref", "far_x0_slow", "ref_1e8_slow", "far_x0", "ref_1e8"],
)
def test_statuses_are_honest_and_success_is_certified(opt, x0, ref, status):
    sol = jaxsolve.solve(opt, x0, (ref, None), tol=1e-6, max_steps=200)
    assert int(sol.status) == status
    if status == Status.NONFINITE:
        return
    g = jnp.linalg.norm(opt.optimality(sol.x, (ref, None)).ravel())  # the masked gradient
    if status == Status.SUCCESS:
        assert float(g) <= 1e-6
        # g = 2 (x - r) / 12 here, so the distance to the minimizer r is 6 |g|
        np.testing.assert_allclose(np.asarray(sol.x), np.asarray(ref), rtol=1e-12, atol=6e-6)
    elif status == Status.MAX_STEPS:
        assert float(g) > 1e-6


def test_half_precision_latent_is_not_a_false_success():
    """bfloat16 cannot reach tol = 1e-6: the solve must say so (MAX_STEPS), not SUCCESS."""
    sol = jaxsolve.solve(
        _OPT,
        jnp.zeros((12, 5), jnp.bfloat16),
        (REF.astype(jnp.bfloat16), None),
        tol=1e-6,
        max_steps=50,
    )
    assert int(sol.status) != Status.SUCCESS


def test_an_all_zero_latent_mask_is_named():
    """An all-zero latent mask (a face mask that found no face) guided nothing, silently:
    guided_step returned the unguided step and latent_optimizer reported SUCCESS at its
    start, its masked gradient being zero. Like an empty mask_gen/mask_ref, it is named."""
    with pytest.raises(ValueError, match="mask is empty"):
        guided_step(_step, _pixels, R64, scale=1.0, t_threshold=10.0, mask=jnp.zeros((8, 8)))
    with pytest.raises(ValueError, match="mask is empty"):
        latent_optimizer(_pixels, mask=jnp.zeros((8, 8), bool))
    # one positive weight is a mask: the guided entry moves, the others are the step's
    z = jnp.ones((8, 8))
    mask = jnp.zeros((8, 8)).at[0, 0].set(1.0)
    out = guided_step(
        _step, _pixels, R64, scale=1.0, t_threshold=10.0, mask=mask, kind="l2", matcher="identity"
    )(z, 1.0)
    np.testing.assert_array_equal(np.asarray(out)[mask == 0], 0.9)
    assert float(out[0, 0]) != 0.9
