"""The categorical latent: every gradient method over the simplex, by name and one by one.

:func:`categorical_latent` is what an estimator calls in its training step;
:func:`categorical_latent_eval` is the deterministic latent used at prediction time. Both are
:func:`~ebmclassifier.latent.methods.polytope_latent` and
:func:`~ebmclassifier.latent.methods.polytope_latent_eval` on the simplex
(:class:`~ebmclassifier.latent.categorical.simplex.Simplex`: argmax, softmax, sparsemax).
The relaxations and the score-function sample also have a spelling of their own on the simplex:
:func:`softmax_relaxation`, :func:`sparsemax_relaxation`, :func:`gumbel_softmax` (Jang et al.
2017; Maddison et al. 2017), :func:`gumbel_straight_through` and :func:`score_function_sample`
(REINFORCE, Williams 1992), written over the generic
:class:`~ebmclassifier.latent.relaxations.GumbelStraightThrough` and
:class:`~ebmclassifier.latent.score_function.ScoreFunction`.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP.
"""

from __future__ import annotations

import torch

from ..methods import LossFn, polytope_latent, polytope_latent_eval
from ..relaxations import GumbelStraightThrough
from ..score_function import RunningMeanBaseline, ScoreFunction
from .simplex import Simplex, project_simplex

__all__ = [
    "categorical_latent",
    "categorical_latent_eval",
    "gumbel_softmax",
    "gumbel_straight_through",
    "score_function_sample",
    "softmax_relaxation",
    "sparsemax_relaxation",
]


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
        Standard Gumbel noise (:func:`~ebmclassifier.latent.relaxations.sample_gumbel`);
        passed in so a draw can be reproduced.
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


def gumbel_straight_through(
    scores: torch.Tensor, noise: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Straight-through Gumbel: a one-hot sample with the Gumbel-softmax Jacobian.

    The straight-through variant of Jang et al. (2017), with the full softmax Jacobian.

    Parameters
    ----------
    scores : Tensor of shape (n, K)
    noise : Tensor of shape (n, K)
        Standard Gumbel noise (:func:`~ebmclassifier.latent.relaxations.sample_gumbel`).
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
    return GumbelStraightThrough.apply(scores, noise, temperature, Simplex(), None)


def score_function_sample(
    scores: torch.Tensor,
    loss_fn: LossFn,
    baseline: RunningMeanBaseline | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Sample ``z ~ Categorical(softmax(s))`` with the score-function gradient.

    The REINFORCE estimator (Williams 1992) with a running-mean baseline.

    Parameters
    ----------
    scores : Tensor of shape (n, K)
    loss_fn : callable
        ``loss_fn(z) -> Tensor (n,)``: per-sample downstream losses at one-hot ``z``.
    baseline : RunningMeanBaseline, optional
        Variance-reducing baseline, updated in the backward pass.
    generator : torch.Generator, optional
        For reproducible samples.

    Returns
    -------
    Tensor of shape (n, K): one-hot samples.

    Examples
    --------
    >>> import torch
    >>> scores = torch.tensor([[2.0, 0.0, -1.0], [0.0, 0.0, 5.0]], requires_grad=True)
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> baseline = RunningMeanBaseline()
    >>> z = score_function_sample(scores, lambda z: ((z - target) ** 2).sum(-1), baseline,
    ...                           torch.Generator().manual_seed(0))
    >>> z.shape, z.sum(dim=1).tolist()
    (torch.Size([2, 3]), [1.0, 1.0])
    >>> z.sum().backward()  # the gradient reaching z is ignored: the loss_fn gives it
    >>> int(baseline.n_updates)
    1
    """
    return ScoreFunction.apply(scores, loss_fn, baseline, generator, Simplex(), None)
