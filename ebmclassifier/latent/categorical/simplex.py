"""The probability simplex, the polytope of a categorical latent: argmax, softmax, sparsemax.

The simplex is the marginal polytope of a categorical latent variable: its vertices are the
one-hot vectors, its points are averages of them. :class:`Simplex` gives the surrogates their
oracles: MAP = ``onehot(argmax(s))``, marginals = ``softmax(s)``, projection = sparsemax
(:func:`project_simplex`, the Euclidean projection, batched over rows). SPIGOT and SPIGOT-CE
pull a gradient step back onto the simplex with it; the sparsemax relaxation is the same
projection applied to the encoder scores.

References
----------
.. [1] Held, Wolfe & Crowder (1974), "Validation of subgradient optimization", Math. Prog. 6.
.. [2] Duchi, Shalev-Shwartz, Singer & Chandra (2008), "Efficient projections onto the l1-ball
   for learning in high dimensions", ICML, Fig. 1 (the sort-based algorithm used here).
.. [3] Martins & Astudillo (2016), "From softmax to sparsemax", ICML, Alg. 1 and Prop. 2
   (the Jacobian used in the backward pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from ..polytope import Polytope, draw_rows

__all__ = ["Simplex", "SimplexProjection", "one_hot_argmax", "project_simplex"]


def _simplex_threshold(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Threshold tau and support size of the projection of each row of ``v``.

    Parameters
    ----------
    v : Tensor of shape (n, K)

    Returns
    -------
    tau : Tensor of shape (n, 1)
        The projection is ``clamp(v - tau, min=0)``.
    support_size : Tensor of shape (n, 1), int64
        Number of strictly positive coordinates of the projection (rho in [2]).
    """
    u, _ = torch.sort(v, dim=-1, descending=True)
    cumsum = u.cumsum(dim=-1) - 1.0
    ranks = torch.arange(1, v.shape[-1] + 1, device=v.device, dtype=v.dtype)
    # rho = max{j : u_j - (sum_{i<=j} u_i - 1) / j > 0}; the condition holds for a prefix of j.
    support = u - cumsum / ranks > 0
    # j = 1 always qualifies (u_1 - (u_1 - 1) = 1), but rounding can lose it when |u_1| is
    # huge, and nan qualifies nowhere: at least one, so the gather stays in range (the result
    # is then nan, which the caller's divergence check sees).
    support_size = support.sum(dim=-1, keepdim=True).clamp(min=1)
    tau = cumsum.gather(-1, support_size - 1) / support_size.to(v.dtype)
    return tau, support_size


class SimplexProjection(torch.autograd.Function):
    """``argmin_p ||p - v||_2`` subject to ``p >= 0, sum(p) == 1``, per row, with its Jacobian.

    The backward pass is the sparsemax Jacobian (Martins & Astudillo 2016, Prop. 2): on the
    support S of the output, ``dv = g - mean_S(g)``, and zero outside S. Call as
    ``SimplexProjection.apply(v)``, or through :func:`project_simplex` (which also takes
    leading batch dimensions).

    Parameters
    ----------
    v : Tensor of shape (n, K)

    Returns
    -------
    p : Tensor of shape (n, K)
        The projections.

    Examples
    --------
    >>> import torch
    >>> v = torch.tensor([[0.5, 0.2, -1.0]], requires_grad=True)
    >>> p = SimplexProjection.apply(v)
    >>> p
    tensor([[0.6500, 0.3500, 0.0000]], grad_fn=<SimplexProjectionBackward>)
    >>> p.backward(torch.tensor([[1.0, 0.0, 5.0]]))
    >>> v.grad  # g - mean(g) on the support {0, 1}, zero outside it
    tensor([[ 0.5000, -0.5000,  0.0000]])
    """

    @staticmethod
    def forward(ctx, v: torch.Tensor) -> torch.Tensor:
        tau, _ = _simplex_threshold(v)
        p = torch.clamp(v - tau, min=0.0)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_p: torch.Tensor) -> torch.Tensor:
        (p,) = ctx.saved_tensors
        support = (p > 0).to(grad_p.dtype)
        mean_on_support = (grad_p * support).sum(-1, keepdim=True) / support.sum(-1, keepdim=True)
        return support * (grad_p - mean_on_support)


