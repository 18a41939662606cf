"""Latent-structure models: surrogate gradients through a discrete latent (categorical case)."""

from .categorical import GRADIENTS, categorical_latent, categorical_latent_eval, gamma_from_loss
from .simplex import project_simplex

__all__ = [
    "GRADIENTS",
    "categorical_latent",
    "categorical_latent_eval",
    "gamma_from_loss",
    "project_simplex",
]
