"""Surrogate gradients of the MAP structure, over any polytope: STE-I, SPIGOT, SPIGOT-CE/-EG.

The forward pass of every method here is the MAP structure ``z_hat = argmax_{z in Z} <s, z>``
(the one-hot argmax of a categorical latent, the best tree of a sentence), whose true Jacobian
is zero. The backward pass replaces it by "pulling back" the downstream gradient
``gamma = dL/dz`` to a target ``z_k`` that the decoder would prefer, and returns the gradient
of a loss that moves the encoder towards it [1]_. Each method is written once, over the oracles
of a :class:`~ebmclassifier.latent.polytope.Polytope` ``M`` (``Marg`` = its marginals, ``Pi`` =
its Euclidean projection):

============  ===========================  ====================================================
method        start point (z_0)            inner step, ``t = 0 .. k-1``
============  ===========================  ====================================================
STE-I         ``z_hat``                    ``z_{t+1} = z_t - eta * gamma(z_t)``
SPIGOT        ``z_hat``                    ``z_{t+1} = Pi(z_t - eta * gamma(z_t))``
SPIGOT-CE     ``mu_0 = Marg(s)``           ``z_{t+1} = Pi(z_t - eta * gamma(z_t))``
SPIGOT-EG     ``mu_0 = Marg(s)``           ``s_{t+1} = s_t - eta * gamma(Marg(s_t))``
============  ===========================  ====================================================

and ``dL/ds := z_0 - z_k`` (for SPIGOT-EG, ``Marg(s) - Marg(s_k)``: mirror descent on the
polytope is gradient descent on the scores). With ``k = 1`` these are the paper's equations:
STE-I gives ``eta * gamma`` (identity straight-through), SPIGOT ``z_hat - Pi(z_hat - eta*gamma)``
(the perceptron-loss gradient towards the pulled-back target), SPIGOT-CE
``Marg(s) - Pi(Marg(s) - eta * gamma(mu_0))`` (the cross-entropy gradient towards it) and
SPIGOT-EG ``Marg(s) - Marg(s - eta * gamma(mu_0))``. On the simplex
``Marg`` is softmax and ``Pi`` sparsemax; on trees, the arc marginals and SparseMAP
(:class:`~ebmclassifier.latent.trees.polytope.TreePolytope`).

Conventions
-----------
``gamma`` at ``z_hat`` is the gradient that arrives in ``backward`` (the chain rule's own value).
Gradients at any other point come from ``gamma_fn(z) -> dL/dz``, a closure over the current
decoder, inputs and targets that the caller builds once per training step; it must compute the
gradient of the *same* loss whose gradient arrives at ``z`` (see
:func:`ebmclassifier.latent.gamma_from_loss`). It is called inside ``backward`` only, so
validation passes, which never call ``backward``, pay nothing for it. ``eta`` multiplies gamma
as given: for a batch-mean loss, gamma of a sample is 1/n of its own gradient, so callers that want
a per-sample step size pass the sum of per-sample losses and rescale the encoder's gradient
(:class:`ebmclassifier.latent.classifier.LatentStructureClassifier` does this). Gradients on
coordinates that are no part of a sample's structures (a tree's padding) are ignored and
returned as zero (:meth:`~ebmclassifier.latent.polytope.Polytope.restrict`).

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

from .._utils.docstrings import fill_docstring
from .polytope import PARAMETER_DOCS, Polytope

#: The type of ``gamma_fn``: latent points (B, ...) -> the downstream gradient ``dL/dz`` there.
GammaFn = Callable[[torch.Tensor], torch.Tensor]

__all__ = [
    "GammaFn",
    "STEIdentity",
    "SPIGOT",
    "SPIGOTCrossEntropy",
    "SPIGOTExponentiatedGradient",
]


class _PullBack:
    """What a pulled-back target needs: the polytope and the batch's sizes, gamma_fn, eta, k."""

    def __init__(self, polytope, sizes, gamma_fn, step_size, inner_steps):
        self.polytope = polytope
        self.sizes = sizes
        self.gamma_fn = gamma_fn
        self.step_size = step_size
        self.inner_steps = inner_steps

    def require_gamma_fn(self, method: str, why: str) -> None:
        if self.gamma_fn is None:
            raise ValueError(
                f"{method} needs gamma_fn (the downstream gradient at points other than the "
                f"MAP structure) {why}; got gamma_fn=None. Build one with "
                "ebmclassifier.latent.gamma_from_loss (or pass loss_fn to the latent function)."
            )

    def gamma(self, z: torch.Tensor) -> torch.Tensor:
        return self.polytope.restrict(self.gamma_fn(z), self.sizes)

    def marginals(self, scores: torch.Tensor) -> torch.Tensor:
        return self.polytope.marginals(scores, self.sizes)

    def steps(self, z: torch.Tensor, gamma: torch.Tensor, project: bool) -> torch.Tensor:
        """``z <- Pi(z - eta * gamma(z))`` (or without ``Pi``) k times; ``gamma`` is at ``z``."""
        for t in range(self.inner_steps):
            if t > 0:
                gamma = self.gamma(z)
            z = z - self.step_size * gamma
            if project:
                z = self.polytope.project(z, self.sizes)
        return z


