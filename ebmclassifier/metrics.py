"""Evaluation metrics on arrays: calibration, out-of-distribution detection, robustness.

Calibration errors bin the *top-label confidence* ``max_k p(k | x)`` into ``n_bins`` equal-width
bins over [0, 1] and compare each bin's mean confidence with its accuracy; the binning and the
arithmetic are netcal's (``netcal.metrics.ECE`` / ``MCE``). Bin ``b`` (0-based) holds the
confidences in ``[b / n_bins, (b + 1) / n_bins)``; the last bin also holds 1.0. Empty bins
contribute nothing.

Labels and columns: column ``k`` of ``y_proba`` is the probability of class ``classes[k]``.
Pass ``classes=estimator.classes_`` when labels are not already the column indices; without
``classes``, ``y_true`` must hold integer column indices ``0 .. n_columns - 1``.

OOD metrics follow pytorch-ood's ``OODMetrics``: scores are oriented as ``score_ood`` (higher =
more likely out-of-distribution) and OOD is the positive class, except for AUPR-in.

Selective classification (:func:`risk_coverage_curve`, :func:`aurc`) takes a *confidence*,
higher = more trusted: the classifier answers on the most confident samples and abstains on
the rest. Pass ``-score_ood`` to rank by an OOD score.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch
from netcal.metrics import ECE, MCE
from sklearn.metrics import auc, precision_recall_curve, roc_auc_score, roc_curve
from sklearn.utils import check_random_state

from .attacks import NORMS, robust_accuracy

__all__ = [
    "expected_calibration_error",
    "maximum_calibration_error",
    "classwise_calibration_error",
    "ece_scorer",
    "mce_scorer",
    "ood_metrics",
    "risk_coverage_curve",
    "aurc",
    "adversarial_accuracy",
]


# ----------------------------------------------------------------------------- input checks


# Rows of predict_proba sum to 1 up to float32 rounding; a larger gap is not a distribution.
_ROW_SUM_TOL = 1e-3
# More bins than this leaves nearly all empty; the cap keeps a typo from allocating gigabytes.
_MAX_BINS = 10_000


def encode_labels(y, classes) -> np.ndarray:
    """Column index of each label of ``y`` in ``classes``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels, each one of ``classes``.
    classes : array-like of shape (n_classes,)
        The label of each column, e.g. ``estimator.classes_``.

    Returns
    -------
    y_encoded : ndarray of shape (n_samples,), int64
        ``classes[y_encoded[i]] == y[i]``.

    Raises
    ------
    ValueError
        Naming the labels of ``y`` that are not in ``classes``.
    """
    y = np.asarray(y)
    classes = np.asarray(classes)
    index = {label: k for k, label in enumerate(classes.tolist())}
    try:
        return np.fromiter((index[label] for label in y.tolist()), dtype=np.int64, count=y.size)
    except (KeyError, TypeError):
        unknown = sorted({repr(v) for v in y.tolist() if v not in index})[:5]
        raise ValueError(
            f"y contains labels that are not in classes {classes.tolist()!r}: "
            f"{', '.join(unknown)}. Pass the classes the probabilities' columns stand for, "
            "e.g. classes=estimator.classes_."
        ) from None


def _check_proba(y_true, y_proba, classes) -> tuple[np.ndarray, np.ndarray]:
    """Validate and return (encoded labels (n,), probabilities (n, n_classes) float64)."""
    y_proba = np.asarray(y_proba, dtype=np.float64)
    y_true = np.asarray(y_true)
    if y_proba.ndim != 2 or y_proba.shape[1] < 2:
        raise ValueError(
            "y_proba must be a 2-D array of shape (n_samples, n_classes) with n_classes >= 2, "
            f"as returned by predict_proba. Got shape {y_proba.shape!r}. For a binary problem "
            "with only p(positive), pass np.column_stack([1 - p, p])."
        )
    if y_true.ndim != 1 or y_true.shape[0] != y_proba.shape[0]:
        raise ValueError(
            f"y_true must be 1-D with one label per row of y_proba ({y_proba.shape[0]} rows). "
            f"Got shape {y_true.shape!r}."
        )
    if y_true.shape[0] == 0:
        raise ValueError("y_true and y_proba are empty; at least one sample is needed.")
    if not np.all(np.isfinite(y_proba)) or y_proba.min() < -1e-6 or y_proba.max() > 1 + 1e-6:
        raise ValueError(
            "y_proba must hold probabilities in [0, 1] (finite). Got values in "
            f"[{np.nanmin(y_proba)!r}, {np.nanmax(y_proba)!r}]."
        )
    row_sums = y_proba.sum(axis=1)
    off = np.abs(row_sums - 1.0) > _ROW_SUM_TOL
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise ValueError(
            "Each row of y_proba must sum to 1 (a distribution over the classes); row "
            f"{row} sums to {float(row_sums[row]):.6g}. Pass predict_proba's output, or "
            "normalise the rows first (y_proba / y_proba.sum(axis=1, keepdims=True))."
        )
    n_classes = y_proba.shape[1]
    if classes is not None:
        classes = np.asarray(classes)
        if len(np.unique(classes)) != len(classes):
            values, counts = np.unique(classes, return_counts=True)
            raise ValueError(
                f"classes must not repeat a label; {values[counts > 1].tolist()!r} occur more "
                "than once. Pass estimator.classes_."
            )
        if len(classes) != n_classes:
            raise ValueError(
                f"classes has {len(classes)} entries but y_proba has {n_classes} columns; "
                "they must correspond one to one."
            )
        return encode_labels(y_true, classes), np.clip(y_proba, 0.0, 1.0)
    integral = np.issubdtype(y_true.dtype, np.integer) or (
        np.issubdtype(y_true.dtype, np.floating) and np.all(np.mod(y_true, 1) == 0)
    )
    if not integral or y_true.min() < 0 or y_true.max() >= n_classes:
        raise ValueError(
            f"Without 'classes', y_true must hold column indices 0..{n_classes - 1} of y_proba. "
            f"Got labels {np.unique(y_true)[:10].tolist()!r}. Pass classes=estimator.classes_ "
            "to map labels to columns."
        )
    return y_true.astype(np.int64), np.clip(y_proba, 0.0, 1.0)


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1. Got {value!r} instead.")
    return int(value)


def _check_n_bins(value) -> int:
    value = _check_positive_int("n_bins", value)
    if value > _MAX_BINS:
        raise ValueError(
            f"n_bins must be at most {_MAX_BINS:,}: with more bins nearly all are empty and the "
            f"binning's arrays grow with n_bins. Got {value!r} instead; 10 to 20 is usual."
        )
    return value


def _top_label(y_true, y_proba, classes) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence max_k p_k (n,) and correctness 1[argmax_k p_k == y] (n,)."""
    y_enc, proba = _check_proba(y_true, y_proba, classes)
    confidence = proba.max(axis=1)
    correct = (proba.argmax(axis=1) == y_enc).astype(np.int64)
    return confidence, correct


