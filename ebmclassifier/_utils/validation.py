"""Validation at the public boundary of the estimators: their data, weights and training parameters.

:func:`check_X` and :func:`check_training_data` validate the input of the estimators once, with
scikit-learn's own ``validate_data``, so the inner code trusts its types;
:func:`check_sample_weight` turns ``sample_weight`` and the ``class_weight`` parameter into one
weight per sample; :func:`check_training_params` checks the parameters every estimator shares.
The parameter checker itself, ``ParamChecker``, knows no scikit-learn and
lives in ``_utils/parameters.py``, so that the functional core can check its own arguments.
"""

from __future__ import annotations

from math import prod
from numbers import Real

import numpy as np
import torch
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import assert_all_finite, check_consistent_length, column_or_1d
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data
from skorch.callbacks import Callback
from torch import nn

from .parameters import ParamChecker, is_real
from .streamed import DatasetRows, StreamedRows, is_streamed, streamed_rows, tensors_of_dataset

__all__ = [
    "check_X",
    "check_dataset_labels",
    "dataset_labels",
    "check_known_labels",
    "check_partial_fit_classes",
    "check_sample_weight",
    "check_some_weight",
    "check_training_data",
    "check_training_params",
    "check_warm_start_classes",
]


def _is_callback(item) -> bool:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        item = item[1]  # a named callback
    return isinstance(item, Callback) or (isinstance(item, type) and issubclass(item, Callback))


def check_training_params(check: ParamChecker, estimator) -> None:
    """Add the problems of the parameters that skorch builds objects from.

    ``module`` (``None``, a ``torch.nn.Module`` or something that builds one), ``criterion``,
    ``optimizer`` and the iterators must be callable (a string such as ``"adam"`` is not),
    ``train_split`` callable or ``None``, and ``callbacks`` ``None``, ``"disable"`` or a list
    of skorch callbacks (instances, classes or ``(name, callback)`` pairs), so that none of
    them fails inside skorch or torch once training has started.
    """
    module = estimator.module
    check.satisfies(
        "module",
        module is None or isinstance(module, nn.Module) or callable(module),
        "None, a torch.nn.Module subclass or an instance of one",
    )
    for name, example in [
        ("criterion", "torch.nn.CrossEntropyLoss"),
        ("optimizer", "torch.optim.SGD"),
        ("iterator_train", "torch.utils.data.DataLoader"),
        ("iterator_valid", "torch.utils.data.DataLoader"),
    ]:
        check.satisfies(name, callable(getattr(estimator, name)), f"a class, such as {example}")
    split = estimator.train_split
    check.satisfies(
        "train_split",
        split is None or callable(split),
        "None or a callable, such as skorch.dataset.ValidSplit(0.1)",
    )
    callbacks = estimator.callbacks
    ok = (
        callbacks is None
        or (isinstance(callbacks, str) and callbacks == "disable")
        or (isinstance(callbacks, (list, tuple)) and all(map(_is_callback, callbacks)))
    )
    check.satisfies("callbacks", ok, "None, 'disable' or a list of skorch callbacks")


def as_numpy(X):
    """Torch tensors go through numpy so that scikit-learn's validation sees every input."""
    if isinstance(X, torch.Tensor):
        return X.detach().cpu().numpy()
    return X


def without_negative_strides(X: np.ndarray) -> np.ndarray:
    """``X``, or a copy where it is a reversed view (``X[::-1]``), which torch cannot take."""
    return X.copy() if any(stride < 0 for stride in X.strides) else X


def check_sample_shape(estimator, X: np.ndarray, *, reset: bool) -> None:
    """Remember the sample shape in fit; afterwards, insist on it."""
    if reset:
        estimator.input_shape_ = tuple(X.shape[1:])
        return
    got, expected = tuple(X.shape[1:]), estimator.input_shape_
    if got == expected:
        return
    if prod(got) == prod(expected):
        fix = (
            f"The samples hold the same {prod(got)} values: reshape X with "
            f"X.reshape(len(X), {', '.join(map(str, expected))})."
        )
    else:
        fix = (
            f"The samples hold {prod(got)} values where {prod(expected)} are expected: pass "
            "data with the features the estimator was fitted on."
        )
    raise ValueError(
        f"X has samples of shape {got} (X of shape {tuple(X.shape)}), but "
        f"{type(estimator).__name__} was fitted on samples of shape {expected}. {fix}"
    )


