"""Stored replay: a uniform sample of each class's stream, and the weights of replayed rows.

:func:`reservoir_update` is Vitter's reservoir sampling ("Algorithm R" [1]_) on one stream;
:func:`class_reservoirs` runs it per class over a chunk of training data; :func:`replay_weights`
gives each replayed class, in all, the weight of an average class of the chunk.

References
----------
.. [1] Vitter, J. S. "Random sampling with a reservoir". ACM Transactions on Mathematical
   Software 11(1), 1985.
"""

from __future__ import annotations

import numpy as np

__all__ = ["class_reservoirs", "replay_weights", "reservoir_update"]


def reservoir_update(
    stored: np.ndarray, n_seen: int, incoming: np.ndarray, capacity: int, rng: np.random.Generator
) -> np.ndarray:
    """Vitter's Algorithm R: a uniform sample of ``capacity`` items of one stream.

    The ``t``-th item of the stream (from 0) is kept while ``t < capacity``; after that it
    replaces slot ``j`` when ``j``, drawn uniformly from ``0..t``, is below ``capacity``. So
    after any number of items each of them is in the reservoir with the same probability.

    Parameters
    ----------
    stored : ndarray of shape (min(n_seen, capacity), ...)
        The reservoir so far, in slot order.
    n_seen : int
        The number of items of the stream seen before ``incoming``.
    incoming : ndarray of shape (m, ...)
        The next items of the stream, in order.
    capacity : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (min(n_seen + m, capacity), ...)
        A new array; ``stored`` is not changed.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> kept = reservoir_update(np.empty(0), 0, np.arange(3.0), capacity=5, rng=rng)
    >>> kept.tolist()  # fewer items than places: all of them
    [0.0, 1.0, 2.0]
    >>> len(reservoir_update(kept, 3, np.arange(3.0, 100.0), capacity=5, rng=rng))
    5
    """
    n_free = max(0, min(capacity - n_seen, len(incoming)))
    slots = np.concatenate([stored, incoming[:n_free]]) if n_free else stored.copy()
    rest = incoming[n_free:]
    if len(rest):
        t = n_seen + n_free + np.arange(len(rest))
        j = rng.integers(0, t + 1)
        for i in np.flatnonzero(j < capacity):  # in stream order: a later item overwrites
            slots[j[i]] = rest[i]
    return slots


def class_reservoirs(
    stored_X: np.ndarray,
    stored_y: np.ndarray,
    seen: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    capacity: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each class's reservoir after the chunk ``(X, y)``: :func:`reservoir_update` per class.

    Parameters
    ----------
    stored_X : ndarray of shape (m, ...)
        The reservoirs so far, every class's rows together.
    stored_y : ndarray of int of shape (m,)
        The class of each stored row, in ``0..len(seen)-1``.
    seen : ndarray of int of shape (n_classes,)
        How many samples of each class the stream has had so far.
    X : ndarray of shape (n, ...)
        The chunk's samples that enter the reservoirs, in stream order.
    y : ndarray of int of shape (n,)
    capacity : int
        The reservoir's size per class.
    rng : numpy.random.Generator
        Draws the classes in order, ``0`` first.

    Returns
    -------
    kept_X : ndarray of shape (m', ...)
    kept_y : ndarray of int64 of shape (m',)
        The new reservoirs, class by class.
    seen : ndarray of int of shape (n_classes,)
        The counts after the chunk (a new array).

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(6.0), np.array([0, 1, 0, 1, 0, 0])
    >>> kept_X, kept_y, seen = class_reservoirs(
    ...     np.empty(0), np.empty(0, int), np.zeros(2, int), X, y, 3, np.random.default_rng(0)
    ... )
    >>> kept_y.tolist(), seen.tolist()
    ([0, 0, 0, 1, 1], [4, 2])
    """
    seen = seen.copy()
    kept_X, kept_y = [], []
    for c in range(len(seen)):
        incoming = X[y == c]
        kept = reservoir_update(stored_X[stored_y == c], int(seen[c]), incoming, capacity, rng)
        seen[c] += len(incoming)
        kept_X.append(kept)
        kept_y.append(np.full(len(kept), c, dtype=np.int64))
    return np.concatenate(kept_X), np.concatenate(kept_y), seen


def replay_weights(
    replay_y: np.ndarray, n_classes: int, per_class: float, class_weights: np.ndarray | None
) -> np.ndarray:
    """Weights of replayed rows: each replayed class weighs ``per_class`` in all.

    ``w_i = c_i * per_class / n_{y_i}``, with ``n_y`` the class's replayed rows and ``c_i`` the
    row's ``class_weight`` (1 without): so that a class replayed by 20 rows counts as much as
    an average class of a chunk of hundreds (the equal mix measured in docs/continual.md).

    Parameters
    ----------
    replay_y : ndarray of int of shape (m,)
        The class of each replayed row, in ``0..n_classes-1``.
    n_classes : int
    per_class : float
        What a class weighs in all: the chunk's counted samples per class present.
    class_weights : ndarray of shape (m,) or None
        Each row's ``class_weight``, or None for 1.

    Returns
    -------
    ndarray of float of shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>> replay_weights(np.array([0, 0, 1]), 2, per_class=10.0, class_weights=None).tolist()
    [5.0, 5.0, 10.0]
    """
    counts = np.bincount(replay_y, minlength=n_classes)
    weights = np.ones(len(replay_y)) if class_weights is None else class_weights
    return weights * per_class / counts[replay_y]
