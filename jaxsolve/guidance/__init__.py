"""Reference-guided latent optimization inside diffusion sampling (pivotal optimization; OmniPortrait's RB-Guidance)."""

from jaxsolve.guidance.energy import cosine_similarity, feature_energy, nearest_match
from jaxsolve.guidance.guided_step import guidance_energy, guided_step
from jaxsolve.guidance.latent_optimizer import LatentOptimizer, latent_optimizer

__all__ = [
    "LatentOptimizer",
    "cosine_similarity",
    "feature_energy",
    "guidance_energy",
    "guided_step",
    "latent_optimizer",
    "nearest_match",
]
