"""MAP, log-partition, marginals and sampling of dependency trees, projective or not.

The public entry points of the tree routines, dispatching on ``projective``. Each checks its
arguments once and runs a private core that trusts them; the tree polytope
(:class:`~ebmclassifier.latent.trees.polytope.TreePolytope`) calls the cores directly. The
algorithms of each family are listed in :mod:`ebmclassifier.latent.trees`.

Conventions (shapes, root, padding, single-root trees) are those of
:mod:`ebmclassifier.latent.trees._arcs`: ``scores[b, head, modifier]`` of shape
``(B, N + 1, N + 1)`` with the root at index 0 and ``lengths[b]`` real words.
"""

from __future__ import annotations

import torch

from ..._utils.docstrings import fill_docstring
from ..polytope import draw_rows
from ._arcs import TREE_PARAMETER_DOCS, check_arc_scores, heads_to_arcs
from .nonprojective import _chu_liu_edmonds, _matrix_tree
from .projective import _eisner, _inside

__all__ = ["sample_trees", "tree_log_partition", "tree_map", "tree_marginals"]


@fill_docstring(TREE_PARAMETER_DOCS)
def tree_map(
    scores: torch.Tensor, lengths: torch.Tensor | None = None, projective: bool = True
) -> torch.Tensor:
    """Highest-scoring single-root tree per sentence: ``argmax_z <s, z>``.

    Parameters
    ----------
    {scores}
    {lengths}
    projective : bool, default=True
        Eisner's algorithm if True, Chu-Liu-Edmonds otherwise.

    Returns
    -------
    arcs : torch.Tensor of shape (B, N + 1, N + 1)
        0/1 arc indicators, zero outside the real arcs; not differentiable.

    Examples
    --------
    >>> import torch
    >>> from ebmclassifier.latent.trees import arcs_to_heads
    >>> s = torch.zeros(1, 3, 3)
    >>> s[0, 0, 2] = s[0, 2, 1] = 1.0
    >>> arcs_to_heads(tree_map(s))
    tensor([[2, 0]])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _map(scores, lengths, projective)


def _map(scores: torch.Tensor, lengths: torch.Tensor, projective: bool) -> torch.Tensor:
    return _eisner(scores, lengths) if projective else _chu_liu_edmonds(scores, lengths)


@fill_docstring(TREE_PARAMETER_DOCS)
def tree_log_partition(
    scores: torch.Tensor, lengths: torch.Tensor | None = None, projective: bool = True
) -> torch.Tensor:
    """``log Z(s) = log sum_z exp(<s, z>)`` over single-root trees, shape (B,); differentiable.

    Parameters
    ----------
    {scores}
    {lengths}
    projective : bool, default=True
        Inside algorithm if True, matrix-tree theorem otherwise.

    Returns
    -------
    torch.Tensor of shape (B,)

    Examples
    --------
    >>> import torch
    >>> tree_log_partition(torch.zeros(1, 4, 4), projective=False).exp().round()
    tensor([9.])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _log_partition(scores, lengths, projective)


def _log_partition(scores: torch.Tensor, lengths: torch.Tensor, projective: bool) -> torch.Tensor:
    return _inside(scores, lengths) if projective else _matrix_tree(scores, lengths)


@fill_docstring(TREE_PARAMETER_DOCS)
def tree_marginals(
    scores: torch.Tensor, lengths: torch.Tensor | None = None, projective: bool = True
) -> torch.Tensor:
    """Arc marginals ``mu = E_{p(z) ~ exp<s, z>}[z] = grad log Z(s)``, shape (B, N + 1, N + 1).

    Differentiable (through a second backward) when ``scores`` requires grad and grad mode is
    on, so it can serve as the "marginals" relaxation; otherwise computed without a graph.

    Parameters
    ----------
    {scores}
    {lengths}
    projective : bool, default=True
        Inside-outside if True, matrix-tree theorem otherwise.

    Returns
    -------
    torch.Tensor of shape (B, N + 1, N + 1)
        Zero outside the real arcs; each word's incoming marginals sum to one.

    References
    ----------
    Eisner (2016), "Inside-Outside and Forward-Backward Algorithms Are Just Backprop";
    Koo et al. (2007), Sec. 3.

    Examples
    --------
    >>> import torch
    >>> tree_marginals(torch.zeros(1, 3, 3))[0]
    tensor([[0.0000, 0.5000, 0.5000],
            [0.0000, 0.0000, 0.5000],
            [0.0000, 0.5000, 0.0000]])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _marginals(scores, lengths, projective)


def _marginals(scores: torch.Tensor, lengths: torch.Tensor, projective: bool) -> torch.Tensor:
    create_graph = scores.requires_grad and torch.is_grad_enabled()
    with torch.enable_grad():
        leaf = scores if create_graph else scores.detach().requires_grad_(True)
        log_z = _log_partition(leaf, lengths, projective)
        (marginals,) = torch.autograd.grad(log_z.sum(), leaf, create_graph=create_graph)
    return marginals


@fill_docstring(TREE_PARAMETER_DOCS)
def sample_trees(
    scores: torch.Tensor,
    lengths: torch.Tensor | None = None,
    projective: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Exact samples ``z ~ p(z) = exp(<s, z> - log Z(s))``, one tree per sentence.

    Draws the head of each word in turn from its marginal given the heads already drawn (the
    chain rule of probability; conditioning clamps the drawn arcs). Exact for both tree
    families, at the cost of ``N`` marginal computations per batch.

    Parameters
    ----------
    {scores}
    {lengths}
    projective : bool, default=True
        Sample projective trees if True, non-projective trees otherwise.
    generator : torch.Generator, optional
        Source of randomness, on the device of ``scores``.

    Returns
    -------
    arcs : torch.Tensor of shape (B, N + 1, N + 1)
        0/1 arc indicators, zero outside the real arcs; not differentiable.

    Examples
    --------
    >>> import torch
    >>> z = sample_trees(torch.zeros(4, 3, 3), generator=torch.Generator().manual_seed(0))
    >>> z.sum(dim=(1, 2))
    tensor([2., 2., 2., 2.])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _sample(scores, lengths, projective, generator)


def _sample(scores, lengths, projective, generator=None) -> torch.Tensor:
    n = scores.shape[1] - 1
    # a large finite penalty rather than -inf keeps the charts free of nan
    forbid = -1e4 if scores.dtype != torch.float64 else -1e8
    work = scores.detach().clone()
    heads = torch.full((scores.shape[0], n), -1, dtype=torch.long, device=scores.device)
    rows = torch.arange(n + 1, device=scores.device)
    for m in range(1, n + 1):
        marg = _marginals(work, lengths, projective)[:, :, m]  # (B, N+1) over heads
        padding = (lengths < m)[:, None]
        probs = torch.where(padding, torch.ones_like(marg), marg.clamp(min=0.0))
        head = draw_rows(probs, generator)[:, 0]  # uniform where the scores are not finite
        heads[:, m - 1] = torch.where(padding[:, 0], -1, head)
        clamp = rows[None, :] != head[:, None]
        work[:, :, m] = work[:, :, m].masked_fill(clamp, forbid)
    return heads_to_arcs(heads, dtype=scores.dtype)
