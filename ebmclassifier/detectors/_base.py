"""What every post-hoc detector shares: feature validation and the two score conventions."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data

from .._utils.validation import as_numpy

__all__ = ["FeatureDetector"]


class FeatureDetector(BaseEstimator):
    """What every detector shares: feature validation and the two score conventions."""

    def _features(self, features, *, reset: bool) -> np.ndarray:
        return validate_data(self, as_numpy(features), reset=reset, dtype=np.float64)

    def score_samples(self, features) -> np.ndarray:
        """scikit-learn's outlier convention: ``-score_ood(features)``.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            The lower, the more abnormal.

        Examples
        --------
        >>> import numpy as np
        >>> from ebmclassifier.detectors import KNNDetector
        >>> knn = KNNDetector(n_neighbors=1).fit(np.eye(3))
        >>> np.allclose(knn.score_samples(np.eye(3)), -knn.score_ood(np.eye(3)))
        True
        """
        return -self.score_ood(features)

    def fit_on_features(self, estimator, features, y=None):
        """Fit on the penultimate features of ``estimator``'s training input, already computed.

        The detector takes from ``estimator`` what it needs beyond the features (ViM: the last
        layer's ``W`` and ``b``), so that several detectors fit on one computation of the
        features; :func:`fit_detector` computes them and calls this.

        Parameters
        ----------
        estimator : fitted estimator or torch.nn.Module
            As for :func:`penultimate_features`.
        features : array-like of shape (n_samples, n_features)
            ``penultimate_features(estimator, X_train)``.
        y : array-like of shape (n_samples,) or None, default=None
            The training labels (needed by :class:`MahalanobisDetector`).

        Returns
        -------
        self
            The fitted detector.

        Examples
        --------
        >>> import torch
        >>> from ebmclassifier.detectors import ViMDetector, penultimate_features
        >>> from ebmclassifier.nn import MLP
        >>> net = MLP(n_features=4, n_classes=3, hidden_sizes=(8,))
        >>> X = torch.randn(30, 4)
        >>> vim = ViMDetector(n_components=2).fit_on_features(net, penultimate_features(net, X))
        >>> vim.coef_.shape  # ViM took the last layer from the network
        (3, 8)
        """
        return self.fit(features, y)
