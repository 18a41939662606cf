"""The polytope of single-root dependency trees: the oracles the surrogate gradients need.

:class:`TreePolytope` gives :mod:`ebmclassifier.latent.surrogates` and
:mod:`ebmclassifier.latent.score_function` the tree versions of the simplex's argmax, softmax
and sparsemax: the MAP tree, the arc marginals and SparseMAP ([1]_ Sec. 3). Its ``sizes`` are
the sentence lengths of a batch: ``scores[b, head, modifier]`` of shape ``(B, N + 1, N + 1)``
with the root at index 0 and ``lengths[b]`` real words, as in :mod:`ebmclassifier.latent.trees`.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT", EMNLP.
.. [2] Niculae, Martins, Blondel & Cardie (2018), "SparseMAP: Differentiable Sparse Structured
   Inference", ICML.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..polytope import Polytope
from ._arcs import arc_mask
from .inference import _map, _marginals, _sample
from .sparsemap import SparseMAPTree

__all__ = ["TreePolytope"]


@dataclass(frozen=True)
class TreePolytope(Polytope):
    """The marginal polytope of single-root dependency trees, projective or not.

    ==============  ==============================================================
    ``map``         Eisner (projective) or Chu-Liu-Edmonds
    ``marginals``   inside-outside (projective) or the matrix-tree theorem
    ``project``     SparseMAP, the active set over the MAP oracle (Niculae et al. 2018)
    ``sample``      exact, one head at a time from the conditional marginals
    ``restrict``    zero outside the real arcs (padding, self-loops, into the root)
    ==============  ==============================================================

    ``sizes`` are the lengths (B,) of the sentences, an int64 tensor with values in
    ``[1, N]``, as checked by the public tree functions. The oracles' contract is that of
    :class:`~ebmclassifier.latent.polytope.Polytope`.

    Parameters
    ----------
    projective : bool, default=True
        Projective trees, or all (non-projective) trees.

    Examples
    --------
    >>> import torch
    >>> polytope, lengths = TreePolytope(projective=True), torch.tensor([2])
    >>> polytope.marginals(torch.zeros(1, 3, 3), lengths)[0]  # two trees, half and half
    tensor([[0.0000, 0.5000, 0.5000],
            [0.0000, 0.0000, 0.5000],
            [0.0000, 0.5000, 0.0000]])
    """

    projective: bool = True

    # The oracles' docstrings are those of Polytope (inspect.getdoc inherits them).

    def map(self, scores, sizes):
        return _map(scores, sizes, self.projective)

    def marginals(self, scores, sizes):
        return _marginals(scores, sizes, self.projective)

    def project(self, point, sizes):
        # Without grad mode no backward pass comes either, but a Function sees only
        # requires_grad: detached, it computes the value alone.
        point = point if torch.is_grad_enabled() else point.detach()
        return SparseMAPTree.apply(point, sizes, self.projective)

    def sample(self, scores, sizes, generator=None):
        return _sample(scores, sizes, self.projective, generator)

    def restrict(self, tensor, sizes):
        return tensor.masked_fill(~arc_mask(sizes, tensor.shape[1] - 1), 0.0)
