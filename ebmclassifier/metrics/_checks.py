"""Input checks shared by the metrics: labels to columns, probabilities, bin counts."""

from __future__ import annotations

import numbers

import numpy as np

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


def top_label(y_true, y_proba, classes) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence max_k p_k (n,) and correctness 1[argmax_k p_k == y] (n,)."""
    y_enc, proba = _check_proba(y_true, y_proba, classes)
    confidence = proba.max(axis=1)
    correct = (proba.argmax(axis=1) == y_enc).astype(np.int64)
    return confidence, correct
