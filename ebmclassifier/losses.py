"""The training objectives of the energy-based classifiers, as functions on tensors.

A classifier with logits ``f(x)`` defines the energy ``E(x) = -logsumexp_y f(x)[y]``
([2]_, eq. 5). NG-EBM [1]_ penalises the norm of its input gradient; JEM [2]_ contrasts the
energies of the data with those of samples drawn from the model. The estimators compose these
functions, and the benchmark (``python -m ebmclassifier bench``) times the same ones, so that
both measure one objective.

Sample weights
--------------
Every per-sample term takes an optional ``sample_weight`` tensor ``w`` of shape (n,): its batch
mean becomes the weighted mean ``sum_i w_i l_i / sum_i w_i`` (:func:`weighted_mean`),
normalised per batch. So a sample of weight 0 counts as if it were not in the batch, a weight
of 2 as if the sample were there twice, and multiplying every weight by a constant changes
nothing. A batch whose weights are all 0 has the loss 0, with a zero gradient. Without
``sample_weight`` each function computes exactly what it computed before weights existed.

References
----------
.. [1] Piland, D., et al. "Non-Generative Energy Based Models". 2023.
.. [2] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One".
   ICLR 2020.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ._utils.statistics import column_sum, sum_of_squares
from .energy import energy, energy_grad_norm, energy_grad_norm_finite_difference, penalty_rows

__all__ = [
    "criterion_mean",
    "cross_entropy",
    "fd_step_size",
    "jem_loss",
    "negatives_cross_entropy",
    "ngebm_loss",
    "per_sample_criterion",
    "weighted_mean",
]

#: How ``ngebm_loss`` differentiates the gradient-norm term.
GRAD_NORMS = ("exact", "finite_difference")

Module = Callable[[torch.Tensor], torch.Tensor]
Criterion = Callable[..., torch.Tensor]


def weighted_mean(values: torch.Tensor, sample_weight: torch.Tensor | None = None) -> torch.Tensor:
    """The mean of per-sample values, or their weighted mean ``sum_i w_i v_i / sum_i w_i``.

    Parameters
    ----------
    values : Tensor of shape (n,)
        One value per sample.
    sample_weight : Tensor of shape (n,) or None, default=None
        Non-negative weights; ``None`` is the plain mean.

    Returns
    -------
    scalar Tensor
        ``0`` (with a zero gradient) when every weight is 0.

    Examples
    --------
    >>> import torch
    >>> v = torch.tensor([1.0, 2.0, 6.0])
    >>> float(weighted_mean(v)), float(weighted_mean(v, torch.tensor([1.0, 1.0, 0.0])))
    (3.0, 1.5)
    >>> float(weighted_mean(v, torch.tensor([2.0, 1.0, 1.0])))  # the first sample twice
    2.5
    >>> float(weighted_mean(v, torch.zeros(3)))
    0.0
    """
    if sample_weight is None:
        return values.mean()
    return _ratio((sample_weight * values).sum(), sample_weight.sum())


def _ratio(weighted_sum: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """``weighted_sum / total``, the normalisation of a weighted mean; 0 where ``total`` is 0."""
    # A batch without weight: 0 / 1, not 0 / 0 (no sync: the test stays on the device).
    return weighted_sum / torch.where(total > 0, total, torch.ones_like(total))


def _weighted_variance(values: torch.Tensor, sample_weight: torch.Tensor | None) -> torch.Tensor:
    """``mean_i (mean_j v_j - v_i)^2``, with the means weighted by ``sample_weight``."""
    if sample_weight is None:
        return values.var(unbiased=False)
    return weighted_mean((values - weighted_mean(values, sample_weight)) ** 2, sample_weight)


def cross_entropy(
    logits: torch.Tensor, y: torch.Tensor, sample_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """The batch mean of the cross-entropy ``-log softmax(f(x_i))[y_i]``, optionally weighted.

    The default ``criterion`` of :func:`ngebm_loss` and :func:`jem_loss`.

    Parameters
    ----------
    logits : Tensor of shape (n, n_classes)
    y : Tensor of shape (n,)
        int64 labels in ``0..n_classes-1``.
    sample_weight : Tensor of shape (n,) or None, default=None
        Weights of the samples (see :func:`weighted_mean`).

    Returns
    -------
    scalar Tensor
        ``torch.nn.functional.cross_entropy(logits, y)`` without weights.

    Examples
    --------
    >>> import torch
    >>> logits, y = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    >>> per_sample = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    >>> w = torch.tensor([3.0, 1.0])
    >>> weighted = cross_entropy(logits, y, w)
    >>> bool(torch.isclose(weighted, (3 * per_sample[0] + per_sample[1]) / 4))
    True
    """
    if sample_weight is None:
        return F.cross_entropy(logits, y)
    return weighted_mean(F.cross_entropy(logits, y, reduction="none"), sample_weight)


def criterion_mean(
    criterion: torch.nn.Module,
    logits: torch.Tensor,
    y: torch.Tensor,
    sample_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """A torch loss ``criterion(logits, y)``, its batch mean optionally weighted per sample.

    The classification term of the estimators (their ``criterion_``). Without weights it is
    ``criterion(logits, y)`` itself. With weights ``w`` the criterion's per-sample losses
    ``l_i`` (its ``reduction`` set to ``"none"`` for the call, then restored) are averaged
    with them, ``sum_i w_i l_i / sum_i w_i`` (:func:`weighted_mean`). A criterion with class
    weights ``c`` (``CrossEntropyLoss`` or ``NLLLoss`` with ``weight=c``) gives
    ``l_i = c[y_i] * CE_i``, and torch's batch mean divides their sum by ``sum_i c[y_i]``; the
    weighted mean then divides by ``sum_i w_i c[y_i]``,

        sum_i w_i c[y_i] CE_i / sum_i w_i c[y_i],

    so that weights of 1 are no weights and an integer weight repeats a sample, as without
    class weights. A batch whose weights are all 0 has the loss 0.

    Parameters
    ----------
    criterion : torch loss module
        Called as ``criterion(logits, y)``; with ``sample_weight``, it must have a
        ``reduction`` attribute (as torch's losses do).
    logits : Tensor of shape (n, n_classes)
    y : Tensor of shape (n,)
        int64 labels in ``0..n_classes-1``.
    sample_weight : Tensor of shape (n,) or None, default=None
        Non-negative weights of the samples.

    Returns
    -------
    scalar Tensor

    Raises
    ------
    TypeError
        With ``sample_weight``, for a criterion without ``reduction``.

    Examples
    --------
    With the class weights ``c = (1, 3)``, a sample of class 1 and weight 2 counts six times
    as much as one of class 0 and weight 1:

    >>> import torch
    >>> logits, y = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    >>> criterion = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))
    >>> ce = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    >>> loss = criterion_mean(criterion, logits, y, torch.tensor([1.0, 2.0]))
    >>> bool(torch.isclose(loss, (1 * ce[0] + 6 * ce[1]) / 7)), criterion.reduction
    (True, 'mean')
    """
    if sample_weight is None:
        return criterion(logits, y)
    losses = per_sample_criterion(criterion, logits, y)
    class_weight = getattr(criterion, "weight", None)
    if not isinstance(criterion, torch.nn.CrossEntropyLoss | torch.nn.NLLLoss) or (
        class_weight is None
    ):
        return weighted_mean(losses, sample_weight)
    # The losses carry c[y_i] already; torch's mean divides their sum by sum_i c[y_i].
    return _ratio((sample_weight * losses).sum(), (sample_weight * class_weight[y]).sum())


def per_sample_criterion(
    criterion: torch.nn.Module, logits: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """The loss of each sample under a torch loss: ``criterion`` with ``reduction="none"``.

    The criterion's ``reduction`` is set to ``"none"`` for the call and restored afterwards,
    so label smoothing, class weights and the criterion's other settings stay as they are.

    Parameters
    ----------
    criterion : torch loss module
        With a ``reduction`` attribute, as torch's losses have.
    logits : Tensor of shape (n, n_classes)
    y : Tensor of shape (n,)
        int64 labels in ``0..n_classes-1``.

    Returns
    -------
    Tensor of shape (n,)

    Raises
    ------
    TypeError
        For a criterion without ``reduction``: it has no per-sample losses to give.

    Examples
    --------
    >>> import torch
    >>> criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    >>> logits, y = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    >>> losses = per_sample_criterion(criterion, logits, y)
    >>> bool(torch.isclose(losses.mean(), criterion(logits, y))), criterion.reduction
    (True, 'mean')
    """
    reduction = getattr(criterion, "reduction", None)
    if reduction is None:
        raise TypeError(
            f"Training with sample_weight or class_weight needs per-sample losses, and the "
            f"criterion {type(criterion).__name__} has no 'reduction' to set to 'none'. Use "
            "a torch loss such as torch.nn.CrossEntropyLoss, or fit without weights."
        )
    criterion.reduction = "none"  # for this call only
    try:
        return criterion(logits, y)
    finally:
        criterion.reduction = reduction


def _classification_term(
    criterion: Criterion,
    logits: torch.Tensor,
    y: torch.Tensor,
    sample_weight: torch.Tensor | None,
) -> torch.Tensor:
    """``criterion(logits, y)``, given the weights only when there are some."""
    if sample_weight is None:
        return criterion(logits, y)
    return criterion(logits, y, sample_weight)


def negatives_cross_entropy(
    logits: torch.Tensor,
    y: torch.Tensor,
    negatives: str | int = "batch",
    sample_weight: torch.Tensor | None = None,
    criterion: Criterion = cross_entropy,
) -> torch.Tensor:
    """The cross-entropy whose normalising term covers only some classes (Li et al. 2020).

        L_i = -f(x_i)[y_i] + log sum_{c in {y_i} + N_i} exp f(x_i)[c],

    the contrastive objective of energy-based continual learning [1]_ with ``E(x, c) =
    -f(x)[c]``: it lowers the energy of the true class and raises that of the negatives
    ``N_i`` only, so classes outside every ``N_i`` get no gradient from the normalising term.

    - ``negatives="all"``: ``N_i`` is every other class, the usual cross-entropy
      (``criterion(logits, y)`` itself);
    - ``"batch"``: the classes of the batch's samples (those of positive weight), the
      objective of [1]_ with all current classes;
    - an int ``k >= 1``: ``k`` classes drawn per sample, uniformly without replacement, from
      the batch's classes other than ``y_i`` (torch's random state; ``k=1`` is [1]_'s single
      negative). Where fewer are available, all of them (as ``"batch"``); a sample without
      any has the loss 0.

    The excluded logits are set to ``-inf`` before ``criterion``, so a class-weighted
    criterion keeps its weights and ``sample_weight`` its meaning (:func:`weighted_mean`).

    Parameters
    ----------
    logits : Tensor of shape (n, n_classes)
    y : Tensor of shape (n,)
        int64 labels in ``0..n_classes-1``.
    negatives : {"all", "batch"} or int, default="batch"
    sample_weight : Tensor of shape (n,) or None, default=None
    criterion : callable, default=:func:`cross_entropy`
        A softmax cross-entropy on logits, ``criterion(logits, y)``, and
        ``criterion(logits, y, sample_weight)`` with weights (not one that averages over
        every log-probability, such as label smoothing: the excluded ones are ``-inf``). The
        estimators pass their ``criterion_`` averaged by :func:`criterion_mean`.

    Returns
    -------
    scalar Tensor

    References
    ----------
    .. [1] Li, S., Du, Y., van de Ven, G. M. and Mordatch, I. "Energy-Based Models for
       Continual Learning". CoLLAs 2022 (arXiv:2011.12216), eq. 4.

    Examples
    --------
    Classes 0 and 1 in the batch, class 2 absent: its logit is left out of the sum.

    >>> import torch
    >>> logits = torch.tensor([[1.0, 0.0, 5.0], [0.0, 2.0, 5.0]], requires_grad=True)
    >>> y = torch.tensor([0, 1])
    >>> loss = negatives_cross_entropy(logits, y, "batch")
    >>> expected = torch.nn.functional.cross_entropy(logits[:, :2], y)
    >>> bool(torch.isclose(loss, expected))
    True
    >>> loss.backward()
    >>> logits.grad[:, 2].tolist()  # no push on the absent class
    [0.0, 0.0]
    """
    if negatives == "all":
        return _classification_term(criterion, logits, y, sample_weight)
    n, n_classes = logits.shape
    counted = y if sample_weight is None else y[sample_weight > 0]
    present = torch.zeros(n_classes, dtype=torch.bool, device=logits.device)
    present[counted] = True
    own = F.one_hot(y, n_classes).bool()
    if negatives == "batch":
        keep = own | present
    else:
        candidates = present & ~own
        scores = torch.rand(n, n_classes, device=logits.device).masked_fill(~candidates, -1.0)
        drawn = scores.topk(min(int(negatives), n_classes), dim=1).indices
        keep = own | (torch.zeros_like(own).scatter_(1, drawn, True) & candidates)
    restricted = logits.masked_fill(~keep, float("-inf"))
    return _classification_term(criterion, restricted, y, sample_weight)


def fd_step_size(X, fd_step: float = 0.01) -> float:
    """The step ``h`` of the finite-difference gradient norm, scaled to the data.

    ``h = fd_step * sqrt(sum_j Var(x_j))``: the root-mean-square distance of the samples from
    their mean, so that ``fd_step`` means the same for raw pixels and standardized data. Data
    without spread get ``h = fd_step``.

    Parameters
    ----------
    X : array-like or Tensor of shape (n, ...), or chunked input
        The training inputs (every feature of a sample counts, whatever its shape); input
        read in chunks (a memmap, ``uint8`` images: see :mod:`ebmclassifier._utils.statistics`)
        gives the step of its float32 values, without a copy.
    fd_step : float, default=0.01
        The step relative to the data's scale (``NGEBMClassifier(fd_step=...)``).

    Returns
    -------
    float
        ``h``, in input units.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])  # Var = 1 per feature
    >>> round(fd_step_size(X, fd_step=0.1), 6)  # 0.1 * sqrt(1 + 1)
    0.141421
    >>> fd_step_size(np.ones((3, 2)), fd_step=0.1)  # no spread: the step itself
    0.1
    """
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    elif not hasattr(X, "chunks"):  # chunked input (a memmap, uint8 images) is read as it is
        X = np.asarray(X)
    # float64 sums: the step must not depend on the order of a float32 reduction. numpy's
    # X.var(axis=0, dtype=float64) computes the same sums, but over a float64 copy of X.
    mean = column_sum(X, np.float64) / len(X)
    squares = sum_of_squares(X, mean)
    scale = float(np.sqrt((squares / len(X)).sum()))
    return fd_step * (scale if scale > 0 else 1.0)


def ngebm_loss(
    module: Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    beta: float = 0.5,
    gamma: float | None = None,
    energy_var_weight: float = 0.0,
    grad_norm: str = "exact",
    step: float | None = None,
    create_graph: bool = True,
    criterion: Criterion = cross_entropy,
    negatives: str | int = "all",
    sample_weight: torch.Tensor | None = None,
    penalty_fraction: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The NG-EBM loss of one batch ([1]_, the Approximate Mass of [2]_ as the penalty).

        L = gamma * CE(f(x), y) + beta * mean_i ||dE/dx (x_i)||_2
            + energy_var_weight * mean_i (mean_j E(x_j) - E(x_i))^2,

    with ``E(x) = -logsumexp_y f(x)[y]``. The paper uses ``beta = gamma = 0.5``; the batch
    variance of the energy is a term of the authors' public code, not of the paper's equation.
    With ``beta=0`` no input gradient is taken (plain cross-entropy, no double backward).
    With ``sample_weight`` every ``mean_i`` (and ``mean_j``) above is the weighted mean
    ``sum_i w_i (.) / sum_i w_i``: the cross-entropy, the gradient norms and the variance.

    Parameters
    ----------
    module : callable
        Maps a batch ``x`` to logits of shape (n, n_classes); it must treat the samples of a
        batch independently (no batch-norm in training mode).
    x : Tensor of shape (n, ...)
    y : Tensor of shape (n,)
        int64 labels in ``0..n_classes-1``.
    beta : float, default=0.5
        Weight of the gradient-norm term.
    gamma : float or None, default=None
        Weight of the cross-entropy; ``None`` means ``1 - beta``.
    energy_var_weight : float, default=0.0
        Weight of the batch variance of the energy.
    grad_norm : {"exact", "finite_difference"}, default="exact"
        How the parameter gradient of the norm term is computed: double backprop
        (:func:`~ebmclassifier.energy.energy_grad_norm`), or one extra forward pass at
        ``x + step * v`` (:func:`~ebmclassifier.energy.energy_grad_norm_finite_difference`).
        The value of the term is the exact norm either way.
    step : float or None, default=None
        The finite-difference step ``h`` in input units (see :func:`fd_step_size`); needed
        with ``grad_norm="finite_difference"``.
    create_graph : bool, default=True
        For ``grad_norm="exact"``: keep the graph of the input gradient, so that the loss can
        be differentiated with respect to the parameters (training). ``False`` when only the
        value is needed (validation).
    criterion : callable, default=:func:`cross_entropy`
        The classification term, ``criterion(logits, y)``, the batch mean; called as
        ``criterion(logits, y, sample_weight)`` when there are weights, and then it must
        return the weighted mean (as :func:`cross_entropy` does). The estimators pass their
        ``criterion_`` averaged by :func:`criterion_mean`.
    negatives : {"all", "batch"} or int, default="all"
        The classes the classification term's normalising term covers
        (:func:`negatives_cross_entropy`); the energy terms are over every class.
    sample_weight : Tensor of shape (n,) or None, default=None
        Non-negative weights of the samples (see the module's notes on sample weights).
    penalty_fraction : float in (0, 1], default=1.0
        The gradient-norm term over the rows :func:`~ebmclassifier.energy.penalty_rows` keeps.

    Returns
    -------
    loss : scalar Tensor
    logits : Tensor of shape (n, n_classes)
        The logits of ``x``, with their graph.

    References
    ----------
    .. [1] Piland, D., et al. "Non-Generative Energy Based Models". 2023.
    .. [2] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
       Should Treat it Like One". ICLR 2020, section 5.2.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> net, x, y = torch.nn.Linear(3, 2), torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    >>> loss, logits = ngebm_loss(net, x, y, beta=0.5)
    >>> loss.backward()  # through the input gradient: double backprop
    >>> tuple(logits.shape), net.weight.grad.shape
    ((4, 2), torch.Size([2, 3]))
    >>> ce, _ = ngebm_loss(net, x, y, beta=0.0)  # gamma = 1: the cross-entropy alone
    >>> bool(torch.isclose(ce, torch.nn.functional.cross_entropy(net(x), y)))
    True

    A weight of 0 drops a sample, a weight of 2 counts it twice:

    >>> w = torch.tensor([1.0, 2.0, 0.0, 1.0])
    >>> weighted, _ = ngebm_loss(net, x, y, sample_weight=w)
    >>> repeated, _ = ngebm_loss(net, x[[0, 1, 1, 3]], y[[0, 1, 1, 3]])
    >>> bool(torch.isclose(weighted, repeated))
    True
    """
    if grad_norm not in GRAD_NORMS:
        raise ValueError(f"grad_norm must be one of {GRAD_NORMS!r}. Got {grad_norm!r} instead.")
    gamma = 1.0 - beta if gamma is None else gamma
    rows = penalty_rows(len(x), penalty_fraction)
    if beta == 0:  # plain cross-entropy: no input gradient, no double backward
        norms, energies, logits = None, None, module(x)
    elif grad_norm == "exact":
        norms, energies, logits = energy_grad_norm(module, x, create_graph, rows)
    else:  # it refuses step=None
        norms, energies, logits = energy_grad_norm_finite_difference(module, x, step, rows)
    loss = gamma * negatives_cross_entropy(logits, y, negatives, sample_weight, criterion)
    if norms is not None:  # the weighted mean over the rows whose norms were taken
        counted = None if sample_weight is None else sample_weight[: len(norms)]
        loss = loss + beta * weighted_mean(norms, counted)
    if energy_var_weight:
        energies = energy(logits) if energies is None else energies
        loss = loss + energy_var_weight * _weighted_variance(energies, sample_weight)
    return loss, logits


