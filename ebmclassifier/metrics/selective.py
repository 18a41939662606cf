"""Selective classification: the risk-coverage curve and its area (AURC)."""

from __future__ import annotations

import numpy as np

from ._checks import _check_proba

__all__ = ["risk_coverage_curve", "aurc"]


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
