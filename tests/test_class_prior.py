"""Every estimator records ``class_count_`` and ``class_prior_`` of its training labels (issue #32).

The counts are checked against ``np.bincount`` of the labels by hand: weighted by
``sample_weight`` (a frequency), not by ``class_weight`` (a re-balancing of the loss; the
measurement behind the choice is in docs/distributional.md), added up over ``partial_fit`` and
warm-started fits, remapped when class-incremental learning grows the classes, and kept by
``save`` / ``load``, pickle and (not) ``clone``.
"""

from __future__ import annotations

import io
import pickle
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.frozen import FrozenEstimator

from ebmclassifier import (
    ConceptComposition,
    ProductOfExperts,
    load,
)

from .estimators import tiny

FIXTURES = Path(__file__).parent / "fixtures" / "saved"
ESTIMATORS = {kind: partial(tiny, kind) for kind in ("ngebm", "jem", "latent")}


@pytest.fixture(scope="module")
def data():
    """Imbalanced labels, strings given out of their sorted order."""
    X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
    keep = np.r_[np.flatnonzero(y == 0), np.flatnonzero(y == 1)[:20], np.flatnonzero(y == 2)[:10]]
    labels = np.array(["owl", "cat", "dog"])[y[keep]]
    return X[keep].astype(np.float32), labels


def _counts(y, classes, weights=None):
    return np.array([np.sum((y == c) * (1.0 if weights is None else weights)) for c in classes])


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fit_records_the_weighted_counts_in_the_order_of_classes(data, name):
    X, y = data
    weights = np.random.default_rng(0).uniform(0, 3, size=len(y))
    weights[:5] = 0.0
    clf = ESTIMATORS[name]().fit(X, y, sample_weight=weights)
    assert clf.classes_.tolist() == ["cat", "dog", "owl"]
    np.testing.assert_allclose(clf.class_count_, _counts(y, clf.classes_, weights))
    np.testing.assert_allclose(clf.class_prior_, clf.class_count_ / weights.sum())
    clf.fit(X, y)  # a new fit starts afresh, without weights: the numbers of samples
    np.testing.assert_array_equal(clf.class_count_, [20, 10, 30])
    np.testing.assert_allclose(clf.class_prior_, [1 / 3, 1 / 6, 1 / 2])


def test_class_weight_does_not_enter_but_sample_weight_does(data):
    X, y = data
    balanced = ESTIMATORS["ngebm"](class_weight="balanced").fit(X, y)
    np.testing.assert_array_equal(balanced.class_count_, [20, 10, 30])
    scalar = ESTIMATORS["ngebm"]().fit(X, y, sample_weight=2.0)
    np.testing.assert_array_equal(scalar.class_count_, [40, 20, 60])
    np.testing.assert_allclose(scalar.class_prior_, balanced.class_prior_)


def test_partial_fit_and_warm_start_add_up_and_fit_resets(data):
    X, y = data
    first, second = np.arange(len(y)) % 2 == 0, np.arange(len(y)) % 2 == 1
    first &= y != "dog"  # a first chunk without a class named in classes=
    clf = ESTIMATORS["ngebm"]()
    clf.partial_fit(X[first], y[first], classes=["cat", "dog", "owl"])
    np.testing.assert_array_equal(clf.class_count_, _counts(y[first], clf.classes_))
    assert clf.class_prior_[1] == 0.0
    clf.partial_fit(X[second], y[second], sample_weight=np.full(second.sum(), 0.5))
    expected = _counts(y[first], clf.classes_) + 0.5 * _counts(y[second], clf.classes_)
    np.testing.assert_allclose(clf.class_count_, expected)
    np.testing.assert_allclose(clf.class_prior_, expected / expected.sum())
    warm = ESTIMATORS["ngebm"](warm_start=True).fit(X, y)
    warm.fit(X, y, sample_weight=(y != "cat") * 1.0)
    np.testing.assert_array_equal(warm.class_count_, [20, 20, 60])  # the network saw both fits
    warm.set_params(warm_start=False).fit(X, y)
    np.testing.assert_array_equal(warm.class_count_, [20, 10, 30])


