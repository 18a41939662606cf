"""Projective dependency trees: Eisner's chart for MAP (max-plus) and the log-partition (inside).

One chart routine serves both semirings. The chart is filled by span width, every span start
of every sentence at once, so a batch costs ``O(N)`` tensor operations of size ``O(B N^2)``.
MAP arcs and marginals are both read off as gradients of the chart's value with respect to the
scores: the gradient of a max is the indicator of the maximiser (back-tracking, [2]_), the
gradient of the log-partition is the arc marginals (inside-outside, [3]_).

The root takes exactly one child (single-root trees, as in treebanks): the words form one
complete span ``1..L`` whose head ``h`` is attached to the root, ``score = s[0, h] + C_left(1, h)
+ C_right(h, L)``.

References
----------
.. [1] Eisner (1996), "Three New Probabilistic Models for Dependency Parsing: An Exploration",
   COLING; the complete/incomplete span recursions as in McDonald, Crammer & Pereira (2005),
   "Online Large-Margin Training of Dependency Parsers", ACL, Fig. 1 (first-order Eisner).
.. [2] Mensch & Blondel (2018), "Differentiable Dynamic Programming for Structured Prediction and
   Attention", ICML, Prop. 2 (the gradient of a max-plus DP value is its argmax path).
.. [3] Eisner (2016), "Inside-Outside and Forward-Backward Algorithms Are Just Backprop",
   Workshop on Structured Prediction for NLP.
"""

from __future__ import annotations

import torch

from ..._utils.docstrings import fill_docstring
from ._arcs import TREE_PARAMETER_DOCS, arc_mask, check_arc_scores

__all__ = ["eisner", "projective_log_partition"]


def _max(x: torch.Tensor) -> torch.Tensor:
    # max(dim).values sends the whole gradient to one maximiser: back-tracking, even on ties.
    return x.max(dim=-1).values


def _logsumexp(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x, dim=-1)


def _chart_value(scores: torch.Tensor, lengths: torch.Tensor, reduce) -> torch.Tensor:
    """Value (B,) of the single-root projective chart under ``reduce`` (max or logsumexp).

    Charts are indexed ``[b, position, width]``: ``*_s`` by the span's start, ``*_e`` by its
    end, so the split points of all spans of one width line up as two slices.
    """
    batch, n = scores.shape[0], scores.shape[1] - 1
    # padding arcs are zeroed so that no nan/inf from them reaches a real span's gradient
    scores = scores.masked_fill(~arc_mask(lengths, n), 0.0)
    words = scores[:, 1:, 1:]  # words[b, h, m], word indices 0..n-1
    zeros = scores.new_zeros(batch, n, n)
    cr_s, cr_e, cl_s, cl_e, ir_s, il_e = (zeros.clone() for _ in range(6))
    for w in range(1, n):
        k = n - w
        # incomplete spans (i, i+w): split i..t | t+1..i+w, t = i..i+w-1
        split = reduce(cr_s[:, :k, :w] + cl_e[:, w:, :w].flip(-1))
        ir = split + torch.diagonal(words, offset=w, dim1=1, dim2=2)  # head i, modifier i+w
        il = split + torch.diagonal(words, offset=-w, dim1=1, dim2=2)  # head i+w, modifier i
        ir_s[:, :k, w] = ir
        il_e[:, w:, w] = il
        # complete spans: right-headed by i ends with incomplete (i, t) + complete (t, i+w)
        cr = reduce(ir_s[:, :k, 1 : w + 1] + cr_e[:, w:, :w].flip(-1))
        cl = reduce(cl_s[:, :k, :w] + il_e[:, w:, 1 : w + 1].flip(-1))
        cr_s[:, :k, w] = cr
        cr_e[:, w:, w] = cr
        cl_s[:, :k, w] = cl
        cl_e[:, w:, w] = cl
    heads = torch.arange(n, device=scores.device)
    last = lengths[:, None] - 1  # index of the last word
    width_right = (last - heads[None, :]).clamp(min=0)  # C_right(h, L) has width L - h
    right = cr_s.gather(2, width_right[:, :, None]).squeeze(2)
    left = torch.diagonal(cl_e, dim1=1, dim2=2)  # C_left(1, h) ends at h with width h
    total = scores[:, 0, 1:] + left + right
    total = total.masked_fill(heads[None, :] > last, float("-inf"))
    return reduce(total)


@fill_docstring(TREE_PARAMETER_DOCS)
def projective_log_partition(
    scores: torch.Tensor, lengths: torch.Tensor | None = None
) -> torch.Tensor:
    """Log-partition ``log Z(s) = log sum_z exp(<s, z>)`` over single-root projective trees.

    Differentiable: its gradient with respect to ``scores`` is the arc marginals.

    Parameters
    ----------
    {scores}
    {lengths}

    Returns
    -------
    torch.Tensor of shape (B,)

    References
    ----------
    Eisner (1996) and Eisner (2016); see the module docstring.

    Examples
    --------
    >>> import torch
    >>> projective_log_partition(torch.zeros(1, 3, 3))  # two trees over two words
    tensor([0.6931])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _inside(scores, lengths)


def _inside(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`projective_log_partition` on checked inputs (``lengths`` an int64 tensor)."""
    return _chart_value(scores, lengths, _logsumexp)


@fill_docstring(TREE_PARAMETER_DOCS)
def eisner(scores: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """Highest-scoring single-root projective tree, by Eisner's algorithm.

    Parameters
    ----------
    {scores}
    {lengths}

    Returns
    -------
    arcs : torch.Tensor of shape (B, N + 1, N + 1)
        0/1 arc indicators in the dtype of ``scores``, zero outside the real arcs. Not
        differentiable (use a surrogate from :mod:`ebmclassifier.latent.surrogates`).

    References
    ----------
    Eisner (1996); McDonald et al. (2005), Fig. 1; Mensch & Blondel (2018), Prop. 2.

    Examples
    --------
    >>> import torch
    >>> s = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]])
    >>> eisner(s)[0]
    tensor([[0., 1., 0.],
            [0., 0., 1.],
            [0., 0., 0.]])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _eisner(scores, lengths)


def _eisner(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`eisner` on checked inputs (``lengths`` an int64 tensor)."""
    with torch.enable_grad():
        leaf = scores.detach().requires_grad_(True)
        best = _chart_value(leaf, lengths, _max)
        (arcs,) = torch.autograd.grad(best.sum(), leaf)
    return arcs
