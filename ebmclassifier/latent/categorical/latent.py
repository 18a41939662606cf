"""The categorical latent: every gradient method over the simplex, by name.

:func:`categorical_latent` is what an estimator calls in its training step;
:func:`categorical_latent_eval` is the deterministic latent used at prediction time. Both are
:func:`~ebmclassifier.latent.methods.polytope_latent` and
:func:`~ebmclassifier.latent.methods.polytope_latent_eval` on the simplex
(:class:`~ebmclassifier.latent.categorical.simplex.Simplex`: argmax, softmax, sparsemax).

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP.
"""

from __future__ import annotations

import torch

from ..methods import LossFn, polytope_latent, polytope_latent_eval
from ..score_function import RunningMeanBaseline
from .simplex import Simplex

__all__ = ["categorical_latent", "categorical_latent_eval"]


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
        One of :data:`~ebmclassifier.latent.methods.GRADIENTS`: ``"ste"``, ``"spigot"``,
        ``"spigot_ce"``, ``"spigot_eg"`` (argmax forward, surrogate backward, see
        :mod:`~ebmclassifier.latent.surrogates`), ``"softmax"``, ``"sparsemax"``, ``"gumbel"``,
        ``"gumbel_st"`` (see :mod:`~ebmclassifier.latent.relaxations`), ``"sfe"`` (see
        :mod:`~ebmclassifier.latent.score_function`). ``"marginals"`` and ``"sparsemap"`` are
        accepted for ``"softmax"`` and ``"sparsemax"``.
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
    return polytope_latent(
        Simplex(),
        scores,
        None,
        gradient,
        loss_fn,
        step_size=step_size,
        inner_steps=inner_steps,
        temperature=temperature,
        baseline=baseline,
        generator=generator,
    )


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
        One of :data:`~ebmclassifier.latent.methods.GRADIENTS` or an alias.
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
    return polytope_latent_eval(Simplex(), scores, None, gradient, temperature)
