"""The surrogate gradients of the MAP tree under their tree names and call signatures.

STE-I, SPIGOT, SPIGOT-CE, SPIGOT-EG and the score-function estimator are written once, over any
polytope, in :mod:`ebmclassifier.latent.surrogates` and :mod:`ebmclassifier.latent.score_function`
([1]_ Sec. 3-4; on trees the simplex becomes the tree polytope ``M``, ``softmax`` the arc
marginals ``Marg(s)`` and the simplex projection SparseMAP). The classes here are those functions
on the tree polytope (:class:`~ebmclassifier.latent.trees.polytope.TreePolytope`), called as
``Method.apply(scores, lengths, projective, ...)``; they check nothing
(:func:`~ebmclassifier.latent.trees.latent.tree_latent` does). With ``k = 1``: STE-I gives
``eta * gamma``, SPIGOT ``z_hat - SparseMAP(z_hat - eta * gamma)``, SPIGOT-CE
``Marg(s) - SparseMAP(Marg(s) - eta * gamma(Marg(s)))`` and SPIGOT-EG
``Marg(s) - Marg(s - eta * gamma(Marg(s)))``; the score function samples ``z ~ p(z)`` exactly
(:func:`~ebmclassifier.latent.trees.sample_trees`) and returns ``(l(z) - b) * (z - Marg(s))``,
since ``d log p(z) / ds = z - Marg(s)`` ([2]_). Gradients outside the real arcs (padding,
self-loops, arcs into the root) are ignored and returned as zero.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP, Sec. 3-4.
.. [2] Williams (1992), "Simple statistical gradient-following algorithms for connectionist
   reinforcement learning", Machine Learning 8.
.. [3] Peng, Thomson & Smith (2018), "Backpropagating through Structured Argmax using a SPIGOT",
   ACL, Eq. 6.
"""

from __future__ import annotations

from ..score_function import ScoreFunction
from ..surrogates import (
    SPIGOT,
    SPIGOTCrossEntropy,
    SPIGOTExponentiatedGradient,
    STEIdentity,
    _ArgmaxSurrogate,
)
from .polytope import TreePolytope

__all__ = [
    "TreeSPIGOT",
    "TreeSPIGOTCrossEntropy",
    "TreeSPIGOTExponentiatedGradient",
    "TreeSTEIdentity",
    "TreeScoreFunction",
]


class _TreeSurrogateCall:
    """The tree call signature of an argmax surrogate (the backward is the generic one)."""

    @staticmethod
    def forward(ctx, scores, lengths, projective, gamma_fn, step_size, inner_steps):
        polytope = TreePolytope(bool(projective))
        return _ArgmaxSurrogate.forward(
            ctx, scores, gamma_fn, step_size, inner_steps, polytope, lengths
        )


class _TreeScoreFunctionCall:
    """The tree call signature of the score-function estimator."""

    @staticmethod
    def forward(ctx, scores, lengths, projective, loss_fn, baseline, generator):
        polytope = TreePolytope(bool(projective))
        return ScoreFunction.forward(ctx, scores, loss_fn, baseline, generator, polytope, lengths)


class TreeSTEIdentity(_TreeSurrogateCall, STEIdentity):
    """STE-I over trees: ``dL/ds = z_hat - z_k``, plain steps from ``z_hat`` (``eta * gamma``).

    Call as ``TreeSTEIdentity.apply(scores, lengths, projective, gamma_fn, step_size,
    inner_steps)``. See the module docstring and Mihaylova et al. (2020), Sec. 3.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent.trees import arcs_to_heads
    >>> z = TreeSTEIdentity.apply(scores, torch.tensor([2]), True, None, 1.0, 1)
    >>> arcs_to_heads(z)  # the MAP tree
    tensor([[0, 1]])
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]  # eta * gamma = 2 (z_hat - preferred)
    tensor([[ 0.,  2., -2.],
            [ 0.,  0.,  2.],
            [ 0., -2.,  0.]])
    """


