"""Demonstration of `jaxsolve.guidance`: reference-guided DDPM sampling on 8x8 digits.

Trains a small MLP denoiser (equinox, optax) on scikit-learn's digits, then draws a batch
of samples with the same noise twice: unguided, and with `guided_step` pulling the
denoiser's hidden features toward those of one reference digit in the last 60% of the
steps. Reports the feature cosine to the reference, the fraction a digit classifier
(logistic regression on the digits) assigns to the reference's class, an FID-style
proxy and the wall time of both samplers.

The FID proxy is the Frechet distance between Gaussian fits of *classifier* features (the
64-unit hidden layer of an MLP classifier trained on the digits, as FID uses an Inception
network's pool layer), not of the denoiser features that guidance pulls on: a distance in
the guided space would measure the guidance itself. Guided samples are meant to land in
the reference's class, so their distance is to that class's digits ("FD guided | class");
the unguided sampler's is to the whole data set ("FD unguided | data"), as an
unconditional FID. Their ratio is the quality cost of guidance (the issue's bound: at
most 1.1). The unguided samples the classifier puts in the reference's class, against the
same class ("FD unguided in class"), are listed where there are at least 32 of them.

Run ``python bench/guidance.py`` (about 2 minutes on 2 cores) or ``--quick`` (under a
minute). Writes ``bench/results/guidance.md`` (``guidance_quick.md`` with ``--quick``;
a ``_scale<s>`` suffix for a non-default ``--scale``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

from _util import ROOT, setup

setup(x64=False)

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402

from jaxsolve.guidance import guided_step  # noqa: E402

T = 100
BETAS = jnp.linspace(1e-4, 0.05, T, dtype=jnp.float32)
ALPHAS = 1 - BETAS
ABAR = jnp.cumprod(ALPHAS)
T_FEAT = 10  # the time at which features are read (DIFT reads a fixed, small-noise t)


class Denoiser(eqx.Module):
    l1: eqx.nn.Linear
    l2: eqx.nn.Linear
    l3: eqx.nn.Linear

    def __init__(self, key, width=256):
        k1, k2, k3 = jax.random.split(key, 3)
        self.l1 = eqx.nn.Linear(64 + 16, width, key=k1)
        self.l2 = eqx.nn.Linear(width, width, key=k2)
        self.l3 = eqx.nn.Linear(width, 64, key=k3)

    def hidden(self, x, t):
        freqs = jnp.exp(jnp.linspace(0.0, 4.0, 8, dtype=jnp.float32))
        emb = jnp.concatenate([jnp.sin(t / T * freqs), jnp.cos(t / T * freqs)])
        h = jax.nn.silu(self.l1(jnp.concatenate([x, emb])))
        return jax.nn.silu(self.l2(h))

    def __call__(self, x, t):
        return self.l3(self.hidden(x, t))


def train(data, steps, key):
    model = Denoiser(key)
    opt = optax.adam(2e-3)
    state = opt.init(eqx.filter(model, eqx.is_array))

    def loss(model, x0, key):
        kt, ke = jax.random.split(key)
        t = jax.random.randint(kt, (x0.shape[0],), 0, T)
        eps = jax.random.normal(ke, x0.shape)
        ab = ABAR[t][:, None]
        xt = jnp.sqrt(ab) * x0 + jnp.sqrt(1 - ab) * eps
        pred = jax.vmap(model)(xt, t.astype(jnp.float32))
        return jnp.mean((pred - eps) ** 2)

    @eqx.filter_jit
    def update(model, state, key):
        kb, kl = jax.random.split(key)
        x0 = data[jax.random.randint(kb, (256,), 0, data.shape[0])]
        val, g = eqx.filter_value_and_grad(loss)(model, x0, kl)
        upd, state = opt.update(g, state)
        return eqx.apply_updates(model, upd), state, val

    for i, k in enumerate(jax.random.split(jax.random.key(1), steps)):
        model, state, val = update(model, state, k)
        if i % max(1, steps // 5) == 0:
            print(f"  train step {i}: loss {float(val):.4f}")
    return model


def make_sampler(model, ref_feat, scale, guided, center):
    def step(z, t, key):  # ancestral DDPM step z_t -> z_{t-1}
        eps = model(z, t.astype(jnp.float32))
        mean = (z - BETAS[t] / jnp.sqrt(1 - ABAR[t]) * eps) / jnp.sqrt(ALPHAS[t])
        noise = jax.random.normal(key, z.shape)
        return mean + jnp.where(t > 0, jnp.sqrt(BETAS[t]), 0.0) * noise

    def features(z):  # hidden denoiser activations: 16 points x 16 channels
        return (model.hidden(z, jnp.float32(T_FEAT)) - center).reshape(16, 16)

    if guided:
        step = guided_step(
            step,
            features,
            ref_feat,
            scale=scale,
            t_threshold=0.6 * T,
            kind="dragon",
            p=8.5,
            matcher="identity",
        )

    def sample(zT, key):
        keys = jax.random.split(key, T)

        def body(z, tk):
            t, k = tk
            return step(z, t, k), None

        z, _ = jax.lax.scan(body, zT, (jnp.arange(T - 1, -1, -1), keys))
        return z

    return jax.jit(jax.vmap(sample)), features


def _mean_cosine(a, r):
    a = a / jnp.linalg.norm(a, axis=1, keepdims=True)
    return jnp.mean(jnp.sum(a * r / jnp.linalg.norm(r, axis=1, keepdims=True), axis=1))


def frechet(a, b):
    ma, mb = a.mean(0), b.mean(0)
    ca, cb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    w_a, v_a = np.linalg.eigh(ca)
    sa = (v_a * np.sqrt(np.clip(w_a, 0, None))) @ v_a.T
    w = np.linalg.eigvalsh(sa @ cb @ sa)
    return float(
        np.sum((ma - mb) ** 2)
        + np.trace(ca)
        + np.trace(cb)
        - 2 * np.sum(np.sqrt(np.clip(w, 0, None)))
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scale", type=float, default=3.0)
    cli = ap.parse_args()
    steps, n = (800, 128) if cli.quick else (4000, 512)
    t_start = time.perf_counter()

    digits = datasets.load_digits()
    data = jnp.asarray(digits.data / 8.0 - 1.0, jnp.float32)
    clf = LogisticRegression(max_iter=2000).fit(digits.data / 8.0 - 1.0, digits.target)
    print(f"training the denoiser ({steps} steps)")
    t0 = time.perf_counter()
    model = train(data, steps, jax.random.key(0))
    t_train = time.perf_counter() - t0

    # the FID proxy's feature network (fixed seed: the features must not change between runs)
    mlp = MLPClassifier((64,), max_iter=500, random_state=0).fit(
        digits.data / 8.0 - 1.0, digits.target
    )

    def clf_features(x):
        x = np.clip(np.asarray(x), -1, 1)
        return np.maximum(x @ mlp.coefs_[0] + mlp.intercepts_[0], 0.0)

    rows = []
    target = np.asarray(digits.target)
    data_feats = clf_features(data)
    center = jnp.mean(jax.vmap(lambda x: model.hidden(x, jnp.float32(T_FEAT)))(data), axis=0)
    for ref_index in (0, 1, 2):  # references: the first 0, 1 and 2 of the data set
        ref_img = data[ref_index]
        ref_class = int(digits.target[ref_index])
        unguided, features = make_sampler(model, None, 0.0, False, center)
        ref_feat = features(ref_img)
        guided, _ = make_sampler(model, ref_feat, cli.scale, True, center)
        zT = jax.random.normal(jax.random.key(10 + ref_index), (n, 64))
        key = jax.random.split(jax.random.key(100 + ref_index), n)
        out = {}
        for name, fn in (("unguided", unguided), ("guided", guided)):
            x = jax.block_until_ready(fn(zT, key))  # compile
            wall = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(zT, key))
                wall = min(wall, time.perf_counter() - t0)
            f = jax.vmap(features)(x)
            cos = jax.vmap(_mean_cosine, in_axes=(0, None))(f, ref_feat)
            pred = clf.predict(np.clip(np.asarray(x), -1, 1))
            acc = float(np.mean(pred == ref_class))
            fx = clf_features(x)
            class_feats = data_feats[target == ref_class]
            fd_class = frechet(fx, class_feats)
            fd_data = frechet(fx, data_feats)
            in_class = pred == ref_class
            fd_in = frechet(fx[in_class], class_feats) if in_class.sum() >= 32 else float("nan")
            out[name] = (float(jnp.mean(cos)), acc, fd_class, wall, fd_data, fd_in)
        rows.append((ref_index, ref_class, out))
        print(f"reference {ref_index} (class {ref_class}): {out}")

    total = time.perf_counter() - t_start
    cmd = "python bench/guidance.py" + (" --quick" if cli.quick else "") + f" --scale {cli.scale}"
    lines = [
        "# Guided DDPM sampling on 8x8 digits (`jaxsolve.guidance`)",
        "",
        f"Command: `{cmd}`; date {datetime.date.today().isoformat()}; "
        f"{jax.devices()[0].platform}, {os.cpu_count()} cores; denoiser trained "
        f"{steps} steps in {t_train:.1f} s; total {total:.1f} s.",
        "",
        f"{n} samples per reference, same noise for both samplers, T = {T} ancestral steps, "
        f"dragon energy (p = 8.5) on 16x16 hidden denoiser features, guided for t < 0.6 T "
        f"with scale {cli.scale}. cos: mean feature cosine to the reference; class: "
        "fraction a logistic-regression digit classifier assigns to the reference's class; "
        "FD: Frechet distance between Gaussian fits of an MLP digit classifier's 64 hidden "
        "features (an FID proxy; see the script's docstring): guided samples against the "
        "reference class's digits, unguided ones against all digits, and the unguided samples "
        "classified into the reference's class against that class (where at least 32); "
        "FD ratio = FD guided | class / FD unguided | data (the issue's bound: 1.1); "
        "time: steady-state wall time of the batch (best of 3).",
        "",
        "| ref | class | cos unguided | cos guided | class unguided | class guided "
        "| FD unguided \\| data | FD unguided in class | FD guided \\| class | FD ratio "
        "| time guided / unguided |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ref_index, ref_class, out in rows:
        u, g = out["unguided"], out["guided"]
        lines.append(
            f"| {ref_index} | {ref_class} | {u[0]:.3f} | {g[0]:.3f} | {u[1]:.2f} | {g[1]:.2f} "
            f"| {u[4]:.2f} | {u[5]:.2f} | {g[2]:.2f} | {g[2] / u[4]:.2f} "
            f"| {g[3] / u[3]:.2f} ({g[3]:.3f} s / {u[3]:.3f} s) |"
        )
    stem = "guidance_quick" if cli.quick else "guidance"
    if cli.scale != 3.0:
        stem += f"_scale{cli.scale:g}"
    res = ROOT / "bench" / "results" / f"{stem}.md"
    res.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {res}")


if __name__ == "__main__":
    main()
