r"""AutoQD's search loop: CMA-MAE over policy parameters with learned behaviour descriptors.

Hedayatian and Nikolaidis, "Automatic Discovery of Diverse Behaviors with
Quality-Diversity Optimization" (ICLR 2026, arXiv 2506.05634). This module is the
driver; the mathematics it uses (random Fourier features, occupancy embeddings,
calibrated weighted PCA, Vendi scores) lives in `jaxsolve.blackbox.autoqd`, which
stays a set of pure functions with no dependence on the scheduler, the archives or
the environments. Here the three meet, so the coupling is kept out of that module.

**Behaviour as an occupancy measure.** A policy $\pi$ in an environment induces the
discounted state-action occupancy measure
$\rho^\pi(s, a) = (1 - \gamma) \sum_t \gamma^t P(s_t = s, a_t = a \mid \pi)$. With
the random Fourier features $\varphi$ of a Gaussian kernel $k$ of width $\sigma$
($E[\varphi(z)^\top \varphi(z')] = k(z, z')$), the embedding

$$
\psi^\pi = \frac1n \sum_{j=1}^n (1 - \gamma) \sum_{t=0}^{T-1} \gamma^t
\varphi(s^j_t, a^j_t)
$$

(``n_rollouts`` episodes per policy) is an estimate of the kernel mean embedding of
$\rho^\pi$, so $\|\psi^{\pi_1} - \psi^{\pi_2}\|^2$ estimates the squared
maximum mean discrepancy
$\mathrm{MMD}_k^2(\rho^{\pi_1}, \rho^{\pi_2}) = E k(z, z') + E k(y, y') - 2 E k(z, y)$
between the two policies' behaviours (the paper's Theorem 1: the error vanishes as
$n$ and ``n_features`` $D$ grow). The features are drawn once per run and never
change, so embeddings computed at different iterations stay comparable.

**Descriptors.** Calibrated fitness-weighted PCA (`fit_descriptors`) maps the
$D$-dimensional embeddings to ``k`` descriptors $d(\psi) = \operatorname{clip}(A\psi
+ b, -1, 1)$: the top-$k$ eigenvectors of the fitness-weighted covariance of the fit
set, each axis scaled so that the fit set spans $[-1, 1]$. The first map is fitted on
the first iteration's population; afterwards it is refitted every ``refit_every``
iterations on the elites of the result archive (their stored embeddings and returns).

**Search.** CMA-MAE (`jaxsolve.blackbox.cma_mae`) over the flat policy parameters:
``n_emitters`` CMA-ES emitters of ``batch_size`` samples each; every iteration all
$E \cdot B$ policies are rolled out ``n_rollouts`` times in one ``vmap``; the
objective is the mean return, the measures are $d(\psi)$, and the grid archive over
$[-1, 1]^k$ anneals with ``learning_rate`` from ``threshold_min``. Each iteration,
refit included, is one compiled step; the whole run is one ``lax.scan`` under one
``jit`` (compiled once per configuration: calling `autoqd` again with the same
arguments and another key reuses the program).

**Re-insertion after a refit.** Exactly this happens at a refit:

1. *What is stored.* Each archive cell keeps, next to its elite's parameters and
   return, the elite's embedding $\psi$ — the very embedding computed when that elite
   was evaluated (the mean over its ``n_rollouts`` episodes), not a new rollout. It is
   held by a twin archive per archive (`AutoQDState.embeddings` and
   `AutoQDState.result_embeddings`): a grid archive with the same configuration whose
   "solution" is $\psi$, fed the same objectives and measures in every batch, so it
   holds the same elites in the same cells (the insertion rule depends only on
   objectives, measures and thresholds).
2. *The fit.* $A, b$ are refitted on the result archive's occupied cells (embeddings
   and returns of its elites, `fit_descriptors` with ``mask=occupied``).
3. *The rebuild.* Both archives (the annealing one the emitters rank against, and
   the elitist result archive) are emptied and their own elites are added back as one
   batch each, with their stored returns and new descriptors $d_{\text{new}}(\psi)$;
   the twins are rebuilt the same way. Elites that now fall in one cell compete as in
   any batch: the best is kept, so an archive never gains cells at a refit and may
   lose some (that drop shows in the history).
4. *Thresholds are reset.* Every cell starts again from ``threshold_min`` and the
   re-inserted batch moves the thresholds by the CMA-MAE batch rule, so a cell that
   receives $n_e$ elites of mean return $\bar f_e$ gets
   $t_e = (1-\alpha)^{n_e} t_{\min} + (1 - (1-\alpha)^{n_e}) \bar f_e$: the state of an
   archive that has seen exactly those elites once. The old thresholds are not
   carried over because a threshold summarizes the returns that fell in one region
   of the *old* descriptor space; after the refit the cells are different regions,
   and there is no cell-to-cell correspondence to carry them along. (The result
   archive is elitist, so its thresholds are its elites' returns either way.)
5. *The emitters are kept* (means, covariances, step sizes): they live in parameter
   space, which the refit does not change; their next ranking is against the rebuilt
   archive.

Everything else a refit could consult (non-elite policies evaluated earlier) is not
stored, so the memory is that of the archives.

**Reference archive.** Given ``reference`` (an elitist archive over the
environment's hand-crafted descriptors, e.g. the final position of `PointMass`),
every evaluated policy is also inserted there with its mean return and mean
hand-crafted descriptors, and its QD score and coverage are recorded per iteration.
It never influences the search; it is how AutoQD is scored against CMA-MAE run on the
hand-crafted descriptors themselves (``bench/blackbox.py --autoqd``).

**Contract.** ``env.rollout(policy, params, key)`` returns a `Rollout`-like object
with ``state_actions`` ``(T, dim)``, ``ret`` (scalar, higher is better) and
``descriptors`` (hand-crafted, used only by ``reference``); it must be a pure JAX
function of its arguments (jit/vmap). A NaN return or embedding (e.g. NaN parameters)
is never inserted. Returns are not shifted: with ``threshold_min = 0`` (the default)
only policies of positive return enter the annealing archive.

One module, just over 500 lines: the iteration, the refit and the rebuild all read and
write the same twin-archive layout of `AutoQDState`; split, each would import its
internals.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.blackbox.archives import ArchiveState, ArchiveStats, GridArchive
from jaxsolve.blackbox.autoqd import (
    RFF,
    Descriptor,
    fit_descriptors,
    occupancy_embedding,
    rff_embedding,
)
from jaxsolve.blackbox.cma_mae import CMAMAE, MAEState, cma_mae
from jaxsolve.core.validation import check_int, check_key

__all__ = ["AutoQDState", "AutoQDHistory", "AutoQDResult", "AutoQD", "autoqd"]


class AutoQDState(NamedTuple):
    """The driver's state between iterations.

    Attributes:
        mae: the CMA-MAE scheduler's state (`MAEState`: annealing archive
            ``mae.archive``, elitist result archive ``mae.result``, the stacked
            emitters, the scheduler's key and counters); the archives' solutions are
            policy parameters and their measures the learned descriptors.
        embeddings: twin of ``mae.archive`` (`ArchiveState`) whose ``solution`` field
            holds each elite's embedding $\\psi$ ``(cells, n_features)``; same cells,
            objectives, measures and thresholds as ``mae.archive``.
        result_embeddings: the same twin for ``mae.result``.
        descriptor: the current descriptor map (`Descriptor`, ``A`` ``(k, n_features)``,
            ``b`` ``(k,)``).
        reference: the reference archive's state over the hand-crafted descriptors
            (`ArchiveState`), or ``None`` without ``reference``.
        key: the rollouts' PRNG key (the scheduler keeps its own in ``mae.key``).
    """

    mae: MAEState
    embeddings: ArchiveState
    result_embeddings: ArchiveState
    descriptor: Descriptor
    reference: ArchiveState | None
    key: jax.Array


class AutoQDHistory(NamedTuple):
    """Per iteration (leading axis ``iterations``), measured after the iteration's
    insertions and, on a refit iteration, after the rebuild.

    Attributes:
        qd_score: QD score of the result archive over the learned descriptors (float).
        coverage: occupied fraction of that archive, in [0, 1] (float).
        reference_qd_score: QD score of the reference archive over the hand-crafted
            descriptors (NaN without ``reference``).
        reference_coverage: its occupied fraction (NaN without ``reference``).
        refit: True on the iterations that ended with a refit (bool).
        evaluations: policies evaluated so far, each over ``n_rollouts`` episodes (int32).
    """

    qd_score: jax.Array
    coverage: jax.Array
    reference_qd_score: jax.Array
    reference_coverage: jax.Array
    refit: jax.Array
    evaluations: jax.Array


class AutoQDResult(NamedTuple):
    """What `autoqd` returns.

    Attributes:
        archive: the final result archive (`ArchiveState`: per cell the best policy's
            parameters, its mean return and its learned descriptors under ``descriptor``).
        descriptor: the final descriptor map (`Descriptor`); ``descriptor(psi)`` maps an
            embedding to ``[-1, 1]^k``.
        history: `AutoQDHistory`, one entry per iteration.
        features: the random Fourier features (`RFF`) the embeddings were computed with;
            with `jaxsolve.blackbox.occupancy_embedding` they embed new rollouts.
        state: the final `AutoQDState` (both archives, their twins, emitters, reference).
        reference: the final reference archive (`ArchiveState`), or ``None``.
    """

    archive: ArchiveState
    descriptor: Descriptor
    history: AutoQDHistory
    features: RFF
    state: AutoQDState
    reference: ArchiveState | None


class AutoQD(eqx.Module):
    """The configured AutoQD search (module docstring); build it with `autoqd` or
    `AutoQD.build`, run it with `run` (one key, one compiled program).

    Attributes:
        env: the environment (``rollout(policy, params, key)``).
        policy: ``policy(params, obs) -> action`` over flat parameters.
        mae: the CMA-MAE scheduler (`CMAMAE`) over the learned descriptors.
        twin: grid archive like ``mae.archive`` whose solutions are embeddings.
        result_twin: grid archive like ``mae.result_archive`` whose solutions are
            embeddings.
        reference: elitist archive over the hand-crafted descriptors, or ``None``.
        x0: the emitters' common start ``(n_params,)``.
        iterations: number of iterations (static int).
        refit_every: iterations between descriptor refits (static int).
        n_rollouts: episodes per policy (static int).
        n_features: random Fourier features $D$ (static int).
        k: number of learned descriptors (static int).
        bandwidth: the Gaussian kernel's width $\\sigma$.
        gamma: the occupancy discount $\\gamma$.
    """

    env: Any
    policy: Any
    mae: CMAMAE
    twin: GridArchive
    result_twin: GridArchive
    reference: Any
    x0: jax.Array
    iterations: int = eqx.field(static=True)
    refit_every: int = eqx.field(static=True)
    n_rollouts: int = eqx.field(static=True)
    n_features: int = eqx.field(static=True)
    k: int = eqx.field(static=True)
    bandwidth: float
    gamma: float

    # -- one evaluation of a population -------------------------------------------------
    def evaluate(self, features: RFF, params, key):
        """Roll out each row of ``params`` ``(N, n_params)`` ``n_rollouts`` times.

        Returns ``(ret, psi, hand)``: mean returns ``(N,)``, embeddings ``(N, D)``
        and mean hand-crafted descriptors ``(N, m)``.
        """
        N = params.shape[0]
        keys = jax.random.split(key, (N, self.n_rollouts))
        roll = lambda p, k: self.env.rollout(self.policy, p, k)  # noqa: E731
        ro = jax.vmap(lambda p, ks: jax.vmap(lambda k: roll(p, k))(ks))(params, keys)
        sa = ro.state_actions.astype(params.dtype)  # (N, R, T, dim)
        psi = jax.vmap(lambda t: occupancy_embedding(features, t, self.gamma))(sa)
        ret = jnp.mean(ro.ret, axis=1).astype(params.dtype)
        hand = jnp.mean(ro.descriptors, axis=1).astype(params.dtype)
        return ret, psi, hand

    # -- the refit and rebuild ----------------------------------------------------------
    def refit(self, st: AutoQDState) -> AutoQDState:
        """Refit the descriptors on the result archive's elites and rebuild both archives
        (the module docstring's five steps)."""
        res, res_psi = st.mae.result, st.result_embeddings
        desc = fit_descriptors(res_psi.solution, res.objective, self.k, mask=res.occupied)

        def rebuild(archive, twin, state, psi_state):
            obj = jnp.where(state.occupied, state.objective, jnp.nan)
            meas = desc(psi_state.solution)
            dt = state.objective.dtype
            new, _ = archive.add(archive.init(dt), state.solution, obj, meas)
            new_psi, _ = twin.add(twin.init(dt), psi_state.solution, obj, meas)
            return new, new_psi

        arch, arch_psi = rebuild(self.mae.archive, self.twin, st.mae.archive, st.embeddings)
        result, result_psi = rebuild(self.mae.result_archive, self.result_twin, res, res_psi)
        mae = st.mae._replace(archive=arch, result=result)
        return st._replace(
            mae=mae, embeddings=arch_psi, result_embeddings=result_psi, descriptor=desc
        )

    # -- one iteration -------------------------------------------------------------------
    def _iterate(self, features: RFF, st: AutoQDState, first: bool):
        X, mae = self.mae.ask(st.mae)
        E, B, n = X.shape
        key, sub = jax.random.split(st.key)
        flat = X.reshape(E * B, n)
        ret, psi, hand = self.evaluate(features, flat, sub)
        desc = st.descriptor
        if first:  # the first map: fitted on the first population itself
            desc = fit_descriptors(psi, ret, self.k, mask=jnp.all(jnp.isfinite(psi), axis=1))
        meas = desc(psi)
        mae = self.mae.tell(mae, X, ret.reshape(E, B), meas.reshape(E, B, self.k))
        emb, _ = self.twin.add(st.embeddings, psi, ret, meas)
        remb, _ = self.result_twin.add(st.result_embeddings, psi, ret, meas)
        ref = st.reference
        if self.reference is not None:
            ref, _ = self.reference.add(ref, flat, ret, hand)
        return AutoQDState(mae, emb, remb, desc, ref, key)

    def _record(self, st: AutoQDState, refit, i) -> AutoQDHistory:
        s: ArchiveStats = self.mae.result_archive.stats(st.mae.result)
        dt = s.qd_score.dtype
        if self.reference is not None:
            r = self.reference.stats(st.reference)
            rq, rc = r.qd_score.astype(dt), r.coverage.astype(dt)
        else:
            rq = rc = jnp.asarray(jnp.nan, dt)
        E, B = self.mae.n_emitters, self.mae.es.popsize
        evals = ((i + 1) * E * B).astype(jnp.int32)
        return AutoQDHistory(s.qd_score, s.coverage, rq, rc, jnp.asarray(refit, bool), evals)

    def init(self, key) -> tuple[RFF, AutoQDState]:
        """Draw the features and an empty state: ``(features, state)``."""
        kf, km, kr = jax.random.split(key, 3)
        dt = self.x0.dtype
        sa_dim = self._state_action_dim()
        features = rff_embedding(kf, sa_dim, self.n_features, self.bandwidth, dt)
        mae = self.mae.init(self.x0, km)
        ref = None if self.reference is None else self.reference.init(dt)
        zero = Descriptor(jnp.zeros((self.k, self.n_features), dt), jnp.zeros(self.k, dt))
        st = AutoQDState(mae, self.twin.init(dt), self.result_twin.init(dt), zero, ref, kr)
        return features, st

    def _state_action_dim(self) -> int:
        return int(_probe(self.env, self.policy, self.x0)[0].shape[-1])

    def run(self, key) -> AutoQDResult:
        """The whole search from ``key`` (jit-compiled; see `autoqd`)."""
        check_key("key", key)
        return _run(self, key)

    @staticmethod
    def build(env, policy, **kwargs) -> AutoQD:
        """Validate the arguments (those of `autoqd` but ``key``) and configure a search."""
        return _build(env, policy, **kwargs)


@eqx.filter_jit
def _run(self: AutoQD, key) -> AutoQDResult:
    features, st = self.init(key)
    st = self._iterate(features, st, first=True)
    due0 = self.refit_every == 1
    if due0:
        st = self.refit(st)
    h0 = self._record(st, due0, jnp.int32(0))

    def body(st, i):
        st = self._iterate(features, st, first=False)
        due = (i + 1) % self.refit_every == 0
        st = jax.lax.cond(due, lambda s: self.refit(s), lambda s: s, st)
        return st, self._record(st, due, i)

    st, hist = jax.lax.scan(body, st, jnp.arange(1, self.iterations, dtype=jnp.int32))
    hist = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), h0, hist)
    return AutoQDResult(st.mae.result, st.descriptor, hist, features, st, st.reference)


