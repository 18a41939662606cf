"""Surrogate gradients for the MAP dependency tree: STE-I, SPIGOT, SPIGOT-CE, SPIGOT-EG, SFE.

The structured counterparts of :mod:`ebmclassifier.latent.surrogates`: the simplex becomes the
tree polytope ``M``, ``softmax`` becomes the arc marginals ``Marg(s)`` and the simplex
projection becomes SparseMAP. The forward pass is the MAP tree ``z_hat`` (Eisner or
Chu-Liu-Edmonds), whose true Jacobian is zero; the backward pass pulls the downstream gradient
``gamma = dL/dz`` back to a target ``z_k`` and returns ``dL/ds := z_0 - z_k`` ([1]_ Sec. 3-4):

============  ===========================  ====================================================
method        start point (z_0)            inner step, ``t = 0 .. k-1``
============  ===========================  ====================================================
STE-I         ``z_hat``                    ``z_{t+1} = z_t - eta * gamma(z_t)``
SPIGOT        ``z_hat``                    ``z_{t+1} = SparseMAP(z_t - eta * gamma(z_t))``
SPIGOT-CE     ``mu_0 = Marg(s)``           ``z_{t+1} = SparseMAP(z_t - eta * gamma(z_t))``
SPIGOT-EG     ``mu_0 = Marg(s)``           ``s_{t+1} = s_t - eta * gamma(Marg(s_t))``
============  ===========================  ====================================================

With ``k = 1``: STE-I gives ``eta * gamma``, SPIGOT ``z_hat - SparseMAP(z_hat - eta * gamma)``,
SPIGOT-CE ``Marg(s) - SparseMAP(Marg(s) - eta * gamma(Marg(s)))`` and SPIGOT-EG
``Marg(s) - Marg(s - eta * gamma(Marg(s)))``.

The score-function estimator samples ``z ~ p(z) = exp(<s, z> - log Z(s))`` exactly
(:func:`~ebmclassifier.latent.trees.sample_trees`) and returns ``(l(z) - b) * (z - Marg(s))``,
since ``d log p(z) / ds = z - Marg(s)`` ([2]_).

Conventions are those of :mod:`ebmclassifier.latent.surrogates`: ``gamma`` at ``z_hat`` is the
gradient arriving in ``backward``; elsewhere it comes from ``gamma_fn(z) -> dL/dz``, a closure the
caller builds once per step. Gradients outside the real arcs (padding, self-loops, arcs into the
root) are ignored and returned as zero.

References
----------
.. [1] Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT: Surrogate
   Gradients for Latent Structure Learning", EMNLP, Sec. 3-4.
.. [2] Williams (1992), "Simple statistical gradient-following algorithms for connectionist
   reinforcement learning", Machine Learning 8.
.. [3] Peng, Thomson & Smith (2018), "Backpropagating through Structured Argmax using a SPIGOT",
   ACL, Eq. 6.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

from ._tree_utils import arc_mask
from .tree_sparsemap import sparsemap_active_set
from .trees import sample_trees, tree_map, tree_marginals

__all__ = [
    "TreeSPIGOT",
    "TreeSPIGOTCrossEntropy",
    "TreeSPIGOTExponentiatedGradient",
    "TreeSTEIdentity",
    "TreeScoreFunction",
]

GammaFn = Callable[[torch.Tensor], torch.Tensor]


class _TreeContext:
    """What a pulled-back target needs: lengths, tree family, mask, step size, gamma_fn."""

    def __init__(self, lengths, projective, gamma_fn, step_size, inner_steps, n_words):
        self.lengths = lengths
        self.projective = projective
        self.gamma_fn = gamma_fn
        self.step_size = step_size
        self.inner_steps = inner_steps
        self.mask = arc_mask(lengths, n_words)

    def require_gamma_fn(self, method: str, why: str) -> None:
        if self.gamma_fn is None:
            raise ValueError(
                f"{method} needs gamma_fn (the downstream gradient at points other than the "
                f"MAP tree) {why}; got gamma_fn=None. Pass loss_fn to tree_latent."
            )

    def gamma(self, z: torch.Tensor) -> torch.Tensor:
        return self.gamma_fn(z).masked_fill(~self.mask, 0.0)

    def marginals(self, scores: torch.Tensor) -> torch.Tensor:
        return tree_marginals(scores, self.lengths, self.projective)

    def project(self, point: torch.Tensor) -> torch.Tensor:
        # the projection's value only: no Jacobian needed here
        mu = sparsemap_active_set(point.detach(), self.lengths, self.projective)[0]
        return mu.to(point.device, point.dtype)

    def steps(self, z: torch.Tensor, gamma: torch.Tensor, update) -> torch.Tensor:
        """``z <- update(z - eta * gamma(z))`` k times; ``gamma`` is gamma at the start."""
        for t in range(self.inner_steps):
            if t > 0:
                gamma = self.gamma(z)
            z = update(z - self.step_size * gamma)
        return z


def _ste_grad(tc, scores, z_hat, gamma):
    if tc.inner_steps > 1:
        tc.require_gamma_fn("STE-I", "when inner_steps > 1")
    return z_hat - tc.steps(z_hat, gamma, lambda z: z)


def _spigot_grad(tc, scores, z_hat, gamma):
    if tc.inner_steps > 1:
        tc.require_gamma_fn("SPIGOT", "when inner_steps > 1")
    return z_hat - tc.steps(z_hat, gamma, tc.project)


def _spigot_ce_grad(tc, scores, z_hat, gamma):
    tc.require_gamma_fn("SPIGOT-CE", "to evaluate gamma at Marg(s)")
    mu_0 = tc.marginals(scores)
    return mu_0 - tc.steps(mu_0, tc.gamma(mu_0), tc.project)


def _spigot_eg_grad(tc, scores, z_hat, gamma):
    tc.require_gamma_fn("SPIGOT-EG", "to evaluate gamma at Marg(s)")
    # mirror descent on the polytope is gradient descent on the scores
    s_k = scores
    for _ in range(tc.inner_steps):
        s_k = s_k - tc.step_size * tc.gamma(tc.marginals(s_k))
    return tc.marginals(scores) - tc.marginals(s_k)


def _surrogate_backward(pulled_back):
    """The ``backward`` of a tree surrogate whose ``dL/ds`` is ``pulled_back(...)``."""

    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return (None,) * 6
        scores, z_hat, lengths = ctx.saved_tensors
        tc = _TreeContext(
            lengths, ctx.projective, ctx.gamma_fn, ctx.step_size, ctx.inner_steps, ctx.n_words
        )
        gamma = grad_z.masked_fill(~tc.mask, 0.0)
        grad_s = pulled_back(tc, scores, z_hat, gamma)
        return (grad_s.masked_fill(~tc.mask, 0.0), *(None,) * 5)

    return staticmethod(backward)


class _TreeArgmaxSurrogate(torch.autograd.Function):
    """Forward: the MAP tree. Called as
    ``Method.apply(scores, lengths, projective, gamma_fn, step_size, inner_steps)``."""

    @staticmethod
    def forward(ctx, scores, lengths, projective, gamma_fn, step_size, inner_steps):
        z_hat = tree_map(scores, lengths, projective)
        ctx.projective = bool(projective)
        ctx.gamma_fn = gamma_fn
        ctx.step_size = float(step_size)
        ctx.inner_steps = int(inner_steps)
        ctx.n_words = scores.shape[1] - 1
        ctx.save_for_backward(scores, z_hat, lengths)
        return z_hat


class TreeSTEIdentity(_TreeArgmaxSurrogate):
    """STE-I over trees: ``dL/ds = z_hat - z_k``, plain steps from ``z_hat`` (``eta * gamma``).

    Call as ``TreeSTEIdentity.apply(scores, lengths, projective, gamma_fn, step_size,
    inner_steps)``. See the module docstring and Mihaylova et al. (2020), Sec. 3.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent.trees import arcs_to_heads
    >>> z = TreeSTEIdentity.apply(scores, torch.tensor([2]), True, None, 1.0, 1)
    >>> arcs_to_heads(z)  # the MAP tree
    tensor([[0, 1]])
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]  # eta * gamma = 2 (z_hat - preferred)
    tensor([[ 0.,  2., -2.],
            [ 0.,  0.,  2.],
            [ 0., -2.,  0.]])
    """

    backward = _surrogate_backward(_ste_grad)


class TreeSPIGOT(_TreeArgmaxSurrogate):
    """SPIGOT over trees: ``dL/ds = z_hat - z_k``, SparseMAP-projected steps from ``z_hat``.

    Call as ``TreeSPIGOT.apply(scores, lengths, projective, gamma_fn, step_size, inner_steps)``.
    See the module docstring, Mihaylova et al. (2020), Sec. 3, and Peng et al. (2018), Eq. 6.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable or None
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`); may be None when ``inner_steps == 1``.
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> z = TreeSPIGOT.apply(scores, torch.tensor([2]), True, None, 1.0, 1)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]  # z_hat - SparseMAP(z_hat - gamma) = z_hat - preferred
    tensor([[ 0.,  1., -1.],
            [ 0.,  0.,  1.],
            [ 0., -1.,  0.]])
    """

    backward = _surrogate_backward(_spigot_grad)


class TreeSPIGOTCrossEntropy(_TreeArgmaxSurrogate):
    """SPIGOT-CE over trees: ``dL/ds = Marg(s) - z_k``, projected steps from ``Marg(s)``.

    Call as ``TreeSPIGOTCrossEntropy.apply(scores, lengths, projective, gamma_fn, step_size,
    inner_steps)``; ``gamma_fn`` is required. See the module docstring and Mihaylova et al.
    (2020), Sec. 4.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> gamma_fn = gamma_from_loss(loss_fn)
    >>> z = TreeSPIGOTCrossEntropy.apply(scores, torch.tensor([2]), True, gamma_fn, 1.0, 1)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]
    tensor([[ 0.0000,  0.8808, -0.8808],
            [ 0.0000,  0.0000,  0.8808],
            [ 0.0000, -0.8808,  0.0000]])
    """

    backward = _surrogate_backward(_spigot_ce_grad)


class TreeSPIGOTExponentiatedGradient(_TreeArgmaxSurrogate):
    """SPIGOT-EG over trees: ``dL/ds = Marg(s) - Marg(s_k)``, ``s_{t+1} = s_t - eta gamma``.

    Call as ``TreeSPIGOTExponentiatedGradient.apply(scores, lengths, projective, gamma_fn,
    step_size, inner_steps)``; ``gamma_fn`` is required. See the module docstring and Mihaylova
    et al. (2020), Sec. 4.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Eisner and the projective polytope, or Chu-Liu-Edmonds and all trees.
    gamma_fn : callable
        ``gamma_fn(z) -> dL/dz`` at trees or polytope points ``z``
        (:func:`~ebmclassifier.latent.gamma_from_loss`).
    step_size : float
        ``eta``.
    inner_steps : int
        ``k``.

    Returns
    -------
    z_hat : torch.Tensor of shape (B, N + 1, N + 1)
        The MAP tree's 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent import gamma_from_loss
    >>> gamma_fn = gamma_from_loss(loss_fn)
    >>> z = TreeSPIGOTExponentiatedGradient.apply(scores, torch.tensor([2]), True, gamma_fn,
    ...                                           1.0, 1)
    >>> loss_fn(z).sum().backward()
    >>> scores.grad[0]
    tensor([[ 0.0000,  0.8744, -0.8744],
            [ 0.0000,  0.0000,  0.8744],
            [ 0.0000, -0.8744,  0.0000]])
    """

    backward = _surrogate_backward(_spigot_eg_grad)


class TreeScoreFunction(torch.autograd.Function):
    """Forward: an exact sample ``z ~ p(z)``; backward: ``(l(z) - b) * (z - Marg(s))``.

    Call as ``TreeScoreFunction.apply(scores, lengths, projective, loss_fn, baseline,
    generator)``. ``loss_fn(z)`` returns the per-sample losses (B,) at trees ``z``; it is
    evaluated without gradient in ``backward`` only. ``baseline`` is None or an object with a
    ``value`` tensor and an ``update(losses)`` method (read before it is updated, so a batch
    never serves as its own baseline), such as
    :class:`ebmclassifier.latent.score_function.RunningMeanBaseline`.

    Parameters
    ----------
    scores : torch.Tensor of shape (B, N + 1, N + 1)
        Arc scores ``s[b, head, modifier]``, root at index 0.
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    projective : bool
        Sample projective trees, or all trees.
    loss_fn : callable
        ``loss_fn(z) -> Tensor (B,)``.
    baseline : object or None
        Read, then updated with this batch's losses, in the backward pass.
    generator : torch.Generator or None
        Source of the samples.

    Returns
    -------
    z : torch.Tensor of shape (B, N + 1, N + 1)
        One sampled tree per sentence, 0/1 arcs.

    Examples
    --------
    The encoder's best tree is root -> 1 -> 2; the decoder's loss prefers root -> 2 -> 1:

    >>> import torch
    >>> from ebmclassifier.latent.trees import heads_to_arcs
    >>> scores = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]],
    ...                       requires_grad=True)  # scores[b, head, modifier]
    >>> preferred = heads_to_arcs(torch.tensor([[2, 0]]))
    >>> loss_fn = lambda z: ((z - preferred) ** 2).sum(dim=(1, 2))
    >>> from ebmclassifier.latent.score_function import RunningMeanBaseline
    >>> from ebmclassifier.latent.trees import tree_marginals
    >>> baseline, lengths = RunningMeanBaseline(), torch.tensor([2])
    >>> z = TreeScoreFunction.apply(scores, lengths, True, loss_fn, baseline,
    ...                             torch.Generator().manual_seed(0))
    >>> z.sum().item()  # a tree over two words has two arcs
    2.0
    >>> loss_fn(z).sum().backward()
    >>> losses = loss_fn(z.detach())[:, None, None]
    >>> expected = losses * (z.detach() - tree_marginals(scores, lengths))
    >>> torch.allclose(scores.grad, expected)  # the first batch has no baseline yet
    True
    >>> int(baseline.n_updates)
    1
    """

    @staticmethod
    def forward(ctx, scores, lengths, projective, loss_fn, baseline, generator):
        z = sample_trees(scores, lengths, projective, generator)
        ctx.projective = bool(projective)
        ctx.loss_fn = loss_fn
        ctx.baseline = baseline
        ctx.save_for_backward(scores, z, lengths)
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_z):
        if not ctx.needs_input_grad[0]:
            return (None,) * 6
        scores, z, lengths = ctx.saved_tensors
        with torch.no_grad():
            losses = ctx.loss_fn(z).detach().to(scores.dtype)
        b = 0.0 if ctx.baseline is None else ctx.baseline.value.to(scores.dtype)
        marginals = tree_marginals(scores, lengths, ctx.projective)
        grad_s = (losses - b)[:, None, None] * (z - marginals)
        if ctx.baseline is not None:
            ctx.baseline.update(losses)
        return (grad_s, *(None,) * 5)
