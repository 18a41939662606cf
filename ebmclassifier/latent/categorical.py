"""One entry point for every gradient method of a categorical latent, by name.

:func:`categorical_latent` is what an estimator calls in its training step;
:func:`categorical_latent_eval` is the deterministic latent used at prediction time. The
downstream loss enters as one closure, ``loss_fn(z) -> per-sample losses (n,)``, over the
current decoder, inputs and targets; :func:`gamma_from_loss` turns it into ``gamma_fn`` for the
surrogates that need ``dL/dz`` away from the argmax. Nothing is built per step but the closure.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .relaxations import (
    gumbel_softmax,
    gumbel_straight_through,
    sample_gumbel,
    softmax_relaxation,
    sparsemax_relaxation,
)
from .score_function import RunningMeanBaseline, score_function_sample
from .surrogates import (
    SPIGOT,
    GammaFn,
    SPIGOTCrossEntropy,
    SPIGOTExponentiatedGradient,
    STEIdentity,
    one_hot_argmax,
)

__all__ = [
    "GRADIENTS",
    "RELAXED_GRADIENTS",
    "categorical_latent",
    "categorical_latent_eval",
    "gamma_from_loss",
]

#: The surrogates whose forward pass is the argmax, by name.
_ARGMAX_SURROGATES = {
    "ste": STEIdentity,
    "spigot": SPIGOT,
    "spigot_ce": SPIGOTCrossEntropy,
    "spigot_eg": SPIGOTExponentiatedGradient,
}
#: Methods that feed the decoder a relaxed (interior) point of the simplex, also at test time.
RELAXED_GRADIENTS = ("softmax", "sparsemax", "gumbel")
#: Every method name accepted by :func:`categorical_latent`.
GRADIENTS = (*_ARGMAX_SURROGATES, *RELAXED_GRADIENTS, "gumbel_st", "sfe")

LossFn = Callable[[torch.Tensor], torch.Tensor]


def gamma_from_loss(loss_fn: LossFn) -> GammaFn:
    """``gamma_fn(z) = d(sum_i loss_fn(z)_i) / dz``: row i is sample i's own gradient.

    Gradient is taken with respect to ``z`` only (``torch.autograd.grad``), so parameters of the
    decoder inside ``loss_fn`` receive nothing; it works inside a ``backward`` pass, where
    autograd has turned gradient recording off.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(z) -> Tensor (n,)`` per-sample losses for latent points ``z`` of shape (n, K).

    Returns
    -------
    callable
        ``gamma_fn(z) -> Tensor (n, K)``, detached.

    Examples
    --------
    >>> import torch
    >>> gamma_fn = gamma_from_loss(lambda z: (z**2).sum(-1))
    >>> gamma_fn(torch.tensor([[1.0, 2.0]]))
    tensor([[2., 4.]])
    """

    def gamma_fn(z: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            z = z.detach().requires_grad_(True)
            (gamma,) = torch.autograd.grad(loss_fn(z).sum(), z)
        return gamma

    return gamma_fn


def _check_gradient(gradient: str) -> None:
    if gradient not in GRADIENTS:
        raise ValueError(f"gradient must be one of {GRADIENTS}; got {gradient!r}.")


def categorical_latent(
    scores: torch.Tensor,
    gradient: str,
    loss_fn: LossFn | None = None,
    *,
    step_size: float = 1.0,
    inner_steps: int = 1,
    temperature: float = 1.0,
    baseline: RunningMeanBaseline | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Training-time latent ``z`` (shape (n, K)) from encoder scores, with method ``gradient``.

    Parameters
    ----------
    scores : Tensor of shape (n, K)
        Encoder scores ``s``.
    gradient : str
        One of :data:`GRADIENTS`: ``"ste"``, ``"spigot"``, ``"spigot_ce"``, ``"spigot_eg"``
        (argmax forward, surrogate backward, see :mod:`~ebmclassifier.latent.surrogates`),
        ``"softmax"``, ``"sparsemax"``, ``"gumbel"``, ``"gumbel_st"`` (see
        :mod:`~ebmclassifier.latent.relaxations`), ``"sfe"`` (see
        :mod:`~ebmclassifier.latent.score_function`).
    loss_fn : callable, optional
        ``loss_fn(z) -> Tensor (n,)``, the per-sample downstream losses of the current decoder.
        Needed by ``"spigot_ce"``, ``"spigot_eg"``, ``"sfe"``, and by ``"ste"``/``"spigot"``
        when ``inner_steps > 1``. The surrogates assume the gradient reaching ``z`` is that of
        ``sum_i loss_fn(z)_i`` (per-sample scale).
    step_size : float
        ``eta`` of the surrogates' inner steps.
    inner_steps : int
        ``k``, the number of inner steps of the surrogates.
    temperature : float
        ``tau`` of ``"gumbel"`` and ``"gumbel_st"``.
    baseline : RunningMeanBaseline, optional
        Baseline of ``"sfe"``.
    generator : torch.Generator, optional
        Source of randomness of ``"gumbel"``, ``"gumbel_st"`` and ``"sfe"``.

    Returns
    -------
    Tensor of shape (n, K)
        A one-hot row per sample, or a point of the simplex for the relaxations.

    Examples
    --------
    The encoder prefers latent 0, the decoder's loss latent 1; descending the encoder's
    gradient raises the score of latent 1:

    >>> import torch
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> loss_fn = lambda z: ((z - target) ** 2).sum(-1)
    >>> z = categorical_latent(scores, "spigot", loss_fn)
    >>> z
    tensor([[1., 0., 0.]], grad_fn=<SPIGOTBackward>)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad
    tensor([[ 1., -1.,  0.]])
    >>> categorical_latent(scores, "softmax", loss_fn).detach()  # a relaxation
    tensor([[0.8438, 0.1142, 0.0420]])
    """
    _check_gradient(gradient)
    if gradient in _ARGMAX_SURROGATES:
        gamma_fn = None if loss_fn is None else gamma_from_loss(loss_fn)
        return _ARGMAX_SURROGATES[gradient].apply(scores, gamma_fn, step_size, inner_steps)
    if gradient == "softmax":
        return softmax_relaxation(scores)
    if gradient == "sparsemax":
        return sparsemax_relaxation(scores)
    if gradient == "gumbel":
        return gumbel_softmax(scores, sample_gumbel(scores, generator), temperature)
    if gradient == "gumbel_st":
        return gumbel_straight_through(scores, sample_gumbel(scores, generator), temperature)
    if loss_fn is None:
        raise ValueError("gradient='sfe' needs loss_fn (the per-sample losses); got None.")
    return score_function_sample(scores, loss_fn, baseline, generator)


