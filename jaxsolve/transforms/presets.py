r"""AdamW, Lion and Muon with cautious weight decay (arXiv 2510.12402).

Each preset is the optax optimizer with its ``add_decayed_weights`` stage replaced by
`cautious_weight_decay`; with ``weight_decay=0`` each is
identical to the optax optimizer it mirrors. The paper's claim is that CWD is a
drop-in change: "no new hyperparameters", the same $\lambda$ as the base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import optax

from jaxsolve.transforms.cautious_weight_decay import cautious_weight_decay

__all__ = ["cautious_adamw", "cautious_lion", "cautious_muon"]

ScalarOrSchedule = float | jax.Array | Callable[[jax.Array], jax.Array]


def cautious_adamw(
    learning_rate: ScalarOrSchedule,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    eps_root: float = 0.0,
    mu_dtype: Any = None,
    weight_decay: ScalarOrSchedule = 1e-4,
    mask: Any = None,
    *,
    nesterov: bool = False,
) -> optax.GradientTransformation:
    r"""AdamW with cautious weight decay (the paper's Adam + CWD).

    $$
    u_t = \hat m_t / (\sqrt{\hat v_t} + \epsilon),\qquad
    x_{t+1} = x_t - \eta_t\,\big(u_t + \lambda\,\mathbb 1[u_t \odot x_t \ge 0]\odot x_t\big).
    $$

    Same arguments and defaults as `optax.adamw`. Equals ``optax.adamw`` when
    every coordinate satisfies $u x \ge 0$ (and when ``weight_decay=0``).
    """
    return optax.chain(
        optax.scale_by_adam(
            b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype, nesterov=nesterov
        ),
        cautious_weight_decay(weight_decay, mask),
        optax.scale_by_learning_rate(learning_rate),
    )


def cautious_lion(
    learning_rate: ScalarOrSchedule,
    b1: float = 0.9,
    b2: float = 0.99,
    mu_dtype: Any = None,
    weight_decay: ScalarOrSchedule = 1e-3,
    mask: Any = None,
) -> optax.GradientTransformation:
    r"""Lion with cautious weight decay.

    $$
    u_t = \operatorname{sign}(\beta_1 m_{t-1} + (1-\beta_1) g_t),\qquad
    x_{t+1} = x_t - \eta_t\,\big(u_t + \lambda\,\mathbb 1[u_t \odot x_t \ge 0]\odot x_t\big).
    $$

    Same arguments and defaults as `optax.lion`.
    """
    return optax.chain(
        optax.scale_by_lion(b1=b1, b2=b2, mu_dtype=mu_dtype),
        cautious_weight_decay(weight_decay, mask),
        optax.scale_by_learning_rate(learning_rate),
    )


def cautious_muon(
    learning_rate: ScalarOrSchedule,
    ns_coeffs: Any = (3.4445, -4.775, 2.0315),
    ns_steps: int = 5,
    beta: float = 0.95,
    eps: float = 1e-8,
    weight_decay: ScalarOrSchedule = 0.0,
    weight_decay_mask: Any = None,
    mu_dtype: Any = None,
    *,
    nesterov: bool = True,
    adam_b1: float = 0.9,
    adam_b2: float = 0.999,
    adam_eps_root: float = 0.0,
    adam_weight_decay: ScalarOrSchedule = 0.0,
    adam_learning_rate: ScalarOrSchedule | None = None,
    consistent_rms: float | None = None,
) -> optax.GradientTransformation:
    r"""Muon (``optax.contrib.muon``, 2-D parameters) with cautious weight decay.

    The 2-D leaves get ``scale_by_muon`` (momentum + Newton-Schulz orthogonalization
    $O_t$), ``scale_by_shape`` and then CWD, so the mask is computed on the
    *orthogonalized, shape-scaled* update, as the paper's Muon variant and the public
    implementations (modded-nanogpt, nanochat, microsoft/dion) do:

    $$
    X_{t+1} = X_t - \eta_t\,\big(O_t + \lambda\,\mathbb 1[O_t \odot X_t \ge 0]\odot X_t\big).
    $$

    Every other leaf goes to `cautious_adamw` with ``adam_weight_decay``.
    Arguments mirror ``optax.contrib.muon`` (default 2-D partition rule). With both
    decays at 0 the result equals ``optax.contrib.muon`` exactly.
    """
    from optax.contrib import MuonDimensionNumbers, scale_by_muon
    from optax.contrib._muon import scale_by_shape

    if adam_learning_rate is None:
        adam_learning_rate = learning_rate

    def labels(params):
        return jax.tree.map(lambda x: "muon" if x.ndim == 2 else "adam", params)

    def dim_nums(params):
        # muon leaves get the default 2-D dimension numbers, the rest MaskedNode(),
        # mirroring the masked state tree that optax.partition hands the branch.
        return jax.tree.map(
            lambda lab: MuonDimensionNumbers() if lab == "muon" else optax.MaskedNode(),
            labels(params),
        )

    return optax.partition(
        transforms={
            "muon": optax.chain(
                scale_by_muon(
                    ns_coeffs=ns_coeffs,
                    ns_steps=ns_steps,
                    beta=beta,
                    eps=eps,
                    mu_dtype=mu_dtype,
                    nesterov=nesterov,
                    weight_dimension_numbers=dim_nums,
                ),
                scale_by_shape(weight_dimension_numbers=dim_nums, consistent_rms=consistent_rms),
                cautious_weight_decay(weight_decay, weight_decay_mask),
                optax.scale_by_learning_rate(learning_rate),
            ),
            "adam": cautious_adamw(
                adam_learning_rate,
                b1=adam_b1,
                b2=adam_b2,
                eps=eps,
                eps_root=adam_eps_root,
                mu_dtype=mu_dtype,
                weight_decay=adam_weight_decay,
                nesterov=nesterov,
            ),
        },
        param_labels=labels,
    )