def test_class_growth_remaps_the_counts(data):
    X, y = data
    clf = tiny("ngebm", class_incremental=True)
    task1, task2 = np.isin(y, ["dog", "owl"]), y == "cat"  # "cat" sorts before both
    clf.partial_fit(X[task1], y[task1])
    np.testing.assert_array_equal(clf.class_count_, [10, 30])
    clf.partial_fit(X[task2], y[task2])
    assert clf.classes_.tolist() == ["cat", "dog", "owl"]
    np.testing.assert_array_equal(clf.class_count_, [20, 10, 30])
    np.testing.assert_allclose(clf.class_prior_, [1 / 3, 1 / 6, 1 / 2])


def test_counts_survive_save_load_and_pickle_and_leave_with_clone(data):
    X, y = data
    clf = ESTIMATORS["ngebm"]().fit(X, y, sample_weight=np.linspace(0.5, 1.5, len(y)))
    buffer = io.BytesIO()
    clf.save(buffer)
    for restored in (load(buffer, device="cpu"), pickle.loads(pickle.dumps(clf))):
        np.testing.assert_array_equal(restored.class_count_, clf.class_count_)
        np.testing.assert_array_equal(restored.class_prior_, clf.class_prior_)
    restored.partial_fit(X, y)  # and the restored counts keep adding up
    np.testing.assert_allclose(restored.class_count_, clf.class_count_ + [20, 10, 30])
    fresh = clone(clf)
    assert not hasattr(fresh, "class_count_") and not hasattr(fresh, "class_prior_")


def test_a_file_saved_before_the_counts_loads_without_them():
    clf = load(FIXTURES / "ngebm.ebm", device="cpu")
    assert not hasattr(clf, "class_count_") and not hasattr(clf, "class_prior_")
    with np.load(FIXTURES / "ngebm_expected.npz", allow_pickle=False) as expected:
        X, y = expected["X"], expected["predict"]
    clf.set_params(max_epochs=1).partial_fit(X, y)  # the earlier labels are unknown: no counts
    assert not hasattr(clf, "class_count_")
    clf.fit(X, y)  # a new network: counted from here
    np.testing.assert_array_equal(clf.class_count_, _counts(y, clf.classes_))


def test_product_of_experts_counts_the_labels_of_its_fit(data):
    X, y = data
    fitted = ESTIMATORS["ngebm"]().fit(X, y)
    weights = np.linspace(0.0, 2.0, len(y))
    poe = ProductOfExperts([("old", FrozenEstimator(fitted)), ("new", ESTIMATORS["ngebm"]())])
    poe.fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(poe.class_count_, _counts(y, poe.classes_, weights))
    np.testing.assert_allclose(poe.class_prior_, poe.class_count_ / weights.sum())
    frozen_only = ProductOfExperts([("old", FrozenEstimator(fitted))])
    with pytest.raises(ValueError, match=r"y holds labels \['emu'\] unknown to the experts"):
        frozen_only.fit(X, np.where(y == "cat", "emu", y))


def test_concept_composition_counts_each_concept(data):
    X, y = data
    size = np.where(X[:, 1] > 2, "big", "small")
    weights = np.linspace(0.0, 2.0, len(y))
    net = ESTIMATORS["ngebm"]()
    concepts = ConceptComposition([("animal", net), ("size", net)])
    concepts.fit(X, np.c_[y, size], sample_weight=weights)
    for k, column in enumerate((y, size)):
        expected = _counts(column, concepts.classes_[k], weights)
        np.testing.assert_allclose(concepts.class_count_[k], expected)
        np.testing.assert_allclose(concepts.class_prior_[k], expected / weights.sum())
