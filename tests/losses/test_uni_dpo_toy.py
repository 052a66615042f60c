"""Uni-DPO: values worked out by hand from the authors' trainer, and the demo toy's finding.

The loss follows ``uni_dpo_trainer.py`` (research notes B.1) term by term:
w_qual = sigmoid(eta (s_w - s_l)), w_perf = (1 - sigmoid(beta (pi_w - pi_l) - tau_ref))^gamma
on the policy-only margin, -w_qual w_perf log sigmoid(beta Delta), plus
lambda 1[s_w >= tau_good] 1[pi_w < r_w] (-pi_w).
"""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.losses import uni_dpo_loss, uni_dpo_weights


def test_uni_dpo_hand_values():
    # beta 2, eta 0.7, tau_ref 0.8, gamma 3, lambda 0.1, tau_good 3.2; r_w = r_l = -1.5
    pw = jnp.array([-1.0, -2.0, -2.0])
    pl = jnp.array([-2.0, -1.0, -1.0])
    r = jnp.full(3, -1.5)
    sw = jnp.array([4.0, 4.0, 3.0])
    sl = sw - 1.0
    kw = dict(beta=2.0, eta=0.7, tau_ref=0.8, gamma=3.0)
    wq, wp = uni_dpo_weights(pw, pl, sw, sl, **kw)
    # w_qual = sigmoid(0.7) for a score margin of 1
    np.testing.assert_allclose(wq, 0.6681877721681662, rtol=1e-12)
    # pair 1: policy margin 1, beta*1 - 0.8 = 1.2: sigmoid(-1.2)^3 = 0.231475^3
    # pair 2: policy margin -1, -2 - 0.8 = -2.8: sigmoid(2.8)^3 = 0.942676^3
    np.testing.assert_allclose(wp[:2], [0.012402621691136153, 0.837697284983901], rtol=1e-12)
    loss = uni_dpo_loss(pw, pl, r, r, sw, sl, **kw, nll_weight=0.1, tau_good=3.2)
    # pair 1: Delta = 1, -log sigmoid(2) = log1p(e^-2) = 0.126928; pi_w > r_w: no NLL
    # pair 2: Delta = -1, -log sigmoid(-2) = 2.126928; pi_w = -2 < r_w, s_w = 4 >= 3.2:
    #         + 0.1 * 2
    # pair 3: as pair 2 but s_w = 3 < tau_good: no NLL
    np.testing.assert_allclose(
        loss,
        [0.0010518879872642086, 1.3905247336674629, 1.190524733667463],
        rtol=1e-12,
    )


@pytest.fixture(scope="module")
def toy():
    pytest.importorskip("optax")
    from examples.losses import compare

    kinds = ("dpo", "dpo+w_qual", "dpo+w_perf", "uni_dpo")
    final, best = compare(range(8), kinds, steps=300)
    shifted, _ = compare(range(8), ("uni_dpo",), steps=300, tau_ref=6.0)
    return final, best, shifted["uni_dpo"]


def test_toy_quality_weight_helps_focal_weight_costs(toy):
    """The demo's conclusion, 8 seeds x 300 Adam steps (measured: dpo 1.058, +w_qual
    +0.014 on 8/8 seeds, +w_perf -0.144 on 0/8, uni_dpo -0.146 on 0/8, uni_dpo with
    tau_ref=6 +0.008 on 6/8)."""
    final, best, shifted = toy
    dpo = final["dpo"]
    assert 1.0 < dpo.mean() < 1.12 and np.all(dpo < best)
    gain = final["dpo+w_qual"] - dpo
    assert gain.mean() > 0.007 and (gain > 0).sum() >= 7
    # the focal weight stops fitting a pair once beta(pi_w - pi_l) passes ~tau_ref:
    # on this toy, where concentration is reward, that costs a tenth of the reward
    for kind in ("dpo+w_perf", "uni_dpo"):
        loss = final[kind] - dpo
        assert loss.mean() < -0.1 and np.all(loss < 0), kind
    # with the brake moved out of reach Uni-DPO is back at DPO plus its quality weight
    assert -0.005 < (shifted - dpo).mean() < 0.025