def _check_sample_shape_first(estimator, X, *, reset: bool) -> None:
    """Before scikit-learn's feature count: a sample of another shape is no count of features.

    ``validate_data`` reads ``X.shape[1]`` as the number of features, so input of shape
    ``(n, 1, 4)`` to a model fitted on ``(n, 4)`` said "X has 1 features, but ... is expecting
    4". Two-dimensional input on both sides keeps scikit-learn's own message.
    """
    shape = getattr(X, "shape", None)
    if reset or shape is None or len(shape) < 2 or not hasattr(estimator, "input_shape_"):
        return
    if len(shape) > 2 or len(estimator.input_shape_) > 1:
        check_sample_shape(estimator, X, reset=False)


def check_X(estimator, X, *, reset: bool, stream: bool = False) -> np.ndarray | StreamedRows:
    """Validate input samples with scikit-learn's ``validate_data``, as float32.

    Parameters
    ----------
    estimator : EBMClassifierBase
        ``reset=True`` records ``n_features_in_`` (and ``feature_names_in_``) and
        ``input_shape_`` on it; otherwise ``X`` must match them.
    X : array-like of shape (n_samples, ...)
        numpy, pandas or torch (a ``TensorDataset`` is its first tensor); NaN, inf, empty or
        non-numeric input is refused.
    reset : bool
    stream : bool, default=False
        Whether the caller reads input in batches: a torch ``Dataset``, a memmap and an array
        of a dtype narrower than float32 (``uint8`` images) are then checked chunk by chunk
        and returned as :class:`~ebmclassifier._utils.streamed.StreamedRows`, not copied.
        Without it such a ``Dataset`` is a ``TypeError``.

    Returns
    -------
    ndarray of float32 of shape (n_samples, *input_shape), or StreamedRows
    """
    X = tensors_of_dataset(X, None)[0]
    if stream and is_streamed(X):
        rows = streamed_rows(X, loader_kwargs(estimator, "iterator_valid"))
        check_streamed_X(estimator, rows, reset=reset)
        return rows
    _refuse_dataset(estimator, X)
    X = as_numpy(X)
    _check_sample_shape_first(estimator, X, reset=reset)
    X = validate_data(
        estimator,
        X,
        reset=reset,
        dtype=np.float32,
        allow_nd=True,
        ensure_min_features=1,
    )
    check_sample_shape(estimator, X, reset=reset)
    return without_negative_strides(X)


def loader_kwargs(estimator, prefix: str) -> dict:
    """The ``DataLoader`` arguments routed to ``iterator_train`` or ``iterator_valid``
    (``num_workers``, ``pin_memory``, ...), without those the library sets itself."""
    get = getattr(estimator, "get_params_for", None)
    params = get(prefix) if callable(get) else {}
    return {k: v for k, v in params.items() if k not in ("batch_size", "shuffle", "drop_last")}


def _refuse_dataset(estimator, X) -> None:
    """A torch ``Dataset`` or ``DataLoader`` where only arrays are read: a ``TypeError``."""
    if isinstance(X, torch.utils.data.Dataset | torch.utils.data.DataLoader):
        raise TypeError(
            f"{type(estimator).__name__} reads X as an array here, not as a torch "
            f"{type(X).__name__}: pass the samples as an array (e.g. "
            "np.stack([dataset[i][0] for i in range(len(dataset))]))."
        )


def _first_bad_row(chunk: np.ndarray) -> int | None:
    bad = ~np.isfinite(chunk.reshape(len(chunk), -1)).all(axis=1)
    return int(bad.argmax()) if bad.any() else None


