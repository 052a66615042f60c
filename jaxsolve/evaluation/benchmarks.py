r"""Correctness matrices: the synthetic 2PL generator, loading a user's matrix, model splits.

A benchmark is a models x items matrix $Y \in [0, 1]^{M \times N}$ (1 = the model
answered the item correctly; soft scores in $[0, 1]$ are allowed) and a model's
accuracy is its row mean $y_m = \frac1N \sum_j Y_{mj}$.

`synthetic_benchmark` draws a multidimensional two-parameter logistic (2PL) item
response model, the standard generative model of such matrices (and the one the IRT
estimators assume):

$$
P(Y_{mj} = 1) = \sigma(a_j^\top \theta_m - b_j), \qquad
\theta_m \sim N(\mu_{c(m)}, I_d), \; a_j = e^{z_j}\ (\text{elementwise}),\;
z_j \sim N(0, s_a^2 I_d),\; b_j \sim N(0, s_b^2),
$$

log-normal discriminations as in the SparseEval acceptance notes. With the defaults
($d = 10$, $s_a = 1$) the logits spread over about $\pm 10$: answers are nearly
determined by ability, as they are for language models on real benchmarks
(strong models solve a superset of what weak ones solve), and accuracies spread over
$[0, 1]$. Smaller ``a_scale`` gives noisier, less informative items.

with model families $c(m)$ (cluster means $\mu_c \sim N(0, \text{spread}^2 I_d)$) for
transfer tests: anchors chosen on some families, evaluated on another.
"""

from __future__ import annotations

import pathlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.core.validation import check_key

__all__ = ["Benchmark", "synthetic_benchmark", "load_matrix", "check_matrix", "split_models"]


class Benchmark(NamedTuple):
    """A correctness matrix and what generated it.

    Attributes:
        Y: ``(n_models, n_items)`` correctness, 0/1 (float).
        accuracy: ``(n_models,)`` row means of ``Y``: the target an estimator predicts.
        theta: ``(n_models, dim)`` model abilities.
        a: ``(n_items, dim)`` item discriminations; b: ``(n_items,)`` difficulties.
        family: ``(n_models,)`` int family index of each model.
    """

    Y: jax.Array
    accuracy: jax.Array
    theta: jax.Array
    a: jax.Array
    b: jax.Array
    family: jax.Array


def synthetic_benchmark(
    key: jax.Array,
    n_models: int,
    n_items: int,
    dim: int = 10,
    *,
    n_families: int = 1,
    family_spread: float = 1.0,
    a_scale: float = 1.0,
    b_scale: float = 1.0,
    dtype: Any = jnp.float32,
) -> Benchmark:
    """Draw a multidimensional 2PL benchmark (see the module docstring).

    Args:
        key: a ``jax.random`` key.
        n_models: rows of the matrix.
        n_items: columns of the matrix.
        dim: latent dimension of abilities and discriminations.
        n_families: model families (clusters of abilities); models are split evenly.
        family_spread: standard deviation of the family means.
        a_scale: log-normal scale of the discriminations.
        b_scale: standard deviation of the difficulties.
        dtype: floating dtype of ``Y``.

    Checked, naming the argument: ``key``, the positive counts, finite non-negative
    scales and a floating ``dtype``.
    """
    check_key("key", key)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating-point dtype, got {jnp.dtype(dtype)}")
    for name, v in (("family_spread", family_spread), ("a_scale", a_scale), ("b_scale", b_scale)):
        if not (isinstance(v, int | float | np.number) and np.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite non-negative number, got {v!r}")
    for name, v in (("n_models", n_models), ("n_items", n_items), ("dim", dim)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not isinstance(n_families, int | np.integer) or not 1 <= n_families <= n_models:
        raise ValueError(f"n_families must be an int in [1, n_models], got {n_families!r}")
    kt, km, ka, kb, ky = jax.random.split(key, 5)
    family = jnp.arange(n_models) * n_families // n_models
    means = family_spread * jax.random.normal(km, (n_families, dim)) if n_families > 1 else None
    theta = jax.random.normal(kt, (n_models, dim))
    if means is not None:
        theta = theta + means[family]
    a = jnp.exp(a_scale * jax.random.normal(ka, (n_items, dim)))
    b = b_scale * jax.random.normal(kb, (n_items,))
    p = jax.nn.sigmoid(theta @ a.T - b)
    Y = jax.random.bernoulli(ky, p).astype(dtype)
    return Benchmark(Y, Y.mean(axis=1), theta, a, b, family.astype(jnp.int32))


def check_matrix(Y, name: str = "Y", *, min_models: int = 1) -> jax.Array:
    """Validate a correctness matrix: 2-D, finite, in ``[0, 1]``; returns it as floats.

    Values strictly between 0 and 1 are soft scores (partial credit) and are kept.
    """
    arr = np.asarray(Y)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a (models, items) matrix, got shape {arr.shape}")
    if 0 in arr.shape:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if arr.dtype == bool or np.issubdtype(arr.dtype, np.integer):
        arr = arr.astype(np.float32)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{name} must hold numbers in [0, 1], got dtype {arr.dtype}")
    if np.isnan(arr).any():
        raise ValueError(
            f"{name} contains NaN ({int(np.isnan(arr).sum())} entries): fill missing answers "
            "(e.g. with 0) before selecting anchors"
        )
    if arr.min() < 0 or arr.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1] (1 = correct), got [{arr.min()}, {arr.max()}]")
    if arr.shape[0] < min_models:
        raise ValueError(f"{name} has {arr.shape[0]} models; at least {min_models} are needed")
    return jnp.asarray(arr)


def load_matrix(path: str | pathlib.Path) -> jax.Array:
    """Load a correctness matrix from a ``.npy``/``.npz`` (first array) or ``.csv`` file.

    CSV: comma-separated numbers, one model per row, no header (a header row of
    non-numbers is skipped). No network access: the user supplies the file.
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no matrix at {path}")
    if path.suffix == ".npy":
        arr = np.load(path)
    elif path.suffix == ".npz":
        with np.load(path) as z:
            arr = z[z.files[0]]
    elif path.suffix == ".csv":
        try:
            arr = np.loadtxt(path, delimiter=",", ndmin=2)
        except ValueError:
            arr = np.loadtxt(path, delimiter=",", ndmin=2, skiprows=1)
    else:
        raise ValueError(f"unknown matrix format {path.suffix!r}: use .npy, .npz or .csv")
    return check_matrix(arr, str(path))


def split_models(key: jax.Array, n_models: int, n_test: int, n_val: int):
    """A seeded split of model indices into ``(train, val, test)`` (numpy int arrays);
    ``key`` a ``jax.random`` key and the counts ints (checked)."""
    check_key("key", key)
    for name, v in (("n_models", n_models), ("n_test", n_test), ("n_val", n_val)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            raise ValueError(f"{name} must be an int, got {v!r}")
    n_train = n_models - n_test - n_val
    if n_test < 1 or n_val < 1 or n_train < 2:
        raise ValueError(
            f"{n_models} models cannot be split into n_test = {n_test} test, n_val = {n_val} "
            f"validation and at least 2 training models"
        )
    perm = np.asarray(jax.random.permutation(key, n_models))
    return perm[n_test + n_val :], perm[n_test : n_test + n_val], perm[:n_test]
