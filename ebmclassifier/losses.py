"""The training objectives of the energy-based classifiers, as functions on tensors.

A classifier with logits ``f(x)`` defines the energy ``E(x) = -logsumexp_y f(x)[y]``
([2]_, eq. 5). NG-EBM [1]_ penalises the norm of its input gradient; JEM [2]_ contrasts the
energies of the data with those of samples drawn from the model. The estimators compose these
functions, and the benchmark (``python -m ebmclassifier bench``) times the same ones, so that
both measure one objective.

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

from .energy import energy, energy_grad_norm, energy_grad_norm_finite_difference

__all__ = ["fd_step_size", "jem_loss", "ngebm_loss"]

#: How ``ngebm_loss`` differentiates the gradient-norm term.
GRAD_NORMS = ("exact", "finite_difference")

Module = Callable[[torch.Tensor], torch.Tensor]
Criterion = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def fd_step_size(X, fd_step: float = 0.01) -> float:
    """The step ``h`` of the finite-difference gradient norm, scaled to the data.

    ``h = fd_step * sqrt(sum_j Var(x_j))``: the root-mean-square distance of the samples from
    their mean, so that ``fd_step`` means the same for raw pixels and standardized data. Data
    without spread get ``h = fd_step``.

    Parameters
    ----------
    X : array-like or Tensor of shape (n, ...)
        The training inputs (every feature of a sample counts, whatever its shape).
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
    # float64 sums: the step must not depend on the order of a float32 reduction
    scale = float(np.sqrt(np.asarray(X).var(axis=0, dtype=np.float64).sum()))
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
    criterion: Criterion = F.cross_entropy,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The NG-EBM loss of one batch ([1]_, the Approximate Mass of [2]_ as the penalty).

        L = gamma * CE(f(x), y) + beta * mean_i ||dE/dx (x_i)||_2
            + energy_var_weight * mean_i (mean_j E(x_j) - E(x_i))^2,

    with ``E(x) = -logsumexp_y f(x)[y]``. The paper uses ``beta = gamma = 0.5``; the batch
    variance of the energy is a term of the authors' public code, not of the paper's equation.
    With ``beta=0`` no input gradient is taken (plain cross-entropy, no double backward).

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
    criterion : callable, default=torch.nn.functional.cross_entropy
        The classification term, ``criterion(logits, y)``.

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
    """
    if grad_norm not in GRAD_NORMS:
        raise ValueError(f"grad_norm must be one of {GRAD_NORMS!r}. Got {grad_norm!r} instead.")
    gamma = 1.0 - beta if gamma is None else gamma
    if beta == 0:
        # Plain cross-entropy: no input gradient, no double backward.
        logits = module(x)
        loss = gamma * criterion(logits, y)
        if energy_var_weight:
            loss = loss + energy_var_weight * energy(logits).var(unbiased=False)
        return loss, logits
    if grad_norm == "exact":
        norms, energies, logits = energy_grad_norm(module, x, create_graph=create_graph)
    else:
        if step is None:
            raise ValueError("grad_norm='finite_difference' needs the step h; see fd_step_size.")
        norms, energies, logits = energy_grad_norm_finite_difference(module, x, step)
    loss = gamma * criterion(logits, y) + beta * norms.mean()
    if energy_var_weight:
        loss = loss + energy_var_weight * energies.var(unbiased=False)
    return loss, logits


def jem_loss(
    module: Module,
    x: torch.Tensor,
    y: torch.Tensor,
    samples: torch.Tensor,
    *,
    px_weight: float = 1.0,
    criterion: Criterion = F.cross_entropy,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The JEM loss of one batch, given samples of the model ([1]_, eq. 2 and 4).

        L = CE(f(x), y) + px_weight * (mean_i E(x_i) - mean_j E(x~_j)),

    where ``x~`` are samples of ``p(x) ∝ exp(-E(x))`` (from SGLD, see
    :mod:`ebmclassifier.sampling`). The gradient of the second term is the maximum-likelihood
    gradient of ``-log p(x)``, with the expectation under the model estimated by the samples:
    it pushes the energy of the data down and that of the samples up. The samples are constants
    here (no gradient flows into the sampler). Data and samples go through ``module`` in one
    forward pass: one large batch is cheaper than two.

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
    criterion : callable, default=torch.nn.functional.cross_entropy
        The classification term, ``criterion(logits, y)``.

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
    loss = criterion(logits, y) + px_weight * (e_data.mean() - e_samples.mean())
    return loss, logits, e_data, e_samples
