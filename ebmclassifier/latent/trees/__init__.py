"""Dependency trees as latent structures: MAP, log-partition, marginals, sampling, SparseMAP.

The tree polytope's oracles (:class:`~ebmclassifier.latent.trees.polytope.TreePolytope`), the
latent-tree entry points (:func:`~ebmclassifier.latent.trees.latent.tree_latent`) and the default
networks (:mod:`ebmclassifier.latent.trees.networks`):

==================  =====================================  ======================================
                    projective (``projective=True``)       non-projective
==================  =====================================  ======================================
MAP                 Eisner (:func:`eisner`)                Chu-Liu-Edmonds (:func:`chu_liu_edmonds`)
log-partition       inside algorithm                       matrix-tree theorem (Koo et al. 2007)
marginals           gradient of log Z (inside-outside)     gradient of log Z
SparseMAP           active set over the MAP oracle         the same, with Chu-Liu-Edmonds
==================  =====================================  ======================================

Conventions (shapes, root, padding, single-root trees) are those of
:mod:`ebmclassifier.latent.trees._arcs`: ``scores[b, head, modifier]`` of shape
``(B, N + 1, N + 1)`` with the root at index 0 and ``lengths[b]`` real words.
"""

from ._arcs import arc_mask, arcs_to_heads, heads_to_arcs
from .inference import sample_trees, tree_log_partition, tree_map, tree_marginals
from .nonprojective import chu_liu_edmonds, nonprojective_log_partition
from .projective import eisner, projective_log_partition
from .sparsemap import tree_sparsemap

__all__ = [
    "arc_mask",
    "arcs_to_heads",
    "chu_liu_edmonds",
    "eisner",
    "heads_to_arcs",
    "nonprojective_log_partition",
    "projective_log_partition",
    "sample_trees",
    "tree_log_partition",
    "tree_map",
    "tree_marginals",
    "tree_sparsemap",
]
