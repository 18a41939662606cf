"""Non-projective dependency trees: Chu-Liu-Edmonds (MAP) and the matrix-tree theorem (log Z).

Both are restricted to single-root trees (the root takes exactly one child), as the projective
routines are, so the two families differ only in projectivity.

References
----------
.. [1] Chu & Liu (1965), "On the Shortest Arborescence of a Directed Graph", Science Sinica;
   Edmonds (1967), "Optimum Branchings", J. Res. NBS 71B. The contraction algorithm as in
   McDonald, Pereira, Ribarov & Hajic (2005), "Non-projective Dependency Parsing using Spanning
   Tree Algorithms", HLT-EMNLP, Fig. 3.
.. [2] Koo, Globerson, Carreras & Collins (2007), "Structured Prediction Models via the
   Matrix-Tree Theorem", EMNLP, Sec. 3.3 (single-root Laplacian: the first row of the word
   Laplacian replaced by the root scores).
.. [3] Zmigrod, Vieira & Cotterell (2020), "Please Mind the Root: Decoding Arborescences for
   Dependency Parsing", EMNLP (the single-root constraint in decoding).
"""

from __future__ import annotations

import numpy as np
import torch

from ..._utils.docstrings import fill_docstring
from ._arcs import TREE_PARAMETER_DOCS, arc_mask, check_arc_scores

__all__ = ["chu_liu_edmonds", "nonprojective_log_partition"]


def _find_cycle(heads: np.ndarray) -> np.ndarray | None:
    """Nodes of one cycle of the head graph ``heads`` (``heads[0] = -1``), or None."""
    n1 = len(heads)
    state = np.zeros(n1, dtype=np.int8)  # 0 unseen, 1 on the current path, 2 finished
    state[0] = 2
    for start in range(1, n1):
        path = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node]
        if state[node] == 1:  # walked back into the current path: a cycle
            return np.array(path[path.index(node) :])
        state[path] = 2
    return None


def _max_arborescence(s: np.ndarray) -> np.ndarray:
    """Heads of the maximum spanning arborescence rooted at 0 of the dense graph ``s[h, m]``.

    Forbidden arcs are ``-inf``; column 0 and the diagonal must be ``-inf``.
    """
    heads = s.argmax(axis=0)
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    # contract the cycle into one node c (the last index of the smaller graph)
    in_cycle = np.zeros(len(heads), dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)  # rest[0] == 0: the root is never on a cycle
    m = len(rest)
    t = np.full((m + 1, m + 1), -np.inf)
    t[:m, :m] = s[np.ix_(rest, rest)]
    # entering v from u breaks the cycle arc into v: gain s[u, v] - s[head(v), v]
    enter = s[np.ix_(rest, cycle)] - s[heads[cycle], cycle][None, :]
    enter_at = enter.argmax(axis=1)
    t[:m, m] = enter.max(axis=1)
    leave = s[np.ix_(cycle, rest)]
    leave_from = leave.argmax(axis=0)
    t[m, :m] = leave.max(axis=0)
    sub = _max_arborescence(t)
    # expand: the cycle keeps its arcs except the one into the entered node
    out = heads.copy()
    for i in range(1, m):
        h = sub[i]
        out[rest[i]] = rest[h] if h < m else cycle[leave_from[i]]
    u = sub[m]
    out[cycle[enter_at[u]]] = rest[u]
    return out


def _single_root_heads(s: np.ndarray) -> np.ndarray:
    """Best single-root tree of one sentence ``s`` (L+1, L+1): heads (L + 1,) with heads[0] = -1.

    Every root arc pays a penalty larger than any difference between two trees' scores, so
    trees with one root arc beat all others and, among them, the order is unchanged.
    """
    s = s.copy()
    n = s.shape[0] - 1
    real = ~np.eye(n + 1, dtype=bool)
    real[:, 0] = False
    spread = s[real].max() - s[real].min()
    s[0, 1:] -= 1.0 + 2.0 * n * spread
    s[~real] = -np.inf
    return _max_arborescence(s)