def _probe(env, policy, x0):
    """Shapes of one rollout's ``state_actions`` and ``ret`` (nothing is run)."""

    def one(p):
        ro = env.rollout(policy, p, jax.random.key(0))
        return ro.state_actions, ro.ret

    return jax.eval_shape(one, x0)


def _positive_float(name: str, v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {v!r}") from None
    if not (np.isfinite(f) and f > 0):
        raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    return f


def _build(
    env,
    policy,
    *,
    iterations: int = 100,
    x0=None,
    n_emitters: int = 5,
    batch_size: int = 16,
    sigma0: float = 0.5,
    learning_rate: float = 0.01,
    threshold_min: float = 0.0,
    k: int = 4,
    dims=None,
    n_rollouts: int = 4,
    n_features: int = 100,
    bandwidth: float = 1.0,
    gamma: float = 0.999,
    refit_every: int = 10,
    reference: GridArchive | None = None,
) -> AutoQD:
    if not callable(getattr(env, "rollout", None)):
        raise TypeError(
            f"env must have a rollout(policy, params, key) method, got {type(env).__name__}"
        )
    if not callable(policy):
        raise TypeError(f"policy must be callable as policy(params, obs), got {policy!r}")
    iterations = check_int("iterations", iterations)
    refit_every = check_int("refit_every", refit_every)
    n_rollouts = check_int("n_rollouts", n_rollouts)
    n_features = check_int("n_features", n_features)
    k = check_int("k", k)
    if k > n_features:
        raise ValueError(f"k must be <= n_features = {n_features}, got {k}")
    bandwidth = _positive_float("bandwidth", bandwidth)
    sigma0 = _positive_float("sigma0", sigma0)
    try:
        gamma = float(gamma)
    except (TypeError, ValueError):
        raise ValueError(f"gamma must be a number in [0, 1), got {gamma!r}") from None
    if not 0 <= gamma < 1:
        raise ValueError(f"gamma must be in [0, 1), got {gamma!r}")
    if x0 is None:
        n = getattr(policy, "n_params", None)
        if n is None:
            raise ValueError("x0 is required when policy has no n_params attribute")
        x0 = jnp.zeros(int(n), jnp.result_type(float))
    x0 = jnp.asarray(x0)
    if x0.ndim != 1 or x0.shape[0] < 1 or not jnp.issubdtype(x0.dtype, jnp.floating):
        raise ValueError(f"x0 must be a float vector (n_params,), got {x0.shape} {x0.dtype}")
    n = getattr(policy, "n_params", x0.shape[0])
    if x0.shape[0] != n:
        raise ValueError(f"x0 must have policy.n_params = {n} entries, got {x0.shape[0]}")
    if not bool(jnp.all(jnp.isfinite(x0))):
        raise ValueError("x0 must be finite")
    if dims is None:
        dims = (max(2, round(2401 ** (1 / k))),) * k  # 7^4, 49^2: about 2400 cells
    dims = tuple(int(d) for d in np.atleast_1d(dims))
    if len(dims) != k:
        raise ValueError(f"dims must give {k} cell counts (one per learned descriptor), got {dims}")
    if reference is not None:
        if not all(callable(getattr(reference, a, None)) for a in ("init", "add", "stats")):
            raise TypeError(
                f"reference must be an archive (grid_archive(...)), got {type(reference).__name__}"
            )
        if getattr(reference, "solution_dim", x0.shape[0]) != x0.shape[0]:
            raise ValueError(
                f"reference must have solution_dim = {x0.shape[0]} (the policy's parameters), "
                f"got {reference.solution_dim}"
            )
    ranges = [(-1.0, 1.0)] * k
    mae = cma_mae(
        solution_dim=x0.shape[0],
        dims=dims,
        ranges=ranges,
        n_emitters=n_emitters,
        batch_size=batch_size,
        sigma0=sigma0,
        learning_rate=learning_rate,
        threshold_min=threshold_min,
    )
    # the twins: the scheduler's own archives with embeddings as their solutions
    twin = dataclasses.replace(mae.archive, solution_dim=n_features)
    result_twin = dataclasses.replace(mae.result_archive, solution_dim=n_features)
    try:
        sa, ret = _probe(env, policy, x0)
    except Exception as err:
        raise TypeError(
            "env.rollout(policy, x0, key) failed or returned no state_actions / ret "
            f"({type(err).__name__}: {err}); check env, policy and x0"
        ) from err
    if sa.ndim != 2 or ret.shape != ():
        raise ValueError(
            f"env.rollout must give state_actions (T, dim) and a scalar ret, got "
            f"{sa.shape} and {ret.shape}"
        )
    return AutoQD(
        env,
        policy,
        mae,
        twin,
        result_twin,
        reference,
        x0,
        iterations,
        refit_every,
        n_rollouts,
        n_features,
        k,
        bandwidth,
        gamma,
    )


def autoqd(env, policy, *, key, **kwargs) -> AutoQDResult:
    """AutoQD: CMA-MAE over ``policy``'s parameters in ``env`` with learned descriptors.

    Args:
        env: a JAX environment with ``rollout(policy, params, key)`` returning
            ``state_actions`` ``(T, dim)``, ``ret`` and ``descriptors`` (e.g. `PointMass`).
        policy: ``policy(params, obs) -> action`` over a flat parameter vector (e.g.
            `linear_policy`); its ``n_params`` sizes ``x0`` when that is not given.
        key: a ``jax.random`` key (features, emitters, rollouts).
        iterations: CMA-MAE iterations (default 100); ``n_emitters * batch_size``
            policies are evaluated per iteration.
        x0: the emitters' start (default zeros of ``policy.n_params``, in the default
            float dtype).
        n_emitters: CMA-ES emitters (default 5).
        batch_size: policies per emitter per iteration (default 16).
        sigma0: the emitters' initial and restart step size (default 0.5).
        learning_rate: the annealing archive's $\\alpha$ (default 0.01).
        threshold_min: its initial thresholds (default 0).
        k: learned descriptors (default 4, the paper's; in `bench/results/blackbox.md`
            k = 4 with ``gamma = 0.999`` is ahead of CMA-MAE on the hand-crafted
            descriptors at 8000 policies, k = 2 with ``gamma = 0.99`` is 20-30% behind).
        dims: cells per learned descriptor (default about 2400 cells in all: 7 per axis
            for ``k = 4``, 49 x 49 for ``k = 2``); the archive covers $[-1, 1]^k$.
        n_rollouts: episodes per policy, averaged in the return and the embedding
            (default 4).
        n_features: random Fourier features $D$ (default 100, the paper's).
        bandwidth: the Gaussian kernel's width on state-action vectors (default 1).
        gamma: the occupancy discount (default 0.999, the paper's).
        refit_every: iterations between refits of the descriptors (default 10).
        reference: an archive over the environment's hand-crafted descriptors that
            every evaluated policy is also added to, for scoring (default none).

    Returns:
        `AutoQDResult`: the final result archive, the descriptor map, the per-iteration
        `AutoQDHistory`, the features and the final state.

    Raises:
        ValueError / TypeError naming the argument that is out of range or of the
        wrong kind (the CMA-MAE and archive arguments are checked by `cma_mae`).
    """
    check_key("key", key)
    return _build(env, policy, **kwargs).run(key)
