r"""SparseEval: choose $K$ anchor items and a predictor of full-benchmark accuracy.

Zhang et al., "SparseEval: Efficient Evaluation of Large Language Models by Sparse
Optimization" (ICLR 2026, arXiv 2602.07909); the steps follow the authors' reference
code (``methods/gd_cluster_mlp.py``):

1. Split the models (seeded) into train / validation / test.
2. Initial anchors: k-means over the item vectors of the training models
   (`jaxsolve.evaluation.anchors`), random items (``init="random"``), or the
   user's (``init_anchors=``). The reference code clusters the items over *all*
   models, test models included: their answers then help choose the anchors, a leak
   that flatters its test MAE. The default clusters the training models only; a
   caller who wants the reference's protocol computes that start itself
   (``kmeans_anchors(Y, K, key)`` on every model) and passes it as
   ``init_anchors`` (``bench/evaluation_torch.py`` does).
3. ``rounds`` refinement rounds. Each trains the proxy MLP $f$ on the anchor
   columns of the training models (``epochs`` full-batch Adam steps,
   `jaxsolve.evaluation.mlp`), then swaps one anchor:

   * out: the anchor of least *Anchor Importance Score*
     $\mathrm{AIS}_a = \frac1{M}\sum_m |\partial L / \partial X_{ma}|$, the input
     saliency of the training MSE $L$;
   * in: the item of largest *Candidate Importance Score*
     $\mathrm{CIS}_j = |\sum_m (Y_{mj} - \tfrac12)(f(X_m) - y_m)|$, the item whose
     centred answers best explain the proxy's residual.

   Which anchor set is kept (``keep``): ``"best"`` (default), the one of least
   validation MAE among the ``rounds + 1`` trained (a proxy is trained after the last
   swap too), so a swap that hurts is undone, at the cost of one more proxy and of
   a choice made on a noisy validation MAE (200 models); or ``"last"``, the set
   after the last swap, as the reference code keeps it (no validation, ``rounds``
   proxies).
4. The final predictor: up to ``final_epochs`` epochs, checked every
   ``check_every``; a checkpoint is kept when validation MSE and Kendall $\tau$
   both improve; training stops after ``patience`` checks without one.
5. Per-model error bars (what release gating needs): split-conformal intervals
   from the validation models. With $\hat\sigma(\hat y) =
   \sqrt{\max(\hat y(1-\hat y), 0.01)}$ (a Bernoulli-like scale: models near 0 or 1
   are easier to pin down) the scores $s_m = |\hat y_m - y_m| / \hat\sigma(\hat y_m)$
   give $q$, their $\lceil (n+1)(1-\alpha) \rceil$-th smallest value, and a new
   model gets $\hat y \pm q\,\hat\sigma(\hat y)$. For models exchangeable with the
   validation ones this covers the true accuracy with probability at least
   $1 - \alpha$ (no extra training, unlike a bootstrap or an ensemble). The
   validation models also chose the checkpoint, so the guarantee is approximate;
   the test split measures the coverage actually reached.

Every stage is a ``lax.scan`` inside one compiled program; anchor slots beyond the
active $K$ are masked, so `sparse_eval_sweep` runs several $K$ and seeds as one
``vmap`` whose lanes equal separate `sparse_eval` calls.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsolve.core.validation import check_key, is_concrete
from jaxsolve.evaluation.anchors import kmeans_anchors, random_anchors
from jaxsolve.evaluation.benchmarks import check_matrix, split_models
from jaxsolve.evaluation.metrics import coverage, kendall_tau, mae
from jaxsolve.evaluation.mlp import apply_mlp, init_mlp, mse, train_mlp

__all__ = [
    "importance_scores",
    "SparseEvalResult",
    "Diagnostics",
    "Estimate",
    "sparse_eval",
    "sparse_eval_sweep",
    "estimate",
]


class Diagnostics(NamedTuple):
    """How the fit went, on each split (accuracy units; x100 for points).

    Attributes:
        train_mae, val_mae, test_mae: MAE of the final predictor per split.
        val_tau, test_tau: Kendall's tau_b between predicted and true accuracies.
        test_coverage: fraction of test models inside their interval.
        round_val_mae: validation MAE of each round's proxy: ``(rounds + 1,)``, or
            ``(rounds,)`` with ``keep="last"`` (no proxy after the last swap).
        best_round: index of the anchor set kept (its number of swaps: ``rounds``
            with ``keep="last"``).
        round_anchors: ``(rounds + 1, K)`` the anchor set of each round (row ``i``
            after ``i`` swaps; row ``best_round`` is the one kept).
        checks_run: final-training checks run before early stopping.
    """

    train_mae: jax.Array
    val_mae: jax.Array
    test_mae: jax.Array
    val_tau: jax.Array
    test_tau: jax.Array
    test_coverage: jax.Array
    round_val_mae: jax.Array
    best_round: jax.Array
    checks_run: jax.Array
    round_anchors: jax.Array


class SparseEvalResult(NamedTuple):
    """The anchors and the predictor; pass it to `estimate` for new models.

    Attributes:
        anchors: ``(K,)`` item indices (``-1`` in padded slots of a sweep).
        params: the MLP's ``[(W, b), ...]`` (first layer ``(K, 128)``).
        scale: the conformal quantile $q$ of the intervals.
        alpha: their miscoverage level (0.1: 90% intervals).
        diagnostics: `Diagnostics`.
        split: ``(train, val, test)`` model indices (NumPy).
    """

    anchors: jax.Array
    params: Any
    scale: jax.Array
    alpha: float
    diagnostics: Diagnostics
    split: tuple


class Estimate(NamedTuple):
    """Estimated accuracies with per-model intervals: ``accuracy``, ``lower``, ``upper``."""

    accuracy: jax.Array
    lower: jax.Array
    upper: jax.Array


def _sigma(p):
    return jnp.sqrt(jnp.maximum(p * (1 - p), 0.01))


def _features(Y, anchors, active):
    return jnp.take(Y, jnp.maximum(anchors, 0), axis=1) * active


def importance_scores(params, X, y, Y, anchors, active, dropout: float = 0.1):
    r"""SparseEval's swap scores for the proxy ``params`` on training answers ``X``.

    Returns ``(ais, cis)``: ``ais[a]`` $= \frac1M\sum_m |\partial L/\partial X_{ma}|$
    (``+inf`` in inactive slots, so never removed) and ``cis[j]``
    $= |\sum_m (Y_{mj} - \frac12)(f(X_m) - y_m)|$ (``-1`` for current anchors, so
    never re-added), with $L$ the (dropout-free) training MSE. The shapes are
    checked (``X`` ``(M, k_max)``, ``y`` ``(M,)``, ``Y`` ``(M, N)``, ``anchors`` and
    ``active`` ``(k_max,)``), naming the argument.
    """
    X, y, Y = jnp.asarray(X), jnp.asarray(y), jnp.asarray(Y)
    anchors, active = jnp.asarray(anchors), jnp.asarray(active)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X (models, anchors) and Y (models, items) must be matrices over the same "
            f"models, got {X.shape} and {Y.shape}"
        )
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) (one per model), got {y.shape}")
    for name, v in (("anchors", anchors), ("active", active)):
        if v.shape != (X.shape[1],):
            raise ValueError(
                f"{name} must have shape ({X.shape[1]},) like X's columns, got {v.shape}"
            )
    ais = jnp.mean(jnp.abs(jax.grad(mse, argnums=1)(params, X, y, None, dropout)), axis=0)
    ais = jnp.where(active > 0, ais, jnp.inf)
    resid = apply_mlp(params, X) - y
    cis = jnp.abs((Y - 0.5).T @ resid)
    in_set = jnp.zeros(Y.shape[1], bool).at[anchors].max(active > 0)
    return ais, jnp.where(in_set, -1.0, cis)


def _pipeline(Y, y, tr, va, te, k, key, lr, a0=None, *, k_max, cfg):
    rounds, epochs, final_epochs, check_every, patience, hidden, dropout, init, alpha, keep = cfg
    dtype = Y.dtype
    n_items = Y.shape[1]
    active = (jnp.arange(k_max) < k).astype(dtype)
    Ytr, ytr, Yva, yva = Y[tr], y[tr], Y[va], y[va]
    k_init, k_rounds, k_final = jax.random.split(key, 3)
    if init == "given":
        anchors = a0
    elif init == "kmeans":
        anchors, _ = kmeans_anchors(Ytr, k, k_init, k_max=k_max)
    else:
        anchors = random_anchors(n_items, k, k_init, k_max=k_max)

    # one split for the initialization and training keys of every proxy (one per
    # round, then the final one): on CPU each random-number call compiles to a loop of
    # its own
    keys = jnp.concatenate([jax.random.split(k_rounds, rounds + 1), k_final[None]])
    kp, kt = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)

    def round_(anchors, inp):
        i, kp, key = inp
        params = init_mlp(kp, k_max, hidden, dtype, fan_in=k)
        X = _features(Ytr, anchors, active)
        params, _, _ = train_mlp(params, X, ytr, key, epochs=epochs, lr=lr, dropout=dropout)
        val = mae(apply_mlp(params, _features(Yva, anchors, active)), yva)
        ais, cis = importance_scores(params, X, ytr, Ytr, anchors, active, dropout)
        swapped = anchors.at[jnp.argmin(ais)].set(jnp.argmax(cis))
        return jnp.where(i < rounds, swapped, anchors), (anchors, val)

    if keep == "last":  # the reference's: the set after the last swap, no proxy on it
        anchors, (history, round_val) = jax.lax.scan(
            round_, anchors, (jnp.arange(rounds), kp[:rounds], kt[:rounds])
        )
        history = jnp.concatenate([history, anchors[None]])
        best_round = jnp.int32(rounds)
    else:
        _, (history, round_val) = jax.lax.scan(
            round_, anchors, (jnp.arange(rounds + 1), kp[:-1], kt[:-1])
        )
        best_round = jnp.argmin(round_val)
        anchors = history[best_round]

    # final training with validation early stopping
    params, kt = init_mlp(kp[-1], k_max, hidden, dtype, fan_in=k), kt[-1]
    X, Xva = _features(Ytr, anchors, active), _features(Yva, anchors, active)
    opt_state = optax.adam(lr).init(params)
    n_checks = max(1, final_epochs // check_every)

    def check(carry, key):
        params, opt_state, best, best_mse, best_tau, bad, runs = carry
        stopped = bad >= patience

        def go(c):
            p, s = c
            p, s, _ = train_mlp(
                p, X, ytr, key, epochs=check_every, lr=lr, dropout=dropout, opt_state=s
            )
            return p, s

        params, opt_state = jax.lax.cond(stopped, lambda c: c, go, (params, opt_state))
        pv = apply_mlp(params, Xva)
        vm, vt = jnp.mean((pv - yva) ** 2), kendall_tau(pv, yva)
        better = (vm < best_mse) & (vt > best_tau) & ~stopped
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b), params, best)
        best_mse = jnp.where(better, vm, best_mse)
        best_tau = jnp.where(better, vt, best_tau)
        bad = jnp.where(stopped, bad, jnp.where(better, 0, bad + 1))
        return (params, opt_state, best, best_mse, best_tau, bad, runs + ~stopped), None

    init_c = (
        params,
        opt_state,
        params,
        jnp.asarray(jnp.inf, dtype),
        jnp.asarray(-jnp.inf, dtype),
        jnp.int32(0),
        jnp.int32(0),
    )
    (_, _, params, _, _, _, runs), _ = jax.lax.scan(check, init_c, jax.random.split(kt, n_checks))

    # split-conformal scale from the validation models
    pv = apply_mlp(params, Xva)
    scores = jnp.sort(jnp.abs(pv - yva) / _sigma(pv))
    n = scores.shape[0]
    rank = int(np.clip(np.ceil((n + 1) * (1 - alpha)), 1, n)) - 1
    scale = scores[rank]

    pt = apply_mlp(params, _features(Y[te], anchors, active))
    lo, hi = jnp.clip(pt - scale * _sigma(pt), 0, 1), jnp.clip(pt + scale * _sigma(pt), 0, 1)
    diag = Diagnostics(
        train_mae=mae(apply_mlp(params, X), ytr),
        val_mae=mae(pv, yva),
        test_mae=mae(pt, y[te]),
        val_tau=kendall_tau(pv, yva),
        test_tau=kendall_tau(pt, y[te]),
        test_coverage=coverage(lo, hi, y[te]),
        round_val_mae=round_val,
        best_round=best_round.astype(jnp.int32),
        checks_run=runs,
        round_anchors=jnp.where(active > 0, history, -1),
    )
    anchors = jnp.where(active > 0, anchors, -1)
    return anchors, params, scale, diag


def _sweep(Y, y, tr, va, te, ks, keys, lr, *, k_max, cfg):
    def lane(k, key):
        return _pipeline(Y, y, tr, va, te, k, key, lr, k_max=k_max, cfg=cfg)

    return jax.vmap(lane)(ks, keys)


# Module-level programs, the data as arguments and the options static: a second call
# with the same shapes and options reuses the compiled program.
_pipeline_jit = jax.jit(_pipeline, static_argnames=("k_max", "cfg"))
_sweep_jit = jax.jit(_sweep, static_argnames=("k_max", "cfg"))

_INITS = ("kmeans", "random")
_KEEPS = ("best", "last")


def _config(
    rounds, epochs, final_epochs, check_every, patience, hidden, dropout, init, alpha, keep="best"
):
    for name, v in (
        ("rounds", rounds),
        ("epochs", epochs),
        ("final_epochs", final_epochs),
        ("check_every", check_every),
        ("patience", patience),
    ):
        if (
            isinstance(v, bool)
            or not isinstance(v, int | np.integer)
            or v < (0 if name == "rounds" else 1)
        ):
            raise ValueError(
                f"{name} must be a {'non-negative' if name == 'rounds' else 'positive'} int, got {v!r}"
            )
    if isinstance(hidden, str | bytes) or not all(
        isinstance(h, int | np.integer) and not isinstance(h, bool) and h >= 1
        for h in np.atleast_1d(np.asarray(hidden, dtype=object))
    ):
        raise ValueError(f"hidden must be a sequence of positive int widths, got {hidden!r}")
    if init not in _INITS:
        raise ValueError(f"init must be one of {_INITS}, got {init!r}")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not isinstance(keep, str) or keep not in _KEEPS:
        raise ValueError(f"keep must be one of {_KEEPS}, got {keep!r}")
    return (
        int(rounds),
        int(epochs),
        int(final_epochs),
        int(check_every),
        int(patience),
        tuple(int(h) for h in hidden),
        float(dropout),
        init,
        float(alpha),
        keep,
    )


def _index_vector(name: str, v, bound: int, what: str, size: int | None = None):
    """``v`` as an int64 NumPy vector of indices in ``[0, bound)`` (``bound`` counts
    ``what``), non-empty, of length ``size`` when given; else a ValueError naming it."""
    a = np.asarray(v)
    if (
        a.ndim != 1
        or a.size == 0
        or not np.issubdtype(a.dtype, np.integer)
        or (size is not None and a.size != size)
    ):
        want = "a non-empty vector of ints" if size is None else f"a vector of K = {size} ints"
        raise ValueError(f"{name} must be {want}, got {a.dtype} of shape {a.shape}")
    if a.min() < 0 or a.max() >= bound:
        raise ValueError(
            f"{name} must lie in [0, {bound}) (the {what} of Y), got [{a.min()}, {a.max()}]"
        )
    return a.astype(np.int64)


def _check_init_anchors(init_anchors, K: int, n_items: int):
    """``K`` distinct item indices in ``[0, n_items)``, as a default-int JAX array (the
    k-means start's dtype)."""
    a = _index_vector("init_anchors", init_anchors, n_items, "items", size=K)
    if np.unique(a).size != K:
        raise ValueError("init_anchors must be distinct items (no repeats)")
    return jnp.asarray(a)


def _check_lr(lr) -> None:
    if not is_concrete(lr):
        return
    v = np.asarray(lr)
    if v.shape != () or not np.isfinite(v) or v <= 0:
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")


def _check_split(split, n_models: int) -> tuple:
    """An explicit (train, val, test): disjoint integer indices in [0, n_models)."""
    if not isinstance(split, tuple | list) or len(split) != 3:
        raise ValueError("split must be (train, val, test) index arrays, train of 2 or more")
    parts = [
        _index_vector(f"split's {name} indices", part, n_models, "models")
        for name, part in zip(("train", "val", "test"), split, strict=True)
    ]
    if len(parts[0]) < 2:
        raise ValueError("split must be (train, val, test) index arrays, train of 2 or more")
    allidx = np.concatenate(parts)
    if np.unique(allidx).size != allidx.size:
        raise ValueError("split's train, val and test indices must be distinct (no overlap)")
    return tuple(parts)


def _prepare(Y, Ks, n_test, n_val, split_key):
    Y = check_matrix(Y)
    if not jnp.issubdtype(Y.dtype, jnp.floating) or Y.dtype.itemsize < 4:
        Y = Y.astype(jnp.float32)
    n_models, n_items = Y.shape
    for K in Ks:
        if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 1:
            raise ValueError(f"K must be a positive int, got {K!r}")
        if K >= n_items:
            raise ValueError(f"K = {K} anchors must be fewer than the {n_items} items")
    split = split_models(split_key, n_models, n_test, n_val)
    return Y, Y.mean(axis=1), split


def sparse_eval(
    Y,
    K: int,
    key: jax.Array,
    *,
    n_test: int = 200,
    n_val: int = 200,
    rounds: int = 10,
    epochs: int = 2000,
    final_epochs: int = 20000,
    check_every: int = 500,
    patience: int = 30,
    lr: float = 5e-4,
    hidden=(128, 64, 32),
    dropout: float = 0.1,
    init: str = "kmeans",
    alpha: float = 0.1,
    split_key: jax.Array | None = None,
    split: tuple | None = None,
    keep: str = "best",
    init_anchors=None,
) -> SparseEvalResult:
    r"""Select ``K`` anchors of the correctness matrix ``Y`` and fit the accuracy predictor.

    Args:
        Y: ``(n_models, n_items)`` correctness in $[0, 1]$ (0/1, or soft scores);
            no NaN (fill missing answers first).
        K: number of anchors, ``1 <= K < n_items``.
        key: ``jax.random`` key (split, initializations, dropout).
        n_test, n_val: models held out for testing and for validation/calibration;
            the rest train the predictor.
        rounds, epochs: refinement rounds (one swap each) and proxy epochs per round.
        final_epochs, check_every, patience: the final training and its early stop.
        lr, hidden, dropout: Adam's learning rate, hidden widths, dropout rate.
        init: ``"kmeans"`` (default) or ``"random"`` initial anchors.
        alpha: miscoverage of the intervals (0.1 gives 90% intervals).
        split_key: key of the train/validation/test split (default: derived from ``key``).
        split: an explicit ``(train, val, test)`` triple of model indices instead (for
            transfer tests: test models from a family no training model is from);
            disjoint ints in ``[0, n_models)``, train of 2 or more.
        keep: which refinement round's anchors are kept: ``"best"`` (default, the
            least validation MAE over the ``rounds + 1`` proxies; undoes harmful
            swaps) or ``"last"`` (after the last swap, as the reference code does;
            one proxy fewer, no choice made on the noisy validation MAE).
        init_anchors: ``K`` distinct item indices to start the swaps from, instead
            of ``init``'s (leave ``init`` at its default then); with ``rounds=0`` and
            ``keep="last"`` or ``"best"`` they are the anchors returned. To
            reproduce the reference code, pass k-means anchors of *all* models
            (``kmeans_anchors(Y, K, key)[0]``); that lets the test models' answers
            choose the anchors (a leak: the test MAE is then optimistic), which the
            default start, on the training models only, avoids.

    Defaults are the reference code's. Every argument is checked before compiling
    (``Y`` by `check_matrix`, keys, ``K``, ``lr > 0``, the counts, ``hidden``'s
    widths, ``split``, ``keep``, ``init_anchors``); errors name the argument. Returns a `SparseEvalResult`.
    """
    if init_anchors is not None:
        if init != "kmeans":
            raise ValueError(
                f"init_anchors replaces init's start: give one of them, got init={init!r} too"
            )
    cfg = _config(
        rounds, epochs, final_epochs, check_every, patience, hidden, dropout, init, alpha, keep
    )
    if init_anchors is not None:
        cfg = cfg[:7] + ("given",) + cfg[8:]
    check_key("key", key)
    _check_lr(lr)
    if split_key is not None:
        check_key("split_key", split_key)
    split_key = jax.random.fold_in(key, 0) if split_key is None else split_key
    if split is None:
        Y, y, split = _prepare(Y, (K,), n_test, n_val, split_key)
    else:
        Y, y, _ = _prepare(Y, (K,), 1, 1, split_key)
        split = _check_split(split, Y.shape[0])
    tr, va, te = (jnp.asarray(s) for s in split)
    a0 = None if init_anchors is None else _check_init_anchors(init_anchors, int(K), Y.shape[1])
    anchors, params, scale, diag = _pipeline_jit(
        Y, y, tr, va, te, jnp.int32(K), key, jnp.asarray(lr, Y.dtype), a0, k_max=int(K), cfg=cfg
    )
    return SparseEvalResult(anchors, params, scale, cfg[-1], diag, split)


def sparse_eval_sweep(Y, Ks, keys, *, split_key=None, **options) -> SparseEvalResult:
    """`sparse_eval` for every pair ``(Ks[i], keys[i])`` in one compiled ``vmap``.

    Every lane uses one model split (by ``split_key``, default derived from
    ``keys[0]``), so the lanes are comparable. Anchor slots are padded to
    ``max(Ks)``: lane ``i``'s first ``Ks[i]`` anchors are its own and the rest are
    ``-1``. Lane ``i`` equals ``sparse_eval(Y, Ks[i], keys[i], split_key=split_key)``
    up to rounding. ``options`` are `sparse_eval`'s keywords (``keep`` included),
    except ``split`` and ``init_anchors`` (per-lane starts are not supported: their
    ``K`` differ). Returns a stacked `SparseEvalResult`.
    """
    Ks = list(Ks)
    keys = list(keys)
    if len(Ks) == 0 or len(Ks) != len(keys):
        raise ValueError(
            f"Ks and keys must be non-empty and of equal length ({len(Ks)}, {len(keys)})"
        )
    for i, k in enumerate(keys):
        check_key(f"keys[{i}]", k)
    for K in Ks:
        if isinstance(K, bool) or not isinstance(K, int | np.integer) or K < 1:
            raise ValueError(f"K must be a positive int, got {K!r}")
    Ks = [int(k) for k in Ks]
    if split_key is not None:
        check_key("split_key", split_key)
    lr = options.pop("lr", 5e-4)
    _check_lr(lr)
    n_test, n_val = options.pop("n_test", 200), options.pop("n_val", 200)
    defaults = dict(
        rounds=10,
        epochs=2000,
        final_epochs=20000,
        check_every=500,
        patience=30,
        hidden=(128, 64, 32),
        dropout=0.1,
        init="kmeans",
        alpha=0.1,
        keep="best",
    )
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"unknown options {sorted(unknown)}")
    cfg = _config(**{**defaults, **options})
    split_key = jax.random.fold_in(keys[0], 0) if split_key is None else split_key
    Y, y, split = _prepare(Y, Ks, n_test, n_val, split_key)
    tr, va, te = (jnp.asarray(s) for s in split)
    anchors, params, scale, diag = _sweep_jit(
        Y,
        y,
        tr,
        va,
        te,
        jnp.asarray(Ks, jnp.int32),
        jnp.stack(keys),
        jnp.asarray(lr, Y.dtype),
        k_max=max(Ks),
        cfg=cfg,
    )
    return SparseEvalResult(anchors, params, scale, cfg[-1], diag, split)


