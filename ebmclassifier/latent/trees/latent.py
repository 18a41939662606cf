"""One entry point for every gradient method of a latent dependency tree, by name.

The structured counterpart of :mod:`ebmclassifier.latent.categorical`: :func:`tree_latent` is
what an estimator calls in its training step, :func:`tree_latent_eval` the deterministic latent
at prediction time. Both check their arguments once and run
:func:`~ebmclassifier.latent.methods.polytope_latent` and
:func:`~ebmclassifier.latent.methods.polytope_latent_eval` on the tree polytope
(:class:`~ebmclassifier.latent.trees.polytope.TreePolytope`), whose table of methods applies with
``Marg`` the arc marginals and ``Pi`` SparseMAP. The downstream loss enters as one closure
``loss_fn(z) -> per-sample losses (B,)`` over the current decoder, inputs and targets, for ``z``
of shape (B, N + 1, N + 1).
"""

from __future__ import annotations

import torch

from ..._utils.docstrings import fill_docstring
from ..methods import (
    GRADIENT_ALIASES,
    GRADIENTS,
    LossFn,
    polytope_latent,
    polytope_latent_eval,
)
from ._arcs import TREE_PARAMETER_DOCS, check_arc_scores
from .polytope import TreePolytope

__all__ = ["TREE_GRADIENTS", "tree_latent", "tree_latent_eval"]

_PAPER_NAMES = {name: alias for alias, name in GRADIENT_ALIASES.items()}
#: Every method name of the tree latent, :data:`~ebmclassifier.latent.methods.GRADIENTS` under
#: the SPIGOT paper's names of the relaxations (``"marginals"``, ``"sparsemap"``);
#: ``"softmax"`` and ``"sparsemax"`` are accepted for them.
TREE_GRADIENTS = tuple(_PAPER_NAMES.get(name, name) for name in GRADIENTS)


@fill_docstring(TREE_PARAMETER_DOCS)
def tree_latent(
    scores: torch.Tensor,
    lengths: torch.Tensor | None,
    gradient: str,
    loss_fn: LossFn | None = None,
    *,
    projective: bool = True,
    step_size: float = 1.0,
    inner_steps: int = 1,
    temperature: float = 1.0,
    baseline=None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Training-time latent tree ``z`` (B, N + 1, N + 1) from arc scores, with method ``gradient``.

    Parameters
    ----------
    {scores}
    {lengths}
    gradient : str
        One of :data:`TREE_GRADIENTS` (or ``"softmax"``/``"sparsemax"``, the same methods as
        ``"marginals"``/``"sparsemap"``); see :mod:`ebmclassifier.latent.methods`.
    loss_fn : callable, optional
        ``loss_fn(z) -> Tensor (B,)``, the per-sample downstream losses of the current decoder.
        Needed by ``"spigot_ce"``, ``"spigot_eg"``, ``"sfe"``, and by ``"ste"``/``"spigot"``
        when ``inner_steps > 1``.
    projective : bool, default=True
        Projective trees (Eisner, inside-outside) or non-projective (Chu-Liu-Edmonds,
        matrix-tree theorem).
    step_size : float, default=1.0
        ``eta`` of the surrogates' inner steps.
    inner_steps : int, default=1
        ``k``, the number of inner steps of the surrogates.
    temperature : float, default=1.0
        ``tau`` of ``"gumbel"`` and ``"gumbel_st"``.
    baseline : object, optional
        Baseline of ``"sfe"``: a ``value`` tensor and an ``update(losses)`` method.
    generator : torch.Generator, optional
        Source of randomness of ``"gumbel"``, ``"gumbel_st"`` and ``"sfe"``.

    Returns
    -------
    torch.Tensor of shape (B, N + 1, N + 1)
        A tree (0/1 arcs) or a point of the tree polytope for the relaxations.

    References
    ----------
    Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT", EMNLP.

    Examples
    --------
    >>> import torch
    >>> s = torch.randn(2, 4, 4, requires_grad=True)
    >>> z = tree_latent(s, torch.tensor([3, 2]), "spigot")
    >>> z.sum(dim=(1, 2))
    tensor([3., 2.], grad_fn=<SumBackward1>)
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return polytope_latent(
        TreePolytope(bool(projective)),
        scores,
        lengths,
        gradient,
        loss_fn,
        step_size=step_size,
        inner_steps=inner_steps,
        temperature=temperature,
        baseline=baseline,
        generator=generator,
    )


@fill_docstring(TREE_PARAMETER_DOCS)
def tree_latent_eval(
    scores: torch.Tensor,
    lengths: torch.Tensor | None,
    gradient: str,
    projective: bool = True,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Deterministic latent fed to the decoder at prediction time.

    The relaxations keep their relaxed point without noise (``Marg(s)``, ``SparseMAP(s)``,
    ``Marg(s / tau)`` for ``"gumbel"``), as the decoder was trained on such points; every other
    method uses the MAP tree.

    Parameters
    ----------
    {scores}
    {lengths}
    gradient : str
        One of :data:`TREE_GRADIENTS` or an alias.
    projective : bool, default=True
    temperature : float, default=1.0
        ``tau`` of ``"gumbel"``.

    Returns
    -------
    torch.Tensor of shape (B, N + 1, N + 1)

    Examples
    --------
    >>> import torch
    >>> tree_latent_eval(torch.zeros(1, 3, 3), None, "marginals")[0, 0]
    tensor([0.0000, 0.5000, 0.5000])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    with torch.no_grad():
        return polytope_latent_eval(
            TreePolytope(bool(projective)), scores, lengths, gradient, temperature
        )
