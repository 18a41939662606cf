"""Latent-structure models: surrogate gradients through a discrete latent, over a polytope.

One implementation of each gradient method (:mod:`~ebmclassifier.latent.surrogates`,
:mod:`~ebmclassifier.latent.relaxations`, :mod:`~ebmclassifier.latent.score_function`,
dispatched by name in :mod:`~ebmclassifier.latent.methods`) works over the oracles of a
:class:`~ebmclassifier.latent.polytope.Polytope`; :mod:`~ebmclassifier.latent.categorical`
(the simplex) and :mod:`~ebmclassifier.latent.trees` (dependency trees) supply them, with their
default networks, and :mod:`~ebmclassifier.latent.classifier` is the estimator. The modules of
release 0.1 that moved (``simplex``, ``tree_modules``, ``tree_latent``, ...) still import, as thin
aliases of their new homes, so that older code and pickles keep working.
"""

from .categorical import GRADIENTS, categorical_latent, categorical_latent_eval, gamma_from_loss
from .categorical.simplex import project_simplex

__all__ = [
    "GRADIENTS",
    "categorical_latent",
    "categorical_latent_eval",
    "gamma_from_loss",
    "project_simplex",
]
