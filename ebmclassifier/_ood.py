"""OOD decisions: a threshold on ``score_ood`` calibrated on held-out in-distribution data.

A mixin shared by every estimator of the library (and the meta-estimators): it needs only the
estimator's own ``score_ood(X, method)`` and ``ood_method``. The threshold is chosen, as the
usual "FPR at 95% TPR" evaluation does, so that a fraction ``tpr`` of the in-distribution
calibration samples are *not* flagged: scikit-learn's outlier detectors use the same idea with
``contamination`` (``offset_`` of ``LocalOutlierFactor``).
"""

from __future__ import annotations

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .metrics import threshold_at_tpr

__all__ = ["OODDecisionMixin"]


class OODDecisionMixin:
    """``calibrate_ood`` and ``predict_ood`` over an estimator's ``score_ood``."""

    def calibrate_ood(self, X_in, tpr: float = 0.95, method: str | None = None):
        """Choose the OOD threshold from in-distribution data the model did not train on.

        Sets ``ood_threshold_`` to
        :func:`~ebmclassifier.metrics.threshold_at_tpr` of the scores
        ``score_ood(X_in, method)``: the k-th smallest of the ``n`` scores,
        ``k = ceil(tpr * n)``, the smallest threshold that keeps at least a fraction ``tpr``
        of ``X_in`` (the true positive rate, in-distribution positive, of the OOD papers'
        FPR at 95% TPR, ``ood_metrics(...)["fpr95_in"]``). :meth:`predict_ood` then flags
        ``n - k`` of the calibration samples when their scores are distinct (fewer with ties
        at the threshold).

        Parameters
        ----------
        X_in : array-like
            In-distribution samples the model was *not* trained on (a held-out split); on
            training data the threshold would be too low and flag too many new inputs.
        tpr : float in (0, 1), default=0.95
            The fraction of in-distribution inputs to keep.
        method : {"energy", "max_softmax", "approx_mass"} or None, default=None
            The score; ``None`` uses the ``ood_method`` parameter. Stored as ``ood_method_``.
            Training again (``fit``, ``partial_fit``) changes the scores and drops both
            attributes: calibrate again after it.

        Returns
        -------
        self

        Raises
        ------
        NotFittedError
            Before ``fit``.
        ValueError
            For ``tpr`` outside (0, 1), an unknown method or bad ``X_in``.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(200, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=5, random_state=0).fit(X[:100], y[:100])
        >>> clf = clf.calibrate_ood(X[100:], tpr=0.9)  # held-out in-distribution data
        >>> float(clf.predict_ood(X[100:]).mean())  # 10% of the calibration data flagged
        0.1
        >>> clf.ood_method_, clf.ood_threshold_ > 0  # NG-EBM's default score, ||dE/dx||
        ('approx_mass', True)
        """
        check_is_fitted(self)
        threshold_at_tpr([0.0], tpr)  # a bad tpr fails before scoring
        method = self.ood_method if method is None else method
        self.ood_threshold_ = threshold_at_tpr(self.score_ood(X_in, method=method), tpr)
        self.ood_method_ = method
        return self

    def _forget_ood_threshold(self) -> None:
        """Drop ``ood_threshold_`` and ``ood_method_``, for a fit that changes the scores."""
        for name in ("ood_threshold_", "ood_method_"):
            vars(self).pop(name, None)

    def predict_ood(self, X) -> np.ndarray:
        """Flag out-of-distribution inputs: ``score_ood(X, ood_method_) > ood_threshold_``.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        ndarray of shape (n_samples,), bool
            True = flagged out-of-distribution.

        Raises
        ------
        NotFittedError
            Before ``fit``, or before :meth:`calibrate_ood` (since the last training).

        Examples
        --------
        >>> from sklearn.datasets import make_blobs
        >>> from ebmclassifier import NGEBMClassifier
        >>> X, y = make_blobs(200, n_features=4, centers=3, random_state=0)
        >>> clf = NGEBMClassifier(max_epochs=5, random_state=0).fit(X[:100], y[:100])
        >>> flags = clf.calibrate_ood(X[100:]).predict_ood(X[100:])
        >>> flags.dtype, int(flags.sum())  # 5% of 100 held-out samples
        (dtype('bool'), 5)
        """
        check_is_fitted(self)
        if not hasattr(self, "ood_threshold_"):
            raise NotFittedError(
                f"This {type(self).__name__} has no OOD threshold yet; call "
                "calibrate_ood(X_in) with held-out in-distribution data before predict_ood."
            )
        return self.score_ood(X, method=self.ood_method_) > self.ood_threshold_
