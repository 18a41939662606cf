"""The Mahalanobis detector (Lee et al. 2018 [1]_) on penultimate features.

References
----------
.. [1] Lee, K., Lee, K., Lee, H. and Shin, J. "A Simple Unified Framework for Detecting
   Out-of-Distribution Samples and Adversarial Attacks". NeurIPS 2018.
"""

from __future__ import annotations

import numpy as np
from sklearn.covariance import EmpiricalCovariance, LedoitWolf
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._utils.parameters import ParamChecker
from .._utils.validation import as_numpy
from ._base import FeatureDetector

__all__ = ["MahalanobisDetector"]

_COVARIANCES = {"empirical": EmpiricalCovariance, "ledoit_wolf": LedoitWolf}


class MahalanobisDetector(FeatureDetector):
    r"""Mahalanobis distance to the closest class mean under a shared covariance (Lee et al.).

    Fits one Gaussian per class with a covariance shared by all classes (Lee et al. 2018 [1]_,
    Eq. 1), on the training features ``x_i`` with labels ``y_i``:

    .. math::
        \hat\mu_c = \frac{1}{N_c} \sum_{i: y_i = c} x_i, \qquad
        \hat\Sigma = \frac{1}{N} \sum_c \sum_{i: y_i = c} (x_i - \hat\mu_c)(x_i - \hat\mu_c)^\top

    and scores the closest class's squared Mahalanobis distance, the paper's confidence score
    ``M(x)`` (Eq. 2) negated so that higher means more OOD:

    .. math::
        \mathrm{score\_ood}(x) = -M(x) = \min_c\,(x - \hat\mu_c)^\top \hat\Sigma^{-1}
        (x - \hat\mu_c)

    The covariance is scikit-learn's ``EmpiricalCovariance(assume_centered=True)`` (exactly
    :math:`\hat\Sigma`; its precision is a pseudo-inverse) or ``LedoitWolf`` shrinkage of it
    fitted on the class-centred features. The paper's input preprocessing (a gradient step on
    the input) and its ensemble over layers are not applied: this scores the features it is
    given, the variant the OOD literature usually compares against.

    Parameters
    ----------
    covariance : {"empirical", "ledoit_wolf"}, default="empirical"
        ``"ledoit_wolf"`` shrinks the shared covariance (well-conditioned when features are
        many or samples few).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    means_ : ndarray of shape (n_classes, n_features)
        :math:`\hat\mu_c`, in the order of ``classes_``.
    covariance_ : ndarray of shape (n_features, n_features)
        :math:`\hat\Sigma` (shrunk for ``"ledoit_wolf"``).
    precision_ : ndarray of shape (n_features, n_features)
    n_features_in_ : int

    References
    ----------
    .. [1] Lee, K., Lee, K., Lee, H. and Shin, J. "A Simple Unified Framework for Detecting
       Out-of-Distribution Samples and Adversarial Attacks". NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> features = np.concatenate([rng.normal(0, 1, (50, 2)), rng.normal(5, 1, (50, 2))])
    >>> detector = MahalanobisDetector().fit(features, np.repeat([0, 1], 50))
    >>> scores = detector.score_ood([[0.0, 0.0], [5.0, 5.0], [2.5, -4.0]])
    >>> bool(scores[2] > max(scores[0], scores[1]))
    True
    """

    def __init__(self, covariance: str = "empirical") -> None:
        self.covariance = covariance

    def fit(self, features, y) -> MahalanobisDetector:
        """Fit class means and the shared covariance on training features.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)
            Penultimate features of the training data.
        y : array-like of shape (n_samples,)
            Their class labels.

        Returns
        -------
        self : MahalanobisDetector

        Examples
        --------
        >>> import numpy as np
        >>> detector = MahalanobisDetector().fit([[0.0], [2.0], [10.0], [12.0]], [0, 0, 1, 1])
        >>> detector.means_.ravel().tolist(), detector.covariance_.tolist()
        ([1.0, 11.0], [[1.0]])
        """
        check = ParamChecker(self)
        check.choice("covariance", tuple(_COVARIANCES))
        check.raise_if_any()
        if y is None:
            raise ValueError("MahalanobisDetector.fit needs the training labels y; got None.")
        X, y = validate_data(self, as_numpy(features), y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_, index = np.unique(y, return_inverse=True)
        counts = np.bincount(index)
        self.means_ = np.zeros((len(self.classes_), X.shape[1]))
        np.add.at(self.means_, index, X)
        self.means_ /= counts[:, None]
        estimator = _COVARIANCES[self.covariance](assume_centered=True)
        self.covariance_estimator_ = estimator.fit(X - self.means_[index])
        self.covariance_ = estimator.covariance_
        self.precision_ = estimator.get_precision()
        return self

    def score_ood(self, features) -> np.ndarray:
        """Squared Mahalanobis distance to the closest class mean.

        Parameters
        ----------
        features : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            The higher, the more likely out-of-distribution.

        Examples
        --------
        >>> detector = MahalanobisDetector().fit([[0.0], [2.0], [10.0], [12.0]], [0, 0, 1, 1])
        >>> detector.score_ood([[1.0], [3.0], [6.0]]).tolist()  # (x - closest mean)^2 / 1
        [0.0, 4.0, 25.0]
        """
        check_is_fitted(self)
        X = self._features(features, reset=False)
        distances = [self.covariance_estimator_.mahalanobis(X - mean) for mean in self.means_]
        return np.min(distances, axis=0)
