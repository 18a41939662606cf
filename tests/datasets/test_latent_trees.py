"""make_latent_trees: valid projective gold trees, identifiable from the tokens, label by rule."""

import numpy as np
import pytest

from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.datasets.latent_trees import random_projective_heads

from ..latent.trees.test_enumeration import _is_projective, _is_tree

MAX_LEN = 9


@pytest.fixture(scope="module")
def draw():
    return make_latent_trees(600, min_length=3, max_length=MAX_LEN, n_values=5, random_state=0)


def test_shapes_padding_and_balance(draw):
    X, y, heads = draw
    assert X.shape == heads.shape == (600, MAX_LEN) and y.shape == (600,)
    assert X.dtype == y.dtype == heads.dtype == np.int64
    lengths = (X > 0).sum(1)
    assert lengths.min() >= 3 and lengths.max() <= MAX_LEN
    # padding only at the end, marked the same way in X and heads
    assert np.array_equal(X > 0, np.arange(MAX_LEN)[None, :] < lengths[:, None])
    assert np.array_equal(heads >= 0, X > 0)
    assert y.sum() == 300
    assert X.max() < 1 + 5 * (2 * MAX_LEN - 1)


def test_gold_trees_are_single_root_projective(draw):
    _, _, heads = draw
    for row in heads:
        h = (-1, *row[row >= 0].tolist())
        assert _is_tree(h) and _is_projective(h)


def test_tree_is_identifiable_from_tokens_and_label_follows_rule(draw):
    X, y, heads = draw
    n_offsets = 2 * MAX_LEN - 1
    for row, label, gold in zip(X, y, heads, strict=True):
        tokens = row[row > 0] - 1
        values, offsets = tokens // n_offsets, tokens % n_offsets - (MAX_LEN - 1)
        positions = np.arange(1, len(tokens) + 1)
        decoded = np.where(offsets == 0, 0, positions + offsets)
        assert np.array_equal(decoded, gold[: len(tokens)])
        arcs = zip(positions, decoded, strict=True)
        agreeing = any(values[m - 1] == values[h - 1] for m, h in arcs if h)
        assert agreeing == bool(label)


def test_labels_are_balanced_within_each_length():
    X, y, _ = make_latent_trees(2000, min_length=4, max_length=8, random_state=1)
    lengths = (X > 0).sum(1)
    for length in range(4, 9):
        rate = y[lengths == length].mean()
        assert abs(rate - 0.5) < 0.1, (length, rate)


def test_random_trees_reach_every_projective_tree_of_three_words():
    rng = np.random.RandomState(0)
    seen = {tuple(random_projective_heads(3, rng)) for _ in range(500)}
    assert len(seen) == 7  # the number of single-root projective trees over 3 words


def test_reproducible_and_validated():
    a = make_latent_trees(20, random_state=3)
    b = make_latent_trees(20, random_state=3)
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="max_length must be an integer >= 6"):
        make_latent_trees(10, min_length=6, max_length=5)
    with pytest.raises(ValueError, match="n_samples"):
        make_latent_trees(0)
