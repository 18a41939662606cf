"""Calibration errors of predicted probabilities (netcal's binning), and their scorers."""

from __future__ import annotations

import numpy as np
from netcal.metrics import ECE, MCE

from .._utils.modes import kept_modes
from ._checks import _check_n_bins, _check_proba, top_label

__all__ = [
    "expected_calibration_error",
    "maximum_calibration_error",
    "classwise_calibration_error",
    "ece_scorer",
    "mce_scorer",
]


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
    confidence, correct = top_label(y_true, y_proba, classes)
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
    confidence, correct = top_label(y_true, y_proba, classes)
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
        with kept_modes(estimator):  # predict_proba puts the modules in eval mode
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
