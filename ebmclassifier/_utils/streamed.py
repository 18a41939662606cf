"""Input read in batches: arrays kept in their own dtype, memmaps and torch Datasets.

A 3 GB ``uint8`` image set copied to float32 takes 12 GB, and a memmap or a folder of image
files may not fit in memory at all. Such input is kept as the user holds it and read a batch at
a time: a :class:`StreamedRows` is the estimators' view of it (its length, its sample shape,
its batches in its own dtype, float32 chunks for the checks and the data's statistics).

- :class:`ArrayRows`: a numpy array of a dtype narrower than float32 (``uint8``, ``int16``,
  ``float16``, ``bool``), or a ``numpy.memmap`` of any numeric dtype;
- :class:`DatasetRows`: a map-style ``torch.utils.data.Dataset`` yielding a sample, or a
  tuple ``(sample, label, ...)``, as skorch takes it;
- :class:`StreamedDataset`: the training set over either, with the encoded labels and the
  sample weights, batch by batch (:class:`BatchFetcher` hands whole batches to a
  ``DataLoader``, whose workers read them in parallel).

A ``TensorDataset`` is its tensors (:func:`tensors_of_dataset`): it is in memory already.
Nothing here knows scikit-learn: the checks of such input are in
:mod:`~ebmclassifier._utils.validation`, and :mod:`~ebmclassifier._utils.statistics` reads
the chunks through the small protocol of :class:`StreamedRows` (``len``, ``sample_shape``,
``chunks``, ``memo``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from math import prod

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset, TensorDataset

__all__ = [
    "CHUNK_ELEMENTS",
    "ArrayRows",
    "BatchFetcher",
    "DatasetRows",
    "StreamedDataset",
    "StreamedRows",
    "batch_loader",
    "first_rows",
    "is_narrow",
    "is_streamed",
    "rows_where",
    "streamed_rows",
    "tensors_of_dataset",
    "training_input",
]

#: Elements (of float32) of one chunk read for the checks and statistics: 4 MB.
CHUNK_ELEMENTS = 2**20


def is_narrow(dtype) -> bool:
    """Whether ``dtype`` is a number type narrower than float32 (``uint8``, ``int16``,
    ``float16``, ``bool``, ...): such arrays stay in their dtype until the batch."""
    dtype = np.dtype(dtype)
    return dtype.kind in "buif" and dtype.itemsize < 4


def _numpy_dtype(X):
    if isinstance(X, torch.Tensor):
        return torch.empty(0, dtype=X.dtype).numpy().dtype
    return getattr(X, "dtype", None)


def is_streamed(X) -> bool:
    """Whether ``X`` is read in batches rather than copied to float32: a torch ``Dataset``
    (not a ``TensorDataset``), a ``numpy.memmap``, or an array or tensor of a narrow dtype
    (and a ``DataLoader``, which :func:`streamed_rows` refuses naming the fix)."""
    if isinstance(X, DataLoader) or (isinstance(X, Dataset) and not isinstance(X, TensorDataset)):
        return True  # a DataLoader, to be refused with the fix (streamed_rows)
    if isinstance(X, np.memmap):
        return X.dtype.kind in "buif"
    dtype = _numpy_dtype(X) if isinstance(X, np.ndarray | torch.Tensor) else None
    return dtype is not None and is_narrow(dtype)


def tensors_of_dataset(X, y):
    """``(X, y)`` with a ``TensorDataset`` (or a ``Subset`` of one) replaced by its tensors.

    ``TensorDataset(X)`` is ``X``; ``TensorDataset(X, labels, ...)`` gives ``labels`` as
    ``y`` when ``y`` is None, and its labels must be ``y`` when both are given (checked by
    the caller, which gets them as the third value, else None).
    """
    indices = None
    if isinstance(X, Subset) and isinstance(X.dataset, TensorDataset):
        indices = torch.as_tensor(np.asarray(X.indices), dtype=torch.long)
        X = X.dataset
    if not isinstance(X, TensorDataset):
        return X, y, None
    tensors = [t if indices is None else t[indices] for t in X.tensors]
    labels = tensors[1] if len(tensors) > 1 else None
    return tensors[0], (labels if y is None else y), labels


class StreamedRows:
    """Samples read a batch at a time, in their own dtype; float32 chunks for the checks.

    Attributes
    ----------
    sample_shape : tuple of int
    dtype : numpy dtype
        Of the samples as they are stored (``uint8`` for images).
    memo : dict
        Statistics computed on these rows, kept for the next who asks
        (:mod:`~ebmclassifier._utils.statistics`).
    """

    sample_shape: tuple[int, ...] = ()
    dtype = np.dtype(np.float32)

    def __init__(self) -> None:
        self.memo: dict = {}

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self), *self.sample_shape)

    def batch(self, idx: np.ndarray) -> torch.Tensor:
        """The samples ``idx`` (int array) as one tensor in their own dtype."""
        raise NotImplementedError

    def chunk_rows(self) -> int:
        """Rows of a chunk of about :data:`CHUNK_ELEMENTS` values."""
        return max(1, CHUNK_ELEMENTS // max(1, prod(self.sample_shape)))

    def batches(self, size: int, **loader_kwargs) -> Iterator[torch.Tensor]:
        """The samples in order, ``size`` at a time, through a ``DataLoader`` (``loader_kwargs``:
        ``num_workers``, ``pin_memory``, ...), in their own dtype."""
        order = [np.arange(s, min(s + size, len(self))) for s in range(0, len(self), size)]
        return iter(batch_loader(BatchFetcher(self), order, **loader_kwargs))

    def chunks(self, rows: int | None = None) -> Iterator[np.ndarray]:
        """The samples in order as float32 numpy chunks of ``rows`` rows."""
        for batch in self.batches(rows or self.chunk_rows()):
            yield batch.numpy().astype(np.float32)

    def first(self, k: int) -> np.ndarray:
        """The first ``k`` samples (fewer if there are fewer) as float32."""
        return self.batch(np.arange(min(k, len(self)))).numpy().astype(np.float32)

    def subset(self, mask: np.ndarray) -> MaskedRows:
        """The rows where the boolean ``mask`` holds (for their statistics)."""
        return MaskedRows(self, mask)

    def __array__(self, *args, **kwargs):
        raise TypeError(
            f"{type(self).__name__} is read in chunks and never copied whole; read it with "
            "chunks() or batches()."
        )


class ArrayRows(StreamedRows):
    """A numpy array (a memmap, or an array of a narrow dtype) read batch by batch.

    Parameters
    ----------
    array : ndarray of shape (n_samples, ...)
    """

    def __init__(self, array: np.ndarray) -> None:
        super().__init__()
        self.array = array
        self.sample_shape = tuple(array.shape[1:])
        self.dtype = array.dtype

    def __len__(self) -> int:
        return len(self.array)

    @property
    def in_memory(self) -> bool:
        """Whether the array is in memory (not a memmap): training then copies it to the
        device whole, in its own dtype, and slices batches there."""
        return not isinstance(self.array, np.memmap)

    def batch(self, idx: np.ndarray) -> torch.Tensor:
        if len(idx) > 1 and idx[-1] - idx[0] == len(idx) - 1 and (np.diff(idx) == 1).all():
            # consecutive: one slice, one read, copied (a view of a memmap is read-only)
            return torch.from_numpy(np.array(self.array[idx[0] : idx[-1] + 1], order="C"))
        return torch.from_numpy(np.ascontiguousarray(self.array[idx]))  # a fancy index copies


def _sample_of(item):
    """The sample of a dataset's item: the item, or its first element when it is a tuple."""
    return item[0] if isinstance(item, tuple | list) else item


