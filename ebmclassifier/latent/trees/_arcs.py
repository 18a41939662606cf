"""Shared conventions of the dependency-tree routines: validation, masks, heads <-> arcs.

A batch of ``B`` sentences padded to ``N`` words is scored by a tensor ``scores`` of shape
``(B, N + 1, N + 1)``: ``scores[b, h, m]`` is the score of the arc from head ``h`` to modifier
``m``, position 0 is the root and words are ``1 .. lengths[b]``. A tree is the indicator tensor
``arcs`` of the same shape (``arcs[b, h, m] = 1`` iff ``h`` is the head of ``m``) or the vector
``heads`` of shape ``(B, N)`` (``heads[b, m - 1]`` is the head of word ``m``, ``-1`` on padding).
Entries outside the real arcs (into the root, self-loops, padding) are ignored on input and zero
on output.
"""

from __future__ import annotations

import torch

__all__ = ["arc_mask", "arcs_to_heads", "check_arc_scores", "heads_to_arcs"]

#: The parameters of every tree algorithm, written once: their docstrings hold a line
#: ``{scores}`` / ``{lengths}`` that ``fill_docstring`` (``_utils/docstrings.py``) fills.
TREE_PARAMETER_DOCS = {
    "scores": """\
scores : torch.Tensor of shape (B, N + 1, N + 1)
    Arc scores ``s[b, head, modifier]``, root at index 0.""",
    "lengths": """\
lengths : torch.Tensor of shape (B,) or None
    Number of words per sentence (None: all ``N``).""",
}


def check_arc_scores(
    scores: torch.Tensor, lengths: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate ``scores`` (B, N+1, N+1) and ``lengths`` (B,); return lengths as an int64 tensor.

    ``lengths=None`` means every sentence has ``N`` words. A wrong type or dtype (scores that
    are not a floating-point tensor, lengths that are not integers) is a ``TypeError``, a wrong
    shape or value a ``ValueError``.
    """
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores must be a torch.Tensor, got {type(scores).__name__!r}.")
    if scores.dim() != 3 or scores.shape[1] != scores.shape[2] or scores.shape[1] < 2:
        raise ValueError(
            "scores must have shape (batch, n_words + 1, n_words + 1) with the root at index 0 "
            f"and at least one word; got shape {tuple(scores.shape)!r}. Add a batch dimension "
            "with scores.unsqueeze(0) for a single sentence."
        )
    if not scores.is_floating_point():
        raise TypeError(f"scores must be a floating-point tensor, got dtype {scores.dtype!r}.")
    batch, n_words = scores.shape[0], scores.shape[1] - 1
    if lengths is None:
        return scores, torch.full((batch,), n_words, dtype=torch.long, device=scores.device)
    lengths = torch.as_tensor(lengths, device=scores.device)
    if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must be an integer tensor, got dtype {lengths.dtype!r}.")
    if lengths.shape != (batch,):
        raise ValueError(
            f"lengths must have shape ({batch},) (one length per sentence); got shape "
            f"{tuple(lengths.shape)!r}."
        )
    lengths = lengths.long()
    if batch and (int(lengths.min()) < 1 or int(lengths.max()) > n_words):
        raise ValueError(
            f"lengths must lie in [1, {n_words}] (the padded number of words); got "
            f"min {int(lengths.min())!r} and max {int(lengths.max())!r}."
        )
    return scores, lengths


def arc_mask(lengths: torch.Tensor, n_words: int) -> torch.Tensor:
    """Boolean (B, N+1, N+1) mask of the real arcs: ``0 <= h <= L``, ``1 <= m <= L``, ``h != m``.

    Parameters
    ----------
    lengths : torch.Tensor of shape (B,), int
        Number of words per sentence.
    n_words : int
        ``N``, the padded number of words.

    Returns
    -------
    torch.Tensor of shape (B, N + 1, N + 1), bool
        True where ``[b, h, m]`` is an arc that a tree of sentence ``b`` may hold.

    Examples
    --------
    >>> import torch
    >>> arc_mask(torch.tensor([1]), 2)[0].int()
    tensor([[0, 1, 0],
            [0, 0, 0],
            [0, 0, 0]], dtype=torch.int32)
    """
    pos = torch.arange(n_words + 1, device=lengths.device)
    inside = pos[None, :] <= lengths[:, None]  # (B, N+1), root included
    heads_ok = inside[:, :, None]
    mods_ok = (inside & (pos[None, :] > 0))[:, None, :]
    not_self = pos[:, None] != pos[None, :]
    return heads_ok & mods_ok & not_self


def heads_to_arcs(heads: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Arc indicators (B, N+1, N+1) from heads (B, N) (``-1`` marks padding).

    Parameters
    ----------
    heads : torch.Tensor of shape (B, N), int
        ``heads[b, m - 1]`` is the head of word ``m`` (0 the root), ``-1`` on padding.
    dtype : torch.dtype, default=torch.float32

    Returns
    -------
    arcs : torch.Tensor of shape (B, N + 1, N + 1)
        ``arcs[b, h, m] = 1`` iff ``h`` is the head of ``m``.

    Examples
    --------
    >>> import torch
    >>> heads_to_arcs(torch.tensor([[2, 0]]))[0]
    tensor([[0., 0., 1.],
            [0., 0., 0.],
            [0., 1., 0.]])
    """
    batch, n_words = heads.shape
    arcs = torch.zeros(batch, n_words + 1, n_words + 1, dtype=dtype, device=heads.device)
    b, m = torch.nonzero(heads >= 0, as_tuple=True)
    arcs[b, heads[b, m], m + 1] = 1
    return arcs


def arcs_to_heads(arcs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """Heads (B, N) from arc indicators (B, N+1, N+1): the argmax head of each word.

    Also reads a relaxed tree (marginals, SparseMAP), giving each word its most likely head.

    Parameters
    ----------
    arcs : torch.Tensor of shape (B, N + 1, N + 1)
    lengths : torch.Tensor of shape (B,), optional
        Number of words per sentence; padding words (beyond it) get ``-1``.

    Returns
    -------
    heads : torch.Tensor of shape (B, N), int64

    Examples
    --------
    >>> import torch
    >>> arcs_to_heads(heads_to_arcs(torch.tensor([[2, 0, -1]])), torch.tensor([2]))
    tensor([[ 2,  0, -1]])
    """
    heads = arcs[:, :, 1:].argmax(dim=1)
    if lengths is not None:
        pos = torch.arange(1, arcs.shape[1], device=arcs.device)
        heads = heads.masked_fill(pos[None, :] > lengths[:, None].to(arcs.device), -1)
    return heads
