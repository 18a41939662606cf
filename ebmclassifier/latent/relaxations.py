"""Continuous relaxations of the MAP structure over any polytope, and the straight-through Gumbel.

Unlike the surrogates of :mod:`ebmclassifier.latent.surrogates`, the relaxed methods feed the
decoder a point of the polytope instead of a vertex and differentiate it exactly:

- ``"softmax"``: ``z = Marg(s)`` (``softmax(s)`` on the simplex);
- ``"sparsemax"``: ``z = Pi(s)`` (sparsemax on the simplex, SparseMAP on trees);
- ``"gumbel"``: ``z = Marg((s + g) / tau)`` with ``g`` standard Gumbel noise
  (:func:`sample_gumbel`) [2]_ [3]_;
- ``"gumbel_st"``: forward ``MAP(s + g)``, backward the *full* Jacobian of
  ``Marg((s + g) / tau)`` [2]_ (its straight-through variant) — not only its diagonal.

The first three are compositions of the polytope's differentiable oracles, so autograd
differentiates them (:func:`~ebmclassifier.latent.methods.polytope_latent`); only the
straight-through variant needs its own :class:`torch.autograd.Function`,
:class:`GumbelStraightThrough` (for trees, the MAP tree and the arc marginals of arc-wise
perturbed scores). The simplex's own spellings of the four are in
:mod:`ebmclassifier.latent.categorical.latent`.

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

from .._utils.docstrings import fill_docstring
from .polytope import PARAMETER_DOCS, Polytope

__all__ = ["GumbelStraightThrough", "sample_gumbel"]


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


@fill_docstring(PARAMETER_DOCS)
class GumbelStraightThrough(torch.autograd.Function):
    """Forward ``MAP(s + g)``; backward ``J^T grad`` with J the full Jacobian of
    ``p = Marg((s + g) / tau)``: on the simplex ``ds = p * (grad - <p, grad>) / tau``.

    Call as ``GumbelStraightThrough.apply(scores, noise, temperature, polytope, sizes)``, or
    on the simplex through
    :func:`~ebmclassifier.latent.categorical.latent.gumbel_straight_through`. The backward
    pass differentiates the polytope's marginals (softmax on the simplex, the arc marginals of
    trees) at the perturbed scores.

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        E.g. (n, K) on the simplex.
    noise : Tensor of shape (B, ...)
        Standard Gumbel noise (:func:`sample_gumbel`).
    temperature : float
        ``tau > 0``.
    {polytope}
    {sizes}

    Returns
    -------
    Tensor of shape (B, ...)
        The MAP structure of the perturbed scores (one-hot rows on the simplex).

    Examples
    --------
    On the simplex, the backward pass is that of ``softmax((s + g) / tau)`` at the same noise:

    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> s = torch.tensor([[1.0, 0.0, -1.0]], requires_grad=True)
    >>> g, w = torch.tensor([[0.0, 1.5, 0.0]]), torch.tensor([[1.0, 2.0, 3.0]])
    >>> z = GumbelStraightThrough.apply(s, g, 0.5, Simplex(), None)
    >>> z
    tensor([[0., 1., 0.]], grad_fn=<GumbelStraightThroughBackward>)
    >>> (grad_st,) = torch.autograd.grad((z * w).sum(), s)
    >>> (grad_relaxed,) = torch.autograd.grad((torch.softmax((s + g) / 0.5, -1) * w).sum(), s)
    >>> torch.allclose(grad_st, grad_relaxed)
    True
    """

    @staticmethod
    def forward(
        ctx,
        scores: torch.Tensor,
        noise: torch.Tensor,
        temperature: float,
        polytope: Polytope,
        sizes: torch.Tensor | None,
    ) -> torch.Tensor:
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
