"""Preference-optimization losses: the DPO family (TRL definitions) and Uni-DPO (arXiv 2506.10054)."""

from jaxsolve.losses.preference import (
    DPO_KINDS,
    dpo_loss,
    sequence_logps,
    token_logps,
    uni_dpo_loss,
    uni_dpo_weights,
)

__all__ = [
    "DPO_KINDS",
    "dpo_loss",
    "sequence_logps",
    "token_logps",
    "uni_dpo_loss",
    "uni_dpo_weights",
]