def _ste_grad(pb: _PullBack, scores, z_hat, gamma):
    if pb.inner_steps > 1:
        pb.require_gamma_fn("STE-I", "when inner_steps > 1")
    return z_hat - pb.steps(z_hat, gamma, project=False)


def _spigot_grad(pb: _PullBack, scores, z_hat, gamma):
    if pb.inner_steps > 1:
        pb.require_gamma_fn("SPIGOT", "when inner_steps > 1")
    return z_hat - pb.steps(z_hat, gamma, project=True)


def _spigot_ce_grad(pb: _PullBack, scores, z_hat, gamma):
    pb.require_gamma_fn("SPIGOT-CE", "to evaluate gamma at the marginals Marg(s)")
    mu_0 = pb.marginals(scores)
    return mu_0 - pb.steps(mu_0, pb.gamma(mu_0), project=True)


def _spigot_eg_grad(pb: _PullBack, scores, z_hat, gamma):
    pb.require_gamma_fn("SPIGOT-EG", "to evaluate gamma at the marginals Marg(s)")
    # Mirror descent on the polytope is gradient descent on the scores: the same points as
    # iterating on log(mu), and no log(0).
    s_k = scores
    for _ in range(pb.inner_steps):
        s_k = s_k - pb.step_size * pb.gamma(pb.marginals(s_k))
    return pb.marginals(scores) - pb.marginals(s_k)


def _surrogate_backward(pulled_back):
    """The ``backward`` of an argmax surrogate whose ``dL/ds`` is ``pulled_back(...)``."""

    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return (None,) * 6
        scores, z_hat, sizes = ctx.saved_tensors
        polytope = ctx.polytope
        pb = _PullBack(polytope, sizes, ctx.gamma_fn, ctx.step_size, ctx.inner_steps)
        grad_s = pulled_back(pb, scores, z_hat, polytope.restrict(grad_z, sizes))
        return (polytope.restrict(grad_s, sizes), *(None,) * 5)

    return staticmethod(backward)


class _ArgmaxSurrogate(torch.autograd.Function):
    """Forward the MAP structure; each subclass sets ``backward`` to its pulled-back target.

    Called as ``Method.apply(scores, gamma_fn, step_size, inner_steps, polytope, sizes)``.
    """

    @staticmethod
    def forward(
        ctx,
        scores: torch.Tensor,
        gamma_fn: GammaFn | None,
        step_size: float,
        inner_steps: int,
        polytope: Polytope,
        sizes: torch.Tensor | None,
    ) -> torch.Tensor:
        z_hat = polytope.map(scores, sizes)
        ctx.polytope = polytope
        ctx.gamma_fn = gamma_fn
        ctx.step_size = float(step_size)
        ctx.inner_steps = int(inner_steps)
        ctx.save_for_backward(scores, z_hat, sizes)
        return z_hat


@fill_docstring(PARAMETER_DOCS)
class STEIdentity(_ArgmaxSurrogate):
    """STE-I: ``dL/ds = z_hat - z_k``, plain gradient steps from ``z_hat`` (``eta*gamma`` if k=1).

    Call as ``STEIdentity.apply(scores, gamma_fn, step_size, inner_steps, polytope, sizes)``.
    See the module docstring and Mihaylova et al. (2020).

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        Encoder scores ``s``, e.g. (n, K) on the simplex.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None
        when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.
    {polytope}
    {sizes}

    Returns
    -------
    z_hat : Tensor of shape (B, ...)
        The MAP structure, ``onehot(argmax(s))`` on the simplex.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = STEIdentity.apply(scores, None, 1.0, 1, Simplex(), None)
    >>> z
    tensor([[1., 0., 0.]], grad_fn=<STEIdentityBackward>)
    >>> z.backward(torch.tensor([[2.0, -2.0, 0.0]]))  # gamma = dL/dz at z_hat
    >>> scores.grad  # eta * gamma, passed straight through
    tensor([[ 2., -2.,  0.]])
    """

    backward = _surrogate_backward(_ste_grad)


