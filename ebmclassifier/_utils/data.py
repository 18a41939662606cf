"""Mini-batches by slicing whole tensors; the class counts of the training labels.

skorch's default ``DataLoader`` fetches rows one at a time and collates them in Python, which
costs more than a small network's forward pass. The training data are already one tensor on
the device, so a batch is one indexing operation. Data read from host storage (a memmap, a
user's ``Dataset``: :class:`~ebmclassifier._utils.streamed.StreamedDataset`) are read a whole
batch at a time by a ``DataLoader`` and its workers, in the same order of samples.

Sample weights travel with the batches as skorch lets inputs travel together: the training set's
``X`` is then the dict ``{"X": inputs, "sample_weight": weights}`` (:func:`with_weights`), every
batch is a dict of the same rows, and the training step takes it apart (:func:`split_weights`).

What the estimators record of the labels they were trained on, ``class_count_`` and
``class_prior_`` (:func:`record_class_counts`), is taken here from the same training data.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from skorch.dataset import Dataset
from torch.utils.data import DataLoader, Subset

from .streamed import BatchFetcher, StreamedDataset, batch_loader
from .validation import sample_weight_array

__all__ = [
    "ShuffledTensorBatchIterator",
    "TensorBatchIterator",
    "class_counts",
    "grow_class_counts",
    "record_class_counts",
    "split_weights",
    "with_weights",
]

Inputs = torch.Tensor | dict[str, torch.Tensor]


def with_weights(X: torch.Tensor, sample_weight: torch.Tensor | None) -> Inputs:
    """The ``X`` that skorch trains on: the inputs, with the sample weights when there are any."""
    return X if sample_weight is None else {"X": X, "sample_weight": sample_weight}


def split_weights(X: Inputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``(inputs, weights)`` of a training set or batch.

    ``weights`` is ``{"sample_weight": w}``, or ``{}`` without weights: the keyword arguments
    that the training step passes on to ``compute_loss``, whose overrides without a
    ``sample_weight`` argument then still train without weights.
    """
    if isinstance(X, dict):
        return X["X"], {"sample_weight": X["sample_weight"]}
    return X, {}


def _is_tensors(X) -> bool:
    if isinstance(X, dict):
        return all(isinstance(value, torch.Tensor) for value in X.values())
    return isinstance(X, torch.Tensor)


def _rows(X: Inputs, idx: torch.Tensor) -> Inputs:
    if isinstance(X, dict):
        return {key: value[idx] for key, value in X.items()}
    return X[idx]


def _tensors_of(dataset) -> tuple[Inputs, torch.Tensor | None, torch.Tensor | None] | None:
    """``(X, y, indices)`` behind a skorch ``Dataset`` (or a ``Subset`` of one) of tensors.

    ``X`` is a tensor, or a dict of tensors (the inputs and their weights).
    """
    indices = None
    if isinstance(dataset, Subset):
        indices = torch.as_tensor(dataset.indices, dtype=torch.long)
        dataset = dataset.dataset
    if type(dataset) is not Dataset or not _is_tensors(dataset.X):
        return None
    y = dataset.y if isinstance(dataset.y, torch.Tensor) else None
    if dataset.y is not None and y is None:
        return None
    return dataset.X, y, indices


def epoch_order(n: int, shuffle: bool, indices: torch.Tensor | None) -> torch.Tensor:
    """The samples of one pass in order: a fresh permutation when ``shuffle`` (drawn from
    torch's global generator, seeded per epoch by the estimators' ``random_state``), the
    positions ``indices`` of a ``Subset`` when given."""
    order = torch.randperm(n) if shuffle else torch.arange(n)
    return order if indices is None else indices[order]


def _streamed_of(dataset) -> tuple[StreamedDataset, torch.Tensor | None] | None:
    """``(streamed, indices)`` behind a StreamedDataset (or a ``Subset`` of one), else None."""
    indices = None
    if isinstance(dataset, Subset):
        indices = torch.as_tensor(dataset.indices, dtype=torch.long)
        dataset = dataset.dataset
    return (dataset, indices) if isinstance(dataset, StreamedDataset) else None


def _check_streamed_kwargs(loader_kwargs: dict) -> None:
    theirs = sorted(set(loader_kwargs) & {"sampler", "batch_sampler", "collate_fn"})
    if theirs:
        raise TypeError(
            f"The library draws the batches of streamed data itself (shuffled per epoch by "
            f"random_state); {', '.join(theirs)} cannot be set for them. Route DataLoader "
            "settings such as num_workers or pin_memory instead."
        )