def estimate(result: SparseEvalResult, answers) -> Estimate:
    """Accuracies of new models from their answers, with per-model intervals.

    ``answers``: ``(n_models, K)`` answers on the anchors (in ``result.anchors``
    order) or ``(n_models, n_items)`` full rows (the anchor columns are taken).
    """
    if not isinstance(result, SparseEvalResult):
        raise TypeError(f"result must be a SparseEvalResult, got {type(result).__name__}")
    anchors = np.asarray(result.anchors)
    if anchors.ndim != 1:
        raise ValueError("estimate takes one result (index a sweep's lanes first)")
    active = anchors >= 0
    A = check_matrix(answers, "answers")
    if A.shape[1] == active.sum():
        X = A
    elif A.shape[1] > anchors.max():
        X = A[:, anchors[active]]
    else:
        raise ValueError(
            f"answers must have {int(active.sum())} columns (the anchors) or all the items; "
            f"got {A.shape[1]}"
        )
    W1, b1 = result.params[0]
    params = [(W1[: X.shape[1]], b1), *result.params[1:]]
    p = apply_mlp(params, X.astype(W1.dtype))
    s = result.scale * _sigma(p)
    return Estimate(p, jnp.clip(p - s, 0, 1), jnp.clip(p + s, 0, 1))
