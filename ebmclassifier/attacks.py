"""Projected gradient descent (PGD) attacks on a logit module, as plain tensor functions.

:func:`pgd_attack` attacks one batch; :func:`robust_accuracy` loops over batches and radii.
The estimator-level adapter, :func:`ebmclassifier.metrics.adversarial_accuracy`, validates user
input and hands the estimator's network to :func:`robust_accuracy`; this module only knows
tensors and ``nn.Module``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ._utils.modes import kept_modes

__all__ = ["NORMS", "pgd_attack", "robust_accuracy"]

#: The threat models, by name: the L-infinity ball (per coordinate) and the L2 ball.
NORMS = ("linf", "l2")


def _per_sample_l2(t: torch.Tensor) -> torch.Tensor:
    """L2 norm of each sample of ``t`` (n, ...), shaped (n, 1, ..., 1) to broadcast against it."""
    return t.flatten(1).norm(dim=1).view(-1, *([1] * (t.dim() - 1)))


def _project(delta: torch.Tensor, eps: float, norm: str) -> torch.Tensor:
    """Euclidean projection of each perturbation onto the ``norm`` ball of radius ``eps``."""
    if norm == "linf":
        return delta.clamp(-eps, eps)
    # ||delta|| <= eps is left alone; otherwise rescaled onto the sphere
    scale = (eps / _per_sample_l2(delta).clamp_min(1e-12)).clamp(max=1.0)
    return delta * scale


def _ascent_direction(grad: torch.Tensor, norm: str) -> torch.Tensor:
    """Steepest-ascent direction of unit ``norm``-length: sign for L-inf, normalised for L2."""
    if norm == "linf":
        return grad.sign()
    return grad / _per_sample_l2(grad).clamp_min(1e-12)


def _random_start(
    x: torch.Tensor, eps: float, norm: str, generator: torch.Generator | None
) -> torch.Tensor:
    """A uniform draw from the ``norm`` ball of radius ``eps`` around the origin, shaped as x.

    Drawn on the CPU with ``generator`` so a seed gives the same start on every device.
    """
    shape = x.shape
    if norm == "linf":
        delta = (2.0 * torch.rand(shape, generator=generator) - 1.0) * eps
    else:
        # uniform in the L2 ball: isotropic direction, radius eps * U^(1/d)
        direction = torch.randn(shape, generator=generator)
        direction = direction / _per_sample_l2(direction).clamp_min(1e-12)
        d = x[0].numel()
        radius = eps * torch.rand((shape[0],), generator=generator) ** (1.0 / d)
        delta = direction * radius.view(-1, *([1] * (x.dim() - 1)))
    return delta.to(device=x.device, dtype=x.dtype)


def check_float_input(dtype, what: str = "x") -> None:
    """Refuse integer inputs (token ids, indices): PGD follows a gradient they do not have.

    Parameters
    ----------
    dtype : torch.dtype or numpy dtype
        The dtype of the inputs the network takes.
    what : str, default="x"
        How the message names them.
    """
    floating = dtype.is_floating_point if isinstance(dtype, torch.dtype) else dtype.kind == "f"
    if not floating:
        raise ValueError(
            f"PGD perturbs {what} along the gradient of the loss with respect to it, and {what} "
            f"holds integers (dtype {dtype}): token ids or indices have no gradient, and a "
            "perturbed id is no input of the network. Attack a model of continuous inputs, or "
            "its embeddings with a model that takes them."
        )


def _validate_attack(eps: float, norm: str, steps: int, step_size: float | None) -> None:
    problems = []
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps >= 0:
        problems.append(f"'eps' must be a real number >= 0. Got {eps!r} instead.")
    if norm not in NORMS:
        problems.append(f"'norm' must be one of {NORMS!r}. Got {norm!r} instead.")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        problems.append(f"'steps' must be an integer >= 1. Got {steps!r} instead.")
    if step_size is not None and (
        isinstance(step_size, bool) or not isinstance(step_size, numbers.Real) or not step_size > 0
    ):
        problems.append(
            f"'step_size' must be a real number > 0, or None for 2.5 * eps / steps. "
            f"Got {step_size!r} instead."
        )
    if problems:
        raise ValueError(" ".join(problems))


def pgd_attack(
    module: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    *,
    norm: str = "linf",
    steps: int = 10,
    step_size: float | None = None,
    random_start: bool = True,
    input_min: torch.Tensor | float | None = None,
    input_max: torch.Tensor | float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Untargeted PGD: maximise the cross-entropy of ``module`` within an epsilon-ball.

    Starting from ``x`` (plus, if ``random_start``, a uniform draw from the ball), each of the
    ``steps`` iterations takes a steepest-ascent step on the summed cross-entropy loss and
    projects back (Madry et al. 2018, eq. 2):

    .. math::

        x^{t+1} = \\Pi_{B_p(x, \\epsilon) \\cap [l, u]}
            \\left(x^t + \\alpha\\, d_p(\\nabla_x \\mathcal{L}(f(x^t), y))\\right),

    with :math:`d_\\infty(g) = \\operatorname{sign}(g)` and :math:`d_2(g) = g / \\|g\\|_2`.
    The box :math:`[l, u]` is ``[input_min, input_max]`` widened to contain ``x`` itself (so a
    test point outside the training range stays reachable and the result always lies inside the
    ball); clipping to it after the ball projection keeps the point inside the ball for both norms.
    The last iterate is returned.

    Parameters
    ----------
    module : torch.nn.Module
        Maps a batch shaped like ``x`` to logits of shape (n, n_classes). It is put in eval
        mode during the attack and its previous mode restored; its parameters get no gradient.
    x : torch.Tensor of shape (n, ...)
        Clean inputs, on the module's device.
    y : torch.Tensor of shape (n,), int64
        Encoded labels 0..n_classes-1.
    eps : float
        Radius of the ball (>= 0). ``eps=0`` returns a copy of ``x``.
    norm : {"linf", "l2"}, default="linf"
        The ball: per-coordinate bound, or per-sample Euclidean bound over all non-batch dims.
    steps : int, default=10
        Number of ascent steps.
    step_size : float or None, default=None
        Step length alpha; None means ``2.5 * eps / steps`` (Madry et al.).
    random_start : bool, default=True
        Start from a uniform draw in the ball instead of ``x``.
    input_min, input_max : tensor, float or None
        Valid input range, broadcastable to ``x.shape[1:]``; None means unbounded.
    generator : torch.Generator or None
        CPU generator for the random start (reproducible across devices).

    Returns
    -------
    x_adv : torch.Tensor, same shape, dtype and device as ``x``, detached
        With ``||x_adv - x||_p <= eps`` per sample (up to float rounding).

    References
    ----------
    .. [1] Madry, Makelov, Schmidt, Tsipras and Vladu, "Towards Deep Learning Models Resistant to
       Adversarial Attacks", ICLR 2018, eq. (2) and section 3.

    Examples
    --------
    >>> import torch
    >>> module = torch.nn.Linear(4, 3)
    >>> x, y = torch.zeros(2, 4), torch.tensor([0, 1])
    >>> x_adv = pgd_attack(module, x, y, eps=0.1, norm="linf", steps=3)
    >>> bool((x_adv - x).abs().max() <= 0.1 + 1e-6)
    True
    """
    _validate_attack(eps, norm, steps, step_size)
    check_float_input(x.dtype)
    x = x.detach()
    if eps == 0:
        return x.clone()
    if step_size is None:
        step_size = 2.5 * eps / steps

    lo = x if input_min is None else torch.minimum(torch.as_tensor(input_min).to(x), x)
    hi = x if input_max is None else torch.maximum(torch.as_tensor(input_max).to(x), x)
    unbounded = input_min is None and input_max is None

    def clip_to_box(delta):
        if unbounded:
            return delta
        x_new = x + delta
        if input_min is not None:
            x_new = torch.maximum(x_new, lo)
        if input_max is not None:
            x_new = torch.minimum(x_new, hi)
        return x_new - x

    if random_start:
        delta = clip_to_box(_random_start(x, eps, norm, generator))
    else:
        delta = torch.zeros_like(x)

    with kept_modes(module), torch.enable_grad():
        module.eval()
        for _ in range(steps):
            delta.requires_grad_(True)
            loss = F.cross_entropy(module(x + delta), y, reduction="sum")
            (grad,) = torch.autograd.grad(loss, delta)
            with torch.no_grad():
                delta = delta + step_size * _ascent_direction(grad, norm)
                delta = clip_to_box(_project(delta, eps, norm))
    return (x + delta).detach()


