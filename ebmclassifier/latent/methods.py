"""One entry point for every gradient method, by name, over any latent polytope.

:func:`polytope_latent` is what an estimator calls in its training step (through
:func:`batch_polytope_latent` when its loss is a batch mean), and
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
from torch.autograd.function import once_differentiable

from .._utils.docstrings import fill_docstring
from .polytope import PARAMETER_DOCS, Polytope
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
    "batch_polytope_latent",
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


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by ``factor``.

    ``factor`` is a number, or a Tensor that broadcasts against ``x`` (one factor per sample,
    shape ``(n, 1, ..., 1)``), saved with ``save_for_backward``.
    """

    @staticmethod
    def forward(ctx, x, factor):
        if isinstance(factor, torch.Tensor):
            ctx.save_for_backward(factor)
            ctx.factor = None
        else:
            ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        factor = ctx.saved_tensors[0] if ctx.factor is None else ctx.factor
        return grad * factor, None


class _WeightedBaseline:
    """The score-function baseline, updated with the weighted mean of a batch's losses."""

    def __init__(self, baseline, sample_weight: torch.Tensor):
        self.baseline = baseline
        self.sample_weight = sample_weight

    @property
    def value(self) -> torch.Tensor:
        return self.baseline.value

    def update(self, losses: torch.Tensor) -> None:
        self.baseline.update(losses, self.sample_weight)


def _per_sample_factors(
    sample_weight: torch.Tensor | None, n: int, dim: int
) -> tuple[float | torch.Tensor, float | torch.Tensor]:
    """The factors that turn the batch loss's gradient at ``z`` into per-sample ``dl_i/dz_i``
    and the surrogates' per-sample gradients back into the batch loss's.

    ``(n, 1/n)`` for the mean; ``(W/w_i, w_i/W)`` (0 where ``w_i = 0``) for the weighted mean
    ``sum_i w_i l_i / W``, ``W = sum_i w_i``, shaped ``(n, 1, ..., 1)`` for ``dim`` dims.
    """
    if sample_weight is None:
        return float(n), 1.0 / n
    w = sample_weight.reshape(-1, *(1,) * (dim - 1))
    total = sample_weight.sum()
    to_sample = torch.where(w > 0, total / torch.where(w > 0, w, torch.ones_like(w)), 0.0)
    return to_sample, w / torch.where(total > 0, total, torch.ones_like(total))


@fill_docstring(PARAMETER_DOCS)
def batch_polytope_latent(
    polytope: Polytope,
    scores: torch.Tensor,
    sizes: torch.Tensor | None,
    gradient: str,
    loss_fn: LossFn,
    sample_weight: torch.Tensor | None = None,
    **options,
) -> torch.Tensor:
    """:func:`polytope_latent` for a training loss that is the (weighted) batch mean of ``loss_fn``.

    The surrogates pull back per-sample gradients ``gamma_i = dl_i/dz_i`` (so ``step_size`` is
    per sample), whereas the batch loss ``sum_i w_i l_i / sum_i w_i`` sends ``z_i`` the gradient
    ``w_i/W dl_i/dz_i``: ``z`` is scaled back to per sample on its way in, and the scores'
    gradients to the batch's on their way out. The score function's losses stay per sample;
    its ``baseline`` follows the weighted mean of the batch losses.

    Parameters
    ----------
    {polytope}
    scores : Tensor of shape (B, ...)
        Encoder scores ``s``.
    {sizes}
    gradient : str
        As in :func:`polytope_latent`.
    loss_fn : callable
        ``loss_fn(z) -> Tensor (B,)``, the per-sample losses whose (weighted) mean is trained.
    sample_weight : Tensor of shape (B,), optional
        ``w``; ``None`` for the plain mean (``w_i = 1``).
    **options
        ``step_size``, ``inner_steps``, ``temperature``, ``baseline``, ``generator`` of
        :func:`polytope_latent`.

    Returns
    -------
    Tensor of shape (B, ...)
        The latent, as :func:`polytope_latent` returns it.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> scores = torch.tensor([[2.0, 0.0, -1.0], [0.0, 1.0, 0.5]], requires_grad=True)
    >>> target = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    >>> def loss_fn(z):
    ...     return ((z - target) ** 2).sum(dim=1)
    >>> w = torch.tensor([3.0, 1.0])
    >>> z = batch_polytope_latent(Simplex(), scores, None, "spigot", loss_fn, w)
    >>> ((loss_fn(z) * w).sum() / w.sum()).backward()
    >>> batch_grad, scores.grad = scores.grad.clone(), None
    >>> loss_fn(polytope_latent(Simplex(), scores, None, "spigot", loss_fn)).sum().backward()
    >>> torch.allclose(batch_grad, scores.grad * (w / w.sum())[:, None])  # w_i/W per sample
    True
    """
    to_sample, to_batch = _per_sample_factors(sample_weight, len(scores), scores.dim())
    if sample_weight is not None and options.get("baseline") is not None:
        options["baseline"] = _WeightedBaseline(options["baseline"], sample_weight)
    z = polytope_latent(
        polytope, _ScaleGrad.apply(scores, to_batch), sizes, gradient, loss_fn, **options
    )
    return _ScaleGrad.apply(z, to_sample)


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
