"""The polytope interface: what the surrogate gradients need to know about a latent structure.

A latent structure ``z`` is a 0/1 vector of parts (a one-hot vector of K values; the arc
indicators of a tree), and its convex hull is the *marginal polytope* ``M = conv(Z)``. STE-I,
SPIGOT, SPIGOT-CE, SPIGOT-EG, the relaxations and the score function are one algorithm each over
any such polytope [1]_; they reach the structure only through the oracles of :class:`Polytope`:

===============  ====================================================  =====================
oracle           definition                                            used by
===============  ====================================================  =====================
``map``          ``argmax_{z in Z} <s, z>`` (a vertex)                  every argmax method
``marginals``    ``E_{p(z) ∝ exp<s, z>}[z] = grad_s log Z(s)``          SPIGOT-CE/-EG, SFE,
                                                                       softmax, Gumbel
``project``      ``argmin_{mu in M} ||mu - v||_2``                      SPIGOT, SPIGOT-CE,
                                                                       sparsemax
``sample``       an exact draw ``z ~ p(z) ∝ exp<s, z>``                 SFE
``restrict``     zero outside the parts a structure may hold           all (padding)
===============  ====================================================  =====================

The simplex (:class:`~ebmclassifier.latent.categorical.simplex.Simplex`: argmax, softmax,
sparsemax) and the dependency trees (:class:`~ebmclassifier.latent.trees.polytope.TreePolytope`:
Eisner or Chu-Liu-Edmonds, inside-outside or the matrix-tree theorem, SparseMAP) implement it.
A polytope object holds no data: a batch's ``sizes`` (the sentence lengths of a batch of trees,
None for the simplex) come with each call, so one object serves every batch and pickles with a
model. The oracles trust their inputs: validation happens once, at the public functions.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP, Sec. 3-4.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

__all__ = ["Polytope", "draw_rows"]

#: The parameters that every method over a polytope takes, written once: a docstring holds a
#: line ``{polytope}`` or ``{sizes}`` where ``fill_docstring`` (``_utils/docstrings.py``) puts their
#: text.
PARAMETER_DOCS = {
    "polytope": """\
polytope : Polytope
    The structures' polytope: :class:`~ebmclassifier.latent.categorical.simplex.Simplex` for a
    categorical latent, :class:`~ebmclassifier.latent.trees.polytope.TreePolytope` for trees.""",
    "sizes": """\
