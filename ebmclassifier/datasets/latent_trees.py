"""make_latent_trees: a sequence task whose label is a function of a hidden dependency tree.

Each sentence is drawn with a random single-root projective tree. Every word carries a *value*
``v`` (one of ``n_values``) and a *cue*, the signed offset to its head (``head - position``,
0 for the word attached to the root), and its token id encodes both::

    token = 1 + v * (2 * max_length - 1) + (offset + max_length - 1)        (0 is padding)

so the tree can be read off the tokens (it is identifiable; a parser can learn it) but only by
learning what the ids mean. The label asks about head-modifier *pairs*: ``y = 1`` iff some arc
between two words has the same value at both ends (an "agreeing arc"). Values alone do not
decide it: the same multiset of values gives either label depending on which words are linked.
Within each sentence length the classes are balanced exactly (by rejection), so the length says
nothing about the label.

Unlike the paper's real-data experiments, the gold trees are returned, so the recovery of the
latent structure (unlabeled attachment score) can be measured.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_latent_trees"]


def _attach_span(lo: int, hi: int, head: int, heads: np.ndarray, rng) -> None:
    """Hang the words ``lo..hi`` (one side of ``head``) under ``head`` as projective subtrees."""
    if lo > hi:
        return
    # cut the span into contiguous blocks, one child subtree of `head` each
    cuts = np.flatnonzero(rng.random_sample(hi - lo) < 0.5) + lo + 1
    bounds = [lo, *cuts.tolist(), hi + 1]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        child = int(rng.randint(a, b))
        heads[child] = head
        _attach_span(a, child - 1, child, heads, rng)
        _attach_span(child + 1, b - 1, child, heads, rng)


def random_projective_heads(length: int, random_state=None) -> np.ndarray:
    """Heads (``length``,) of a random single-root projective tree; ``heads[m - 1]`` is m's head.

    Examples
    --------
    >>> heads = random_projective_heads(5, random_state=0)
    >>> int((heads == 0).sum())
    1
    """
    rng = check_random_state(random_state)
    heads = np.zeros(length + 1, dtype=np.int64)
    top = int(rng.randint(1, length + 1))
    heads[top] = 0
    _attach_span(1, top - 1, top, heads, rng)
    _attach_span(top + 1, length, top, heads, rng)
    return heads[1:]


def _has_agreeing_arc(values: np.ndarray, heads: np.ndarray) -> bool:
    words = np.flatnonzero(heads > 0)
    return bool(np.any(values[words] == values[heads[words] - 1]))


def _check_int(name, value, low):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}.")


def make_latent_trees(
    n_samples: int = 1000,
    *,
    min_length: int = 4,
    max_length: int = 10,
    n_values: int = 8,
    random_state=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate sentences over hidden projective trees, labelled by an agreeing head-modifier arc.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of sentences.
    min_length, max_length : int, default=4, 10
        Sentence lengths are drawn uniformly from ``[min_length, max_length]``.
    n_values : int, default=8
        Number of word values; with fewer values agreeing arcs are more frequent.
    random_state : int, RandomState instance or None, default=None
        Seed for reproducible draws.

    Returns
    -------
    X : ndarray of shape (n_samples, max_length), int64
        Token ids, 0 for padding (at the end); ids lie in ``[1, 1 + n_values * (2 *
        max_length - 1))``.
    y : ndarray of shape (n_samples,), int64
        1 iff some arc joins two words of the same value; balanced within each length.
    heads : ndarray of shape (n_samples, max_length), int64
        The gold tree: ``heads[i, m - 1]`` is the head of word ``m`` (0 = root), -1 on padding.

    References
    ----------
    Mihaylova, Niculae & Martins (2020), "Understanding the Mechanics of SPIGOT", EMNLP
    (latent-tree models trained from the downstream label only).

    Examples
    --------
    >>> X, y, heads = make_latent_trees(6, max_length=5, random_state=0)
    >>> X.shape, y.shape, heads.shape
    ((6, 5), (6,), (6, 5))
    >>> offsets = (X[X > 0] - 1) % (2 * 5 - 1) - (5 - 1)  # the cue in each token
    >>> positions = np.nonzero(X > 0)[1] + 1
    >>> bool(np.all(np.where(offsets == 0, 0, positions + offsets) == heads[X > 0]))
    True
    """
    _check_int("n_samples", n_samples, 1)
    _check_int("min_length", min_length, 2)
    _check_int("max_length", max_length, min_length)
    _check_int("n_values", n_values, 2)
    rng = check_random_state(random_state)
    n_offsets = 2 * max_length - 1
    X = np.zeros((n_samples, max_length), dtype=np.int64)
    heads_out = np.full((n_samples, max_length), -1, dtype=np.int64)
    y = np.zeros(n_samples, dtype=np.int64)
    lengths = rng.randint(min_length, max_length + 1, size=n_samples)
    targets = rng.permutation(np.arange(n_samples) % 2)  # exact balance overall
    for i, (length, target) in enumerate(zip(lengths, targets, strict=True)):
        while True:  # rejection: same label distribution at every length
            heads = random_projective_heads(int(length), rng)
            values = rng.randint(n_values, size=length)
            if _has_agreeing_arc(values, heads) == bool(target):
                break
        positions = np.arange(1, length + 1)
        offsets = np.where(heads == 0, 0, heads - positions)
        X[i, :length] = 1 + values * n_offsets + offsets + max_length - 1
        heads_out[i, :length] = heads
        y[i] = target
    return X, y, heads_out
