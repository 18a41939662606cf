"""Energies of classifier logits, their input gradients, and the OOD scores built on them.

A classifier with logits ``f(x)`` defines an energy-based model of the inputs
(Grathwohl et al., 2020, Eq. 5):

    E(x) = -log sum_y exp(f(x)[y]),        p(x) ∝ exp(-E(x)).

The gradient-norm penalty is NG-EBM's [2]_ and the scores are those of [1]_ and [3]_.
Everything here is a plain function on tensors; the estimators only compose them.
All per-sample input gradients assume that the network treats the samples of a batch
independently (no batch-norm in training mode), so that ``d(sum_i E_i)/dx_j = dE_j/dx_j``.

References
----------
.. [1] Grathwohl, W., Wang, K.-C., Jacobsen, J.-H., Duvenaud, D., Norouzi, M. and Swersky, K.
   "Your Classifier is Secretly an Energy Based Model and You Should Treat it Like One".
   ICLR 2020.
.. [2] Piland, D., et al. "Non-Generative Energy Based Models". 2023.
.. [3] Liu, W., Wang, X., Owens, J. and Li, Y. "Energy-based Out-of-distribution Detection".
   NeurIPS 2020.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ._utils.parameters import ParamChecker

__all__ = [
    "OOD_METHODS",
    "energy",
    "energy_grad_norm",
    "energy_grad_norm_finite_difference",
    "joint_energy",
    "nonsmooth_activations",
    "ood_score",
    "penalty_rows",
]

#: The names of the out-of-distribution scores, the same for every estimator.
OOD_METHODS = ("energy", "max_softmax", "approx_mass")


def energy(logits: torch.Tensor) -> torch.Tensor:
    """Energy of each sample, ``E(x) = -logsumexp_y f(x)[y]``.

    Parameters
    ----------
    logits : Tensor of shape (n, n_classes)

    Returns
    -------
    Tensor of shape (n,)
        The lower, the more typical of the training data.

    Examples
    --------
    >>> import torch
    >>> energy(torch.zeros(2, 4))
    tensor([-1.3863, -1.3863])
    """
    return -torch.logsumexp(logits, dim=1)


def joint_energy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Energy of each sample with its label, ``E(x, y) = -f(x)[y]``.

    The energy of the joint ``p(x, y) ∝ exp(f(x)[y])`` (Grathwohl et al. 2020, Eq. 3), whose
    marginal over ``y`` has the energy :func:`energy`: ``E(x) = -logsumexp_y -E(x, y)``.
    Sampling ``x`` from it for a fixed ``y`` draws samples of that class (JEM's
    class-conditional chains, generated replay).

    Parameters
    ----------
    logits : Tensor of shape (n, n_classes)
    y : int64 Tensor of shape (n,)
        A label (a column of ``logits``) per sample.

    Returns
    -------
    Tensor of shape (n,)

    Examples
    --------
    >>> import torch
    >>> joint_energy(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([1, 0]))
    tensor([-2., -3.])
    """
    return -logits.gather(1, y[:, None]).squeeze(1)


def penalty_rows(n: int, penalty_fraction: float = 1.0) -> int:
    """How many rows of a batch of ``n`` carry NG-EBM's penalty: ``ceil(penalty_fraction * n)``.

    The gradient-norm penalty of ``NGEBMClassifier(penalty_fraction=f)`` is the mean over the
    first ``m = ceil(f n)`` rows of each training batch (at least one), an estimate of the mean
    over the batch at about ``m / n`` of its cost: the ``rows`` of :func:`energy_grad_norm`
    and :func:`energy_grad_norm_finite_difference`. The batches are shuffled, so the first
    rows are a uniform random subset of the batch, and no random number is drawn for it.
    ``f n`` is rounded to 9 decimals first, so that ``0.1 * 30`` (3.0000000000000004 in
    floating point) gives 3 rows.

    Parameters
    ----------
    n : int
        The rows of the batch.
    penalty_fraction : float in (0, 1], default=1.0

    Returns
    -------
    int
        ``m``, from 1 to ``n`` (``n`` for ``penalty_fraction=1``; 0 for an empty batch).

    Examples
    --------
    >>> penalty_rows(64, 0.25), penalty_rows(30, 0.1), penalty_rows(5, 0.5), penalty_rows(64)
    (16, 3, 3, 64)
    >>> penalty_rows(3, 0.01)  # at least one row
    1
    """
    check = ParamChecker.of({"penalty_fraction": penalty_fraction})
    check.real("penalty_fraction", 0.0, 1.0, low_open=True)
    check.raise_if_any()
    if penalty_fraction == 1:
        return n
    return min(n, max(1, math.ceil(round(penalty_fraction * n, 9))))