sizes : Tensor or None
    What ``polytope`` needs of the batch besides the scores: None for the simplex, the
    sentence lengths (B,) for trees.""",
}


class Polytope(ABC):
    """Oracles of a marginal polytope ``M = conv(Z)``, batched over samples.

    Subclasses implement :meth:`map`, :meth:`marginals`, :meth:`project` and :meth:`sample`,
    and override :meth:`restrict` when some coordinates of a sample are not parts of its
    structures (padding). ``scores`` and points ``mu`` have shape ``(B, ...)``, ``...`` being
    the shape of one structure's parts ((K,) on the simplex, (N + 1, N + 1) for trees); ``sizes``
    is whatever a batch needs besides them (None for the simplex, the lengths (B,) of a batch
    of sentences for trees).

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> simplex, s = Simplex(), torch.tensor([[2.0, 0.0, -1.0]])
    >>> simplex.map(s, None), simplex.project(s, None)
    (tensor([[1., 0., 0.]]), tensor([[1., 0., 0.]]))
    >>> isinstance(simplex, Polytope)
    True
    """

    @abstractmethod
    def map(self, scores: torch.Tensor, sizes: torch.Tensor | None) -> torch.Tensor:
        """The highest-scoring structure ``argmax_{z in Z} <s, z>`` of each sample.

        Parameters
        ----------
        scores : Tensor of shape (B, ...)
        sizes : Tensor or None
            The batch's sizes (see the class docstring).

        Returns
        -------
        Tensor of shape (B, ...)
            A vertex of the polytope per sample (0/1), in the dtype of ``scores``; not
            differentiable.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.trees import arcs_to_heads
        >>> from ebmclassifier.latent.trees.polytope import TreePolytope
        >>> s = torch.zeros(1, 3, 3)
        >>> s[0, 0, 2] = s[0, 2, 1] = 1.0  # root -> word 2 -> word 1
        >>> arcs_to_heads(TreePolytope().map(s, torch.tensor([2])))
        tensor([[2, 0]])
        """

    @abstractmethod
    def marginals(self, scores: torch.Tensor, sizes: torch.Tensor | None) -> torch.Tensor:
        """The mean ``E_{p(z)}[z] = grad_s log Z(s)`` of the Gibbs distribution ``p ∝ exp<s, z>``.

        Differentiable (its Jacobian is the Hessian of ``log Z``) when ``scores`` requires
        grad and grad mode is on.

        Parameters
        ----------
        scores : Tensor of shape (B, ...)
        sizes : Tensor or None

        Returns
        -------
        Tensor of shape (B, ...)
            A point in the relative interior of each sample's polytope.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.simplex import Simplex
        >>> Simplex().marginals(torch.tensor([[1.0, 0.0, -1.0]]), None)  # softmax
        tensor([[0.6652, 0.2447, 0.0900]])
        """

    @abstractmethod
    def project(self, point: torch.Tensor, sizes: torch.Tensor | None) -> torch.Tensor:
        """The Euclidean projection ``argmin_{mu in M} ||mu - v||_2`` of each sample's point.

        Differentiable when ``point`` requires grad and grad mode is on; otherwise only the
        value is computed.

        Parameters
        ----------
        point : Tensor of shape (B, ...)
        sizes : Tensor or None

        Returns
        -------
        Tensor of shape (B, ...)
            The projection (sparsemax on the simplex, SparseMAP on trees).

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.simplex import Simplex
        >>> Simplex().project(torch.tensor([[0.5, 0.2, -1.0]]), None)
        tensor([[0.6500, 0.3500, 0.0000]])
        """

    @abstractmethod
    def sample(
        self,
        scores: torch.Tensor,
        sizes: torch.Tensor | None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """An exact sample ``z ~ p(z) = exp(<s, z> - log Z(s))`` per sample.

        Parameters
        ----------
        scores : Tensor of shape (B, ...)
        sizes : Tensor or None
        generator : torch.Generator, optional
            Source of randomness, on the device of ``scores``.

        Returns
        -------
        Tensor of shape (B, ...)
            One structure (0/1) per sample; not differentiable.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.categorical.simplex import Simplex
        >>> z = Simplex().sample(torch.zeros(4, 3), None, torch.Generator().manual_seed(0))
        >>> z.sum(dim=1)
        tensor([1., 1., 1., 1.])
        """

    def restrict(self, tensor: torch.Tensor, sizes: torch.Tensor | None) -> torch.Tensor:
        """``tensor`` with zeros on the coordinates that are no part of a sample's structures.

        The identity unless a subclass says otherwise (trees zero the padding, the self-loops
        and the arcs into the root).

        Parameters
        ----------
        tensor : Tensor of shape (B, ...)
        sizes : Tensor or None

        Returns
        -------
        Tensor of shape (B, ...)

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.latent.trees.polytope import TreePolytope
        >>> TreePolytope().restrict(torch.ones(1, 3, 3), torch.tensor([1]))[0]
        tensor([[0., 1., 0.],
                [0., 0., 0.],
                [0., 0., 0.]])
        """
        return tensor


def draw_rows(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One index per row of ``probs`` (n, K), drawn with the row's (unnormalised) weights.

    A row with a non-finite entry draws uniformly instead: ``torch.multinomial`` refuses nan
    and inf, and such a row comes from non-finite scores, whose loss the caller flags as
    diverged (:class:`~ebmclassifier.DivergenceError`), so any draw will do.

    Parameters
    ----------
    probs : Tensor of shape (n, K)
        Non-negative weights, or non-finite values.
    generator : torch.Generator, optional

    Returns
    -------
    Tensor of shape (n, 1), int64

    Examples
    --------
    >>> import torch
    >>> draw_rows(torch.tensor([[0.0, 2.0, 0.0], [float("nan"), 1.0, 1.0]]))[0]
    tensor([1])
    """
    finite = torch.isfinite(probs).all(-1, keepdim=True)
    probs = torch.where(finite, probs, 1.0 / probs.shape[-1])
    return torch.multinomial(probs, 1, generator=generator)
