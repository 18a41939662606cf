"""Latent-structure models: surrogate gradients through a discrete latent, over a polytope.

The generic layer writes each gradient method once, over the oracles of a
:class:`~ebmclassifier.latent.polytope.Polytope`: the surrogates
(:mod:`~ebmclassifier.latent.surrogates`), the relaxations
(:mod:`~ebmclassifier.latent.relaxations`) and the score function
(:mod:`~ebmclassifier.latent.score_function`), dispatched by name in
:mod:`~ebmclassifier.latent.methods`, and the network around a latent
(:mod:`~ebmclassifier.latent.networks`). It imports no structure:
:mod:`~ebmclassifier.latent.categorical` (the simplex) and :mod:`~ebmclassifier.latent.trees`
(dependency trees) supply the oracles, their entry points and default networks.
:mod:`~ebmclassifier.latent.classifier` is the estimator, which picks a structure once
(``_structures.py``).
"""

from .categorical.latent import categorical_latent, categorical_latent_eval
from .categorical.simplex import project_simplex
from .methods import GRADIENTS, gamma_from_loss

__all__ = [
    "GRADIENTS",
    "categorical_latent",
    "categorical_latent_eval",
    "gamma_from_loss",
    "project_simplex",
]