def _input_gradient(
    module: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    create_graph: bool,
    rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(x_leaf, dE/dx, E, logits)`` for a batch; the graph of E is kept.

    With ``rows < len(x)``, ``x_leaf`` and ``dE/dx`` are of the first ``rows`` samples only; the
    others go through a forward pass of their own, without the input's gradient, so that no
    backward pass through the input touches them. ``E`` and ``logits`` are of every sample.
    """
    if rows is not None and rows < len(x):
        x_leaf, grad, energies, logits = _input_gradient(module, x[:rows], create_graph)
        rest = module(x[rows:])
        return x_leaf, grad, torch.cat([energies, energy(rest)]), torch.cat([logits, rest])
    x = x.detach().requires_grad_(True)
    logits = module(x)
    energies = energy(logits)
    # Summing is exact per sample because the samples do not interact (see module docstring).
    (grad,) = torch.autograd.grad(energies.sum(), x, create_graph=create_graph, retain_graph=True)
    return x, grad, energies, logits


def energy_grad_norm(
    module: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    create_graph: bool = False,
    rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample norm of the energy's input gradient, ``||dE/dx (x_i)||_2``, by double backprop.

    This is the (negative) Approximate Mass of Grathwohl et al. (2020, Sec. 5.2) and the
    regulariser of NG-EBM (Piland et al., 2023):
    ``loss = gamma * CE + beta * mean_i ||dE/dx (x_i)||_2``.

    Parameters
    ----------
    module : callable
        Maps a batch ``x`` to logits of shape (n, n_classes).
    x : Tensor of shape (n, ...)
        The inputs; they are detached, so the caller's tensor is left as it was.
    create_graph : bool, default=False
        Keep the graph of the gradient so that the norms can be differentiated with respect to
        the module's parameters (training). ``False`` for scoring.
    rows : int or None, default=None
        The norms of the first ``rows`` samples only (NG-EBM's penalty estimated on part of
        the batch, ``NGEBMClassifier(penalty_fraction=...)``): the other samples go through a
        forward pass of their own, without the input's gradient, so the input's backward
        pass and the double backward cost ``rows / n`` of the whole batch's. ``None`` (or
        ``rows >= n``): every sample, in one forward pass.

    Returns
    -------
    norms : Tensor of shape (n,), or (rows,) with ``rows < n``
    energies : Tensor of shape (n,)
    logits : Tensor of shape (n, n_classes)

    Examples
    --------
    >>> import torch
    >>> lin = torch.nn.Linear(3, 2, bias=False)
    >>> with torch.no_grad():
    ...     _ = lin.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    >>> norms, _, _ = energy_grad_norm(lin, torch.zeros(1, 3))
    >>> norms  # E = -log(2 e^{x_0}) so dE/dx = (-1, 0, 0)
    tensor([1.])
    """
    _, grad, energies, logits = _input_gradient(module, x, create_graph, rows)
    norms = torch.linalg.vector_norm(grad.flatten(1), dim=1)
    return norms, energies, logits


def energy_grad_norm_finite_difference(
    module: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    step: float,
    rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradient norms whose parameter gradient comes from a finite difference, not double backprop.

    With ``g = dE/dx`` and the unit direction ``v = g / ||g||`` held constant,

        d/dtheta ||g|| = v^T (d/dtheta g) = d/dtheta (v^T dE/dx)
                       ≈ d/dtheta [E(x + h v) - E(x)] / h,

    a mixed second derivative that one extra forward pass at ``x + h v`` gives. The returned
    ``norms`` have the exact value ``||g||`` and carry the finite-difference derivative, so the
    same loss code serves both modes. For smooth activations (SiLU, GELU, Softplus, tanh) the
    error is ``O(h)``. It is not exact for ReLU networks: their activations have kinks
    (:func:`nonsmooth_activations`), the segment ``[x, x + h v]`` often crosses one, and across a
    kink the difference measures something else than the derivative at ``x``, an error that a
    smaller ``h`` does not remove (fewer crossings, each weighing ``1 / h``): the cosine between
    this parameter gradient and the exact one, per activation and network, is measured in
    :doc:`/user_guide/ngebm` ("Not on ReLU-family networks"); use :func:`energy_grad_norm`
    there.

    Parameters
    ----------
    module : callable
        Maps a batch ``x`` to logits of shape (n, n_classes).
    x : Tensor of shape (n, ...)
    step : float
        The step ``h``, in input units (the estimator scales it to the data; see
        ``NGEBMClassifier(fd_step=...)``).
    rows : int or None, default=None
        The norms of the first ``rows`` samples only, as in :func:`energy_grad_norm`: the
        input gradient and the shifted forward pass are of those samples alone.

    Returns
    -------
    norms : Tensor of shape (n,), or (rows,) with ``rows < n``
        ``||dE/dx||`` whose gradient with respect to the parameters is the finite difference.
    energies : Tensor of shape (n,)
    logits : Tensor of shape (n, n_classes)
        Of the unperturbed ``x``, with their graph (for the cross-entropy term).

    Examples
    --------
    The same values as :func:`energy_grad_norm`, and nearly the same parameter gradient:

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> net, x = torch.nn.Linear(3, 2), torch.randn(5, 3)
    >>> fd, _, _ = energy_grad_norm_finite_difference(net, x, step=1e-3)
    >>> exact, _, _ = energy_grad_norm(net, x, create_graph=True)
    >>> torch.allclose(fd, exact)
    True
    >>> (g_fd,) = torch.autograd.grad(fd.mean(), net.weight)
    >>> (g_exact,) = torch.autograd.grad(exact.mean(), net.weight)
    >>> torch.allclose(g_fd, g_exact, atol=1e-3)
    True
    """
    if step is None:
        raise ValueError(
            "The finite difference (grad_norm='finite_difference') needs the step h; see "
            "ebmclassifier.losses.fd_step_size."
        )
    x_leaf, grad, energies, logits = _input_gradient(module, x, create_graph=False, rows=rows)
    flat = grad.flatten(1)
    norms = torch.linalg.vector_norm(flat, dim=1)
    # A zero gradient has no direction; any unit vector gives a zero-length difference there.
    direction = (flat / norms.clamp_min(torch.finfo(flat.dtype).tiny).unsqueeze(1)).view_as(grad)
    energies_shifted = energy(module(x_leaf.detach() + step * direction))
    head = energies if len(x_leaf) == len(energies) else energies[: len(x_leaf)]
    difference = (energies_shifted - head) / step
    # Value of the exact norm, derivative of the finite difference.
    return norms + (difference - difference.detach()), energies, logits


# Activation modules whose derivative jumps somewhere (ReLU6 is a Hardtanh). ELU has a kink
# unless ``alpha=1``; see :func:`nonsmooth_activations`.
_KINKED = (
    nn.ReLU,
    nn.LeakyReLU,
    nn.PReLU,
    nn.RReLU,
    nn.Hardtanh,
    nn.SELU,
    nn.Hardshrink,
    nn.Softshrink,
    nn.Threshold,
    nn.Hardsigmoid,
    nn.Hardswish,
)


def nonsmooth_activations(module: nn.Module) -> list[str]:
    """The activation modules of ``module`` whose derivative jumps (a kink).

    ReLU, leaky ReLU, PReLU, RReLU, Hardtanh / ReLU6, SELU, ELU with ``alpha != 1``, the
    shrinkage and threshold activations, Hardsigmoid and Hardswish. A finite difference of the
    energy that crosses a kink is not the derivative at its start, which makes
    :func:`energy_grad_norm_finite_difference` inaccurate on such a network. The search is by
    module type: an activation called as a function inside ``forward`` (``F.relu``) is not seen.
    Max-pooling also has kinks but barely moves the finite difference's gradient
    (``benchmarks/fd_kinks.py``), and is not listed.

    Parameters
    ----------
    module : torch.nn.Module

    Returns
    -------
    list of str
        The class names of the kinked activations found, each once, in the order met.

    Examples
    --------
    >>> from torch import nn
    >>> nonsmooth_activations(nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 4),
    ...                                     nn.LeakyReLU(0.2), nn.ReLU(), nn.Linear(4, 2)))
    ['ReLU', 'LeakyReLU']
    >>> nonsmooth_activations(nn.Sequential(nn.Linear(2, 4), nn.SiLU(), nn.ELU()))
    []
    """
    found = []
    for layer in module.modules():
        kinked = isinstance(layer, _KINKED) or (isinstance(layer, nn.ELU) and layer.alpha != 1)
        if isinstance(layer, nn.LeakyReLU) and layer.negative_slope == 1:
            kinked = False  # the identity
        if kinked and type(layer).__name__ not in found:
            found.append(type(layer).__name__)
    return found


def ood_score(
    module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, method: str
) -> torch.Tensor:
    """Out-of-distribution score of each sample; the higher, the more likely out-of-distribution.

    Parameters
    ----------
    module : callable
        Maps a batch ``x`` to logits.
    x : Tensor of shape (n, ...)
    method : {"energy", "max_softmax", "approx_mass"}
        ``"energy"``: ``E(x)`` (Liu et al., 2020); ``"max_softmax"``: ``-max_y p(y|x)``
        (Hendrycks & Gimpel, 2017); ``"approx_mass"``: ``||dE/dx||_2`` (Grathwohl et al., 2020),
        needing one backward pass.

    Returns
    -------
    Tensor of shape (n,), detached.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Linear(3, 2)
    >>> x = torch.zeros(4, 3)
    >>> ood_score(net, x, "energy").shape
    torch.Size([4])
    >>> bool((ood_score(net, x, "max_softmax") < 0).all())
    True
    """
    if method == "approx_mass":
        with torch.enable_grad():
            norms, _, _ = energy_grad_norm(module, x, create_graph=False)
        return norms.detach()
    with torch.no_grad():
        logits = module(x)
        if method == "energy":
            return energy(logits)
        if method == "max_softmax":
            return -torch.softmax(logits, dim=1).amax(dim=1)
    raise ValueError(f"Unknown OOD method {method!r}; expected one of {OOD_METHODS}.")
