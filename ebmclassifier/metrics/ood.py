"""OOD detection metrics: AUROC, AUPR-in, AUPR-out, FPR at 95% TPR, and the threshold rule.

"FPR at 95% TPR" has two conventions in the literature. The OOD papers (Liang et al. 2018,
Liu et al. 2020, and the tables they are compared with) take the *in-distribution* samples
as positive: keep 95% of them, report the share of OOD samples kept too (``fpr95_in``, also
``fpr95``). pytorch-ood's ``FPR95TPR`` takes OOD as positive: flag 95% of the OOD samples,
report the share of in-distribution samples flagged (``fpr95_out``). One rule places the
papers' threshold, :func:`threshold_at_tpr`; ``calibrate_ood`` and ``compare`` use it too.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from sklearn.metrics import auc, precision_recall_curve, roc_auc_score, roc_curve

__all__ = ["ood_metrics", "threshold_at_tpr"]


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


def threshold_at_tpr(scores_in, tpr: float = 0.95) -> float:
    """The OOD threshold that keeps a fraction ``tpr`` of the in-distribution samples.

    With ``n`` in-distribution scores (oriented as ``score_ood``: higher = more OOD), the
    threshold is the ``k``-th smallest, ``k = ceil(tpr * n)``: the smallest threshold that
    keeps (does not flag) at least a fraction ``tpr`` of them, a sample being flagged when its
    score is *above* the threshold. This is the in-distribution-positive convention of the
    OOD papers' "FPR at 95% TPR" (``ood_metrics(...)["fpr95_in"]`` is the share of OOD
    scores at or below ``threshold_at_tpr(scores_in, 0.95)``), the rule of
    ``calibrate_ood`` and of ``compare``'s OOD decisions. With ties at the threshold, more
    than ``k`` samples may be kept.

    Parameters
    ----------
    scores_in : array-like of shape (n_in,)
        Scores of in-distribution samples, higher = more likely OOD.
    tpr : float in (0, 1), default=0.95
        The fraction of in-distribution samples to keep (the true positive rate with
        in-distribution positive).

    Returns
    -------
    threshold : float
        Flag a sample as OOD when its score is greater than this.

    Raises
    ------
    ValueError
        For ``tpr`` outside (0, 1), or scores that are not a non-empty 1-D finite array.

    References
    ----------
    .. [1] Liang, Li and Srikant, "Enhancing the Reliability of Out-of-distribution Image
       Detection in Neural Networks" (ODIN), ICLR 2018.
    .. [2] Liu, Wang, Owens and Li, "Energy-based Out-of-distribution Detection", NeurIPS
       2020.

    Examples
    --------
    >>> threshold_at_tpr([0.4, 0.1, 0.3, 0.2], tpr=0.75)  # keep 3 of 4: the 3rd smallest
    0.3
    """
    if isinstance(tpr, bool) or not isinstance(tpr, Real) or not 0 < tpr < 1:
        raise ValueError(
            f"tpr must be a float in the open interval (0, 1), the fraction of "
            f"in-distribution inputs to keep. Got {tpr!r} instead; 0.95 is usual."
        )
    scores_in = _check_scores("scores_in", scores_in)
    n = scores_in.size
    # ceil, forgiving the rounding of tpr * n (0.9 * 100 is 90.00000000000001)
    k = min(max(math.ceil(tpr * n - 1e-9), 1), n)
    return float(np.partition(scores_in, k - 1)[k - 1])


def ood_metrics(scores_in, scores_out) -> dict[str, float]:
    """AUROC, AUPR-in, AUPR-out and FPR at 95% TPR (both conventions) of an OOD score.

    AUROC and AUPR as pytorch-ood's ``OODMetrics`` (Hendrycks & Gimpel 2017):

    - ``auroc``: area under the ROC curve with OOD as the positive class and the score as the
      decision value (0.5 = chance, 1 = perfect separation).
    - ``aupr_in``: area under the precision-recall curve with in-distribution as the positive
      class and the negated score as the decision value.
    - ``aupr_out``: the same with OOD positive and the score itself.
    - ``fpr95_in``: the OOD papers' FPR at 95% TPR (Liang et al. 2018; Liu et al. 2020),
      in-distribution positive: the fraction of OOD samples *kept* (score at or below the
      threshold) when the threshold keeps 95% of the in-distribution samples
      (:func:`threshold_at_tpr`). Compare it with published tables. Lower is better.
    - ``fpr95``: the same value as ``fpr95_in``, under the name of the public contract.
    - ``fpr95_out``: pytorch-ood's ``FPR95TPR``, OOD positive: the fraction of
      in-distribution samples flagged as OOD at the first threshold (from the strictest down)
      that flags at least 95% of the OOD samples. Lower is better.

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
        ``auroc``, ``aupr_in``, ``aupr_out``, ``fpr95`` (= ``fpr95_in``), ``fpr95_in`` and
        ``fpr95_out``, floats in [0, 1]. pytorch-ood's ``OODMetrics().compute()`` names
        ``auroc``, ``aupr_in``, ``aupr_out`` and ``fpr95_out`` ``"AUROC"``, ``"AUPR-IN"``,
        ``"AUPR-OUT"`` and ``"FPR95TPR"`` (its scores are oriented as here: higher = more
        OOD).

    References
    ----------
    .. [1] Hendrycks and Gimpel, "A Baseline for Detecting Misclassified and
       Out-of-Distribution Examples in Neural Networks", ICLR 2017.
    .. [2] Liang, Li and Srikant, "Enhancing the Reliability of Out-of-distribution Image
       Detection in Neural Networks" (ODIN), ICLR 2018 (FPR at 95% TPR, in-distribution
       positive).
    .. [3] Liu, Wang, Owens and Li, "Energy-based Out-of-distribution Detection", NeurIPS
       2020 (the same FPR95).

    Examples
    --------
    >>> m = ood_metrics([0.1, 0.2, 0.3], [0.25, 0.9, 1.0])
    >>> round(m["auroc"], 4), round(m["fpr95_in"], 4), round(m["fpr95_out"], 4)
    (0.8889, 0.3333, 0.3333)
    >>> m["fpr95"] == m["fpr95_in"]
    True
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
    fpr95_out = float(fpr[np.searchsorted(tpr, 0.95, side="left")])
    fpr95_in = float(np.mean(scores_out <= threshold_at_tpr(scores_in, 0.95)))
    return {
        "auroc": float(roc_auc_score(is_ood, scores)),
        "aupr_in": float(aupr_in),
        "aupr_out": float(aupr_out),
        "fpr95": fpr95_in,
        "fpr95_in": fpr95_in,
        "fpr95_out": fpr95_out,
    }
