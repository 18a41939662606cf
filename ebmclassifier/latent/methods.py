"""One entry point for every gradient method, by name, over any latent polytope.

:func:`polytope_latent` is what an estimator calls in its training step, and
:func:`polytope_latent_eval` gives the deterministic latent used at prediction time; both take
the structure's :class:`~ebmclassifier.latent.polytope.Polytope` (the simplex, trees) and the
batch's sizes. :func:`~ebmclassifier.latent.categorical_latent` and
:func:`~ebmclassifier.latent.trees.latent.tree_latent` are these two for one structure each.
The downstream loss enters as one closure, ``loss_fn(z) -> per-sample losses (B,)``, over the
current decoder, inputs and targets; :func:`gamma_from_loss` turns it into ``gamma_fn`` for the
surrogates that need ``dL/dz`` away from the MAP structure. Nothing is built per step but the
closure.

==============  ==========================================  ====================================
``gradient``    forward (training)                          backward
==============  ==========================================  ====================================
``ste``         MAP structure                               STE-I (identity)
``spigot``      MAP structure                               SPIGOT (projection onto M)
``spigot_ce``   MAP structure                               SPIGOT-CE (from the marginals)
``spigot_eg``   MAP structure                               SPIGOT-EG (mirror descent)
``softmax``     marginals ``Marg(s)`` (alias ``marginals``)  exact
``sparsemax``   projection ``Pi(s)`` (alias ``sparsemap``)   exact (the projection's Jacobian)
``gumbel``      ``Marg((s + G) / tau)``, G Gumbel noise     exact
``gumbel_st``   ``MAP(s + G)``                              that of ``Marg((s + G) / tau)``
``sfe``         exact sample ``z ~ p(z)``                   score function ``(l - b)(z - Marg)``
==============  ==========================================  ====================================

On the simplex ``Marg`` is softmax and ``Pi`` sparsemax; on trees, the arc marginals and
SparseMAP. For trees the Gumbel noise perturbs the arcs, not the trees, so ``MAP(s + G)`` is not
an exact sample of ``p(z)`` (Papandreou & Yuille 2011); "sfe" therefore samples exactly.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .polytope import PARAMETER_DOCS, Polytope, fill_docstring
from .relaxations import GumbelStraightThrough, sample_gumbel
from .score_function import ScoreFunction
from .surrogates import (
    SPIGOT,
    GammaFn,
    SPIGOTCrossEntropy,
    SPIGOTExponentiatedGradient,
    STEIdentity,
)

__all__ = [
    "GRADIENTS",
    "GRADIENT_ALIASES",
    "RELAXED_GRADIENTS",
    "gamma_from_loss",
    "polytope_latent",
    "polytope_latent_eval",
]

#: The surrogates whose forward pass is the argmax, by name.
_ARGMAX_SURROGATES = {
    "ste": STEIdentity,
    "spigot": SPIGOT,
    "spigot_ce": SPIGOTCrossEntropy,
    "spigot_eg": SPIGOTExponentiatedGradient,
}
#: Methods that feed the decoder a relaxed (interior) point of the polytope, also at test time.
RELAXED_GRADIENTS = ("softmax", "sparsemax", "gumbel")
#: Every method name: the argmax surrogates, the relaxations, ``"gumbel_st"`` and ``"sfe"``.
GRADIENTS = (*_ARGMAX_SURROGATES, *RELAXED_GRADIENTS, "gumbel_st", "sfe")
#: The SPIGOT paper's names of the structured relaxations, accepted for ``"softmax"`` (the
#: marginals) and ``"sparsemax"`` (the projection, SparseMAP) with identical results.
GRADIENT_ALIASES = {"marginals": "softmax", "sparsemap": "sparsemax"}

LossFn = Callable[[torch.Tensor], torch.Tensor]


def gamma_from_loss(loss_fn: LossFn) -> GammaFn:
    """``gamma_fn(z) = d(sum_i loss_fn(z)_i) / dz``: row i is sample i's own gradient.

    Gradient is taken with respect to ``z`` only (``torch.autograd.grad``), so parameters of the
    decoder inside ``loss_fn`` receive nothing; it works inside a ``backward`` pass, where
    autograd has turned gradient recording off.

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(z) -> Tensor (B,)`` per-sample losses for latent points ``z`` of shape
        (B, ...).

    Returns
    -------
    callable
        ``gamma_fn(z) -> Tensor (B, ...)``, detached.

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


def _canonical_gradient(gradient: str) -> str:
    """The method ``gradient`` names (aliases resolved), or a ValueError listing every name.

    The one check of a method's name, for every structure (the tree functions call it too).
    """
    name = GRADIENT_ALIASES.get(gradient, gradient) if isinstance(gradient, str) else gradient
    if name not in GRADIENTS:
        raise ValueError(
            f"gradient must be one of {GRADIENTS} or their aliases "
            f"{tuple(GRADIENT_ALIASES)}; got {gradient!r}."
        )
    return name


