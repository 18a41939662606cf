"""Brute-force enumeration of dependency trees: the reference the tree routines are tested against.

Trees are listed by trying every head assignment and keeping those that are single-root,
acyclic and, for the projective family, projective (every word between a head and its modifier
descends from the head). Independent of the chart algorithms by construction.
"""

import itertools
from functools import cache

import numpy as np
import pytest
import torch


def _is_tree(heads):
    """heads[m] for m = 1..n (heads[0] unused); single root and no cycle."""
    n = len(heads) - 1
    if sum(1 for m in range(1, n + 1) if heads[m] == 0) != 1:
        return False
    for m in range(1, n + 1):
        seen, node = set(), m
        while node != 0:
            if node in seen:
                return False
            seen.add(node)
            node = heads[node]
    return True


def _descends(heads, node, ancestor):
    while node != 0:
        if node == ancestor:
            return True
        node = heads[node]
    return ancestor == 0


def _is_projective(heads):
    n = len(heads) - 1
    for m in range(1, n + 1):
        h = heads[m]
        lo, hi = sorted((h, m))
        if any(not _descends(heads, k, h) for k in range(lo + 1, hi)):
            return False
    return True


@cache
def enumerate_trees(n_words, projective):
    """All single-root trees over ``n_words`` words as arc indicators (T, n + 1, n + 1)."""
    trees = []
    for assignment in itertools.product(range(n_words + 1), repeat=n_words):
        heads = (-1, *assignment)
        if any(heads[m] == m for m in range(1, n_words + 1)) or not _is_tree(heads):
            continue
        if projective and not _is_projective(heads):
            continue
        arcs = np.zeros((n_words + 1, n_words + 1))
        arcs[list(assignment), list(range(1, n_words + 1))] = 1.0
        trees.append(arcs)
    return np.stack(trees)


def enumerated(scores, n_words, projective):
    """(trees (T, n+1, n+1), tree scores (T,)) for one sentence's scores (n+1, n+1), float64."""
    trees = torch.as_tensor(enumerate_trees(n_words, projective))
    s = scores[: n_words + 1, : n_words + 1].to(torch.float64)
    return trees, (trees * s).sum(dim=(1, 2))


def pad_arcs(arcs, n_pad):
    """Zero-pad a (n+1, n+1) arc tensor to (n_pad+1, n_pad+1)."""
    out = torch.zeros(n_pad + 1, n_pad + 1, dtype=arcs.dtype)
    out[: arcs.shape[0], : arcs.shape[1]] = arcs
    return out


@pytest.mark.parametrize(
    "projective, counts", [(True, [1, 2, 7, 30, 143]), (False, [1, 2, 9, 64, 625])]
)
def test_enumeration_counts_known_sequences(projective, counts):
    # single-root projective trees: 1, 2, 7, 30, 143 (OEIS A006013); non-projective: n^(n-1)
    assert [len(enumerate_trees(n, projective)) for n in range(1, 6)] == counts


def test_projectivity_check_rejects_crossing_arcs():
    # root -> 2, 2 -> 4, 4 -> 1, 2 -> 3: arc 4 -> 1 spans word 2, an ancestor of 4, so it crosses
    assert _is_tree((-1, 4, 0, 2, 2))
    assert not _is_projective((-1, 4, 0, 2, 2))
    assert _is_projective((-1, 2, 0, 4, 2))