# ----------------------------------------------------------------------------- calibration


def expected_calibration_error(y_true, y_proba, n_bins: int = 15, *, classes=None) -> float:
    """Expected calibration error (ECE) of the top-label confidence, equal-width bins.

    .. math::

        \\mathrm{ECE} = \\sum_{b=1}^{B} \\frac{|B_b|}{n}
            \\left| \\mathrm{acc}(B_b) - \\mathrm{conf}(B_b) \\right|,

    where :math:`B_b` holds the samples whose confidence :math:`\\max_k p_k` falls in
    ``[(b-1)/B, b/B)`` (the last bin closed), ``acc`` is the fraction whose argmax is the true
    label and ``conf`` the mean confidence. Computed with ``netcal.metrics.ECE`` on
    (confidence, correct).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels: column indices of ``y_proba``, or labels of ``classes``.
    y_proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities (``predict_proba``); column k is class ``classes[k]``.
    n_bins : int, default=15
        Number of equal-width confidence bins over [0, 1].
    classes : array-like of shape (n_classes,), default=None
        The label of each column (``estimator.classes_``). None: labels are column indices.

    Returns
    -------
    ece : float
        In [0, 1]; 0 is perfectly calibrated. Lower is better.

    References
    ----------
    .. [1] Naeini, Cooper and Hauskrecht, "Obtaining Well Calibrated Probabilities Using
       Bayesian Binning", AAAI 2015.
    .. [2] Guo, Pleiss, Sun and Weinberger, "On Calibration of Modern Neural Networks",
       ICML 2017, eq. (3).

    Examples
    --------
    >>> proba = [[0.9, 0.1], [0.9, 0.1], [0.3, 0.7]]
    >>> round(expected_calibration_error([0, 1, 1], proba, n_bins=5), 6)
    0.366667
    """
    confidence, correct = _top_label(y_true, y_proba, classes)
    return float(ECE(bins=_check_n_bins(n_bins)).measure(confidence, correct))


