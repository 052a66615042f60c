"""DPO family and Uni-DPO against an independent NumPy reference (values and gradients)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.losses import dpo_loss, sequence_logps, token_logps, uni_dpo_loss, uni_dpo_weights

# ---------------------------------------------------------------- NumPy reference, from formulas


def np_log_sigmoid(z):
    return -np.logaddexp(0.0, -z)


def np_sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def np_dpo(pw, pl, rw, rl, beta, kind, eps=0.0):
    d = (pw - rw) - (pl - rl)
    if kind == "sigmoid":
        return -(1 - eps) * np_log_sigmoid(beta * d) - eps * np_log_sigmoid(-beta * d)
    if kind == "hinge":
        return np.maximum(0.0, 1 - beta * d)
    if kind == "ipo":
        return (d - 1 / (2 * beta)) ** 2
    if kind == "robust":
        return (-(1 - eps) * np_log_sigmoid(beta * d) + eps * np_log_sigmoid(-beta * d)) / (
            1 - 2 * eps
        )
    raise ValueError(kind)


def np_uni_dpo(pw, pl, rw, rl, sw, sl, beta, eta, tau_ref, gamma, lam, tau_good, qual=True):
    """Uni-DPO per pair (training.md B.1 / the authors' trainer), on sequence log-probs."""
    d = (pw - pl) - (rw - rl)
    w_qual = np_sigmoid(eta * (sw - sl)) if qual else np.ones_like(sw)
    w_perf = (1 - np_sigmoid(beta * (pw - pl) - tau_ref)) ** gamma
    nll = np.where((rw - pw > 0) & (sw >= tau_good), -pw, 0.0)
    return -w_qual * w_perf * np_log_sigmoid(beta * d) + lam * nll


def np_fd_grad(f, arrays, h=1e-6):
    """Central finite differences of sum(f(*arrays)) with respect to every input entry."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [b.copy() for b in arrays]
            minus = [b.copy() for b in arrays]
            plus[i][idx] += h
            minus[i][idx] -= h
            g[idx] = (np.sum(f(*plus)) - np.sum(f(*minus))) / (2 * h)
        grads.append(g)
    return grads


# ---------------------------------------------------------------- data

B = 7


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    pw = -rng.uniform(5, 30, B)
    pl = -rng.uniform(5, 30, B)
    rw = pw + rng.normal(0, 2, B)
    rl = pl + rng.normal(0, 2, B)
    return pw, pl, rw, rl


@pytest.mark.parametrize(
    "kind,eps", [("sigmoid", 0.0), ("sigmoid", 0.2), ("hinge", 0.0), ("ipo", 0.0), ("robust", 0.1)]
)
def test_dpo_values_and_grads(batch, kind, eps):
    beta = 0.1
    ours = dpo_loss(*map(jnp.asarray, batch), beta=beta, kind=kind, label_smoothing=eps)
    ref = np_dpo(*batch, beta, kind, eps)
    np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-6, atol=1e-9)
    if kind == "hinge":
        d = (batch[0] - batch[2]) - (batch[1] - batch[3])
        assert np.all(np.abs(1 - beta * d) > 1e-3)  # away from the kink
    f = lambda *a: dpo_loss(*a, beta=beta, kind=kind, label_smoothing=eps).sum()
    g = jax.grad(f, argnums=(0, 1, 2, 3))(*map(jnp.asarray, batch))
    fd = np_fd_grad(lambda *a: np_dpo(*a, beta, kind, eps), list(batch))
    for a, b in zip(g, fd, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-8)


UNI = dict(beta=2.0, eta=0.7, tau_ref=0.8, gamma=3.0, lam=0.3, tau_good=3.2)


def _kw(p):
    return dict(
        beta=p["beta"],
        eta=p["eta"],
        tau_ref=p["tau_ref"],
        gamma=p["gamma"],
        nll_weight=p["lam"],
        tau_good=p["tau_good"],
    )


@pytest.fixture(scope="module")
def uni_batch():
    rng = np.random.default_rng(1)
    pw = -rng.uniform(0.5, 3, B)  # length-normalized scale
    pl = -rng.uniform(0.5, 3, B)
    rw = pw + rng.choice([-1, 1], B) * rng.uniform(0.05, 0.5, B)  # both signs, no ties
    rl = pl + rng.normal(0, 0.3, B)
    sw = rng.uniform(2.0, 5.0, B)
    sl = sw - rng.uniform(0.0, 3.0, B)
    assert np.any(rw > pw) and np.any(rw < pw) and np.any(sw >= 3.2) and np.any(sw < 3.2)
    return pw, pl, rw, rl, sw, sl


def test_uni_dpo_values_and_grads(uni_batch):
    p = UNI
    ref = np_uni_dpo(*uni_batch, **p)
    ours = uni_dpo_loss(*map(jnp.asarray, uni_batch), **_kw(p))
    np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-6, atol=1e-9)
    f = lambda *a: uni_dpo_loss(*a, *map(jnp.asarray, uni_batch[4:]), **_kw(p)).sum()
    g = jax.grad(f, argnums=(0, 1, 2, 3))(*map(jnp.asarray, uni_batch[:4]))
    fd = np_fd_grad(lambda *a: np_uni_dpo(*a, *uni_batch[4:], **p), list(uni_batch[:4]))
    for a, b in zip(g, fd, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-8)


def test_uni_dpo_per_token_with_masks(uni_batch):
    rng = np.random.default_rng(2)
    T = 6
    lengths_w = rng.integers(1, T + 1, B)
    lengths_l = rng.integers(1, T + 1, B)
    mw = (np.arange(T)[None] < lengths_w[:, None]).astype(float)
    ml = (np.arange(T)[None] < lengths_l[:, None]).astype(float)
    tok = [-rng.uniform(0.1, 4, (B, T)) for _ in range(4)]
    tok[2] = tok[0] + rng.normal(0, 0.3, (B, T))
    sw, sl = uni_batch[4:]
    # reference: mean over unmasked tokens, then the sequence formula
    seq = [(t * m).sum(1) / m.sum(1) for t, m in zip(tok, [mw, ml, mw, ml], strict=True)]
    ref = np_uni_dpo(*seq, sw, sl, **UNI)
    ours = uni_dpo_loss(
        *map(jnp.asarray, tok),
        jnp.asarray(sw),
        jnp.asarray(sl),
        chosen_mask=jnp.asarray(mw),
        rejected_mask=jnp.asarray(ml),
        **_kw(UNI),
    )
    np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-6, atol=1e-9)
    # gradient w.r.t. the per-token policy log-probs
    f = lambda a, b: uni_dpo_loss(
        a,
        b,
        jnp.asarray(tok[2]),
        jnp.asarray(tok[3]),
        jnp.asarray(sw),
        jnp.asarray(sl),
        chosen_mask=jnp.asarray(mw),
        rejected_mask=jnp.asarray(ml),
        **_kw(UNI),
    ).sum()
    g = jax.grad(f, argnums=(0, 1))(jnp.asarray(tok[0]), jnp.asarray(tok[1]))

    def np_tok(a, b):
        s = [(a * mw).sum(1) / mw.sum(1), (b * ml).sum(1) / ml.sum(1), seq[2], seq[3]]
        return np_uni_dpo(*s, sw, sl, **UNI)

    fd = np_fd_grad(np_tok, [tok[0], tok[1]])
    for a, b in zip(g, fd, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6, atol=1e-8)
    assert np.all(np.asarray(g[0])[mw == 0] == 0)  # masked tokens get no gradient


def test_uni_dpo_reduces_to_dpo(uni_batch):
    pw, pl, rw, rl, sw, sl = map(jnp.asarray, uni_batch)
    dpo = dpo_loss(pw, pl, rw, rl, beta=2.0)
    plain = uni_dpo_loss(
        pw, pl, rw, rl, sw, sl, beta=2.0, gamma=0.0, nll_weight=0.0, quality_weighting=False
    )
    np.testing.assert_allclose(np.asarray(plain), np.asarray(dpo), rtol=1e-14)
    half = uni_dpo_loss(pw, pl, rw, rl, sw, sl, beta=2.0, eta=0.0, gamma=0.0, nll_weight=0.0)
    np.testing.assert_allclose(np.asarray(half), 0.5 * np.asarray(dpo), rtol=1e-14)
    # gradients too
    g1 = jax.grad(lambda a: dpo_loss(a, pl, rw, rl, beta=2.0).sum())(pw)
    g2 = jax.grad(
        lambda a: uni_dpo_loss(
            a, pl, rw, rl, sw, sl, beta=2.0, gamma=0.0, nll_weight=0.0, quality_weighting=False
        ).sum()
    )(pw)
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g2), rtol=1e-14)


def test_weights_behave_as_described(uni_batch):
    pw, pl, rw, rl, sw, sl = map(jnp.asarray, uni_batch)
    w_qual, w_perf = uni_dpo_weights(pw, pl, sw, sl, beta=2.0, eta=0.7, tau_ref=0.8, gamma=3.0)
    order = np.argsort(np.asarray(sw - sl))
    assert np.all(np.diff(np.asarray(w_qual)[order]) >= 0)  # larger score margin, larger weight
    order = np.argsort(np.asarray(pw - pl))
    assert np.all(np.diff(np.asarray(w_perf)[order]) <= 0)  # better fit, smaller weight
    assert np.all((np.asarray(w_perf) > 0) & (np.asarray(w_perf) < 1))
    # stop_gradient_weights changes the gradient, not the value
    kw = dict(beta=2.0, tau_ref=0.8)
    v1 = uni_dpo_loss(pw, pl, rw, rl, sw, sl, **kw)
    v2 = uni_dpo_loss(pw, pl, rw, rl, sw, sl, stop_gradient_weights=True, **kw)
    np.testing.assert_array_equal(np.asarray(v1), np.asarray(v2))
    g1 = jax.grad(lambda a: uni_dpo_loss(a, pl, rw, rl, sw, sl, **kw).sum())(pw)
    g2 = jax.grad(
        lambda a: uni_dpo_loss(a, pl, rw, rl, sw, sl, stop_gradient_weights=True, **kw).sum()
    )(pw)
    assert not np.allclose(np.asarray(g1), np.asarray(g2))


def test_sequence_and_token_logps():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 5, 11))
    labels = rng.integers(0, 11, (2, 5))
    labels[1, 3:] = -100  # padding
    mask = labels >= 0
    lp = np.log(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
    ref_tok = np.take_along_axis(lp, np.maximum(labels, 0)[..., None], -1)[..., 0] * mask
    tok = token_logps(jnp.asarray(logits), jnp.asarray(labels))
    np.testing.assert_allclose(np.asarray(tok), ref_tok, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        np.asarray(sequence_logps(tok, jnp.asarray(mask))), ref_tok.sum(1), rtol=1e-12
    )
    np.testing.assert_allclose(
        np.asarray(sequence_logps(tok, jnp.asarray(mask), length_normalize=True)),
        ref_tok.sum(1) / mask.sum(1),
        rtol=1e-12,
    )
    # a -inf log-prob under the mask does not leak
    bad = tok.at[1, 4].set(-jnp.inf)
    assert np.isfinite(np.asarray(sequence_logps(bad, jnp.asarray(mask)))).all()


def test_jit_vmap_float32(uni_batch):
    args = [jnp.asarray(a) for a in uni_batch]
    f = jax.jit(lambda *a: uni_dpo_loss(*a, beta=2.0, tau_ref=0.8))
    eager = uni_dpo_loss(*args, beta=2.0, tau_ref=0.8)
    np.testing.assert_allclose(np.asarray(f(*args)), np.asarray(eager), rtol=1e-14)
    stacked = [jnp.stack([a, a[::-1]]) for a in args]
    batched = jax.vmap(f)(*stacked)
    np.testing.assert_allclose(np.asarray(batched[1]), np.asarray(eager)[::-1], rtol=1e-14)
    a32 = [a.astype(jnp.float32) for a in args]
    out = uni_dpo_loss(*a32, beta=2.0, tau_ref=0.8)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out), np.asarray(eager), rtol=1e-5)
    d32 = dpo_loss(*a32[:4], beta=0.5, kind="robust", label_smoothing=0.1)
    assert d32.dtype == jnp.float32


def test_bad_input(batch):
    a = [jnp.asarray(v) for v in batch]
    with pytest.raises(ValueError, match="kind"):
        dpo_loss(*a, kind="nope")
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(*a, beta=0.0)
    with pytest.raises(ValueError, match="ref_rejected_logps"):
        dpo_loss(a[0], a[1], a[2], a[3][:3])
    with pytest.raises(TypeError, match="policy_chosen_logps"):
        dpo_loss(jnp.arange(B), *a[1:])
    with pytest.raises(ValueError, match="label_smoothing"):
        dpo_loss(*a, kind="robust", label_smoothing=0.5)
    with pytest.raises(ValueError, match="label_smoothing"):
        dpo_loss(*a, kind="hinge", label_smoothing=0.1)
    s = jnp.ones(B)
    with pytest.raises(ValueError, match="mask"):
        uni_dpo_loss(*a, s, s, chosen_mask=jnp.ones(B))
    with pytest.raises(ValueError, match="chosen_scores"):
        uni_dpo_loss(*a, s[:2], s)
    with pytest.raises(ValueError, match="gamma"):
        uni_dpo_loss(*a, s, s, gamma=-1.0)
    with pytest.raises(TypeError, match="labels"):
        token_logps(jnp.ones((2, 3, 4)), jnp.ones((2, 3)))


def test_toy_preference_reweighting():
    """The demo's toy run: w_qual is lower on mislabelled pairs, w_perf decays as pairs are fit."""
    from examples.losses import make_preference_data, train_preference, weights_report

    data = make_preference_data(0, pairs=256)
    assert 0.05 < data["mislabelled"].mean() < 0.5
    start = weights_report(data, data["ref_logits"])
    assert start["w_qual_mislabelled"] < start["w_qual_correct"] - 0.05
    logits, curve = train_preference(data, "uni_dpo", steps=100)
    end = weights_report(data, logits)
    assert end["w_perf_mean"] < 0.6 * start["w_perf_mean"]
    curve = np.asarray(curve)
    assert curve[-1] > curve[0] + 0.3  # the policy learns the hidden reward


def test_sequence_logps_mask_broadcasts():
    """A ``(t,)`` mask shared by the batch and a ``(b, 1)`` per-row switch equal the full
    mask they stand for; a mask that does not broadcast to the log-probs is refused."""
    rng = np.random.default_rng(3)
    tok = jnp.asarray(-rng.uniform(0.1, 3.0, (4, 6)))
    shared = np.array([0, 0, 1, 1, 1, 0.0])
    np.testing.assert_allclose(
        np.asarray(sequence_logps(tok, jnp.asarray(shared))),
        (np.asarray(tok) * shared).sum(1),
        rtol=1e-12,
    )
    rows = np.array([[1.0], [0.0], [1.0], [1.0]])
    np.testing.assert_allclose(
        np.asarray(sequence_logps(tok, jnp.asarray(rows), length_normalize=True)),
        np.asarray(
            sequence_logps(tok, jnp.asarray(np.broadcast_to(rows, (4, 6))), length_normalize=True)
        ),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match=r"broadcast to token_logps' shape \(4, 6\), got \(5,\)"):
        sequence_logps(tok, jnp.ones(5))
    with pytest.raises(ValueError, match="got \\(2, 4, 6\\)"):
        sequence_logps(tok, jnp.ones((2, 4, 6)))