class TreeSPIGOT(_TreeSurrogateCall, SPIGOT):
    """SPIGOT over trees: ``dL/ds = z_hat - z_k``, SparseMAP-projected steps from ``z_hat``.

    Call as ``TreeSPIGOT.apply(scores, lengths, projective, gamma_fn, step_size, inner_steps)``.
    See the module docstring, Mihaylova et al. (2020), Sec. 3, and Peng et al. (2018), Eq. 6.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> z = TreeSPIGOT.apply(scores, torch.tensor([2]), True, None, 1.0, 1)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]  # z_hat - SparseMAP(z_hat - gamma) = z_hat - preferred
    tensor([[ 0.,  1., -1.],
            [ 0.,  0.,  1.],
            [ 0., -1.,  0.]])
    """


class TreeSPIGOTCrossEntropy(_TreeSurrogateCall, SPIGOTCrossEntropy):
    """SPIGOT-CE over trees: ``dL/ds = Marg(s) - z_k``, projected steps from ``Marg(s)``.

    Call as ``TreeSPIGOTCrossEntropy.apply(scores, lengths, projective, gamma_fn, step_size,
    inner_steps)``; ``gamma_fn`` is required. See the module docstring and Mihaylova et al.
    (2020), Sec. 4.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> gamma_fn = gamma_from_loss(loss_fn)
    >>> z = TreeSPIGOTCrossEntropy.apply(scores, torch.tensor([2]), True, gamma_fn, 1.0, 1)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]
    tensor([[ 0.0000,  0.8808, -0.8808],
            [ 0.0000,  0.0000,  0.8808],
            [ 0.0000, -0.8808,  0.0000]])
    """


class TreeSPIGOTExponentiatedGradient(_TreeSurrogateCall, SPIGOTExponentiatedGradient):
    """SPIGOT-EG over trees: ``dL/ds = Marg(s) - Marg(s_k)``, ``s_{t+1} = s_t - eta gamma``.

    Call as ``TreeSPIGOTExponentiatedGradient.apply(scores, lengths, projective, gamma_fn,
    step_size, inner_steps)``; ``gamma_fn`` is required. See the module docstring and Mihaylova
    et al. (2020), Sec. 4.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> gamma_fn = gamma_from_loss(loss_fn)
    >>> z = TreeSPIGOTExponentiatedGradient.apply(scores, torch.tensor([2]), True, gamma_fn,
    ...                                           1.0, 1)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]
    tensor([[ 0.0000,  0.8744, -0.8744],
            [ 0.0000,  0.0000,  0.8744],
            [ 0.0000, -0.8744,  0.0000]])
    """


class TreeScoreFunction(_TreeScoreFunctionCall, ScoreFunction):
    """Forward: an exact sample ``z ~ p(z)``; backward: ``(l(z) - b) * (z - Marg(s))``.

    Call as ``TreeScoreFunction.apply(scores, lengths, projective, loss_fn, baseline,
    generator)``. ``loss_fn(z)`` returns the per-sample losses (B,) at trees ``z``; it is
    evaluated without gradient in ``backward`` only. ``baseline`` is None or an object with a
    ``value`` tensor and an ``update(losses)`` method (read before it is updated, so a batch
    never serves as its own baseline), such as
    :class:`ebmclassifier.latent.score_function.RunningMeanBaseline`.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Sample projective trees, or all trees.
    loss_fn : callable
        ``loss_fn(z) -> Tensor (B,)``.
    baseline : object or None
        Read, then updated with this batch's losses, in the backward pass.
    generator : torch.Generator or None
        Source of the samples.

    Returns
    -------
    z : torch.Tensor of shape (B, N + 1, N + 1)
        One sampled tree per sentence, 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent.score_function import RunningMeanBaseline
    >>> from ebmclassifier.latent.trees import tree_marginals
    >>> baseline, lengths = RunningMeanBaseline(), torch.tensor([2])
    >>> z = TreeScoreFunction.apply(scores, lengths, True, loss_fn, baseline,
    ...                             torch.Generator().manual_seed(0))
    >>> z.sum().item()  # a tree over two words has two arcs
    2.0
    >>> loss_fn(z).sum().backward()
    >>> losses = loss_fn(z.detach())[:, None, None]
    >>> expected = losses * (z.detach() - tree_marginals(scores, lengths))
    >>> torch.allclose(scores.grad, expected)  # the first batch has no baseline yet
    True
    >>> int(baseline.n_updates)
    1
    """