def maximum_calibration_error(y_true, y_proba, n_bins: int = 15, *, classes=None) -> float:
    """Maximum calibration error (MCE): the largest ``|acc - conf|`` over non-empty bins.

    Same binning and label handling as :func:`expected_calibration_error`; computed with
    ``netcal.metrics.MCE``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels: column indices of ``y_proba``, or labels of ``classes``.
    y_proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    n_bins : int, default=15
        Number of equal-width confidence bins over [0, 1].
    classes : array-like of shape (n_classes,), default=None
        The label of each column. None: labels are column indices.

    Returns
    -------
    mce : float
        In [0, 1]. Lower is better.

    References
    ----------
    .. [1] Naeini, Cooper and Hauskrecht, AAAI 2015; Guo et al., ICML 2017, eq. (5).

    Examples
    --------
    >>> proba = [[0.9, 0.1], [0.9, 0.1], [0.3, 0.7]]
    >>> round(maximum_calibration_error([0, 1, 1], proba, n_bins=5), 6)
    0.4
    """
    confidence, correct = _top_label(y_true, y_proba, classes)
    return float(MCE(bins=_check_n_bins(n_bins)).measure(confidence, correct))


def classwise_calibration_error(y_true, y_proba, n_bins: int = 15, *, classes=None) -> float:
    """Classwise ECE: the mean over classes of the ECE of each one-vs-rest probability.

    .. math::

        \\text{classwise-ECE} = \\frac{1}{K} \\sum_{k=1}^{K} \\sum_{b=1}^{B}
            \\frac{|B_{k,b}|}{n} \\left| \\mathrm{freq}_k(B_{k,b}) - \\mathrm{conf}_k(B_{k,b})
            \\right|,

    where :math:`B_{k,b}` bins the samples by :math:`p_k` (equal width over [0, 1]),
    ``freq_k`` is the fraction of them with label k and ``conf_k`` their mean :math:`p_k`.
    Each term is netcal's binary ECE on (p_k, 1[y = k]).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels: column indices of ``y_proba``, or labels of ``classes``.
    y_proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    n_bins : int, default=15
        Number of equal-width bins over [0, 1], per class.
    classes : array-like of shape (n_classes,), default=None
        The label of each column. None: labels are column indices.

    Returns
    -------
    cw_ece : float
        In [0, 1]. Lower is better.

    References
    ----------
    .. [1] Kull, Perello-Nieto, Kängsepp, Silva Filho, Song and Flach, "Beyond temperature
       scaling: Obtaining well-calibrated multiclass probabilities with Dirichlet
       calibration", NeurIPS 2019, section 2 (classwise-ECE).

    Examples
    --------
    >>> proba = [[0.9, 0.1], [0.9, 0.1], [0.3, 0.7]]
    >>> round(classwise_calibration_error([0, 1, 1], proba, n_bins=5), 6)
    0.366667
    """
    y_enc, proba = _check_proba(y_true, y_proba, classes)
    metric = ECE(bins=_check_n_bins(n_bins))
    # netcal reads a 1-D X with 0/1 y as "p(y=1)" against the observed frequency
    per_class = [
        metric.measure(proba[:, k].copy(), (y_enc == k).astype(np.int64))
        for k in range(proba.shape[1])
    ]
    return float(np.mean(per_class))