def check_streamed_X(estimator, rows: StreamedRows, *, reset: bool, labels: bool = False):
    """Check input read in chunks, as :func:`check_X` checks an array, without a copy.

    The first chunk goes through ``validate_data`` (feature count, names, sample shape), the
    rest are checked for NaN and infinity as float32 (integer data need not be). With
    ``labels`` (a :class:`~ebmclassifier._utils.streamed.DatasetRows` yielding them) the same
    pass collects the dataset's labels, returned (else None).
    """
    _check_sample_shape_first(estimator, rows, reset=reset)
    first = rows.first(rows.chunk_rows()) if len(rows) else np.empty((0, *rows.sample_shape))
    validate_data(
        estimator, first, reset=reset, dtype=np.float32, allow_nd=True, ensure_min_features=1
    )
    check_sample_shape(estimator, rows, reset=reset)
    found, start = [], 0
    if labels:
        chunks = rows.labelled_chunks()
    elif rows.dtype.kind == "f" or isinstance(rows, DatasetRows):
        chunks = ((chunk, None) for chunk in rows.chunks())
    else:
        return None  # integers are finite
    for chunk, chunk_labels in chunks:
        bad = _first_bad_row(chunk)
        if bad is not None:
            raise ValueError(
                f"Input X contains NaN or infinity (as float32) in sample {start + bad}; "
                f"{type(estimator).__name__} needs finite values."
            )
        start += len(chunk)
        found.append(np.asarray(chunk_labels))
    return np.concatenate(found) if labels else None


def check_dataset_labels(labels, y) -> None:
    """The labels a dataset yields must be ``y`` when both are given, as skorch reads them."""
    labels, y = np.asarray(as_numpy(labels)), np.asarray(as_numpy(y))
    if labels.shape == y.shape and (labels == y).all():
        return
    where = "lengths differ" if labels.shape != y.shape else None
    if where is None:
        i = int(np.flatnonzero(labels != y)[0])
        shown = np.asarray(y[i]).tolist(), np.asarray(labels[i]).tolist()
        where = f"first at index {i}: y has {shown[0]!r}, the dataset {shown[1]!r}"
    raise ValueError(
        f"y differs from the labels the dataset yields ({where}). Pass y=None to train on "
        "the dataset's labels, or a dataset that yields samples only with y."
    )


def dataset_labels(estimator, X) -> np.ndarray | None:
    """The labels that a dataset ``X`` yields (a ``TensorDataset``'s second tensor, or a pass
    over a ``Dataset``'s items), else None: for a call given ``y=None`` that needs the labels
    before checking the data (``score``, a class-incremental ``partial_fit``)."""
    X, labels, _ = tensors_of_dataset(X, None)
    if labels is not None:
        return np.asarray(as_numpy(labels))
    if not isinstance(X, torch.utils.data.Dataset) or isinstance(
        X, torch.utils.data.IterableDataset
    ):
        return None
    rows = streamed_rows(X, loader_kwargs(estimator, "iterator_valid"))
    if not (isinstance(rows, DatasetRows) and rows.has_labels):
        return None
    return np.concatenate([np.asarray(labels) for _, labels in rows.labelled_chunks()])


def _streamed_training_data(estimator, X, y, *, reset: bool):
    """``(rows, y)`` of training input read in chunks: checked, with its labels."""
    rows = streamed_rows(X, loader_kwargs(estimator, "iterator_train"))
    from_dataset = isinstance(rows, DatasetRows) and rows.has_labels
    if y is None and not from_dataset:
        raise ValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None"
            + (
                " and the dataset yields samples without labels; pass y, or make the dataset "
                "yield (sample, label) pairs."
                if isinstance(rows, DatasetRows)
                else "."
            )
        )
    labels = check_streamed_X(estimator, rows, reset=reset, labels=from_dataset)
    if y is None:
        y = labels
    elif labels is not None:
        check_dataset_labels(labels, y)
    y = column_or_1d(as_numpy(y), warn=True)
    check_consistent_length(rows, y)
    if y.dtype.kind == "f":
        assert_all_finite(y, input_name="y")
    return rows, y


