"""Continuous relaxations of the categorical argmax: softmax, sparsemax, Gumbel-softmax.

Unlike the surrogates of :mod:`ebmclassifier.latent.surrogates`, the relaxed methods feed the
decoder a point of the simplex instead of a vertex and differentiate it exactly:

- ``"softmax"``: ``z = softmax(s)``;
- ``"sparsemax"``: ``z = proj_simplex(s)``
  (:func:`~ebmclassifier.latent.categorical.simplex.project_simplex`);
- ``"gumbel"``: ``z = softmax((s + g) / tau)`` with ``g`` standard Gumbel noise [2]_ [3]_;
- ``"gumbel_st"``: forward ``onehot(argmax(s + g))``, backward the *full* Jacobian of
  ``softmax((s + g) / tau)`` [2]_ (its straight-through variant) — not only its diagonal.

The first three are compositions of differentiable tensor operations, so autograd differentiates
them; only the straight-through variant needs its own :class:`torch.autograd.Function`, written
once for any :class:`~ebmclassifier.latent.polytope.Polytope`: forward ``MAP(s + g)``, backward
that of ``Marg((s + g) / tau)`` (for trees, the MAP tree and the arc marginals of arc-wise
perturbed scores).

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT", EMNLP
   (the relaxed baselines).
.. [2] Jang, Gu & Poole (2017), "Categorical reparameterization with Gumbel-softmax", ICLR.
.. [3] Maddison, Mnih & Teh (2017), "The Concrete distribution", ICLR.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from .categorical.simplex import Simplex, project_simplex
from .polytope import Polytope

__all__ = [
    "GumbelStraightThrough",
    "gumbel_softmax",
    "gumbel_straight_through",
    "sample_gumbel",
    "softmax_relaxation",
    "sparsemax_relaxation",
]


def sample_gumbel(
    like: torch.Tensor, generator: torch.Generator | None = None, eps: float = 1e-10
) -> torch.Tensor:
    """Standard Gumbel noise ``-log(-log(U))``, ``U ~ Uniform(0, 1)``, shaped like ``like``.

    Parameters
    ----------
    like : Tensor
        Gives the shape, dtype and device.
    generator : torch.Generator, optional
        For reproducible draws; must live on ``like``'s device.
    eps : float
        Keeps ``U`` away from 0 and 1 so the noise is finite.

    Returns
    -------
    Tensor shaped like ``like``, without gradient.

    Examples
    --------
    >>> import torch
    >>> g = sample_gumbel(torch.zeros(10000), torch.Generator().manual_seed(0))
    >>> g.shape, round(g.mean().item(), 1)  # the Gumbel mean is Euler's constant, 0.577...
    (torch.Size([10000]), 0.6)
    """
    u = torch.rand(like.shape, generator=generator, dtype=like.dtype, device=like.device)
    u = u.clamp(eps, 1.0 - eps)
    return -torch.log(-torch.log(u))


def softmax_relaxation(scores: torch.Tensor) -> torch.Tensor:
    """``softmax(s)`` along the last dimension: the mean of the Gibbs distribution over z.

    Parameters
    ----------
    scores : Tensor of shape (..., K)

    Returns
    -------
    Tensor of shape (..., K)
        Strictly positive rows summing to one; differentiable.

    Examples
    --------
    >>> import torch
    >>> softmax_relaxation(torch.tensor([[1.0, 0.0, -1.0]]))
    tensor([[0.6652, 0.2447, 0.0900]])
    """
    return torch.softmax(scores, dim=-1)


def sparsemax_relaxation(scores: torch.Tensor) -> torch.Tensor:
    """``sparsemax(s) = proj_simplex(s)``: a sparse point of the simplex (Martins & Astudillo 2016).

    Parameters
    ----------
    scores : Tensor of shape (..., K)

    Returns
    -------
    Tensor of shape (..., K)
        Non-negative rows summing to one, often with zeros; differentiable (the sparsemax
        Jacobian).

    Examples
    --------
    >>> import torch
    >>> sparsemax_relaxation(torch.tensor([[0.5, 0.2, -1.0]]))
    tensor([[0.6500, 0.3500, 0.0000]])
    """
    return project_simplex(scores)


def gumbel_softmax(
    scores: torch.Tensor, noise: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Relaxed Gumbel-softmax sample ``softmax((s + g) / tau)``.

    The Gumbel-softmax (Jang et al. 2017) or Concrete (Maddison et al. 2017) relaxation.

    Parameters
    ----------
    scores : Tensor of shape (n, K)
    noise : Tensor of shape (n, K)
        Standard Gumbel noise (:func:`sample_gumbel`); passed in so a draw can be reproduced.
    temperature : float
        ``tau > 0``; the sample tends to a one-hot as ``tau -> 0``.

    Returns
    -------
    Tensor of shape (n, K), rows on the simplex.

    Examples
    --------
    >>> import torch
    >>> s, g = torch.tensor([[1.0, 0.0, -1.0]]), torch.tensor([[0.0, 1.5, 0.0]])
    >>> gumbel_softmax(s, g, temperature=1.0)
    tensor([[0.3592, 0.5922, 0.0486]])
    >>> gumbel_softmax(s, g, temperature=0.1).round(decimals=2)  # nearly onehot(argmax(s + g))
    tensor([[0.0100, 0.9900, 0.0000]])
    """
    return torch.softmax((scores + noise) / temperature, dim=-1)