class _ProbaScorer:
    """A scikit-learn scorer ``scorer(estimator, X, y) -> float`` over ``predict_proba``.

    Labels are mapped to columns with ``estimator.classes_``. ``sign=-1`` negates a loss so that
    greater is better, as scikit-learn's model selection expects (``make_scorer(...,
    greater_is_better=False)``).
    """

    def __init__(self, metric, sign: int, name: str, **kwargs):
        self._metric = metric
        self._sign = sign
        self._name = name
        self._kwargs = kwargs

    def __call__(self, estimator, X, y, sample_weight=None) -> float:
        if sample_weight is not None:
            raise ValueError(f"{self._name} does not support sample_weight.")
        proba = estimator.predict_proba(X)
        value = self._metric(y, proba, classes=estimator.classes_, **self._kwargs)
        return self._sign * value

    def __repr__(self) -> str:
        return f"{self._name}  # -{self._metric.__name__}(y, estimator.predict_proba(X))"


# The calling convention shared by the scorers' docstrings.
_SCORER_SECTIONS = """Parameters
----------
estimator : fitted classifier
    Has ``predict_proba`` and ``classes_``.
X : array-like of shape (n_samples, ...)
y : array-like of shape (n_samples,)
    True labels, as in ``estimator.classes_``.
sample_weight : None
    Not supported: anything but None raises ``ValueError``.

Returns
-------
score : float
    In [-1, 0]; 0 is perfectly calibrated.

"""

ece_scorer = _ProbaScorer(expected_calibration_error, -1, "ece_scorer")
ece_scorer.__doc__ = (
    """Scorer for ``GridSearchCV(scoring=ece_scorer)``: minus the ECE (15 bins).

``ece_scorer(estimator, X, y)`` calls ``estimator.predict_proba(X)``, maps the labels ``y`` to
columns with ``estimator.classes_`` and returns ``-expected_calibration_error(...)``: greater
is better, as scikit-learn's model selection expects.

"""
    + _SCORER_SECTIONS
    + """Examples
--------
>>> import numpy as np
>>> from sklearn.datasets import make_blobs
>>> from sklearn.model_selection import GridSearchCV
>>> from ebmclassifier import NGEBMClassifier
>>> from ebmclassifier.metrics import ece_scorer, expected_calibration_error
>>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
>>> labels = np.array(["a", "b", "c"])[y]
>>> search = GridSearchCV(NGEBMClassifier(max_epochs=2, random_state=0),
...                       {"beta": [0.0, 0.5]}, scoring=ece_scorer, cv=3).fit(X, labels)
>>> bool((search.cv_results_["mean_test_score"] <= 0).all())
True
>>> best = search.best_estimator_
>>> ece = expected_calibration_error(labels, best.predict_proba(X), classes=best.classes_)
>>> ece_scorer(best, X, labels) == -ece
True
"""
)
mce_scorer = _ProbaScorer(maximum_calibration_error, -1, "mce_scorer")
mce_scorer.__doc__ = (
    """Scorer for ``scoring=mce_scorer``: minus the MCE (15 bins).

As :data:`ece_scorer`, with :func:`maximum_calibration_error`: the worst bin instead of the
weighted mean over bins. Greater is better.

"""
    + _SCORER_SECTIONS
    + """Examples
--------
>>> from sklearn.datasets import make_blobs
>>> from sklearn.model_selection import cross_val_score
>>> from ebmclassifier import NGEBMClassifier
>>> from ebmclassifier.metrics import maximum_calibration_error, mce_scorer
>>> X, y = make_blobs(90, n_features=4, centers=3, random_state=0)
>>> clf = NGEBMClassifier(max_epochs=2, random_state=0)
>>> scores = cross_val_score(clf, X, y, scoring=mce_scorer, cv=3)
>>> scores.shape, bool((scores <= 0).all())
((3,), True)
>>> clf = clf.fit(X, y)
>>> mce_scorer(clf, X, y) == -maximum_calibration_error(y, clf.predict_proba(X))
True
"""
)
# doctest collects functions and classes only; the scorers are instances
__test__ = {"ece_scorer": ece_scorer.__doc__, "mce_scorer": mce_scorer.__doc__}


# ----------------------------------------------------------------------------- OOD detection