def robust_accuracy(
    module: nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    epsilons: Sequence[float],
    *,
    device: torch.device | str = "cpu",
    seed: int = 0,
    batch_size: int = 256,
    **attack,
) -> np.ndarray:
    """Accuracy of ``module`` under :func:`pgd_attack`, for each radius in ``epsilons``.

    Each batch of ``batch_size`` samples is attacked, for each radius, from a random start
    drawn by a generator seeded with ``seed`` (so every radius starts from the same draws, up
    to scale); the last iterate counts as robust when ``module`` still predicts the label.

    Parameters
    ----------
    module : torch.nn.Module
        Inputs -> logits, on ``device``. Put in eval mode during the attack, its mode restored.
    X : ndarray of float32, shape (n, ...)
        Clean inputs.
    y : ndarray of int64, shape (n,)
        Labels 0..n_classes-1.
    epsilons : sequence of float
        Radii (>= 0); ``0`` gives the clean accuracy.
    device : torch.device or str, default="cpu"
        Where the batches go.
    seed : int, default=0
        Seeds the random starts.
    batch_size : int, default=256
    **attack
        ``norm``, ``steps``, ``step_size``, ``random_start``, ``input_min``, ``input_max``: as
        :func:`pgd_attack` takes them.

    Returns
    -------
    accuracies : ndarray of shape (len(epsilons),)

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> module = torch.nn.Linear(2, 2, bias=False)
    >>> with torch.no_grad():
    ...     _ = module.weight.copy_(torch.eye(2))  # predicts the larger coordinate
    >>> X = np.array([[1.0, 0.0], [0.0, 0.2]], dtype=np.float32)
    >>> robust_accuracy(module, X, np.array([0, 1]), [0.0, 0.05, 0.6], steps=5)
    array([1., 1., 0.])
    """
    check_float_input(X.dtype)
    accuracies = []
    with kept_modes(module):
        module.eval()
        for eps in epsilons:
            generator = torch.Generator().manual_seed(seed)
            n_correct = 0
            for start in range(0, X.shape[0], batch_size):
                xb = torch.from_numpy(X[start : start + batch_size]).to(device)
                yb = torch.from_numpy(y[start : start + batch_size]).to(device)
                x_adv = pgd_attack(module, xb, yb, float(eps), generator=generator, **attack)
                with torch.no_grad():
                    n_correct += int((module(x_adv).argmax(dim=1) == yb).sum())
            accuracies.append(n_correct / X.shape[0])
    return np.asarray(accuracies)
