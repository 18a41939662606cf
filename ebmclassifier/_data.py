"""Mini-batches by slicing whole tensors.

skorch's default ``DataLoader`` fetches rows one at a time and collates them in Python, which
costs more than a small network's forward pass. The training data are already one tensor on
the device, so a batch is one indexing operation.

Sample weights travel with the batches as skorch lets inputs travel together: the training set's
``X`` is then the dict ``{"X": inputs, "sample_weight": weights}`` (:func:`with_weights`), every
batch is a dict of the same rows, and the training step takes it apart (:func:`split_weights`).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from skorch.dataset import Dataset
from torch.utils.data import DataLoader, Subset

__all__ = [
    "ShuffledTensorBatchIterator",
    "TensorBatchIterator",
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


class TensorBatchIterator:
    """Iterate over ``(X[idx], y[idx])`` batches of a tensor dataset.

    ``X`` may be a dict of tensors (the inputs and their sample weights): each batch is then the
    dict of the same rows of each.

    A drop-in for ``iterator_train`` / ``iterator_valid``: it takes the same arguments as
    ``torch.utils.data.DataLoader`` and falls back to one for datasets that are not tensors.

    Parameters
    ----------
    dataset : skorch.dataset.Dataset or torch.utils.data.Subset of one
    batch_size : int, default=128
    shuffle : bool, default=False
        A fresh permutation each pass, drawn from torch's global generator (seeded per epoch by
        the estimators' ``random_state``).
    drop_last : bool, default=False
    **loader_kwargs
        Passed to the fallback ``DataLoader`` only.
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
        self._fallback = None
        if self._tensors is None:
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
        X, y, indices = self._tensors
        n = len(self.dataset)
        order = torch.randperm(n) if self.shuffle else torch.arange(n)
        if indices is not None:
            order = indices[order]
        # One copy of the permutation to the device per pass, not one per batch.
        order = order.to(split_weights(X)[0].device)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            idx = order[start : start + self.batch_size]
            yield _rows(X, idx), (y[idx] if y is not None else None)


class ShuffledTensorBatchIterator(TensorBatchIterator):
    """:class:`TensorBatchIterator` that shuffles by default (the training iterator)."""

    def __init__(self, dataset, batch_size: int = 128, shuffle: bool = True, **kwargs) -> None:
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, **kwargs)
