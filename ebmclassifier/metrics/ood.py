"""OOD detection metrics: AUROC, AUPR-in, AUPR-out and FPR at 95% TPR."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import auc, precision_recall_curve, roc_auc_score, roc_curve

__all__ = ["ood_metrics"]


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