@fill_docstring(PARAMETER_DOCS)
class SPIGOT(_ArgmaxSurrogate):
    """SPIGOT: ``dL/ds = z_hat - z_k``, projected gradient steps from ``z_hat``.

    Call as ``SPIGOT.apply(scores, gamma_fn, step_size, inner_steps, polytope, sizes)``. See
    the module docstring, Mihaylova et al. (2020) and Peng et al. (2018).

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        Encoder scores ``s``, e.g. (n, K) on the simplex.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None
        when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.
    {polytope}
    {sizes}

    Returns
    -------
    z_hat : Tensor of shape (B, ...)
        The MAP structure, ``onehot(argmax(s))`` on the simplex.

    Examples
    --------
    With ``gamma = (2, -2, 0)`` the pulled-back target ``proj(z_hat - gamma)`` is the vertex
    ``(0, 1, 0)``:

    >>> import torch
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = SPIGOT.apply(scores, None, 1.0, 1, Simplex(), None)
    >>> z.backward(torch.tensor([[2.0, -2.0, 0.0]]))
    >>> scores.grad  # z_hat - proj(z_hat - gamma)
    tensor([[ 1., -1.,  0.]])
    """

    backward = _surrogate_backward(_spigot_grad)


@fill_docstring(PARAMETER_DOCS)
class SPIGOTCrossEntropy(_ArgmaxSurrogate):
    """SPIGOT-CE: ``dL/ds = mu_0 - z_k``, projected steps from ``mu_0 = Marg(s)``.

    ``gamma`` is evaluated at ``mu_0`` (and later iterates) through ``gamma_fn``, which is
    required. Call as
    ``SPIGOTCrossEntropy.apply(scores, gamma_fn, step_size, inner_steps, polytope, sizes)``.
    See the module docstring and Mihaylova et al. (2020).

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        Encoder scores ``s``, e.g. (n, K) on the simplex.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.
    {polytope}
    {sizes}

    Returns
    -------
    z_hat : Tensor of shape (B, ...)
        The MAP structure, ``onehot(argmax(s))`` on the simplex.

    Examples
    --------
    The decoder's loss prefers latent 1; the encoder prefers latent 0:

    >>> import torch
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> gamma_fn = gamma_from_loss(lambda z: ((z - target) ** 2).sum(-1))
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = SPIGOTCrossEntropy.apply(scores, gamma_fn, 1.0, 1, Simplex(), None)
    >>> z.backward(gamma_fn(z))
    >>> scores.grad  # softmax(s) - proj(softmax(s) - gamma(softmax(s)))
    tensor([[ 0.8438, -0.8858,  0.0420]])
    """

    backward = _surrogate_backward(_spigot_ce_grad)


@fill_docstring(PARAMETER_DOCS)
class SPIGOTExponentiatedGradient(_ArgmaxSurrogate):
    """SPIGOT-EG: ``dL/ds = Marg(s) - Marg(s_k)``, exponentiated-gradient steps.

    ``s_{t+1} = s_t - eta * gamma(Marg(s_t))`` from ``s_0 = s``; for ``k = 1`` this is
    ``Marg(s) - Marg(s - eta * gamma(mu_0))``, with ``Marg = softmax`` on the simplex.
    ``gamma_fn`` is required. Call as ``SPIGOTExponentiatedGradient.apply(scores, gamma_fn,
    step_size, inner_steps, polytope, sizes)``. See the module docstring and Mihaylova et al.
    (2020).

    Parameters
    ----------
    scores : Tensor of shape (B, ...)
        Encoder scores ``s``, e.g. (n, K) on the simplex.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.
    {polytope}
    {sizes}

    Returns
    -------
    z_hat : Tensor of shape (B, ...)
        The MAP structure, ``onehot(argmax(s))`` on the simplex.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> from ebmclassifier.latent.categorical.simplex import Simplex
    >>> target = torch.tensor([[0.0, 1.0, 0.0]])
    >>> gamma_fn = gamma_from_loss(lambda z: ((z - target) ** 2).sum(-1))
    >>> scores = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> z = SPIGOTExponentiatedGradient.apply(scores, gamma_fn, 1.0, 1, Simplex(), None)
    >>> z.backward(gamma_fn(z))
    >>> scores.grad  # softmax(s) - softmax(s - gamma(softmax(s)))
    tensor([[ 0.6636, -0.6610, -0.0026]])
    """

    backward = _surrogate_backward(_spigot_eg_grad)