def jem_loss(
    module: Module,
    x: torch.Tensor,
    y: torch.Tensor,
    samples: torch.Tensor,
    *,
    px_weight: float = 1.0,
    criterion: Criterion = cross_entropy,
    negatives: str | int = "all",
    sample_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The JEM loss of one batch, given samples of the model ([1]_, eq. 2 and 4).

        L = CE(f(x), y) + px_weight * (mean_i E(x_i) - mean_j E(x~_j)),

    where ``x~`` are samples of ``p(x) ∝ exp(-E(x))`` (from SGLD, see
    :mod:`ebmclassifier.sampling`). The gradient of the second term is the maximum-likelihood
    gradient of ``-log p(x)``, with the expectation under the model estimated by the samples:
    it pushes the energy of the data down and that of the samples up. The samples are constants
    here (no gradient flows into the sampler). Data and samples go through ``module`` in one
    forward pass: one large batch is cheaper than two.

    With ``sample_weight`` the cross-entropy and ``mean_i E(x_i)`` are weighted means over the
    data; ``mean_j E(x~_j)`` stays the plain mean over the samples. The samples are not data
    points: they estimate the expectation of the energy under the model, which no data weight
    changes. (The weighted data term is the gradient of the weighted log-likelihood
    ``sum_i w_i log p(x_i) / sum_i w_i``.)

    Parameters
    ----------
    module : callable
        Maps a batch to logits of shape (n, n_classes).
    x : Tensor of shape (n, ...)
        The data.
    y : Tensor of shape (n,)
        int64 labels in ``0..n_classes-1``.
    samples : Tensor of shape (m, ...)
        Samples of the model, the shape of ``x`` per sample.
    px_weight : float, default=1.0
        Weight of the generative term.
    criterion : callable, default=:func:`cross_entropy`
        The classification term, as in :func:`ngebm_loss`.
    negatives : {"all", "batch"} or int, default="all"
        As in :func:`ngebm_loss`.
    sample_weight : Tensor of shape (n,) or None, default=None
        Non-negative weights of the data (not of the samples).

    Returns
    -------
    loss : scalar Tensor
    logits : Tensor of shape (n, n_classes)
        The logits of ``x`` (not of the samples).
    e_data : Tensor of shape (n,)
        ``E(x_i)``, with its graph.
    e_samples : Tensor of shape (m,)
        ``E(x~_j)``, with its graph.

    References
    ----------
    .. [1] Grathwohl, W., et al. "Your Classifier is Secretly an Energy Based Model and You
       Should Treat it Like One". ICLR 2020.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> net, x, y = torch.nn.Linear(3, 2), torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    >>> loss, logits, e_data, e_samples = jem_loss(net, x, y, samples=torch.randn(6, 3))
    >>> ce = torch.nn.functional.cross_entropy(logits, y)
    >>> bool(torch.isclose(loss, ce + e_data.mean() - e_samples.mean())), tuple(e_samples.shape)
    (True, (6,))
    """
    n = len(x)
    logits_all = module(torch.cat([x, samples]))
    logits = logits_all[:n]
    energies = energy(logits_all)
    e_data, e_samples = energies[:n], energies[n:]
    classification = negatives_cross_entropy(logits, y, negatives, sample_weight, criterion)
    contrast = weighted_mean(e_data, sample_weight) - e_samples.mean()
    return classification + px_weight * contrast, logits, e_data, e_samples
