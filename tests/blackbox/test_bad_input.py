"""Black-box family on hostile input: errors that name the argument."""

import warnings

import jax
import jax.numpy as jnp
import pytest

import jaxsolve
from jaxsolve import blackbox as B


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: jaxsolve.solve(
                B.cma_es_solver(lambda x, a: jnp.sum(x**2), 3), jnp.zeros(4), None, max_steps=5
            ),
            r"x0 must have shape \(3,\)",
        ),
        (lambda: B.UniformBox(jnp.ones(2), jnp.zeros(2)), "lower must be below upper"),
        (lambda: B.UniformBox(jnp.zeros(2), jnp.ones(3)), "lower and upper must have one shape"),
        (lambda: B.vendi_score(jnp.ones((4, 2)), 0.0), "bandwidth must be positive"),
        (lambda: B.vendi_score(jnp.ones((0, 2)), 1.0), "X must be a non-empty"),
        (
            lambda: B.fit_descriptors(jnp.ones((10, 3)), jnp.full(10, jnp.nan), 2),
            "fitness has no finite value",
        ),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_archive_default_dtype_follows_x64():
    """The default float is float32 without x64 (no truncation warning), float64 with."""
    archive = B.grid_archive(solution_dim=3, dims=(4, 4), ranges=[(0, 1), (0, 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with jax.enable_x64(False):
            assert archive.init().objective.dtype == jnp.float32
    with jax.enable_x64(True):
        assert archive.init().objective.dtype == jnp.float64


_ES = B.cma_es(4)
_MAE = B.cma_mae(solution_dim=4, dims=(5, 5), ranges=[(-5, 5)] * 2, n_emitters=2, batch_size=6)


@pytest.mark.parametrize(
    "call, error, match",
    [
        # CMAES.init accepted these silently: a (3,) mean with a 4x4 C (failed generations
        # later), an int mean with sigma = 0 (the search never moved)
        (lambda: _ES.init(jnp.zeros(3)), ValueError, r"x0 must have shape \(4,\)"),
        (lambda: _ES.init(jnp.zeros(4, int)), TypeError, "x0 must be a floating-point"),
        (lambda: _ES.init(jnp.zeros(4, complex)), TypeError, "x0 must be real"),
        # these failed inside ask/tell with JAX's own key or broadcasting errors
        (lambda: _ES.ask(_ES.init(jnp.zeros(4)), 0), TypeError, "key must be a jax.random key"),
        (
            lambda: _ES.tell(_ES.init(jnp.zeros(4)), jnp.zeros((_ES.popsize, 4)), jnp.zeros(3)),
            ValueError,
            rf"fitness must have shape \({_ES.popsize},\)",
        ),
        (
            lambda: _ES.tell(_ES.init(jnp.zeros(4)), jnp.zeros((_ES.popsize, 3)), jnp.zeros(8)),
            ValueError,
            rf"solutions must have shape \({_ES.popsize}, 4\)",
        ),
        (
            lambda: jaxsolve.solve(
                B.cma_es_solver(lambda x, a: x, 4), jnp.zeros(4), None, max_steps=5
            ),
            ValueError,
            r"fun\(x0, args\) must return a scalar, got shape \(4,\)",
        ),
        (lambda: B.cma_es_solver(lambda x, a: 0.0, 4, seed=1.5), TypeError, "seed must be an int"),
        (
            lambda: B.cma_es_solver(lambda x, a: 0.0, 4, seed=jax.random.key(0)),
            TypeError,
            "seed must be an int",
        ),
        # archives: a float cell count was truncated, NaN offsets made every QD score NaN
        (
            lambda: B.grid_archive(solution_dim=2, dims=(2.5,), ranges=[(0, 1)]),
            ValueError,
            "dims must be positive int cell counts",
        ),
        (
            lambda: B.grid_archive(solution_dim=2, dims=(3,), ranges=[(0, 1)], epsilon=-1.0),
            ValueError,
            "epsilon must be finite and non-negative",
        ),
        (
            lambda: B.grid_archive(
                solution_dim=2, dims=(3,), ranges=[(0, 1)], qd_score_offset=float("nan")
            ),
            ValueError,
            "qd_score_offset must be finite",
        ),
        # CMA-MAE: an int key failed at the first ask; misshapen tells in a reshape
        (lambda: _MAE.init(jnp.zeros(4), 0), TypeError, "key must be a jax.random key"),
        (
            lambda: _MAE.tell(
                _MAE.init(jnp.zeros(4), jax.random.key(0)),
                jnp.zeros((2, 6, 4)),
                jnp.zeros((2, 5)),
                jnp.zeros((2, 6, 2)),
            ),
            ValueError,
            r"objective must have shape \(2, 6\)",
        ),
        (
            lambda: _MAE.run(
                B.sphere_linear_projection, _MAE.init(jnp.zeros(4), jax.random.key(0)), -1
            ),
            ValueError,
            "iterations must be an int >= 0",
        ),
    ],
)
def test_cma_and_archive_misuse_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


_LO, _HI = -jnp.ones(2), jnp.ones(2)
_PRIOR = B.UniformBox(_LO, _HI)
_BO = B.genbo(_PRIOR, loss="preference", batch_size=4, rounds=2, n_initial=6, fit_steps=2)
_MODEL = B.DiagonalGaussian(jnp.zeros(2), jnp.zeros(2), _LO, _HI)
_X0 = _PRIOR.sample(jax.random.key(0), 6)
_Y0 = -jnp.sum(_X0**2, axis=1)


def _bo_state():
    return _BO.init(_MODEL, _X0, _Y0, jax.random.key(1))


@pytest.mark.parametrize(
    "call, error, match",
    [
        # GenBO.tell wrote a (4, 1) batch into the (n, 2) buffer by broadcasting, silently;
        # other misfits failed inside the buffer writes with JAX's broadcasting errors
        (
            lambda: _BO.tell(_bo_state(), jnp.zeros((4, 1)), jnp.zeros(4)),
            ValueError,
            r"X must have shape \(batch,\) \+ \(2,\)",
        ),
        (lambda: _BO.tell(_bo_state(), jnp.zeros((3, 2)), jnp.zeros(3)), ValueError, "batch_size"),
        (
            lambda: _BO.tell(_bo_state(), jnp.zeros((4, 2)), jnp.zeros((4, 1))),
            ValueError,
            r"y must have shape \(4,\)",
        ),
        (lambda: _BO.init(_MODEL, _X0, _Y0[:3], jax.random.key(1)), ValueError, "y0 must have"),
        (lambda: _BO.init(_MODEL, _X0[:0], _Y0[:0], jax.random.key(1)), ValueError, "X0 must hold"),
        (
            lambda: _BO.init(_MODEL, jnp.zeros((20, 2)), jnp.zeros(20), jax.random.key(1)),
            ValueError,
            "20 initial points do not fit the buffer of 14",
        ),
        (
            lambda: _BO.init(_MODEL, jnp.zeros((6, 3)), _Y0, jax.random.key(1)),
            ValueError,
            r"X0 of shape \(6, 3\) does not fit the prior",
        ),
        (lambda: _BO.init(_MODEL, _X0, jnp.arange(6), jax.random.key(1)), TypeError, "y0 must be"),
        (lambda: _BO.init(_MODEL, _X0, _Y0, 1), TypeError, "key must be a jax.random key"),
        # constructor values that ran without error to a NaN or frozen model
        (
            lambda: B.genbo(_PRIOR, batch_size=4, rounds=2, n_initial=6, learning_rate=0.0),
            ValueError,
            "learning_rate",
        ),
        (lambda: B.genbo(_PRIOR, batch_size=4, rounds=2, n_initial=6, eta=-1.0), ValueError, "eta"),
        (
            lambda: B.genbo(
                _PRIOR, loss="robust_preference", batch_size=4, rounds=2, n_initial=6, flip=0.5
            ),
            ValueError,
            r"flip must be in \[0, 0.5\)",
        ),
        (lambda: B.genbo("uniform", batch_size=4, rounds=2, n_initial=6), TypeError, "prior must"),
        (lambda: _BO.run(lambda X: -jnp.sum(X**2, 1), _bo_state(), -1), ValueError, "rounds must"),
        (
            lambda: B.UniformBox(jnp.zeros(2, int), jnp.ones(2, int)),
            TypeError,
            "lower must be a floating",
        ),
    ],
)
def test_genbo_misfits_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_sequence_outside_the_states_has_probability_zero():
    """JAX's indexing clamped an out-of-range state to a valid one's probability (and
    MarkovCategorical gave NaN), so GenBO.init took an initial sequence with state 5 of
    3 as inside the prior's support. Now log q = -inf there, in-range values unchanged."""
    mf = B.MeanFieldCategorical(jnp.log(jnp.array([[0.2, 0.3, 0.5]] * 4)))
    mk = B.MarkovCategorical(jnp.zeros((4, 3)), jnp.zeros((3, 3)))
    X = jnp.array([[0, 1, 2, 0], [0, 1, 5, 0], [0, -1, 2, 0]])
    lp = mf.log_prob(X)
    assert abs(float(lp[0]) - float(jnp.log(0.2 * 0.3 * 0.5 * 0.2))) < 1e-6
    assert float(lp[1]) == float(lp[2]) == -float("inf")
    for x in (X, jnp.tile(X, (2, 1))):  # both of MarkovCategorical's code paths
        lq = mk.log_prob(x)
        assert abs(float(lq[0]) - 4 * float(jnp.log(1 / 3))) < 1e-6
        assert float(lq[1]) == float(lq[2]) == -float("inf")
    bo = B.genbo(mf, loss="preference", batch_size=2, rounds=2, n_initial=3, fit_steps=2)
    with pytest.raises(ValueError, match="outside the prior's support"):
        bo.init(mk, X, jnp.zeros(3), jax.random.key(0))


def test_autoqd_helpers_name_misfits_and_never_score_nan_as_one():
    """vendi_score of points holding NaN returned 1.0 (the NaN eigenvalues fell out of the
    entropy), quality_vendi_score averaged the fitness of other points when the shapes
    differed, fit_descriptors with a negative floor returned NaN axes and with no finite
    row arbitrary ones; key/D/k/shape misfits failed inside JAX."""
    X = jax.random.normal(jax.random.key(1), (6, 3))
    with pytest.raises(ValueError, match="X contains NaN"):
        B.vendi_score(X.at[0, 0].set(jnp.nan), 1.0)
    traced = jax.jit(B.vendi_score, static_argnums=1)(X.at[0, 0].set(jnp.nan), 1.0)
    assert jnp.isnan(traced)
    assert float(jax.jit(B.vendi_score, static_argnums=1)(X, 1.0)) == float(B.vendi_score(X, 1.0))
    with pytest.raises(ValueError, match=r"fitness must have shape \(6,\)"):
        B.quality_vendi_score(X, jnp.ones(3), 1.0)
    E = jax.random.normal(jax.random.key(2), (10, 8))
    with pytest.raises(ValueError, match="floor must be non-negative"):
        B.fit_descriptors(E, jnp.arange(10.0), 2, floor=-1.0)
    with pytest.raises(ValueError, match="no .* row that is finite"):
        B.fit_descriptors(jnp.full((10, 8), jnp.nan), jnp.arange(10.0), 2)
    with pytest.raises(ValueError, match="k must be an int"):
        B.fit_descriptors(E, jnp.arange(10.0), 2.5)
    with pytest.raises(TypeError, match="key must be a jax.random key"):
        B.rff_embedding(0, 2, 8, 1.0)
    with pytest.raises(ValueError, match="D must be an int"):
        B.rff_embedding(jax.random.key(0), 2, 8.5, 1.0)
    feats = B.rff_embedding(jax.random.key(0), 2, 8, 1.0)
    with pytest.raises(ValueError, match=r"z must have shape \(\.\.\., dim_in = 2\)"):
        B.occupancy_embedding(feats, jnp.ones((3, 5, 3)), 0.9)
    with pytest.raises(ValueError, match=r"mask must have shape \(3, 5\)"):
        B.occupancy_embedding(feats, jnp.ones((3, 5, 2)), 0.9, mask=jnp.ones((3, 4)))
