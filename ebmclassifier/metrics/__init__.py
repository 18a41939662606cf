"""Evaluation metrics on arrays: calibration, out-of-distribution detection, robustness.

Calibration errors bin the *top-label confidence* ``max_k p(k | x)`` into ``n_bins`` equal-width
bins over [0, 1] and compare each bin's mean confidence with its accuracy; the binning and the
arithmetic are netcal's (``netcal.metrics.ECE`` / ``MCE``). Bin ``b`` (0-based) holds the
confidences in ``[b / n_bins, (b + 1) / n_bins)``; the last bin also holds 1.0. Empty bins
contribute nothing.

Labels and columns: column ``k`` of ``y_proba`` is the probability of class ``classes[k]``.
Pass ``classes=estimator.classes_`` when labels are not already the column indices; without
``classes``, ``y_true`` must hold integer column indices ``0 .. n_columns - 1``.

OOD metrics take scores oriented as ``score_ood`` (higher = more likely out-of-distribution).
AUROC and AUPR follow pytorch-ood's ``OODMetrics``; FPR at 95% TPR comes in both conventions,
``fpr95_in`` (= ``fpr95``, the OOD papers': in-distribution positive) and ``fpr95_out``
(pytorch-ood's: OOD positive); :func:`threshold_at_tpr` is the papers' threshold.

Selective classification (:func:`risk_coverage_curve`, :func:`aurc`) takes a *confidence*,
higher = more trusted: the classifier answers on the most confident samples and abstains on
the rest. Pass ``-score_ood`` to rank by an OOD score.
"""

from ._checks import encode_labels, top_label  # noqa: F401  (plotting and users import them here)
from .calibration import (
    classwise_calibration_error,
    ece_scorer,
    expected_calibration_error,
    maximum_calibration_error,
    mce_scorer,
)
from .ood import ood_metrics, threshold_at_tpr
from .robustness import adversarial_accuracy
from .selective import aurc, risk_coverage_curve

__all__ = [
    "expected_calibration_error",
    "maximum_calibration_error",
    "classwise_calibration_error",
    "ece_scorer",
    "mce_scorer",
    "ood_metrics",
    "threshold_at_tpr",
    "risk_coverage_curve",
    "aurc",
    "adversarial_accuracy",
]