def _check_scores(name, scores) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError(
            f"{name} must be a non-empty 1-D array of finite scores (as returned by "
            f"score_ood). Got shape {scores.shape!r}"
            + ("" if scores.ndim != 1 or not scores.size else " with non-finite values")
            + "."
        )
    return scores


def ood_metrics(scores_in, scores_out) -> dict[str, float]:
    """AUROC, AUPR-in, AUPR-out and FPR at 95% TPR of an OOD score.

    Definitions as pytorch-ood's ``OODMetrics`` (Hendrycks & Gimpel 2017; Liang et al. 2018):

    - ``auroc``: area under the ROC curve with OOD as the positive class and the score as the
      decision value (0.5 = chance, 1 = perfect separation).
    - ``aupr_in``: area under the precision-recall curve with in-distribution as the positive
      class and the negated score as the decision value.
    - ``aupr_out``: the same with OOD positive and the score itself.
    - ``fpr95``: the fraction of in-distribution samples flagged as OOD at the first threshold
      (from the strictest down) that flags at least 95% of the OOD samples. Lower is better.

    The PR areas are trapezoidal over the full precision-recall curve (as pytorch-ood's
    ``auc(recall, precision)``), not scikit-learn's step-wise ``average_precision_score``.

    Parameters
    ----------
    scores_in : array-like of shape (n_in,)
        Scores of in-distribution samples. Higher = more likely OOD (``score_ood``).
    scores_out : array-like of shape (n_out,)
        Scores of out-of-distribution samples.

    Returns
    -------
    metrics : dict
        ``{"auroc": ..., "aupr_in": ..., "aupr_out": ..., "fpr95": ...}``, floats in [0, 1].
        pytorch-ood's ``OODMetrics().compute()`` names the same four values ``"AUROC"``,
        ``"AUPR-IN"``, ``"AUPR-OUT"`` and ``"FPR95TPR"``, in that order (its scores are
        oriented as here: higher = more OOD) with the definitions above.

    References
    ----------
    .. [1] Hendrycks and Gimpel, "A Baseline for Detecting Misclassified and
       Out-of-Distribution Examples in Neural Networks", ICLR 2017.
    .. [2] Liang, Li and Srikant, "Enhancing the Reliability of Out-of-distribution Image
       Detection in Neural Networks" (ODIN), ICLR 2018 (FPR at 95% TPR).

    Examples
    --------
    >>> m = ood_metrics([0.1, 0.2, 0.3], [0.25, 0.9, 1.0])
    >>> round(m["auroc"], 4), m["fpr95"]
    (0.8889, 0.3333333333333333)
    """
    scores_in = _check_scores("scores_in", scores_in)
    scores_out = _check_scores("scores_out", scores_out)
    scores = np.concatenate([scores_in, scores_out])
    is_ood = np.concatenate([np.zeros(scores_in.size), np.ones(scores_out.size)])

    precision, recall, _ = precision_recall_curve(is_ood, scores)
    aupr_out = auc(recall, precision)
    precision, recall, _ = precision_recall_curve(1 - is_ood, -scores)
    aupr_in = auc(recall, precision)

    # every threshold kept, so the first point with TPR >= 0.95 is the true one
    fpr, tpr, _ = roc_curve(is_ood, scores, drop_intermediate=False)
    fpr95 = fpr[np.searchsorted(tpr, 0.95, side="left")]
    return {
        "auroc": float(roc_auc_score(is_ood, scores)),
        "aupr_in": float(aupr_in),
        "aupr_out": float(aupr_out),
        "fpr95": float(fpr95),
    }


# ----------------------------------------------------------------------- selective classification


