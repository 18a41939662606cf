"""Score-function estimator (REINFORCE) for a sampled latent structure, with a baseline.

The encoder defines the Gibbs distribution ``p(z) = exp(<s, z> - log Z(s))`` over the structures
of a :class:`~ebmclassifier.latent.polytope.Polytope` (a categorical ``softmax(s)`` on the
simplex, or trees); the forward pass draws an exact sample ``z ~ p``. The gradient of the expected
downstream loss ``E_{z~p}[l(z)]`` is ``E[l(z) * dlog p(z)/ds]`` [2]_, and
``dlog p(z)/ds = z - Marg(s)`` (``onehot(z) - softmax(s)`` for a categorical). Per sample, the
backward pass returns

    ``dL/ds_i = (l_i(z_i) - b) * (z_i - Marg(s_i))``,

the loss itself (not its negative, the reward: minimising the loss means this is the gradient to
*descend*), with ``b`` a running mean of past batch losses. ``E[onehot(z) - p] = 0`` so ``b``
leaves the estimator unbiased and only reduces its variance. ``b`` is read before it is updated
with the current batch, so a batch never serves as its own baseline.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT", EMNLP
   (the score-function baseline method).
.. [2] Williams (1992), "Simple statistical gradient-following algorithms for connectionist
   reinforcement learning", Machine Learning 8 (REINFORCE with a baseline).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .._utils.docstrings import fill_docstring
from ..losses import weighted_mean
from .polytope import PARAMETER_DOCS, Polytope

__all__ = ["RunningMeanBaseline", "ScoreFunction"]

LossFn = Callable[[torch.Tensor], torch.Tensor]


class RunningMeanBaseline(nn.Module):
    """Exponential running mean of batch-mean losses, ``b <- (1 - m) * b + m * mean(l)``.

    An :class:`torch.nn.Module` with buffers, so it moves to the device and pickles with the
    network that owns it. The first update sets ``b`` to the first batch's mean; before it,
    ``b = 0`` (plain REINFORCE).

    Parameters
    ----------
    momentum : float, default=0.1
        Weight of the newest batch, in (0, 1].

    Examples
    --------
    >>> import torch
    >>> baseline = RunningMeanBaseline(momentum=0.5)
    >>> baseline.update(torch.tensor([1.0, 3.0]))  # the first batch sets b = 2
    >>> baseline.update(torch.tensor([6.0]))  # 0.5 * 2 + 0.5 * 6
    >>> baseline.value
    tensor(4.)
    """

    def __init__(self, momentum: float = 0.1):
        super().__init__()
        if not 0.0 < momentum <= 1.0:
            raise ValueError(f"momentum must be in (0, 1]; got {momentum!r}.")
        self.momentum = momentum
        self.register_buffer("value", torch.zeros(()))
        self.register_buffer("n_updates", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def update(self, losses: torch.Tensor, sample_weight: torch.Tensor | None = None) -> None:
        """Fold the per-sample ``losses`` of one batch into the running mean.

        Parameters
        ----------
        losses : Tensor of shape (n,)
            Per-sample losses; only their mean is used.
        sample_weight : Tensor of shape (n,) or None, default=None
            Weights of the losses: their weighted mean ``sum_i w_i l_i / sum_i w_i`` is used
            (:func:`~ebmclassifier.losses.weighted_mean`), so a sample of weight 0 is not seen,
            and a batch whose weights are all 0 leaves ``value`` and ``n_updates`` as they are.

        Returns
        -------
        None
            ``value`` and ``n_updates`` are updated in place.

        Examples
        --------
        >>> import torch
        >>> baseline = RunningMeanBaseline(momentum=0.1)
        >>> for losses in ([2.0, 4.0], [13.0]):
        ...     baseline.update(torch.tensor(losses))
        >>> round(float(baseline.value), 4), int(baseline.n_updates)  # 3, then 0.9 * 3 + 0.1 * 13
        (4.0, 2)
        """
        batch_mean = weighted_mean(losses, sample_weight).to(self.value.dtype)
        # On the device, without reading n_updates on the host (a sync per backward pass).
        moved = self.value * (1.0 - self.momentum) + self.momentum * batch_mean
        new = torch.where(self.n_updates == 0, batch_mean, moved)
        if sample_weight is None:
            self.n_updates.add_(1)
        else:
            seen = sample_weight.sum() > 0  # a batch without weight is no batch (not 0)
            new = torch.where(seen, new, self.value)
            self.n_updates.add_(seen)
        self.value.copy_(new)


@fill_docstring(PARAMETER_DOCS)
class ScoreFunction(torch.autograd.Function):
    """Forward: an exact sample ``z ~ p(z)``; backward: ``(l(z) - b) * (z - Marg(s))``.

    Call as ``ScoreFunction.apply(scores, loss_fn, baseline, generator, polytope, sizes)``
    where ``loss_fn(z)`` returns the per-sample losses (shape (B,)) of the current decoder at
    ``z``; it is evaluated (without gradient) in ``backward`` only. ``baseline`` is None or an
    object with a ``value`` tensor and an ``update(losses)`` method, such as
    :class:`RunningMeanBaseline`. The gradient arriving at ``z`` is not used: the decoder's own
    parameters get theirs through the ordinary graph, and ``z`` is a sample, not a
    differentiable function of ``s``.

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        Encoder scores, e.g. (n, K) on the simplex.
    loss_fn : callable
        ``loss_fn(z) -> Tensor (B,)``.
    baseline : RunningMeanBaseline or None
        Read, then updated with this batch's losses, in the backward pass.
    generator : torch.Generator or None
        Source of the samples.
    {polytope}
    {sizes}

    Returns
    -------
    z : Tensor of shape (B, ...)
        One sampled structure per sample (one-hot rows on the simplex).

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> loss_fn = lambda z: ((z - target) ** 2).sum(-1)
    >>> generator = torch.Generator().manual_seed(0)
    >>> z = ScoreFunction.apply(scores, loss_fn, None, generator, Simplex(), None)
    >>> z.sum(dim=1)
    tensor([1.], grad_fn=<SumBackward1>)
    >>> loss_fn(z).sum().backward()
    >>> expected = loss_fn(z.detach())[:, None] * (z.detach() - torch.softmax(scores, -1))
    >>> torch.allclose(scores.grad, expected)  # l(z) * (onehot(z) - p), no baseline
    True
    """

    @staticmethod
    def forward(
        ctx,
        scores: torch.Tensor,
        loss_fn: LossFn,
        baseline: RunningMeanBaseline | None,
        generator: torch.Generator | None,
        polytope: Polytope,
        sizes: torch.Tensor | None,
    ) -> torch.Tensor:
        z = polytope.sample(scores, sizes, generator)
        ctx.polytope = polytope
        ctx.loss_fn = loss_fn
        ctx.baseline = baseline
        ctx.save_for_backward(scores, z, sizes)
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return (None,) * 6
        scores, z, sizes = ctx.saved_tensors
        with torch.no_grad():
            losses = ctx.loss_fn(z).detach().to(scores.dtype)
        b = 0.0 if ctx.baseline is None else ctx.baseline.value.to(scores.dtype)
        marginals = ctx.polytope.marginals(scores, sizes)
        weight = (losses - b).reshape(-1, *(1,) * (z.dim() - 1))
        if ctx.baseline is not None:
            ctx.baseline.update(losses)
        return (weight * (z - marginals), *(None,) * 5)
