"""Column statistics of training data, bitwise numpy's, without a copy of the data.

``X.std(axis=0)`` and ``X.var(axis=0, dtype=np.float64)`` copy ``X`` (a float64 copy of a
float32 image set is twice its size); these add the rows in the order numpy adds them, one
block of rows at a time, so the result is bitwise numpy's and the extra memory one block.

``X`` is a numpy array, or input read in chunks (a memmap, ``uint8`` images, a torch
``Dataset``: :class:`~ebmclassifier._utils.streamed.StreamedRows`), which offers ``len(X)``,
``X.sample_shape``, ``X.chunks(rows)`` (its rows in order as float32 arrays) and ``X.memo`` (a
dict that keeps what one pass computed). On chunks each statistic is the one numpy computes
on ``X`` converted to a float32 array: numpy reduces a C-ordered array over axis 0 by adding
the rows in order, which a running sum carried from chunk to chunk repeats bit for bit. Samples
of one value are the exception, which numpy sums pairwise: they are read whole (``n`` floats).
"""

from __future__ import annotations

from collections.abc import Iterator
from math import prod

import numpy as np

__all__ = [
    "BLOCK_SIZE",
    "column_mean",
    "column_mean_std",
    "column_min_max",
    "column_sum",
    "sum_of_squares",
]

#: Elements of a block of rows (in ``mean``'s dtype; 8 MB in float64).
BLOCK_SIZE = 2**20


def _blocks(X, rows: int) -> Iterator[np.ndarray]:
    """The rows of ``X`` in order, ``rows`` at a time (slices of an array, or its chunks)."""
    if isinstance(X, np.ndarray):
        for start in range(0, len(X), rows):
            yield X[start : start + rows]
    else:
        yield from X.chunks(rows)


def _whole(X) -> np.ndarray:
    """Chunked input of one value per sample as one float32 array (numpy sums it pairwise)."""
    return np.concatenate(list(X.chunks()))


def _moments(X) -> dict[str, np.ndarray]:
    """One pass over chunked ``X``: its columns' min, max, float64 sum and float32 sum."""
    if "moments" in X.memo:
        return X.memo["moments"]
    if prod(X.sample_shape) == 1:
        whole = _whole(X)
        found = {
            "min": whole.min(axis=0),
            "max": whole.max(axis=0),
            "sum64": whole.sum(axis=0, dtype=np.float64),
            "sum32": whole.sum(axis=0),
        }
    else:
        found = {}
        for chunk in X.chunks():
            low, high = chunk.min(axis=0), chunk.max(axis=0)
            block64 = chunk.astype(np.float64)
            if found:  # the running sums go first: row by row, as numpy adds them
                low, high = np.minimum(found["min"], low), np.maximum(found["max"], high)
                block64[0] += found["sum64"]
                chunk[0] += found["sum32"]
            found = {
                "min": low,
                "max": high,
                "sum64": block64.sum(axis=0),
                "sum32": chunk.sum(axis=0),
            }
    X.memo["moments"] = found
    return found


def column_min_max(X) -> tuple[np.ndarray, np.ndarray]:
    """``(X.min(axis=0), X.max(axis=0))`` of an array, or of chunked input as float32.

    Examples
    --------
    >>> low, high = column_min_max(np.array([[0.0, 3.0], [2.0, 1.0]]))
    >>> low.tolist(), high.tolist()
    ([0.0, 1.0], [2.0, 3.0])
    """
    if isinstance(X, np.ndarray):
        return X.min(axis=0), X.max(axis=0)
    found = _moments(X)
    return found["min"], found["max"]


def column_sum(X, dtype=np.float64) -> np.ndarray:
    """``X.sum(axis=0, dtype=np.float64)``, bitwise, also of chunked input as float32.

    Examples
    --------
    >>> column_sum(np.array([[0.5, 1.0], [2.0, 1.0]])).tolist()
    [2.5, 2.0]
    """
    if np.dtype(dtype) != np.float64:
        raise ValueError(f"column_sum adds in float64 only; got dtype={dtype!r}.")
    if isinstance(X, np.ndarray):
        return X.sum(axis=0, dtype=np.float64)
    return _moments(X)["sum64"].copy()


def column_mean(X) -> np.ndarray:
    """``X.mean(axis=0)``, bitwise, also of chunked input as float32 (float32 then).

    Examples
    --------
    >>> column_mean(np.array([[0.0, 1.0], [2.0, 1.0]])).tolist()
    [1.0, 1.0]
    """
    if isinstance(X, np.ndarray):
        return X.mean(axis=0)
    mean = _moments(X)["sum32"].copy()
    # numpy's mean: the sum divided in place by the count, an intp (numpy._core._methods)
    return np.true_divide(mean, np.intp(len(X)), out=mean, casting="unsafe")


def sum_of_squares(X, mean: np.ndarray) -> np.ndarray:
    """``((X - mean) ** 2).sum(axis=0)`` in ``mean``'s dtype, one block of rows at a time.

    Bitwise numpy's sum (it adds the rows in order) without a copy of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, ...), or chunked input (see the module's notes)
    mean : ndarray of shape X.shape[1:]
        Its dtype is that of the sums (float64 for exact sums of float32 data).

    Returns
    -------
    ndarray of shape X.shape[1:], of mean's dtype

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 1.0], [2.0, 1.0]])
    >>> sum_of_squares(X, X.mean(axis=0)).tolist()
    [2.0, 0.0]
    """
    if not isinstance(X, np.ndarray) and prod(X.sample_shape) == 1:
        X = _whole(X)
    squares = np.zeros_like(mean)
    rows = max(1, min(len(X), BLOCK_SIZE // max(1, mean.size)))
    buffer = np.empty((rows, *mean.shape), dtype=mean.dtype)
    for chunk in _blocks(X, rows):
        block = np.subtract(chunk, mean, out=buffer[: len(chunk)])
        block *= block
        block[0] += squares  # the running sum goes first: row by row, as numpy adds them
        squares = block.sum(axis=0)
    return squares


def column_mean_std(X) -> tuple[np.ndarray, np.ndarray]:
    """``(X.mean(axis=0), X.std(axis=0))``, bitwise, without ``std``'s copy of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, ...), or chunked input (see the module's notes)

    Returns
    -------
    mean, std : ndarray of shape X.shape[1:], of X's float dtype

    Examples
    --------
    >>> import numpy as np
    >>> mean, std = column_mean_std(np.array([[0.0, 1.0], [2.0, 1.0]]))
    >>> mean.tolist(), std.tolist()
    ([1.0, 1.0], [1.0, 0.0])
    """
    mean = column_mean(X)
    return mean, np.sqrt(sum_of_squares(X, mean) / len(X))
