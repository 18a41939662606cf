"""The categorical latent: the simplex, its oracles and the default networks.

A categorical latent takes one of K values; its polytope is the probability simplex
(:class:`~ebmclassifier.latent.categorical.simplex.Simplex`: MAP = argmax, marginals = softmax,
projection = sparsemax). :func:`categorical_latent` and :func:`categorical_latent_eval` run every
gradient method of :mod:`ebmclassifier.latent.methods` on it.
"""

from ..methods import GRADIENTS, RELAXED_GRADIENTS, gamma_from_loss
from .latent import categorical_latent, categorical_latent_eval
from .simplex import Simplex, project_simplex

__all__ = [
    "GRADIENTS",
    "RELAXED_GRADIENTS",
    "Simplex",
    "categorical_latent",
    "categorical_latent_eval",
    "gamma_from_loss",
    "project_simplex",
]