def _check_label_types(y: np.ndarray) -> None:
    """Labels are all strings or none is: a mix cannot be sorted into ``classes_``.

    scikit-learn calls such a ``y`` "Unknown label type: unknown" and suggests a regression
    target; say which types are mixed and how to make them one.
    """
    if y.dtype != object:
        return
    is_str = np.fromiter((isinstance(v, str) for v in y), dtype=bool, count=len(y))
    if is_str.any() and not is_str.all():
        kinds = sorted({type(v).__name__ for v in y})
        first = [y[is_str.argmax()], y[(~is_str).argmax()]]
        raise ValueError(
            f"y mixes labels of types {', '.join(kinds)} (e.g. {first[0]!r} and {first[1]!r}); "
            "the classes must be all strings or all numbers to be sorted. Convert them, e.g. "
            "y = np.asarray(y).astype(str)."
        )


def check_training_data(estimator, X, y, *, reset: bool, classes=None, stream: bool = False):
    """Validate ``(X, y)`` for training and encode the labels.

    Parameters
    ----------
    estimator : EBMClassifierBase
        ``reset=True`` fits its ``label_encoder_`` (to ``classes`` when given).
    X : array-like of shape (n_samples, ...), or a torch Dataset
        A ``TensorDataset`` is its tensors (its second, when there is one, the labels).
    y : array-like of shape (n_samples,) or None
        Class labels of any hashable type, at least two classes when ``reset``. None when
        ``X`` is a dataset yielding ``(sample, label)`` pairs; when both are given they must
        agree (skorch reads the dataset's, and ``y`` for its splits).
    reset : bool
    classes : array-like or None, default=None
        Every class, for a first ``partial_fit`` whose ``y`` lacks some.
    stream : bool, default=False
        Read a ``Dataset``, a memmap or a narrow array (``uint8``) in chunks (see
        :func:`check_X`).

    Returns
    -------
    X : ndarray of float32, of shape (n_samples, *input_shape), or StreamedRows
    y : ndarray of shape (n_samples,)
        Encoded labels in ``0..n_classes-1``.
    """
    name = type(estimator).__name__
    X, y, labels = tensors_of_dataset(X, y)
    if labels is not None and labels is not y:
        check_dataset_labels(labels, y)
    if stream and is_streamed(X):
        X, y = _streamed_training_data(estimator, X, y, reset=reset)
    else:
        _refuse_dataset(estimator, X)
        if y is None:
            raise ValueError(f"{name} requires y to be passed, but the target y is None.")
        X = as_numpy(X)
        _check_sample_shape_first(estimator, X, reset=reset)
        X, y = validate_data(
            estimator, X, as_numpy(y), reset=reset, dtype=np.float32, allow_nd=True
        )
        check_sample_shape(estimator, X, reset=reset)
        X = without_negative_strides(X)
    _check_label_types(y)
    check_classification_targets(y)
    if reset:
        encoder = LabelEncoder().fit(y if classes is None else np.asarray(classes))
        if len(encoder.classes_) < 2:
            raise ValueError(
                f"{name} needs samples of at least 2 classes in the data, but the data contain "
                f"only one class: {encoder.classes_.tolist()[0]!r}."
            )
        estimator.label_encoder_ = encoder
    unseen = np.setdiff1d(np.unique(y), estimator.label_encoder_.classes_)
    if len(unseen):
        raise ValueError(
            f"y contains labels {unseen.tolist()!r} that were not seen when the estimator "
            "was first fitted; pass every class to the first partial_fit with classes=..., "
            f"or fit afresh (warm_start=False){_incremental_hint(estimator)}."
        )
    return X, estimator.label_encoder_.transform(y)


