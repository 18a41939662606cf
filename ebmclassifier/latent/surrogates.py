"""Surrogate gradients for an argmax over a categorical latent: STE-I, SPIGOT, SPIGOT-CE, SPIGOT-EG.

The forward pass of every method here is the MAP one-hot ``z_hat = onehot(argmax(s))``, whose
true Jacobian is zero. The backward pass replaces it by "pulling back" the downstream gradient
``gamma = dL/dz`` to a target ``z_tilde`` that the decoder would prefer, and returns the gradient
of a loss that moves the encoder towards it [1]_:

============  ===========================  ====================================================
method        start point (z_0)            inner step, ``t = 0 .. k-1``
============  ===========================  ====================================================
STE-I         ``z_hat``                    ``z_{t+1} = z_t - eta * gamma(z_t)``
SPIGOT        ``z_hat``                    ``z_{t+1} = proj_simplex(z_t - eta * gamma(z_t))``
SPIGOT-CE     ``mu_0 = softmax(s)``        ``z_{t+1} = proj_simplex(z_t - eta * gamma(z_t))``
SPIGOT-EG     ``mu_0 = softmax(s)``        ``z_{t+1} = softmax(log z_t - eta * gamma(z_t))``
============  ===========================  ====================================================

and ``dL/ds := z_0 - z_k``. With ``k = 1`` these are the paper's Eqs.: STE-I gives
``eta * gamma`` (identity straight-through), SPIGOT gives ``z_hat - proj(z_hat - eta*gamma)``
(the perceptron-loss gradient towards the pulled-back target), SPIGOT-CE
``softmax(s) - proj(softmax(s) - eta * gamma(mu_0))`` (the cross-entropy gradient towards it) and
SPIGOT-EG ``softmax(s) - softmax(s - eta * gamma(mu_0))``.

Conventions
-----------
``gamma`` at ``z_hat`` is the gradient that arrives in ``backward`` (the chain rule's own value).
Gradients at any other point come from ``gamma_fn(z) -> dL/dz``, a closure over the current
decoder, inputs and targets that the caller builds once per training step; it must compute the
gradient of the *same* loss whose gradient arrives at ``z`` (see
:func:`ebmclassifier.latent.categorical.gamma_from_loss`). It is called inside ``backward`` only,
so validation passes, which never call ``backward``, pay nothing for it. ``eta`` multiplies gamma
as given: for a batch-mean loss, gamma of a sample is 1/n of its own gradient, so callers that want
a per-sample step size pass the sum of per-sample losses and rescale the encoder's gradient
(:class:`ebmclassifier.latent.classifier.LatentStructureClassifier` does this).

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP: STE-I and SPIGOT as approximate minimisers of a
   pulled-back loss, and the new variants SPIGOT-CE and SPIGOT-EG.
.. [2] Peng, Thomson & Smith (2018), "Backpropagating through Structured Argmax using a SPIGOT",
   ACL.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

from .simplex import project_simplex

#: The type of ``gamma_fn``: latent points (n, K) -> the downstream gradient ``dL/dz`` there.
GammaFn = Callable[[torch.Tensor], torch.Tensor]

__all__ = [
    "GammaFn",
    "STEIdentity",
    "SPIGOT",
    "SPIGOTCrossEntropy",
    "SPIGOTExponentiatedGradient",
    "one_hot_argmax",
]


def one_hot_argmax(scores: torch.Tensor) -> torch.Tensor:
    """MAP one-hot vector of each row of ``scores`` (shape (n, K)), ties to the lowest index.

    Parameters
    ----------
    scores : Tensor of shape (n, K)

    Returns
    -------
    Tensor of shape (n, K)
        ``onehot(argmax(s))`` per row, in the dtype of ``scores``; not differentiable.

    Examples
    --------
    >>> import torch
    >>> one_hot_argmax(torch.tensor([[0.1, 2.0, -1.0]]))
    tensor([[0., 1., 0.]])
    """
    index = scores.argmax(dim=-1, keepdim=True)
    return torch.zeros_like(scores).scatter_(-1, index, 1.0)


def _require_gamma_fn(gamma_fn: GammaFn | None, method: str, why: str) -> GammaFn:
    if gamma_fn is None:
        raise ValueError(
            f"{method} needs gamma_fn (the downstream gradient at points other than the argmax) "
            f"{why}; got gamma_fn=None. Build one with ebmclassifier.latent.gamma_from_loss."
        )
    return gamma_fn


def _inner_steps(
    z: torch.Tensor,
    gamma: torch.Tensor,
    gamma_fn: GammaFn | None,
    step_size: float,
    inner_steps: int,
    update: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """Run ``z <- update(z, eta * gamma(z))`` k times; ``gamma`` is gamma at the start point."""
    for t in range(inner_steps):
        if t > 0:
            gamma = gamma_fn(z)
        z = update(z, step_size * gamma)
    return z


def _euclidean_step(z: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    return z - step


def _projected_step(z: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    return project_simplex(z - step)


def _ste_grad(scores, z_hat, grad_z, gamma_fn, step_size, inner_steps):
    if inner_steps > 1:
        gamma_fn = _require_gamma_fn(gamma_fn, "STE-I", "when inner_steps > 1")
    return z_hat - _inner_steps(z_hat, grad_z, gamma_fn, step_size, inner_steps, _euclidean_step)


def _spigot_grad(scores, z_hat, grad_z, gamma_fn, step_size, inner_steps):
    if inner_steps > 1:
        gamma_fn = _require_gamma_fn(gamma_fn, "SPIGOT", "when inner_steps > 1")
    return z_hat - _inner_steps(z_hat, grad_z, gamma_fn, step_size, inner_steps, _projected_step)


def _spigot_ce_grad(scores, z_hat, grad_z, gamma_fn, step_size, inner_steps):
    gamma_fn = _require_gamma_fn(gamma_fn, "SPIGOT-CE", "to evaluate gamma at softmax(s)")
    mu_0 = torch.softmax(scores, dim=-1)
    return mu_0 - _inner_steps(
        mu_0, gamma_fn(mu_0), gamma_fn, step_size, inner_steps, _projected_step
    )


def _spigot_eg_grad(scores, z_hat, grad_z, gamma_fn, step_size, inner_steps):
    gamma_fn = _require_gamma_fn(gamma_fn, "SPIGOT-EG", "to evaluate gamma at softmax(s)")
    # Iterate on scores rather than on log(mu): the same points, and no log(0).
    s_k = scores
    for _ in range(inner_steps):
        s_k = s_k - step_size * gamma_fn(torch.softmax(s_k, dim=-1))
    return torch.softmax(scores, dim=-1) - torch.softmax(s_k, dim=-1)


def _surrogate_backward(pulled_back):
    """The ``backward`` of an argmax surrogate whose ``dL/ds`` is ``pulled_back(...)``."""

    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        scores, z_hat = ctx.saved_tensors
        grad_s = pulled_back(scores, z_hat, grad_z, ctx.gamma_fn, ctx.step_size, ctx.inner_steps)
        return grad_s, None, None, None

    return staticmethod(backward)


class _ArgmaxSurrogate(torch.autograd.Function):
    """Forward ``onehot(argmax(s))``; each subclass sets ``backward`` to its pulled-back target.

    Called as ``Method.apply(scores, gamma_fn, step_size, inner_steps)``.
    """

    @staticmethod
    def forward(ctx, scores, gamma_fn, step_size, inner_steps):
        z_hat = one_hot_argmax(scores)
        ctx.gamma_fn = gamma_fn
        ctx.step_size = float(step_size)
        ctx.inner_steps = int(inner_steps)
        ctx.save_for_backward(scores, z_hat)
        return z_hat


class STEIdentity(_ArgmaxSurrogate):
    """STE-I: ``dL/ds = z_hat - z_k``, plain gradient steps from ``z_hat`` (``eta*gamma`` if k=1).

    Call as ``STEIdentity.apply(scores, gamma_fn, step_size, inner_steps)``. See the module
    docstring and Mihaylova et al. (2020).

    Parameters
    ----------
    scores : Tensor of shape (n, K)
        Encoder scores ``s``.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None
        when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : Tensor of shape (n, K)
        ``onehot(argmax(s))``.

    Examples
    --------
    >>> import torch
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = STEIdentity.apply(scores, None, 1.0, 1)
    >>> z
    tensor([[1., 0., 0.]], grad_fn=<STEIdentityBackward>)
    >>> z.backward(torch.tensor([[2.0, -2.0, 0.0]]))  # gamma = dL/dz at z_hat
    >>> scores.grad  # eta * gamma, passed straight through
    tensor([[ 2., -2.,  0.]])
    """

    backward = _surrogate_backward(_ste_grad)


class SPIGOT(_ArgmaxSurrogate):
    """SPIGOT: ``dL/ds = z_hat - z_k``, projected gradient steps from ``z_hat``.

    Call as ``SPIGOT.apply(scores, gamma_fn, step_size, inner_steps)``. See the module
    docstring, Mihaylova et al. (2020) and Peng et al. (2018).

    Parameters
    ----------
    scores : Tensor of shape (n, K)
        Encoder scores ``s``.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None
        when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : Tensor of shape (n, K)
        ``onehot(argmax(s))``.

    Examples
    --------
    With ``gamma = (2, -2, 0)`` the pulled-back target ``proj(z_hat - gamma)`` is the vertex
    ``(0, 1, 0)``:

    >>> import torch
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = SPIGOT.apply(scores, None, 1.0, 1)
    >>> z.backward(torch.tensor([[2.0, -2.0, 0.0]]))
    >>> scores.grad  # z_hat - proj(z_hat - gamma)
    tensor([[ 1., -1.,  0.]])
    """

    backward = _surrogate_backward(_spigot_grad)


class SPIGOTCrossEntropy(_ArgmaxSurrogate):
    """SPIGOT-CE: ``dL/ds = mu_0 - z_k``, projected steps from ``mu_0 = softmax(s)``.

    ``gamma`` is evaluated at ``mu_0`` (and later iterates) through ``gamma_fn``, which is
    required. Call as ``SPIGOTCrossEntropy.apply(scores, gamma_fn, step_size, inner_steps)``.
    See the module docstring and Mihaylova et al. (2020).

    Parameters
    ----------
    scores : Tensor of shape (n, K)
        Encoder scores ``s``.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : Tensor of shape (n, K)
        ``onehot(argmax(s))``.

    Examples
    --------
    The decoder's loss prefers latent 1; the encoder prefers latent 0:

    >>> import torch
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> gamma_fn = gamma_from_loss(lambda z: ((z - target) ** 2).sum(-1))
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = SPIGOTCrossEntropy.apply(scores, gamma_fn, 1.0, 1)
    >>> z.backward(gamma_fn(z))
    >>> scores.grad  # softmax(s) - proj(softmax(s) - gamma(softmax(s)))
    tensor([[ 0.8438, -0.8858,  0.0420]])
    """

    backward = _surrogate_backward(_spigot_ce_grad)


class SPIGOTExponentiatedGradient(_ArgmaxSurrogate):
    """SPIGOT-EG: ``dL/ds = softmax(s) - softmax(s_k)``, exponentiated-gradient steps.

    ``s_{t+1} = s_t - eta * gamma(softmax(s_t))`` from ``s_0 = s``; for ``k = 1`` this is
    ``softmax(s) - softmax(s - eta * gamma(mu_0))``. ``gamma_fn`` is required. Call as
    ``SPIGOTExponentiatedGradient.apply(scores, gamma_fn, step_size, inner_steps)``.
    See the module docstring and Mihaylova et al. (2020).

    Parameters
    ----------
    scores : Tensor of shape (n, K)
        Encoder scores ``s``.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : Tensor of shape (n, K)
        ``onehot(argmax(s))``.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> gamma_fn = gamma_from_loss(lambda z: ((z - target) ** 2).sum(-1))
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = SPIGOTExponentiatedGradient.apply(scores, gamma_fn, 1.0, 1)
    >>> z.backward(gamma_fn(z))
    >>> scores.grad  # softmax(s) - softmax(s - gamma(softmax(s)))
    tensor([[ 0.6636, -0.6610, -0.0026]])
    """

    backward = _surrogate_backward(_spigot_eg_grad)
