"""Continuous relaxations of the categorical argmax: softmax, sparsemax, Gumbel-softmax.

Unlike the surrogates of :mod:`ebmclassifier.latent.surrogates`, the relaxed methods feed the
decoder a point of the simplex instead of a vertex and differentiate it exactly:

- ``"softmax"``: ``z = softmax(s)``;
- ``"sparsemax"``: ``z = proj_simplex(s)`` (:func:`~ebmclassifier.latent.simplex.project_simplex`);
- ``"gumbel"``: ``z = softmax((s + g) / tau)`` with ``g`` standard Gumbel noise [2]_ [3]_;
- ``"gumbel_st"``: forward ``onehot(argmax(s + g))``, backward the *full* Jacobian of
  ``softmax((s + g) / tau)`` [2]_ (its straight-through variant) — not only its diagonal.

The first three are compositions of differentiable tensor operations, so autograd differentiates
them; only the straight-through variant needs its own :class:`torch.autograd.Function`.

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

from .simplex import project_simplex
from .surrogates import one_hot_argmax

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
    """
    u = torch.rand(like.shape, generator=generator, dtype=like.dtype, device=like.device)
    u = u.clamp(eps, 1.0 - eps)
    return -torch.log(-torch.log(u))


def softmax_relaxation(scores: torch.Tensor) -> torch.Tensor:
    """``softmax(s)`` along the last dimension: the mean of the Gibbs distribution over z."""
    return torch.softmax(scores, dim=-1)


def sparsemax_relaxation(scores: torch.Tensor) -> torch.Tensor:
    """``sparsemax(s) = proj_simplex(s)``: a sparse point of the simplex [1]_."""
    return project_simplex(scores)


def gumbel_softmax(
    scores: torch.Tensor, noise: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Relaxed Gumbel-softmax sample ``softmax((s + g) / tau)`` [2]_.

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
    """
    return torch.softmax((scores + noise) / temperature, dim=-1)


class GumbelStraightThrough(torch.autograd.Function):
    """Forward ``onehot(argmax(s + g))``; backward ``J^T grad`` with J the full Jacobian of
    ``p = softmax((s + g) / tau)``: ``ds = p * (grad - <p, grad>) / tau``.

    Call as ``GumbelStraightThrough.apply(scores, noise, temperature)``.
    """

    @staticmethod
    def forward(ctx, scores, noise, temperature):
        perturbed = scores + noise
        ctx.temperature = float(temperature)
        ctx.save_for_backward(torch.softmax(perturbed / temperature, dim=-1))
        return one_hot_argmax(perturbed)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return None, None, None
        (p,) = ctx.saved_tensors
        inner = (p * grad_z).sum(dim=-1, keepdim=True)
        return p * (grad_z - inner) / ctx.temperature, None, None


def gumbel_straight_through(
    scores: torch.Tensor, noise: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Straight-through Gumbel: a one-hot sample with the Gumbel-softmax Jacobian [2]_.

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