class GumbelStraightThrough(torch.autograd.Function):
    """Forward ``MAP(s + g)``; backward ``J^T grad`` with J the full Jacobian of
    ``p = Marg((s + g) / tau)``: on the simplex ``ds = p * (grad - <p, grad>) / tau``.

    Call as ``GumbelStraightThrough.apply(scores, noise, temperature[, polytope, sizes])``, or
    through :func:`gumbel_straight_through`. The backward pass differentiates the polytope's
    marginals (softmax on the simplex, the arc marginals of trees) at the perturbed scores.

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        E.g. (n, K) on the simplex.
    noise : Tensor of shape (B, ...)
        Standard Gumbel noise (:func:`sample_gumbel`).
    temperature : float
        ``tau > 0``.
    polytope : Polytope, optional
        The structures' polytope; default the simplex
        (:class:`~ebmclassifier.latent.categorical.simplex.Simplex`).
    sizes : Tensor, optional
        What ``polytope`` needs of the batch besides the scores (the sentence lengths for
        :class:`~ebmclassifier.latent.trees.polytope.TreePolytope`; None for the simplex).

    Returns
    -------
    Tensor of shape (B, ...)
        The MAP structure of the perturbed scores (one-hot rows on the simplex).

    Examples
    --------
    The backward pass is that of :func:`gumbel_softmax` at the same noise:

    >>> import torch
    >>> s = torch.tensor([[1.0, 0.0, -1.0]], requires_grad=True)
    >>> g, w = torch.tensor([[0.0, 1.5, 0.0]]), torch.tensor([[1.0, 2.0, 3.0]])
    >>> z = GumbelStraightThrough.apply(s, g, 0.5)
    >>> z
    tensor([[0., 1., 0.]], grad_fn=<GumbelStraightThroughBackward>)
    >>> (grad_st,) = torch.autograd.grad((z * w).sum(), s)
    >>> (grad_relaxed,) = torch.autograd.grad((gumbel_softmax(s, g, 0.5) * w).sum(), s)
    >>> torch.allclose(grad_st, grad_relaxed)
    True
    """

    @staticmethod
    def forward(
        ctx,
        scores: torch.Tensor,
        noise: torch.Tensor,
        temperature: float,
        polytope: Polytope | None = None,
        sizes: torch.Tensor | None = None,
    ) -> torch.Tensor:
        polytope = Simplex() if polytope is None else polytope
        perturbed = scores + noise
        ctx.polytope = polytope
        ctx.temperature = float(temperature)
        ctx.save_for_backward(perturbed, sizes)
        return polytope.map(perturbed, sizes)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return (None,) * 5
        perturbed, sizes = ctx.saved_tensors
        with torch.enable_grad():
            leaf = perturbed.detach().requires_grad_(True)
            soft = ctx.polytope.marginals(leaf / ctx.temperature, sizes)
            (grad_s,) = torch.autograd.grad(soft, leaf, grad_z)
        return (grad_s, *(None,) * 4)


def gumbel_straight_through(
    scores: torch.Tensor, noise: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Straight-through Gumbel: a one-hot sample with the Gumbel-softmax Jacobian.

    The straight-through variant of Jang et al. (2017), with the full softmax Jacobian.

    Parameters
    ----------
    scores : Tensor of shape (n, K)
    noise : Tensor of shape (n, K)
        Standard Gumbel noise (:func:`sample_gumbel`).
    temperature : float
        ``tau > 0`` of the softmax whose Jacobian is used in the backward pass.

    Returns
    -------
    Tensor of shape (n, K): one-hot rows.

    Examples
    --------
    >>> import torch
    >>> s = torch.tensor([[1.0, 0.0]], requires_grad=True)
    >>> z = gumbel_straight_through(s, torch.zeros(1, 2))
    >>> z
    tensor([[1., 0.]], grad_fn=<GumbelStraightThroughBackward>)
    """
    return GumbelStraightThrough.apply(scores, noise, temperature)