def _selective_inputs(y_true, y_pred, confidence, classes) -> tuple[np.ndarray, np.ndarray]:
    """Validate; return (confidence (n,) float64, error (n,) 0/1 int64)."""
    y_pred = np.asarray(y_pred)
    if y_pred.ndim == 2:
        y_enc, proba = _check_proba(y_true, y_pred, classes)
        error = (proba.argmax(axis=1) != y_enc).astype(np.int64)
        if confidence is None:
            confidence = proba.max(axis=1)
    else:
        y_true = np.asarray(y_true)
        if y_pred.ndim != 1 or y_true.shape != y_pred.shape or y_true.size == 0:
            raise ValueError(
                "y_true and y_pred must be non-empty and of the same shape (n_samples,), or "
                "y_pred the (n_samples, n_classes) probabilities of predict_proba. Got shapes "
                f"{y_true.shape!r} and {y_pred.shape!r}."
            )
        if confidence is None:
            raise ValueError(
                "confidence is needed when y_pred holds labels: pass e.g. "
                "predict_proba(X).max(axis=1) or -score_ood(X), or pass the probabilities "
                "as y_pred to rank by the top-label probability."
            )
        error = (y_true != y_pred).astype(np.int64)
    confidence = np.asarray(confidence, dtype=np.float64)
    if confidence.shape != error.shape or not np.all(np.isfinite(confidence)):
        raise ValueError(
            f"confidence must be a 1-D array of {error.size} finite values, one per sample. "
            f"Got shape {confidence.shape!r}"
            + ("" if confidence.shape != error.shape else " with non-finite values")
            + "."
        )
    return confidence, error


def _ranked_errors(confidence, error):
    """Samples from the most to the least confident, grouped by equal confidence.

    Returns the distinct thresholds (decreasing), and per group the number of samples and
    errors accepted at that threshold, cumulated (n_groups,).
    """
    order = np.argsort(-confidence, kind="stable")
    thresholds, group = np.unique(-confidence[order], return_inverse=True)
    n_accepted = np.cumsum(np.bincount(group))
    n_errors = np.cumsum(np.bincount(group, weights=error[order]))
    return -thresholds, n_accepted, n_errors