class DatasetRows(StreamedRows):
    """The samples of a map-style torch ``Dataset``, as skorch takes it.

    Each item is a sample (an array or tensor of numbers) or a tuple ``(sample, label, ...)``.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
        With ``__len__`` and ``__getitem__`` (not an ``IterableDataset``).
    loader_kwargs : dict, default=None
        ``DataLoader`` arguments for the passes of the checks and statistics (``num_workers``).
    """

    def __init__(self, dataset: Dataset, loader_kwargs: dict | None = None) -> None:
        super().__init__()
        self.dataset = dataset
        self.loader_kwargs = dict(loader_kwargs or {})
        first = dataset[0] if len(dataset) else None
        self.has_labels = isinstance(first, tuple | list) and len(first) >= 2
        sample = self.batch(np.arange(1)) if first is not None else None
        self.sample_shape = () if sample is None else tuple(sample.shape[1:])
        self.dtype = np.dtype(np.float32) if sample is None else sample.numpy().dtype

    def __len__(self) -> int:
        return len(self.dataset)

    def batch(self, idx: np.ndarray) -> torch.Tensor:
        return _stacked([_sample_of(self.dataset[int(i)]) for i in idx], idx)

    def labelled_batch(self, idx: np.ndarray) -> tuple[torch.Tensor, np.ndarray | None]:
        """``(samples, labels)`` of the items ``idx``; labels None for items without."""
        items = [self.dataset[int(i)] for i in idx]
        samples = _stacked([_sample_of(item) for item in items], idx)
        if not self.has_labels:
            return samples, None
        labels = [
            item[1] if isinstance(item, tuple | list) and len(item) > 1 else None for item in items
        ]
        return samples, _label_array(labels)

    def batches(self, size: int, **loader_kwargs) -> Iterator[torch.Tensor]:
        return super().batches(size, **{**self.loader_kwargs, **loader_kwargs})

    def labelled_chunks(
        self, rows: int | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """``(float32 samples, labels)`` in order, ``rows`` at a time: one pass for the checks."""
        rows = rows or self.chunk_rows()
        order = [np.arange(s, min(s + rows, len(self))) for s in range(0, len(self), rows)]
        loader = batch_loader(BatchFetcher(self, labelled=True), order, **self.loader_kwargs)
        for samples, labels in loader:
            yield samples.numpy().astype(np.float32), labels


def _stacked(samples: Sequence, idx: np.ndarray) -> torch.Tensor:
    """The samples of a dataset as one tensor (one copy); a ``ValueError``/``TypeError`` naming
    the items when they are not arrays of numbers of one shape."""
    if all(isinstance(s, torch.Tensor) for s in samples):
        arrays = [s.detach().cpu().numpy() for s in samples]
    else:
        arrays = [s.detach().cpu().numpy() if isinstance(s, torch.Tensor) else s for s in samples]
    try:
        arrays = [np.asarray(a) for a in arrays]
        numeric = all(a.dtype.kind in "buif" for a in arrays)
    except (TypeError, ValueError):
        numeric = False
    if not numeric:
        kinds = sorted({type(s).__name__ for s in samples})
        raise TypeError(
            f"The dataset's samples must be arrays or tensors of numbers; got {', '.join(kinds)} "
            f"(items {idx[:3].tolist()!r}...). Convert them in the dataset (for images, a "
            "transform such as torchvision.transforms.PILToTensor())."
        )
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(
            f"The dataset's samples have different shapes {sorted(shapes)!r} (items "
            f"{idx[0]}..{idx[-1]}); every sample must have the same shape. Resize or pad them in "
            "the dataset."
        )
    return torch.from_numpy(np.stack(arrays))


def _label_array(labels: list) -> np.ndarray:
    """The labels of a batch of items as a 1-D numpy array (a tensor label becomes its value;
    labels of mixed types stay objects, for the label checks to name)."""
    values = [
        v.item() if isinstance(v, torch.Tensor | np.generic) and np.size(v) == 1 else v
        for v in labels
    ]
    if len({isinstance(v, str) for v in values}) > 1:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.asarray(values)


class MaskedRows(StreamedRows):
    """The rows of ``rows`` where ``mask`` holds (the samples of positive weight)."""

    def __init__(self, rows: StreamedRows, mask: np.ndarray) -> None:
        super().__init__()
        self.rows = rows
        self.mask = np.asarray(mask, dtype=bool)
        self.sample_shape = rows.sample_shape
        self.dtype = rows.dtype

    def __len__(self) -> int:
        return int(self.mask.sum())

    def batch(self, idx: np.ndarray) -> torch.Tensor:
        return self.rows.batch(np.flatnonzero(self.mask)[idx])

    def chunks(self, rows: int | None = None) -> Iterator[np.ndarray]:
        rows = rows or self.chunk_rows()
        start = 0
        for chunk in self.rows.chunks(rows):
            kept = chunk[self.mask[start : start + len(chunk)]]
            start += len(chunk)
            if len(kept):
                yield kept


class BatchFetcher(Dataset):
    """A dataset whose item ``idx`` (an array of indices) is the whole batch ``source.batch(idx)``.

    Given to a ``DataLoader`` with ``batch_size=None`` and a sampler of index arrays, so that a
    batch is one read of the source (one fancy index of a memmap) and the workers each read
    whole batches.

    Parameters
    ----------
    source : StreamedRows or StreamedDataset
    labelled : bool, default=False
        Read ``source.labelled_batch`` instead (a :class:`DatasetRows`' labels, for the checks).
    """

    def __init__(self, source, labelled: bool = False) -> None:
        self.source = source
        self.labelled = labelled

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, idx):
        idx = np.asarray(idx, dtype=np.int64)
        return self.source.labelled_batch(idx) if self.labelled else self.source.batch(idx)


