"""Column statistics of training data, bitwise numpy's, without a copy of the data.

``X.std(axis=0)`` and ``X.var(axis=0, dtype=np.float64)`` copy ``X`` (a float64 copy of a
float32 image set is twice its size); these add the rows in the order numpy adds them, one
block of rows at a time, so the result is bitwise numpy's and the extra memory one block.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK_SIZE", "column_mean_std", "sum_of_squares"]

#: Elements of a block of rows (in ``mean``'s dtype; 8 MB in float64).
BLOCK_SIZE = 2**20


def sum_of_squares(X: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``((X - mean) ** 2).sum(axis=0)`` in ``mean``'s dtype, one block of rows at a time.

    Bitwise numpy's sum (it adds the rows in order) without a copy of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, ...)
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
    squares = np.zeros_like(mean)
    rows = max(1, min(len(X), BLOCK_SIZE // max(1, mean.size)))
    buffer = np.empty((rows, *mean.shape), dtype=mean.dtype)
    for start in range(0, len(X), rows):
        chunk = X[start : start + rows]
        block = np.subtract(chunk, mean, out=buffer[: len(chunk)])
        block *= block
        block[0] += squares  # the running sum goes first: row by row, as numpy adds them
        squares = block.sum(axis=0)
    return squares


def column_mean_std(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X.mean(axis=0), X.std(axis=0))``, bitwise, without ``std``'s copy of ``X``.

    Parameters
    ----------
    X : ndarray of shape (n, ...)

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
    mean = X.mean(axis=0)
    return mean, np.sqrt(sum_of_squares(X, mean) / len(X))
