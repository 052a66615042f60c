"""Demo: a toy preference-learning run showing Uni-DPO's reweighting (``make demo``).

A tabular softmax policy over a synthetic vocabulary generates responses of ``T``
tokens per prompt; a hidden per-token reward defines each response's true quality and
a noisy judge scores it (Uni-DPO's external quality score). Pairs are labelled by the
judge, so pairs with small score margins are often mislabelled with respect to the
true reward. DPO and Uni-DPO train the same policy with optax Adam on the same pairs.
"""

from __future__ import annotations

import pathlib
import sys

if __name__ == "__main__":  # `python examples/<name>.py`: import from the repo root, not examples/
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from examples._common import main
from jaxsolve.losses.preference import sequence_logps, uni_dpo_loss, uni_dpo_weights

__all__ = ["VARIANTS", "make_preference_data", "train_preference", "weights_report", "run"]


def make_preference_data(seed: int = 0, *, prompts=16, vocab=12, length=4, pairs=512, noise=0.6):
    """Synthetic preference pairs; returns a dict of arrays (see the module docstring)."""
    rng = np.random.default_rng(seed)
    reward = rng.normal(size=(prompts, vocab))
    ref_logits = 0.5 * rng.normal(size=(prompts, vocab))
    ref_p = np.exp(ref_logits) / np.exp(ref_logits).sum(1, keepdims=True)
    p = rng.integers(0, prompts, pairs)
    ya = np.stack([rng.choice(vocab, length, p=ref_p[i]) for i in p])
    yb = np.stack([rng.choice(vocab, length, p=ref_p[i]) for i in p])
    true_a = reward[p[:, None], ya].mean(1)
    true_b = reward[p[:, None], yb].mean(1)
    # the judge: an affine, noisy view of the true quality (scores on a ~0-6 scale)
    sa = 3.0 + 2.0 * true_a + noise * rng.normal(size=pairs)
    sb = 3.0 + 2.0 * true_b + noise * rng.normal(size=pairs)
    a_wins = sa >= sb
    chosen = np.where(a_wins[:, None], ya, yb)
    rejected = np.where(a_wins[:, None], yb, ya)
    s_w, s_l = np.maximum(sa, sb), np.minimum(sa, sb)
    mislabelled = np.where(a_wins, true_a < true_b, true_b < true_a)
    return {
        "reward": reward,
        "ref_logits": ref_logits,
        "prompt": p,
        "chosen": chosen,
        "rejected": rejected,
        "score_chosen": s_w,
        "score_rejected": s_l,
        "mislabelled": mislabelled,
    }


def _seq_logps(logits, prompt, tokens, length_normalize):
    logp = jax.nn.log_softmax(logits[prompt], axis=-1)  # (n, vocab)
    tok = jnp.take_along_axis(logp, tokens, axis=-1)  # (n, T)
    return sequence_logps(tok, length_normalize=length_normalize)


def _expected_reward(logits, reward):
    pi = jax.nn.softmax(logits, axis=-1)
    return jnp.mean(jnp.sum(pi * reward, axis=-1))


VARIANTS = {
    # Uni-DPO with its extra terms off is exactly DPO (same log-probs, same beta)
    "dpo": {"gamma": 0.0, "quality_weighting": False, "nll_weight": 0.0},
    "dpo+w_qual": {"gamma": 0.0, "quality_weighting": True, "nll_weight": 0.0},
    "uni_dpo": {"gamma": 3.0, "quality_weighting": True, "nll_weight": 0.001},
}


@partial(jax.jit, static_argnames=("quality_weighting", "steps"))
def _train(data, quality_weighting, steps, lr, beta, gamma, nll_weight):
    ref = data["ref_logits"]
    r_w = _seq_logps(ref, data["prompt"], data["chosen"], True)
    r_l = _seq_logps(ref, data["prompt"], data["rejected"], True)

    def loss_fn(theta):
        pw = _seq_logps(theta, data["prompt"], data["chosen"], True)
        pl = _seq_logps(theta, data["prompt"], data["rejected"], True)
        return uni_dpo_loss(
            pw,
            pl,
            r_w,
            r_l,
            data["score_chosen"],
            data["score_rejected"],
            beta=beta,
            tau_ref=0.8,
            tau_good=3.2,
            gamma=gamma,
            nll_weight=nll_weight,
            quality_weighting=quality_weighting,
        ).mean()

    opt = optax.adam(lr)
    theta = ref
    state = opt.init(theta)

    def body(carry, _):
        theta, state = carry
        g = jax.grad(loss_fn)(theta)
        upd, state = opt.update(g, state, theta)
        theta = optax.apply_updates(theta, upd)
        return (theta, state), _expected_reward(theta, data["reward"])

    (theta, _), curve = jax.lax.scan(body, (theta, state), None, length=steps)
    return theta, curve


def train_preference(data, kind="uni_dpo", *, steps=300, lr=0.05, beta=2.0):
    """Train the tabular policy with one of `VARIANTS`; returns (logits, reward curve).

    Every variant uses length-normalized log-probs and the same beta (2, as in the
    authors' configs), so the comparison isolates Uni-DPO's reweighting. The curve is
    the policy's expected true reward after each Adam step.
    """
    if kind not in VARIANTS:
        raise ValueError(f"kind must be one of {tuple(VARIANTS)}, got {kind!r}")
    v = VARIANTS[kind]
    arrays = {k: jnp.asarray(a) for k, a in data.items() if k != "mislabelled"}
    return _train(arrays, v["quality_weighting"], steps, lr, beta, v["gamma"], v["nll_weight"])


def weights_report(data, logits, beta=2.0):
    """Mean Uni-DPO weights on correctly and wrongly labelled pairs at ``logits``."""
    pw = _seq_logps(jnp.asarray(logits), data["prompt"], data["chosen"], True)
    pl = _seq_logps(jnp.asarray(logits), data["prompt"], data["rejected"], True)
    wq, wp = uni_dpo_weights(
        pw,
        pl,
        jnp.asarray(data["score_chosen"]),
        jnp.asarray(data["score_rejected"]),
        beta=beta,
        tau_ref=0.8,
    )
    bad = data["mislabelled"]
    wq, wp = np.asarray(wq), np.asarray(wp)
    return {
        "w_qual_correct": float(wq[~bad].mean()),
        "w_qual_mislabelled": float(wq[bad].mean()),
        "w_perf_mean": float(wp.mean()),
    }


def run(out_dir) -> list[dict]:
    """Rows: each variant's regret (best achievable expected reward minus the policy's)."""
    data = make_preference_data(0)
    rows = []
    best = float(np.mean(data["reward"].max(axis=1)))
    w = weights_report(data, data["ref_logits"])
    for kind in VARIANTS:
        train_preference(data, kind)  # compile
        t0 = time.perf_counter()
        logits, curve = jax.block_until_ready(train_preference(data, kind))
        seconds = time.perf_counter() - t0
        final = float(curve[-1])
        note = f"E[true reward] {final:.3f} of best {best:.3f}"
        if kind == "uni_dpo":
            note += (
                f"; w_qual {w['w_qual_correct']:.2f} (correct) vs "
                f"{w['w_qual_mislabelled']:.2f} (mislabelled)"
            )
        rows.append(
            {
                "problem": f"toy preferences ({data['mislabelled'].mean():.0%} mislabelled)",
                "size": f"{len(data['prompt'])} pairs",
                "solver": kind,
                "status": "SUCCESS",
                "steps": int(curve.shape[0]),
                "error": best - final,
                "time": seconds,
                "reference": note,
            }
        )
    return rows


if __name__ == "__main__":
    sys.exit(main("losses", run))
