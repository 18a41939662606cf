"""Mini-batches by slicing whole tensors.

skorch's default ``DataLoader`` fetches rows one at a time and collates them in Python, which
costs more than a small network's forward pass. The training data are already one tensor on
the device, so a batch is one indexing operation.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from skorch.dataset import Dataset
from torch.utils.data import DataLoader, Subset

__all__ = ["ShuffledTensorBatchIterator", "TensorBatchIterator"]


def _tensors_of(dataset) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None] | None:
    """``(X, y, indices)`` behind a skorch ``Dataset`` (or a ``Subset`` of one) of tensors."""
    indices = None
    if isinstance(dataset, Subset):
        indices = torch.as_tensor(dataset.indices, dtype=torch.long)
        dataset = dataset.dataset
    if type(dataset) is not Dataset or not isinstance(dataset.X, torch.Tensor):
        return None
    y = dataset.y if isinstance(dataset.y, torch.Tensor) else None
    if dataset.y is not None and y is None:
        return None
    return dataset.X, y, indices


class TensorBatchIterator:
    """Iterate over ``(X[idx], y[idx])`` batches of a tensor dataset.

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
        order = order.to(X.device)
        stop = n - n % self.batch_size if self.drop_last else n
        for start in range(0, stop, self.batch_size):
            idx = order[start : start + self.batch_size]
            yield X[idx], (y[idx] if y is not None else None)


class ShuffledTensorBatchIterator(TensorBatchIterator):
    """:class:`TensorBatchIterator` that shuffles by default (the training iterator)."""

    def __init__(self, dataset, batch_size: int = 128, shuffle: bool = True, **kwargs) -> None:
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, **kwargs)
