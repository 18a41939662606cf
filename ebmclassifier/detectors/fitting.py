"""The detectors by name, and fitting one on an estimator's training data."""

from __future__ import annotations

from ._base import FeatureDetector
from .features import penultimate_features
from .knn import KNNDetector
from .mahalanobis import MahalanobisDetector
from .vim import ViMDetector

__all__ = ["DETECTORS", "fit_detector"]

#: The detectors by the names ``compare --detectors`` takes.
DETECTORS = {"mahalanobis": MahalanobisDetector, "knn": KNNDetector, "vim": ViMDetector}


def fit_detector(detector: FeatureDetector, estimator, X, y=None) -> FeatureDetector:
    """Fit a detector on the penultimate features of an estimator's training data.

    Only ``X`` (and ``y``) reach the detector: pass the training split, never the data to be
    scored. ViM also receives the last layer's ``W`` and ``b``.

    Parameters
    ----------
    detector : MahalanobisDetector, KNNDetector or ViMDetector
        An unfitted detector (it is fitted in place).
    estimator : fitted estimator or torch.nn.Module
        As for :func:`penultimate_features`.
    X : array-like of shape (n_samples, ...)
        The training input.
    y : array-like of shape (n_samples,) or None, default=None
        The training labels (needed by :class:`MahalanobisDetector`).

    Returns
    -------
    detector
        The fitted detector; score with
        ``detector.score_ood(penultimate_features(estimator, X_new))``.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> from ebmclassifier.detectors import KNNDetector, penultimate_features
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(beta=0, max_epochs=3, module__hidden_sizes=(8,), random_state=0)
    >>> clf = clf.fit(X[:40], y[:40])
    >>> detector = fit_detector(KNNDetector(n_neighbors=5), clf, X[:40], y[:40])
    >>> detector.score_ood(penultimate_features(clf, X[40:])).shape
    (20,)
    """
    return detector.fit_on_features(estimator, penultimate_features(estimator, X), y)