def project_simplex(v: torch.Tensor) -> torch.Tensor:
    """Euclidean projection of each row of ``v`` onto the probability simplex.

    Solves ``min_p ||p - v||_2^2 s.t. p >= 0, sum(p) == 1`` along the last dimension by the
    sort-based algorithm of [2]_ (O(K log K) per row). This is ``sparsemax(v)`` [3]_, and it is
    differentiable (the sparsemax Jacobian).

    Parameters
    ----------
    v : Tensor of shape (..., K)
        Points to project; any leading batch dimensions.

    Returns
    -------
    Tensor of shape (..., K)
        The projections: non-negative rows summing to one.

    References
    ----------
    .. [2] Duchi et al. (2008), ICML, Fig. 1.
    .. [3] Martins & Astudillo (2016), ICML, Prop. 2.

    Examples
    --------
    >>> import torch
    >>> project_simplex(torch.tensor([[0.5, 0.2, -1.0], [2.0, 0.0, 0.0]]))
    tensor([[0.6500, 0.3500, 0.0000],
            [1.0000, 0.0000, 0.0000]])
    """
    if v.dim() == 0:
        raise ValueError(f"project_simplex expects a tensor with at least 1 dimension; got {v!r}.")
    shape = v.shape
    return SimplexProjection.apply(v.reshape(-1, shape[-1])).reshape(shape)


def one_hot_argmax(scores: torch.Tensor) -> torch.Tensor:
    """MAP one-hot vector of each row of ``scores`` (shape (n, K)), ties to the lowest index.

    Parameters
    ----------
    scores : Tensor of shape (n, K)

    Returns
    -------
    Tensor of shape (n, K)
        ``onehot(argmax(s))`` per row, in the dtype of ``scores``; not differentiable.

    Examples
    --------
    >>> import torch
    >>> one_hot_argmax(torch.tensor([[0.1, 2.0, -1.0]]))
    tensor([[0., 1., 0.]])
    """
    return _one_hot(scores.argmax(dim=-1, keepdim=True), scores)


def _one_hot(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """One-hot rows shaped like ``like`` from ``index`` of shape (n, 1)."""
    return torch.zeros_like(like).scatter_(-1, index, 1.0)


@dataclass(frozen=True)
class Simplex(Polytope):
    """The probability simplex ``{p >= 0, sum(p) = 1}`` over K values, the last dimension.

    ==============  ===========================================================
    ``map``         ``onehot(argmax(s))`` (:func:`one_hot_argmax`)
    ``marginals``   ``softmax(s)``
    ``project``     ``sparsemax(v)`` (:func:`project_simplex`)
    ``sample``      ``onehot(z)``, ``z ~ Categorical(softmax(s))``
    ==============  ===========================================================

    Every coordinate is a part of every sample's structures, so ``sizes`` is ignored (pass
    None) and :meth:`restrict` is the identity. The oracles' contract is that of
    :class:`~ebmclassifier.latent.polytope.Polytope`.

    Examples
    --------
    >>> import torch
    >>> simplex = Simplex()
    >>> s = torch.tensor([[1.0, 0.0, -1.0]])
    >>> simplex.map(s, None), simplex.marginals(s, None)
    (tensor([[1., 0., 0.]]), tensor([[0.6652, 0.2447, 0.0900]]))
    """

    # The oracles' docstrings are those of Polytope (inspect.getdoc inherits them).

    def map(self, scores, sizes):
        return one_hot_argmax(scores)

    def marginals(self, scores, sizes):
        return torch.softmax(scores, dim=-1)

    def project(self, point, sizes):
        return project_simplex(point)

    def sample(self, scores, sizes, generator=None):
        p = torch.softmax(scores, dim=-1)
        return _one_hot(draw_rows(p, generator), p)