def categorical_latent_eval(
    scores: torch.Tensor, gradient: str, temperature: float = 1.0
) -> torch.Tensor:
    """Deterministic latent fed to the decoder at prediction time.

    The relaxations keep their relaxed point without noise (``softmax(s)``, ``sparsemax(s)``,
    ``softmax(s / tau)`` for ``"gumbel"``), as the decoder was trained on such points; every
    other method uses the MAP one-hot ``onehot(argmax(s))``.

    Parameters
    ----------
    scores : Tensor of shape (n, K)
    gradient : str
        One of :data:`GRADIENTS`.
    temperature : float
        ``tau`` of ``"gumbel"``.

    Returns
    -------
    Tensor of shape (n, K)

    Examples
    --------
    >>> import torch
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]])
    >>> categorical_latent_eval(scores, "spigot")
    tensor([[1., 0., 0.]])
    >>> categorical_latent_eval(scores, "softmax")
    tensor([[0.8438, 0.1142, 0.0420]])
    """
    _check_gradient(gradient)
    if gradient == "softmax":
        return softmax_relaxation(scores)
    if gradient == "sparsemax":
        return sparsemax_relaxation(scores)
    if gradient == "gumbel":
        return softmax_relaxation(scores / temperature)
    return one_hot_argmax(scores)
