"""The stored replay of a fitted estimator, as a property of whole streams (issue #47).

Algorithm R keeps each of the ``n`` samples of a class with probability ``k / n``, however
the stream is cut into calls, when each call draws afresh along the stream: measured over many
seeds, each sample's count and each pair's joint count must fall inside the binomial's
quantiles (Bonferroni over all the counts, a family-wise false alarm of one in a million, not
a bound tuned to pass). And the stored rows keep their labels under every order in which the
classes arrive, a new class sorting between known ones renumbering them.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom, hypergeom

from ..estimators import tiny

ALPHA = 1e-6


def _inside(counts: np.ndarray, trials: int, p: float, n_tests: int) -> np.ndarray:
    """Whether each count lies inside the two-sided binomial(trials, p) quantiles at
    ``ALPHA / n_tests`` in all."""
    q = ALPHA / (2 * n_tests)
    low, high = binom.ppf(q, trials, p), binom.isf(q, trials, p)
    return (counts >= low) & (counts <= high)


def _sum_quantiles(pmf: np.ndarray, terms: int, q: float) -> tuple[int, int]:
    """The two-sided ``q`` quantiles of a sum of ``terms`` independent draws of ``pmf``."""
    total = np.ones(1)
    for _ in range(terms):
        total = np.convolve(total, pmf)
    cdf = np.cumsum(total)
    return int(np.searchsorted(cdf, q)), int(np.searchsorted(cdf, 1 - q))


@pytest.mark.slow
def test_each_sample_is_stored_with_probability_capacity_over_its_class_count():
    """Three calls of eight samples, four of each class; four kept per class of twelve.

    Algorithm R leaves a uniform k-subset of a class's n samples, however the stream is cut: each
    sample is kept with probability k/n and each pair with k(k-1)/(n(n-1)) (binomial over the
    seeds), and the samples kept of one call's m are hypergeometric(n, m, k), their total over
    seeds and classes a sum of those."""
    capacity, chunks, per_chunk, seeds = 4, 3, 8, 400
    n = chunks * per_chunk
    X = np.c_[np.arange(n), np.zeros(n)].astype(np.float32)  # a sample's id is its first value
    y = np.arange(n) % 2
    kept = np.zeros((seeds, n), bool)
    for seed in range(seeds):
        clf = tiny("ngebm", replay_per_class=capacity, max_epochs=0, random_state=seed)
        for c in range(chunks):
            rows = slice(c * per_chunk, (c + 1) * per_chunk)
            clf.partial_fit(X[rows], y[rows], classes=[0, 1])
        kept[seed, clf.reservoir_X_[:, 0].numpy().astype(int)] = True
    per_class, m = n // 2, per_chunk // 2
    # every pair of a class is kept together with probability k(k-1) / (n(n-1)): drawn from a
    # generator seeded once per fit, not along the stream, two calls reuse their draws and
    # two samples of the first call are kept together 2.4 times as often
    pairs = [(a, b) for a, b in itertools.combinations(range(n), 2) if y[a] == y[b]]
    n_tests = n + chunks + len(pairs)
    singles = kept.sum(axis=0)
    assert _inside(singles, seeds, capacity / per_class, n_tests).all(), singles
    joint = np.array([(kept[:, a] & kept[:, b]).sum() for a, b in pairs])
    p_pair = capacity * (capacity - 1) / (per_class * (per_class - 1))
    inside = _inside(joint, seeds, p_pair, n_tests)
    assert inside.all(), np.array(pairs)[~inside].tolist()
    pmf = hypergeom.pmf(np.arange(m + 1), per_class, m, capacity)
    low, high = _sum_quantiles(pmf, 2 * seeds, ALPHA / (2 * n_tests))
    per_call = kept.reshape(seeds, chunks, per_chunk).sum(axis=(0, 2))
    assert ((per_call >= low) & (per_call <= high)).all(), (per_call, low, high)


@pytest.mark.parametrize("labels", [[3, 0, 2, 1], ["d", "a", "c", "b"]], ids=["int", "str"])
def test_the_stored_rows_keep_their_labels_under_every_class_order(labels):
    """Each order in which four classes arrive (two, then one new class a call, then all): a stored
    row's label is the label it was given, and each class's count is what the stream had."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    y = np.array(labels * 10)
    truth = {row.tobytes(): label for row, label in zip(X, y, strict=True)}
    for order in itertools.permutations(labels):
        clf = tiny("ngebm", class_incremental=True, replay_per_class=3, max_epochs=0)
        first = np.isin(y, order[:2])  # a first call needs two classes
        calls = [first, y == order[2], y == order[3], np.ones(len(y), bool)]
        for rows in calls:
            clf.partial_fit(X[rows], y[rows])
        stored = clf.classes_[clf.reservoir_y_.numpy()]
        for row, label in zip(clf.reservoir_X_.numpy(), stored, strict=True):
            assert truth[row.tobytes()] == label, order
        expected = [2 * (y == label).sum() for label in clf.classes_]
        assert clf.reservoir_seen_.tolist() == expected, order
        assert np.bincount(clf.reservoir_y_.numpy()).tolist() == [3] * 4, order