@fill_docstring(PARAMETER_DOCS)
def polytope_latent(
    polytope: Polytope,
    scores: torch.Tensor,
    sizes: torch.Tensor | None,
    gradient: str,
    loss_fn: LossFn | None = None,
    *,
    step_size: float = 1.0,
    inner_steps: int = 1,
    temperature: float = 1.0,
    baseline=None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Training-time latent ``z`` from encoder scores, with method ``gradient``, over a polytope.

    Parameters
    ----------
    {polytope}
    scores : Tensor of shape (B, ...)
        Encoder scores ``s`` (the oracles trust them and ``sizes``).
    {sizes}
    gradient : str
        One of :data:`GRADIENTS` or an alias (:data:`GRADIENT_ALIASES`); see the module
        docstring.
    loss_fn : callable, optional
        ``loss_fn(z) -> Tensor (B,)``, the per-sample downstream losses of the current decoder.
        Needed by ``"spigot_ce"``, ``"spigot_eg"``, ``"sfe"``, and by ``"ste"``/``"spigot"``
        when ``inner_steps > 1``. The surrogates assume the gradient reaching ``z`` is that of
        ``sum_i loss_fn(z)_i`` (per-sample scale).
    step_size : float, default=1.0
        ``eta`` of the surrogates' inner steps.
    inner_steps : int, default=1
        ``k``, the number of inner steps of the surrogates.
    temperature : float, default=1.0
        ``tau`` of ``"gumbel"`` and ``"gumbel_st"``.
    baseline : object, optional
        Baseline of ``"sfe"``: a ``value`` tensor and an ``update(losses)`` method, such as
        :class:`~ebmclassifier.latent.score_function.RunningMeanBaseline`.
    generator : torch.Generator, optional
        Source of randomness of ``"gumbel"``, ``"gumbel_st"`` and ``"sfe"``.

    Returns
    -------
    Tensor of shape (B, ...)
        A structure per sample (0/1), or a point of the polytope for the relaxations.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = polytope_latent(Simplex(), scores, None, "spigot")
    >>> z
    tensor([[1., 0., 0.]], grad_fn=<SPIGOTBackward>)
    """
    name = _canonical_gradient(gradient)
    if name in _ARGMAX_SURROGATES:
        gamma_fn = None if loss_fn is None else gamma_from_loss(loss_fn)
        surrogate = _ARGMAX_SURROGATES[name]
        return surrogate.apply(scores, gamma_fn, step_size, inner_steps, polytope, sizes)
    if name == "softmax":
        return polytope.marginals(scores, sizes)
    if name == "sparsemax":
        return polytope.project(scores, sizes)
    if name == "gumbel":
        noise = sample_gumbel(scores, generator)
        return polytope.marginals((scores + noise) / temperature, sizes)
    if name == "gumbel_st":
        noise = sample_gumbel(scores, generator)
        return GumbelStraightThrough.apply(scores, noise, temperature, polytope, sizes)
    if loss_fn is None:
        raise ValueError("gradient='sfe' needs loss_fn (the per-sample losses); got None.")
    return ScoreFunction.apply(scores, loss_fn, baseline, generator, polytope, sizes)


@fill_docstring(PARAMETER_DOCS)
def polytope_latent_eval(
    polytope: Polytope,
    scores: torch.Tensor,
    sizes: torch.Tensor | None,
    gradient: str,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Deterministic latent fed to the decoder at prediction time, over a polytope.

    The relaxations keep their relaxed point without noise (``Marg(s)``, ``Pi(s)``,
    ``Marg(s / tau)`` for ``"gumbel"``), as the decoder was trained on such points; every other
    method uses the MAP structure.

    Parameters
    ----------
    {polytope}
    scores : Tensor of shape (B, ...)
        Encoder scores ``s``.
    {sizes}
    gradient : str
        One of :data:`GRADIENTS` or an alias.
    temperature : float, default=1.0
        ``tau`` of ``"gumbel"``.

    Returns
    -------
    Tensor of shape (B, ...)

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.trees.polytope import TreePolytope
    >>> polytope_latent_eval(TreePolytope(), torch.zeros(1, 3, 3), torch.tensor([2]),
    ...                      "marginals")[0, 0]
    tensor([0.0000, 0.5000, 0.5000])
    """
    name = _canonical_gradient(gradient)
    if name == "softmax":
        return polytope.marginals(scores, sizes)
    if name == "sparsemax":
        return polytope.project(scores, sizes)
    if name == "gumbel":
        return polytope.marginals(scores / temperature, sizes)
    return polytope.map(scores, sizes)
