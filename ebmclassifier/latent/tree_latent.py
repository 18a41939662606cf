"""One entry point for every gradient method of a latent dependency tree, by name.

The structured counterpart of :mod:`ebmclassifier.latent.categorical`: :func:`tree_latent` is
what an estimator calls in its training step, :func:`tree_latent_eval` the deterministic latent
at prediction time. The downstream loss enters as one closure ``loss_fn(z) -> per-sample losses
(B,)`` over the current decoder, inputs and targets, for ``z`` of shape (B, N + 1, N + 1).

==============  ==========================================  ====================================
``gradient``    forward (training)                          backward
==============  ==========================================  ====================================
``ste``         MAP tree                                    STE-I (identity)
``spigot``      MAP tree                                    SPIGOT (SparseMAP projection)
``spigot_ce``   MAP tree                                    SPIGOT-CE (from the marginals)
``spigot_eg``   MAP tree                                    SPIGOT-EG (mirror descent)
``marginals``   arc marginals ``Marg(s)`` (alias softmax)   exact (second derivative of log Z)
``sparsemap``   ``SparseMAP(s)`` (alias sparsemax)          exact (active-set Jacobian)
``gumbel``      ``Marg((s + G) / tau)``, G arc-wise Gumbel  exact
``gumbel_st``   ``MAP(s + G)``                              that of ``Marg((s + G) / tau)``
``sfe``         exact sample ``z ~ p(z)``                   score function ``(l - b)(z - Marg)``
==============  ==========================================  ====================================

Arc-wise Gumbel noise perturbs the arcs, not the trees, so ``MAP(s + G)`` is not an exact sample
of ``p(z)`` (Papandreou & Yuille 2011); "sfe" therefore samples exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._tree_utils import check_arc_scores
from .categorical import gamma_from_loss
from .relaxations import sample_gumbel
from .tree_sparsemap import tree_sparsemap
from .tree_surrogates import (
    TreeScoreFunction,
    TreeSPIGOT,
    TreeSPIGOTCrossEntropy,
    TreeSPIGOTExponentiatedGradient,
    TreeSTEIdentity,
)
from .trees import tree_map, tree_marginals

__all__ = ["TREE_GRADIENTS", "tree_latent", "tree_latent_eval"]

_ARGMAX_SURROGATES = {
    "ste": TreeSTEIdentity,
    "spigot": TreeSPIGOT,
    "spigot_ce": TreeSPIGOTCrossEntropy,
    "spigot_eg": TreeSPIGOTExponentiatedGradient,
}
#: The categorical names of the relaxations, accepted for their tree counterparts.
_ALIASES = {"softmax": "marginals", "sparsemax": "sparsemap"}
#: Every method name accepted by :func:`tree_latent` (aliases included).
TREE_GRADIENTS = (*_ARGMAX_SURROGATES, "marginals", "sparsemap", "gumbel", "gumbel_st", "sfe")

LossFn = Callable[[torch.Tensor], torch.Tensor]


def _canonical(gradient: str) -> str:
    name = _ALIASES.get(gradient, gradient)
    if name not in TREE_GRADIENTS:
        raise ValueError(
            f"gradient must be one of {TREE_GRADIENTS + tuple(_ALIASES)}; got {gradient!r}."
        )
    return name


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
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,) or None
        Number of words per sentence (None: all ``N``).
    gradient : str
        One of :data:`TREE_GRADIENTS` (or ``"softmax"``/``"sparsemax"``, aliases of
        ``"marginals"``/``"sparsemap"``); see the module docstring.
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
    name = _canonical(gradient)
    scores, lengths = check_arc_scores(scores, lengths)
    if name in _ARGMAX_SURROGATES:
        gamma_fn = None if loss_fn is None else gamma_from_loss(loss_fn)
        surrogate = _ARGMAX_SURROGATES[name]
        return surrogate.apply(scores, lengths, projective, gamma_fn, step_size, inner_steps)
    if name == "marginals":
        return tree_marginals(scores, lengths, projective)
    if name == "sparsemap":
        return tree_sparsemap(scores, lengths, projective)
    if name in ("gumbel", "gumbel_st"):
        perturbed = scores + sample_gumbel(scores, generator)
        soft = tree_marginals(perturbed / temperature, lengths, projective)
        if name == "gumbel":
            return soft
        hard = tree_map(perturbed, lengths, projective)
        return hard + (soft - soft.detach())  # value of the MAP, gradient of the marginals
    if loss_fn is None:
        raise ValueError("gradient='sfe' needs loss_fn (the per-sample losses); got None.")
    return TreeScoreFunction.apply(scores, lengths, projective, loss_fn, baseline, generator)


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
    scores : torch.Tensor of shape (B, N + 1, N + 1)
    lengths : torch.Tensor of shape (B,) or None
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
    name = _canonical(gradient)
    scores, lengths = check_arc_scores(scores, lengths)
    with torch.no_grad():
        if name == "marginals":
            return tree_marginals(scores, lengths, projective)
        if name == "sparsemap":
            return tree_sparsemap(scores, lengths, projective)
        if name == "gumbel":
            return tree_marginals(scores / temperature, lengths, projective)
        return tree_map(scores, lengths, projective)
