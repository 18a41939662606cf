"""The source side of a shift for :class:`~ebmclassifier.DistributionalConstraint`.

What the adaptation knows of the distribution the model was trained on, besides the model:

- the training priors ``π``, which ``priors="em"`` and ``method="bayes"`` divide by
  (:func:`source_priors`): the ``train_priors`` parameter, else the class shares of the
  calibration set, else what the estimator records (:func:`recorded_priors`): the library's
  estimators and scikit-learn's naive Bayes keep ``class_prior_``, its discriminant analyses
  ``priors_``, its discrete naive Bayes ``class_log_prior_``;
- the labelled held-out samples of ``calibration="temperature" | "bcts"``, and the calibration
  fitted on them (:func:`fit_calibration`).

Per-class vectors are checked by :func:`class_vector`, in one wording for every parameter.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline

from .calibration import fit_temperature

#: How far from 1 a vector of shares may sum.
PRIOR_TOL = 1e-6


def recorded_priors(estimator) -> np.ndarray | None:
    """The class priors a fitted classifier records, in the order of its ``classes_``, or None.

    ``class_prior_`` (the library's estimators, ``GaussianNB``, ``DummyClassifier``),
    ``priors_`` (``LinearDiscriminantAnalysis``, ``QuadraticDiscriminantAnalysis``),
    ``exp(class_log_prior_)`` (``MultinomialNB`` and the other discrete naive Bayes), looked
    for through a ``Pipeline``'s last step, a ``FrozenEstimator`` and the fitted classifiers of
    a ``CalibratedClassifierCV`` (the mean of their priors: each saw its training fold).
    """
    for name in ("class_prior_", "priors_"):
        value = getattr(estimator, name, None)
        if value is not None:
            return np.asarray(value, dtype=float)
    log_prior = getattr(estimator, "class_log_prior_", None)
    if log_prior is not None:
        return np.exp(np.asarray(log_prior, dtype=float))
    if isinstance(estimator, Pipeline):
        return recorded_priors(estimator[-1])
    if isinstance(estimator, FrozenEstimator):
        return recorded_priors(estimator.estimator)
    if isinstance(estimator, CalibratedClassifierCV):
        fitted = getattr(estimator, "calibrated_classifiers_", ())
        inner = [recorded_priors(c.estimator) for c in fitted]
        if inner and all(p is not None and p.shape == inner[0].shape for p in inner):
            return np.mean(inner, axis=0)
    return None


def is_share_array(priors) -> bool:
    """An array-like of numbers, one share per class (a dict and a str are not)."""
    if isinstance(priors, dict | str) or priors is None:
        return False
    try:
        return np.asarray(priors, dtype=float).ndim == 1
    except (TypeError, ValueError):
        return False


def class_vector(name: str, value, classes: list) -> np.ndarray:
    """A dict ``{label: share}`` or an array in the order of ``classes``, checked: shares.

    Finite, non-negative, summing to 1 within :data:`PRIOR_TOL`; returned renormalised. The
    errors name the parameter ``name`` of ``DistributionalConstraint``.
    """
    if isinstance(value, dict):
        unknown = [k for k in value if k not in classes]
        missing = [c for c in classes if c not in value]
        if unknown or missing:
            raise ValueError(
                f"The {name!r} parameter of DistributionalConstraint must give a share for "
                f"every class of the estimator, {classes!r}. Got {value!r}: "
                + (f"unknown labels {unknown!r}" if unknown else f"missing {missing!r}")
                + "."
            )
        vector = np.array([value[c] for c in classes], dtype=float)
    else:
        vector = np.asarray(value, dtype=float)
        if vector.shape != (len(classes),):
            raise ValueError(
                f"The {name!r} parameter of DistributionalConstraint must have one share per "
                f"class, in the order of the estimator's classes_ {classes!r}: shape "
                f"({len(classes)},). Got shape {vector.shape}; or pass a dict {{label: share}}."
            )
    if not np.all(np.isfinite(vector)) or np.any(vector < 0):
        raise ValueError(
            f"The {name!r} parameter of DistributionalConstraint must hold finite, "
            f"non-negative shares. Got {value!r}."
        )
    if abs(vector.sum() - 1.0) > PRIOR_TOL:
        raise ValueError(
            f"The {name!r} parameter of DistributionalConstraint must sum to 1 (within "
            f"{PRIOR_TOL}). Got a sum of {vector.sum()!r}; divide by it if the shares are "
            "right but unnormalised."
        )
    return vector / vector.sum()


def source_priors(
    train_priors, estimator, classes: list, calibration_shares: np.ndarray | None, needed_by: str
) -> np.ndarray:
    """``π``: ``train_priors``, else the calibration set's shares, else the estimator's record.

    Checked positive for every class (the posteriors are divided by it); ``needed_by`` says
    what asks for it in the errors.
    """
    if train_priors is not None:
        vector = class_vector("train_priors", train_priors, classes)
        if np.any(vector <= 0):
            raise ValueError(
                "The 'train_priors' parameter of DistributionalConstraint must be positive for "
                f"every class (the posteriors are divided by it). Got {train_priors!r}."
            )
        return vector
    if calibration_shares is not None:
        return calibration_shares
    name = type(estimator).__name__
    recorded = recorded_priors(estimator)
    if recorded is None:
        raise ValueError(
            f"DistributionalConstraint with {needed_by} needs the training class priors, and "
            f"{name} records none (no class_prior_, priors_ or class_log_prior_, also looked "
            "for through a Pipeline's last step, a FrozenEstimator and a CalibratedClassifierCV; "
            "an estimator of this library loaded from a file written before it recorded "
            "class_prior_ has none): pass train_priors, e.g. np.bincount(y_train) / "
            "len(y_train) in the order of classes_."
        )
    if recorded.shape != (len(classes),) or not np.all(recorded > 0):
        zero = [c for c, p in zip(classes, recorded, strict=False) if not p > 0]
        raise ValueError(
            f"DistributionalConstraint with {needed_by} divides by the training class priors, "
            f"but those {name} records, {recorded.tolist()!r}, are not positive for every class "
            f"of {classes!r} (0 for {zero!r}: it was never trained on them, e.g. classes named "
            "in partial_fit's classes= without samples). Pass train_priors."
        )
    return recorded / recorded.sum()


def calibration_labels(calibration_set, classes: list) -> tuple[object, np.ndarray, np.ndarray]:
    """``(X_val, codes, shares)`` of ``calibration_set=(X_val, y_val)``, checked.

    ``codes`` are the positions of the labels in ``classes``; ``shares`` their class shares,
    each positive (a class without a held-out sample has no calibrated bias, and EM divides by
    its share).
    """
    if not (isinstance(calibration_set, tuple | list) and len(calibration_set) == 2):
        raise ValueError(
            "calibration_set must be a pair (X_val, y_val) of labelled held-out samples. Got "
            f"{type(calibration_set).__name__} instead."
        )
    X_val, y_val = calibration_set
    labels = np.asarray(y_val).ravel()
    n_samples = X_val.shape[0] if hasattr(X_val, "shape") else len(X_val)
    if len(labels) != n_samples:
        raise ValueError(
            f"calibration_set's X_val and y_val must have the same number of samples. Got "
            f"{n_samples} and {len(labels)}."
        )
    index = {label: position for position, label in enumerate(classes)}
    unknown = sorted({v for v in labels.tolist() if v not in index}, key=str)
    if unknown:
        raise ValueError(
            f"calibration_set's y_val holds labels {unknown!r} that are not classes of the "
            f"estimator, {classes!r}."
        )
    codes = np.array([index[v] for v in labels.tolist()], dtype=np.int64)
    counts = np.bincount(codes, minlength=len(classes))
    if np.any(counts == 0):
        missing = [c for c, k in zip(classes, counts, strict=True) if k == 0]
        raise ValueError(
            f"calibration_set must hold samples of every class; it has none of {missing!r}. "
            "Use a stratified held-out split (sklearn.model_selection.train_test_split(..., "
            "stratify=y))."
        )
    return X_val, codes, counts / counts.sum()


def fit_calibration(
    calibration: str | None,
    calibration_set,
    log_proba_of: Callable,
    classes: list,
    *,
    tol: float,
    max_iter: int,
) -> tuple[float | None, np.ndarray | None, np.ndarray | None]:
    """``(T, b, shares)`` of ``calibration`` on ``calibration_set``; ``(None,) * 3`` without.

    ``log_proba_of(X_val)`` gives the base model's ``log p(y|x)``;
    :func:`~ebmclassifier.distributional.fit_temperature` fits ``T`` (and ``b`` for
    ``"bcts"``); ``shares`` are the calibration set's class shares.
    """
    if calibration is None:
        if calibration_set is not None:
            raise ValueError(
                "calibration_set is given, but calibration=None: pass calibration='bcts' or "
                "'temperature' to fit one on it, or leave it out."
            )
        return None, None, None
    if calibration_set is None:
        raise ValueError(
            f"calibration={calibration!r} is fitted on labelled held-out samples: pass them to "
            "fit(X, calibration_set=(X_val, y_val))."
        )
    X_val, codes, shares = calibration_labels(calibration_set, classes)
    temperature, bias, residual = fit_temperature(
        log_proba_of(X_val), codes, bias=calibration == "bcts", tol=tol, max_iter=max_iter
    )
    if residual > tol:
        warnings.warn(
            f"DistributionalConstraint: the {calibration} calibration stopped with a gradient "
            f"of {residual:.3g} > tol={tol}; raise max_iter or tol.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return temperature, bias, shares
