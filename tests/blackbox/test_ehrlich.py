"""Ehrlich functions, the discrete GA and the autoregressive sequence model.

Ehrlich's value is checked against a direct NumPy transcription of its definition (the
paper's formula: spaced-motif presence, quantization, epistatic response, DMP
feasibility) on random and near-optimal sequences, and against pytorch-holo's own
``Ehrlich`` on the same instance when pytorch-holo is installed (it needs torch, which
the dev environment does not carry: ``bench/genbo.py --holo`` records the check).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.blackbox import MarkovCategorical
from jaxsolve.blackbox.ehrlich import Ehrlich, ehrlich
from jaxsolve.blackbox.evolution import discrete_evolution


def _reference(f: Ehrlich, X):
    """The definition, position by position, in NumPy."""
    A = np.asarray(f.transition_matrix)
    motifs, spacings = np.asarray(f.motifs), np.asarray(f.spacings)
    k = motifs.shape[1]
    f1 = math.ceil(k / f.quantization)
    out = []
    for x in np.asarray(X):
        if not all(A[a, b] > 0 for a, b in zip(x[:-1], x[1:], strict=True)):
            out.append(-np.inf)
            continue
        value = 1.0
        for motif, spacing in zip(motifs, spacings, strict=True):
            offsets = np.concatenate([[0], np.cumsum(spacing)])
            best = max(
                sum(x[l + o] == m for o, m in zip(offsets, motif, strict=True))
                for l in range(len(x) - offsets[-1])
            )
            h = (best // f1) / (k / f1)
            value *= h * (f.epistasis_factor * h * (h - 1) + 1)
        out.append(value)
    return np.asarray(out)


@pytest.fixture(scope="module")
def f():
    return ehrlich(jax.random.key(0), 32, 32, 2, 4, quantization=4)


def _near_optimal(f, key, n):
    """Sequences a few mutations away from the optimum: every presence level occurs."""
    opt = jnp.asarray(f.optimal_solution())
    k1, k2 = jax.random.split(key)
    flip = jax.random.uniform(k1, (n, f.dim)) < jnp.linspace(0.02, 0.5, n)[:, None]
    fresh = jax.random.randint(k2, (n, f.dim), 0, f.num_states)
    return jnp.where(flip, fresh, opt)


def test_optimum_is_one_and_construction_is_valid(f):
    opt = f.optimal_solution()
    assert float(f(opt)) == 1.0
    A = np.asarray(f.transition_matrix)
    np.testing.assert_allclose(A.sum(1), 1.0, atol=1e-12)
    assert np.all(np.diag(A) > 0)  # repeats always possible
    assert np.all(np.linalg.matrix_power(A, (32 - 1) ** 2 + 1) > 0)  # ergodic
    # a band of half-width floor(0.4 v) plus the diagonal: at most 2*12 + 2 entries per row
    assert np.all((A > 0).sum(1) <= 26)
    assert np.all(np.asarray(f.spacings) >= 1)
    offsets_end = np.asarray(f.spacings).sum(1) + 1
    assert offsets_end.sum() <= f.dim  # every motif fits, one after another
    pi = f.stationary_distribution()
    np.testing.assert_allclose(pi @ A, pi, atol=1e-12)


@pytest.mark.parametrize("quantization,epistasis", [(4, 0.0), (2, 0.0), (4, 0.5)])
def test_values_equal_the_definition(quantization, epistasis):
    g = ehrlich(jax.random.key(1), 12, 20, 2, 4, quantization=quantization)
    g = Ehrlich(g.transition_matrix, g.motifs, g.spacings, g.dim, quantization, epistasis)
    X = jnp.concatenate(
        [
            g.initial_solution(jax.random.key(2), 200),
            g.random_solution(jax.random.key(3), 100),
            _near_optimal(g, jax.random.key(4), 200),
        ]
    )
    got = np.asarray(jax.jit(lambda x: g(x))(X))  # a Module holding arrays: close over it
    np.testing.assert_array_equal(np.isinf(got), np.isinf(_reference(g, X)))
    np.testing.assert_allclose(got, _reference(g, X), atol=1e-15)
    levels = np.unique(got[np.isfinite(got)])
    assert levels.size >= 4  # the check sees several presence levels, not only 0


def test_initial_solutions_are_feasible_and_random_ones_mostly_not(f):
    assert bool(jnp.all(f.feasible(f.initial_solution(jax.random.key(5), 500))))
    assert float(jnp.mean(f.feasible(f.random_solution(jax.random.key(6), 500)))) < 0.05


def test_bad_construction_arguments_name_the_argument():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="dim=6 cannot hold"):
        ehrlich(key, 8, 6, 2, 4)
    with pytest.raises(ValueError, match="quantization"):
        ehrlich(key, 8, 16, 2, 4, quantization=5)
    with pytest.raises(ValueError, match="num_states"):
        ehrlich(key, 0, 16, 2, 4)
    with pytest.raises(ValueError, match="motif_length"):
        ehrlich(key, 8, 16, 2, 1)


@pytest.mark.parametrize(
    "shape,quantization,epistasis",
    [((32, 32, 2, 4), 4, 0.0), ((32, 32, 2, 4), 2, 0.0), ((20, 64, 4, 4), 4, 0.3)],
)
def test_equals_pytorch_holo_on_its_own_instance(shape, quantization, epistasis):
    holo = pytest.importorskip("holo.test_functions.closed_form")
    torch = pytest.importorskip("torch")
    v, dim, c, k = shape
    ref = holo.Ehrlich(
        num_states=v,
        dim=dim,
        num_motifs=c,
        motif_length=k,
        quantization=quantization,
        epistasis_factor=epistasis,
        random_seed=3,
    )
    g = Ehrlich.from_holo(ref)
    X = np.concatenate(
        [
            ref.initial_solution(4000).numpy(),
            ref.random_solution(2000).numpy(),
            np.asarray(_near_optimal(g, jax.random.key(7), 4000)),
        ]
    )
    want = ref.evaluate_true(torch.as_tensor(X)).numpy()
    assert float(g(ref.optimal_solution().numpy())) == 1.0
    assert np.isfinite(want).sum() >= 4000 and np.unique(want).size >= 4
    np.testing.assert_allclose(np.asarray(g(X)), want, atol=1e-6)


def test_markov_model_log_prob_normalizes_and_sampling_matches_it():
    S, L = 3, 4
    k1, k2 = jax.random.split(jax.random.key(0))
    m = MarkovCategorical(jax.random.normal(k1, (L, S)), jax.random.normal(k2, (S, S)))
    grid = jnp.asarray(np.indices((S,) * L).reshape(L, -1).T)
    p = jnp.exp(m.log_prob(grid))
    assert abs(float(p.sum()) - 1.0) < 1e-12
    draws = np.asarray(m.sample(jax.random.key(1), 40000))
    code = (draws * S ** np.arange(L)[::-1]).sum(1)
    freq = np.bincount(code, minlength=S**L) / draws.shape[0]
    # Pearson's chi-square over the 81 sequences: mean 80 under the model, sd 12.6; a
    # sampler off by one position or transition gives thousands
    chi2 = float((((freq - p) ** 2) / p).sum() * draws.shape[0])
    assert chi2 < 80 + 5 * np.sqrt(2 * 80), chi2


def test_discrete_evolution_selection_crossover_mutation():
    ga = discrete_evolution(5, mutation_prob=1e-9, recombine_prob=0.5, survival_quantile=0.5)
    X = jnp.asarray([[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]])
    y = jnp.asarray([0.0, 3.0, -jnp.inf, 2.0])
    st = ga.init(X, y)
    assert int(st.best_y) == 3 and st.best_x.tolist() == [1, 1, 1]
    nxt = np.asarray(ga.ask(st, jax.random.key(0)))
    # the two best survive unchanged (no mutation); the others are crossovers of them
    assert nxt[1].tolist() == [1, 1, 1] and nxt[3].tolist() == [3, 3, 3]
    assert set(nxt[[0, 2]].ravel()) <= {1, 3}
    st = ga.tell(st, jnp.asarray(nxt), jnp.asarray([1.0, jnp.nan, 0.5, 0.0]))
    assert float(st.best_y) == 3.0  # the best seen is kept; NaN counts as -inf
    assert float(st.y[1]) == -np.inf


def test_discrete_evolution_improves_on_ehrlich_and_vmaps(f):
    ga = discrete_evolution(f.num_states, mutation_prob=1 / 32)

    def run(key):
        k0, k1 = jax.random.split(key)
        X0 = f.initial_solution(k0, 128)
        st = ga.init(X0, f(X0))
        first = jnp.median(st.y)

        def gen(st, k):
            X = ga.ask(st, k)
            return ga.tell(st, X, f(X)), None

        st, _ = jax.lax.scan(gen, st, jax.random.split(k1, 30))
        return first, jnp.median(st.y), st.best_y

    keys = jax.random.split(jax.random.key(3), 3)
    first, last, best = jax.jit(jax.vmap(run))(keys)
    # selection lifts the population: its median value never falls and rises on average
    # (0.083 -> 0.167 here; selection turned upside down sends it to -inf)
    first, last = np.asarray(first), np.asarray(last)
    assert np.all(last >= first) and last.mean() >= first.mean() + 0.05, (first, last)
    loop = np.asarray([run(k)[2] for k in keys])
    np.testing.assert_array_equal(np.asarray(best), loop)


def test_bad_ga_arguments():
    with pytest.raises(ValueError, match="mutation_prob"):
        discrete_evolution(4, mutation_prob=0.0)
    with pytest.raises(ValueError, match="survival_quantile"):
        discrete_evolution(4, survival_quantile=1.0)
    with pytest.raises(ValueError, match="num_states"):
        discrete_evolution(1)