def risk_coverage_curve(
    y_true, y_pred, confidence=None, *, classes=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Selective risk against coverage, one point per distinct confidence threshold.

    A selective classifier answers when its confidence is at least a threshold ``t`` and
    abstains otherwise (Geifman & El-Yaniv 2017). At each distinct confidence value ``t``
    (from the highest down):

    .. math::
        \\mathrm{coverage}(t) = \\frac{|\\{i : c_i \\ge t\\}|}{n}, \\qquad
        \\mathrm{risk}(t) = \\frac{|\\{i : c_i \\ge t,\\ \\hat y_i \\ne y_i\\}|}
        {|\\{i : c_i \\ge t\\}|}

    (the 0/1 loss of the accepted samples). Samples of equal confidence are accepted or
    rejected together, so each point is one a threshold can reach.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted labels, or the probabilities of ``predict_proba`` (the prediction is then
        the most probable column, and the default confidence its probability).
    confidence : array-like of shape (n_samples,) or None, default=None
        Higher = more confident. Required with predicted labels; with probabilities ``None``
        means ``max_k p_k``.
    classes : array-like of shape (n_classes,), default=None
        The label of each probability column (``estimator.classes_``); see the module notes.

    Returns
    -------
    coverage : ndarray of shape (n_thresholds,)
        Increasing, ending at 1.
    risk : ndarray of shape (n_thresholds,)
        Error rate among the accepted samples at each coverage.
    thresholds : ndarray of shape (n_thresholds,)
        The distinct confidences, decreasing.

    References
    ----------
    .. [1] Geifman, Y. and El-Yaniv, R. "Selective Classification for Deep Neural Networks".
       NeurIPS 2017.

    Examples
    --------
    >>> coverage, risk, thresholds = risk_coverage_curve(
    ...     [0, 1, 1, 0], [0, 0, 1, 1], confidence=[0.9, 0.8, 0.8, 0.6])
    >>> coverage.tolist(), risk.round(4).tolist(), thresholds.tolist()
    ([0.25, 0.75, 1.0], [0.0, 0.3333, 0.5], [0.9, 0.8, 0.6])
    """
    confidence, error = _selective_inputs(y_true, y_pred, confidence, classes)
    thresholds, n_accepted, n_errors = _ranked_errors(confidence, error)
    return n_accepted / error.size, n_errors / n_accepted, thresholds


def aurc(y_true, y_pred, confidence=None, *, classes=None) -> float:
    """Area under the risk-coverage curve (AURC), lower is better.

    The definition of Geifman, Uziel & El-Yaniv (2019): rank the ``n`` samples from the most
    to the least confident and average the selective risk over the ``n`` coverages ``k / n``,

    .. math::
        \\mathrm{AURC} = \\frac{1}{n} \\sum_{k=1}^{n} \\frac{e_k}{k},

    where ``e_k`` is the number of errors among the ``k`` most confident samples. Ties:
    samples of equal confidence have no order, so ``e_k`` is its expectation over a uniformly
    random order inside each group of equal confidence (within a group of ``m`` samples with
    ``r`` errors, each accepted sample adds ``r / m`` errors). Without ties this is the usual
    sum; with ties the result no longer depends on how a sort happens to break them.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    y_pred : array-like of shape (n_samples,) or (n_samples, n_classes)
        Predicted labels or probabilities, as for :func:`risk_coverage_curve`.
    confidence : array-like of shape (n_samples,) or None, default=None
        Higher = more confident; ``None`` with probabilities means ``max_k p_k``.
    classes : array-like of shape (n_classes,), default=None
        The label of each probability column.

    Returns
    -------
    aurc : float
        In [0, 1]; 0 only without errors. For given predictions, ranking every error below
        every correct one gives the smallest value.

    References
    ----------
    .. [1] Geifman, Y., Uziel, G. and El-Yaniv, R. "Bias-Reduced Uncertainty Estimation for
       Deep Neural Classifiers". ICLR 2019.

    Examples
    --------
    >>> # coverages 1/4..4/4: risks 0, (0 + 1/2)/2 (a tie of one error and one hit), 1/3, 2/4
    >>> round(aurc([0, 1, 1, 0], [0, 0, 1, 1], confidence=[0.9, 0.8, 0.8, 0.6]), 6)
    0.270833
    >>> aurc([0, 1], [[0.9, 0.1], [0.3, 0.7]])  # two correct predictions
    0.0
    """
    confidence, error = _selective_inputs(y_true, y_pred, confidence, classes)
    _, n_accepted, n_errors = _ranked_errors(confidence, error)
    k = np.arange(1, error.size + 1)
    group = np.searchsorted(n_accepted, k)  # the group holding the k-th ranked sample
    before_n = np.concatenate([[0], n_accepted])[group]
    before_e = np.concatenate([[0.0], n_errors])[group]
    size = n_accepted[group] - before_n
    expected_errors = before_e + (k - before_n) * (n_errors[group] - before_e) / size
    return float(np.mean(expected_errors / k))


# ----------------------------------------------------------------------------- robustness


def _as_float32(X) -> np.ndarray:
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    X = np.asarray(X, dtype=np.float32)
    if X.ndim < 2 or X.shape[0] == 0 or not np.all(np.isfinite(X)):
        raise ValueError(
            "X must be a non-empty numeric array of shape (n_samples, ...) without NaN or inf. "
            f"Got shape {X.shape!r}."
        )
    return X


def adversarial_accuracy(
    estimator,
    X,
    y,
    epsilons: Sequence[float],
    norm: str = "linf",
    steps: int = 10,
    step_size: float | None = None,
    random_start: bool = True,
    random_state=None,
    batch_size: int = 256,
    *,
    preprocess: torch.nn.Module | None = None,
    input_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """Accuracy of a fitted estimator under a PGD attack, for each epsilon.

    Each sample is attacked with :func:`ebmclassifier.attacks.pgd_attack` on the estimator's
    own network (its fitted ``module_``, on its ``device_``), maximising the cross-entropy of
    the true label inside the ``norm`` ball of radius epsilon, clipped to a box: one range for
    all features, by default the estimator's training range (``estimator.input_range()``,
    ``(0.0, 1.0)`` for images in [0, 1]). The attack's last iterate counts as robust when the
    network still predicts the true label (:func:`ebmclassifier.attacks.robust_accuracy`).

    Parameters
    ----------
    estimator : fitted ebmclassifier estimator
        Needs ``module_`` (inputs -> logits), ``classes_``, ``device_`` and ``predict_proba``
        (which validates ``X``); its ``input_range()``, if it has one, gives the default box.
    X : array-like of shape (n_samples, ...)
        Inputs, in the shape the estimator takes (before ``preprocess``, if given).
    y : array-like of shape (n_samples,)
        True labels, as in ``estimator.classes_``.
    epsilons : sequence of float
        Attack radii (>= 0); ``0`` gives the clean accuracy.
    norm : {"linf", "l2"}, default="linf"
        Threat model.
    steps : int, default=10
        PGD steps.
    step_size : float or None, default=None
        Step length; None means ``2.5 * eps / steps``.
    random_start : bool, default=True
        Start each attack from a uniform draw in the ball.
    random_state : int, RandomState or None, default=None
        Seeds the random starts (same starts for every epsilon, up to scale).
    batch_size : int, default=256
        Samples attacked at once.
    preprocess : torch.nn.Module or None, default=None
        A layer applied to ``X`` before the estimator's network, inside the attacked graph, on
        the estimator's device: the ball and the box are then in the units of ``X``. For an
        estimator trained on transformed inputs, e.g. standardized ones
        (:meth:`ebmclassifier.compare.Standardizer.as_module`), attacked in the data's units.
    input_range : (float, float) or None, default=None
        The box ``(low, high)``, in the units of ``X``; None: the estimator's
        ``input_range()``, or no box for an estimator without one.

    Returns
    -------
    accuracies : ndarray of shape (len(epsilons),)
        Robust accuracy at each epsilon, in [0, 1]; draw it against ``epsilons``.

    References
    ----------
    .. [1] Madry et al., "Towards Deep Learning Models Resistant to Adversarial Attacks",
       ICLR 2018.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from ebmclassifier import NGEBMClassifier
    >>> X, y = make_blobs(60, n_features=4, centers=3, random_state=0)
    >>> clf = NGEBMClassifier(max_epochs=2, random_state=0).fit(X, y)
    >>> acc = adversarial_accuracy(clf, X, y, epsilons=[0.0, 0.5, 5.0], random_state=0)
    >>> acc.shape
    (3,)
    >>> bool(acc[0] == clf.score(X, y)), bool(acc[0] >= acc[1] >= acc[2])
    (True, True)
    """
    X, y_enc = _attack_data(estimator, X, y)
    epsilons = list(np.atleast_1d(np.asarray(epsilons, dtype=np.float64)))
    if not epsilons or any(not (e >= 0 and np.isfinite(e)) for e in epsilons):
        raise ValueError(
            f"epsilons must be a non-empty list of finite numbers >= 0. Got {epsilons!r}."
        )
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS!r}. Got {norm!r} instead.")
    batch_size = _check_positive_int("batch_size", batch_size)
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    if input_range is None and hasattr(estimator, "input_range"):
        input_range = estimator.input_range()
    low, high = (None, None) if input_range is None else (float(v) for v in input_range)
    module = estimator.module_
    if preprocess is not None:
        module = torch.nn.Sequential(preprocess, module)
    return robust_accuracy(
        module, X, y_enc, epsilons, device=torch.device(estimator.device_), seed=seed,
        batch_size=batch_size, norm=norm, steps=steps, step_size=step_size,
        random_start=random_start, input_min=low, input_max=high,
    )  # fmt: skip


def _attack_data(estimator, X, y) -> tuple[np.ndarray, np.ndarray]:
    """``X`` as float32 and ``y`` encoded by ``estimator.classes_``, both checked."""
    for attr in ("module_", "classes_", "device_"):
        if not hasattr(estimator, attr):
            raise TypeError(
                f"adversarial_accuracy needs a fitted ebmclassifier estimator with 'module_', "
                f"'classes_' and 'device_'; {type(estimator).__name__} has no {attr!r}. "
                "Call fit first."
            )
    X = _as_float32(X)
    try:  # the estimator's own check of the input, on one sample
        estimator.predict_proba(X[:1])
    except ValueError as exc:
        raise ValueError(
            f"X has samples of shape {X.shape[1:]}, which {type(estimator).__name__} does not "
            f"take: {exc} Pass X as it was given to fit."
        ) from exc
    y_enc = encode_labels(y, estimator.classes_)
    if y_enc.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} samples but y has {y_enc.shape[0]}.")
    return X, y_enc
