"""PAC-Bayes certificates on Deep FlexQP: the bound's pieces exactly, and the certificate
against the failure rate measured on many fresh problems."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.qp.deep import Policies
from jaxsolve.qp.pac_bayes import gaussian_kl, kl_inverse, pac_bayes_bound, residuals_after
from jaxsolve.qp.train import problem_set, reference_solutions, train_policy


def _kl(p, q):
    return sum(a * math.log(a / b) for a, b in ((p, q), (1 - p, 1 - q)) if a > 0)


def test_kl_inverse_exact_values():
    c = np.array([1e-3, 0.05, 0.7, 3.0])
    np.testing.assert_allclose(kl_inverse(0.0, c), 1 - np.exp(-c), rtol=1e-12)
    rng = np.random.default_rng(0)
    for p, cc in zip(rng.uniform(0.01, 0.9, 20), rng.uniform(1e-4, 0.5, 20), strict=True):
        q = float(kl_inverse(p, cc))
        assert q >= p
        if q < 1 - 1e-9:  # on the boundary q = 1 the constraint is slack
            assert abs(_kl(p, q) - cc) < 1e-9
    assert float(kl_inverse(0.3, 0.0)) == 0.3


def test_gaussian_kl_closed_form():
    # one weight: KL(N(0, sq^2) || N(m, sp^2)) = log(sp/sq) + (sq^2 + m^2) / (2 sp^2) - 1/2
    q = {"w": jnp.zeros(1)}
    p = {"w": jnp.full(1, 0.3)}
    sq, sp = 0.05, 0.2
    ref = math.log(sp / sq) + (sq**2 + 0.09) / (2 * sp**2) - 0.5
    assert abs(gaussian_kl(q, p, sq, sp) - ref) < 1e-12
    # equal scales: ||dtheta||^2 / (2 s^2), whatever the dimension
    q = {"a": jnp.zeros((3, 4)), "b": jnp.ones(5)}
    p = {"a": jnp.full((3, 4), 0.01), "b": jnp.ones(5)}
    assert abs(gaussian_kl(q, p, 0.1, 0.1) - 12 * 1e-4 / 0.02) < 1e-9
    with pytest.raises(ValueError, match="structure"):
        gaussian_kl(q, {"a": jnp.zeros(3), "b": jnp.ones(5)}, 0.1, 0.1)


@pytest.fixture(scope="module")
def setting():
    with jax.enable_x64(True):
        pol = Policies.learned(jax.random.key(3))
        cert = problem_set("random", 200, 6, seed=11)
        fresh = problem_set("random", 2000, 6, seed=12)
        tols = np.logspace(-5, 0, 12)
        out = pac_bayes_bound(pol, cert, K=30, tols=tols, posterior_scale=0.02)
        res = residuals_after(pol, fresh, 30, scale=0.02, key=jax.random.key(99))
        yield pol, cert, tols, out, res


@pytest.mark.slow
def test_certificate_bounds_the_fresh_failure_rate(setting):
    """The certificate (200 problems, 12 tolerances, delta = 0.02 in all) lies above the
    failure rate of the same stochastic solver on 2000 fresh problems at every
    tolerance, and is informative: within 0.35 of it everywhere (the kl-inverse slack
    at N = 200 is about 0.25 near a rate of 1/2), and below 0.15 where no certification
    problem fails (the bound's floor at N = 200 is 0.12)."""
    _, _, tols, out, res = setting
    fresh_rate = np.mean(~(res[None, :] <= tols[:, None]), axis=1)
    assert np.all(out.bound >= fresh_rate), (out.bound, fresh_rate)
    assert np.all(out.bound - fresh_rate <= 0.35), (out.bound, fresh_rate)
    assert np.all(out.bound[out.empirical == 0] <= 0.15), out.bound
    # the tolerances span the residuals: some certify small failure rates, some large
    assert fresh_rate.min() < 0.05 and fresh_rate.max() > 0.9
    assert np.all(np.diff(out.bound) <= 1e-12)  # looser tolerance, smaller bound
    assert out.kl == 0.0


@pytest.mark.slow
def test_data_independent_prior_pays_its_kl(setting):
    pol, cert, tols, out, _ = setting
    with jax.enable_x64(True):
        prior = Policies.learned(jax.random.key(4))  # another initialization
        far = pac_bayes_bound(
            pol, cert, K=30, tols=tols, posterior_scale=0.02, prior=prior, prior_scale=0.5
        )
    assert far.kl == pytest.approx(gaussian_kl(pol, prior, 0.02, 0.5))
    assert far.kl > 0
    np.testing.assert_array_equal(far.empirical, out.empirical)  # same draws
    assert np.all(far.bound >= out.bound)


@pytest.mark.slow  # two trainings of 200 steps and two certifications (~40 s CPU)
def test_log_loss_certifies_tighter_only_below_the_plain_policys_reach():
    """The plain and the log-scaled loss trade the tail for the bulk, so their
    certificates cross (bench/results/deep_flexqp_certificate.md, at full scale).

    Lasso at n = 20, K = 10, the same 128 training problems, initialization and
    minibatches: the plain loss's policy leaves every certification problem above 1e-6
    after K iterations (bound 1.0 at 1e-6 and 1e-8), the log loss's pushes about half of
    them below 1e-6 and 40% below 1e-8 (bounds 0.68 and 0.80), while at the loose
    tolerance 1e-2 the plain loss's certificate is the smaller (0.11 against 0.30: the
    log loss's heavier tail)."""
    tols = [1e-2, 1e-6, 1e-8]
    with jax.enable_x64(True):
        train = problem_set("lasso", 128, 20, seed=0)
        x_star, y_star, _ = reference_solutions(train)
        cert = problem_set("lasso", 300, 20, seed=2)  # held out: prior = posterior
        bounds = {}
        for loss in ("plain", "log"):
            pol = train_policy(
                Policies.learned(jax.random.key(0)),
                train,
                x_star,
                y_star,
                K=10,
                steps=200,
                batch_size=16,
                loss=loss,
                key=jax.random.key(1),
            ).policies
            bounds[loss] = pac_bayes_bound(pol, cert, K=10, tols=tols, posterior_scale=1e-3).bound
    plain, log = bounds["plain"], bounds["log"]
    assert plain[0] + 0.08 < log[0], bounds  # loose tolerance: the plain loss is tighter
    assert np.all(plain[1:] == 1.0) and np.all(log[1:] < 0.9), bounds


@pytest.mark.slow  # one compile of the vmapped Deep FlexQP solve (~15 s cold)
def test_nan_policy_fails_everywhere():
    with jax.enable_x64(True):
        pol = Policies.learned(jax.random.key(3))
        bad = jax.tree.map(
            lambda a: a * jnp.nan if eqx.is_inexact_array(a) and a.ndim == 2 else a, pol
        )
        qps = problem_set("random", 8, 3, seed=1)
        out = pac_bayes_bound(bad, qps, K=5, tols=[1e-3, 1.0], posterior_scale=0.0)
        np.testing.assert_array_equal(out.empirical, [1.0, 1.0])
        assert np.all(out.bound == 1.0)


def test_bad_arguments_raise_before_solving():
    with jax.enable_x64(True):
        pol = Policies.learned(jax.random.key(3))
        qps = problem_set("random", 8, 3, seed=1)
        with pytest.raises(ValueError, match="K must be a positive int"):
            pac_bayes_bound(pol, qps, K=0, tols=[1e-3])
        with pytest.raises(ValueError, match="delta must lie"):
            pac_bayes_bound(pol, qps, K=5, tols=[1e-3], delta=1.5)
        with pytest.raises(ValueError, match="posterior_scale must be a positive"):
            pac_bayes_bound(pol, qps, K=5, tols=[1e-3], posterior_scale=0.0, prior=pol)
        with pytest.raises(ValueError, match="tols must be"):
            pac_bayes_bound(pol, qps, K=5, tols=[])
        with pytest.raises(TypeError, match="policies must be"):
            pac_bayes_bound({"w": 1}, qps, K=5, tols=[1e-3])