@fill_docstring(TREE_PARAMETER_DOCS)
def chu_liu_edmonds(scores: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """Highest-scoring single-root non-projective tree, by Chu-Liu-Edmonds.

    Runs on the CPU in float64, one sentence at a time (a recursive contraction, ``O(L^3)`` at
    worst); the result returns to the device of ``scores``.

    Parameters
    ----------
    {scores}
    {lengths}

    Returns
    -------
    arcs : torch.Tensor of shape (B, N + 1, N + 1)
        0/1 arc indicators in the dtype of ``scores``, zero outside the real arcs.

    References
    ----------
    Chu & Liu (1965); Edmonds (1967); McDonald et al. (2005), Fig. 3; Zmigrod et al. (2020).

    Examples
    --------
    >>> import torch
    >>> s = torch.tensor([[[0.0, 1.0, 3.0], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0]]])
    >>> chu_liu_edmonds(s)[0]
    tensor([[0., 0., 1.],
            [0., 0., 0.],
            [0., 1., 0.]])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _chu_liu_edmonds(scores, lengths)


def _chu_liu_edmonds(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`chu_liu_edmonds` on checked inputs (``lengths`` an int64 tensor)."""
    values = scores.detach().to("cpu", torch.float64).numpy()
    arcs = np.zeros(values.shape)
    for b, length in enumerate(lengths.tolist()):
        heads = _single_root_heads(values[b, : length + 1, : length + 1])
        arcs[b, heads[1:], np.arange(1, length + 1)] = 1.0
    return torch.as_tensor(arcs, dtype=scores.dtype, device=scores.device)


@fill_docstring(TREE_PARAMETER_DOCS)
def nonprojective_log_partition(
    scores: torch.Tensor, lengths: torch.Tensor | None = None
) -> torch.Tensor:
    """Log-partition over single-root non-projective trees, by the matrix-tree theorem.

    ``Z = det(L_hat)``, where ``L_hat`` is the Laplacian of the words, ``L[m, m] = sum_h
    exp(s[h, m])`` over word heads ``h`` and ``L[h, m] = -exp(s[h, m])``, with its first row
    replaced by the root scores ``exp(s[0, m])`` (Koo et al. 2007, Sec. 3.3). Each column is
    scaled by ``exp(-max_h s[h, m])`` for stability and the determinant is taken in float64
    whatever the dtype of ``scores`` (the result has that dtype), so a word's arc scores may
    differ by far more than float32's ``exp`` allows (~87). It can still cancel to ``-inf``
    when the best single-root tree needs arcs some hundreds below each word's best head.
    Padding words get an identity block.
    Differentiable: the gradient with respect to ``scores`` is the arc marginals.

    Parameters
    ----------
    {scores}
    {lengths}

    Returns
    -------
    torch.Tensor of shape (B,)

    References
    ----------
    Koo et al. (2007), Sec. 3.3.

    Examples
    --------
    >>> import torch
    >>> nonprojective_log_partition(torch.zeros(1, 4, 4)).exp().round()  # 3 ** 2 trees
    tensor([9.])
    """
    scores, lengths = check_arc_scores(scores, lengths)
    return _matrix_tree(scores, lengths)


def _matrix_tree(scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`nonprojective_log_partition` on checked inputs (``lengths`` an int64 tensor)."""
    n = scores.shape[1] - 1
    mask = arc_mask(lengths, n)
    # In float64: after the per-modifier shift the other arcs weigh exp(s - max), which
    # underflow float32 (and make the Laplacian singular) once the spread passes ~87.
    masked = scores.to(torch.float64).masked_fill(~mask, float("-inf"))
    shift = masked.detach().amax(dim=1, keepdim=True)  # (B, 1, N+1): per-modifier max
    shift = shift.masked_fill(~torch.isfinite(shift), 0.0)
    weights = torch.exp(masked - shift).masked_fill(~mask, 0.0)
    words = weights[:, 1:, 1:]
    padding = ~mask[:, 0, 1:]  # words beyond the length
    diagonal = words.sum(dim=1) + padding.to(weights.dtype)
    laplacian = torch.diag_embed(diagonal) - words
    laplacian = torch.cat([weights[:, :1, 1:], laplacian[:, 1:, :]], dim=1)
    log_z = torch.linalg.slogdet(laplacian).logabsdet + shift[:, 0, 1:].sum(dim=1)
    return log_z.to(scores.dtype)