class TensorBatchIterator:
    """Iterate over ``(X[idx], y[idx])`` batches of a tensor dataset.

    ``X`` may be a dict of tensors (the inputs and their sample weights): each batch is then the
    dict of the same rows of each.

    A drop-in for ``iterator_train`` / ``iterator_valid``: it takes the same arguments as
    ``torch.utils.data.DataLoader`` and falls back to one for datasets that are not tensors:
    for host data (a memmap, a user's ``Dataset``) one that reads whole batches, in the same
    order, with the routed ``num_workers``, ``pin_memory``, ... (``iterator_train__*``).

    Parameters
    ----------
    dataset : skorch.dataset.Dataset or torch.utils.data.Subset of one
    batch_size : int, default=128
    shuffle : bool, default=False
        A fresh permutation each pass (:func:`epoch_order`).
    drop_last : bool, default=False
    **loader_kwargs
        Passed to the fallback ``DataLoader`` only (not ``sampler``, ``batch_sampler`` or
        ``collate_fn`` for host data, whose batches the library draws).
    """

    def __init__(
        self,
        dataset,
        batch_size: int = 128,
        shuffle: bool = False,
        drop_last: bool = False,
        **loader_kwargs,
    ) -> None:
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self._tensors = _tensors_of(dataset)
        self._streamed = None if self._tensors is not None else _streamed_of(dataset)
        self._loader_kwargs = loader_kwargs
        self._fallback = None
        if self._streamed is not None:
            _check_streamed_kwargs(loader_kwargs)
        elif self._tensors is None:
            self._fallback = DataLoader(
                dataset,
                batch_size=batch_size,
                shuffle=shuffle,
                drop_last=drop_last,
                **loader_kwargs,
            )

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator:
        if self._fallback is not None:
            yield from self._fallback
            return
        if self._streamed is not None:
            yield from self._streamed_batches()
            return
        X, y, indices = self._tensors
        n = len(self.dataset)
        order = epoch_order(n, self.shuffle, indices)
        # One copy of the permutation to the device per pass, not one per batch.
        order = order.to(split_weights(X)[0].device)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            idx = order[start : start + self.batch_size]
            yield _rows(X, idx), (y[idx] if y is not None else None)

    def _streamed_batches(self) -> Iterator:
        """The batches of host data, read whole by a ``DataLoader`` (and its workers), in the
        order the tensor path slices: the same batches as from the array it holds."""
        source, indices = self._streamed
        n = len(self.dataset)
        order = epoch_order(n, self.shuffle, indices).numpy()
        stop = n - n % self.batch_size if self.drop_last else n
        batches = [
            order[start : start + self.batch_size] for start in range(0, stop, self.batch_size)
        ]
        yield from batch_loader(BatchFetcher(source), batches, **self._loader_kwargs)


class ShuffledTensorBatchIterator(TensorBatchIterator):
    """:class:`TensorBatchIterator` that shuffles by default (the training iterator)."""

    def __init__(self, dataset, batch_size: int = 128, shuffle: bool = True, **kwargs) -> None:
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, **kwargs)


def class_counts(y: np.ndarray, n_classes: int, sample_weight=None) -> np.ndarray:
    """The training samples of each class, each counted with its ``sample_weight``.

    ``class_count_[c]`` is the sum of the ``sample_weight`` of the samples of class ``c``
    (their number without weights), as scikit-learn's naive Bayes counts: a weight is a
    frequency. ``class_weight`` does not enter: it re-balances the loss, and the network's
    posteriors stay closer to the raw shares (measured in docs/distributional.md).

    Parameters
    ----------
    y : ndarray of int of shape (n_samples,)
        Encoded labels in ``0..n_classes-1``.
    n_classes : int
    sample_weight : None, number or array-like of shape (n_samples,), default=None
        As ``fit`` takes it (already checked).

    Returns
    -------
    ndarray of float64 of shape (n_classes,)
    """
    weights = sample_weight_array(sample_weight, len(y))
    return np.bincount(y, weights, minlength=n_classes).astype(np.float64)


def record_class_counts(estimator, y: np.ndarray, sample_weight, *, reset: bool) -> None:
    """Add :func:`class_counts` of ``y`` to ``class_count_``; set ``class_prior_``.

    ``class_prior_ = class_count_ / class_count_.sum()``, in the order of ``classes_``.
    ``reset`` (a new network) starts from zero; otherwise the counts of every fit since the
    network was built add up. An estimator loaded from a file written before the counts were
    recorded has none, and a continuing fit does not start them: its earlier labels are unknown.

    Parameters
    ----------
    estimator : EBMClassifierBase
        With ``classes_``; ``class_count_`` and ``class_prior_`` are set on it.
    y : ndarray of int of shape (n_samples,)
        Encoded labels in ``0..n_classes-1``.
    sample_weight : None, number or array-like of shape (n_samples,)
    reset : bool

    Returns
    -------
    None
    """
    n_classes = len(estimator.classes_)
    if reset:
        counts = np.zeros(n_classes)
    elif hasattr(estimator, "class_count_"):
        counts = estimator.class_count_
    else:
        return
    estimator.class_count_ = counts + class_counts(y, n_classes, sample_weight)
    estimator.class_prior_ = estimator.class_count_ / estimator.class_count_.sum()


def grow_class_counts(estimator, old_rows: np.ndarray, n_classes: int) -> None:
    """``class_count_`` and ``class_prior_`` for grown classes: old class ``r`` moves to
    ``old_rows[r]``, the new classes count 0 (until the fit that brings them counts them)."""
    if not hasattr(estimator, "class_count_"):
        return
    counts = np.zeros(n_classes)
    counts[old_rows] = estimator.class_count_
    estimator.class_count_ = counts
    estimator.class_prior_ = counts / counts.sum()