def check_warm_start_classes(estimator, y: np.ndarray) -> None:
    """A warm-started ``fit`` continues the fitted network: ``y`` must have all its classes.

    As scikit-learn's ``MLPClassifier(warm_start=True)``: the output layer has one logit per
    class of the first fit, so fewer classes would leave ``predict_proba`` with columns for
    classes the data no longer have, and new ones have no logit.

    Parameters
    ----------
    estimator : EBMClassifierBase
        Fitted, with ``classes_``.
    y : ndarray of shape (n_samples,)
        The encoded labels (``check_training_data`` has refused unseen ones).
    """
    present = np.unique(y)
    if len(present) != len(estimator.classes_):
        name = type(estimator).__name__
        raise ValueError(
            f"{name}(warm_start=True) continues the previous fit, so y must have the same "
            f"classes as the previous call to fit: previously {estimator.classes_.tolist()!r}, "
            f"y has {estimator.classes_[present].tolist()!r}. Set warm_start=False to fit "
            "afresh on these classes."
        )


def check_known_labels(estimator, y, n: int) -> np.ndarray:
    """``y`` as an array of ``n`` labels of ``estimator.classes_``, else a ValueError.

    One label (a scalar) stands for all ``n``, as ``sample(4, y=3)`` reads.
    """
    y = np.asarray(y)
    if y.ndim == 0:
        y = np.repeat(y[None], n)
    if y.shape != (n,):
        raise ValueError(
            f"y must be one label or an array of shape ({n},), one label per sample. Got "
            f"shape {y.shape!r}."
        )
    unknown = np.setdiff1d(y, estimator.classes_)
    if len(unknown):
        raise ValueError(
            f"y contains labels {unknown.tolist()!r} that are not in classes_ "
            f"{estimator.classes_.tolist()!r}."
        )
    return y


def check_partial_fit_classes(estimator, classes) -> None:
    """``classes`` given to a later ``partial_fit`` must be those of the first call.

    Parameters
    ----------
    estimator : EBMClassifierBase
        Fitted, with ``classes_``.
    classes : array-like or None
        ``None`` (nothing to check) or every class, as on the first call.
    """
    if classes is None:
        return
    given = np.unique(np.asarray(classes))
    if not np.array_equal(given, estimator.classes_):
        raise ValueError(
            f"`classes={np.asarray(classes).tolist()!r}` is not the same as on the first call to "
            f"partial_fit, which was {estimator.classes_.tolist()!r}; the classes are fixed "
            f"by the first call (fit afresh to change them){_incremental_hint(estimator)}."
        )


def _incremental_hint(estimator) -> str:
    """How to learn new classes later, for an estimator that can (``class_incremental``)."""
    if not hasattr(estimator, "class_incremental"):
        return ""
    return (
        f", or set {type(estimator).__name__}(class_incremental=True) to add new classes in "
        "later calls"
    )


def _positions(mask: np.ndarray) -> str:
    """The first few indices where ``mask`` holds, for an error message."""
    where = np.flatnonzero(mask)
    shown = where[:5].tolist()
    return f"{shown!r}" + (f" (and {len(where) - 5} more)" if len(where) > 5 else "")


