"""optax GradientTransformations from the papers: cautious weight decay (arXiv 2510.12402)."""

from jaxsolve.transforms.cautious_weight_decay import (
    CautiousWeightDecayState,
    cautious_mask,
    cautious_weight_decay,
)
from jaxsolve.transforms.presets import cautious_adamw, cautious_lion, cautious_muon

__all__ = [
    "CautiousWeightDecayState",
    "cautious_adamw",
    "cautious_lion",
    "cautious_mask",
    "cautious_muon",
    "cautious_weight_decay",
]
