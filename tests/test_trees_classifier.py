"""LatentStructureClassifier(structure="dependency_tree"): fit, latent trees, marginals, errors."""

import pickle

import numpy as np
import pytest

from ebmclassifier.datasets import make_latent_trees
from ebmclassifier.latent.classifier import LatentStructureClassifier

X, Y, HEADS = make_latent_trees(64, min_length=2, max_length=5, n_values=3, random_state=0)


def _fit(**params):
    base = dict(structure="dependency_tree", max_epochs=1, batch_size=16, random_state=0)
    return LatentStructureClassifier(**{**base, **params}).fit(X, Y)


@pytest.mark.parametrize("gradient, projective", [("spigot", True), ("softmax", False)])
def test_fit_predict_latent_and_transform(gradient, projective):
    clf = _fit(gradient=gradient, projective=projective)
    assert clf.predict(X).shape == (64,)
    heads = clf.predict_latent(X)
    assert heads.shape == X.shape and heads.dtype == np.int64
    np.testing.assert_array_equal(heads < 0, X == 0)
    assert np.all((heads == 0).sum(1) == 1)  # single root
    marginals = clf.transform(X).reshape(64, 5, 6)
    np.testing.assert_allclose(marginals.sum(2), (X > 0).astype(float), atol=1e-5)


def test_fitted_tree_classifier_pickles():
    clf = _fit(gradient="ste")
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_latent(X), clf.predict_latent(X))
    np.testing.assert_allclose(again.predict_proba(X), clf.predict_proba(X))


def test_token_ids_are_validated():
    clf = LatentStructureClassifier(structure="dependency_tree", max_epochs=1)
    with pytest.raises(ValueError, match="padding id 0 only at the end"):
        clf.fit(np.array([[1, 0, 2], [1, 2, 3]] * 4), [0, 1] * 4)
    with pytest.raises(ValueError, match="non-negative integer token ids"):
        clf.fit(np.array([[1.5, 2, 0], [1, 2, 3]] * 4), [0, 1] * 4)
    with pytest.raises(ValueError, match="projective"):
        LatentStructureClassifier(structure="dependency_tree", projective="yes").fit(X, Y)