def sample_weight_array(sample_weight, n_samples: int) -> np.ndarray | None:
    """``sample_weight`` as float64 of shape (n_samples,): finite and non-negative."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Real) and not isinstance(sample_weight, bool):
        weights = np.full(n_samples, float(sample_weight))
    else:
        try:
            weights = np.asarray(as_numpy(sample_weight), dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                "sample_weight must be None, a number or an array-like of numbers, one per "
                f"sample. Got {type(sample_weight).__name__} instead."
            ) from None
    if weights.shape != (n_samples,):
        raise ValueError(
            f"sample_weight must have shape ({n_samples},), one weight per sample of X. Got "
            f"shape {weights.shape!r} instead."
        )
    if not np.isfinite(weights).all():
        raise ValueError(
            "sample_weight must be finite; it is NaN or infinite at index "
            f"{_positions(~np.isfinite(weights))}. Give every sample a finite weight >= 0."
        )
    if (weights < 0).any():
        raise ValueError(
            f"sample_weight must be non-negative; it is negative at index "
            f"{_positions(weights < 0)}. A weight of 0 leaves a sample out of the fit."
        )
    return weights


def _class_weights(estimator, y: np.ndarray, *, partial: bool) -> np.ndarray | None:
    """The ``class_weight`` parameter as one weight per sample (``y``: encoded labels)."""
    class_weight, name = estimator.class_weight, type(estimator).__name__
    if class_weight is None:
        return None
    if isinstance(class_weight, str):  # "balanced"; _check_params refused other strings
        if partial:
            raise ValueError(
                f"class_weight='balanced' is not supported by {name}.partial_fit, which sees one "
                "chunk of the data at a time. Compute the weights from (a large sample of) all "
                "labels, e.g. sklearn.utils.class_weight.compute_class_weight('balanced', "
                "classes=classes, y=y), and pass them as class_weight={label: weight}."
            )
        return compute_sample_weight("balanced", y)
    classes = estimator.classes_.tolist()
    unknown = [label for label in class_weight if label not in classes]
    if unknown:
        raise ValueError(
            f"class_weight has labels {unknown!r} that are not classes of the data; "
            f"the classes are {classes!r}."
        )
    per_class = np.array([class_weight.get(label, 1.0) for label in classes], dtype=object)
    ok = [is_real(w) and 0 <= w < float("inf") for w in per_class]
    if not all(ok):
        bad = {label: w for label, w, good in zip(classes, per_class, ok, strict=True) if not good}
        raise ValueError(
            f"class_weight must map labels to finite weights >= 0. Got {bad!r} instead."
        )
    return per_class.astype(np.float64)[y]


def check_some_weight(weights: np.ndarray, owner: str, *, class_weight: bool) -> None:
    """Refuse weights that are all zero: nothing would be learned.

    Parameters
    ----------
    weights : ndarray of shape (n_samples,)
        Finite and non-negative (:func:`sample_weight_array`).
    owner : str
        The estimator's class name, for the message.
    class_weight : bool
        Whether the owner's ``class_weight`` parameter multiplies the weights (the message
        then names it too).
    """
    if not (weights > 0).any():
        raise ValueError(
            f"The sample weights are all zero, so {owner} has no sample to learn from; "
            "give some samples a positive sample_weight"
            + (" (and class_weight)." if class_weight else ".")
        )


def check_sample_weight(
    estimator, sample_weight, y: np.ndarray, *, partial: bool, require_classes: bool
) -> np.ndarray | None:
    """One weight per sample: ``sample_weight`` times the ``class_weight`` of its label.

    As scikit-learn's classifiers combine them (its ``_check_sample_weight`` times
    ``compute_sample_weight(class_weight, y)``).

    Parameters
    ----------
    estimator : EBMClassifierBase
        Its ``class_weight`` parameter (``None``, ``"balanced"`` or ``{label: weight}``) and
        ``classes_``.
    sample_weight : None, number or array-like of shape (n_samples,)
    y : ndarray of shape (n_samples,)
        Encoded labels in ``0..n_classes-1``.
    partial : bool
        For ``partial_fit``, which refuses ``class_weight="balanced"`` (one chunk does not
        know the class frequencies), as scikit-learn's ``SGDClassifier`` does.
    require_classes : bool
        Whether samples of at least two classes must keep a positive weight (a first fit
        that learns the classes from ``y``).

    Returns
    -------
    ndarray of float32 of shape (n_samples,), or None
        ``None`` when every sample has the same weight: the losses are normalised per batch,
        so uniform weights train exactly as no weights.
    """
    name = type(estimator).__name__
    weights = sample_weight_array(sample_weight, len(y))
    class_weights = _class_weights(estimator, y, partial=partial)
    if class_weights is not None:
        weights = class_weights if weights is None else weights * class_weights
    if weights is None:
        return None
    check_some_weight(weights, name, class_weight=True)
    kept = np.unique(y[weights > 0])
    if require_classes and len(kept) < 2:
        label = estimator.classes_[kept].tolist()
        raise ValueError(
            f"Only samples of the classes {label!r} have a positive weight; {name} needs "
            "samples of at least 2 classes with a positive sample_weight (and class_weight)."
        )
    weights = weights.astype(np.float32)
    if not np.isfinite(weights).all():
        raise ValueError(
            "The sample weights overflow float32 (above 3.4e38); divide them by a constant, "
            "which changes nothing else."
        )
    return None if (weights == weights[0]).all() else weights