def batch_loader(fetcher: BatchFetcher, sampler, **loader_kwargs) -> DataLoader:
    """A ``DataLoader`` of the whole batches ``fetcher[idx]``, ``idx`` drawn from ``sampler``.

    Its workers' seed is drawn from a generator of its own (seeded with torch's initial seed,
    which a fit's ``random_state`` sets per epoch), not from torch's global one: a
    ``DataLoader`` draws it at every pass, which would shift the fit's random draws (and
    inference must leave torch's random state as it was).
    """
    generator = torch.Generator().manual_seed(torch.initial_seed())
    loader_kwargs = {"generator": generator, **loader_kwargs}
    return DataLoader(fetcher, sampler=sampler, batch_size=None, **loader_kwargs)


class StreamedDataset(Dataset):
    """The training set over :class:`StreamedRows`: the samples with their encoded labels.

    ``dataset[i]`` is ``(sample, label)``, or ``({"X": sample, "sample_weight": w}, label)``
    with weights (the form of the library's batches, see
    :func:`~ebmclassifier._utils.data.split_weights`); :meth:`batch` reads a whole batch at
    once, which the library's iterators use (:class:`BatchFetcher`).

    Parameters
    ----------
    rows : StreamedRows
    y : ndarray of int64 of shape (n_samples,)
        The encoded labels.
    sample_weight : ndarray of float32 of shape (n_samples,) or None
    """

    def __init__(self, rows: StreamedRows, y: np.ndarray, sample_weight: np.ndarray | None) -> None:
        self.rows = rows
        self.y = np.asarray(y, dtype=np.int64)
        self.sample_weight = sample_weight

    def __len__(self) -> int:
        return len(self.rows)

    def batch(self, idx: np.ndarray):
        X = self.rows.batch(idx)
        if self.sample_weight is not None:
            X = {"X": X, "sample_weight": torch.from_numpy(self.sample_weight[idx])}
        return X, torch.from_numpy(self.y[idx])

    def __getitem__(self, i: int):
        X, y = self.batch(np.array([i]))
        X = {key: value[0] for key, value in X.items()} if isinstance(X, dict) else X[0]
        return X, y[0]

    def labelled_chunks(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(float32 samples, labels)`` of the samples of positive weight, chunk by chunk."""
        rows = self.rows.chunk_rows()
        start = 0
        for chunk in self.rows.chunks(rows):
            stop = start + len(chunk)
            y = torch.from_numpy(self.y[start:stop])
            x = torch.from_numpy(chunk)
            if self.sample_weight is not None:
                keep = torch.from_numpy(self.sample_weight[start:stop] > 0)
                x, y = x[keep], y[keep]
            start = stop
            yield x, y


def streamed_rows(X, loader_kwargs: dict | None = None) -> StreamedRows:
    """``X`` (see :func:`is_streamed`) as :class:`StreamedRows`; a ``TypeError`` for a
    ``DataLoader`` or an ``IterableDataset``, naming what to pass instead."""
    if isinstance(X, DataLoader):
        raise TypeError(
            "X is a torch DataLoader; the estimators draw their own batches, as skorch does. "
            "Pass its dataset, fit(loader.dataset), and its settings as parameters: "
            f"batch_size={X.batch_size!r}, iterator_train__num_workers={X.num_workers!r}."
        )
    if isinstance(X, IterableDataset):
        raise TypeError(
            f"X is an IterableDataset ({type(X).__name__}), which has no length and no "
            "indexing; the estimators shuffle and hold out samples by index. Pass a map-style "
            "torch Dataset (with __len__ and __getitem__) or an array."
        )
    if isinstance(X, Dataset):
        return DatasetRows(X, loader_kwargs)
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    return ArrayRows(X)


def first_rows(X, k: int, device) -> torch.Tensor:
    """The first ``k`` samples of validated input as float32 (int64 token ids stay) on
    ``device``: ``X`` an array, or :class:`StreamedRows`."""
    if isinstance(X, StreamedRows):
        return torch.from_numpy(X.first(k)).to(device)
    return torch.tensor(X[:k], device=device)


def rows_where(X, mask: np.ndarray):
    """The rows of validated input where ``mask`` holds: a copy of an array's, a view of
    :class:`StreamedRows` (read in chunks, for the statistics)."""
    return X.subset(mask) if isinstance(X, StreamedRows) else X[mask]


def training_input(X, y: np.ndarray, sample_weight, device):
    """What skorch trains on, and the sample weights left to pass beside it.

    - an array: one float32 copy on the device (the user's array may be read-only), which the
      batches slice;
    - :class:`ArrayRows` in memory (``uint8`` images): one copy on the device in their own
      dtype, converted to float32 batch by batch;
    - other :class:`StreamedRows` (a memmap, a ``Dataset``): a :class:`StreamedDataset` that
      carries the labels and the weights (None beside it), read batch by batch on the host.

    Parameters
    ----------
    X : ndarray or StreamedRows
        Validated.
    y : ndarray of int64 of shape (n_samples,)
        Encoded labels.
    sample_weight : ndarray of float32 of shape (n_samples,) or None
    device : torch.device

    Returns
    -------
    X : Tensor or StreamedDataset
    sample_weight : ndarray or None
    """
    if isinstance(X, ArrayRows) and X.in_memory:
        return torch.tensor(X.array, device=device), sample_weight
    if isinstance(X, StreamedRows):
        return StreamedDataset(X, y, sample_weight), None
    return torch.tensor(X, device=device), sample_weight
