"""Latent-structure models: surrogate gradients through a discrete latent, over a polytope.

One implementation of each gradient method (:mod:`~ebmclassifier.latent.surrogates`,
:mod:`~ebmclassifier.latent.relaxations`, :mod:`~ebmclassifier.latent.score_function`,
dispatched by name in :mod:`~ebmclassifier.latent.methods`) works over the oracles of a
:class:`~ebmclassifier.latent.polytope.Polytope`; :mod:`~ebmclassifier.latent.categorical`
(the simplex) and :mod:`~ebmclassifier.latent.trees` (dependency trees) supply them, with their
default networks, and :mod:`~ebmclassifier.latent.classifier` is the estimator.
"""

import importlib
import sys

from .categorical import GRADIENTS, categorical_latent, categorical_latent_eval, gamma_from_loss
from .categorical.simplex import project_simplex

__all__ = [
    "GRADIENTS",
    "categorical_latent",
    "categorical_latent_eval",
    "gamma_from_loss",
    "project_simplex",
]

# The modules of release 0.1 and where their contents live now. Code and pickles that name an
# old module (a pickle stores each class's module path) find it under that name.
_MOVED_MODULES = {
    "simplex": "categorical.simplex",
    "_tree_utils": "trees._arcs",
    "tree_projective": "trees.projective",
    "tree_nonprojective": "trees.nonprojective",
    "tree_sparsemap": "trees.sparsemap",
    "tree_surrogates": "trees.surrogates",
    "tree_latent": "trees.latent",
    "tree_modules": "trees.networks",
}
for _old, _new in _MOVED_MODULES.items():
    sys.modules[f"{__name__}.{_old}"] = importlib.import_module(f"{__name__}.{_new}")
