"""Post-hoc OOD detectors on a trained classifier's penultimate features.

The detectors a practitioner would try on a plain cross-entropy model instead of training an
energy-based one: Mahalanobis (Lee et al. 2018 [1]_), KNN (Sun et al. 2022 [2]_) and ViM
(Wang et al. 2022 [3]_). Each is a small scikit-learn estimator built on scikit-learn's own pieces
(``EmpiricalCovariance`` / ``LedoitWolf``, ``NearestNeighbors``), fitted on features of the
**training** data only, and scores new features with ``score_ood``: the higher, the more likely
out-of-distribution, as every estimator's ``score_ood`` (``score_samples`` is its negative,
scikit-learn's outlier convention). ``x`` below is a sample's penultimate feature vector
(``module.penultimate(input)``, see :mod:`ebmclassifier.nn`) and ``l(x) = W x + b`` its logits.

The features come from a fitted estimator through :func:`penultimate_features`, in batches;
:func:`fit_detector` fits a detector on an estimator's training data in one call::

    detector = fit_detector(MahalanobisDetector(), clf, X_train, y_train)
    scores = detector.score_ood(penultimate_features(clf, X_test))

References
----------
.. [1] Lee, K., Lee, K., Lee, H. and Shin, J. "A Simple Unified Framework for Detecting
   Out-of-Distribution Samples and Adversarial Attacks". NeurIPS 2018.
.. [2] Sun, Y., Ming, Y., Zhu, X. and Li, Y. "Out-of-Distribution Detection with Deep Nearest
   Neighbors". ICML 2022.
.. [3] Wang, H., Li, Z., Feng, L. and Zhang, W. "ViM: Out-Of-Distribution with Virtual-logit
   Matching". CVPR 2022.
"""

from .features import last_layer_parameters, penultimate_features
from .fitting import DETECTORS, fit_detector
from .knn import KNNDetector
from .mahalanobis import MahalanobisDetector
from .vim import ViMDetector

__all__ = [
    "DETECTORS",
    "KNNDetector",
    "MahalanobisDetector",
    "ViMDetector",
    "fit_detector",
    "last_layer_parameters",
    "penultimate_features",
]
